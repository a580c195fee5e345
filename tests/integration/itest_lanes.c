/*
 * itest_lanes.c: the slow physics thread against a real daemon (server/
 * lane.h, physics.c). With one real-time thread, a session of the built-in
 * patch (made small, --patch-resolution 5, so that it keeps real time under
 * the sanitizers too: a load of 0.25 under TSan, where 9 nodes an edge made
 * 1.0) and a session of an uploaded grid whose steps take
 * several times their dt: the grid's session starts on the slow thread,
 * placed there by its creation's trial steps (server/session_trial.h:
 * SessionCreated.step_load and its warning, the metric, the log line), and
 * the patch's on the real-time one; without the trial (--session-trial 0)
 * the grid's session moves there once its steps are measured (metrics,
 * SessionInfo, the log line) and the patch's stays; the slow
 * thread runs at --slow-lane-nice; the patch keeps stepping; the grid's
 * session can be joined, driven and ended there; two such sessions on two
 * cores go to two slow threads; and the daemon stops cleanly with one
 * there. Besides, the real-time threads evened out when sessions end. (the ASan build checks for leaks at exit). With
 * --slow-lane-load 0 there is no slow thread and the grid's session stays.
 * With --max-step-load 2 the grid's upload is refused at creation, saying
 * its load, and nothing of it is stored; the patch's session is made.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "grid_obj.h"
#include "proc_threads.h"
#include "tissueclient.h"

/* 3,600 vertices, 7,000 triangles, 10,800 nodes in three layers: steps of
 * 3-4 ms in the normal build (a load of 3 to 4 at dt 1 ms). The sanitizers
 * make every step 3 (ASan) to 10 (TSan) times as costly, and the build too:
 * there a third of the nodes (a load of about 4 under ASan, 12 under TSan) */
#ifdef TS_TEST_SANITIZED
#define GRID 35
#else
#define GRID 60
#endif
#define WAIT_MS 120000
/* --slow-lane-load for the tests that tell the two sessions apart: 2, not
 * the default 1, as the patch's load under TSan on a busy CI machine was
 * measured at 0.52 at creation and read over 1 by the meter in one run
 * (which moved it), while the grid's is 3 or more in every build */
#define LANE_LOAD "2"
#define MOVES "tissued_slow_lane_moves_total"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms) {
  struct timespec p = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&p, NULL);
}

static double session_metric(const ts_dproc *d, const char *name, uint32_t id) {
  char m[128];
  snprintf(m, sizeof m, "%s{session=\"%u\"}", name, id);
  return ts_dproc_metric(d->http_port, m);
}

/* Waits (WAIT_MS at most) until session id's metric name reads value
 * (-1: the session is gone from /metrics); asserts it does. */
static void wait_session_metric(const ts_dproc *d, const char *name, uint32_t id, double value) {
  long long end = now_ms() + WAIT_MS;
  while (session_metric(d, name, id) != value && now_ms() < end) pause_ms(50);
  ck_assert_double_eq(session_metric(d, name, id), value);
}

/* Starts a daemon with args and connects a client with the server key. */
static tc_client *start(ts_dproc *d, const char *const *args) {
  char err[256];
  ck_assert_msg(ts_dproc_start(d, args, err, sizeof err) == 0, "%s", err);
  tc_client *c = tc_connect_key("127.0.0.1", d->tcp_port, "itest-lanes", TS_DPROC_KEY, 0, err,
                                sizeof err);
  ck_assert_msg(c, "%s", err);
  tc_set_timeout(c, WAIT_MS);
  return c;
}

/* Waits (WAIT_MS at most) until the daemon's threads a and b have both
 * used more than min_ticks of CPU time (clock ticks) from now on; asserts
 * they have. */
