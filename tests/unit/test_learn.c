/*
 * test_learn.c: the quasi-static solve and the learned shortcut of the
 * second method (ts_qstatic.h, ts_learn.h; issue 6).
 *
 *   - the solve converges (residual below tol) and matches a hanging chain's
 *     static deflection in closed form;
 *   - gradient descent reaches the closed-form theta, for every model kind;
 *   - on patch-S (the benchmarks' resolution, 50), a tool pressing at
 *     several points and depths gives the training samples; on presses at
 *     other points every kind's RMS and maximum position errors against
 *     the solve are printed as a table and asserted (the held-out presses
 *     are solved once for all kinds), and the spread model is asserted to
 *     be far better than the method's and spread2 far better than
 *     spread (bench_learn measures the liver's worst case);
 *   - the same on the solve a daemon session runs by default (the region
 *     copied and refined to the tissue's mean outer-surface edge,
 *     `--qs-refine-edge auto`): samples recorded from the refined solve,
 *     gradient descent against the closed form, and every kind's held-out
 *     errors against the refined solve, printed and asserted.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_learn.h"
#include "ts_qstatic.h"
#include "ts_qstatic_refine.h"
#include "ts_tissue.h"
#include "patch_fixture.h"

/* ---- a hanging chain ---------------------------------------------------- */

