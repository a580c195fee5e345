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

/* The most crossing triangle pairs one query of the crossing check counts
 * (ts_extrude_cross.c) before it stops: past it the extrusion is refused.
 * A single organ's layers cross at a few hundred pairs at most (the shared
 * meshes at full depth: liver.obj 6, liver-smooth 282, spot 52); many
 * overlapping closed parts cross at pairs growing with the square of the
 * overlap, which the descent would otherwise count one by one. */
#define TS__CROSS_CAP 20000

/* Counts the pairs of e's sheet triangles that intersect with no column in
 * common (ts_extrude_cross.c) into e->n_crossings (stopping past
 * TS__CROSS_CAP: then cap + 1) and the first into e->cross_*, naming it in
 * err when there are any (err untouched otherwise; past the cap, naming the
 * count and the cap too). Returns 0, TS_EINVAL, TS_ETOOBIG or TS_ENOMEM. */
int ts__extrusion_count_crossings(ts_extrusion *e, char *err, size_t errcap);

/* The crossing check kept across the thinning's rounds: the tree over e's
 * sheet triangles (and side walls, when e is assembled), built once. */
typedef struct ts__cross_check ts__cross_check;

/* Builds it for e's positions now. Returns 0, TS_EINVAL, TS_ETOOBIG, TS_ENAN
 * or TS_ENOMEM. */
int ts__cross_check_new(const ts_extrusion *e, ts__cross_check **out);

/* e's nodes listed in moved (n_moved of them, indices into e->x) moved, and
 * no other: refits the tree for them instead of rebuilding it. Returns 0,
 * TS_EINVAL or TS_ENAN. No allocation. */
int ts__cross_check_moved(ts__cross_check *c, const ts_extrusion *e, const uint32_t *moved,
                          uint32_t n_moved);

/* Sets mark[j] (nv flags, not cleared) for the surface vertices of both
 * triangles of every crossing pair, *n_pairs their count: the columns the
 * thinning shortens. Past TS__CROSS_CAP pairs it stops and returns TS_EMESH
 * with e->n_crossings (cap + 1) and e->cross_* set and err naming the count
 * and the cap. Returns 0, TS_EMESH, TS_EINVAL or TS_EINTERNAL. */
int ts__cross_check_mark(const ts__cross_check *c, ts_extrusion *e, uint8_t *mark, uint32_t *n_pairs,
                         char *err, size_t errcap);

/* Every crossing pair (tree triangle indices a < b, sheet s's triangle over
 * surface triangle f being s * nt + f) in the descent's order, up to cap of
 * them into pairs; *n their count (stopping past TS__CROSS_CAP). For tests.
 * Returns 0, TS_EINVAL or TS_EINTERNAL. */
int ts__cross_check_pairs(const ts__cross_check *c, const ts_extrusion *e, uint32_t (*pairs)[2],
                          uint32_t cap, uint32_t *n);

void ts__cross_check_free(ts__cross_check *c);

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
