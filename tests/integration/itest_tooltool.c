/*
 * itest_tooltool.c: tool against tool (issue 5, core/ts_tool_contact.h) on a
 * real daemon, over the socket, in a mass-spring, an XPBD and a
 * quasi-static session.
 *
 * Two controllers join one session, each with a 5 mm sphere, 30 mm above
 * the built-in patch (nothing of the tissue in reach). Parked together at
 * the join (both at the parking spot, overlapping whole) neither feels
 * anything; moved 40 mm apart, nothing; moved to centres 8 mm apart (2 mm
 * of overlap), each controller's ToolForce shows the push: 2 N (the default
 * penalty stiffness, 1 N/mm, times 2 mm) along the centre line, away from
 * the other tool, equal and opposite, no torque about the tips (the
 * spheres' centres), ToolForce.tool_contacts 1 on each, and the frames'
 * ToolState.tool_contacts 1 for both tools; /metrics counts the contact.
 * Moved apart again, the force and the counts (ToolForce's and the
 * frames') go back to nothing. A session with its own stiffness (2.5 N/mm) pushes 5 N at the
 * same overlap and lists it; stiffnesses outside 0.1-20 N/mm are refused
 * with the range and why. Waits are on simulated time (force messages),
 * bounded by generous wall-clock deadlines.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_proc.h"
#include "tissueclient.h"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct forces {
  uint64_t n;
  double max_abs; /* largest |force component| since the last reset */
  uint32_t max_tools; /* largest ToolForce.tool_contacts since the last reset */
  tc_force last;
} forces;

static void on_force(void *ud, const tc_force *f) {
  forces *w = ud;
  for (int a = 0; a < 3; a++)
    if (fabs(f->force[a]) > w->max_abs) w->max_abs = fabs(f->force[a]);
  if (f->tool_contacts > w->max_tools) w->max_tools = f->tool_contacts;
  w->last = *f;
  w->n++;
}

static void on_error(void *ud, int code, const char *name, const char *message, uint64_t rid) {
  (void)ud;
  (void)rid;
  ck_abort_msg("a client got an error: %s (%d): %s", name, code, message);
}

/* The frames' ToolState.tool_contacts per tool id (1-based, up to 8). */
typedef struct frames {
  uint64_t n;
  uint32_t last[9];       /* in the newest frame (0 for a tool not listed) */
  uint32_t max[9];        /* largest since the last reset */
} frames;

static void on_frame(void *ud, const tc_frame *f) {
  frames *w = ud;
  memset(w->last, 0, sizeof w->last);
  for (uint32_t i = 0; i < f->n_tools; i++) {
    const uint32_t id = f->tools[i].tool_id;
    if (id < 1 || id > 8) continue;
    w->last[id] = f->tools[i].tool_contacts;
    if (w->last[id] > w->max[id]) w->max[id] = w->last[id];
  }
  w->n++;
}

typedef struct ctl {
  tc_client *c;
  forces f;
  frames fr;
  tc_joined j;
} ctl;

/* Both controllers send their poses (send nonzero) and are polled until each
 * has had force messages over `hold_s` of simulated time from now (60 s
 * wall-clock bound). */
static void hold(ctl *cs, const double pos[2][3], int send, double hold_s) {
  static const double quat[4] = {1, 0, 0, 0};
  long long deadline = now_ms() + 60000;
  uint64_t n0[2] = {cs[0].f.n, cs[1].f.n};
  /* a message after this call began, on both */
  while (cs[0].f.n == n0[0] || cs[1].f.n == n0[1]) {
    ck_assert_msg(now_ms() < deadline, "no force messages within 60 s");
    for (int i = 0; i < 2; i++) {
      if (send) ck_assert_int_eq(tc_send_pose(cs[i].c, cs[i].j.tool_id, pos[i], quat, 0), 0);
      ck_assert_int_ge(tc_poll(cs[i].c, 2), 0);
    }
  }
  double t0[2] = {cs[0].f.last.sim_time, cs[1].f.last.sim_time};
  for (;;) {
    ck_assert_msg(now_ms() < deadline, "the hold did not finish within 60 s");
    for (int i = 0; i < 2; i++) {
      if (send) ck_assert_int_eq(tc_send_pose(cs[i].c, cs[i].j.tool_id, pos[i], quat, 0), 0);
      ck_assert_int_ge(tc_poll(cs[i].c, 2), 0);
    }
    if (cs[0].f.last.sim_time - t0[0] >= hold_s && cs[1].f.last.sim_time - t0[1] >= hold_s) break;
  }
}

