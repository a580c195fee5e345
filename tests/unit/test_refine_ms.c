/*
 * test_refine_ms.c: Check suite for local refinement of a live tissue
 * (server/core/ts_refine.h) stepped by the mass-spring method. On the
 * built-in patch, sagging under gravity and with a sphere pressed 3 mm
 * into it, a region picked by a ray is refined (Loop, LEB): old nodes keep
 * their positions and velocities bit for bit, new nodes sit at the
 * midpoints of their parent edges' current state, the render surface is a
 * closed, consistently wound 2-manifold with no degenerate triangle (so
 * conforming: a T-junction leaves an edge with one triangle) and Euler
 * characteristic 2, the total mass is conserved, every prism is valid.
 * The no-jump bound of issue 4 (ts_handover.h): the step after the
 * refinement moves every old node as an unrefined twin of the same state
 * does and every new node as its interpolated position, within the codec
 * quantum of 10 um; during the blend no step moves a node by more than the
 * quantum plus the twin's largest move; a second refinement in the middle
 * of the blend is as continuous; after the blend the hand-over is gone and
 * the tissue is at the equilibrium of the refined network alone (that of a
 * copy refined without a hand-over). The case itself is run_case
 * (refine_fixture.h); test_refine_xpbd.c runs it with XPBD.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_refine.h"
#include "refine_fixture.h"

START_TEST(test_massspring_loop) { run_case(0, TS_REFINE_LOOP, _i); }
END_TEST
START_TEST(test_massspring_leb) { run_case(0, TS_REFINE_LEB, _i); }
END_TEST

static Suite *refine_suite(void) {
  Suite *s = suite_create("refine_ms");
  /* loop index: 0 sagging under gravity, 1 a sphere pressed 3 mm in */
  TCase *tc = tcase_create("live");
  tcase_set_timeout(tc, 120);
  /* a sanitizer build (memory and undefined behaviour, not the figures)
   * runs the pressed cases alone: the sagging ones are the pressed case's
   * code without the tool and without the second refinement; the
   * mass-spring hand-over without a tool is test_refine_checks's
   * leb_outside_selection */
  tcase_add_loop_test(tc, test_massspring_loop, SAG_FIRST, 2);
#ifdef TS_TEST_SANITIZED
  /* and Loop's pressed case alone: its second refinement, during the
   * blend, is LEB (run_case), so LEB's refinement, checks and hand-over
   * run there too, with the same assertions; LEB first (and Loop second)
   * took 10 s of the suite's 27 s of CPU under ASan+UBSan. LEB's first
   * refinement with the mass-spring hand-over is test_refine_checks's
   * leb_outside_selection there */
  (void)test_massspring_leb;
#else
  tcase_add_loop_test(tc, test_massspring_leb, SAG_FIRST, 2);
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
