/*
 * itest_force.c: force feedback messages (issue 5) on a real daemon.
 *
 * A controller presses a tool into the built-in patch and holds it; its
 * ToolForce messages arrive apart from frames, one per physics step when it
 * asked for that (force_rate 0), numbered by consecutive physics steps. An
 * observer of the same session gets none. The force agrees with the
 * ToolState force in the frames of the same instant (the same filtered
 * value), points out of the tissue, and decays to nothing when the tool is
 * lifted. A horizontal capsule held by its tip feels a torque about the tip
 * equal to the lever arm to the contact's centre times the force. A second
 * controller asking for 100 messages a second gets every tenth step.
 *
 * Nothing here depends on the machine's speed (it runs at load 15-20 next
 * to sanitizer builds): the script follows the simulated time in the force
 * messages, a hold is counted from the first message that reports the
 * final pose applied (the client reads late on a loaded machine, and the
 * daemon may be further on than what it has read), a frame's force is
 * compared with its step's message whichever of the two connections is
 * read first, and every wait is bounded generously.
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

#define RING 4096

typedef struct forces {
  uint64_t n;          /* messages */
  uint64_t hold_seq;   /* when not 0: the pose whose application starts a hold */
  int holding;         /* a message has reported hold_seq applied ... */
  double hold_t0;      /* ... at this simulated time */
  uint64_t not_next;   /* messages whose step is not the previous step + stride */
  uint64_t stride;     /* expected steps between messages */
  uint64_t bad_stride; /* steps not a multiple of stride */
  uint64_t last_step;
  uint64_t max_pose_seq;
  uint64_t touching;   /* messages reporting at least one contact */
  tc_force ring[RING]; /* by step % RING */
  tc_force last;
} forces;

static void on_force(void *ud, const tc_force *f) {
  forces *w = ud;
  if (w->n && f->step != w->last_step + w->stride) w->not_next++;
  if (f->step % w->stride) w->bad_stride++;
  if (f->last_pose_seq > w->max_pose_seq) w->max_pose_seq = f->last_pose_seq;
  if (f->contacts > 0) w->touching++;
  if (w->hold_seq && !w->holding && f->last_pose_seq >= w->hold_seq) {
    w->holding = 1;
    w->hold_t0 = f->sim_time;
  }
  w->last_step = f->step;
  w->ring[f->step % RING] = *f;
  w->last = *f;
  w->n++;
}

#define PENDING 256

/* A frame's tool force whose step's message had not been read yet. */
typedef struct pending_force {
  uint64_t step;
  double force[3];
} pending_force;

typedef struct frames {
  uint64_t n, compared, mismatched;
  pending_force pending[PENDING]; /* compared when their messages come (settle_pending) */
  uint32_t n_pending;
  double ytop;     /* top surface height near the centre, newest frame */
  uint32_t calm;   /* frames in a row that changed under 1 % of the vertices */
  forces *own;     /* the controller's force messages, to compare */
  uint32_t tool_id;
  double dt;
} frames;

static void compare(frames *w, const double got[3], const tc_force *m) {
  w->compared++;
  for (int a = 0; a < 3; a++)
    if (fabs(got[a] - m->force[a]) > 1e-6 * (1 + fabs(m->force[a]))) w->mismatched++;
}

/* Compares the frames waiting for their step's message with the messages
 * read since; those whose step has left the ring are dropped uncompared. */
static void settle_pending(frames *w) {
  const forces *o = w->own;
  uint32_t k = 0;
  for (uint32_t i = 0; i < w->n_pending; i++) {
    const pending_force *p = &w->pending[i];
    const tc_force *m = &o->ring[p->step % RING];
    if (o->n && o->last_step >= p->step) {
      if (m->step == p->step) compare(w, p->force, m);
      continue;
    }
    w->pending[k++] = *p;
  }
  w->n_pending = k;
}

/* A frame's ToolState force is the filtered force of the step that ended
 * at its sim_time: the force message of that step carries the same value
 * (both rounded to float). The two come on different connections: a frame
 * read before its step's message waits for it (settle_pending). */
