/*
 * ts_tritri.h: the exact narrow phase of collision detection: where a
 * collision tree query (ts_collide.h) reaches two leaves, these decide
 * whether the features touch and give the contact.
 *
 *   - closest points between points, segments and triangles (Ericson,
 *     "Real-Time Collision Detection", 2005, sections 5.1.2, 5.1.5, 5.1.9);
 *   - triangle-triangle intersection with the intersection segment: the
 *     interval method of Moller 1997 ("A fast triangle-triangle intersection
 *     test", J. Graphics Tools 2(2)): each triangle cuts the other's plane in
 *     a segment on the planes' common line, and the triangles meet where the
 *     two segments overlap; coplanar triangles by clipping one against the
 *     other's edge planes;
 *   - the closest features of two triangles (a vertex-face or an edge-edge
 *     pair when they are disjoint);
 *   - contacts of a tool feature with a triangle: a tool face (triangle of a
 *     closed tool mesh), a sphere, a capsule, a box (grasper jaw).
 *
 * Conventions: points in metres; triangles as three points, counter-clockwise
 * seen from outside (their outward normal is (b-a) x (c-a)); features are
 * closed, so touching counts. A contact (ts_hit) describes how the triangle
 * (tissue, or a second tool) meets the tool feature: the normal is a unit
 * vector from the tool into the triangle, the direction that separates the
 * triangle from the tool fastest; depth (>= 0) is how far the triangle must
 * move along it.
 *
 * Distances below 1e-12 of the triangles' size count as zero (a point that
 * close to a plane lies on it), so nearly coplanar and touching cases give
 * stable answers.
 */
#ifndef TS_TRITRI_H
#define TS_TRITRI_H

#include "ts_sat.h"

typedef struct ts_hit {
  double point[3];  /* contact point, m */
  double normal[3]; /* unit, from the tool feature into the triangle */
  double depth;     /* m, >= 0 */
} ts_hit;

/* Closest point c on segment [a, b] to p; returns |p - c|. */
double ts_closest_point_segment(const double p[3], const double a[3], const double b[3],
                                double c[3]);

/* Closest point c on triangle t to p; returns |p - c|. Degenerate (zero-area)
 * triangles are handled as their edges. */
double ts_closest_point_triangle(const double p[3], const double t[3][3], double c[3]);

/* Closest points cp on [p0, p1] and cq on [q0, q1]; returns |cp - cq|.
 * Parallel and zero-length segments are fine. */
double ts_closest_segment_segment(const double p0[3], const double p1[3], const double q0[3],
                                  const double q1[3], double cp[3], double cq[3]);

/* 1 if the closed segment [a, b] meets the closed triangle t, with a common
 * point in x (the midpoint of the common part when the segment lies in the
 * triangle's plane); 0 otherwise. */
int ts_segment_triangle_intersect(const double a[3], const double b[3], const double t[3][3],
                                  double x[3]);

/* Closest points cs on [a, b] and ct on triangle t; returns the distance
 * (0 with cs = ct = a common point when they meet). */
double ts_closest_segment_triangle(const double a[3], const double b[3], const double t[3][3],
                                   double cs[3], double ct[3]);

/* Triangle-triangle intersection. Returns 0 when the closed triangles are
 * disjoint; 1 when they meet and are not coplanar, with the intersection
 * segment [s0, s1] (s0 = s1 for a single point); 2 when they are coplanar and
 * overlap, with s0 = s1 = the centroid of the corners of the common polygon.
 * A degenerate triangle is handled as its longest edge (1, s0 = s1 = a
 * common point). s0, s1 may be NULL. */
int ts_tri_tri_intersect(const double p[3][3], const double q[3][3], double s0[3], double s1[3]);

/* Closest features of two triangles: cp on p, cq on q; returns the distance,
 * 0 when they intersect (then cp = cq = a common point). */
double ts_closest_triangle_triangle(const double p[3][3], const double q[3][3], double cp[3],
                                    double cq[3]);

/* Contact of a tool face (a triangle of a closed tool mesh, counter-clockwise
 * from outside) with triangle t. Touching when the closed triangles
 * intersect; then point = the midpoint of the intersection segment (the
 * centroid of the common polygon when coplanar), normal = the face's outward
 * unit normal, depth = how far the part of t over the face (inside the prism
 * the face sweeps along its normal) lies behind the face's plane (0 when
 * none does). Returns 1 with *hit filled, or 0 (also for a degenerate
 * face). */
int ts_contact_face_triangle(const double face[3][3], const double t[3][3], ts_hit *hit);

/* Contact of a sphere (centre c, radius r > 0) with triangle t: touching when
 * their distance d <= r; point = the closest point of t to c, normal from c
 * to it, depth = r - d. When c lies on t (d = 0) the normal is t's inward
 * normal (-(b-a)x(c-a), normalised; the tool came from t's outer side) and
 * the depth r. Returns 1 or 0. */
int ts_contact_sphere_triangle(const double c[3], double r, const double t[3][3], ts_hit *hit);

/* Contact of a capsule (segment [a, b], radius r > 0) with triangle t: as
 * for the sphere with the closest points of the segment and t. When the
 * segment meets t the normal is t's inward normal and the depth r plus how
 * far the segment reaches behind t's plane. Returns 1 or 0. */
int ts_contact_capsule_triangle(const double a[3], const double b[3], double r,
                                const double t[3][3], ts_hit *hit);

/* Contact of a solid box with triangle t: touching when they share a point
 * (t clipped to the box is not empty). The clipped polygon is pushed out of
 * the box through the face that needs the shortest move: normal = that
 * face's outward normal, depth = that move, point = the clipped polygon's
 * deepest corner behind that face. Returns 1 or 0. */
int ts_contact_box_triangle(const ts_obb *box, const double t[3][3], ts_hit *hit);

#endif
