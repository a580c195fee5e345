/*
 * test_robust.c: no well-formed pose sequence may wreck a session (issue 8's
 * "bad input of any kind ... never crashes"): the physics steps with a tool
 * proxy that follows the commanded pose at a bounded speed
 * (ts_tool_proxy.h), and this suite drives both solvers (mass-spring, the
 * default, and XPBD with its tree-based contact) on the default patch with
 * every tool shape they take through abusive commands:
 *   - the first pose 7 mm deep into the 4.5 mm patch (a 5 mm sphere's
 *     centre 2 mm under the top: what made the mass-spring patch diverge);
 *   - opposite extremes every step (40 mm above and below the sheet);
 *   - metres away and back deep;
 *   - 10 m/s sweeps across the patch 3 mm deep;
 *   - the jaws closing while deep (XPBD);
 *   - a bounded random pose every step (position, orientation, opening).
 * Every step must succeed (no divergence, no reset), every position stay
 * finite and within 10 cm of the patch, every speed under 20 m/s (the
 * proxy's 1 m/s tool cannot push tissue faster than a few times its own
 * speed; the divergence check's runaway bound is 100 m/s). 1 s after the
 * tool is withdrawn the tissue is at rest (every node under 1 mm/s) and
 * near the tissue settled without a tool: within 10 um (the wire's
 * quantum), as the solvers' inversion guards undo the folds a tool driven
 * through the sheet leaves (a spring network has reflected equilibria;
 * ts_fold_guard.h). Mass-spring ends 0.02 um off (ts_ms_guard.c; with the
 * guard under the tools alone, without its sweep, the sphere and mesh runs
 * stayed folded 2 mm off), XPBD 2e-13 mm (ts_xpbd_guard.c; without a guard
 * 2.1-2.6 mm).
 * The proxy itself: bounded travel and turn per step, exact arrival.
 * And mesh tools in the mass-spring step (issue 5): a sphere mesh pressed
 * 4 mm into the patch carries what the anchors do not (tool force =
 * weight minus the anchors' reaction, 1 % of the vertical force: the
 * balance of test_core's exact sphere, whose 0.1 % leaves no room for a
 * mesh's faceted normals) and within 10 % of the exact sphere's force (the
 * mesh lies up to its sagitta, 0.1 mm, inside the sphere).
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_massspring.h"
#include "core/ts_mesh.h"
#include "core/ts_obb_tree.h"
#include "core/ts_tissue.h"
#include "core/ts_tool_proxy.h"
#include "core/ts_xpbd.h"
#include "balance_fixture.h"
#include "mesh_fixtures.h"
#include "session_contact.h"

#define DT 1e-3
#define SPEED 1.0 /* m/s: the daemon's default tool-max-speed */

/* A sanitizer build (memory and undefined behaviour, not the figures)
 * runs every phase of the abuse, each as the normal build does but the
 * random poses (80 of them instead of 250: the same code, any pose and
 * opening, at every one), after 100 steps of settling instead of 300
 * (gravity alone, the tool parked), and withdraws the tool in 60 steps
 * (the proxy's 1 mm per step lifts it 60 mm, clear of the sheet from
 * wherever the random poses left it) without the 1 s of
 * rest after it: at rest and near the untouched twin are figures of the
 * physics, checked by the normal build, and the twin is not stepped.
 * The mesh press runs the mesh tool alone there (the turned mesh and the
 * exact sphere are the same step with another frame or shape, which the
 * abuse cases run). The abuse case took 132 s under ASan in full. */
#ifdef TS_TEST_SANITIZED
#define SETTLE_STEPS 100
#define RANDOM_STEPS 80
#define WITHDRAW_STEPS 60
#else
#define SETTLE_STEPS 300
#define RANDOM_STEPS 250
#define WITHDRAW_STEPS 1000
#endif
/* The abuse's repeated phases, run fewer times there too: the extremes
 * (20 steps: the proxy's 1 mm a step up and down, as each of the normal
 * build's 100 does), the sweeps (two of the ten cycles of 12 commands) and
 * the deep hold after the return from metres away (70 steps: the 50 of the
 * way back and 20 held deep, of 150). Each step is the same code with the
 * same checks; the 256 steps left out took 13 s of this test's 59 s of
 * CPU under ASan+UBSan. */