/* k: CreateSession.tool_stiffness (N/m; 0: the default, 1000) */
static void run(int solver, const char *label, double k) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--patch-resolution", "17", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  static ctl cs[2];
  memset(cs, 0, sizeof cs);
  for (int i = 0; i < 2; i++) {
    cs[i].c = tc_connect_key("127.0.0.1", d.tcp_port, i ? "itest-tt-b" : "itest-tt-a",
                             TS_DPROC_KEY, 0, err, sizeof err);
    ck_assert_msg(cs[i].c != NULL, "%s", err);
    tc_set_force_cb(cs[i].c, on_force, &cs[i].f);
    tc_set_frame_cb(cs[i].c, on_frame, &cs[i].fr);
    tc_set_error_cb(cs[i].c, on_error, NULL);
  }
  uint32_t sid, nv;
  const tc_create_params cp = {.builtin = "stomach-patch", .solver = solver, .tool_stiffness = k};
  ck_assert_int_eq(tc_create_session_ex(cs[0].c, &cp, &sid, &nv, NULL), 0);
  const double push = (k > 0 ? k : 1000) * 0.002; /* N: k times the 2 mm overlap */
  for (int i = 0; i < 2; i++) {
    tc_join_params jp = {.session_id = sid, .role = TC_ROLE_CONTROLLER, .radius = 0.005};
    ck_assert_int_eq(tc_join_ex(cs[i].c, &jp, &cs[i].j), 0);
  }
  ck_assert_uint_ne(cs[0].j.tool_id, cs[1].j.tool_id);
  /* the session lists the stiffness it took (a float on the wire: exact for
   * whole N/m) */
  tc_session_info *list;
  size_t n_list;
  ck_assert_int_eq(tc_list_sessions(cs[1].c, &list, &n_list), 0);
  ck_assert_uint_eq(n_list, 1);
  ck_assert_double_eq(list[0].tool_stiffness, k > 0 ? k : 1000);
  free(list);

  /* parked together at the join, whole in each other: nothing (0.2 s) */
  const double none[2][3] = {{0, 0, 0}, {0, 0, 0}};
  hold(cs, none, 0, 0.2);
  for (int i = 0; i < 2; i++) {
    ck_assert_msg(cs[i].f.max_abs == 0, "%s: parked tool %d felt %g N", label, i, cs[i].f.max_abs);
    /* overlapping but parked: no push, so no tool counted either */
    ck_assert_msg(cs[i].f.max_tools == 0, "%s: parked tool %d counted %u tools", label, i,
                  cs[i].f.max_tools);
  }

  /* 40 mm apart, 30 mm over the tissue: nothing (the proxies travel there
   * at tool-max-speed, 1 mm a step: 0.2 s is plenty) */
  const double apart[2][3] = {{-0.02, 0.03, 0}, {0.02, 0.03, 0}};
  hold(cs, apart, 1, 0.2);
  cs[0].f.max_abs = cs[1].f.max_abs = 0;
  cs[0].f.max_tools = cs[1].f.max_tools = 0;
  memset(cs[0].fr.max, 0, sizeof cs[0].fr.max);
  const uint64_t frames_apart = cs[0].fr.n;
  hold(cs, apart, 1, 0.1);
  for (int i = 0; i < 2; i++) {
    ck_assert_msg(cs[i].f.max_abs == 0, "%s: tool %d apart felt %g N", label, i, cs[i].f.max_abs);
    ck_assert_uint_eq(cs[i].f.max_tools, 0);
  }
  /* the frames over that hold (30 Hz: a few in 0.1 s; at least one) count
   * no tool either */
  ck_assert_uint_gt(cs[0].fr.n, frames_apart);
  for (int i = 0; i < 2; i++) ck_assert_uint_eq(cs[0].fr.max[cs[i].j.tool_id], 0);
  ck_assert_uint_eq(cs[0].f.last.contacts, 0); /* and no tissue */

  /* centres 8 mm apart along x: 2 mm deep, 2 N each way once the 30 Hz
   * filter has settled (0.3 s is over 50 of its time constants) */
  const double touch[2][3] = {{-0.004, 0.03, 0}, {0.004, 0.03, 0}};
  hold(cs, touch, 1, 0.3);
  const tc_force *fa = &cs[0].f.last, *fb = &cs[1].f.last;
  fprintf(stderr, "itest_tooltool %s: touching: A (%g, %g, %g) N torque (%g, %g, %g); B (%g, %g, %g) N\n",
          label, fa->force[0], fa->force[1], fa->force[2], fa->torque[0], fa->torque[1],
          fa->torque[2], fb->force[0], fb->force[1], fb->force[2]);
  /* 1e-4 relative: the wire's float and what remains of the filter's
   * approach after 0.3 s (e^-56 and less) */
  ck_assert_double_eq_tol(fa->force[0], -push, 1e-4 * push);
  ck_assert_double_eq_tol(fb->force[0], push, 1e-4 * push);
  /* each is told that one other tool touches it (ToolForce.tool_contacts),
   * and that no tissue does */
  ck_assert_uint_eq(fa->tool_contacts, 1);
  ck_assert_uint_eq(fb->tool_contacts, 1);
  ck_assert_uint_eq(fa->contacts, 0);
  /* and the frames say so for both tools: a frame that is decoded from now
   * on (a bounded wait on frames) shows 1 for each */
  {
    const uint64_t n0 = cs[0].fr.n;
    const long long deadline = now_ms() + 30000;
    while (cs[0].fr.n < n0 + 2) {
      ck_assert_msg(now_ms() < deadline, "%s: no frames within 30 s", label);
      ck_assert_int_ge(tc_poll(cs[0].c, 5), 0);
      ck_assert_int_ge(tc_poll(cs[1].c, 0), 0);
    }
    for (int i = 0; i < 2; i++)
      ck_assert_msg(cs[0].fr.last[cs[i].j.tool_id] == 1,
                    "%s: frame's ToolState.tool_contacts of tool %u is %u, not 1", label,
                    cs[i].j.tool_id, cs[0].fr.last[cs[i].j.tool_id]);
  }
  for (int a = 1; a < 3; a++) {
    ck_assert_double_eq_tol(fa->force[a], 0, 1e-6);
    ck_assert_double_eq_tol(fb->force[a], 0, 1e-6);
  }
  for (int a = 0; a < 3; a++) {
    ck_assert_double_eq_tol(fa->torque[a], 0, 1e-6);
    ck_assert_double_eq_tol(fb->torque[a], 0, 1e-6);
  }
  /* counted in /metrics: a contact in the newest frame's step, and steps
   * with tools touching (at least the 0.3 s held) */
  char name[128];
  snprintf(name, sizeof name, "tissued_session_tool_contacts{session=\"%u\"}", sid);
  double contacts = ts_dproc_metric(d.http_port, name);
  snprintf(name, sizeof name, "tissued_session_tool_contact_steps_total{session=\"%u\"}", sid);
  double steps = ts_dproc_metric(d.http_port, name);
  fprintf(stderr, "itest_tooltool %s: metrics: tool contacts %g, steps touching %g\n", label,
          contacts, steps);
  ck_assert_double_eq(contacts, 1);
  ck_assert_double_ge(steps, 0.25 / cs[0].j.dt);

  /* apart again: back to nothing (the filter decays within 0.3 s to under
   * e^-50 of 2 N) */
  hold(cs, apart, 1, 0.3);
  for (int i = 0; i < 2; i++) {
    for (int a = 0; a < 3; a++)
      ck_assert_msg(fabs(cs[i].f.last.force[a]) < 1e-6, "%s: tool %d after parting: %g N", label,
                    i, cs[i].f.last.force[a]);
    ck_assert_uint_eq(cs[i].f.last.tool_contacts, 0); /* at once: the count is not filtered */
    ck_assert_uint_eq(cs[0].fr.last[cs[i].j.tool_id], 0); /* the newest frame's too */
  }
  snprintf(name, sizeof name, "tissued_session_tool_contacts{session=\"%u\"}", sid);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, name), 0);

  for (int i = 0; i < 2; i++) tc_close(cs[i].c);
  char why[128];
  ck_assert_int_eq(ts_dproc_stop(&d, 10000, why, sizeof why), 0);
}