static void on_frame(void *ud, const tc_frame *f) {
  frames *w = ud;
  w->n++;
  w->ytop = -1e9;
  for (uint32_t i = 0; i < f->vertex_count; i++) {
    const double *x = f->positions[i];
    if (x[0] * x[0] + x[2] * x[2] < 0.003 * 0.003 && x[1] > w->ytop) w->ytop = x[1];
  }
  w->calm = !f->keyframe && f->changed * 100 < f->vertex_count ? w->calm + 1 : 0;
  if (!w->own || !w->own->n) return;
  uint64_t step = (uint64_t)llround(f->sim_time / w->dt);
  const tc_force *m = &w->own->ring[step % RING];
  for (uint32_t i = 0; i < f->n_tools; i++) {
    if (f->tools[i].tool_id != w->tool_id) continue;
    if (w->own->last_step >= step) {
      if (m->step == step) compare(w, f->tools[i].force, m);
    } else if (w->n_pending < PENDING) {
      pending_force *p = &w->pending[w->n_pending++];
      p->step = step;
      memcpy(p->force, f->tools[i].force, sizeof p->force);
    }
  }
}

static void on_error(void *ud, int code, const char *name, const char *message, uint64_t rid) {
  (void)ud;
  (void)rid;
  ck_abort_msg("a client got an error: %s (%d): %s", name, code, message);
}

static frames *watched; /* the observer's frames, settled after every poll */

static void poll_ms(tc_client *const *cs, int n, int ms) {
  long long end = now_ms() + ms;
  while (now_ms() < end) {
    for (int i = 0; i < n; i++) ck_assert_int_ge(tc_poll(cs[i], i == 0 ? 2 : 0), 0);
    if (watched) settle_pending(watched);
  }
}

/* Moves tool `tool` of cs[0] (whose force messages go to w) in a straight
 * line from `from` to `to` over ramp_s of simulated time, then holds it
 * there for hold_s more, polling every client; simulated time so that a
 * slow machine only makes the test take longer (bounded at MOVE_WAIT_MS).
 * The hold counts from the first message that reports the final pose
 * applied, not from when the client saw the ramp end: a client that reads
 * late (a loaded machine) sends the final pose late, and a hold counted
 * from its view of the ramp would be cut short by that lag. */
#define MOVE_WAIT_MS 120000
static void move(tc_client *const *cs, int n, forces *w, uint32_t tool, const double from[3],
                 const double to[3], const double quat[4], double ramp_s, double hold_s) {
  long long deadline = now_ms() + MOVE_WAIT_MS;
  w->hold_seq = 0;
  w->holding = 0;
  uint64_t n0 = w->n; /* the clock: a force message after this call began */
  while (w->n == n0) {
    ck_assert_msg(now_ms() < deadline, "no force message within %d ms", MOVE_WAIT_MS);
    ck_assert_int_eq(tc_send_pose(cs[0], tool, from, quat, 1), 0);
    poll_ms(cs, n, 5);
  }
  double t0 = w->last.sim_time;
  for (;;) {
    ck_assert_msg(now_ms() < deadline, "the move did not finish within %d ms (held: %d)",
                  MOVE_WAIT_MS, w->holding);
    double u = ramp_s > 0 ? (w->last.sim_time - t0) / ramp_s : 1;
    if (u > 1) u = 1;
    double p[3];
    for (int a = 0; a < 3; a++) p[a] = from[a] + (to[a] - from[a]) * u;
    ck_assert_int_eq(tc_send_pose(cs[0], tool, p, quat, 1), 0);
    if (u >= 1 && !w->hold_seq) w->hold_seq = tc_pose_seq(cs[0]); /* the first final pose */
    poll_ms(cs, n, 5);
    if (w->holding && w->last.sim_time - w->hold_t0 >= hold_s) break;
  }
  w->hold_seq = 0;
}

