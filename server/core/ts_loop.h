/*
 * ts_loop.h: Loop subdivision of a triangle mesh, whole or on a selected set
 * of triangles, and of a multi-layer extrusion's surface through all its
 * sheets (C. T. Loop, "Smooth subdivision surfaces based on triangles",
 * M.S. thesis, University of Utah, 1987).
 *
 * Rules (the issue's, which are Loop's):
 *   new vertex on an interior edge   3/8 (a + b) + 1/8 (c + d), c, d opposite;
 *   new vertex on a boundary edge    (a + b) / 2;
 *   old interior vertex              (1 - n beta) p + beta * sum of its n neighbours,
 *                                    beta = (1/n) (5/8 - (3/8 + 1/4 cos(2 pi / n))^2);
 *   old boundary vertex              3/4 p + 1/8 (its two boundary neighbours).
 * Every selected triangle is split into four. A region is refined
 * conformingly: an unselected triangle with one split edge is cut in two,
 * with two split edges in three (the quad cut along its shorter diagonal),
 * with all three split edges into four like a selected one, so no vertex ever
 * lies inside another triangle's edge. An old vertex moves by the vertex rule
 * only when every triangle around it is split into four (so a whole-mesh
 * selection is plain Loop subdivision); vertices on the region's rim stay.
 *
 * The result is a plan: the new topology plus, for every new vertex, a
 * stencil (weights over old vertices), so the same subdivision applies to any
 * per-vertex array: every sheet of an extrusion, positions, velocities.
 */
#ifndef TS_LOOP_H
#define TS_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "ts_extrude.h"
#include "ts_mesh.h"

enum {
  TS_LOOP_SMOOTH = 0, /* Loop's rules above */
  TS_LOOP_LINEAR = 1  /* same topology; new vertices at edge midpoints, old ones kept
                         (for carrying state over without moving existing nodes) */
};

/* Largest subdivided mesh accepted: 64 Mi vertices or triangles. */
#define TS_LOOP_MAX (1u << 26)

typedef struct ts_loop_plan {
  uint32_t n_old_verts;  /* old vertices keep their indices 0..n_old_verts-1 */
  uint32_t n_verts;      /* then one new vertex per split edge */
  uint32_t n_tris;
  uint32_t (*tris)[3];   /* new triangles, winding of their parents */
  uint32_t *tri_parent;  /* the old triangle each new one lies in */
  uint32_t (*edge_ends)[2]; /* new vertex n_old_verts + i splits old edge edge_ends[i] */
  uint32_t n_red;        /* old triangles split into four (selected, or all edges split) */
  uint32_t n_green;      /* old triangles split into two or three to stay conforming */
  /* stencils: new vertex i = sum over k in [st_off[i], st_off[i+1]) of
   * st_w[k] * old[st_idx[k]] */
  uint32_t *st_off;
  uint32_t *st_idx;
  double *st_w;
} ts_loop_plan;

/* Plans one subdivision step of m. sel lists the triangles to split into four
 * (n_sel of them, duplicates allowed); sel == NULL means every triangle.
 * mode is TS_LOOP_SMOOTH or TS_LOOP_LINEAR. The mesh must be an edge-manifold
 * (no edge on more than two triangles, no vertex with more than two boundary
 * edges). Returns 0, TS_EINVAL (bad argument, a selected index out of range),
 * TS_EMESH (not manifold; err says where), TS_ETOOBIG or TS_ENOMEM. */
int ts_loop_plan_build(const ts_mesh *m, const uint32_t *sel, uint32_t n_sel, int mode,
                       ts_loop_plan **out, char *err, size_t errcap);
/* Frees p and its arrays; NULL is ignored. */
void ts_loop_plan_free(ts_loop_plan *p);

/* dst[i] = stencil i applied to src, for the plan's n_verts vertices. src has
 * n_old_verts entries; dst must not overlap it. */
void ts_loop_apply(const ts_loop_plan *p, const double (*src)[3], double (*dst)[3]);

/* One step on m into a new mesh (plan built, applied and freed). Returns as
 * ts_loop_plan_build. */
int ts_loop_subdivide(const ts_mesh *m, const uint32_t *sel, uint32_t n_sel, int mode, ts_mesh **out,
                      char *err, size_t errcap);

/* levels whole-mesh steps of Loop's rules (levels 0 gives a copy). */
int ts_loop_subdivide_n(const ts_mesh *m, uint32_t levels, ts_mesh **out, char *err, size_t errcap);

/* Subdivides the region sel (surface triangle indices; NULL = all) of an
 * extrusion's surface and rebuilds every sheet with the same plan, so each
 * layer is refined exactly where the surface is and the prisms stay prisms;
 * the render surface, boundary flags and inverted-prism count are rebuilt
 * as ts_extrude does. The plan is handed back in *plan_out when that is not
 * NULL (to carry velocities or other per-node state over, sheet by sheet).
 * Returns 0, or as ts_loop_plan_build; TS_EMESH also when the refined sheets
 * have inverted prisms (the extrusion is still returned, err names one). */
int ts_loop_extrusion(const ts_extrusion *e, const uint32_t *sel, uint32_t n_sel, int mode,
                      ts_extrusion **out, ts_loop_plan **plan_out, char *err, size_t errcap);

#endif
