/*
 * test_session_sleep.c: Check suite for server/session_sleep.c, a tissue
 * at rest not being stepped. Two copies of the default patch (the daemon's
 * built-in tissue, 17 nodes a side) go through the same script, stepped as
 * server/session.c steps them: one may sleep, the other never does. The
 * script: settle with a 5 mm sphere hovering 30 mm above the patch, move
 * it sideways up there, lower it at 0.1 m/s and press it 4 mm into the
 * centre, hold. The sleeping copy must fall asleep after TS_SLEEP_TIME and
 * before 3 s, stay asleep while the sphere moves far above, wake before
 * the sphere's first contact, and then end the press where the other copy
 * ends it: every node within 1 um and the force on the sphere within 0.1
 * %; for each solver that sleeps, mass-spring and XPBD (the session's
 * tree-based tool contact). The tolerance: what sleeping stops is motion
 * under 1e-6 m/s on every node, decaying (the patch's slowest mode loses a
 * factor of ten in about a quarter of a second, so about 0.1 um of travel
 * was left), and the press's equilibrium does not depend on it; 1 um is a
 * hundredth of the frames' 10 um grid, 0.1 % far under anything a haptic
 * device renders. (Measured: mass-spring 2e-14 m, XPBD 5e-16 m, the same
 * force to 9 digits in both, the sleeping copy asleep at 1.11 s and 0.66
 * s, woken 40 steps before the first contact.) Other cases: a reset or
 * another tissue wakes it; speed 0 never sleeps; the asleep step only
 * advances the time.
 */
#include "ts_check.h"
#include <math.h>
#include <string.h>

#include "core/ts_massspring.h"
#include "core/ts_tissue.h"
#include "core/ts_tool.h"
#include "core/ts_tool_contact.h"
#include "core/ts_xpbd.h"
#include "patch_fixture.h"
#include "session_contact.h"
#include "session_sleep.h"

#define DT 1e-3
#define RADIUS 0.005
#define MAX_STEP (1.0 * DT) /* the daemon's tool-max-speed, 1 m/s */

typedef struct sim {
  ts_tissue *t;
  ts_xpbd *xpbd;             /* NULL: mass-spring */
  ts_session_contact contact; /* XPBD: the session's tree-based tool contact */
  ts_tool_contact tc;
  ts_session_sleep sl;
  ts_tool tool[TS_MAX_TOOLS];
  uint32_t contacts; /* of the last step */
} sim;

static void sim_init(sim *s, double speed, int xpbd) {
  memset(s, 0, sizeof *s);
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 17;
  ck_assert_int_eq(ts_patch_create(&d, &s->t), 0);
  if (xpbd) {
    ts_xpbd_def def = ts_xpbd_default_def();
    ck_assert_int_eq(ts_xpbd_build(s->t, &def, &s->xpbd), 0);
    ck_assert_int_eq(ts_session_contact_init(&s->contact, s->t), 0);
  }
  ck_assert_int_eq(ts_tool_contact_init(&s->tc, TS_MAX_TOOLS, 0), 0);
  ts_session_sleep_init(&s->sl, speed, MAX_STEP);
  ts_tool *tl = &s->tool[0];
  tl->kind = TS_TOOL_SPHERE;
  tl->active = 1;
  tl->radius = RADIUS;
  tl->quat[0] = 1;
  tl->pos[1] = 0.03;
  tl->mu_static = TS_TOOL_MU_STATIC_DEFAULT;
  tl->mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
}

static void sim_free(sim *s) {
  ts_tool_contact_free(&s->tc);
  if (s->xpbd) {
    ts_session_contact_free(&s->contact);
    ts_xpbd_destroy(s->xpbd);
  }
  ts_tissue_destroy(s->t);
}

