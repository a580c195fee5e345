/*
 * test_qstatic_chain.c: the quasi-static solve's spring law and external
 * force against closed forms (ts_qstatic.h; issue 6), on hanging chains.
 *
 *   - K(L) = E (1 + d) / (s^b + d) for a length strictly between the mesh's
 *     shortest and longest edge: a chain whose springs are 10, 15 and 20 mm
 *     long (s = 0, 0.5, 1), with b = 0.5 and b = 2, hangs under gravity to
 *     the series-spring closed form. test_learn's chain has only s = 0 and
 *     s = 1, where s^b = s, so it cannot see b; here s^0.5 = 0.707 and
 *     s^2 = 0.25 against s = 0.5 change the 15 mm springs' constant by 22 %
 *     and 33 %.
 *   - The external force term f_ext of the residual: the same chain with a
 *     load on its tip node, solved by ts_qstatic_solve with f_ext, to its
 *     closed form (every spring carries the load on top of the weight
 *     below it).
 * (The refined solve has the same external term: test_qstatic_refine_load.c
 * and test_shortcut_load.c check it.)
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_qstatic.h"
#include "ts_tissue.h"

#define NODE_MASS 0.002 /* kg */
#define G 9.81          /* m/s^2 */
#define E_ 50.0         /* N/m */
#define D_ 0.25

/* rest length of spring i (nodes i, i+1): 10, 15, 20, 10, ... mm */
static double rest_len(uint32_t i) {
  static const double L[3] = {0.010, 0.015, 0.020};
  return L[i % 3];
}

/* n nodes in a vertical line, node 0 anchored, 2 g each, gravity -9.81 y. */
static ts_tissue *chain3(uint32_t n) {
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(n, n - 1, 0, &t), 0);
  double y = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i > 0) y -= rest_len(i - 1);
    t->rest[i][0] = t->rest[i][2] = 0;
    t->rest[i][1] = y;
    memcpy(t->x[i], t->rest[i], sizeof t->x[i]);
    t->inv_mass[i] = i == 0 ? 0 : 1.0 / NODE_MASS;
  }
  for (uint32_t i = 0; i + 1 < n; i++) {
    t->springs[i].a = i;
    t->springs[i].b = i + 1;
    t->springs[i].k = E_;
  }
  t->gravity[1] = -G;
  return t;
}

/* The law written out for spring i of t, from its rest length as the
 * tissue holds it (s = 0, 0.5, 1 for 10, 15, 20 mm up to rounding: at b =
 * 0.5, K is steep near s = 0, where s = 1e-14 already changes it by 4e-7,
 * so s comes from the same rest positions the solver reads). */
static double K_closed(const ts_tissue *t, uint32_t i, double b) {
  double lmin = INFINITY, lmax = 0;
  for (uint32_t k = 0; k < t->n_springs; k++) {
    double L = t->rest[k][1] - t->rest[k + 1][1];
    lmin = fmin(lmin, L);
    lmax = fmax(lmax, L);
  }
  double s = (t->rest[i][1] - t->rest[i + 1][1] - lmin) / (lmax - lmin);
  ck_assert_double_eq_tol(s, (rest_len(i) - 0.010) / 0.010, 1e-9);
  return E_ * (1 + D_) / (pow(s, b) + D_);
}

/* Solves the chain with a downward tip load F (N; 0: none) and returns the
 * largest distance from the closed form, m; *bound gets the tolerance. */