#ifdef TS_TEST_SANITIZED
#define EXTREME_STEPS 20
#define SWEEP_STEPS 24
#define DEEP_STEPS 70
#else
#define EXTREME_STEPS 100
#define SWEEP_STEPS 120
#define DEEP_STEPS 150
#endif
#define PI 3.14159265358979323846

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* xorshift64*, uniform in [0, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

/* ---- the proxy alone ---- */

START_TEST(test_proxy_bounded) {
  ts_tool p;
  memset(&p, 0, sizeof p);
  p.kind = TS_TOOL_CAPSULE;
  p.radius = 0.001;
  p.length = 0.029; /* reach 30 mm */
  p.quat[0] = 1;
  const double far[3] = {3, 4, 0}; /* 5 m away */
  const double q90[4] = {cos(PI / 4), 0, 0, sin(PI / 4)}; /* 90 degrees about z */
  const double step = 0.002; /* m per step: 2 m/s at 1 ms */
  int steps = 0, rc = 0;
  while ((rc = ts_tool_proxy_follow(&p, far, q90, 0.5, step)) == 0) {
    steps++;
    ck_assert_int_lt(steps, 10000);
  }
  ck_assert_int_eq(rc, 1);
  /* 5 m at 2 mm per step: 2500 steps, the last one arriving (2499 lagging
   * ones, one more when rounding leaves a sliver) */
  ck_assert_int_ge(steps, 2499);
  ck_assert_int_le(steps, 2500);
  for (int k = 0; k < 3; k++) ck_assert_double_eq(p.pos[k], far[k]);
  for (int k = 0; k < 4; k++) ck_assert_double_eq(p.quat[k], q90[k]);
  ck_assert_double_eq(p.jaw, 0.5); /* long since there: 0.5 takes 8 steps */
  /* the turn: 90 degrees at 2 mm / 30 mm per step takes ceil(23.56) steps;
   * each step turns by the bound (rounding 1e-9 rad) */
  memset(&p, 0, sizeof p);
  p.kind = TS_TOOL_CAPSULE;
  p.radius = 0.001;
  p.length = 0.029;
  p.quat[0] = 1;
  const double zero[3] = {0, 0, 0};
  double last[4] = {1, 0, 0, 0};
  for (steps = 1; (rc = ts_tool_proxy_follow(&p, zero, q90, 0, step)) == 0; steps++) {
    double c = fabs(last[0] * p.quat[0] + last[1] * p.quat[1] + last[2] * p.quat[2] +
                    last[3] * p.quat[3]);
    ck_assert_double_eq_tol(2 * acos(c > 1 ? 1 : c), step / 0.03, 1e-6);
    memcpy(last, p.quat, sizeof last);
    ck_assert_int_lt(steps, 100);
  }
  ck_assert_int_eq(steps, 24);
  /* bad commands change nothing */
  const double bad[3] = {NAN, 0, 0};
  ck_assert_int_eq(ts_tool_proxy_follow(&p, bad, q90, 0, step), TS_ENAN);
  ck_assert_int_eq(ts_tool_proxy_follow(&p, zero, q90, 0, -1), TS_EINVAL);
  for (int k = 0; k < 3; k++) ck_assert_double_eq(p.pos[k], 0);
  /* unbounded: at once */
  ck_assert_int_eq(ts_tool_proxy_follow(&p, far, q90, 0, 0), 1);
  ck_assert_double_eq(p.pos[0], 3);
}
END_TEST

/* ---- sessions under abuse ---- */

typedef struct world {
  int xpbd;
  ts_tissue *t;
  ts_xpbd *x;
  ts_session_contact sc;
  ts_tool tools[TS_MAX_TOOLS]; /* tool 0 is the proxy */
  double top;                  /* settled height of the patch's centre, m */
  double max_speed;            /* largest node speed seen, m/s */
  long steps;
  uint64_t guard_pushes;       /* the inversion guard's, summed over the steps */
  const char *what;
} world;

static void world_step(world *w) {
  int rc;
  if (w->xpbd) {
    ts_xpbd_stats st;
    rc = ts_session_contact_step(&w->sc, w->x, w->t, DT, w->tools, &st);
    if (!rc) w->guard_pushes += st.guard_pushes;
  } else {
    ts_step_stats st;
    rc = ts_massspring_step(w->t, DT, w->tools, 1, &st);
    if (!rc) w->guard_pushes += st.guard_pushes;
  }
  if (rc) ck_abort_msg("%s: step %ld failed: %s", w->what, w->steps, ts_strerror(rc));
  /* (plain checks per node, one assertion: Check's are slow per call) */
  uint32_t bad = UINT32_MAX;
  double worst = 0;
  for (uint32_t i = 0; i < w->t->n_nodes && bad == UINT32_MAX; i++) {
    const double *x = w->t->x[i], *v = w->t->v[i];
    for (int k = 0; k < 3; k++)
      if (!(isfinite(x[k]) && fabs(x[k]) < 0.1)) bad = i, worst = x[k];
    double s = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (!(s < 20.0)) bad = i, worst = s;
    if (s > w->max_speed) w->max_speed = s;
  }
  if (bad != UINT32_MAX)
    ck_abort_msg("%s: step %ld node %u out of bounds (%g m or m/s)", w->what, w->steps, bad, worst);
  for (int k = 0; k < 3; k++) ck_assert(isfinite(w->tools[0].force[k]));
  w->steps++;
}

static void world_init(world *w, int xpbd, int kind, double radius, double length,
                       const ts_obb_tree *shape, const char *what) {
  memset(w, 0, sizeof *w);
  w->xpbd = xpbd;
  w->what = what;
  ts_patch_def pd = ts_default_patch_def();
  pd.resolution = 17; /* the daemon's default patch-resolution */
  ck_assert_int_eq(ts_patch_create(&pd, &w->t), 0);
  if (xpbd) {
    ts_xpbd_def d = ts_xpbd_default_def();
    d.damping = w->t->drag;
    ck_assert_int_eq(ts_xpbd_build(w->t, &d, &w->x), 0);
    ck_assert_int_eq(ts_session_contact_init(&w->sc, w->t), 0);
  }
  for (int i = 0; i < TS_MAX_TOOLS; i++) w->tools[i].quat[0] = 1;
  ts_tool *tl = &w->tools[0];
  tl->kind = kind;
  tl->radius = radius;
  tl->length = length;
  tl->shape = shape;
  tl->pos[1] = 0.05; /* parked */
  tl->jaw = 1;
  for (int i = 0; i < SETTLE_STEPS; i++) world_step(w); /* settle under gravity */
  tl->active = 1;
  /* the patch's centre node (the top sheet's nearest to the axis) */
  double bd = INFINITY;
  for (uint32_t j = 0; j < w->t->nodes_per_sheet; j++) {
    double d = hypot(w->t->rest[j][0], w->t->rest[j][2]);
    if (d < bd) bd = d, w->top = w->t->x[j][1];
  }
}

static void world_free(world *w) {
  if (w->xpbd) {
    ts_session_contact_free(&w->sc);
    ts_xpbd_destroy(w->x);
  }
  ts_tissue_destroy(w->t);
}

/* One step commanding (pos, quat, jaw) through the proxy. */
static void command(world *w, double x, double y, double z, const double q[4], double jaw) {
  const double p[3] = {x, y, z};
  ck_assert_int_ge(ts_tool_proxy_follow(&w->tools[0], p, q, jaw, SPEED * DT), 0);
  world_step(w);
}

static void abuse(world *w) {
  const double id[4] = {1, 0, 0, 0};
  const double r = w->tools[0].radius, top = w->top;
  /* the first pose 7 mm deep */
  for (int i = 0; i < 60; i++) command(w, 0, top + r - 0.007, 0, id, 1);
  /* opposite extremes every step */
  for (int i = 0; i < EXTREME_STEPS; i++) command(w, 0.004, top + ((i & 1) ? 0.04 : -0.04), 0, id, 1);
  /* metres away, then straight back in deep */
  for (int i = 0; i < 50; i++) command(w, 10, 10, -10, id, 0);
  for (int i = 0; i < DEEP_STEPS; i++) command(w, 0.01, top - 0.003, 0.005, id, 1);
  /* 10 m/s sweeps across the patch, 3 mm deep: 10 mm per commanded step */
  for (int i = 0; i < SWEEP_STEPS; i++) {
    int k = i % 12;
    command(w, -0.03 + 0.06 * (k < 6 ? k : 12 - k) / 6.0, top + r - 0.003, 0, id, 1);
  }
  /* close the jaws deep, pull up, open */
  for (int i = 0; i < 60; i++) command(w, 0, top - 0.002, 0, id, 1);
  for (int i = 0; i < 60; i++) command(w, 0, top - 0.002, 0, id, 0);
  for (int i = 0; i < 60; i++) command(w, 0, top + 0.02, 0, id, 0);
  for (int i = 0; i < 20; i++) command(w, 0, top + 0.02, 0, id, 1);
  /* a bounded random pose every step: within 30 mm of the centre, any
   * orientation and opening */
  for (int i = 0; i < RANDOM_STEPS; i++) {
    double q[4];
    for (int k = 0; k < 4; k++) q[k] = 2 * urand() - 1;
    command(w, 0.06 * (urand() - 0.5), top + 0.06 * (urand() - 0.5), 0.06 * (urand() - 0.5), q,
            urand());
  }
}

/* The twin of each solver (index xpbd): the patch settled without a tool,
 * its positions after 400 steps (world_init's 300 and 100 more; its tool
 * never active, so it is the same tissue whatever the run's tool). Stepped
 * once for the seven runs, in the abuse case's unchecked fixture (Check
 * runs it in the parent, before the cases' forks), instead of in each run:
 * it was 400 of a run's 1,970 steps. */
static double (*twin_x[2])[3];
static uint32_t twin_n[2];

static void twins_setup(void) {
  for (int xpbd = 0; xpbd < 2; xpbd++) {
    world twin;
    world_init(&twin, xpbd, TS_TOOL_SPHERE, 0.005, 0, NULL, "twin");
    twin.tools[0].active = 0;
    while (twin.steps < 400) world_step(&twin);
    twin_n[xpbd] = twin.t->n_nodes;
    twin_x[xpbd] = malloc(sizeof *twin_x[xpbd] * twin.t->n_nodes);
    ck_assert_ptr_nonnull(twin_x[xpbd]);
    memcpy(twin_x[xpbd], twin.t->x, sizeof *twin_x[xpbd] * twin.t->n_nodes);
    world_free(&twin);
  }
}

static void twins_free(void) {
  for (int xpbd = 0; xpbd < 2; xpbd++) free(twin_x[xpbd]), twin_x[xpbd] = NULL;
}

/* Runs the abuse on one solver and tool, withdraws the tool and compares
 * the tissue with its twin settled without a tool. */
static void run(int xpbd, int kind, double radius, double length, const ts_obb_tree *shape,
                const char *what) {
  world w;
  rng = 0x9e3779b97f4a7c15ull; /* each run the same poses */
  world_init(&w, xpbd, kind, radius, length, shape, what);
  abuse(&w);
  const double id[4] = {1, 0, 0, 0};
  long abused = w.steps;
  double peak = w.max_speed;
  for (int i = 0; i < WITHDRAW_STEPS; i++) command(&w, 0, 0.05, 0, id, 1);
#ifdef TS_TEST_SANITIZED
  printf("%s: %ld abusive steps, fastest node %.3g m/s (the rest after the withdrawal: the normal "
         "build)\n", what, abused, peak);
  world_free(&w);
  return;
#endif
  const double (*tx)[3] = (const double (*)[3])twin_x[xpbd];
  ck_assert_ptr_nonnull(tx);
  ck_assert_uint_eq(twin_n[xpbd], w.t->n_nodes);
  double dmax = 0, vmax = 0;
  for (uint32_t i = 0; i < w.t->n_nodes; i++) {
    double d = 0, v = 0;
    for (int k = 0; k < 3; k++) v += w.t->v[i][k] * w.t->v[i][k];
    vmax = fmax(vmax, sqrt(v));
    for (int k = 0; k < 3; k++) d += pow(w.t->x[i][k] - tx[i][k], 2);
    if (sqrt(d) > dmax) dmax = sqrt(d);
  }
  printf("%s: %ld abusive steps, fastest node %.3g m/s; 1 s after withdrawal fastest %.3g "
         "mm/s, %.3g mm from the untouched tissue\n",
         what, abused, peak, vmax * 1e3, dmax * 1e3);
  ck_assert_msg(vmax < 1e-3, "%s: still moving at %.3g m/s", what, vmax);
  ck_assert_msg(dmax < 1e-5, "%s: %.3g mm from the untouched tissue", what, dmax * 1e3);
  world_free(&w);
}

START_TEST(test_massspring_sphere) { run(0, TS_TOOL_SPHERE, 0.005, 0, NULL, "mass-spring sphere 5 mm"); }
END_TEST
START_TEST(test_massspring_capsule) {
  run(0, TS_TOOL_CAPSULE, 0.0005, 0.03, NULL, "mass-spring capsule 0.5 x 30 mm");
}
END_TEST
START_TEST(test_massspring_mesh) {
  ts_mesh *m = fx_uv_sphere(0.005, 12, 24);
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *tr = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tr), 0);
  run(0, TS_TOOL_MESH, 0.005, 0, tr, "mass-spring sphere mesh 5 mm");
  ts_obb_tree_destroy(tr);
  ts_mesh_free(m);
}
END_TEST
START_TEST(test_xpbd_sphere) { run(1, TS_TOOL_SPHERE, 0.005, 0, NULL, "XPBD sphere 5 mm"); }
END_TEST
START_TEST(test_xpbd_capsule) {
  run(1, TS_TOOL_CAPSULE, 0.0005, 0.03, NULL, "XPBD capsule 0.5 x 30 mm");
}
END_TEST
START_TEST(test_xpbd_jaws) { run(1, TS_TOOL_JAWS, 0.002, 0, NULL, "XPBD jaws"); }
END_TEST
START_TEST(test_xpbd_mesh) {
  ts_mesh *m = fx_uv_sphere(0.005, 12, 24);
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *tr = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tr), 0);
  run(1, TS_TOOL_MESH, 0.005, 0, tr, "XPBD sphere mesh 5 mm");
  ts_obb_tree_destroy(tr);
  ts_mesh_free(m);
}
END_TEST