static void wait_both_step(const ts_dproc *d, const char *a, const char *b, long min_ticks) {
  long t0[2], t[2];
  ck_assert_int_eq(ts_thread_ticks(d->pid, a, &t0[0]), 1);
  ck_assert_int_eq(ts_thread_ticks(d->pid, b, &t0[1]), 1);
  long long end = now_ms() + WAIT_MS;
  do {
    pause_ms(200);
    ck_assert_int_eq(ts_thread_ticks(d->pid, a, &t[0]), 1);
    ck_assert_int_eq(ts_thread_ticks(d->pid, b, &t[1]), 1);
  } while (!(t[0] > t0[0] + min_ticks && t[1] > t0[1] + min_ticks) && now_ms() < end);
  ck_assert_msg(t[0] > t0[0] + min_ticks && t[1] > t0[1] + min_ticks,
                "CPU ticks of %s %ld -> %ld, of %s %ld -> %ld", a, t0[0], t[0], b, t0[1], t[1]);
}

/* Starts a daemon with one real-time physics thread, no sleeping and the
 * small patch, at --session-trial trial and --slow-lane-load lane_load
 * (NULL: the default), creates the patch's session and the grid's.
 * Returns the client; *patch_load gets the patch's SessionCreated.step_load
 * (NULL: not asked for). */
static tc_client *two_sessions(ts_dproc *d, const char *trial, const char *lane_load,
                               uint32_t *patch, uint32_t *grid, double *patch_load) {
  const char *args[] = {"--physics-threads", "1", "--sleep-speed", "0", "--patch-resolution",
                        "5", "--slow-lane-nice", "10", "--session-trial", trial,
                        lane_load ? "--slow-lane-load" : NULL, lane_load, NULL};
  tc_client *c = start(d, args);
  ck_assert_int_eq(tc_create_session(c, "stomach-patch", patch, NULL, NULL), 0);
  if (patch_load) *patch_load = tc_session_step_load(c);
  size_t len = 0;
  char *obj = ts_grid_obj(GRID, &len);
  ck_assert_ptr_nonnull(obj);
  ck_assert_msg(tc_create_session_mesh(c, TC_MESH_OBJ, obj, len, 1.0, NULL, 0, "grid", grid,
                                       NULL, NULL) == 0,
                "%s", tc_last_error(c));
  free(obj);
  return c;
}

/* Closes c and stops the daemon, which must exit 0 (the ASan build: with
 * nothing leaked). */
static void close_and_stop(ts_dproc *d, tc_client *c) {
  tc_close(c);
  char why[256];
  int st = ts_dproc_stop(d, 30000, why, sizeof why);
  ck_assert_msg(st == 0, "daemon exit %d %s", st, why);
}

static int log_has(const ts_dproc *d, const char *text) { return ts_dproc_log_count(d, text) > 0; }

/* The creation's trial (the default): the grid's session starts on the
 * slow thread, no move; its client heard the load and the warning; the
 * patch's session starts on the real-time thread, its load under 1. */
START_TEST(test_heavy_session_starts_slow) {
  ts_dproc d;
  uint32_t patch = 0, grid = 0;
  double patch_load = 0;
  tc_client *c = two_sessions(&d, "1", LANE_LOAD, &patch, &grid, &patch_load);
  const double grid_load = tc_session_step_load(c);
  tc_mesh_adjust adj;
  ck_assert_int_eq(tc_session_adjust(c, &adj), 1);
  printf("trial step loads: patch %.3g, grid %.3g; the grid's warning: %s\n", patch_load,
         grid_load, adj.warning);
  ck_assert_double_gt(patch_load, 0);
  ck_assert_double_lt(patch_load, atof(LANE_LOAD));
  ck_assert_double_gt(grid_load, 1);
  ck_assert_msg(strstr(adj.warning, "slow motion"), "no slow-motion warning: '%s'", adj.warning);
  /* the figure in the warning is the one in step_load (3 digits there) */
  const char *about = strstr(adj.warning, "about ");
  ck_assert_msg(about, "no figure in '%s'", adj.warning);
  ck_assert_double_eq_tol(strtod(about + 6, NULL), grid_load, 0.006 * grid_load);
  /* placed at once: both metrics are there before any frame (no waiting) */
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_slow_lane_starts_total"), 1);
  wait_session_metric(&d, "tissued_session_slow_lane", grid, 1);
  ck_assert_double_eq(session_metric(&d, "tissued_session_slow_lane", patch), 0);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, MOVES "{to=\"slow\"}"), 0);
  ck_assert_msg(log_has(&d, "starts on a slow physics thread"), "no log line for the start");
  /* it steps there, and stays: a second later nothing has moved */
  const double g0 = session_metric(&d, "tissued_session_steps_total", grid);
  long long end = now_ms() + WAIT_MS;
  while (!(session_metric(&d, "tissued_session_steps_total", grid) > g0) && now_ms() < end)
    pause_ms(100);
  ck_assert_double_gt(session_metric(&d, "tissued_session_steps_total", grid), g0);
  pause_ms(1000);
  ck_assert_double_eq(session_metric(&d, "tissued_session_slow_lane", grid), 1);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, MOVES "{to=\"realtime\"}"), 0);
  close_and_stop(&d, c);
}
END_TEST

