/*
 * ts_region.h: the region of a surface around a contact, found by
 * breadth-first search (the second and third methods' local refinement
 * starts from it: the region is copied, refined and solved). From a contact
 * point inside a triangle or on an edge, triangles are visited breadth-first
 * across shared edges, each once (visited flags), and kept while they meet
 * the range condition: the Euclidean distance from the contact point to the
 * triangle (its closest point) is at most the range. The region is thus the
 * edge-connected set of in-range triangles that contains the contact, which a
 * brute-force filter over all triangles followed by a connected-component
 * search reproduces. The vertices of the region's triangles are listed in the
 * order the search first reaches them, each flagged when it is itself within
 * range.
 *
 * The workspace is allocated once for a mesh size and reused, so repeated
 * searches (one per contact, per step) do not allocate.
 *
 * Also here: the ray pick that turns a client's click or a tool's axis into a
 * contact triangle and point.
 */
#ifndef TS_REGION_H
#define TS_REGION_H

#include <stdint.h>

#include "ts_mesh.h"
#include "ts_meshtopo.h"

typedef struct ts_region {
  uint32_t n_tris;     /* triangles found, BFS order */
  uint32_t *tris;
  uint32_t n_verts;    /* their vertices, in first-reached order */
  uint32_t *verts;
  uint8_t *vert_in_range; /* per listed vertex: its distance to the contact <= range */
  /* workspace, sized for the mesh given to ts_region_alloc */
  uint32_t cap_verts, cap_tris;
  uint32_t stamp;      /* current search's visit mark */
  uint32_t *tri_mark;  /* == stamp: visited in this search */
  uint32_t *vert_mark;
} ts_region;

/* A region workspace for meshes of up to n_verts vertices and n_tris
 * triangles. Returns 0, TS_EINVAL (zero size) or TS_ENOMEM. */
int ts_region_alloc(uint32_t n_verts, uint32_t n_tris, ts_region **out);
/* Frees r, its result and its workspace; NULL is ignored. */
void ts_region_free(ts_region *r);

/* Region around a contact point inside triangle tri (the seed triangle is
 * always part of the region). range in metres, >= 0. Returns 0, TS_EINVAL
 * (NULL, tri out of range, workspace too small, topo not m's), TS_ENAN (point or
 * range not finite). */
int ts_region_from_triangle(ts_region *r, const ts_mesh *m, const ts_meshtopo *topo, uint32_t tri,
                            const double point[3], double range);

/* Region around a contact point on the edge (a, b): every triangle on the
 * edge seeds the search. Returns as ts_region_from_triangle, and TS_EINVAL
 * when (a, b) is not an edge. */
int ts_region_from_edge(ts_region *r, const ts_mesh *m, const ts_meshtopo *topo, uint32_t a, uint32_t b,
                        const double point[3], double range);

/* Closest point on triangle (a, b, c) to p (C. Ericson, Real-Time Collision
 * Detection, 2005, section 5.1.5); returns the distance, writes the point
 * into q when q is not NULL. */
double ts_point_triangle_distance(const double p[3], const double a[3], const double b[3],
                                  const double c[3], double q[3]);

/* Nearest triangle hit by the ray origin + t dir, t >= 0 (T. Moeller and
 * B. Trumbore, "Fast, minimum storage ray-triangle intersection", Journal of
 * Graphics Tools 2(1):21-28, 1997; both faces count). On a hit writes the
 * triangle, the point and t and returns 0; returns TS_ERANGE when nothing is
 * hit, TS_EINVAL for a zero direction, TS_ENAN for non-finite input. */
int ts_region_raypick(const ts_mesh *m, const double origin[3], const double dir[3], uint32_t *tri,
                      double point[3], double *t);

#endif