/* ---- a deep press held: energy coming free is not a divergence ---- */

/* The daemon's default patch (resolution 17) settled 300 steps; a 5 mm
 * sphere lowered at 0.5 m/s to 6 mm under the patch's settled top and held
 * there 200 steps. After about 160 steps of the hold the centre node slips
 * off the sphere's lowest point and the sheet snaps round it: the kinetic
 * energy grows from nanojoules by over 20 % a step for 20 steps and more,
 * as an unstable integration's does, and the growth test reset the session
 * as diverged ("the kinetic energy grew from 2.61e-09 J to 5.88e-07 J over
 * 20 steps"). The energy comes from the springs and gravity: the total
 * does not grow with it (ts_ms_diverge.c, released), and the step goes
 * on. Checked: every step succeeds, and the run of growth the test is
 * about happened (the kinetic energy computed here, 1/2 m v^2 over the
 * free nodes; if a change elsewhere removed the snap, this says so instead
 * of passing without it). test_core's test_divergence_energy_growth keeps
 * the unstable integration's growth caught. Its own setup, not world_init:
 * the same state in every build (300 settling steps, not the sanitizer
 * build's 100) and 0.5 m/s (at the abuse's 1 m/s the same press did not
 * snap). */
START_TEST(test_massspring_deep_hold) {
  ts_patch_def pd = ts_default_patch_def();
  pd.resolution = 17;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &t), 0);
  ts_tool tl[1];
  memset(tl, 0, sizeof tl);
  tl[0].kind = TS_TOOL_SPHERE;
  tl[0].radius = 0.005;
  tl[0].quat[0] = 1;
  tl[0].pos[1] = 0.05;
  tl[0].jaw = 1;
  ts_step_stats st;
  for (int i = 0; i < 300; i++) ck_assert_int_eq(ts_massspring_step(t, DT, tl, 1, &st), 0);
  double top = 0, bd = INFINITY;
  for (uint32_t j = 0; j < t->nodes_per_sheet; j++) {
    double d = hypot(t->rest[j][0], t->rest[j][2]);
    if (d < bd) bd = d, top = t->x[j][1];
  }
  tl[0].active = 1;
  const double id[4] = {1, 0, 0, 0};
  double ke_prev = 0;
  int run = 0, longest = 0;
  for (int i = 0; i < 300; i++) {
    const double p[3] = {0, i < 100 ? top + 0.005 + 0.002 : top + 0.005 - 0.006, 0};
    ck_assert_int_ge(ts_tool_proxy_follow(&tl[0], p, id, 1, 0.5 * DT), 0);
    const int rc = ts_massspring_step(t, DT, tl, 1, &st);
    if (rc) {
      char why[256];
      ts_massspring_diverged_text(&st, why, sizeof why);
      ck_abort_msg("step %d of the press: %s (%s)", i, ts_strerror(rc), why);
    }
    double ke = 0;
    for (uint32_t n = 0; n < t->n_nodes; n++)
      if (t->inv_mass[n] > 0)
        ke += 0.5 * (t->v[n][0] * t->v[n][0] + t->v[n][1] * t->v[n][1] + t->v[n][2] * t->v[n][2]) /
              t->inv_mass[n];
    run = ke > 1e-12 && ke > 1.2 * ke_prev ? run + 1 : 0;
    if (run > longest) longest = run;
    ke_prev = ke;
  }
  printf("deep hold: the longest run of kinetic energy growth over 20 %% a step: %d steps\n",
         longest);
  ck_assert_msg(longest >= 20, "no snap to test: the longest growth run was %d steps", longest);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- a press lifted off leaves no fold ---- */