START_TEST(test_force_messages) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--patch-resolution", "17", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  tc_client *ctl = tc_connect_key("127.0.0.1", d.tcp_port, "itest-force-ctl", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(ctl != NULL, "%s", err);
  tc_client *obs = tc_connect_key("127.0.0.1", d.tcp_port, "itest-force-obs", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(obs != NULL, "%s", err);
  static forces fc, fo;
  memset(&fc, 0, sizeof fc);
  memset(&fo, 0, sizeof fo);
  fc.stride = fo.stride = 1;
  tc_set_force_cb(ctl, on_force, &fc);
  tc_set_force_cb(obs, on_force, &fo);
  tc_set_error_cb(ctl, on_error, NULL);
  tc_set_error_cb(obs, on_error, NULL);
  uint32_t sid, nv;
  ck_assert_int_eq(tc_create_session(ctl, "stomach-patch", &sid, &nv, NULL), 0);
  /* frictionless, so that the sphere's reaction is normal only: with the
   * default friction (static 0.1) a node the press had carried sideways by
   * a hair is held there, and the tool then feels a lateral force and a
   * torque about its centre up to 0.1 |F| r (CI once saw 0.018 |F| r,
   * 4.3e-6 N m on 0.047 N, against the frictionless bound below); the
   * capsule below keeps the default */
  tc_join_params jp = {.session_id = sid,
                       .role = TC_ROLE_CONTROLLER,
                       .radius = 0.005,
                       .friction = 1,
                       .mu_static = 0,
                       .mu_kinetic = 0};
  tc_joined jc;
  ck_assert_int_eq(tc_join_ex(ctl, &jp, &jc), 0);
  ck_assert_uint_eq(jc.force_rate, (uint32_t)llround(1.0 / jc.dt));
  ck_assert_int_eq(tc_join(obs, sid, TC_ROLE_OBSERVER, 0, 0, NULL), 0);
  static frames wf;
  memset(&wf, 0, sizeof wf);
  wf.own = &fc, wf.tool_id = jc.tool_id, wf.dt = jc.dt;
  watched = &wf;
  tc_set_frame_cb(obs, on_frame, &wf);

  /* the patch settles under gravity (until five frames in a row change
   * under 1 % of the vertices; on a slow build the first frames show it
   * before it sags), then the newest frame tells where the surface is; the
   * tool starts 10 mm above it */
  tc_client *both[2] = {ctl, obs};
  const double quat[4] = {1, 0, 0, 0};
  const double parked[3] = {0, 0.05, 0};
  long long settle_end = now_ms() + 120000;
  while (wf.calm < 5) {
    ck_assert_msg(now_ms() < settle_end, "the patch did not settle within 120 s");
    ck_assert_int_eq(tc_send_pose(ctl, jc.tool_id, parked, quat, 1), 0);
    poll_ms(both, 2, 20);
  }
  const double y_rest = wf.ytop;
  ck_assert_double_lt(fabs(y_rest), 0.01);
  /* press a 5 mm sphere 3 mm into the top surface over 0.2 s and hold 0.5 s */
  const double above[3] = {0, y_rest + 0.005 + 0.010, 0};
  const double down[3] = {0, y_rest + 0.005 - 0.003, 0};
  fc.touching = 0;
  move(both, 2, &fc, jc.tool_id, above, down, quat, 0.2, 0.5);
  tc_force f;
  ck_assert_int_eq(tc_latest_force(ctl, &f), 1);
  fprintf(stderr, "itest_force: %llu messages, step %llu, force (%g, %g, %g) N, torque (%g, %g, %g) N m, %u contacts, %llu messages touching\n",
          (unsigned long long)fc.n, (unsigned long long)f.step, f.force[0], f.force[1],
          f.force[2], f.torque[0], f.torque[1], f.torque[2], f.contacts,
          (unsigned long long)fc.touching);
  /* one message per physics step, on consecutive steps (the loop may miss
   * none on loopback at these sizes: the soft output limit is 1 MiB) */
  ck_assert_uint_ge(fc.n, 100);
  ck_assert_uint_eq(fc.not_next, 0);
  ck_assert_uint_eq(fo.n, 0); /* observers get no forces */
  ck_assert_uint_eq(f.tool_id, jc.tool_id);
  ck_assert_uint_eq(f.session, sid);
  /* the sphere sits on one grid node, which the contact pushes to the
   * sphere's surface: on a single step it may rest exactly there (no
   * contact) while the filtered force carries on, so the count is checked
   * over the hold (0.5 s, 500 steps), not on the newest step */
  ck_assert_uint_ge(fc.touching, 250);
  ck_assert_uint_le(fc.max_pose_seq, tc_pose_seq(ctl));
  ck_assert_uint_gt(fc.max_pose_seq, 0);
  /* the tissue pushes the tool up, out of it; sideways the pattern is
   * symmetric, so the lateral force is small against it (5 %: the sphere
   * sits on a square grid's node, symmetric to rounding) */
  ck_assert_double_gt(f.force[1], 1e-3);
  ck_assert_double_le(fabs(f.force[0]) + fabs(f.force[2]), 0.05 * f.force[1]);
  /* a sphere's contact normals pass through its centre, the tip: no torque
   * beyond what rounding to float leaves (1e-3 of |F| times the radius) */
  double tq = sqrt(f.torque[0] * f.torque[0] + f.torque[1] * f.torque[1] +
                   f.torque[2] * f.torque[2]);
  ck_assert_double_le(tq, 1e-3 * f.force[1] * 0.005 + 1e-9);
  /* frames carry the same filtered force */
  ck_assert_uint_gt(wf.compared, 5);
  ck_assert_uint_eq(wf.mismatched, 0);

  /* lift the tool 2 cm clear: the filtered force decays to nothing (30 Hz
   * critically damped: 0.5 s after the last contact the step response is
   * within 1e-30 of its end) */
  move(both, 2, &fc, jc.tool_id, down, above, quat, 0.05, 0.5);
  ck_assert_int_eq(tc_latest_force(ctl, &f), 1);
  ck_assert_uint_eq(f.contacts, 0);
  ck_assert_double_le(fabs(f.force[0]) + fabs(f.force[1]) + fabs(f.force[2]), 1e-9);

  /* a horizontal capsule (axis along +x from its tip at x = -10 mm, 20 mm
   * long) pressed 2 mm in: the torque about the tip is the lever arm to the
   * contact's centre (x = 0, 10 mm from the tip) times the force, within
   * 10 % (the grid's symmetry about x = 0 up to the patch's curvature) */
  tc_client *cap = tc_connect_key("127.0.0.1", d.tcp_port, "itest-force-capsule", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(cap != NULL, "%s", err);
  static forces fk;
  memset(&fk, 0, sizeof fk);
  fk.stride = 10;
  tc_set_force_cb(cap, on_force, &fk);
  tc_set_error_cb(cap, on_error, NULL);
  tc_join_params jk = {.session_id = sid,
                       .role = TC_ROLE_CONTROLLER,
                       .radius = 0.004,
                       .tool_kind = TC_TOOL_CAPSULE,
                       .length = 0.02,
                       .force_rate = 100};
  tc_joined jkd;
  ck_assert_int_eq(tc_join_ex(cap, &jk, &jkd), 0);
  ck_assert_uint_eq(jkd.force_rate, 100);
  ck_assert_uint_ne(jkd.tool_id, jc.tool_id);
  const double qx[4] = {sqrt(0.5), 0, 0, -sqrt(0.5)}; /* local +y to +x */
  const double tip_above[3] = {-0.01, y_rest + 0.004 + 0.010, 0};
  const double tip[3] = {-0.01, y_rest + 0.004 - 0.002, 0};
  tc_client *three[3] = {cap, ctl, obs};
  move(three, 3, &fk, jkd.tool_id, tip_above, tip, qx, 0.2, 0.5);
  ck_assert_int_eq(tc_latest_force(cap, &f), 1);
  fprintf(stderr, "itest_force: capsule %llu messages, force (%g, %g, %g) N, torque (%g, %g, %g) N m\n",
          (unsigned long long)fk.n, f.force[0], f.force[1], f.force[2], f.torque[0],
          f.torque[1], f.torque[2]);
  ck_assert_uint_ge(fk.n, 10);
  ck_assert_uint_eq(fk.bad_stride, 0); /* every tenth step */
  ck_assert_uint_eq(fk.not_next, 0);
  ck_assert_double_gt(f.force[1], 1e-3);
  ck_assert_double_le(fabs(f.torque[2] - 0.01 * f.force[1]), 0.1 * 0.01 * f.force[1]);
  ck_assert_double_le(fabs(f.torque[0]) + fabs(f.torque[1]), 0.1 * 0.01 * f.force[1]);

  /* the daemon counts what it sent, and skipped none (under the soft limit) */
  char name[96];
  snprintf(name, sizeof name, "tissued_session_forces_sent_total{session=\"%u\"}", sid);
  ck_assert_double_ge(ts_dproc_metric(d.http_port, name), (double)(fc.n + fk.n));
  snprintf(name, sizeof name, "tissued_session_forces_skipped_total{session=\"%u\"}", sid);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, name), 0);

  tc_close(cap);
  tc_close(ctl);
  tc_close(obs);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 60000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

int main(void) {
  Suite *s = suite_create("force");
  TCase *tc = tcase_create("force");
  /* above the sum of the waits' bounds that a passing run can approach
   * (start, settle 120 s, three moves): a slow run fails with the wait's
   * own message, not Check's timeout */
  tcase_set_timeout(tc, 480);
  tcase_add_test(tc, test_force_messages);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
