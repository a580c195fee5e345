/*
 * test_massspring_step.c: Check suite for the mass-spring step's own
 * machinery (server/core/ts_ms_*.c), beside the physics of
 * test_mechanics.c: the force loop against a direct evaluation of the
 * spring law on springs of every class in counts that leave partial blocks
 * (the loop's per-field arrays and their padding), and strain limiting
 * when a single substep carries a spring from well inside its range to
 * far outside it (the shortcut that skips the limiting sweep must not skip
 * it then) or leaves every spring inside (no correction, the plain update).
 * Each test states its tolerance and why.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_tissue.h"

/* A deterministic pseudo-random number in [0, 1). */
static double rnd(uint32_t *s) {
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return (double)(*s >> 8) / 16777216.0;
}

/* The spring law of ts_tissue.h, evaluated directly with libm: adds spring
 * sp's tension (spring and damper) into f at the state (x, v). */
static void reference_force(const ts_spring *sp, const double (*x)[3], const double (*v)[3],
                            double (*f)[3]) {
  double d[3], w[3], l2 = 0, dv = 0;
  for (int c = 0; c < 3; c++) {
    d[c] = x[sp->b][c] - x[sp->a][c];
    w[c] = v[sp->b][c] - v[sp->a][c];
    l2 += d[c] * d[c];
    dv += d[c] * w[c];
  }
  double l = sqrt(l2), eps = (l - sp->rest) / sp->rest, ep = eps > 0 ? eps : 0;
  double kk = sp->k1 == 0 && sp->k2 == 0 ? sp->k : sp->k1 * exp(sp->b1 * ep) + sp->k2 * exp(sp->b2 * ep);
  double T = kk * (l - sp->rest) + sp->c * dv / l;
  for (int c = 0; c < 3; c++) {
    f[sp->a][c] += T * d[c] / l;
    f[sp->b][c] -= T * d[c] / l;
  }
}

/* 13 linear, 21 one-term and 27 two-term springs (none a multiple of the
 * loop's block of 16) between 24 nodes in random positions with random
 * velocities, strains between -0.2 and 0.3. Soft springs and heavy nodes,
 * so that the first step of 1 ms is one Taylor substep whose forces are
 * evaluated at the initial state, where t->f is left. The loop's
 * exponential is within 2 ulp of exp() and its arithmetic is ordered
 * differently from the reference's: relative 1e-12 of the largest force
 * leaves room for that rounding and none for a wrong constant or lane. */
START_TEST(test_force_loop_matches_law) {
  const uint32_t n = 24, n_lin = 13, n_one = 21, n_two = 27, ns = n_lin + n_one + n_two;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(n, ns, 0, &t), 0);
  uint32_t seed = 12345;
  for (uint32_t i = 0; i < n; i++) {
    for (int c = 0; c < 3; c++) {
      t->rest[i][c] = 0.05 * rnd(&seed);
      t->v[i][c] = 0.02 * (rnd(&seed) - 0.5);
    }
    t->inv_mass[i] = i == 0 ? 0.0 : 1.0; /* 1 kg, node 0 anchored */
  }
  memcpy(t->x, t->rest, sizeof *t->x * n);
  memcpy(t->x_prev, t->rest, sizeof *t->x * n);
  t->v[0][0] = t->v[0][1] = t->v[0][2] = 0;
  for (uint32_t s = 0; s < ns; s++) {
    ts_spring *sp = &t->springs[s];
    uint32_t a = s % n, b = (s * 7 + 3) % n;
    if (a == b) b = (b + 1) % n;
    sp->a = a < b ? a : b;
    sp->b = a < b ? b : a;
    double l = 0;
    for (int c = 0; c < 3; c++) l += pow(t->x[sp->b][c] - t->x[sp->a][c], 2);
    sp->rest = sqrt(l) / (1.0 + (-0.2 + 0.5 * rnd(&seed)));
    sp->c = 0.01 * rnd(&seed);
    if (s < n_lin) {
      sp->k = 0.5 + rnd(&seed);
    } else if (s < n_lin + n_one) {
      sp->k1 = 0.5 + rnd(&seed), sp->b1 = 1 + 10 * rnd(&seed);
    } else {
      sp->k1 = 0.5 + rnd(&seed), sp->b1 = 1 + 10 * rnd(&seed);
      sp->k2 = 0.5 + rnd(&seed), sp->b2 = s % 5 == 0 ? 0.0 : 12 + 10 * rnd(&seed);
    }
    sp->k = sp->k ? sp->k : sp->k1 + sp->k2;
  }
  double (*x0)[3] = malloc(sizeof *x0 * n), (*v0)[3] = malloc(sizeof *v0 * n);
  double (*fr)[3] = calloc(n, sizeof *fr);
  memcpy(x0, t->x, sizeof *x0 * n);
  memcpy(v0, t->v, sizeof *v0 * n);
  for (uint32_t s = 0; s < ns; s++)
    reference_force(&t->springs[s], (const double (*)[3])x0, (const double (*)[3])v0, fr);

  ts_step_stats st;
  ck_assert_int_eq(ts_massspring_step(t, 1e-3, NULL, 0, &st), 0);
  ck_assert_uint_eq(st.substeps, 1);
  ck_assert_double_eq(st.taylor_fraction, 1.0);
  double fmax = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) fmax = fmax > fabs(fr[i][c]) ? fmax : fabs(fr[i][c]);
  ck_assert(fmax > 1e-3); /* the springs really are loaded */
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++)
      ck_assert_msg(fabs(t->f[i][c] - fr[i][c]) <= 1e-12 * fmax, "node %u axis %d: %.17g vs %.17g",
                    i, c, t->f[i][c], fr[i][c]);
  free(x0);
  free(v0);
  free(fr);
  ts_tissue_destroy(t);
}
END_TEST