/* The default patch (resolution 17) settled 300 steps; a sphere commanded
 * depth under the settled top at speed (through the proxy, 200 steps),
 * then up to 50 mm above (100 steps), then 400 steps of rest; every node
 * then within 10 um (the wire's quantum) of the patch stepped as long
 * without a tool. Without the inversion guard (ts_ms_guard.c, its
 * stiffness set to 0) 34 of 48 such presses (5 and 2 mm spheres, 2 to 7
 * mm, 0.5 to 3 m/s) left a column folded through, 2.0 to 5.9 mm off
 * (this test's first case: 2.02 mm); with it none (worst 1.2 um; here
 * 0.26-0.61 um). The guard's pushes are counted, so that a press it no
 * longer reaches fails here. */
static void press_lift(double radius, double depth, double speed, const double (*twin)[3],
                       uint32_t *pushes) {
  ts_patch_def pd = ts_default_patch_def();
  pd.resolution = 17;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &t), 0);
  ts_tool tl = {.kind = TS_TOOL_SPHERE, .radius = radius, .quat = {1, 0, 0, 0}, .jaw = 1};
  tl.pos[1] = 0.05;
  ts_step_stats st;
  for (int i = 0; i < 300; i++) ck_assert_int_eq(ts_massspring_step(t, DT, &tl, 1, &st), 0);
  double top = 0, bd = INFINITY;
  for (uint32_t j = 0; j < t->nodes_per_sheet; j++) {
    const double d = hypot(t->rest[j][0], t->rest[j][2]);
    if (d < bd) bd = d, top = t->x[j][1];
  }
  tl.active = 1;
  const double id[4] = {1, 0, 0, 0};
  *pushes = 0;
  for (int i = 0; i < 700; i++) {
    const double p[3] = {0, i < 200 ? top + radius - depth : 0.05, 0};
    ck_assert_int_ge(ts_tool_proxy_follow(&tl, p, id, 1, (i < 300 ? speed : SPEED) * DT), 0);
    ck_assert_int_eq(ts_massspring_step(t, DT, &tl, 1, &st), 0);
    *pushes += st.guard_pushes;
  }
  double dmax = 0;
  uint32_t worst = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const double d = sqrt(pow(t->x[i][0] - twin[i][0], 2) + pow(t->x[i][1] - twin[i][1], 2) +
                          pow(t->x[i][2] - twin[i][2], 2));
    if (d > dmax) dmax = d, worst = i;
  }
  printf("press %.0f mm sphere %.0f mm deep at %.1f m/s, lifted: %.3g um from the untouched "
         "patch (node %u), %u guard pushes\n",
         radius * 1e3, depth * 1e3, speed, dmax * 1e6, worst, *pushes);
  ck_assert_msg(dmax < 1e-5, "%.0f mm sphere %.0f mm deep at %.1f m/s: node %u %.3g mm off",
                radius * 1e3, depth * 1e3, speed, worst, dmax * 1e3);
  ts_tissue_destroy(t);
}