/* One step as server/session.c takes it; 1 when it slept. */
static int sim_step(sim *s) {
  ts_tool_contact_step(&s->tc, s->tool, TS_MAX_TOOLS);
  const int sl = ts_session_sleep_check(&s->sl, s->t, &s->tc, s->tool, TS_MAX_TOOLS);
  if (sl == TS_SLEEP_ASLEEP) {
    ts_session_sleep_skip_step(&s->sl, s->t, s->tool, TS_MAX_TOOLS, DT);
    s->contacts = 0;
    return 1;
  }
  if (sl == TS_SLEEP_WOKE) {
    if (s->xpbd) ts_session_contact_reset(&s->contact);
    else ck_assert_int_eq(ts_massspring_carry_tools(s->t, NULL), 0);
  }
  if (s->xpbd) {
    ts_xpbd_stats xs;
    memset(&xs, 0, sizeof xs);
    ck_assert_int_eq(ts_session_contact_step(&s->contact, s->xpbd, s->t, DT, s->tool, &xs), 0);
    s->contacts = xs.contacts;
  } else {
    ts_step_stats st;
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(ts_massspring_step(s->t, DT, s->tool, TS_MAX_TOOLS, &st), 0);
    s->contacts = st.contacts;
  }
  ts_session_sleep_after(&s->sl, s->t, &s->tc, s->tool, TS_MAX_TOOLS, s->contacts, DT);
  return 0;
}

/* _i: 0 mass-spring, 1 XPBD */
START_TEST(test_press_after_sleep) {
  sim a, b;
  sim_init(&a, TS_SLEEP_SPEED_DEFAULT, _i);
  sim_init(&b, 0, _i);
  /* settle, the sphere 30 mm up */
  int asleep_at = -1;
  for (int k = 0; k < 3000; k++) {
    sim_step(&a);
    sim_step(&b);
    if (a.sl.asleep && asleep_at < 0) asleep_at = k;
  }
  ck_assert_msg(asleep_at >= (int)(TS_SLEEP_TIME / DT) && asleep_at < 3000, "asleep at step %d",
                asleep_at);
  ck_assert(!b.sl.asleep);
  ck_assert_uint_eq(a.sl.sleeps, 1);
  /* the sphere moves 20 mm sideways, far above: no step is computed */
  const uint64_t slept0 = a.sl.slept_steps;
  for (int k = 0; k < 400; k++) {
    a.tool[0].pos[0] = b.tool[0].pos[0] = 0.02 * sin(k * 0.01);
    ck_assert_int_eq(sim_step(&a), 1);
    sim_step(&b);
  }
  ck_assert_uint_eq(a.sl.slept_steps - slept0, 400);
  ck_assert_double_lt(fabs(a.tool[0].force[1]), 1e-300);
  /* lower it at 0.1 m/s to 4 mm under the centre's surface, then hold */
  const uint32_t top = fx_top_centre(a.t);
  const double surface = b.t->x[top][1], target = surface + RADIUS - 0.004;
  a.tool[0].pos[0] = b.tool[0].pos[0] = 0;
  int woke_at = -1, first_contact = -1;
  for (int k = 0; k < 800; k++) {
    double y = a.tool[0].pos[1] - 1e-4;
    if (y < target) y = target;
    a.tool[0].pos[1] = b.tool[0].pos[1] = y;
    int slept = sim_step(&a);
    sim_step(&b);
    if (!slept && woke_at < 0) woke_at = k;
    if ((a.contacts || b.contacts) && first_contact < 0) first_contact = k;
    if (woke_at >= 0) ck_assert(!a.sl.asleep); /* the tool is in the box from then on */
  }
  ck_assert_msg(woke_at >= 0 && first_contact > woke_at, "woke at %d, first contact at %d",
                woke_at, first_contact);
  ck_assert_double_lt(fabs(a.t->time - b.t->time), 1e-9);
  double dx = 0;
  for (uint32_t i = 0; i < a.t->n_nodes; i++)
    for (int c = 0; c < 3; c++) dx = fmax(dx, fabs(a.t->x[i][c] - b.t->x[i][c]));
  const double fa = a.tool[0].force[1], fb = b.tool[0].force[1];
  ck_assert_msg(fb > 0.05, "the press's force %g N", fb); /* a real press */
  ck_assert_msg(dx < 1e-6, "nodes %g m apart", dx);
  ck_assert_msg(fabs(fa - fb) < 1e-3 * fb, "force %.9g N after a sleep, %.9g N without", fa, fb);
  ck_assert_uint_eq(a.contacts, b.contacts);
  sim_free(&a);
  sim_free(&b);
}
END_TEST

