/*
 * test_session_trial.c: Check suite for server/session_trial.c, a new
 * session's trial steps. On the daemon's built-in patch (17 nodes a side),
 * with the mass-spring solver and with XPBD and the session's tree-based
 * tool contact, as create.c sets them up:
 *   - the trial measures: a load over 0, from at least one timed step after
 *     the untimed first, at most TS_TRIAL_STEPS of them;
 *   - it leaves no trace: the tissue is back at rest as built (positions
 *     bit for bit, zero velocities, the start time and step count), and a
 *     session that had the trial then moves as one that did not: 300 steps
 *     of gravity and a sphere pressing 3 mm into the centre, every node
 *     within 1e-12 m and the sphere's force within 1e-9 relative of the
 *     other's. The tolerance: what the trial leaves behind is only the
 *     solver's choice of its short exponential for the first pass
 *     (core/ts_ms_forces.c: the two agree to 2e-14 of the law), rounding
 *     that the motion carries at that scale (measured: 0 m, the same bits,
 *     in both solvers);
 *   - a step that fails ends it unmeasured (load < 0), the tissue at rest;
 *   - the warning: over the threshold only, with the figure.
 */
#include "ts_check.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_massspring.h"
#include "core/ts_tissue.h"
#include "core/ts_xpbd.h"
#include "session.h"
#include "session_contact.h"
#include "session_trial.h"

#define DT 1e-3

/* A session around the built-in patch, as create.c leaves it before its
 * trial: mass-spring, or XPBD with the tree-based tool contact. */
static ts_session *session_of(int xpbd) {
  ts_session *se = calloc(1, sizeof *se);
  ck_assert_ptr_nonnull(se);
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 17;
  ck_assert_int_eq(ts_patch_create(&d, &se->sim.tissue), 0);
  se->sim.dt = DT;
  se->sim.dt_ns = 1000000;
  if (xpbd) {
    ts_xpbd_def def = ts_xpbd_default_def();
    ck_assert_int_eq(ts_xpbd_build(se->sim.tissue, &def, &se->sim.xpbd), 0);
    se->sim.contact = calloc(1, sizeof *se->sim.contact);
    ck_assert_ptr_nonnull(se->sim.contact);
    ck_assert_int_eq(ts_session_contact_init(se->sim.contact, se->sim.tissue), 0);
  }
  for (int i = 0; i < TS_MAX_TOOLS; i++) se->sim.tools[i].quat[0] = 1;
  return se;
}

static void session_free(ts_session *se) {
  if (se->sim.contact) {
    ts_session_contact_free(se->sim.contact);
    free(se->sim.contact);
  }
  ts_xpbd_destroy(se->sim.xpbd);
  ts_tissue_destroy(se->sim.tissue);
  free(se);
}

/* One step as the session takes it, with tool 0 a 5 mm sphere at height y
 * over the centre; the sphere's force into f. */
static void step(ts_session *se, double y, double f[3]) {
  ts_tool *tl = &se->sim.tools[0];
  tl->kind = TS_TOOL_SPHERE;
  tl->active = 1;
  tl->radius = 0.005;
  tl->pos[0] = tl->pos[2] = 0;
  tl->pos[1] = y;
  int rc;
  if (se->sim.xpbd) {
    ts_xpbd_stats xs;
    rc = ts_session_contact_step(se->sim.contact, se->sim.xpbd, se->sim.tissue, DT,
                                 se->sim.tools, &xs);
  } else {
    ts_step_stats st;
    rc = ts_massspring_step(se->sim.tissue, DT, se->sim.tools, TS_MAX_TOOLS, &st);
  }
  ck_assert_int_eq(rc, 0);
  memcpy(f, tl->force, sizeof tl->force);
}

static void assert_at_rest(const ts_tissue *t) {
  ck_assert_int_eq(memcmp(t->x, t->rest, sizeof *t->x * t->n_nodes), 0);
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int c = 0; c < 3; c++) ck_assert(t->v[i][c] == 0);
  ck_assert(t->time == 0);
  ck_assert_uint_eq(t->steps, 0);
}