START_TEST(test_massspring_press_unfolds) {
  ts_patch_def pd = ts_default_patch_def();
  pd.resolution = 17;
  ts_tissue *twin = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &twin), 0);
  ts_tool off = {.kind = TS_TOOL_SPHERE, .radius = 0.005, .quat = {1, 0, 0, 0}};
  ts_step_stats st;
  for (int i = 0; i < 1000; i++) ck_assert_int_eq(ts_massspring_step(twin, DT, &off, 1, &st), 0);
  const double (*tx)[3] = (const double (*)[3])twin->x;
  static const double cases[][3] = {/* radius, depth, speed */
                                    {0.005, 0.003, 1.0}, {0.005, 0.005, 1.0}, {0.005, 0.007, 1.0},
                                    {0.005, 0.004, 3.0}, {0.002, 0.004, 1.0}, {0.002, 0.006, 1.0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    uint32_t pushes = 0;
    press_lift(cases[c][0], cases[c][1], cases[c][2], tx, &pushes);
    ck_assert_msg(pushes > 0, "case %zu: the guard never pushed", c);
  }
  ts_tissue_destroy(twin);
}
END_TEST

/* The same presses in XPBD with its tree-based contact (the session's
 * path, ts_session_contact_step), against the patch stepped as long
 * without a tool: without the solver's inversion guard (ts_xpbd_guard.c,
 * def.fold_guard 0) the first case left the patch 2.02 mm off; with it
 * every case ends within 10 um (2e-10 um). */