START_TEST(chain_static_deflection) {
  const uint32_t n = 12;
  ts_tissue *t = fx_chain(n);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  ck_assert_double_eq_tol(p.E, 50, 1e-12);
  p.b = 2;
  p.d = 0.25;
  p.tol = 1e-11; /* N */
  p.max_iter = 2000000;
  ts_qstatic *q = NULL;
  ck_assert_int_eq(ts_qstatic_create(t, &p, &q), 0);
  double(*x)[3] = malloc(sizeof *x * n);
  memcpy(x, t->rest, sizeof *x * n);
  ts_qstatic_stats st;
  ck_assert_int_eq(ts_qstatic_solve(q, x, NULL, NULL, 0, NULL, &st), 0);
  ck_assert(st.converged);
  ck_assert(st.residual < p.tol);
  ck_assert_uint_eq(st.n_free, n - 1);
  const double maxerr = fx_chain_deviation((const double (*)[3])x, n);
  printf("chain: %u iterations, residual %.3g N, max deviation from closed form %.3g m\n",
         st.iterations, st.residual, maxerr);
  /* tolerance: the chain's compliance matrix has entries at most the total
   * compliance 6/250 + 5/50 = 0.124 m/N, so residuals below 1e-11 N on 11
   * nodes leave at most 11 * 0.124 * 1e-11 = 1.4e-11 m */
  ck_assert(maxerr < 1.4e-11);
  free(x);
  ts_qstatic_destroy(q);
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(bad_input) {
  ts_tissue *t = fx_chain(4);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  ts_qstatic *q = NULL;
  ts_qstatic_params bad = p;
  bad.d = 0;
  ck_assert_int_eq(ts_qstatic_create(t, &bad, &q), TS_EINVAL);
  bad = p;
  bad.E = NAN;
  ck_assert_int_eq(ts_qstatic_create(t, &bad, &q), TS_EINVAL);
  ck_assert_int_eq(ts_qstatic_create(t, &p, &q), 0);
  double x[4][3];
  memcpy(x, t->rest, sizeof x);
  uint32_t ctrl[2] = {1, 1};
  double pos[2][3] = {{0, 0, 0}, {0, 0, 0}};
  ck_assert_int_eq(ts_qstatic_solve(q, x, ctrl, (const double(*)[3])pos, 2, NULL, NULL), TS_EINVAL);
  ctrl[1] = 9;
  ck_assert_int_eq(ts_qstatic_solve(q, x, ctrl, (const double(*)[3])pos, 2, NULL, NULL), TS_EINVAL);
  pos[0][1] = NAN;
  ctrl[1] = 2;
  ck_assert_int_eq(ts_qstatic_solve(q, x, ctrl, (const double(*)[3])pos, 2, NULL, NULL), TS_ENAN);
  /* no outer surface: no region search */
  ck_assert_int_eq(ts_qstatic_select_region(q, (const double(*)[3])x, x[0], 0.01), TS_EINVAL);
  ts_learner *l = NULL;
  ck_assert_int_eq(ts_learner_create(q, 0.01, 10, &l), TS_EINVAL);
  ts_learn_model m;
  uint8_t b[8] = {0};
  ck_assert_int_eq(ts_learn_theta_decode(TS_LEARN_METHOD, 4, b, 8, &m), TS_EINVAL);
  ts_learn_kind k;
  ck_assert_int_eq(ts_learn_kind_parse("cubic", &k), TS_EINVAL);
  /* "spread" keeps its features and size; "spread2" is its own kind, and a
   * theta of the other's size is refused */
  ck_assert_int_eq(ts_learn_kind_parse("spread", &k), 0);
  ck_assert_int_eq(k, TS_LEARN_SPREAD);
  ck_assert_uint_eq(ts_learn_n_params(k, 4), 1 + TS_LEARN_HOPS);
  ck_assert_int_eq(ts_learn_kind_parse("spread2", &k), 0);
  ck_assert_int_eq(k, TS_LEARN_SPREAD2);
  ck_assert_str_eq(ts_learn_kind_name(k), "spread2");
  ck_assert_uint_eq(ts_learn_n_params(k, 4), 1 + TS_LEARN_HOPS2);
  uint8_t b9[8 * (1 + TS_LEARN_HOPS2)] = {0};
  ck_assert_int_eq(ts_learn_theta_decode(TS_LEARN_SPREAD, 4, b9, sizeof b9, &m), TS_EINVAL);
  ck_assert_int_eq(ts_learn_theta_decode(TS_LEARN_SPREAD2, 4, b9, sizeof b9, &m), 0);
  ts_qstatic_destroy(q);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- patch-S: training and held-out presses ----------------------------- */

#define PRESS_RADIUS 0.003 /* m: the nodes a 5 mm sphere holds when pressing */
#define PRESS_STEP 0.001   /* m per interval */
#define PRESS_STEPS 4      /* intervals per application: 1..4 mm deep */
#define REGION_RANGE 0.015 /* m */
/* the spread model's held-out figures on patch-S, measured (heldout_error) */
#define SPREAD_RMS_MM 0.022
#define SPREAD_MAX_MM 0.060
#define SPREAD_FACTOR 12.0
/* spread2's (the block-scaled sweeps, ts_learn.h), measured 0.00019 mm RMS
 * and 0.00068 mm max; asserted at these bounds (about 4 x): its sweeps all
 * but finish the relaxation on the patch, so what is left is the
 * unfinished tail of the slowest modes, which small rounding differences
 * between builds shift in proportion, not in absolute terms */
#define SPREAD2_RMS_MM 0.0006
#define SPREAD2_MAX_MM 0.0025

typedef struct fixture {
  ts_tissue *t;
  ts_qstatic *q;
  ts_learner *l;
  double (*x)[3];
  int refine; /* the learner solves on the refined copy */
} fixture;

/* refine: the presses are solved as a daemon session solves them by
 * default, on the region copied and refined to the tissue's mean
 * outer-surface edge (ts_shortcut_set_refine with --qs-refine-edge auto) */
static void fixture_init(fixture *f, int refine) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50; /* patch-S */
  ck_assert_int_eq(ts_patch_create(&d, &f->t), 0);
  ts_qstatic_params p = ts_qstatic_default_params(f->t);
  ck_assert_int_eq(ts_qstatic_create(f->t, &p, &f->q), 0);
  ck_assert_int_eq(ts_learner_create(f->q, REGION_RANGE, 400000, &f->l), 0);
  if (refine) {
    double edge = ts_qsrefine_mean_edge(f->q, f->t);
    ck_assert(edge > 0);
    ck_assert_int_eq(ts_learner_set_refine(f->l, f->t, edge), 0);
  }
  f->refine = refine;
  f->x = malloc(sizeof *f->x * f->t->n_nodes);
  ck_assert_ptr_nonnull(f->x);
}

static void fixture_free(fixture *f) {
  free(f->x);
  ts_learner_destroy(f->l);
  ts_qstatic_destroy(f->q);
  ts_tissue_destroy(f->t);
}

/* The outer-sheet node nearest (px, pz). */
static uint32_t surface_node(const fixture *f, double px, double pz) {
  uint32_t best = 0;
  double bd = INFINITY;
  for (uint32_t i = 0; i < f->t->nodes_per_sheet; i++) {
    double dx = f->t->rest[i][0] - px, dz = f->t->rest[i][2] - pz;
    if (dx * dx + dz * dz < bd) {
      bd = dx * dx + dz * dz;
      best = i;
    }
  }
  return best;
}

/* One application from rest: PRESS_STEPS intervals of PRESS_STEP each at
 * (px, pz). n_models 0: record; else compare each model with the solve. */
static void apply(fixture *f, double px, double pz, const ts_learn_model *models,
                  uint32_t n_models, ts_learn_error *err) {
  memcpy(f->x, f->t->rest, sizeof *f->x * f->t->n_nodes);
  uint32_t node = surface_node(f, px, pz);
  for (int k = 0; k < PRESS_STEPS; k++) {
    ts_learn_press p = {{0, 0, 0}, {0, -1, 0}, PRESS_RADIUS, PRESS_STEP};
    memcpy(p.point, f->x[node], sizeof p.point);
    if (n_models == 0) {
      ts_learn_step_stats st;
      ck_assert_int_eq(ts_learner_step(f->l, f->x, &p, 1, &st), 0);
      ck_assert(st.qs.converged);
      if (getenv("TS_LEARN_VERBOSE"))
        printf("press %d: %u control, %u free, %u iterations, residual %.3g N (tol %.3g)\n", k,
               st.n_ctrl, st.n_free, st.qs.iterations, st.qs.residual, f->q->p.tol);
      ck_assert(st.n_ctrl > 0 && st.n_free > 0);
      /* the solve that ran: the refined copy's free nodes include the new
       * ones (about twice the tissue's in the region) */
      if (f->refine)
        ck_assert_uint_gt(st.qs.n_free, st.n_free);
      else
        ck_assert_uint_eq(st.qs.n_free, st.n_free);
    } else {
      ck_assert_int_eq(ts_learner_compare_models(f->l, f->x, &p, models, n_models, err), 0);
    }
  }
}

static const double train_pts[][2] = {{0, 0},        {0.012, 0},      {-0.010, 0.008},
                                      {0.004, -0.014}, {-0.018, -0.006}, {0.020, 0.016}};
static const double held_pts[][2] = {{0.007, 0.009}, {-0.013, 0.015}, {0.016, -0.011}};
#define N_TRAIN (int)(sizeof train_pts / sizeof train_pts[0])
#define N_HELD (int)(sizeof held_pts / sizeof held_pts[0])

static void record_training(fixture *f) {
  for (int i = 0; i < N_TRAIN; i++) apply(f, train_pts[i][0], train_pts[i][1], NULL, 0, NULL);
}

/* The patch and its training samples, recorded once for each test case
 * (recording is most of a case's time): from the plain solve and from the
 * refined one. */
static fixture shared, shared_refined;
static void shared_setup(void) {
  fixture_init(&shared, 0);
  record_training(&shared);
}
static void shared_teardown(void) { fixture_free(&shared); }
static void refined_setup(void) {
  fixture_init(&shared_refined, 1);
  record_training(&shared_refined);
}
static void refined_teardown(void) { fixture_free(&shared_refined); }

/* Gradient descent against the closed form, every kind, on f's samples. */
static void gd_check(const fixture *f, const char *label) {
  for (int kind = TS_LEARN_METHOD; kind <= TS_LEARN_KIND_LAST; kind++) {
    ts_learn_model cf, gd;
    ck_assert_int_eq(ts_learn_train_closed(f->l->set, (ts_learn_kind)kind, &cf), 0);
    ts_learn_train_opts o = ts_learn_train_defaults();
    ck_assert_int_eq(ts_learn_train_gd(f->l->set, (ts_learn_kind)kind, &o, &gd), 0);
    ck_assert(gd.converged);
    double worst = 0;
    for (uint32_t a = 0; a < cf.n_params; a++)
      worst = fmax(worst, fabs(gd.theta[a] - cf.theta[a]) / fabs(cf.theta[a]));
    printf("%s %s: %u samples, gradient descent %llu iterations (last relative change %.3g), "
           "largest relative difference from the closed form %.3g, loss %.6g vs %.6g m^2\n",
           label, ts_learn_kind_name((ts_learn_kind)kind), f->l->set->n,
           (unsigned long long)gd.iterations, gd.rel_change, worst, gd.loss, cf.loss);
    /* 1e-6 relative, every parameter: the figure. Stopping at a
     * relative change of 1e-15 (the default) leaves about 1e-15 times the
     * condition number of the scaled moments: far below it for the method
     * and rich models; the spread model's is about 1e8 (its later sweeps
     * are nearly proportional), measured 8e-8 (8e-7 with 1e-14) */
    ck_assert(worst < 1e-6);
    ck_assert(gd.loss <= cf.loss * (1 + 1e-9));
  }
}

START_TEST(gd_matches_closed_form) { gd_check(&shared, "plain"); }
END_TEST

START_TEST(gd_matches_closed_form_refined) { gd_check(&shared_refined, "refined"); }
END_TEST

#define N_KINDS (TS_LEARN_KIND_LAST + 1)

/* Every kind (closed form) against the solve f runs, on the held-out
 * presses (solved once for all kinds); prints the table and gives each
 * kind's RMS and max error in mm. */
static void heldout_table(const fixture *fx, const char *label, double rms_mm[N_KINDS],
                          double max_mm[N_KINDS]) {
  fixture f = *fx;
  ts_learn_model m[N_KINDS];
  ts_learn_error e[N_KINDS];
  memset(e, 0, sizeof e);
  for (int kind = 0; kind < N_KINDS; kind++)
    ck_assert_int_eq(ts_learn_train_closed(f.l->set, (ts_learn_kind)kind, &m[kind]), 0);
  for (int i = 0; i < N_HELD; i++) apply(&f, held_pts[i][0], held_pts[i][1], m, N_KINDS, e);
  printf("held-out error on patch-S, %s solve, %llu positions (RMS displacement %.4f mm, max "
         "%.4f mm):\n",
         label, (unsigned long long)e[0].n, sqrt(e[0].sum_disp2 / e[0].n) * 1e3,
         e[0].max_disp * 1e3);
  printf("  %-7s %7s %9s %7s %9s  theta\n", "kind", "RMS mm", "RMS/disp", "max mm", "max/disp");
  for (int kind = 0; kind < N_KINDS; kind++) {
    ck_assert(e[kind].n > 0 && e[kind].n == e[0].n);
    double rms = sqrt(e[kind].sum_err2 / e[kind].n), drms = sqrt(e[kind].sum_disp2 / e[kind].n);
    rms_mm[kind] = rms * 1e3;
    max_mm[kind] = e[kind].max_err * 1e3;
    printf("  %-7s %7.4f %8.1f%% %7.4f %8.1f%% ", ts_learn_kind_name((ts_learn_kind)kind),
           rms_mm[kind], 100 * rms / drms, max_mm[kind], 100 * e[kind].max_err / e[kind].max_disp);
    for (uint32_t a = 0; a < m[kind].n_params; a++) printf(" %.4g", m[kind].theta[a]);
    printf("\n");
  }
}

START_TEST(heldout_error) {
  double rms_mm[N_KINDS], max_mm[N_KINDS];
  heldout_table(&shared, "plain", rms_mm, max_mm);
  printf("spread vs method: RMS %.1f x, max %.1f x smaller\n",
         rms_mm[TS_LEARN_METHOD] / rms_mm[TS_LEARN_SPREAD],
         max_mm[TS_LEARN_METHOD] / max_mm[TS_LEARN_SPREAD]);
  printf("spread2: RMS %.3g mm, max %.3g mm\n", rms_mm[TS_LEARN_SPREAD2], max_mm[TS_LEARN_SPREAD2]);
  printf("spread2 vs spread: RMS %.1f x, max %.1f x smaller\n",
         rms_mm[TS_LEARN_SPREAD] / rms_mm[TS_LEARN_SPREAD2],
         max_mm[TS_LEARN_SPREAD] / max_mm[TS_LEARN_SPREAD2]);
  /* The figures these models achieve on patch-S (6 training presses, 3
   * held-out ones, 4 intervals of 1 mm each, region range 15 mm), measured
   * (RMS displacement 0.318 mm, max 0.964 mm):
   *   method  RMS 0.276 mm (87 %), max 0.983 mm (102 %)
   *   rich    RMS 0.258 mm (81 %), max 1.016 mm (105 %)
   *   spread  RMS 0.022 mm (6.9 %), max 0.060 mm (6.2 %)
   *   spread2 RMS 0.00019 mm (0.06 %), max 0.00068 mm (0.07 %)
   * The method's and the rich model see only forces at or next to the held
   * nodes, so the displacement that spreads through the region is mostly
   * missed; the spread model's features carry it (ts_learn.h). Asserted
   * with a 15 % margin for rounding differences between builds. */
  ck_assert(rms_mm[TS_LEARN_METHOD] < 0.276 * 1.15);
  ck_assert(max_mm[TS_LEARN_METHOD] < 0.983 * 1.15);
  ck_assert(rms_mm[TS_LEARN_RICH] < 0.258 * 1.15);
  ck_assert(max_mm[TS_LEARN_RICH] < 1.016 * 1.15);
  ck_assert(rms_mm[TS_LEARN_SPREAD] < SPREAD_RMS_MM * 1.15);
  ck_assert(max_mm[TS_LEARN_SPREAD] < SPREAD_MAX_MM * 1.15);
  /* the richer models are the better ones on held-out presses; the spread
   * model by a factor of about SPREAD_FACTOR in RMS (measured), asserted at
   * half of it */
  ck_assert(rms_mm[TS_LEARN_RICH] < rms_mm[TS_LEARN_METHOD]);
  ck_assert(rms_mm[TS_LEARN_SPREAD] * SPREAD_FACTOR / 2 < rms_mm[TS_LEARN_METHOD]);
  ck_assert(max_mm[TS_LEARN_SPREAD] * 4 < max_mm[TS_LEARN_METHOD]);
  /* spread2, the spread model's successor: at least as good as the spread
   * model here (measured about 100 x better), and its own figures. Its
   * worst case on the liver (5.6 % of the max displacement, where the
   * spread model gave 81 %) is measured by bench_learn: the liver's solves
   * take longer than this suite may. */
  ck_assert(rms_mm[TS_LEARN_SPREAD2] < SPREAD2_RMS_MM);
  ck_assert(max_mm[TS_LEARN_SPREAD2] < SPREAD2_MAX_MM);
  ck_assert(rms_mm[TS_LEARN_SPREAD2] * 10 < rms_mm[TS_LEARN_SPREAD]);
  ck_assert(max_mm[TS_LEARN_SPREAD2] * 10 < max_mm[TS_LEARN_SPREAD]);
}
END_TEST

START_TEST(heldout_error_refined) {
  double rms_mm[N_KINDS], max_mm[N_KINDS];
  heldout_table(&shared_refined, "refined", rms_mm, max_mm);
  /* The figures on the solve a daemon session runs by default (the same
   * presses; samples and held-out positions from the refined solve; RMS
   * displacement 0.283 mm, max 0.984 mm), measured:
   *   method  RMS 0.244 mm (86 %), max 0.967 mm (98 %)
   *   rich    RMS 0.228 mm (81 %), max 0.977 mm (99 %)
   *   spread  RMS 0.061 mm (22 %), max 0.348 mm (35 %)
   *   spread2 RMS 0.044 mm (16 %), max 0.328 mm (33 %)
   * The method's model does on the refined solve what it does on the plain
   * one. The spread models lose most of their edge: their features relax
   * the tissue's own mesh (ts_learn.h), whose equilibrium is not the
   * refined copy's, so the difference between the two solves (which grows
   * with each interval of a press: the state the refined solve left is not
   * at rest on the tissue's mesh) is what remains; trained on plain-solve
   * samples instead, spread2 is at 0.060 mm and 0.454 mm against the
   * refined solve (bench_learn). Asserted with the plain case's 15 %
   * margin. */
  ck_assert(rms_mm[TS_LEARN_METHOD] < 0.244 * 1.15);
  ck_assert(max_mm[TS_LEARN_METHOD] < 0.967 * 1.15);
  ck_assert(rms_mm[TS_LEARN_RICH] < 0.228 * 1.15);
  ck_assert(max_mm[TS_LEARN_RICH] < 0.977 * 1.15);
  ck_assert(rms_mm[TS_LEARN_SPREAD] < 0.061 * 1.15);
  ck_assert(max_mm[TS_LEARN_SPREAD] < 0.348 * 1.15);
  ck_assert(rms_mm[TS_LEARN_SPREAD2] < 0.044 * 1.15);
  ck_assert(max_mm[TS_LEARN_SPREAD2] < 0.328 * 1.15);
  /* the order holds: rich before the method, spread2 best, about 5.5 x
   * the method's RMS (asserted at 4 x) */
  ck_assert(rms_mm[TS_LEARN_RICH] < rms_mm[TS_LEARN_METHOD]);
  ck_assert(rms_mm[TS_LEARN_SPREAD2] < rms_mm[TS_LEARN_SPREAD]);
  ck_assert(rms_mm[TS_LEARN_SPREAD2] * 4 < rms_mm[TS_LEARN_METHOD]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("learn");
  TCase *c = tcase_create("qstatic");
  tcase_add_test(c, chain_static_deflection);
  tcase_add_test(c, bad_input);
  suite_add_tcase(s, c);
  c = tcase_create("learn");
  tcase_set_timeout(c, 600);
  tcase_add_unchecked_fixture(c, shared_setup, shared_teardown);
  tcase_add_test(c, gd_matches_closed_form);
  tcase_add_test(c, heldout_error);
  suite_add_tcase(s, c);
  c = tcase_create("refined");
  tcase_set_timeout(c, 600);
  tcase_add_unchecked_fixture(c, refined_setup, refined_teardown);
  tcase_add_test(c, gd_matches_closed_form_refined);
  tcase_add_test(c, heldout_error_refined);
  suite_add_tcase(s, c);
  return s;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* the figures survive a failing case's exit */
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
