/*
 * test_ms_limit.c: strain limiting's screening (server/core/ts_ms_limit.c):
 * the pass starts at the first spring it would correct, found from the
 * force loop's per-block strain extremes, instead of walking every spring.
 * The result must be the whole Gauss-Seidel pass's, bit for bit: checked
 * here against Provot's passes written out plainly (the loop as it was
 * before the screening and the sparse passes), on springs of the three classes interleaved so
 * that the force loop's order (by class, then node) differs from the
 * passes' order (the tissue's).
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ts_massspring.h"
#include "ts_ms_internal.h"
#include "ts_tissue.h"

enum { NN = 400, NS = 2 * NN - 3 };

/* A deterministic pseudo-random number in [0, 1) (xorshift64*). */
static double rnd(uint64_t *s) {
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-53;
}

/* A chain along x, slightly wiggly: springs i -- i+1 (strain range [-0.2, 0.1]) and i -- i+2
 * ([-0.2, 0.05]) at their rest lengths; spring s linear, one term or two by
 * s mod 3; node 0 anchored. */
static ts_tissue *chain(void) {
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(NN, NS, 0, &t), 0);
  uint64_t sd = 99;
  for (uint32_t i = 0; i < NN; i++) {
    t->rest[i][0] = 0.01 * i, t->rest[i][1] = 3e-4 * rnd(&sd), t->rest[i][2] = 3e-4 * rnd(&sd);
    memcpy(t->x[i], t->rest[i], sizeof t->x[i]);
    memcpy(t->x_prev[i], t->rest[i], sizeof t->x[i]);
    t->inv_mass[i] = i == 0 ? 0.0 : 1e3;
    t->branch[i] = i % 2 ? TS_BRANCH_VERLET : TS_BRANCH_BEEMAN;
  }
  for (uint32_t s = 0; s < NS; s++) {
    uint32_t a = s < NN - 1 ? s : s - (NN - 1), b = s < NN - 1 ? a + 1 : a + 2;
    double L = 0;
    for (int c = 0; c < 3; c++) L += (t->x[b][c] - t->x[a][c]) * (t->x[b][c] - t->x[a][c]);
    ts_spring sp = {.a = a, .b = b, .rest = sqrt(L), .c = 0.01, .strain_min = -0.2,
                    .strain_max = s < NN - 1 ? 0.1 : 0.05};
    if (s % 3 == 0) sp.k = 50;
    if (s % 3 >= 1) sp.k1 = 20, sp.b1 = 5;
    if (s % 3 == 2) sp.k2 = 3, sp.b2 = 40;
    t->springs[s] = sp;
  }
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  return t;
}

/* Provot's passes as the step made them before the screening. */
static uint32_t plain_passes(const ts_tissue *t, double (*x)[3], double (*xp)[3], double (*v)[3],
                             uint8_t *br, double h) {
  const double *im = t->inv_mass;
  uint32_t total = 0;
  for (uint32_t it = 0; it < t->strain_iterations; it++) {
    uint32_t fixes = 0;
    for (uint32_t s = 0; s < t->n_springs; s++) {
      const ts_spring *sp = &t->springs[s];
      const uint32_t a = sp->a, b = sp->b;
      const double lo = sp->rest * (1 + sp->strain_min), hi = sp->rest * (1 + sp->strain_max);
      double d[3] = {x[b][0] - x[a][0], x[b][1] - x[a][1], x[b][2] - x[a][2]};
      double l2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2], target;
      if (l2 > hi * hi)
        target = hi;
      else if (l2 < lo * lo && l2 > 0)
        target = lo;
      else
        continue;
      double wa = im[a], wb = im[b], ws = wa + wb;
      if (!(ws > 0)) continue;
      double l = sqrt(l2), q = (l - target) / (l * ws);
      uint32_t ends[2] = {a, b};
      double w[2] = {wa, -wb};
      for (int e = 0; e < 2; e++) {
        uint32_t i = ends[e];
        if (!(im[i] > 0)) continue;
        double dx[3];
        for (int c = 0; c < 3; c++) {
          dx[c] = w[e] * q * d[c];
          x[i][c] += dx[c];
        }
        if (br[i] == TS_BRANCH_VERLET) {
          for (int c = 0; c < 3; c++) v[i][c] += 0.5 * dx[c] / h;
        } else {
          for (int c = 0; c < 3; c++) v[i][c] = (x[i][c] - xp[i][c]) / h;
          br[i] = TS_BRANCH_VERLET;
        }
      }
      fixes++;
    }
    total += fixes;
    if (!fixes) break;
  }
  return total;
}

