/*
 * test_lane.c: Check suite for server/lane.c, the meter that decides when a
 * session moves to the slow physics thread and back: the load is CPU time
 * over simulated time per closed window; a move takes TS_LANE_WINDOWS
 * windows in a row on the far side (over the threshold going out, under
 * TS_LANE_BACK times it coming back), and none is asked for in the
 * TS_LANE_SETTLE windows after a move; one slow step among cheap ones moves
 * nothing; a threshold of 0 never moves a session out.
 */
#include "ts_check.h"

#include "lane.h"

#define MS 1000000ull

/* Steps m with steps of cpu ns at dt ns until a window closes; returns the
 * lane asked for then. */
static int window(ts_lane_meter *m, uint64_t cpu, uint64_t dt, int slow_now, double threshold) {
  const double before = m->load;
  int want = slow_now;
  for (int k = 0; k < 100000; k++) {
    want = ts_lane_meter_add(m, cpu, dt, slow_now, threshold);
    if (m->cpu_ns == 0 && m->sim_ns == 0) return want; /* closed */
  }
  ck_abort_msg("no window closed (load before %g)", before);
  return want;
}

START_TEST(test_load_is_cpu_over_sim) {
  ts_lane_meter m;
  ts_lane_meter_init(&m);
  ck_assert_double_eq(m.load, -1);
  /* 1 kHz, 0.3 ms a step: 200 steps to the window's 200 ms of simulated time */
  int steps = 0;
  while (ts_lane_meter_add(&m, 300000, MS, 0, 1.0) == 0 && m.load < 0) steps++;
  ck_assert_int_eq(steps + 1, 200);
  ck_assert_double_eq_tol(m.load, 0.3, 1e-12);
  /* a heavy step: 70 ms of CPU per 1 ms: the window closes on CPU time */
  ts_lane_meter_init(&m);
  ck_assert_int_eq(ts_lane_meter_add(&m, 70 * MS, MS, 0, 1.0), 0);
  ck_assert_int_eq(ts_lane_meter_add(&m, 70 * MS, MS, 0, 1.0), 0);
  ck_assert_double_eq(m.load, -1); /* 140 ms: open */
  ck_assert_int_eq(ts_lane_meter_add(&m, 70 * MS, MS, 0, 1.0), 0); /* first window over */
  ck_assert_double_eq_tol(m.load, 70.0, 1e-12);
}
END_TEST

START_TEST(test_moves_after_windows_in_a_row) {
  ts_lane_meter m;
  ts_lane_meter_init(&m);
  /* 1.5 ms a 1 ms step: over 1.0; the second window in a row moves it */
  for (int w = 1; w < TS_LANE_WINDOWS; w++) ck_assert_int_eq(window(&m, 1500000, MS, 0, 1.0), 0);
  ck_assert_int_eq(window(&m, 1500000, MS, 0, 1.0), 1);
  ck_assert_double_eq_tol(m.load, 1.5, 1e-12);
  /* on the slow thread: 0.8 is under 1 but over half of it: it stays */
  for (int w = 0; w < 5; w++) ck_assert_int_eq(window(&m, 800000, MS, 1, 1.0), 1);
  /* 0.4: under half; back after the same number of windows */
  for (int w = 1; w < TS_LANE_WINDOWS; w++) ck_assert_int_eq(window(&m, 400000, MS, 1, 1.0), 1);
  ck_assert_int_eq(window(&m, 400000, MS, 1, 1.0), 0);
}
END_TEST

START_TEST(test_settles_after_a_move) {
  ts_lane_meter m;
  ts_lane_meter_init(&m);
  for (int w = 1; w < TS_LANE_WINDOWS; w++) ck_assert_int_eq(window(&m, 1500000, MS, 0, 1.0), 0);
  ck_assert_int_eq(window(&m, 1500000, MS, 0, 1.0), 1);
  ts_lane_meter_moved(&m); /* now on the slow thread, and cheap at once */
  for (int w = 0; w < TS_LANE_SETTLE; w++) ck_assert_int_eq(window(&m, 100000, MS, 1, 1.0), 1);
  ck_assert_double_eq_tol(m.load, 0.1, 1e-12); /* measured meanwhile */
  for (int w = 1; w < TS_LANE_WINDOWS; w++) ck_assert_int_eq(window(&m, 100000, MS, 1, 1.0), 1);
  ck_assert_int_eq(window(&m, 100000, MS, 1, 1.0), 0);
}
END_TEST

START_TEST(test_a_run_is_broken) {
  ts_lane_meter m;
  ts_lane_meter_init(&m);
  /* over, under, over, under...: never TS_LANE_WINDOWS in a row */
  for (int w = 0; w < 10; w++)
    ck_assert_int_eq(window(&m, w % 2 ? 300000 : 1500000, MS, 0, 1.0), 0);
}
END_TEST

START_TEST(test_one_slow_step_moves_nothing) {
  ts_lane_meter m;
  ts_lane_meter_init(&m);
  /* a 150 ms step (a refinement's first, a page fault storm) among 0.3 ms
   * ones: its window reads over the threshold, the next does not */
  ck_assert_int_eq(ts_lane_meter_add(&m, 150 * MS, MS, 0, 1.0), 0);
  ck_assert_int_eq(window(&m, 300000, MS, 0, 1.0), 0);
  ck_assert_double_gt(m.load, 1.0);
  for (int w = 0; w < 5; w++) ck_assert_int_eq(window(&m, 300000, MS, 0, 1.0), 0);
  ck_assert_double_eq_tol(m.load, 0.3, 1e-12);
}
END_TEST

START_TEST(test_threshold_zero) {
  ts_lane_meter m;
  ts_lane_meter_init(&m);
  for (int w = 0; w < 5; w++) ck_assert_int_eq(window(&m, 50 * MS, MS, 0, 0), 0);
  ck_assert_double_eq_tol(m.load, 50.0, 1e-12); /* measured all the same */
  /* and the threshold as given: a session at 3x moves at 2, not at 4 */
  ts_lane_meter_init(&m);
  for (int w = 0; w < 5; w++) ck_assert_int_eq(window(&m, 3 * MS, MS, 0, 4.0), 0);
  for (int w = 1; w < TS_LANE_WINDOWS; w++) ck_assert_int_eq(window(&m, 3 * MS, MS, 0, 2.0), 0);
  ck_assert_int_eq(window(&m, 3 * MS, MS, 0, 2.0), 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("lane");
  TCase *tc = tcase_create("meter");
  tcase_add_test(tc, test_load_is_cpu_over_sim);
  tcase_add_test(tc, test_moves_after_windows_in_a_row);
  tcase_add_test(tc, test_settles_after_a_move);
  tcase_add_test(tc, test_a_run_is_broken);
  tcase_add_test(tc, test_one_slow_step_moves_nothing);
  tcase_add_test(tc, test_threshold_zero);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
