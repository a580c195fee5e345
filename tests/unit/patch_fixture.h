/*
 * patch_fixture.h: small tissues and look-ups that several suites share:
 * the top-sheet node at the centre of a built patch or nearest a point, and
 * the hanging chain
 * (a vertical line of springs under gravity) whose static deflection has a
 * closed form. Header-only, static inline; needs Check's ck_assert.
 */
#ifndef TS_TEST_PATCH_FIXTURE_H
#define TS_TEST_PATCH_FIXTURE_H

#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ts_tissue.h"

/* The top-sheet node closest to the patch's vertical axis. */
static inline uint32_t fx_top_centre(const ts_tissue *t) {
  uint32_t best = 0;
  double bd = INFINITY;
  for (uint32_t j = 0; j < t->nodes_per_sheet; j++) {
    double d = hypot(t->rest[j][0], t->rest[j][2]);
    if (d < bd) bd = d, best = j;
  }
  return best;
}

/* The outer-sheet node nearest (px, pz) at rest (in x and z). */
static inline uint32_t fx_surface_node(const ts_tissue *t, double px, double pz) {
  uint32_t best = 0;
  double bd = INFINITY;
  for (uint32_t i = 0; i < t->nodes_per_sheet; i++) {
    double dx = t->rest[i][0] - px, dz = t->rest[i][2] - pz;
    if (dx * dx + dz * dz < bd) {
      bd = dx * dx + dz * dz;
      best = i;
    }
  }
  return best;
}

/* n nodes in a vertical line, node 0 anchored, rest lengths alternating
 * 10 mm and 20 mm, 2 g each, linear springs of 50 N/m, gravity -9.81 y. */
static inline ts_tissue *fx_chain(uint32_t n) {
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(n, n - 1, 0, &t), 0);
  double y = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i > 0) y -= (i % 2) ? 0.010 : 0.020;
    t->rest[i][0] = t->rest[i][2] = 0;
    t->rest[i][1] = y;
    memcpy(t->x[i], t->rest[i], sizeof t->x[i]);
    t->inv_mass[i] = i == 0 ? 0 : 1.0 / 0.002;
  }
  for (uint32_t i = 0; i + 1 < n; i++) {
    t->springs[i].a = i;
    t->springs[i].b = i + 1;
    t->springs[i].k = 50;
  }
  t->gravity[1] = -9.81;
  return t;
}

/* The largest distance (m) of fx_chain(n)'s relaxed positions x from the
 * closed form of the quasi-static solve's K(L) law with E = 50, b = 2,
 * d = 0.25: spring i (nodes i, i+1) carries the weight of nodes i+1..n-1
 * and stretches by W / K_i, K_i = E (1 + d) / (s^b + d) with s = 0 for the
 * 10 mm springs and 1 for the 20 mm ones. Asserts that the chain stayed on
 * its vertical line (x = 0 to 1e-15). */
static inline double fx_chain_deviation(const double (*x)[3], uint32_t n) {
  const double K10 = 50 * 1.25 / 0.25, K20 = 50 * 1.25 / 1.25;
  double y = 0, maxerr = 0;
  for (uint32_t i = 0; i + 1 < n; i++) {
    double L0 = (i % 2) ? 0.020 : 0.010, K = (i % 2) ? K20 : K10;
    double W = (n - 1 - i) * 0.002 * 9.81;
    y -= L0 + W / K;
    maxerr = fmax(maxerr, fabs(x[i + 1][1] - y));
    ck_assert_double_eq_tol(x[i + 1][0], 0, 1e-15);
  }
  return maxerr;
}

#endif
