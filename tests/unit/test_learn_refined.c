/*
 * test_learn_refined.c: the learned shortcut (ts_learn.h; issue 6) on the
 * solve a daemon session runs by default: each press's region copied and
 * refined to the tissue's mean outer-surface edge (ts_qstatic_refine.h,
 * `--qs-refine-edge auto`), the samples recorded from that solve. On
 * patch-S with test_learn.c's presses (learn_fixture.h):
 *
 *   - every recorded press ran on the refined copy (its free nodes outnumber
 *     the tissue's);
 *   - gradient descent reaches the closed-form theta within 1e-6, every kind;
 *   - every kind's held-out RMS and maximum errors against the refined solve
 *     are printed as a table and asserted.
 *
 * Its own program (not a case of test_learn.c): under ASan on a loaded
 * machine the two together took 382 s of the 600 s a test may.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_learn.h"
#include "learn_fixture.h"

/* The patch and its training samples from the refined solve, recorded once
 * for the test case (recording is most of the case's time). */
static fixture shared_refined;
static void refined_setup(void) {
  fixture_init(&shared_refined, 1);
  record_training(&shared_refined);
}
static void refined_teardown(void) { fixture_free(&shared_refined); }

START_TEST(gd_matches_closed_form_refined) { gd_check(&shared_refined, "refined"); }
END_TEST

START_TEST(heldout_error_refined) {
  double rms_mm[N_KINDS], max_mm[N_KINDS];
  heldout_table(&shared_refined, "refined", rms_mm, max_mm);
  /* the copy's sweeps kept to the start blocks on every press of patch-S */
  ck_assert_uint_eq(shared_refined.l->n_refreshed, 0);
  printf("spread2r on the refined solve: RMS %.4g mm, max %.4g mm\n", rms_mm[TS_LEARN_SPREAD2R],
         max_mm[TS_LEARN_SPREAD2R]);
  if (!LEARN_FIGURES) return; /* one held-out press: the figures are the normal build's */
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
  /* the order holds: rich before the method, spread2 best of the kinds
   * whose features relax the tissue's own mesh, about 5.5 x the method's
   * RMS (asserted at 4 x) */
  ck_assert(rms_mm[TS_LEARN_RICH] < rms_mm[TS_LEARN_METHOD]);
  ck_assert(rms_mm[TS_LEARN_SPREAD2] < rms_mm[TS_LEARN_SPREAD]);
  ck_assert(rms_mm[TS_LEARN_SPREAD2] * 4 < rms_mm[TS_LEARN_METHOD]);
  /* spread2r: spread2's sweeps (64 of them) on the refined copy the solve
   * relaxes (ts_learn_refined.c), measured
   *   spread2r RMS 0.0049 mm (1.7 %), max 0.0357 mm (3.6 %)
   * against spread2's 16 % / 33 %: the copy's equilibrium is what the
   * features now approach. Asserted with the same 15 % margin, and at
   * least 5 x better than spread2 in RMS and max (measured 9 x). With the
   * copy's sweeps replaced by the tissue mesh's (spread2r reading spread2's
   * features) the RMS is spread2's 0.044 mm and this fails. */
  ck_assert(rms_mm[TS_LEARN_SPREAD2R] < 0.0049 * 1.15);
  ck_assert(max_mm[TS_LEARN_SPREAD2R] < 0.0357 * 1.15);
  ck_assert(rms_mm[TS_LEARN_SPREAD2R] * 5 < rms_mm[TS_LEARN_SPREAD2]);
  ck_assert(max_mm[TS_LEARN_SPREAD2R] * 5 < max_mm[TS_LEARN_SPREAD2]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("learn_refined");
  TCase *c = tcase_create("refined");
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
