/*
 * ts_xpbd_geom.c: the geometric measures of the position-based solver's
 * bending and volume constraints (ts_xpbd.h): the signed dihedral angle at
 * a sheet edge and the signed volume of a prism, each with its gradient.
 */
#include <math.h>
#include <string.h>

#include "ts_xpbd_internal.h"

/* Bending angle and gradient. With e = p1 - p0, nA = e x (p2 - p0) and
 * nB = (p3 - p0) x e (parallel when flat with the wings on opposite sides),
 * theta = atan2((nA x nB) . e/|e|, nA . nB). The gradient is the one of R.
 * Bridson, S. Marino, R. Fedkiw, "Simulation of clothing with folds and
 * wrinkles", SCA 2003 (their u1..u4, with the sign of this theta). */
double ts_xpbd_dihedral(const double p[4][3], double g[4][3]) {
  double e[3], d2[3], d3[3], nA[3], nB[3], c[3];
  ts__xpbd_sub3(p[1], p[0], e);
  ts__xpbd_sub3(p[2], p[0], d2);
  ts__xpbd_sub3(p[3], p[0], d3);
  ts__xpbd_cross3(e, d2, nA);
  ts__xpbd_cross3(d3, e, nB);
  double el2 = ts__xpbd_dot3(e, e), a2 = ts__xpbd_dot3(nA, nA), b2 = ts__xpbd_dot3(nB, nB);
  if (!(el2 > 0) || !(a2 > 0) || !(b2 > 0) || !isfinite(el2 + a2 + b2)) return NAN;
  double el = sqrt(el2);
  ts__xpbd_cross3(nA, nB, c);
  double theta = atan2(ts__xpbd_dot3(c, e) / el, ts__xpbd_dot3(nA, nB));
  if (g) {
    double d21[3], d31[3];
    ts__xpbd_sub3(p[2], p[1], d21);
    ts__xpbd_sub3(p[3], p[1], d31);
    /* coefficients of nA/|nA|^2 and nB/|nB|^2 in each gradient */
    double ka[4] = {-ts__xpbd_dot3(d21, e) / el, ts__xpbd_dot3(d2, e) / el, -el, 0.0};
    double kb[4] = {-ts__xpbd_dot3(d31, e) / el, ts__xpbd_dot3(d3, e) / el, 0.0, -el};
    for (int i = 0; i < 4; i++)
      for (int k = 0; k < 3; k++) g[i][k] = ka[i] * nA[k] / a2 + kb[i] * nB[k] / b2;
  }
  return theta;
}

/* Signed volume of tetrahedron (a, b, c, d), (b-a) x (c-a) . (d-a) / 6, and
 * its gradient added into ga..gd. */
static double tet_volume(const double *a, const double *b, const double *c, const double *d,
                         double *ga, double *gb, double *gc, double *gd) {
  double ab[3], ac[3], ad[3], n[3];
  ts__xpbd_sub3(b, a, ab);
  ts__xpbd_sub3(c, a, ac);
  ts__xpbd_sub3(d, a, ad);
  ts__xpbd_cross3(ab, ac, n);
  double v = ts__xpbd_dot3(n, ad) / 6.0;
  if (ga) {
    double nb[3], nc[3];
    ts__xpbd_cross3(ac, ad, nb); /* d/db */
    ts__xpbd_cross3(ad, ab, nc); /* d/dc */
    for (int k = 0; k < 3; k++) {
      double gdk = n[k] / 6.0, gbk = nb[k] / 6.0, gck = nc[k] / 6.0;
      gb[k] += gbk;
      gc[k] += gck;
      gd[k] += gdk;
      ga[k] -= gbk + gck + gdk;
    }
  }
  return v;
}

double ts_xpbd_prism_volume(const double p[6][3], double g[6][3]) {
  if (g) memset(g, 0, sizeof(double[6][3]));
  double *g0 = g ? g[0] : NULL, *g1 = g ? g[1] : NULL, *g2 = g ? g[2] : NULL;
  double *g3 = g ? g[3] : NULL, *g4 = g ? g[4] : NULL, *g5 = g ? g[5] : NULL;
  return tet_volume(p[0], p[1], p[2], p[3], g0, g1, g2, g3) +
         tet_volume(p[1], p[2], p[3], p[4], g1, g2, g3, g4) +
         tet_volume(p[2], p[3], p[4], p[5], g2, g3, g4, g5);
}
