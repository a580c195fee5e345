/*
 * ts_mesh_cross.h: whether a surface mesh passes through itself: pairs of
 * its triangles that meet although they share no vertex. An offline result
 * that smooths (Loop's rules in `tissuetool mesh subdivide --loop`) can make
 * a surface that was clean cross itself: the two sheets of an extruded thin
 * part, or a coarse convex hull around a finer inner sheet, shrink by
 * different amounts (one Loop level moves an octahedron's vertices from
 * radius 1 to 0.625). This is the same check the extrusion runs on its
 * sheets (ts_extrude_cross.c), on one surface: the AABB self descent of
 * ts_collide_tissue_self, stopped past a cap so that a surface of many
 * overlapping parts is not counted pair by pair.
 */
#ifndef TS_MESH_CROSS_H
#define TS_MESH_CROSS_H

#include <stdint.h>

#include "ts_mesh.h"

/* The extrusion's cap (TS__CROSS_CAP): past it the count means "more". */
#define TS_MESH_CROSS_CAP 20000

typedef struct ts_mesh_cross {
  uint32_t n;        /* crossing pairs, counted up to cap + 1 ("more than cap") */
  uint32_t cap;
  uint32_t tri[2];   /* the first pair found (tri[0] < tri[1]); valid when n > 0 */
  double point[3];   /* a point where they meet, m */
} ts_mesh_cross;

/* Counts the pairs of m's triangles that meet (closed triangles, as
 * ts_contact_face_triangle) and share no vertex, stopping past cap (0: the
 * default TS_MESH_CROSS_CAP). Degenerate triangles meet nothing. Returns 0,
 * TS_EINVAL (NULL arguments), TS_ENOMEM or TS_EINTERNAL. */
int ts_mesh_self_crossings(const ts_mesh *m, uint32_t cap, ts_mesh_cross *out);

#endif