START_TEST(test_wakes) {
  sim a;
  sim_init(&a, TS_SLEEP_SPEED_DEFAULT, 0);
  a.tool[0].active = 0; /* no tool at all */
  for (int k = 0; k < 3000 && !a.sl.asleep; k++) sim_step(&a);
  ck_assert(a.sl.asleep);
  /* asleep, a step moves nothing and advances the time */
  double x0[3];
  memcpy(x0, a.t->x[fx_top_centre(a.t)], sizeof x0);
  const double t0 = a.t->time;
  ck_assert_int_eq(sim_step(&a), 1);
  ck_assert_double_eq_tol(a.t->time, t0 + DT, 1e-15);
  ck_assert(memcmp(x0, a.t->x[fx_top_centre(a.t)], sizeof x0) == 0);
  /* a reset (or a pending refinement) wakes it, the next check says so
   * (the solver then forgets the tools' poses), and it sleeps again later */
  ts_session_sleep_wake(&a.sl);
  ck_assert(!a.sl.asleep);
  ck_assert_int_eq(ts_session_sleep_check(&a.sl, a.t, &a.tc, a.tool, TS_MAX_TOOLS),
                   TS_SLEEP_WOKE);
  ck_assert_int_eq(ts_session_sleep_check(&a.sl, a.t, &a.tc, a.tool, TS_MAX_TOOLS),
                   TS_SLEEP_AWAKE);
  ts_session_sleep_wake(&a.sl); /* awake already: nothing to tell */
  ck_assert_int_eq(ts_session_sleep_check(&a.sl, a.t, &a.tc, a.tool, TS_MAX_TOOLS),
                   TS_SLEEP_AWAKE);
  ck_assert_int_eq(sim_step(&a), 0);
  for (int k = 0; k < 3000 && !a.sl.asleep; k++) sim_step(&a);
  ck_assert(a.sl.asleep);
  ck_assert_uint_eq(a.sl.sleeps, 2);
  /* another tissue in the session (a refinement's install) wakes it */
  sim other;
  sim_init(&other, TS_SLEEP_SPEED_DEFAULT, 0);
  ck_assert_int_eq(ts_session_sleep_check(&a.sl, other.t, &a.tc, a.tool, TS_MAX_TOOLS),
                   TS_SLEEP_WOKE);
  ck_assert(!a.sl.asleep);
  ck_assert_int_eq(ts_session_sleep_check(&a.sl, a.t, &a.tc, a.tool, TS_MAX_TOOLS),
                   TS_SLEEP_AWAKE);
  /* a tool activated inside the grown box wakes it at once */
  for (int k = 0; k < 3000 && !a.sl.asleep; k++) sim_step(&a);
  ck_assert(a.sl.asleep);
  a.tool[0].active = 1;
  a.tool[0].pos[1] = a.sl.hi[1] - 0.0005 + RADIUS; /* its bottom just inside the margin */
  ck_assert_int_eq(sim_step(&a), 0);
  sim_free(&other);
  sim_free(&a);
}
END_TEST

START_TEST(test_speed_zero_never) {
  sim a;
  sim_init(&a, 0, 0);
  for (int k = 0; k < 3000; k++) ck_assert_int_eq(sim_step(&a), 0);
  ck_assert(!a.sl.asleep);
  ck_assert_uint_eq(a.sl.slept_steps, 0);
  sim_free(&a);
}
END_TEST

/* A non-finite velocity is motion, not rest (the step stops a diverging
 * tissue first; this is the rule's own guard). */
START_TEST(test_nan_not_still) {
  sim a;
  sim_init(&a, TS_SLEEP_SPEED_DEFAULT, 0);
  a.tool[0].active = 0;
  for (uint32_t i = 0; i < a.t->n_nodes; i++) memset(a.t->v[i], 0, sizeof a.t->v[i]);
  a.t->v[a.t->n_nodes / 2][1] = NAN;
  for (int k = 0; k < 2000; k++)
    ts_session_sleep_after(&a.sl, a.t, &a.tc, a.tool, TS_MAX_TOOLS, 0, DT);
  ck_assert(!a.sl.asleep);
  a.t->v[a.t->n_nodes / 2][1] = 0; /* and at rest it sleeps */
  for (int k = 0; k < 2000; k++)
    ts_session_sleep_after(&a.sl, a.t, &a.tc, a.tool, TS_MAX_TOOLS, 0, DT);
  ck_assert(a.sl.asleep);
  sim_free(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("session_sleep");
  TCase *tc = tcase_create("sleep");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_press_after_sleep, 0, 2);
  tcase_add_test(tc, test_wakes);
  tcase_add_test(tc, test_speed_zero_never);
  tcase_add_test(tc, test_nan_not_still);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