START_TEST(test_tooltool_massspring) { run(TC_SOLVER_MASS_SPRING, "mass-spring", 0); }
END_TEST

START_TEST(test_tooltool_xpbd) { run(TC_SOLVER_XPBD, "xpbd", 0); }
END_TEST

/* the quasi-static solve keeps a tool's force between its solves: the push
 * must still be the same each step, not piled up */
START_TEST(test_tooltool_qs) { run(TC_SOLVER_QUASI_STATIC, "quasi-static", 0); }
END_TEST

/* a session's own stiffness (CreateSession.tool_stiffness): 2.5 N/mm gives
 * 5 N at the same 2 mm, and SessionInfo reports it */
START_TEST(test_tooltool_stiffness) { run(TC_SOLVER_XPBD, "xpbd k 2.5 N/mm", 2500); }
END_TEST

/* stiffnesses out of [100, 20000] N/m are refused with the range and why */
START_TEST(test_tooltool_stiffness_refused) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--patch-resolution", "9", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  tc_client *c = tc_connect_key("127.0.0.1", d.tcp_port, "itest-tt-k", TS_DPROC_KEY, 0, err,
                                sizeof err);
  ck_assert_msg(c != NULL, "%s", err);
  const double bad[] = {-1000, 99, 20001, 1e9, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const tc_create_params cp = {.solver = TC_SOLVER_MASS_SPRING, .tool_stiffness = bad[i]};
    uint32_t sid;
    ck_assert_msg(tc_create_session_ex(c, &cp, &sid, NULL, NULL) != 0, "k %g was taken", bad[i]);
    const char *msg = tc_last_error(c);
    ck_assert_msg(strstr(msg, "tool_stiffness must be in [100, 20000] N/m") &&
                      strstr(msg, "haptic device"),
                  "k %g: %s", bad[i], msg);
  }
  /* the ends of the range are taken */
  const double good[] = {100, 20000};
  for (size_t i = 0; i < 2; i++) {
    const tc_create_params cp = {.solver = TC_SOLVER_MASS_SPRING, .tool_stiffness = good[i]};
    uint32_t sid;
    ck_assert_msg(tc_create_session_ex(c, &cp, &sid, NULL, NULL) == 0, "k %g: %s", good[i],
                  tc_last_error(c));
  }
  tc_close(c);
  char why[128];
  ck_assert_int_eq(ts_dproc_stop(&d, 10000, why, sizeof why), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tooltool");
  TCase *tc = tcase_create("tooltool");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_tooltool_massspring);
  tcase_add_test(tc, test_tooltool_xpbd);
  tcase_add_test(tc, test_tooltool_qs);
  tcase_add_test(tc, test_tooltool_stiffness);
  tcase_add_test(tc, test_tooltool_stiffness_refused);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
