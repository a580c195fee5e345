/*
 * itest_sleep.c: a real tissued's built-in session at rest sleeps
 * (server/session_sleep.h), seen over TCP and /metrics. A controller's
 * sphere parked 50 mm above the patch: after 2 s of simulated time the
 * session is asleep, its steps counted as slept, and frames still arrive
 * (simulated time goes on), and the session list (SessionInfo.asleep)
 * says so. The sphere pressed 4 mm into the centre: the
 * tissue wakes, dents by more than 2 mm and pushes the sphere up. The
 * sphere lifted: it falls asleep again. A reset wakes it. The same for an
 * XPBD session. A daemon started with --sleep-speed 0 never sleeps.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_proc.h"
#include "tissueclient.h"

#define RADIUS 0.005

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct watch {
  double sim_time;
  double centre_y;  /* the top sheet's centre node */
  int64_t centre;   /* its index; -1 until the first frame */
  double force_y;   /* the latest ToolForce, N */
  uint32_t contacts;
} watch;

static void on_frame(void *ud, const tc_frame *f) {
  watch *w = ud;
  w->sim_time = f->sim_time;
  if (w->centre < 0) {
    double top = -1e9;
    for (uint32_t i = 0; i < f->vertex_count; i++)
      if (hypot(f->positions[i][0], f->positions[i][2]) < 1e-3 && f->positions[i][1] > top) {
        top = f->positions[i][1];
        w->centre = (int64_t)i;
      }
    ck_assert_msg(w->centre >= 0, "no node near the patch axis");
  }
  w->centre_y = f->positions[w->centre][1];
}

static void on_force(void *ud, const tc_force *f) {
  watch *w = ud;
  w->force_y = f->force[1];
  w->contacts = f->contacts;
}

/* Polls until the frames have advanced by `sim` s of simulated time
 * (bounded by wall time), sending the pose pos. */
static void run_for(tc_client *a, watch *w, uint32_t tool, const double pos[3], double sim) {
  const double quat[4] = {1, 0, 0, 0};
  const double t0 = w->sim_time;
  const long long deadline = now_ms() + 120000;
  while (w->sim_time - t0 < sim && now_ms() < deadline) {
    ck_assert_int_eq(tc_send_pose(a, tool, pos, quat, 0), 0);
    ck_assert_int_ge(tc_poll(a, 5), 0);
  }
  ck_assert_msg(w->sim_time - t0 >= sim, "simulated time advanced only %g s", w->sim_time - t0);
}

static double metric(const ts_dproc *d, const char *name) {
  char *page = ts_dproc_http_get(d->http_port, "/metrics");
  ck_assert_ptr_nonnull(page);
  const double v = ts_dproc_metric_in(page, name);
  free(page);
  return v;
}

/* SessionInfo.asleep of session 1, from a ListSessions */
static int listed_asleep(tc_client *a) {
  tc_session_info *v = NULL;
  size_t n = 0;
  ck_assert_int_eq(tc_list_sessions(a, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  const int asleep = v[0].asleep;
  free(v);
  return asleep;
}

#define ASLEEP "tissued_session_asleep{session=\"1\"}"
#define SLEPT "tissued_session_steps_slept_total{session=\"1\"}"

static tc_client *controller(const ts_dproc *d, watch *w, int solver, uint32_t *tool) {
  char err[256];
  tc_client *a = tc_connect_key("127.0.0.1", d->tcp_port, "itest-sleep", TS_DPROC_KEY, 0, err,
                                sizeof err);
  ck_assert_msg(a != NULL, "%s", err);
  w->centre = -1;
  tc_set_frame_cb(a, on_frame, w);
  tc_set_force_cb(a, on_force, w);
  uint32_t sid;
  ck_assert_int_eq(tc_create_session_solver(a, "stomach-patch", solver, &sid, NULL, NULL), 0);
  ck_assert_int_eq(sid, 1);
  ck_assert_int_eq(tc_join(a, sid, TC_ROLE_CONTROLLER, 0, RADIUS, tool), 0);
  return a;
}

/* _i: 0 the default solver (mass-spring), 1 XPBD */
START_TEST(test_sleeps_and_wakes) {
  ts_dproc d;
  char err[256];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  watch w = {0};
  uint32_t tool;
  tc_client *a = controller(&d, &w, _i ? TC_SOLVER_XPBD : TC_SOLVER_DEFAULT, &tool);
  const double parked[3] = {0, 0.05, 0};
  run_for(a, &w, tool, parked, 2.0);
  ck_assert_double_eq(metric(&d, ASLEEP), 1);
  ck_assert_int_eq(listed_asleep(a), 1); /* the session list says it too */
  const double slept = metric(&d, SLEPT);
  ck_assert_double_gt(slept, 100);
  const double rest_y = w.centre_y;
  /* asleep, frames still come and the time goes on (run_for checks it) */
  run_for(a, &w, tool, parked, 0.2);
  ck_assert_double_gt(metric(&d, SLEPT), slept + 100);
  /* pressed: awake, dented, pushing back */
  const double press[3] = {0, rest_y + RADIUS - 0.004, 0};
  run_for(a, &w, tool, press, 0.5);
  ck_assert_double_eq(metric(&d, ASLEEP), 0);
  ck_assert_int_eq(listed_asleep(a), 0);
  ck_assert_msg(w.centre_y < rest_y - 0.002, "centre at %g, %g at rest", w.centre_y, rest_y);
  ck_assert_msg(w.force_y > 0.01 && w.contacts > 0, "force %g N, %u contacts", w.force_y,
                w.contacts);
  /* lifted: asleep again once the tissue has settled */
  run_for(a, &w, tool, parked, 2.5);
  ck_assert_double_eq(metric(&d, ASLEEP), 1);
  ck_assert_msg(fabs(w.centre_y - rest_y) < 2e-5, "centre at %g, %g before", w.centre_y, rest_y);
  /* a reset wakes it */
  ck_assert_int_eq(tc_reset_session(a, 1), 0);
  run_for(a, &w, tool, parked, 0.1);
  ck_assert_double_eq(metric(&d, ASLEEP), 0);
  tc_close(a);
  ck_assert_msg(ts_dproc_stop(&d, 10000, err, sizeof err) == 0, "%s", err);
}
END_TEST

START_TEST(test_speed_zero) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--sleep-speed", "0", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  watch w = {0};
  uint32_t tool;
  tc_client *a = controller(&d, &w, TC_SOLVER_DEFAULT, &tool);
  const double parked[3] = {0, 0.05, 0};
  run_for(a, &w, tool, parked, 2.0);
  ck_assert_double_eq(metric(&d, ASLEEP), 0);
  ck_assert_double_eq(metric(&d, SLEPT), 0);
  tc_close(a);
  ck_assert_msg(ts_dproc_stop(&d, 10000, err, sizeof err) == 0, "%s", err);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sleep");
  TCase *tc = tcase_create("daemon");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_sleeps_and_wakes, 0, 2);
  tcase_add_test(tc, test_speed_zero);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