/* _i: 0 mass-spring, 1 XPBD */
START_TEST(test_trial_leaves_no_trace) {
  ts_session *a = session_of(_i), *b = session_of(_i);
  ts_trial tr;
  ts_session_trial(a, &tr);
  printf("%s: trial load %.4g over %u steps, %.3g ms of CPU time\n", _i ? "xpbd" : "mass-spring",
         tr.load, tr.steps, tr.cpu_s * 1e3);
  ck_assert(isfinite(tr.load) && tr.load > 0);
  ck_assert_uint_ge(tr.steps, 2);
  ck_assert_uint_le(tr.steps, TS_TRIAL_STEPS + 1);
  ck_assert(tr.cpu_s > 0);
  assert_at_rest(a->sim.tissue);
  /* the same script on both: settle 100 steps with the sphere far above,
   * then lower it to 3 mm below the patch's top and hold */
  const ts_tissue *ta = a->sim.tissue, *tb = b->sim.tissue;
  double fa[3], fb[3], worst = 0, fworst = 0;
  for (int k = 0; k < 300; k++) {
    const double y = k < 100 ? 0.05 : fmax(0.05 - (k - 100) * 0.001, 0.005 - 0.003);
    step(a, y, fa);
    step(b, y, fb);
    const double fn = sqrt(fb[0] * fb[0] + fb[1] * fb[1] + fb[2] * fb[2]);
    for (int c = 0; c < 3; c++)
      if (fn > 0) fworst = fmax(fworst, fabs(fa[c] - fb[c]) / fn);
  }
  for (uint32_t i = 0; i < ta->n_nodes; i++)
    for (int c = 0; c < 3; c++) worst = fmax(worst, fabs(ta->x[i][c] - tb->x[i][c]));
  printf("%s: after 300 steps: nodes within %.3g m, the force within %.3g of it (%.4g N)\n",
         _i ? "xpbd" : "mass-spring", worst, fworst,
         sqrt(fb[0] * fb[0] + fb[1] * fb[1] + fb[2] * fb[2]));
  ck_assert(fb[1] > 0); /* the sphere pressed: the tissue pushes it up */
  ck_assert_double_le(worst, 1e-12);
  ck_assert_double_le(fworst, 1e-9);
  session_free(a);
  session_free(b);
}
END_TEST

/* A step that fails: no load, the tissue back at rest. */
START_TEST(test_trial_failure) {
  ts_session *se = session_of(0);
  se->sim.tissue->x[5][1] = NAN;
  ts_trial tr;
  ts_session_trial(se, &tr);
  ck_assert(tr.load < 0);
  ck_assert_uint_eq(tr.steps, 0);
  assert_at_rest(se->sim.tissue);
  session_free(se);
}
END_TEST

START_TEST(test_trial_warning) {
  char w[400];
  ts_trial tr = {.load = 0.9, .steps = 21, .cpu_s = 0.02};
  ts_session_trial_warning(&tr, 1.0, w, sizeof w);
  ck_assert_str_eq(w, "");
  tr.load = -1; /* not measured */
  ts_session_trial_warning(&tr, 1.0, w, sizeof w);
  ck_assert_str_eq(w, "");
  tr.load = 130.4;
  ts_session_trial_warning(&tr, 1.0, w, sizeof w);
  ck_assert_msg(strstr(w, "about 130 times the time it simulates") && strstr(w, "slow motion"),
                "%s", w);
  ts_session_trial_warning(&tr, 200.0, w, sizeof w); /* under --slow-lane-load 200 */
  ck_assert_str_eq(w, "");
}
END_TEST

int main(void) {
  Suite *s = suite_create("session_trial");
  TCase *tc = tcase_create("trial");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_trial_leaves_no_trace, 0, 2);
  tcase_add_test(tc, test_trial_failure);
  tcase_add_test(tc, test_trial_warning);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
