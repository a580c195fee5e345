/*
 * ts_extrude_prism.c: the one validity test of an extrusion's prisms
 * (ts_prism_check, ts_extrude.h), used by the extrusion to count and name
 * inverted prisms (ts_extrude.c, and the refinements that rebuild sheets)
 * and by the tissue builder to refuse them (ts_tissue_build.c), so that what
 * the extrusion accepts the builder accepts.
 *
 * Criterion: a prism is the linear wedge (the six-node pentahedron of finite
 * elements, e.g. O. C. Zienkiewicz, R. L. Taylor, "The Finite Element
 * Method", vol. 1, 5th ed., 2000, section 8.8) mapping the reference
 * (xi, eta, zeta) to
 *   x = sum_i N_i(xi, eta) ((1 - zeta) P_i + zeta Q_i),
 * N the linear triangle shape functions, P the outer triangle (wound
 * counter-clockwise seen from outside), Q the same triangle on the next
 * sheet inwards. It is valid when the Jacobian of that map keeps one sign
 * everywhere (no point of the element is turned inside out). With
 * u(z) = B(z) - A(z), v(z) = C(z) - A(z) the edges of the triangle at depth
 * z and d(xi, eta) = sum_i N_i (Q_i - P_i) the lateral direction,
 *   det J = (u(z) x v(z)) . d(xi, eta),
 * which is linear in (xi, eta) at fixed z, so its extreme values over the
 * triangle are at the corners: the prism is valid exactly when the three
 * quadratics J_i(z) = -(u(z) x v(z)) . (Q_i - P_i), i = 0, 1, 2, are
 * positive on [0, 1] (negated: the outer normal u x v points away from the
 * lateral edges, which go inwards). This is what the solvers need: masses
 * and the springs' volume shares come from the element's volume, which is
 * then positive, and from its mid-surface triangle seen along the mean
 * lateral direction, which then has positive area; it does not depend on
 * how the prism would be cut into tetrahedra (a fixed three-tetrahedra
 * split rejects sound prisms whose side faces are twisted the "wrong" way
 * for that split). It
 * covers both ways a layer folds: a lateral edge leaving the outer face's
 * inner side (a vertex normal leaning more than 90 degrees from a face at a
 * crease, or a direction pointing out of the surface) makes J_i(0) <= 0, and
 * a bulge offset past its centre of curvature shrinks the intermediate
 * triangle through a point (u x v passes through zero) inside (0, 1).
 *
 * Robustness margin: J_i must stay above 1e-6 |u(0) x v(0)| |Q_i - P_i|,
 * i.e. no intermediate triangle shrinks below a millionth of the outer one
 * along a lateral edge.
 *
 * Volume: the integral of det J over the reference wedge, with
 * integral N_i = 1/6 over the reference triangle:
 *   V = (1/6) sum_i integral_0^1 J_i(z) dz = (1/6) sum_i (a_i + b_i/2 + c_i/3)
 * for J_i(z) = a_i + b_i z + c_i z^2 (exact for the wedge with ruled side
 * faces; area x thickness for a right prism).
 */
#include <math.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_extrude_internal.h"

#define TS__PRISM_MARGIN 1e-6

static void sub3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[0] - b[0];
  o[1] = a[1] - b[1];
  o[2] = a[2] - b[2];
}

static void cross3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* The quadratics J_i(z) = a[i] + b[i] z + c[i] z^2 of the three corners,
 * |u(0) x v(0)| in *area2 and |Q_i - P_i| in dl[i]. */
static void corner_quadratics(const double P[3][3], const double Q[3][3], double a[3], double b[3],
                              double c[3], double *area2, double dl[3]) {
  double u0[3], v0[3], u1[3], v1[3], du[3], dv[3], A[3], B1[3], B2[3], B[3], C[3];
  sub3(P[1], P[0], u0);
  sub3(P[2], P[0], v0);
  sub3(Q[1], Q[0], u1);
  sub3(Q[2], Q[0], v1);
  sub3(u1, u0, du);
  sub3(v1, v0, dv);
  /* u(z) x v(z) = A + B z + C z^2 */
  cross3(u0, v0, A);
  cross3(u0, dv, B1);
  cross3(du, v0, B2);
  for (int k = 0; k < 3; k++) B[k] = B1[k] + B2[k];
  cross3(du, dv, C);
  *area2 = sqrt(dot3(A, A));
  for (int i = 0; i < 3; i++) {
    double d[3];
    sub3(Q[i], P[i], d);
    dl[i] = sqrt(dot3(d, d));
    a[i] = -dot3(A, d);
    b[i] = -dot3(B, d);
    c[i] = -dot3(C, d);
  }
}

/* Smallest value of a + b z + c z^2 over [0, 1]. */
static double quad_min(double a, double b, double c) {
  double lo = fmin(a, a + b + c);
  if (c > 0) {
    double z = -b / (2 * c);
    if (z > 0 && z < 1) lo = fmin(lo, a + z * (b + z * c));
  }
  return lo;
}

int ts_prism_check(const double P[3][3], const double Q[3][3], double *volume, double *min_jacobian) {
  if (volume) *volume = 0;
  if (min_jacobian) *min_jacobian = 0;
  if (!P || !Q) return TS_EINVAL;
  double a[3], b[3], c[3], area2, dl[3];
  corner_quadratics(P, Q, a, b, c, &area2, dl);
  int valid = isfinite(area2) && area2 > 0;
  double vol = 0, worst = INFINITY;
  for (int i = 0; i < 3; i++) {
    double lo = quad_min(a[i], b[i], c[i]);
    vol += a[i] + b[i] / 2 + c[i] / 3;
    double rel = area2 > 0 && dl[i] > 0 ? lo / (area2 * dl[i]) : -INFINITY;
    if (!(rel > TS__PRISM_MARGIN)) valid = 0; /* also NaN */
    if (!(rel >= worst)) worst = rel;
  }
  vol /= 6;
  if (!isfinite(vol)) valid = 0;
  if (volume) *volume = vol;
  if (min_jacobian) *min_jacobian = worst;
  return valid ? 0 : TS_EMESH;
}

double ts__prism_shrink(const double P[3][3], const double Q[3][3]) {
  double a[3], b[3], c[3], area2, dl[3], worst = INFINITY;
  corner_quadratics(P, Q, a, b, c, &area2, dl);
  for (int i = 0; i < 3; i++) {
    if (!(a[i] > 0)) return -INFINITY;
    double r = quad_min(a[i], b[i], c[i]) / a[i];
    if (!(r >= worst)) worst = r;
  }
  return isfinite(worst) ? worst : -INFINITY;
}
