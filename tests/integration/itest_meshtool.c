/*
 * itest_meshtool.c: rigid mesh tools (issue 5: "a tool is a mesh (e.g.
 * dental_instrument_light.obj) or a primitive declared when the client
 * joins") on a real daemon.
 *
 * The daemon is started with two of the shared meshes as tools: probe, the
 * dental instrument at 0.01 m per unit (an open mesh: a 71 mm rod, 0.4 mm
 * thick, along its z axis), and spot, the closed cow at 0.01 (19 mm from
 * feet to back). HelloReply lists both. Joining with an unknown mesh name
 * gets a clear error. In an XPBD session and in a mass-spring session (its
 * node projection with the mesh's signed distance) the cow, turned so that
 * its broad +z end faces down, is lowered 1 mm into the settled patch and
 * held 0.3 s: the tissue pushes it up (Fy > 1 mN) and most force messages
 * report contacts; lifted 20 mm clear, the filtered force decays to
 * nothing. A daemon given a tool mesh it cannot read does
 * not start and says which entry and why.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "tissueclient.h"

static ts_dproc *daemon_; /* for its log when a wait times out */

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct watch {
  double sim_time;
  double top;      /* highest top-sheet point near the centre, newest frame */
  uint32_t calm;   /* frames in a row that changed under 1 % of the vertices */
  tc_force force;  /* newest force message */
  uint64_t forces, touching;
} watch;

static void on_frame(void *ud, const tc_frame *f) {
  watch *w = ud;
  w->sim_time = f->sim_time;
  w->top = -1e9;
  for (uint32_t i = 0; i < f->vertex_count; i++)
    if (hypot(f->positions[i][0], f->positions[i][2]) < 3e-3 && f->positions[i][1] > w->top)
      w->top = f->positions[i][1];
  w->calm = !f->keyframe && f->changed * 100 < f->vertex_count ? w->calm + 1 : 0;
}

static void on_force(void *ud, const tc_force *f) {
  watch *w = ud;
  w->force = *f;
  w->forces++;
  if (f->contacts) w->touching++;
}

/* Sends the pose and polls until the session's simulated time has advanced
 * by `hold` (bounded in wall time). */
static void hold(tc_client *c, watch *w, uint32_t tool, const double p[3], double hold_s) {
  /* a quarter turn about x: the cow's +z end (its broadest, 219 of its
   * vertices within 1 mm of the extreme) faces down */
  const double q[4] = {sqrt(0.5), sqrt(0.5), 0, 0};
  long long deadline = now_ms() + 60000;
  ck_assert_int_eq(tc_send_pose(c, tool, p, q, 1), 0);
  while (w->sim_time == 0) {
    if (now_ms() >= deadline) ts_dproc_dump_log(daemon_);
    ck_assert_msg(now_ms() < deadline, "no frame within 60 s");
    ck_assert_int_ge(tc_poll(c, 20), 0);
  }
  double t_end = w->sim_time + hold_s;
  while (w->sim_time < t_end) {
    if (now_ms() >= deadline) ts_dproc_dump_log(daemon_);
    ck_assert_msg(now_ms() < deadline, "simulated time stuck at %g s", w->sim_time);
    ck_assert_int_eq(tc_send_pose(c, tool, p, q, 1), 0);
    ck_assert_int_ge(tc_poll(c, 5), 0);
  }
}

static void press_cow(ts_dproc *d, int solver, const char *what);

