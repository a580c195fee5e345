/*
 * itest_grasp.c: grasp-and-pull in a live session over the protocol (issue
 * 5), once with the XPBD solver and once with the mass-spring one (the
 * daemon's default). A controller joins with grasper jaws, lowers them open
 * into the patch's centre, closes them, lifts them by 5 mm: the tissue
 * under the jaws follows (the centre lifts by more than 2 mm) and pulls the
 * tool down (its ToolForce has F_y < 0); opening the jaws lets go (the
 * centre sinks back to within a fifth of the lift). The script follows the
 * frames' simulated time, so a slow machine runs it slower, not
 * differently. A quasi-static session refuses jaws.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "tissueclient.h"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct watch {
  double sim_time;
  int64_t centre; /* top-sheet node nearest the axis, found in the first frame */
  double centre_y;
  int frames;
} watch;

static void on_frame(void *ud, const tc_frame *f) {
  watch *w = ud;
  w->frames++;
  w->sim_time = f->sim_time;
  if (w->centre < 0) {
    double top = -1e9;
    for (uint32_t i = 0; i < f->vertex_count; i++) {
      if (hypot(f->positions[i][0], f->positions[i][2]) < 1e-3 && f->positions[i][1] > top) {
        top = f->positions[i][1];
        w->centre = (int64_t)i;
      }
    }
    ck_assert_msg(w->centre >= 0, "no node near the patch axis");
  }
  w->centre_y = f->positions[w->centre][1];
}

/* Polls until the session's simulated time reaches t (bounded in wall time). */
static void until(tc_client *c, watch *w, double t) {
  long long deadline = now_ms() + 60000;
  while (w->sim_time < t) {
    ck_assert_msg(now_ms() < deadline, "simulated time stuck at %g s (want %g)", w->sim_time, t);
    ck_assert_int_ge(tc_poll(c, 20), 0);
  }
}

static double lerp(double a, double b, double u) { return a + (b - a) * (u < 0 ? 0 : u > 1 ? 1 : u); }

/* The scenario in a new session of the given solver. */
static void grasp_and_pull(int solver) {
  const char *what = solver == TC_SOLVER_XPBD ? "xpbd" : "mass-spring";
  ts_dproc d;
  char err[512];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  tc_client *c = tc_connect_key("127.0.0.1", d.tcp_port, "itest-grasp", TS_DPROC_KEY, 0, err,
                                sizeof err);
  ck_assert_msg(c != NULL, "%s", err);

  /* quasi-static sessions have no jaws */
  uint32_t qs = 0;
  ck_assert_int_eq(tc_create_session_solver(c, NULL, TC_SOLVER_QUASI_STATIC, &qs, NULL, NULL), 0);
  tc_join_params jp = {.session_id = qs, .role = TC_ROLE_CONTROLLER, .tool_kind = TC_TOOL_JAWS};
  tc_joined j;
  ck_assert_int_eq(tc_join_ex(c, &jp, &j), TS_EUNSUPPORTED);

  uint32_t sid = 0;
  ck_assert_int_eq(tc_create_session_solver(c, NULL, solver, &sid, NULL, NULL), 0);
  watch w = {.centre = -1};
  tc_set_frame_cb(c, on_frame, &w);
  jp.session_id = sid;
  jp.frame_rate = 250;
  ck_assert_int_eq(tc_join_ex(c, &jp, &j), 0);
  double q[4] = {1, 0, 0, 0};
  double park[3] = {0, 0.03, 0};
  ck_assert_int_eq(tc_send_pose(c, j.tool_id, park, q, 1), 0);
  /* let the fresh patch sag to rest first */
  until(c, &w, 1.0);
  double settled = w.centre_y;
  until(c, &w, 1.5);
  ck_assert_msg(fabs(w.centre_y - settled) < 2e-4, "still settling: %g", w.centre_y - settled);
  const double y0 = w.centre_y, t0 = w.sim_time;

  /* lower (0.2 s), close (0.2 s), lift 5 mm (0.3 s) and hold (0.2 s) */
  const double deep = y0 - 0.0008;
  for (;;) {
    double s = w.sim_time - t0;
    double pos[3] = {0, 0, 0}, jaw = 1;
    if (s < 0.2) {
      pos[1] = lerp(y0 + 0.003, deep, s / 0.2);
    } else if (s < 0.4) {
      pos[1] = deep;
      jaw = lerp(1, 0, (s - 0.2) / 0.2);
    } else {
      pos[1] = lerp(deep, deep + 0.005, (s - 0.4) / 0.3);
      jaw = 0;
    }
    ck_assert_int_eq(tc_send_pose(c, j.tool_id, pos, q, jaw), 0);
    if (s >= 0.9) break;
    until(c, &w, w.sim_time + 0.002);
  }
  until(c, &w, w.sim_time + 0.05);
  const double lifted = w.centre_y - y0;
  tc_force f;
  ck_assert(tc_latest_force(c, &f));
  printf("grasp (%s): centre lifted %.3f mm by a 5 mm pull; tool force (%.4g %.4g %.4g) N, %u "
         "contacts\n",
         what, lifted * 1e3, f.force[0], f.force[1], f.force[2], f.contacts);
  /* the held tissue follows the jaws: more than 2 mm of the 5 mm (the unit
   * test of the same script asserts the same bound) */
  if (lifted <= 0.002) ts_dproc_dump_log(&d);
  ck_assert_msg(lifted > 0.002, "%s: centre lifted only %.3g mm", what, lifted * 1e3);
  ck_assert_msg(f.force[1] < -1e-3, "%s: the stretched tissue pulls the tool down: Fy %.4g N",
                what, f.force[1]);
  ck_assert_uint_ge(f.contacts, 1);

  /* open (0.1 s), then out of the way; the tissue sinks back */
  const double t1 = w.sim_time;
  for (;;) {
    double s = w.sim_time - t1;
    double pos[3] = {0, s < 0.1 ? deep + 0.005 : y0 + 0.02, 0};
    ck_assert_int_eq(tc_send_pose(c, j.tool_id, pos, q, lerp(0, 1, s / 0.1)), 0);
    if (s >= 1.0) break;
    until(c, &w, w.sim_time + 0.004);
  }
  const double back = w.centre_y - y0;
  printf("grasp (%s): %.3f mm after letting go\n", what, back * 1e3);
  /* measured under 0.5 um back of 4.56 (XPBD) and 5.00 mm (mass-spring)
   * lifted, 2026-12-04; 5 % as the unit test (test_ms_grasp) */
  ck_assert_msg(fabs(back) < 0.05 * lifted, "%s: still %.3g mm up after opening", what,
                back * 1e3);

  tc_close(c);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}

START_TEST(test_grasp_and_pull_xpbd) { grasp_and_pull(TC_SOLVER_XPBD); }
END_TEST

START_TEST(test_grasp_and_pull_massspring) { grasp_and_pull(TC_SOLVER_MASS_SPRING); }
END_TEST

int main(void) {
  Suite *s = suite_create("grasp");
  TCase *tc = tcase_create("grasp");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_grasp_and_pull_xpbd);
  tcase_add_test(tc, test_grasp_and_pull_massspring);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
