/*
 * ts_mesh_check.h: validation and safe repair of triangle surface meshes
 * (ts_mesh.h), whatever their source (a reader in ts_mesh_io.h, a generator,
 * refinement).
 *
 * Validation works on the edge table (every triangle's three edges sorted by
 * their vertex pair): an edge used once is a boundary edge, twice an interior
 * edge whose two uses must run in opposite directions (consistent winding,
 * i.e. an orientable surface with coherent normals), more than twice a
 * non-manifold edge. A vertex is non-manifold when its triangles form more
 * than one fan (corners joined across interior edges, union-find). From the
 * counts: Euler characteristic chi = V - E + F (V = vertices used), boundary
 * loops b, connected components c, and for an orientable manifold the genus
 * g = (2c - b - chi) / 2 (the classification of surfaces; a closed sphere has
 * chi = 2, g = 0; a torus chi = 0, g = 1). The enclosed volume of a closed
 * mesh follows from the divergence theorem, sum over triangles of
 * a . (b x c) / 6; it is positive when the triangles are counter-clockwise
 * seen from outside (the ts_mesh convention).
 *
 * Repair only does what cannot change the intended shape: weld vertices
 * closer than a tolerance, drop degenerate triangles (a repeated vertex or
 * zero area), drop duplicate triangles (same three vertices, either
 * orientation; the first is kept), drop vertices no triangle uses. Anything
 * else is refused with a message naming the problem and where.
 */
#ifndef TS_MESH_CHECK_H
#define TS_MESH_CHECK_H

#include <stdint.h>

#include "ts_mesh.h"
#include "ts_mesh_io.h"

typedef struct ts_mesh_report {
  uint32_t n_verts, n_tris;       /* as given */
  uint32_t n_used_verts;          /* vertices some triangle uses */
  uint32_t n_edges;               /* distinct vertex pairs */
  uint32_t n_boundary_edges;      /* used by one triangle */
  uint32_t n_boundary_loops;      /* connected chains of boundary edges */
  uint32_t n_components;          /* connected pieces (over used vertices) */
  uint32_t n_bad_index;           /* triangles referring past n_verts */
  uint32_t n_nonfinite;           /* vertices with a NaN or infinite coordinate */
  uint32_t n_huge;                /* vertices beyond opts.max_abs_coord */
  uint32_t n_degenerate;          /* triangles: repeated vertex or zero area */
  uint32_t n_duplicate;           /* triangles repeating an earlier one's vertices */
  uint32_t n_unused;              /* vertices no triangle uses */
  uint32_t n_nonmanifold_edges;   /* edges used by more than two triangles */
  uint32_t n_nonmanifold_verts;   /* vertices whose triangles form several fans */
  uint32_t n_inconsistent_edges;  /* interior edges used twice in the same direction */
  int64_t euler;                  /* V_used - E + F */
  int manifold;                   /* no non-manifold edge or vertex */
  int oriented;                   /* manifold and no inconsistent edge */
  int closed;                     /* manifold and no boundary edge */
  int genus;                      /* for an oriented manifold; -1 otherwise */
  int volume_valid;               /* closed, oriented, finite coordinates */
  double volume;                  /* m^3, signed (see above); 0 unless volume_valid */
  double bbox_min[3], bbox_max[3]; /* m, over used finite vertices */
} ts_mesh_report;

/* Validates m and fills rep (may be NULL) with every count above. Returns 0
 * when the mesh is usable as is: not empty, within opts' limits, indices in
 * range, coordinates finite and within opts.max_abs_coord, no degenerate or
 * duplicate triangle, no unused vertex, manifold, consistently wound (open
 * boundaries are allowed). Otherwise the first problem (in that order) is
 * described in err, e.g. "triangles 17 and 240 share edge (3,9) with the same
 * orientation", and the result is TS_EMESH (TS_ETOOBIG for the limits).
 * opts NULL means defaults. Also TS_EINVAL, TS_ENOMEM. */
int ts_mesh_check(const ts_mesh *m, const ts_mesh_import_opts *opts, ts_mesh_report *rep,
                  char *err, size_t errcap);

typedef struct ts_mesh_repair_stats {
  uint32_t welded;      /* vertices merged into another */
  uint32_t degenerate;  /* triangles dropped */
  uint32_t duplicate;   /* triangles dropped */
  uint32_t unused;      /* vertices dropped */
} ts_mesh_repair_stats;

/* Repairs m in place: weld (when opts.weld_tol >= 0), drop degenerate
 * triangles (opts.degenerate_rel), duplicate triangles and unused vertices,
 * in that order. Vertex and triangle order is otherwise kept. Refuses (and
 * leaves m unchanged) a mesh with an index out of range or a non-finite
 * coordinate: TS_EMESH. stats may be NULL. Returns 0, TS_EMESH, TS_EINVAL,
 * TS_ENOMEM. */
int ts_mesh_repair(ts_mesh *m, const ts_mesh_import_opts *opts, ts_mesh_repair_stats *stats,
                   char *err, size_t errcap);

/* Welds vertices closer than tol metres (tol 0: equal coordinates): each
 * vertex merges into the lowest-numbered earlier vertex within tol (grid
 * hashing with cells of size tol), triangles are renumbered and the merged
 * vertices removed. *merged (may be NULL) gets the number removed.
 * Coordinates must be finite. Returns 0, TS_EINVAL (negative tol, bad index,
 * non-finite coordinate, or tol too small for the coordinate range: more than
 * 2^50 cells across), TS_ENOMEM. */
int ts_mesh_weld(ts_mesh *m, double tol, uint32_t *merged);

/* Reverses every triangle's winding (b and c swapped). */
void ts_mesh_flip(ts_mesh *m);

#endif
