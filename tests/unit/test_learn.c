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
 *   - the sample store grows by doubling up to its cap.
 * These run on the plain solve (--qs-refine-edge 0); test_learn_refined.c
 * does the same on the refined solve a daemon session runs by default. The
 * presses and checks are learn_fixture.h's.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_learn.h"
#include "ts_qstatic.h"
#include "ts_tissue.h"
#include "learn_fixture.h"
#include "patch_fixture.h"
#include "test_util.h"

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
  /* "spread2r" (spread2's sweeps on the refined copy) is a kind of its own */
  ck_assert_int_eq(ts_learn_kind_parse("spread2r", &k), 0);
  ck_assert_int_eq(k, TS_LEARN_SPREAD2R);
  ck_assert_str_eq(ts_learn_kind_name(k), "spread2r");
  ck_assert_uint_eq(ts_learn_n_params(k, 4), 1 + TS_LEARN_HOPS2R);
  ck_assert_int_eq(ts_learn_theta_decode(TS_LEARN_SPREAD2R, 4, b9, sizeof b9, &m),
                   1 + TS_LEARN_HOPS2R == 1 + TS_LEARN_HOPS2 ? 0 : TS_EINVAL);
  ts_qstatic_destroy(q);
  ts_tissue_destroy(t);
}
END_TEST

/* Unconverged presses are counted: with the iteration cap at 3 sweeps a
 * 1 mm press on patch-S cannot reach the tolerance (it takes about 6,000
 * plain and 2,400 refined sweeps), so each recorded interval counts as
 * unconverged with its final max |R| above tol; with the default cap
 * (200,000) none does. Both the plain and the refined solve. Fails if the
 * counts are not kept (they would stay 0) or count converged solves. */
START_TEST(unconverged_counted) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  ck_assert_uint_eq(p.max_iter, 200000);
  /* two presses each (one under the sanitizers: the uncapped solves to
   * convergence are this case's time, and the second runs the same code) */
  const int presses = TU_ITERS(2, 1);
  for (int refined = 0; refined < 2; refined++)
    for (int capped = 0; capped < 2; capped++) {
      ts_qstatic_params pc = p;
      if (capped) pc.max_iter = 3;
      ts_qstatic *q = NULL;
      ck_assert_int_eq(ts_qstatic_create(t, &pc, &q), 0);
      ts_learner *l = NULL;
      ck_assert_int_eq(ts_learner_create(q, REGION_RANGE, 100000, &l), 0);
      if (refined)
        ck_assert_int_eq(ts_learner_set_refine(l, t, ts_qsrefine_mean_edge(q, t)), 0);
      double(*x)[3] = malloc(sizeof *x * t->n_nodes);
      ck_assert_ptr_nonnull(x);
      memcpy(x, t->rest, sizeof *x * t->n_nodes);
      for (int k = 0; k < presses; k++) {
        ts_learn_press pr = {{0, 0, 0}, {0, -1, 0}, PRESS_RADIUS, PRESS_STEP};
        memcpy(pr.point, x[0], sizeof pr.point);
        for (uint32_t i = 0; i < t->nodes_per_sheet; i++)
          if (fabs(t->rest[i][0]) + fabs(t->rest[i][2]) <
              fabs(pr.point[0]) + fabs(pr.point[2]))
            memcpy(pr.point, x[i], sizeof pr.point);
        ts_learn_step_stats st;
        ck_assert_int_eq(ts_learner_step(l, x, &pr, 1, &st), 0);
        ck_assert_int_eq(st.qs.converged, !capped);
        if (capped) ck_assert_uint_eq(st.qs.iterations, 3);
      }
      printf("%s solve, cap %u: %llu intervals, %llu unconverged, worst max |R| %.3g N (tol "
             "%.3g N)\n",
             refined ? "refined" : "plain", pc.max_iter, (unsigned long long)l->set->intervals,
             (unsigned long long)l->set->unconverged, l->set->worst_residual, q->p.tol);
      ck_assert_uint_eq(l->set->intervals, presses);
      ck_assert_uint_eq(l->set->unconverged, capped ? presses : 0);
      if (capped)
        ck_assert(l->set->worst_residual > q->p.tol);
      else
        ck_assert(l->set->worst_residual < q->p.tol);
      /* a copy for training keeps the counts */
      ts_learn_set *cp = NULL;
      ck_assert_int_eq(ts_learn_set_copy(l->set, &cp), 0);
      ck_assert_uint_eq(cp->unconverged, l->set->unconverged);
      ck_assert(cp->worst_residual == l->set->worst_residual);
      ts_learn_set_free(cp);
      free(x);
      ts_learner_destroy(l);
      ts_qstatic_destroy(q);
    }
  ts_tissue_destroy(t);
}
END_TEST

/* The sample store grows as samples arrive and stops at its cap. A set
 * may hold the largest --max-training-samples (10^8 samples, 49 GB) and
 * is created with room for TS_LEARN_SET_FIRST_ROOM only (before, it was
 * allocated whole, and that allocation failed: no quasi-static session
 * could be made). Presses on a small patch then fill a set of cap 1,000
 * through several doublings: the first interval's samples survive every
 * move, the last interval that does not fit is recorded up to the cap and
 * answered TS_EFULL, and so is the next. Reserving past the cap is
 * refused without a change. */
