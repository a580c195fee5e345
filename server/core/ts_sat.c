/*
 * ts_sat.c: the 15-axis separating-axis test between oriented boxes
 * (Gottschalk, Lin, Manocha 1996, "OBBTree", section 4; written in the
 * frame of the first box as in Ericson, "Real-Time Collision Detection",
 * section 4.4.1, with eps added to |R_ij| against nearly parallel edges).
 * See ts_sat.h.
 *
 * Everything is in a's frame: R[i][j] = a_i . b_j, t = the centre of b minus
 * the centre of a, in a's coordinates. On the cross axis a_i x b_j the
 * projection of t is t[i2] R[i1][j] - t[i1] R[i2][j] and the projected radii
 * are ea[i1]|R[i2][j]| + ea[i2]|R[i1][j]| and eb[j1]|R[i][j2]| +
 * eb[j2]|R[i][j1]| (i1, i2 and j1, j2 the cyclic successors of i and j).
 */
#include "ts_sat.h"

#include <math.h>
#include <string.h>

static int sat_core(const double R[3][3], const double t[3], const double ea[3], const double eb[3],
                    double eps) {
  double AR[3][3];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) AR[i][j] = fabs(R[i][j]) + eps;

  /* b's face normals first: against an axis-aligned b they are the world
   * axes, the test of a's world bounds, which rejects most pairs in a tree
   * descent */
  for (int j = 0; j < 3; j++) {
    double ra = ea[0] * AR[0][j] + ea[1] * AR[1][j] + ea[2] * AR[2][j];
    double p = t[0] * R[0][j] + t[1] * R[1][j] + t[2] * R[2][j];
    if (fabs(p) > ra + eb[j]) return 0;
  }
  /* a's face normals */
  for (int i = 0; i < 3; i++) {
    double rb = eb[0] * AR[i][0] + eb[1] * AR[i][1] + eb[2] * AR[i][2];
    if (fabs(t[i]) > ea[i] + rb) return 0;
  }
  /* edge-edge cross products a_i x b_j, unrolled (the index arithmetic of a
   * loop costs more than the test) */
#define TS__CROSS(i, i1, i2, j, j1, j2)                                                            \
  if (fabs(t[i2] * R[i1][j] - t[i1] * R[i2][j]) >                                                  \
      ea[i1] * AR[i2][j] + ea[i2] * AR[i1][j] + eb[j1] * AR[i][j2] + eb[j2] * AR[i][j1])           \
    return 0;
  TS__CROSS(0, 1, 2, 0, 1, 2)
  TS__CROSS(0, 1, 2, 1, 2, 0)
  TS__CROSS(0, 1, 2, 2, 0, 1)
  TS__CROSS(1, 2, 0, 0, 1, 2)
  TS__CROSS(1, 2, 0, 1, 2, 0)
  TS__CROSS(1, 2, 0, 2, 0, 1)
  TS__CROSS(2, 0, 1, 0, 1, 2)
  TS__CROSS(2, 0, 1, 1, 2, 0)
  TS__CROSS(2, 0, 1, 2, 0, 1)
#undef TS__CROSS
  return 1;
}

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static void frame(const ts_obb *a, const ts_obb *b, double R[3][3], double t[3]) {
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) R[i][j] = dot3(a->r[i], b->r[j]);
  double d[3] = {b->c[0] - a->c[0], b->c[1] - a->c[1], b->c[2] - a->c[2]};
  for (int i = 0; i < 3; i++) t[i] = dot3(d, a->r[i]);
}

int ts_sat_obb_obb(const ts_obb *a, const ts_obb *b, double eps) {
  double R[3][3], t[3];
  frame(a, b, R, t);
  return sat_core(R, t, a->e, b->e, eps);
}