static void xpbd_press_lift(double radius, double depth, double speed, const double (*twin)[3]) {
  world w;
  world_init(&w, 1, TS_TOOL_SPHERE, radius, 0, NULL, "XPBD press");
  const double id[4] = {1, 0, 0, 0};
  w.guard_pushes = 0;
  for (int i = 0; i < 700; i++) {
    const double p[3] = {0, i < 200 ? w.top + radius - depth : 0.05, 0};
    ck_assert_int_ge(ts_tool_proxy_follow(&w.tools[0], p, id, 1, (i < 300 ? speed : SPEED) * DT), 0);
    world_step(&w);
  }
  double dmax = 0;
  uint32_t worst = 0;
  for (uint32_t i = 0; i < w.t->n_nodes; i++) {
    const double d = sqrt(pow(w.t->x[i][0] - twin[i][0], 2) + pow(w.t->x[i][1] - twin[i][1], 2) +
                          pow(w.t->x[i][2] - twin[i][2], 2));
    if (d > dmax) dmax = d, worst = i;
  }
  printf("XPBD press %.0f mm sphere %.0f mm deep at %.1f m/s, lifted: %.3g um from the untouched "
         "patch (node %u), %llu guard pushes\n",
         radius * 1e3, depth * 1e3, speed, dmax * 1e6, worst, (unsigned long long)w.guard_pushes);
  ck_assert_msg(dmax < 1e-5, "XPBD: %.0f mm sphere %.0f mm deep at %.1f m/s: node %u %.3g mm off",
                radius * 1e3, depth * 1e3, speed, worst, dmax * 1e3);
  ck_assert_msg(w.guard_pushes > 0, "XPBD: the guard never pushed");
  world_free(&w);
}