START_TEST(sample_store_grows) {
  ts_learn_set *big = NULL;
  ck_assert_int_eq(ts_learn_set_create(100000000u, 4, &big), 0);
  ck_assert_uint_eq(big->cap, 100000000u);
  ck_assert_uint_eq(big->room, TS_LEARN_SET_FIRST_ROOM);
  ck_assert_int_eq(ts_learn_set_reserve(big, 100000001u), TS_EFULL);
  ck_assert_uint_eq(big->room, TS_LEARN_SET_FIRST_ROOM);
  ck_assert_int_eq(ts_learn_set_reserve(big, 300), 0);
  ck_assert_uint_eq(big->room, 2 * TS_LEARN_SET_FIRST_ROOM);
  ck_assert_int_eq(ts_learn_set_reserve(big, 5000), 0); /* more than double: to the need */
  ck_assert_uint_eq(big->room, 5000);
  ts_learn_set_free(big);

  ts_patch_def d = ts_default_patch_def();
  d.resolution = 16;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  p.max_iter = 3; /* the store is under test, not the solve */
  ts_qstatic *q = NULL;
  ck_assert_int_eq(ts_qstatic_create(t, &p, &q), 0);
  const uint32_t cap = 1000;
  ts_learner *l = NULL;
  ck_assert_int_eq(ts_learner_create(q, REGION_RANGE, cap, &l), 0);
  ck_assert_uint_eq(l->set->room, TS_LEARN_SET_FIRST_ROOM);
  double(*x)[3] = malloc(sizeof *x * t->n_nodes);
  ck_assert_ptr_nonnull(x);
  memcpy(x, t->rest, sizeof *x * t->n_nodes);
  uint32_t mid = 0; /* the outer node nearest the middle, followed as it moves */
  for (uint32_t i = 1; i < t->nodes_per_sheet; i++)
    if (fabs(t->rest[i][0]) + fabs(t->rest[i][2]) < fabs(t->rest[mid][0]) + fabs(t->rest[mid][2]))
      mid = i;
  ts_learn_press pr = {{0, 0, 0}, {0, -1, 0}, PRESS_RADIUS, PRESS_STEP / 4};
  memcpy(pr.point, x[mid], sizeof pr.point);
  ck_assert_int_eq(ts_learner_step(l, x, &pr, 1, NULL), 0);
  const uint32_t per = l->set->n;
  ck_assert_uint_gt(per, 0);
  ck_assert_uint_lt(per, cap / 4); /* several intervals, so several doublings */
  ts_learn_sample first = l->set->s[0], last_of_first = l->set->s[per - 1];
  int rc = 0, intervals = 1;
  uint32_t rooms = 1, room = l->set->room;
  while (rc == 0 && intervals < 100) {
    uint32_t before = l->set->n;
    memcpy(pr.point, x[mid], sizeof pr.point);
    rc = ts_learner_step(l, x, &pr, 1, NULL);
    intervals++;
    if (l->set->room != room) {
      rooms++;
      room = l->set->room;
    }
    if (rc == 0) ck_assert_uint_eq(l->set->n, before + per);
  }
  printf("store: %u samples an interval, full after %d intervals, %u rooms\n", per, intervals,
         rooms);
  ck_assert_int_eq(rc, TS_EFULL);
  ck_assert_int_eq(l->set->grow_failed, 0); /* full, not out of memory */
  ck_assert_uint_eq(l->set->n, cap);
  ck_assert_uint_eq(l->set->room, cap);
  ck_assert_uint_ge(rooms, 3); /* 256, 512, 1000 */
  ck_assert_mem_eq(&l->set->s[0], &first, sizeof first);
  ck_assert_mem_eq(&l->set->s[per - 1], &last_of_first, sizeof last_of_first);
  memcpy(pr.point, x[mid], sizeof pr.point);
  ck_assert_int_eq(ts_learner_step(l, x, &pr, 1, NULL), TS_EFULL);
  ck_assert_uint_eq(l->set->n, cap);
  /* a copy for training holds exactly the samples */
  ts_learn_set *cp = NULL;
  ck_assert_int_eq(ts_learn_set_copy(l->set, &cp), 0);
  ck_assert_uint_eq(cp->n, cap);
  ck_assert_uint_eq(cp->room, cap);
  ck_assert_mem_eq(cp->s, l->set->s, sizeof *cp->s * cap);
  ts_learn_set_free(cp);
  free(x);
  ts_learner_destroy(l);
  ts_qstatic_destroy(q);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- patch-S: training and held-out presses ----------------------------- */

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

/* The patch and its training samples, recorded once for the test case
 * (recording is most of the case's time). */
static fixture shared;
static void shared_setup(void) {
  fixture_init(&shared, 0);
  record_training(&shared);
}
static void shared_teardown(void) { fixture_free(&shared); }

START_TEST(gd_matches_closed_form) { gd_check(&shared, "plain"); }
END_TEST

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
  if (!LEARN_FIGURES) return; /* one held-out press: the figures are the normal build's */
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

static Suite *suite(void) {
  Suite *s = suite_create("learn");
  TCase *c = tcase_create("qstatic");
  tcase_add_test(c, chain_static_deflection);
  tcase_add_test(c, bad_input);
  tcase_add_test(c, unconverged_counted);
  tcase_add_test(c, sample_store_grows);
  suite_add_tcase(s, c);
  c = tcase_create("learn");
  tcase_set_timeout(c, 600);
  tcase_add_unchecked_fixture(c, shared_setup, shared_teardown);
  tcase_add_test(c, gd_matches_closed_form);
  tcase_add_test(c, heldout_error);
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
