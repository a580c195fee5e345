/*
 * ts_meshtopo.h: the connectivity of a triangle mesh (ts_mesh.h), built once
 * and read by extrusion, Loop subdivision, longest-edge bisection and the BFS
 * region search: unique edges, triangle -> edges, edge -> triangles,
 * vertex -> triangles and vertex -> edges (compressed row tables), boundary
 * edges and loops, and a check of what those algorithms rely on: manifold
 * edges and vertices, consistent winding, no degenerate triangle, plus the
 * Euler characteristic V - E + F, components and genus
 * (chi = 2C - 2g - B for an orientable surface with C components and B
 * boundary loops).
 */
#ifndef TS_MESHTOPO_H
#define TS_MESHTOPO_H

#include <stddef.h>
#include <stdint.h>

#include "ts_mesh.h"

#define TS_MESHTOPO_NONE UINT32_MAX

typedef struct ts_meshtopo {
  uint32_t n_verts;           /* as in the mesh (used or not) */
  uint32_t n_tris;
  uint32_t n_edges;
  uint32_t (*edges)[2];       /* unique edges, a < b, sorted by (a, b) */
  uint32_t (*tri_edges)[3];   /* edge i of triangle t joins t[i] and t[(i+1)%3] */
  uint32_t *edge_tri_off;     /* n_edges + 1 offsets into edge_tris */
  uint32_t *edge_tris;        /* triangles on each edge, increasing index */
  uint32_t *vert_tri_off;     /* n_verts + 1 offsets into vert_tris */
  uint32_t *vert_tris;        /* triangles on each vertex, increasing index */
  uint32_t *vert_edge_off;    /* n_verts + 1 offsets into vert_edges */
  uint32_t *vert_edges;       /* edges on each vertex, increasing index */
} ts_meshtopo;

/* Builds the connectivity of m. Returns 0, TS_EINVAL (NULL argument),
 * TS_EMESH (a vertex index out of range) or TS_ENOMEM. */
int ts_meshtopo_build(const ts_mesh *m, ts_meshtopo **out);
/* Frees t and its tables; NULL is ignored. */
void ts_meshtopo_free(ts_meshtopo *t);

/* Number of triangles on edge e (1 = boundary edge, 2 = interior, > 2 =
 * non-manifold). */
static inline uint32_t ts_meshtopo_edge_valence(const ts_meshtopo *t, uint32_t e) {
  return t->edge_tri_off[e + 1] - t->edge_tri_off[e];
}

/* The edge joining vertices a and b, or TS_MESHTOPO_NONE. O(log E). */
uint32_t ts_meshtopo_find_edge(const ts_meshtopo *t, uint32_t a, uint32_t b);

/* The vertex of triangle tri opposite edge e, or TS_MESHTOPO_NONE if e is not one of
 * its edges. */
uint32_t ts_meshtopo_opposite(const ts_mesh *m, const ts_meshtopo *t, uint32_t tri, uint32_t e);

/* What ts_meshtopo_check found. */
typedef struct ts_meshtopo_report {
  uint32_t n_verts_used;        /* vertices referenced by a triangle */
  uint32_t n_edges;
  uint32_t n_tris;
  uint32_t n_boundary_edges;    /* on exactly one triangle */
  uint32_t n_boundary_loops;    /* connected chains of boundary edges */
  uint32_t n_nonmanifold_edges; /* on three or more triangles */
  uint32_t n_nonmanifold_verts; /* triangles around the vertex form more than one fan */
  uint32_t n_misoriented_edges; /* two triangles run through the edge the same way */
  uint32_t n_degenerate_tris;   /* a repeated vertex, or height below 1e-12 of the longest edge */
  uint32_t n_components;        /* edge-connected pieces (over used vertices) */
  int64_t euler;                /* V - E + F with V = used vertices */
  int32_t genus;                /* (2C - B - chi) / 2 when manifold and oriented, else -1 */
} ts_meshtopo_report;

/* Checks m (with t = its connectivity) and fills r. Returns 0 when the mesh
 * is a manifold (with or without boundary), consistently wound and free of
 * degenerate triangles; otherwise TS_EMESH with the first problem found
 * described in err (which may be NULL). */
int ts_meshtopo_check(const ts_mesh *m, const ts_meshtopo *t, ts_meshtopo_report *r, char *err,
                      size_t errcap);

/* Boundary loops as ordered vertex cycles, each following the winding of the
 * triangles on its edges (interior on the left seen from outside). *verts
 * receives all loops back to back, *offsets n_loops + 1 offsets into it; free
 * both with free(). Returns 0, TS_EMESH (a vertex with more than two boundary
 * edges, or inconsistent winding along the boundary) or TS_ENOMEM. */
int ts_meshtopo_boundary_loops(const ts_mesh *m, const ts_meshtopo *t, uint32_t **verts,
                               uint32_t **offsets, uint32_t *n_loops);

#endif