int ts_sat_obb_aabb(const ts_obb *a, const double lo[3], const double hi[3], double eps) {
  /* b's axes are the world axes, so R[i][j] = a_i . e_j = a->r[i][j] */
  double d[3], eb[3];
  for (int k = 0; k < 3; k++) {
    d[k] = 0.5 * (lo[k] + hi[k]) - a->c[k];
    eb[k] = 0.5 * (hi[k] - lo[k]);
  }
  double t[3] = {dot3(d, a->r[0]), dot3(d, a->r[1]), dot3(d, a->r[2])};
  double R[3][3];
  memcpy(R, a->r, sizeof R);
  return sat_core((const double(*)[3])R, t, a->e, eb, eps);
}

double ts_sat_obb_obb_depth(const ts_obb *a, const ts_obb *b, double normal[3]) {
  double R[3][3], t[3];
  frame(a, b, R, t);
  double AR[3][3];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) AR[i][j] = fabs(R[i][j]);

  double best = INFINITY, axis[3] = {0.0, 1.0, 0.0};
  for (int i = 0; i < 3; i++) {
    double rb = b->e[0] * AR[i][0] + b->e[1] * AR[i][1] + b->e[2] * AR[i][2];
    double ov = a->e[i] + rb - fabs(t[i]);
    if (ov < best) {
      best = ov;
      double s = t[i] < 0 ? -1.0 : 1.0;
      for (int k = 0; k < 3; k++) axis[k] = s * a->r[i][k];
    }
  }
  for (int j = 0; j < 3; j++) {
    double ra = a->e[0] * AR[0][j] + a->e[1] * AR[1][j] + a->e[2] * AR[2][j];
    double p = t[0] * R[0][j] + t[1] * R[1][j] + t[2] * R[2][j];
    double ov = ra + b->e[j] - fabs(p);
    if (ov < best) {
      best = ov;
      double s = p < 0 ? -1.0 : 1.0;
      for (int k = 0; k < 3; k++) axis[k] = s * b->r[j][k];
    }
  }
  for (int i = 0; i < 3; i++) {
    int i1 = (i + 1) % 3, i2 = (i + 2) % 3;
    for (int j = 0; j < 3; j++) {
      int j1 = (j + 1) % 3, j2 = (j + 2) % 3;
      /* the axis itself, normalised by its computed length: 1 - R_ij^2
       * would lose half the digits for nearly parallel edges */
      const double *u = a->r[i], *v = b->r[j];
      double w[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                     u[0] * v[1] - u[1] * v[0]};
      double len = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
      if (!(len > 1e-9)) continue; /* parallel edges: the face axes decide */
      double ra = a->e[i1] * AR[i2][j] + a->e[i2] * AR[i1][j];
      double rb = b->e[j1] * AR[i][j2] + b->e[j2] * AR[i][j1];
      double p = t[i2] * R[i1][j] - t[i1] * R[i2][j];
      double ov = (ra + rb - fabs(p)) / len;
      if (ov < best) {
        best = ov;
        double s = (p < 0 ? -1.0 : 1.0) / len;
        for (int k = 0; k < 3; k++) axis[k] = s * w[k];
      }
    }
  }
  if (normal)
    for (int k = 0; k < 3; k++) normal[k] = axis[k];
  return best;
}

void ts_obb_corners(const ts_obb *b, double out[8][3]) {
  for (int n = 0; n < 8; n++) {
    double s[3] = {n & 1 ? 1.0 : -1.0, n & 2 ? 1.0 : -1.0, n & 4 ? 1.0 : -1.0};
    for (int k = 0; k < 3; k++)
      out[n][k] = b->c[k] + s[0] * b->e[0] * b->r[0][k] + s[1] * b->e[1] * b->r[1][k] +
                  s[2] * b->e[2] * b->r[2][k];
  }
}

int ts_obb_contains(const ts_obb *b, const double p[3], double tol) {
  double d[3] = {p[0] - b->c[0], p[1] - b->c[1], p[2] - b->c[2]};
  for (int i = 0; i < 3; i++)
    if (!(fabs(dot3(d, b->r[i])) <= b->e[i] + tol)) return 0;
  return 1;
}