START_TEST(test_xpbd_press_unfolds) {
  world twin;
  world_init(&twin, 1, TS_TOOL_SPHERE, 0.005, 0, NULL, "XPBD twin");
  twin.tools[0].active = 0;
  while (twin.steps < SETTLE_STEPS + 700) world_step(&twin);
  static const double cases[][3] = {/* radius, depth, speed */
                                    {0.005, 0.003, 1.0}, {0.005, 0.005, 1.0}, {0.005, 0.007, 1.0},
                                    {0.005, 0.004, 3.0}, {0.002, 0.004, 1.0}, {0.002, 0.006, 1.0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    xpbd_press_lift(cases[c][0], cases[c][1], cases[c][2], (const double (*)[3])twin.t->x);
  world_free(&twin);
}
END_TEST

/* ---- mesh tools in the mass-spring step ---- */

/* Presses tool (its centre over the patch's centre) from touching the top
 * (y = 0 at rest) to 4 mm deep in 150 ms, holds 450 ms; checks the
 * balance and returns the vertical force. */
static double ms_press(ts_tool *tool, const char *what) {
  ts_patch_def pd = ts_default_patch_def();
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &t), 0);
  ts_step_stats st;
  for (int s = 0; s < 600; s++) {
    double depth = s < 150 ? 0.004 * (s + 1) / 150 : 0.004;
    tool->pos[1] = 0.005 - depth;
    ck_assert_int_eq(ts_massspring_step(t, DT, tool, 1, &st), 0);
  }
  ck_assert_msg(st.max_speed < 1e-4, "%s: still moving at %.3g m/s", what, st.max_speed);
  double want[3];
  fx_tool_balance(t, want);
  printf("mass-spring %s pressed 4 mm: tool (%.6g %.6g %.6g) N, weight - anchors (%.6g %.6g "
         "%.6g) N, %u contacts\n",
         what, tool->force[0], tool->force[1], tool->force[2], want[0], want[1], want[2],
         tool->contacts);
  ck_assert_uint_ge(tool->contacts, 4);
  ck_assert(tool->force[1] > 1e-3 && tool->force[1] < 1.0);
  for (int k = 0; k < 3; k++)
    ck_assert_msg(fabs(tool->force[k] - want[k]) <= 0.01 * tool->force[1],
                  "%s axis %d: tool %.6g N, balance %.6g N", what, k, tool->force[k], want[k]);
  ts_tissue_destroy(t);
  return tool->force[1];
}