START_TEST(test_mesh_tool) {
  char probe[1200], spot[1200], arg[2500], err[512];
  ts_dproc_shared_mesh("dental_instrument_light.obj", probe, sizeof probe);
  ts_dproc_shared_mesh("spot.obj", spot, sizeof spot);
  snprintf(arg, sizeof arg, "probe=%s@0.01,spot=%s@0.01", probe, spot);
  const char *args[] = {"--tool-mesh", arg, "--patch-resolution", "17", NULL};
  ts_dproc d;
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  daemon_ = &d;
  tc_client *c = tc_connect_key("127.0.0.1", d.tcp_port, "itest-meshtool", TS_DPROC_KEY, 0, err,
                                sizeof err);
  ck_assert_msg(c != NULL, "%s", err);
  const char *names[4];
  ck_assert_uint_eq(tc_tool_meshes(c, names, 4), 2);
  ck_assert_str_eq(names[0], "probe");
  ck_assert_str_eq(names[1], "spot");

  uint32_t sid = 0;
  ck_assert_int_eq(tc_create_session_solver(c, NULL, TC_SOLVER_XPBD, &sid, NULL, NULL), 0);
  tc_join_params jp = {.session_id = sid, .role = TC_ROLE_CONTROLLER, .tool_kind = TC_TOOL_MESH,
                       .tool_mesh = "scalpel"};
  tc_joined j;
  ck_assert_int_eq(tc_join_ex(c, &jp, &j), TS_EINVAL);
  ck_assert_msg(strstr(tc_last_error(c), "probe") != NULL, "names the available: %s",
                tc_last_error(c));
  tc_close(c);
  press_cow(&d, TC_SOLVER_XPBD, "XPBD");
  press_cow(&d, TC_SOLVER_MASS_SPRING, "mass-spring");
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

/* In a new session of the solver: joins with the cow, settles, presses it
 * 1 mm in, lifts it clear. */
static void press_cow(ts_dproc *d, int solver, const char *what) {
  char err[512];
  tc_client *c = tc_connect_key("127.0.0.1", d->tcp_port, "itest-meshtool", TS_DPROC_KEY, 0, err,
                                sizeof err);
  ck_assert_msg(c != NULL, "%s", err);
  uint32_t sid = 0;
  ck_assert_int_eq(tc_create_session_solver(c, NULL, solver, &sid, NULL, NULL), 0);
  tc_join_params jp = {.session_id = sid, .role = TC_ROLE_CONTROLLER, .tool_kind = TC_TOOL_MESH,
                       .tool_mesh = "spot"};
  tc_joined j;
  ck_assert_msg(tc_join_ex(c, &jp, &j) == 0, "%s: %s", what, tc_last_error(c));
  watch w;
  memset(&w, 0, sizeof w);
  tc_set_frame_cb(c, on_frame, &w);
  tc_set_force_cb(c, on_force, &w);

  /* settle with the blade parked 50 mm up */
  const double parked[3] = {0, 0.05, 0};
  long long settle_end = now_ms() + 120000;
  while (w.calm < 5) {
    ck_assert_msg(now_ms() < settle_end, "the patch did not settle");
    hold(c, &w, j.tool_id, parked, 0.01);
  }
  const double y0 = w.top;
  ck_assert_double_lt(fabs(y0), 0.01);
  /* turned, the cow's +z end (z max 1.049 units) is 10.49 mm below its
   * frame: come down in 0.25 mm steps to 1 mm deep, then hold 0.3 s */
  const double back = 0.01049;
  double p[3] = {0, y0 + back + 0.003, 0};
  hold(c, &w, j.tool_id, p, 0.05);
  ck_assert_uint_eq(w.force.contacts, 0);
  for (int k = 0; k <= 16; k++) {
    p[1] = y0 + back + 0.003 - 0.00025 * k;
    hold(c, &w, j.tool_id, p, 0.02);
  }
  w.touching = w.forces = 0;
  hold(c, &w, j.tool_id, p, 0.3);
  const tc_force f = w.force;
  printf("meshtool %s: cow 1 mm in: force (%.4g %.4g %.4g) N, %u contacts, %llu of %llu "
         "messages touching; surface at %.3f mm\n",
         what, f.force[0], f.force[1], f.force[2], f.contacts, (unsigned long long)w.touching,
         (unsigned long long)w.forces, w.top * 1e3);
  ck_assert_msg(f.force[1] > 1e-3, "%s: the tissue pushes the cow up: Fy %.4g N", what,
                f.force[1]);
  ck_assert_uint_ge(w.touching, w.forces / 2);
  ck_assert_uint_gt(w.forces, 0);

  /* lifted clear, the filtered force decays to nothing */
  const double up[3] = {0, y0 + 0.02, 0};
  hold(c, &w, j.tool_id, up, 0.5);
  ck_assert_uint_eq(w.force.contacts, 0);
  ck_assert_double_le(fabs(w.force.force[0]) + fabs(w.force.force[1]) + fabs(w.force.force[2]),
                      1e-6);
  tc_close(c);
}

/* A tool mesh that cannot be read stops the daemon at start with the entry
 * and the reason. */
START_TEST(test_bad_tool_mesh) {
  const char *bin = getenv("TISSUED_BIN");
  ck_assert_ptr_nonnull(bin);
  char dir[] = "/tmp/itest-meshtool-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  const char *cases[][2] = {
      {"probe=/nonexistent/probe.obj", "probe"},
      {"probe", "NAME=FILE"},
      {"probe=x.obj@-1", "scale"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' --host 127.0.0.1 --tcp-port 0 --http-port 0 --data-dir '%s' "
             "--server-key %s --tool-mesh '%s' 2>&1",
             bin, dir, TS_DPROC_KEY, cases[i][0]);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "started with %s", cases[i][0]);
    ck_assert_msg(strstr(out, cases[i][1]) != NULL, "%s: no '%s' in: %s", cases[i][0],
                  cases[i][1], out);
  }
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(rm), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("meshtool");
  TCase *tc = tcase_create("meshtool");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_mesh_tool);
  tcase_add_test(tc, test_bad_tool_mesh);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
