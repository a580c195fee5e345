/*
 * ts_sat.h: oriented boxes and the separating-axis test between them, the
 * box test of the collision trees (ts_obb_tree.h for tools, ts_aabb_tree.h for
 * tissue, queries in ts_collide.h).
 *
 * Two convex boxes are disjoint exactly when their projections on one of 15
 * axes are disjoint: the 3 face normals of each box and the 9 cross products
 * of an edge direction of one with an edge direction of the other
 * (Gottschalk, Lin, Manocha 1996, "OBBTree: a hierarchical structure for
 * rapid interference detection", section 4; the formulation with the
 * rotation between the frames as in Ericson, "Real-Time Collision
 * Detection", 2005, section 4.4.1). When two edges are nearly parallel their
 * cross product is nearly zero and both sides of the test are rounding
 * noise; adding a small eps to every |R_ij| (Ericson's remedy) makes the
 * projected radii dominate the noise, so such an axis can no longer report a
 * false separation. The price is conservative answers for boxes closer
 * than about eps times their size: they count as overlapping.
 *
 * Boxes are closed: touching boxes overlap.
 */
#ifndef TS_SAT_H
#define TS_SAT_H

/* Default eps added to |R_ij|: far above the ~1e-16 rounding of the
 * rotation entries, far below any gap that matters (1e-12 of a box's size). */
#define TS_SAT_EPS 1e-12

/* An oriented box. */
typedef struct ts_obb {
  double c[3];    /* centre, m */
  double r[3][3]; /* r[i]: unit axis i (rows of the rotation, right-handed) */
  double e[3];    /* half-extents along the axes, m, >= 0 */
} ts_obb;

/* 1 if the closed boxes a and b overlap (touching included), 0 if some of the
 * 15 axes separates them. eps: see above (TS_SAT_EPS; 0 gives the plain test).
 * Axes must be orthonormal; non-finite input gives 0 or 1 but never crashes. */
int ts_sat_obb_obb(const ts_obb *a, const ts_obb *b, double eps);

/* Same against an axis-aligned box [lo, hi] (m): cheaper, since the rotation
 * between the frames is a's axes themselves. */
int ts_sat_obb_aabb(const ts_obb *a, const double lo[3], const double hi[3], double eps);

/* The smallest overlap over the 15 axes (cross-product axes normalised and
 * skipped when shorter than 1e-9, where the face axes decide): returns that
 * overlap in metres (negative: the gap along a separating axis) and writes
 * the unit axis oriented from a towards b into normal (may be NULL). For
 * overlapping boxes this is the minimum translation that separates them
 * (the penetration depth of two convex polytopes is along a face normal or
 * an edge-edge cross product). */
double ts_sat_obb_obb_depth(const ts_obb *a, const ts_obb *b, double normal[3]);

/* The 8 corners of a box (m). */
void ts_obb_corners(const ts_obb *b, double out[8][3]);

/* 1 if the point p lies in the closed box enlarged by tol (m). */
int ts_obb_contains(const ts_obb *b, const double p[3], double tol);

#endif
