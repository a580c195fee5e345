/*
 * ts_corner_tet.h: the corner tetrahedra of a layered tissue's prism, the
 * measure the inversion guards hold (ts_fold_guard.h). A
 * prism is a sheet triangle p0 p1 p2 swept to the next sheet's p3 p4 p5;
 * corner tetrahedron k (0..5) is the second triangle with the first's
 * corner k (k < 3), or the first triangle with the second's corner k - 3.
 * Its signed volume changes sign when that corner passes through the other
 * sheet's triangle: one node pushed through a layer, which the prism's
 * volume hardly sees (a prism with one corner reflected keeps a third of
 * its volume).
 */
#ifndef TS_CORNER_TET_H
#define TS_CORNER_TET_H

#include <stdint.h>

/* Corner tetrahedron k of prism p (six node indices): its nodes in idx, its
 * signed volume at positions x (m^3) and, with g non-NULL, the volume's
 * gradient (g[q] for idx[q], m^2). */
static inline double ts_corner_tet(const uint32_t p[6], int k, const double (*x)[3], uint32_t idx[4],
                                   double g[4][3]) {
  if (k < 3) idx[0] = p[3], idx[1] = p[4], idx[2] = p[5], idx[3] = p[k];
  else idx[0] = p[0], idx[1] = p[2], idx[2] = p[1], idx[3] = p[k];
  const double *a = x[idx[0]], *b = x[idx[1]], *c = x[idx[2]], *d = x[idx[3]];
  double u[3], v[3], w[3];
  for (int q = 0; q < 3; q++) u[q] = b[q] - a[q], v[q] = c[q] - a[q], w[q] = d[q] - a[q];
  const double vxw[3] = {v[1] * w[2] - v[2] * w[1], v[2] * w[0] - v[0] * w[2], v[0] * w[1] - v[1] * w[0]};
  const double V = (u[0] * vxw[0] + u[1] * vxw[1] + u[2] * vxw[2]) / 6.0;
  if (g) {
    const double wxu[3] = {w[1] * u[2] - w[2] * u[1], w[2] * u[0] - w[0] * u[2], w[0] * u[1] - w[1] * u[0]};
    const double uxv[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
    for (int q = 0; q < 3; q++) {
      g[1][q] = vxw[q] / 6.0, g[2][q] = wxu[q] / 6.0, g[3][q] = uxv[q] / 6.0;
      g[0][q] = -(g[1][q] + g[2][q] + g[3][q]);
    }
  }
  return V;
}

#endif