/* Without the trial (--session-trial 0) both start on the real-time thread
 * and the meter moves the grid's session. */
START_TEST(test_heavy_session_moves) {
  ts_dproc d;
  uint32_t patch = 0, grid = 0;
  tc_client *c = two_sessions(&d, "0", LANE_LOAD, &patch, &grid, NULL);
  ck_assert_double_eq(tc_session_step_load(c), 0); /* not measured */

  /* the grid's session moves once two windows (0.2 s of CPU time or of
   * simulated time each) have read over 1 */
  wait_session_metric(&d, "tissued_session_slow_lane", grid, 1);
  ck_assert_double_eq(session_metric(&d, "tissued_session_slow_lane", patch), 0);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, MOVES "{to=\"slow\"}"), 1);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, MOVES "{to=\"realtime\"}"), 0);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_slow_lane_starts_total"), 0);
  ck_assert_msg(log_has(&d, "moves to a slow thread"), "no log line for the move");
  ck_assert_msg(log_has(&d, "1 physics thread(s) and as many slow ones"), "no slow thread at start");

  /* the slow thread at --slow-lane-nice 10 (the default; passed here, as daemon_proc.c
   * gives the sanitizer builds' daemons 0) above the process's */
  long own = getpriority(PRIO_PROCESS, 0), slow = -100, phys = -100;
  ck_assert_int_eq(ts_thread_nice(d.pid, "tissued-slow0", &slow), 1);
  ck_assert_int_eq(ts_thread_nice(d.pid, "tissued-phys0", &phys), 1);
  ck_assert_int_eq(slow, own + 10 > 19 ? 19 : own + 10);
  ck_assert_int_eq(phys, own);

  /* the session list says where each runs; the grid's load is over 1 */
  tc_session_info *v = NULL;
  size_t n = 0;
  long long end = now_ms() + WAIT_MS; /* its load comes with its frames: one after the move */
  for (;;) {
    ck_assert_int_eq(tc_list_sessions(c, &v, &n), 0);
    ck_assert_uint_eq(n, 2);
    const tc_session_info *g = v[0].session_id == grid ? &v[0] : &v[1];
    if (g->step_load > 1 || now_ms() > end) break;
    free(v);
    pause_ms(100);
  }
  for (size_t i = 0; i < n; i++) {
    if (v[i].session_id == grid) {
      ck_assert_int_eq(v[i].slow_lane, 1);
      ck_assert_double_gt(v[i].step_load, 1);
    } else {
      ck_assert_uint_eq(v[i].session_id, patch);
      ck_assert_int_eq(v[i].slow_lane, 0);
      ck_assert_double_lt(v[i].step_load, atof(LANE_LOAD));
    }
  }
  free(v);

  /* both keep stepping where they are (their step counts come with their
   * frames, one per 1/60 s of simulated time: 17 steps, which the grid's
   * session takes seconds for under the sanitizers) */
  const double p0 = session_metric(&d, "tissued_session_steps_total", patch);
  const double g0 = session_metric(&d, "tissued_session_steps_total", grid);
  end = now_ms() + WAIT_MS;
  while (!(session_metric(&d, "tissued_session_steps_total", patch) > p0 &&
           session_metric(&d, "tissued_session_steps_total", grid) > g0) &&
         now_ms() < end)
    pause_ms(100);
  ck_assert_double_gt(session_metric(&d, "tissued_session_steps_total", patch), p0);
  ck_assert_double_gt(session_metric(&d, "tissued_session_steps_total", grid), g0);

  /* a controller drives the grid's session on the slow thread and ends it */
  ck_assert_int_eq(tc_join(c, grid, TC_ROLE_CONTROLLER, 0, 0.004, NULL), 0);
  const double pos[3] = {0, 0.01, 0}, quat[4] = {1, 0, 0, 0};
  ck_assert_int_eq(tc_send_pose(c, 0, pos, quat, 0), 0);
  ck_assert_int_eq(tc_end_session(c, grid), 0);
  wait_session_metric(&d, "tissued_session_slow_lane", grid, -1); /* gone */
  ck_assert_double_eq(session_metric(&d, "tissued_session_slow_lane", patch), 0);
  close_and_stop(&d, c);
}
END_TEST

