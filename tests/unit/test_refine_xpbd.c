/*
 * test_refine_xpbd.c: Check suite for local refinement of a live tissue
 * (server/core/ts_refine.h) stepped by XPBD: the no-jump case of
 * test_refine_ms.c (run_case, refine_fixture.h: the step after a Loop or
 * LEB refinement, the blend, a second refinement during it, the refined
 * equilibrium after it; sagging and with a sphere pressed 3 mm in) with
 * the hand-over's rest lengths fitted to trial steps first
 * (ts_handover_fit_xpbd, on the refined region), as the daemon does.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_refine.h"
#include "refine_fixture.h"

START_TEST(test_xpbd_loop) { run_case(1, TS_REFINE_LOOP, _i); }
END_TEST
START_TEST(test_xpbd_leb) { run_case(1, TS_REFINE_LEB, _i); }
END_TEST

static Suite *refine_suite(void) {
  Suite *s = suite_create("refine_xpbd");
  /* loop index: 0 sagging under gravity, 1 a sphere pressed 3 mm in */
  TCase *tc = tcase_create("live");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_xpbd_loop, 0, 2);
  /* a sanitizer build runs XPBD Loop's sagging case (its hand-over fit
   * without a tool to hold) and its pressed one, whose second refinement,
   * during the blend, is LEB with its fit (run_case): LEB's refinement and
   * fit with the same assertions. LEB's own cases (its sagging one the
   * pressed one's code without the tool) are the normal build's: the
   * pressed one took 8 s of the suite's 23 s of CPU under ASan+UBSan */
#ifdef TS_TEST_SANITIZED
  (void)test_xpbd_leb;
#else
  tcase_add_loop_test(tc, test_xpbd_leb, SAG_FIRST, 2);
#endif
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a failing case's fork keeps what it printed */
  SRunner *sr = srunner_create(refine_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