/* Node pre moved by pre_dx along x, the forces evaluated there (the
 * per-block strain extremes), then node mv moved by mv_dx along x and every
 * free node by up to jitter / 2 on each axis (as an update would move
 * them); then the step's strain limiting and the plain passes, on copies:
 * the same corrections, positions, velocities and branches, bit for bit.
 * Returns the corrections made. */
static uint32_t compare(ts_tissue *t, uint32_t pre, double pre_dx, uint32_t mv, double mv_dx,
                        double jitter) {
  const double h = 1e-4;
  t->x[pre][0] += pre_dx;
  ts__ms_spring_forces(t, t->ms);
  uint64_t sd = 5;
  double move2 = 0;
  for (uint32_t i = 1; i < NN; i++) {
    double d[3] = {i == mv ? mv_dx : 0.0, 0, 0};
    for (int c = 0; c < 3; c++) d[c] += jitter * (rnd(&sd) - 0.5);
    for (int c = 0; c < 3; c++) t->x[i][c] += d[c], t->v[i][c] = d[c] / h;
    move2 = fmax(move2, d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  }
  t->ms->move2 = move2;
  double(*x)[3] = malloc(sizeof *x * NN), (*xp)[3] = malloc(sizeof *xp * NN),
  (*v)[3] = malloc(sizeof *v * NN);
  uint8_t *br = malloc(NN);
  ck_assert(x && xp && v && br);
  memcpy(x, t->x, sizeof *x * NN);
  memcpy(xp, t->x_prev, sizeof *xp * NN);
  memcpy(v, t->v, sizeof *v * NN);
  memcpy(br, t->branch, NN);
  uint32_t want = plain_passes(t, x, xp, v, br, h);
  ck_assert(ts__ms_limit_needed(t->ms));
  uint32_t got = ts__ms_limit_strain(t, t->ms, h);
  ck_assert_uint_eq(got, want);
  ck_assert_msg(memcmp(x, t->x, sizeof *x * NN) == 0, "positions differ from the plain passes");
  ck_assert_msg(memcmp(v, t->v, sizeof *v * NN) == 0, "velocities differ from the plain passes");
  ck_assert_msg(memcmp(br, t->branch, NN) == 0, "branches differ from the plain passes");
  free(x);
  free(xp);
  free(v);
  free(br);
  return got;
}

/* Node 90 pulled 0.95 mm (9.5 % on spring 89, its link to 89; 4.75 % on
 * spring 487, to 88: near their bounds of 10 and 5 %), then 0.1 mm more:
 * both break. They share node 90, so the order of their corrections shows in
 * the result, and the force loop meets them the other way round (487 has
 * one term, 89 two); every other block is cleared by the screening. */
START_TEST(test_screened_shared_node) {
  ts_tissue *t = chain();
  ck_assert_uint_ge(compare(t, 90, 0.00095, 90, 0.0001, 0.0), 2);
  ts_tissue_destroy(t);
}
END_TEST

/* Node 200 near its bounds as above, node 50 moved 0.1 mm: nothing to
 * correct, which the screening finds from the few blocks near node 200;
 * then every node jittered by up to 3 mm, so that most blocks stay in
 * doubt (the pass starts at the first spring). */
START_TEST(test_screened_none_and_many) {
  ts_tissue *t = chain();
  ck_assert_uint_eq(compare(t, 200, 0.00095, 50, 0.0001, 0.0), 0);
  ts_tissue_destroy(t);
  t = chain();
  ck_assert_uint_gt(compare(t, 200, 0.0, 0, 0.0, 0.006), 50);
  ts_tissue_destroy(t);
}
END_TEST

/* The nodes up to k stretched apart along x, every spring among them at
 * 4.99 % (the i -- i+2 springs just under their 5 % bound), the rest of the
 * chain carried along; the forces evaluated there; then node k pulled
 * dx further: the correction of a spring at k moves nodes whose other
 * springs then break, and so on down the chain over the passes, each
 * correction met by the sparse passes through the nodes it moved. */
static uint32_t cascade(uint32_t k, double dx) {
  ts_tissue *t = chain();
  for (uint32_t i = 1; i < NN; i++) t->x[i][0] += 0.000499 * (i < k ? i : k);
  uint32_t got = compare(t, 1, 0.0, k, dx, 0.0);
  ts_tissue_destroy(t);
  return got;
}

/* The same beyond node k, and node k pushed back by dx: the corrections go
 * up the chain, each breaking springs after it in the pass's order, which
 * the pass must visit before it ends. */
static uint32_t cascade_up(uint32_t k, double dx) {
  ts_tissue *t = chain();
  for (uint32_t i = k + 1; i < NN; i++) t->x[i][0] += 0.000499 * (i - k);
  uint32_t got = compare(t, 1, 0.0, k, -dx, 0.0);
  ts_tissue_destroy(t);
  return got;
}

START_TEST(test_sparse_cascade) {
  /* each pull breaks springs at k; their corrections break the next ones */
  ck_assert_uint_ge(cascade(20, 0.0001), 3);
  ck_assert_uint_ge(cascade(150, 0.0003), 3);
  ck_assert_uint_ge(cascade(NN - 3, 0.0002), 3);
  ck_assert_uint_ge(cascade_up(NN - 25, 0.0001), 3);
  ck_assert_uint_ge(cascade_up(100, 0.0003), 3);
}
END_TEST

/* Several nodes pulled apart at once and everything jittered a little, with
 * different seeds of the jitter: corrections in several places of the
 * chain, some sharing nodes with the candidates of others. */
START_TEST(test_sparse_scattered) {
  for (uint32_t r = 0; r < 6; r++) {
    ts_tissue *t = chain();
    for (uint32_t i = 1; i < NN; i++) t->x[i][0] += 0.000475 * (i < 60 + r ? i : 60 + r);
    t->x[300 - 7 * r][0] += 0.0006;
    t->x[301 - 7 * r][0] += 0.0012;
    uint32_t got = compare(t, 1, 0.0, 40 + r, 0.0002, 1e-6 * (r + 1));
    ck_assert_uint_ge(got, 2);
    ts_tissue_destroy(t);
  }
}
END_TEST

/* Random states: each link of the chain stretched by its own 3.5-4.99 %
 * (the i -- i+2 springs then near their 5 % bound), the forces evaluated,
 * then one to four nodes pulled up to 0.2 mm either way and every node
 * jittered by up to 2 um: corrections in several places, cascading along
 * the chain, from candidates and from every spring (the screening leaves
 * many in doubt after the larger pulls); a third of them by the whole
 * passes that run when the sparse passes' index could not be made. */
START_TEST(test_sparse_random) {
  uint64_t sd = 7;
  uint32_t fixes = 0;
  for (int r = 0; r < 60; r++) {
    ts_tissue *t = chain();
    double shift = 0;
    for (uint32_t i = 1; i < NN; i++) {
      shift += 0.00035 + 0.000149 * rnd(&sd);
      t->x[i][0] += shift;
    }
    const uint32_t pulls = 1 + (uint32_t)(4 * rnd(&sd));
    for (uint32_t p = 1; p < pulls; p++)
      t->x[1 + (uint32_t)((NN - 1) * rnd(&sd))][0] += 0.0004 * (rnd(&sd) - 0.5);
    const uint32_t k = 1 + (uint32_t)((NN - 1) * rnd(&sd));
    /* every third state by the whole passes, as without memory for the
     * sparse passes' index */
    if (r % 3 == 2) t->ms->lim_index_failed = 1;
    fixes += compare(t, 1, 0.0, k, 0.0004 * (rnd(&sd) - 0.5), 2e-6);
    ck_assert(r % 3 == 2 ? t->ms->lim_off == NULL : 1);
    ts_tissue_destroy(t);
  }
  ck_assert_uint_gt(fixes, 60);
}
END_TEST

static Suite *ms_limit_suite(void) {
  Suite *s = suite_create("ms_limit");
  TCase *tc = tcase_create("screening");
  tcase_add_test(tc, test_screened_shared_node);
  tcase_add_test(tc, test_screened_none_and_many);
  tcase_add_test(tc, test_sparse_cascade);
  tcase_add_test(tc, test_sparse_scattered);
  tcase_add_test(tc, test_sparse_random);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(ms_limit_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