/* Two such sessions on two cores: each on a slow thread of its own, so that
 * both slow threads step (their CPU time grows), as the real-time threads
 * share the sessions out. */
START_TEST(test_two_heavy_sessions_two_threads) {
  const char *args[] = {"--physics-threads", "2", "--sleep-speed", "0", NULL};
  ts_dproc d;
  tc_client *c = start(&d, args);
  size_t len = 0;
  char *obj = ts_grid_obj(GRID, &len);
  ck_assert_ptr_nonnull(obj);
  uint32_t id[2];
  for (int k = 0; k < 2; k++)
    ck_assert_msg(tc_create_session_mesh(c, TC_MESH_OBJ, obj, len, 1.0, NULL, 0, NULL, &id[k],
                                         NULL, NULL) == 0,
                  "%s", tc_last_error(c));
  free(obj);
  for (int k = 0; k < 2; k++) wait_session_metric(&d, "tissued_session_slow_lane", id[k], 1);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_slow_lane_starts_total"), 2);
  wait_both_step(&d, "tissued-slow0", "tissued-slow1", 0);
  close_and_stop(&d, c);
}
END_TEST

/* Evening out the real-time threads (ts_physics_balance): four sessions of
 * a larger patch on two threads, two each; the two of one thread end, and
 * the other thread steps two sessions while this one idles. Within seconds
 * one of them moves over (counted, logged), both threads step from then on
 * (their CPU time grows), and nothing moves again. (The move may come before
 * the ends too, and leave the two survivors apart already: a session's
 * first windows, cold, can read more than its later ones.) The slow threads are off, so that the sessions' loads (about
 * 0.6 each in the normal build, several times that under the sanitizers)
 * cannot take them there. */
START_TEST(test_balance_after_sessions_end) {
  const char *args[] = {"--physics-threads", "2", "--sleep-speed", "0", "--patch-resolution",
                        "25", "--slow-lane-load", "0", NULL};
  ts_dproc d;
  tc_client *c = start(&d, args);
  uint32_t id[4];
  for (int k = 0; k < 4; k++)
    ck_assert_int_eq(tc_create_session(c, "stomach-patch", &id[k], NULL, NULL), 0);
  /* placed on the thread with fewer sessions: 1 and 3 on one, 2 and 4 on
   * the other; the second and fourth end */
  for (int k = 1; k < 4; k += 2) {
    ck_assert_int_eq(tc_join(c, id[k], TC_ROLE_CONTROLLER, 0, 0, NULL), 0);
    ck_assert_int_eq(tc_end_session(c, id[k]), 0);
  }
  /* 0.5 s of CPU time each: more than a thread spends before it takes the
   * ends' removals (under TSan one step of each of its two sessions, about
   * 30 ms apiece, comes first, 6 ticks), so that it is the move that makes
   * the idle thread step */
  wait_both_step(&d, "tissued-phys0", "tissued-phys1", 50);
  ck_assert_double_ge(ts_dproc_metric(d.http_port, "tissued_physics_rebalances_total"), 1);
  ck_assert_msg(log_has(&d, "which step "), "no log line for the move");
  /* one session each: the cron's next looks find nothing to gain */
  const double moves = ts_dproc_metric(d.http_port, "tissued_physics_rebalances_total");
  pause_ms(2500);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_physics_rebalances_total"), moves);
  close_and_stop(&d, c);
}
END_TEST