START_TEST(test_massspring_mesh_press) {
  ts_mesh *m = fx_uv_sphere(0.005, 24, 48);
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *tr = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tr), 0);
  ts_tool mt = {.kind = TS_TOOL_MESH, .active = 1, .radius = 0.005, .quat = {1, 0, 0, 0},
                .shape = tr};
  double fm = ms_press(&mt, "sphere mesh");
#ifdef TS_TEST_SANITIZED
  (void)fm; /* the turned mesh and the exact sphere: the normal build (see the top) */
#else
  /* turned (the mesh is queried in the tool's frame): the same press */
  ts_tool mr = mt;
  const double h = sqrt(0.5);
  mr.quat[0] = h, mr.quat[1] = 0, mr.quat[2] = h, mr.quat[3] = 0;
  double fr = ms_press(&mr, "turned sphere mesh");
  ts_tool sp = {.kind = TS_TOOL_SPHERE, .active = 1, .radius = 0.005, .quat = {1, 0, 0, 0}};
  double fs = ms_press(&sp, "exact sphere");
  printf("mass-spring: mesh %.4g N, turned mesh %.4g N, exact sphere %.4g N (%.2f %%)\n", fm, fr,
         fs, 100 * (fm - fs) / fs);
  ck_assert_double_le(fabs(fm - fs), 0.10 * fs);
  ck_assert_double_le(fabs(fr - fs), 0.10 * fs);
#endif
  /* a mesh tool without its tree is refused, nothing changed */
  ts_tissue *t = NULL;
  ts_patch_def pd = ts_default_patch_def();
  ck_assert_int_eq(ts_patch_create(&pd, &t), 0);
  mt.shape = NULL;
  ts_step_stats st;
  ck_assert_int_eq(ts_massspring_step(t, DT, &mt, 1, &st), TS_EINVAL);
  ck_assert_double_eq(t->time, 0);
  ts_tissue_destroy(t);
  ts_obb_tree_destroy(tr);
  ts_mesh_free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("robust");
  TCase *tc = tcase_create("robust");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_proxy_bounded);
  tcase_add_test(tc, test_massspring_mesh_press);
  tcase_add_test(tc, test_massspring_deep_hold);
#ifndef TS_TEST_SANITIZED
  tcase_add_test(tc, test_massspring_press_unfolds);
  tcase_add_test(tc, test_xpbd_press_unfolds);
#else
  (void)test_massspring_press_unfolds; /* figures: the normal build */
  (void)test_xpbd_press_unfolds;
#endif
  suite_add_tcase(s, tc);
  tc = tcase_create("abuse");
  tcase_set_timeout(tc, 600);
#ifndef TS_TEST_SANITIZED
  tcase_add_unchecked_fixture(tc, twins_setup, twins_free);
#else
  (void)twins_setup, (void)twins_free; /* the rest's twin: the normal build (see the top) */
#endif
  tcase_add_test(tc, test_massspring_sphere);
  tcase_add_test(tc, test_massspring_capsule);
  tcase_add_test(tc, test_massspring_mesh);
  tcase_add_test(tc, test_xpbd_sphere);
  tcase_add_test(tc, test_xpbd_capsule);
  tcase_add_test(tc, test_xpbd_jaws);
  tcase_add_test(tc, test_xpbd_mesh);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