/* One spring from an anchored node to a free one of 1 g: 10 mm long,
 * k = 10 N/m, no damping, strain range [-0.2, 0.1], no gravity. Its
 * stable substep is far over 1 ms, so a step is one substep. */
static ts_tissue *limited_spring(void) {
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(2, 1, 0, &t), 0);
  t->rest[1][0] = 0.01;
  t->inv_mass[0] = 0;
  t->inv_mass[1] = 1e3;
  memcpy(t->x, t->rest, sizeof *t->x * 2);
  memcpy(t->x_prev, t->rest, sizeof *t->x * 2);
  memset(t->gravity, 0, sizeof t->gravity);
  t->springs[0] = (ts_spring){.a = 0, .b = 1, .rest = 0.01, .k = 10.0, .strain_min = -0.2,
                              .strain_max = 0.1};
  return t;
}

/* At rest (strain 0, far inside the range) the free node is thrown along
 * the spring at +-5 m/s: one substep of 1 ms would carry it to strain
 * +-0.5. Strain limiting must catch that in the same substep: the length
 * ends exactly on the bound (to 1e-12 m, rounding of the correction). */
START_TEST(test_limit_catches_one_substep_jump) {
  const double vel[2] = {5.0, -5.0}, bound[2] = {0.011, 0.008};
  for (int k = 0; k < 2; k++) {
    ts_tissue *t = limited_spring();
    t->v[1][0] = vel[k];
    ts_step_stats st;
    ck_assert_int_eq(ts_massspring_step(t, 1e-3, NULL, 0, &st), 0);
    ck_assert_uint_eq(st.substeps, 1);
    ck_assert_uint_gt(st.strain_limited, 0);
    ck_assert_double_eq_tol(t->x[1][0] - t->x[0][0], bound[k], 1e-12);
    ts_tissue_destroy(t);
  }
}
END_TEST

/* A slow node (1 mm/s) moves 1 um in a substep, strain 1e-4: nothing to
 * correct, and the Taylor update x1 = x0 + h v0 (no force at rest) holds
 * to rounding (1e-15 m on 10 mm). A spring pre-stretched to strain 0.0999,
 * just inside its bound, and pulled further stays within it. */
START_TEST(test_limit_leaves_inside_alone) {
  ts_tissue *t = limited_spring();
  t->v[1][0] = 1e-3;
  ts_step_stats st;
  ck_assert_int_eq(ts_massspring_step(t, 1e-3, NULL, 0, &st), 0);
  ck_assert_uint_eq(st.strain_limited, 0);
  ck_assert_double_eq_tol(t->x[1][0], 0.01 + 1e-6, 1e-15);
  ts_tissue_destroy(t);

  t = limited_spring();
  t->x[1][0] = t->x_prev[1][0] = 0.01 * 1.0999;
  t->f_ext[1][0] = 0.5; /* pulls on towards strain 5 */
  for (int s = 0; s < 50; s++) {
    ck_assert_int_eq(ts_massspring_step(t, 1e-3, NULL, 0, &st), 0);
    double eps = (t->x[1][0] - t->x[0][0]) / 0.01 - 1;
    ck_assert_msg(eps <= 0.1 + 1e-9, "step %d: strain %.12g", s, eps);
  }
  ts_tissue_destroy(t);
}
END_TEST

static Suite *massspring_step_suite(void) {
  Suite *s = suite_create("massspring_step");
  TCase *tc = tcase_create("step");
  tcase_add_test(tc, test_force_loop_matches_law);
  tcase_add_test(tc, test_limit_catches_one_substep_jump);
  tcase_add_test(tc, test_limit_leaves_inside_alone);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(massspring_step_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