/* SIGTERM with a session on the slow thread: a clean exit, nothing leaked. */
START_TEST(test_stop_with_slow_session) {
  ts_dproc d;
  uint32_t patch = 0, grid = 0;
  tc_client *c = two_sessions(&d, "1", NULL, &patch, &grid, NULL);
  wait_session_metric(&d, "tissued_session_slow_lane", grid, 1);
  close_and_stop(&d, c);
}
END_TEST

/* --slow-lane-load 0: no slow thread; the grid's session stays where it was
 * placed, measured all the same; its client is still told that it will run
 * in slow motion (its load over 1). */
START_TEST(test_slow_lane_off) {
  ts_dproc d;
  uint32_t patch = 0, grid = 0;
  tc_client *c = two_sessions(&d, "1", "0", &patch, &grid, NULL);
  tc_mesh_adjust adj;
  ck_assert_int_eq(tc_session_adjust(c, &adj), 1);
  ck_assert_double_gt(tc_session_step_load(c), 1);
  ck_assert_msg(strstr(adj.warning, "slow motion"), "no slow-motion warning: '%s'", adj.warning);
  long long end = now_ms() + WAIT_MS;
  while (!(session_metric(&d, "tissued_session_step_load", grid) > 1) && now_ms() < end)
    pause_ms(50);
  ck_assert_double_gt(session_metric(&d, "tissued_session_step_load", grid), 1);
  pause_ms(1000);
  ck_assert_double_eq(session_metric(&d, "tissued_session_slow_lane", grid), 0);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, MOVES "{to=\"slow\"}"), 0);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_slow_lane_starts_total"), 0);
  long nice = 0;
  ck_assert_int_eq(ts_thread_nice(d.pid, "tissued-slow0", &nice), 0);
  ck_assert_msg(!log_has(&d, "slow ones"), "a slow thread with --slow-lane-load 0");
  close_and_stop(&d, c);
}
END_TEST

/* --max-step-load 2: the patch (a load far under 1) is made, the grid's
 * upload (over 2 in every build) refused with TS_ETOOBIG, counted, and not
 * stored (creating a session of it by name finds no such tissue). */
START_TEST(test_max_step_load) {
  const char *args[] = {"--physics-threads", "1", "--patch-resolution", "5", "--max-step-load",
                        "2", NULL};
  ts_dproc d;
  tc_client *c = start(&d, args);
  uint32_t patch = 0, grid = 0;
  ck_assert_int_eq(tc_create_session(c, "stomach-patch", &patch, NULL, NULL), 0);
  size_t len = 0;
  char *obj = ts_grid_obj(GRID, &len);
  ck_assert_ptr_nonnull(obj);
  const int rc = tc_create_session_mesh(c, TC_MESH_OBJ, obj, len, 1.0, NULL, 0, "grid", &grid,
                                        NULL, NULL);
  free(obj);
  printf("refused: %s\n", tc_last_error(c));
  ck_assert_int_eq(rc, TS_ETOOBIG);
  ck_assert_msg(strstr(tc_last_error(c), "--max-step-load") &&
                    strstr(tc_last_error(c), "times the time it simulates"),
                "%s", tc_last_error(c));
  ck_assert_double_eq(
      ts_dproc_metric(d.http_port, "tissued_limit_refused_total{limit=\"max-step-load\"}"), 1);
  ck_assert_int_eq(tc_create_session(c, "grid", &grid, NULL, NULL), TS_ENOTISSUE);
  ck_assert_double_eq(session_metric(&d, "tissued_session_slow_lane", patch), 0);
  close_and_stop(&d, c);
}
END_TEST

int main(void) {
  Suite *su = suite_create("lanes");
  TCase *tc = tcase_create("lanes");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_heavy_session_starts_slow);
  tcase_add_test(tc, test_heavy_session_moves);
  tcase_add_test(tc, test_two_heavy_sessions_two_threads);
  tcase_add_test(tc, test_balance_after_sessions_end);
  tcase_add_test(tc, test_stop_with_slow_session);
  tcase_add_test(tc, test_slow_lane_off);
  tcase_add_test(tc, test_max_step_load);
  suite_add_tcase(su, tc);
  return ts_dproc_run_suite(su);
}
