/*
 * ts_mat3.h: the 3 x 3 inverse the block-Jacobi steps use (the refined
 * quasi-static solve's per-node steps, ts_qstatic_refine.c, which the
 * spread2r features sweep with too, and the spread2 features' blocks,
 * ts_learn_apply.c): a scale times the adjugate over the determinant, by
 * cofactors.
 */
#ifndef TS_MAT3_H
#define TS_MAT3_H

#include <math.h>

/* o = (omega / det b) adj(b) for a row-major b; returns det b. When det b is
 * not positive and finite, o is left alone (the caller decides). */
static inline double ts_mat3_inv_scaled(const double b[9], double omega, double o[9]) {
  const double c0 = b[4] * b[8] - b[5] * b[7], c1 = b[5] * b[6] - b[3] * b[8],
               c2 = b[3] * b[7] - b[4] * b[6];
  const double det = b[0] * c0 + b[1] * c1 + b[2] * c2;
  if (!(det > 0) || !isfinite(det)) return det;
  const double sc = omega / det;
  o[0] = c0 * sc;
  o[1] = (b[2] * b[7] - b[1] * b[8]) * sc;
  o[2] = (b[1] * b[5] - b[2] * b[4]) * sc;
  o[3] = c1 * sc;
  o[4] = (b[0] * b[8] - b[2] * b[6]) * sc;
  o[5] = (b[2] * b[3] - b[0] * b[5]) * sc;
  o[6] = c2 * sc;
  o[7] = (b[1] * b[6] - b[0] * b[7]) * sc;
  o[8] = (b[0] * b[4] - b[1] * b[3]) * sc;
  return det;
}

#endif
