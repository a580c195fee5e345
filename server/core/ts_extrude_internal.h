/*
 * ts_extrude_internal.h: the two halves of building a ts_extrusion
 * (ts_extrude.h), shared inside the core by the extrusion itself and by the
 * refinements that rebuild an extrusion's sheets after changing its surface
 * topology (Loop subdivision in ts_loop.c, longest-edge bisection in
 * ts_leb.c). Not a public API.
 */
#ifndef TS_EXTRUDE_INTERNAL_H
#define TS_EXTRUDE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ts_extrude.h"
#include "ts_meshtopo.h"

/* Allocates an extrusion of n_layers layers over a surface of nv vertices and
 * nt triangles: x (n_sheets * nv nodes), surface_tris and boundary, all
 * zeroed; the render surface is left empty. Returns 0, TS_EINVAL (a count out
 * of range) or TS_ENOMEM. */
int ts__extrusion_new(uint32_t n_layers, uint32_t nv, uint32_t nt, ts_extrusion **out);

/* Given e's sheets (x) and surface triangles, (re)builds its boundary flags,
 * its render surface grouped by layer and its count of inverted prisms.
 * Returns 0; TS_EMESH when the surface is not a consistently wound manifold
 * (nothing built) or when prisms are inverted (everything built, the first
 * inverted prism named in err); TS_ENOMEM. */
int ts__extrusion_assemble(ts_extrusion *e, char *err, size_t errcap);

/* Counts the pairs of e's sheet triangles that intersect with no column in
 * common (ts_extrude_cross.c) into e->n_crossings and the first into
 * e->cross_*, naming it in err when there are any (err untouched
 * otherwise). Returns 0, TS_EINVAL, TS_ETOOBIG or TS_ENOMEM. */
int ts__extrusion_count_crossings(ts_extrusion *e, char *err, size_t errcap);

/* Sets mark[j] (nv flags, not cleared) for the surface vertices of both
 * triangles of every crossing pair (as ts__extrusion_count_crossings finds
 * them), *n_pairs their count: the columns the thinning shortens. Returns
 * 0, TS_EINVAL, TS_ETOOBIG or TS_ENOMEM. */
int ts__extrusion_mark_crossings(const ts_extrusion *e, uint8_t *mark, uint32_t *n_pairs);

/* How much the prism P -> Q narrows with depth (ts_extrude_prism.c): the
 * smallest ratio, over its three corners and the depth z in [0, 1], of the
 * wedge's Jacobian at z to its value at the outer face (1 for a right
 * prism, 1/4 where a triangle shrinks to half its size, <= 0 when it folds);
 * -INFINITY when a corner is already folded at the outer face (a lateral
 * edge leaving it on its outer side) or a value is not finite. */
double ts__prism_shrink(const double P[3][3], const double Q[3][3]);

/* Counts e's prisms that ts_prism_check refuses (also stored in
 * e->n_inverted), naming the first in err; when mark is not NULL, sets
 * mark[j] for every surface vertex j of a refused prism (nv flags, cleared
 * first). Returns the count. */
uint32_t ts__extrusion_count_inverted(ts_extrusion *e, uint8_t *mark, char *err, size_t errcap);

/* The inward unit offset direction of every vertex of m (topo is m's),
 * written to nrm (m->n_verts entries), and in *n_tilted how many took the
 * "most normal" direction (ts_extrude_dir.c). Returns 0; TS_EMESH (a
 * vertex of no triangle, or one no direction sees inwards from all its
 * triangles; err names it); TS_ENOMEM. */
/* The offset direction of vertex j alone (as ts__extrude_directions), with
 * in *min_cos its smallest cosine to the vertex's triangles' inward normals
 * and *tilted 1 when it is the most normal direction. Returns 0, TS_EMESH
 * (no direction sees all its triangles inwards) or TS_EINVAL (j on no
 * non-degenerate triangle). */
int ts__vertex_direction(const ts_mesh *m, const ts_meshtopo *topo, uint32_t j, double dir[3],
                         double *min_cos, int *tilted);

/* Moves the vertices of m's pleats (ts_extrude_relax.c), each by at most
 * max_relax (m; nothing moves when it is 0); *n_moved and *max_moved (m)
 * say how many and how far. Returns 0 or TS_ENOMEM. */
int ts__extrude_relax(ts_mesh *m, const ts_meshtopo *topo, double max_relax, uint32_t *n_moved,
                      double *max_moved);

int ts__extrude_directions(const ts_mesh *m, const ts_meshtopo *topo, double (*nrm)[3],
                           uint32_t *n_tilted, char *err, size_t errcap);

#endif
