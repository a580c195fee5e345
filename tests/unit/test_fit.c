/*
 * test_fit.c: Check suite for the least-squares fit of sigma = a*e^(b*strain)
 * (server/core/ts_fit.h).
 *
 * - Noiseless samples of known laws (rising, falling, steep, offset and
 *   shuffled strains, repeated strains) give a and b back to 1e-6 relative
 *   (the bound; the fit actually lands within ~1e-12).
 * - Noisy samples (fixed-seed generator, so every run sees the same data)
 *   give the same optimum as two independent solutions: Levenberg-Marquardt
 *   on (a, b) directly, started far away, and a brute-force scan of b on a
 *   1e-4 grid with the closed-form a.
 * - Hand-computable cases give exact a, b, RMSE and R^2.
 * - A minimum far beyond the dense scan is still found; bad input is refused
 *   with the intended code and message.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_fit.h"

/* ---- helpers ---------------------------------------------------------------- */

/* splitmix64: a fixed, platform-independent stream */
static uint64_t rng_state;
static double rng_uniform(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return ((z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double rng_normal(void) {
  double u = rng_uniform(), v = rng_uniform();
  return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static double rel(double x, double ref) { return fabs(x - ref) / fabs(ref); }

static ts_expfit fit_ok(const double *e, const double *s, uint32_t n) {
  ts_expfit f;
  char err[256];
  int rc = ts_fit_exp(e, s, NULL, n, &f, err, sizeof err);
  ck_assert_msg(rc == 0, "fit failed: %d %s", rc, err);
  return f;
}

/* Closed-form best a for a given b. */
static double best_a(const double *e, const double *s, uint32_t n, double b) {
  double num = 0, den = 0;
  for (uint32_t i = 0; i < n; i++) {
    double E = exp(b * e[i]);
    num += s[i] * E;
    den += E * E;
  }
  return num / den;
}

/* Levenberg-Marquardt on S(a, b) in the original variables: an independent
 * route to the optimum (no profile, no normalisation, no scan). */
static void lm_fit(const double *e, const double *s, uint32_t n, double a, double b, double *a_out,
                   double *b_out) {
  double lambda = 1e-3;
  double S = ts_fit_exp_sse(e, s, n, a, b);
  for (int it = 0; it < 20000; it++) {
    double jtj11 = 0, jtj12 = 0, jtj22 = 0, g1 = 0, g2 = 0;
    for (uint32_t i = 0; i < n; i++) {
      double E = exp(b * e[i]);
      double r = s[i] - a * E;
      double j1 = E, j2 = a * e[i] * E;
      jtj11 += j1 * j1;
      jtj12 += j1 * j2;
      jtj22 += j2 * j2;
      g1 += j1 * r;
      g2 += j2 * r;
    }
    double m11 = jtj11 * (1 + lambda), m22 = jtj22 * (1 + lambda);
    double det = m11 * m22 - jtj12 * jtj12;
    double da = (m22 * g1 - jtj12 * g2) / det, db = (m11 * g2 - jtj12 * g1) / det;
    double S2 = ts_fit_exp_sse(e, s, n, a + da, b + db);
    if (S2 <= S) {
      a += da;
      b += db;
      int done = fabs(da) <= 1e-15 * fabs(a) && fabs(db) <= 1e-15 * fabs(b);
      S = S2;
      lambda = lambda > 1e-12 ? lambda / 10 : lambda;
      if (done) break;
    } else {
      lambda *= 10;
      if (lambda > 1e20) break; /* no descent left: at the optimum to rounding */
    }
  }
  *a_out = a;
  *b_out = b;
}

/* ---- noiseless recovery ----------------------------------------------------- */

START_TEST(test_noiseless_recovery) {
  static const struct {
    double a, b, e0, e1;
    uint32_t n;
  } laws[] = {
      {658.7, 2.55, 0.0, 0.5, 20},    /* the default mucosa law */
      {1000.0, 12.0, -0.05, 0.3, 30}, /* negative strains included */
      {50.0, -3.0, 0.0, 0.8, 9},      /* falling */
      {2.0e5, 0.5, 0.1, 0.2, 3},      /* three samples, narrow range */
      {3.3, 25.0, 0.0, 0.6, 40},      /* steep: stresses span e^15 */
      {7864.0, 2.55, 0.3, 1.9, 12},   /* offset range up to rupture strain */
  };
  for (size_t k = 0; k < sizeof laws / sizeof laws[0]; k++) {
    double e[64], s[64];
    uint32_t n = laws[k].n;
    for (uint32_t i = 0; i < n; i++) {
      /* shuffled order: i*7 mod n visits every index once for these n */
      uint32_t j = (i * 7u) % n;
      e[i] = laws[k].e0 + (laws[k].e1 - laws[k].e0) * j / (n - 1);
      s[i] = laws[k].a * exp(laws[k].b * e[i]);
    }
    ts_expfit f = fit_ok(e, s, n);
    /* the bound: 1e-6 relative */
    ck_assert_msg(rel(f.a, laws[k].a) <= 1e-6, "law %zu: a %.17g vs %.17g", k, f.a, laws[k].a);
    ck_assert_msg(rel(f.b, laws[k].b) <= 1e-6, "law %zu: b %.17g vs %.17g", k, f.b, laws[k].b);
    /* exact data: essentially no residual */
    double smax = 0;
    for (uint32_t i = 0; i < n; i++) smax = fmax(smax, s[i]);
    ck_assert_msg(f.rmse <= 1e-12 * smax, "law %zu: rmse %g", k, f.rmse);
    ck_assert_msg(fabs(f.r2 - 1.0) <= 1e-12, "law %zu: r2 %.17g", k, f.r2);
    ck_assert_uint_eq(f.n, n);
    printf("noiseless %zu: a %.3g b %.3g: rel. error a %.1e b %.1e\n", k, laws[k].a, laws[k].b,
           rel(f.a, laws[k].a), rel(f.b, laws[k].b));
    /* the log-linear fit is exact on exact data too */
    ck_assert_msg(rel(f.b_loglinear, laws[k].b) <= 1e-9, "law %zu: loglinear b %.17g", k,
                  f.b_loglinear);
  }
}
END_TEST

START_TEST(test_repeated_strains) {
  /* two distinct strains, repeated: the optimum passes through the mean
   * stress at each, so a = mean at 0, e^b = mean at 1 / mean at 0. Here
   * means 2 and 4: a = 2, b = ln 2, residuals -1, +1, 0:
   * RMSE = sqrt(2/3); mean stress 8/3, SS_tot = 42/9, R^2 = 1 - 2/(42/9) = 4/7. */
  double e[3] = {0.0, 0.0, 1.0}, s[3] = {1.0, 3.0, 4.0};
  ts_expfit f = fit_ok(e, s, 3);
  ck_assert_msg(rel(f.a, 2.0) <= 1e-13, "a %.17g", f.a);
  ck_assert_msg(rel(f.b, log(2.0)) <= 1e-13, "b %.17g", f.b);
  ck_assert_msg(rel(f.rmse, sqrt(2.0 / 3.0)) <= 1e-13, "rmse %.17g", f.rmse);
  ck_assert_msg(rel(f.r2, 4.0 / 7.0) <= 1e-13, "r2 %.17g", f.r2);
  ck_assert_msg(rel(f.ss_res, 2.0) <= 1e-13, "ss_res %.17g", f.ss_res);

  /* equal stresses: b = 0 exactly, a = the stress, R^2 = 1 by convention */
  double t[4] = {5.0, 5.0, 5.0, 5.0}, u[4] = {0.0, 0.1, 0.2, 0.4};
  f = fit_ok(u, t, 4);
  ck_assert(f.b == 0.0);
  ck_assert_msg(rel(f.a, 5.0) <= 1e-15, "a %.17g", f.a);
  ck_assert(f.rmse == 0.0);
  ck_assert(f.r2 == 1.0);
}
END_TEST

/* ---- noisy samples against independent solutions ------------------------------ */

START_TEST(test_noisy_matches_independent_solutions) {
  static const struct {
    double a, b, noise;
    uint64_t seed;
  } cases[] = {
      {700.0, 3.0, 10.0, 1},  /* 10 Pa noise on 700..2300 Pa */
      {1500.0, 9.0, 40.0, 2}, /* stiffening faster */
      {300.0, 1.2, 25.0, 3},  /* weak exponential, heavy noise */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    double e[40], s[40];
    uint32_t n = 40;
    rng_state = cases[k].seed;
    for (uint32_t i = 0; i < n; i++) {
      e[i] = 0.01 * (i + 1);
      s[i] = cases[k].a * exp(cases[k].b * e[i]) + cases[k].noise * rng_normal();
      ck_assert(s[i] > 0);
    }
    ts_expfit f = fit_ok(e, s, n);
    double S = ts_fit_exp_sse(e, s, n, f.a, f.b);
    ck_assert_msg(rel(S, f.ss_res) <= 1e-9, "case %zu: reported S %.17g vs %.17g", k, f.ss_res, S);
    ck_assert_msg(rel(f.rmse, sqrt(S / n)) <= 1e-9, "case %zu: rmse", k);
    double mean = 0, tot = 0;
    for (uint32_t i = 0; i < n; i++) mean += s[i] / n;
    for (uint32_t i = 0; i < n; i++) tot += (s[i] - mean) * (s[i] - mean);
    ck_assert_msg(fabs(f.r2 - (1.0 - S / tot)) <= 1e-12, "case %zu: r2", k);
    ck_assert_msg(f.optimality <= 1e-6, "case %zu: optimality %g", k, f.optimality);

    /* 1. Levenberg-Marquardt from far away (a x 10, b / 4). Both solutions are
     * zeros of the same gradient, so they agree to rounding times the
     * problem's conditioning: 1e-8 relative leaves a wide margin. */
    double a_lm, b_lm;
    lm_fit(e, s, n, 10.0 * cases[k].a, cases[k].b / 4.0, &a_lm, &b_lm);
    ck_assert_msg(rel(f.a, a_lm) <= 1e-8, "case %zu: a %.17g vs LM %.17g", k, f.a, a_lm);
    ck_assert_msg(rel(f.b, b_lm) <= 1e-8, "case %zu: b %.17g vs LM %.17g", k, f.b, b_lm);

    /* 2. brute force: b on a 1e-4 grid over [-20, 40], a in closed form. No
     * grid point may beat the fit (beyond rounding, 1e-12 relative), and the
     * best grid point must lie within one grid step of the fitted b. */
    double best_S = INFINITY, best_b = 0;
    for (int j = -200000; j <= 400000; j++) {
      double bb = j * 1e-4;
      double S2 = ts_fit_exp_sse(e, s, n, best_a(e, s, n, bb), bb);
      if (S2 < best_S) best_S = S2, best_b = bb;
    }
    ck_assert_msg(best_S >= S * (1 - 1e-12), "case %zu: grid S %.17g beats fit %.17g", k, best_S,
                  S);
    ck_assert_msg(fabs(best_b - f.b) <= 1e-4, "case %zu: grid b %.6f vs fit %.9f", k, best_b, f.b);

    printf(
        "noisy %zu: a %.10g b %.10g; vs LM %.1e %.1e; grid b %.4f; S %.6g, "
        "log-linear S %.6g; R2 %.6f\n",
        k, f.a, f.b, rel(f.a, a_lm), rel(f.b, b_lm), best_b, S,
        ts_fit_exp_sse(e, s, n, f.a_loglinear, f.b_loglinear), f.r2);
    /* the log-linear answer is a different criterion: never better in S */
    double S_ll = ts_fit_exp_sse(e, s, n, f.a_loglinear, f.b_loglinear);
    ck_assert_msg(S_ll > S, "case %zu: log-linear S %.17g <= %.17g", k, S_ll, S);
  }
}
END_TEST

START_TEST(test_far_minimum) {
  /* samples crowding the largest strain: the optimum needs b*range ~ 600,
   * beyond the dense part of the scan (|B| <= 64); it must still be found.
   * Its S is 2 (the two low samples at strains 0 and 0.9 miss by ~1 each),
   * far below the b -> infinity limit 1 + 1 + 50^2 = 2502. */
  double e[4] = {0.0, 0.9, 0.995, 1.0}, s[4] = {1.0, 1.0, 50.0, 1000.0};
  ts_expfit f = fit_ok(e, s, 4);
  ck_assert_msg(f.b > 64.0, "b %.6g", f.b);
  ck_assert_msg(fabs(f.ss_res - 2.0) < 1e-6, "S %.17g", f.ss_res);
  ck_assert_msg(f.optimality <= 1e-6, "optimality %g", f.optimality);
  /* locally optimal: moving b either way (with its best a) costs */
  for (int sgn = -1; sgn <= 1; sgn += 2) {
    double bb = f.b * (1 + sgn * 1e-3);
    ck_assert(ts_fit_exp_sse(e, s, 4, best_a(e, s, 4, bb), bb) > f.ss_res);
  }

  /* crowding so tight that the optimum's a underflows: refused, not wrong */
  double e2[5] = {0.0, 0.5, 0.99, 0.995, 1.0}, s2[5] = {1, 1, 1, 2, 1000};
  ts_expfit g;
  char err[256];
  ck_assert_int_eq(ts_fit_exp(e2, s2, NULL, 5, &g, err, sizeof err), TS_ERANGE);
  ck_assert_ptr_nonnull(strstr(err, "outside the range of a double"));
}
END_TEST

/* ---- refusals ------------------------------------------------------------------ */

START_TEST(test_refusals) {
  char err[256];
  ts_expfit f, untouched;
  memset(&untouched, 0x5a, sizeof untouched);
  f = untouched;
  double e[4] = {0.0, 0.1, 0.2, 0.3}, s[4] = {1.0, 2.0, 3.0, 4.0};
  uint32_t lines[4] = {4, 7, 9, 12};

  ck_assert_int_eq(ts_fit_exp(e, s, NULL, 2, &f, err, sizeof err), TS_EINVAL);
  ck_assert_str_eq(err, "2 samples: at least 3 are needed to fit a and b");
  ck_assert_int_eq(ts_fit_exp(NULL, s, NULL, 4, &f, err, sizeof err), TS_EINVAL);
  ck_assert_int_eq(ts_fit_exp(e, NULL, NULL, 4, &f, err, sizeof err), TS_EINVAL);

  double bad[4];
  memcpy(bad, e, sizeof bad);
  bad[1] = NAN;
  ck_assert_int_eq(ts_fit_exp(bad, s, NULL, 4, &f, err, sizeof err), TS_ENAN);
  ck_assert_str_eq(err, "sample 2: strain is not finite");
  memcpy(bad, s, sizeof bad);
  bad[3] = INFINITY;
  ck_assert_int_eq(ts_fit_exp(e, bad, lines, 4, &f, err, sizeof err), TS_ENAN);
  ck_assert_str_eq(err, "line 12: stress is not finite");

  memcpy(bad, s, sizeof bad);
  bad[2] = 0.0; /* the unloaded origin of a test */
  ck_assert_int_eq(ts_fit_exp(e, bad, lines, 4, &f, err, sizeof err), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "line 9: stress 0 is not positive"));
  bad[2] = -3.0;
  ck_assert_int_eq(ts_fit_exp(e, bad, NULL, 4, &f, err, sizeof err), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "sample 3: stress -3 is not positive"));
  memcpy(bad, s, sizeof bad);
  bad[0] = 2e15;
  ck_assert_int_eq(ts_fit_exp(e, bad, NULL, 4, &f, err, sizeof err), TS_ERANGE);

  double same[4] = {0.2, 0.2, 0.2, 0.2};
  ck_assert_int_eq(ts_fit_exp(same, s, NULL, 4, &f, err, sizeof err), TS_EINVAL);
  ck_assert_str_eq(err, "all 4 strains are equal (0.2): b cannot be determined from one strain");

  memcpy(bad, e, sizeof bad);
  bad[0] = -1.0;
  ck_assert_int_eq(ts_fit_exp(bad, s, NULL, 4, &f, err, sizeof err), TS_ERANGE);
  ck_assert_ptr_nonnull(strstr(err, "zero length"));
  double percent[4] = {0, 10, 20, 30}; /* strain in percent */
  ck_assert_int_eq(ts_fit_exp(percent, s, NULL, 4, &f, err, sizeof err), TS_ERANGE);
  ck_assert_ptr_nonnull(strstr(err, "sample 3: strain 20 is over 10"));
  ck_assert_ptr_nonnull(strstr(err, "not in percent"));

  /* a refused fit leaves the output alone */
  ck_assert(memcmp(&f, &untouched, sizeof f) == 0);
}
END_TEST

static Suite *fit_suite(void) {
  Suite *su = suite_create("fit");
  TCase *tc = tcase_create("exponential");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_noiseless_recovery);
  tcase_add_test(tc, test_repeated_strains);
  tcase_add_test(tc, test_noisy_matches_independent_solutions);
  tcase_add_test(tc, test_far_minimum);
  tcase_add_test(tc, test_refusals);
  suite_add_tcase(su, tc);
  return su;
}

int main(void) {
  SRunner *sr = srunner_create(fit_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