static double hang(uint32_t n, double b, double F, double *bound) {
  ts_tissue *t = chain3(n);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  p.E = E_;
  p.b = b;
  p.d = D_;
  p.tol = 1e-11; /* N */
  p.max_iter = 2000000;
  ts_qstatic *q = NULL;
  ck_assert_int_eq(ts_qstatic_create(t, &p, &q), 0);
  /* the constants themselves (the formula is evaluated the same way: 1e-12) */
  for (uint32_t i = 0; i + 1 < n; i++)
    ck_assert_double_eq_tol(q->K[i] / K_closed(t, i, b), 1.0, 1e-12);
  double(*x)[3] = malloc(sizeof *x * n);
  double(*f)[3] = calloc(n, sizeof *f);
  ck_assert_ptr_nonnull(x);
  ck_assert_ptr_nonnull(f);
  memcpy(x, t->rest, sizeof *x * n);
  f[n - 1][1] = -F;
  ts_qstatic_stats st;
  ck_assert_int_eq(ts_qstatic_solve(q, x, NULL, NULL, 0, F != 0 ? (const double(*)[3])f : NULL, &st),
                   0);
  ck_assert(st.converged);
  ck_assert(st.residual < p.tol);
  ck_assert_uint_eq(st.n_free, n - 1);
  /* closed form: spring i carries the weight of nodes i+1..n-1 and F, and
   * stretches by that over K_i (springs in series) */
  double y = 0, maxerr = 0, compliance = 0, stretch = 0;
  for (uint32_t i = 0; i + 1 < n; i++) {
    double T = (n - 1 - i) * NODE_MASS * G + F, K = K_closed(t, i, b);
    y -= t->rest[i][1] - t->rest[i + 1][1] + T / K;
    compliance += 1 / K;
    stretch += T / K;
    maxerr = fmax(maxerr, fabs(x[i + 1][1] - y));
    ck_assert_double_eq_tol(x[i + 1][0], 0, 1e-15);
    ck_assert_double_eq_tol(x[i + 1][2], 0, 1e-15);
  }
  /* tolerance: the chain's compliance matrix has entries at most its total
   * compliance, so residuals below tol on n - 1 nodes leave at most
   * (n - 1) * compliance * tol */
  *bound = (n - 1) * compliance * p.tol;
  printf("chain b = %g, tip load %g N: %u iterations, residual %.3g N, tip stretch %.4g mm, "
         "max deviation from closed form %.3g m (bound %.3g m)\n",
         b, F, st.iterations, st.residual, stretch * 1e3, maxerr, *bound);
  free(f);
  free(x);
  ts_qstatic_destroy(q);
  ts_tissue_destroy(t);
  return maxerr;
}

START_TEST(k_law_between_lengths) {
  const double b[2] = {0.5, 2.0};
  double bound;
  double err = hang(13, b[_i], 0, &bound);
  ck_assert_msg(err < bound, "b = %g: deviation %.3g m, bound %.3g m", b[_i], err, bound);
}
END_TEST

/* The tip load is 0.1 N (the chain's own weight is 12 x 2 g x 9.81 = 0.235 N):
 * through the chain's total compliance of 0.157 m/N at b = 0.5, leaving it
 * out would move the tip by 16 mm. */
START_TEST(tip_load) {
  double bound;
  double err = hang(13, 0.5, 0.1, &bound);
  ck_assert_msg(err < bound, "deviation %.3g m, bound %.3g m", err, bound);
}
END_TEST

/* A non-finite external force is refused before anything moves. */
START_TEST(tip_load_nan) {
  ts_tissue *t = chain3(4);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  ts_qstatic *q = NULL;
  ck_assert_int_eq(ts_qstatic_create(t, &p, &q), 0);
  double x[4][3], f[4][3];
  memcpy(x, t->rest, sizeof x);
  memset(f, 0, sizeof f);
  f[3][1] = NAN;
  ck_assert_int_eq(ts_qstatic_solve(q, x, NULL, NULL, 0, (const double(*)[3])f, NULL), TS_ENAN);
  ck_assert(memcmp(x, t->rest, sizeof x) == 0);
  ts_qstatic_destroy(q);
  ts_tissue_destroy(t);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("qstatic_chain");
  TCase *c = tcase_create("chain");
  tcase_set_timeout(c, 300);
  tcase_add_loop_test(c, k_law_between_lengths, 0, 2);
  tcase_add_test(c, tip_load);
  tcase_add_test(c, tip_load_nan);
  suite_add_tcase(s, c);
  return s;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
