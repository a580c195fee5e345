/*
 * test_refine_liver.c: Check suite for issue 4's no-jump bound on the liver
 * in a mass-spring session, refined live under a pressed sphere, along the
 * daemon's own path and with its settings (test_refine.c checks the bound
 * on the built-in patch; nothing else covered the liver with mass-spring).
 * The liver is built as the daemon builds an uploaded mesh
 * (ts_mesh_tissue_build: liver-smooth.obj in centimetres, the default
 * layers, resting on its lowest tenth), with the daemon's defaults
 * (server/config.c: dt 1 ms, local mass scaling on, no substep cap). It
 * settles under gravity, then the daemon's default tool (a 5 mm sphere with
 * TS_TOOL_MU_STATIC_DEFAULT / _KINETIC_ friction) is pressed 2 mm into its
 * highest point, well below the tool's speed limit, and held. The region is
 * picked as server/refine.c does for a ray (down through the sphere's
 * centre, the default 5 mm range) and refined by Loop with the options it
 * uses (midpoint rest positions, the default hand-over, the session's tools
 * for the contact allowance, the local rebuild) on a snapshot, while an
 * unrefined twin steps on; the refinement is installed as server/refine.c
 * installs it (ts_refine_restate, ts_handover_renew with the tools,
 * ts_massspring_carry_tools). The bound, as in test_refine.c: in the first
 * step after the install every old node moves as the twin's and every new
 * node as its interpolated position, within the codec quantum plus what the
 * twin's motion explains; in the LIVER_STEPS steps after it no node moves
 * more than the quantum plus the twin's largest move in the same step.
 * The liver creeps down under gravity at about g / drag (65 um a step)
 * long after it is built, so that bound would pass a refinement without
 * the hand-over too (50 um off in the first step, measured); the first
 * step is therefore also held to the quantum alone (measured 8.1 um with
 * the hand-over in rest lengths, 6.6 um with node forces). Measured: 79
 * triangles selected, 8,776 -> 9,304 nodes,
 * no local mass scaling needed (the liver's slivers already set its
 * substep: 118 substeps a step at rest), steps 2-10 at most 0.5 um over
 * the twin's largest move (steps 2-30: 5.4 um), each old node's step
 * within 23 um of the twin's. The first step's 6.6 um needs the 20-step
 * hold: refined after 10, it is 21.7 um off the twin's (within the issue's
 * bound, not the quantum alone).
 * Fast press (test_liver_fast_press_massspring): refined at once when a
 * press of 2 mm in 30 steps (67 um a step) stops, the tool then held, and
 * stepped through the whole blend beside the twin (a 40 ms blend, a fifth
 * of the default, to keep the suite short: the bound is per step, and a
 * shorter blend is the harder case for it). The tissue lags such a press,
 * so the springs under the sphere push its nodes into it hard and relax
 * within a few steps. With the hand-over as node forces alone
 * (TS_HANDOVER_MS_FORCE, the default before) a new node's force there
 * first stood in for the tool's reaction (0.016 N, 6,200 times its
 * weight) and, a dead load, drove it into the tissue as the push relaxed
 * (the refined liver ran away at up to 1.6 mm a step); that part was then
 * left to the tool's reaction (ts_handover.c), but new nodes just off the
 * sphere's rim (between a parent the tool holds and one it does not)
 * carry the same kind of load (up to 3,700 times their weight) with no
 * reaction to take it over, and snap during the blend: measured here 0.16
 * mm beyond the twin's largest move in step 8 (0.26 mm in step 5 of the
 * 0.2 s blend). The default hand-over keeps the tensions in the springs'
 * rest lengths (ts_ms_handover.c), whose forces follow the state: the
 * first step 15.8 um off the interpolation (the twin moved 80 um: the
 * issue's bound), no step of the blend more than 6.1 um beyond the twin's
 * largest move (step 27; up to 14 um with the default 0.2 s blend,
 * measured, as the refined region settles into the sphere), so FAST_BOUND
 * is the quantum (it was 0.5 mm for the node forces). The held case with
 * the rest lengths: first step 8.1 um (6.6 um with node forces), steps
 * 2-10 at most 0.5 um over the twin's largest move.
 * Measured (CPU time of the whole suite, normal build, a loaded machine):
 * 81 s, against 190 s when the fast case ran the 0.2 s blend and the two
 * cases shared nothing but the settled liver.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "ts_error.h"
#include "ts_handover.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_mesh_io.h"
#include "ts_mesh_tissue.h"
#include "ts_refine.h"
#include "ts_tissue.h"
#include "ts_tool.h"

#include "frame.h" /* TS_MAX_TOOLS: the session's tools */

#define QUANTUM 10e-6       /* TS_DEFAULT_QUANTUM, proto/ts_codec.h: the wire's resolution, m */
#define DT 1e-3             /* server/config.c's default dt */
/* A sanitizer build steps the liver several times slower (CI: 239 s for
 * this suite under ASan+UBSan when it ran its 104 steps): it checks the same
 * path (build, press, snapshot, Loop, install, hand-over, blend) with fewer
 * steps, and the physics bounds only where they do not depend on the
 * counts (the bound: the quantum plus the twin's motion). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TS_SANITIZED 1
#endif
#endif
#ifdef TS_SANITIZED
/* 0.8 mm pressed in 6 steps (the liver soon sags at 60 um a step: a slower
 * press would not reach it), the blend's first steps; the held case's
 * steps held to FAST_BOUND, as the fast case's (a 1-step hold). Measured
 * under ASan+UBSan (ctest -R test_refine_liver, a loaded 2-core machine):
 * 24 liver steps, 23 s of CPU, against 121 s for the one case's 104 steps
 * before (CI took 239 s for those) */
#define SETTLE_STEPS 1
#define PRESS_STEPS 6
#define HOLD_STEPS 1
#define LIVER_STEPS 2
#define FAST_PRESS_STEPS 6
#define FAST_BLEND 0.04
#define BLEND_STEPS 2
#define DEPTH 0.0008 /* m */
#define ASYNC_STEPS 1
#define FAST_BOUND 0.5e-3 /* the code path under the sanitizers, not the figures */
#define HELD_BOUND FAST_BOUND
#else
#define SETTLE_STEPS 20     /* under gravity, no tool: the sag is still under way (the twin moves
                               60 um a step at the refinement), the harder case; each liver step
                               costs 0.1-0.3 s of CPU (118 substeps), so the suite stays short */
#define PRESS_STEPS 40      /* 2 mm in 40 steps: 50 um a step, 5 % of the daemon's 1 m/s */
#define HOLD_STEPS 20       /* the held case: held before the snapshot */
#define LIVER_STEPS 10      /* checked after the install */
#define FAST_PRESS_STEPS 30 /* 2 mm in 30 steps: 67 um a step, refined when it stops */
#define FAST_BLEND 0.04     /* s: the fast case's blend, a fifth of the default (the suite's time) */
#define BLEND_STEPS 40      /* the whole of it */
#define DEPTH 0.002         /* m */
#define HELD_BOUND QUANTUM
/* The fast press's bound on each step of the blend beyond the twin's largest
 * move, the issue's: see the header (FAST_BOUND). */
#define FAST_BOUND QUANTUM
#define ASYNC_STEPS 2       /* the twin's steps between the snapshot and the install */
#endif

#define RADIUS 0.005        /* m: the daemon's default tool */


/* The session's tools (TS_MAX_TOOLS, as the daemon steps them): tool 0 the
 * default sphere `depth` into the tissue's top at top[], the others parked
 * and inactive as server/session.c makes them. */
static void tools_at(ts_tool tools[TS_MAX_TOOLS], const double top[3], double depth) {
  memset(tools, 0, sizeof *tools * TS_MAX_TOOLS);
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    tools[i].kind = TS_TOOL_SPHERE;
    tools[i].radius = RADIUS;
    tools[i].quat[0] = 1;
    tools[i].pos[1] = 0.05;
    tools[i].mu_static = TS_TOOL_MU_STATIC_DEFAULT;
    tools[i].mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
  }
  tools[0].active = 1;
  tools[0].pos[0] = top[0];
  tools[0].pos[1] = top[1] + RADIUS - depth;
  tools[0].pos[2] = top[2];
}

static void step(ts_tissue *t, ts_tool *tools) {
  int rc = ts_massspring_step(t, DT, tools, TS_MAX_TOOLS, NULL);
  ck_assert_msg(rc == 0, "step: %s", ts_err_name(rc));
}

static double max_move(const ts_tissue *t, const double (*x0)[3], uint32_t n) {
  double m = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) m = fmax(m, fabs(t->x[i][c] - x0[i][c]));
  return m;
}

static double (*positions(const ts_tissue *t))[3] {
  double(*x)[3] = malloc(sizeof *x * t->n_nodes);
  ck_assert_ptr_nonnull(x);
  memcpy(x, t->x, sizeof *x * t->n_nodes);
  return x;
}

/* The liver as the daemon builds an uploaded liver-smooth.obj in cm
 * (server/requests.c: build_mesh_tissue, then create_work's settings). */
static void build_liver(ts_tissue **t, ts_refine_src **src) {
  char path[1024], err[512] = "";
  snprintf(path, sizeof path, "%s/data/meshes/liver-smooth.obj", TS_SHARED_DIR);
  size_t len = 0;
  uint8_t *data = tu_read_file(path, &len);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 0.01; /* cm */
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t nl = ts_material_default_layers(layers);
  ts_mesh_tissue mt;
  int rc = ts_mesh_tissue_build(data, (size_t)len, TS_MESH_OBJ, &o, layers, nl, &mt, err, sizeof err);
  free(data);
  ck_assert_msg(rc == 0, "liver: %s", err);
  ts_patch_def pd = ts_default_patch_def();
  ck_assert_int_eq(ts_refine_src_create(mt.e, layers, mt.anchors, pd.gravity, src), 0);
  *t = mt.t;
  mt.t = NULL;
  ts_mesh_tissue_free(&mt);
  (*t)->max_substeps = 0;       /* the session's default: no cap */
  (*t)->local_mass_scaling = 1; /* server/config.c's default */
}

/* The liver built and settled (SETTLE_STEPS under gravity), made once for
 * the cases (an unchecked fixture: each case's fork takes a copy; without
 * fork each case builds its own). */
static ts_tissue *g_liver;
static ts_refine_src *g_src;
static int g_fork = 1;

static double g_at[3]; /* where the sphere comes down (press) */

static void settled(ts_tissue **t, ts_refine_src **src) {
  build_liver(t, src);
  ts_tool tools[TS_MAX_TOOLS];
  const double far[3] = {0, 1, 0};
  tools_at(tools, far, 0);
  tools[0].active = 0;
  for (int i = 0; i < SETTLE_STEPS; i++) step(*t, tools);
}

static void liver_setup(void) {
  if (g_fork) settled(&g_liver, &g_src);
}

static void liver_teardown(void) {
  ts_tissue_destroy(g_liver);
  ts_refine_src_free(g_src);
  g_liver = NULL, g_src = NULL;
}

/* The case's settled liver: the fixture's (fork) or its own. */
static void take_liver(ts_tissue **t, ts_refine_src **src) {
  if (g_fork) {
    *t = g_liver, *src = g_src;
    g_liver = NULL, g_src = NULL; /* the fork's copy, freed by the case */
  } else {
    settled(t, src);
  }
}

/* The settled liver with the sphere pressed DEPTH into its top in `steps`
 * steps (linearly), as a session gets it; g_at gets where it came down. */
static void press(ts_tissue *a, ts_tool tools[TS_MAX_TOOLS], int steps) {
  uint32_t top = 0; /* the outer sheet's highest node */
  ck_assert_uint_gt(a->nodes_per_sheet, 0);
  for (uint32_t i = 1; i < a->nodes_per_sheet; i++)
    if (a->rest[i][1] > a->rest[top][1]) top = i;
  memcpy(g_at, a->x[top], sizeof g_at); /* over the settled top */
  for (int i = 1; i <= steps; i++) {
    tools_at(tools, g_at, DEPTH * (i < steps ? (double)i / steps : 1.0));
    step(a, tools);
  }
  ck_assert_uint_gt(tools[0].contacts, 0);
}

/* The fixture's liver, pressed, the sphere held there for `hold` steps. */
static void hold(ts_tissue *a, ts_tool tools[TS_MAX_TOOLS], int steps) {
  tools_at(tools, g_at, DEPTH);
  for (int i = 0; i < steps; i++) step(a, tools);
}

/* A refinement and its twin: r the refined tissue, par its new nodes'
 * parents. */
typedef struct refined {
  ts_tissue *r, *snap;
  ts_refine_src *nsrc;
  uint32_t *sel, nsel;
  ts_refine_info info;
  const uint32_t (*par)[2];
  uint32_t n0, n1;
} refined;

/* Refines a snapshot of a under the sphere as server/refine.c's refine_work
 * does, steps the twin a on ASYNC_STEPS steps meanwhile, and installs the
 * refinement as server/refine.c's install. */
static void refine_live(ts_tissue *a, ts_refine_src *src, ts_tool tools[TS_MAX_TOOLS], double blend, refined *q) {
  memset(q, 0, sizeof *q);
  q->n0 = a->n_nodes;
  ck_assert_int_eq(ts_refine_snapshot(a, &q->snap), 0);
  const double o[3] = {tools[0].pos[0], 0.05, tools[0].pos[2]}, d[3] = {0, -1, 0};
  ck_assert_int_eq(ts_refine_pick(src, q->snap, o, d, 0.005, &q->sel, &q->nsel, NULL), 0);
  ts_refine_opts opts = {TS_REFINE_LOOP, 0, 0, 0, blend, tools, TS_MAX_TOOLS, TS_REFINE_REBUILD_LOCAL,
                         TS_HANDOVER_MS_DEFAULT, 0};
  q->info.parents = NULL;
  char err[256] = "";
  ck_assert_msg(ts_refine_run(src, q->snap, q->sel, q->nsel, &opts, &q->r, &q->nsrc, &q->info, err, sizeof err) == 0,
                "%s", err);
  ck_assert_ptr_nonnull(q->r->hand);
  q->par = (const uint32_t(*)[2])q->info.parents;
  q->n1 = q->r->n_nodes;
  for (int i = 0; i < ASYNC_STEPS; i++) step(a, tools);
  ck_assert_int_eq(ts_refine_restate(q->r, a, q->par), 0);
  ck_assert_int_eq(ts_handover_renew(q->r, a, q->par, tools, TS_MAX_TOOLS, NULL), 0);
  ck_assert_int_eq(ts_massspring_carry_tools(q->r, a), 0);
}

static void refined_free(refined *q) {
  free(q->sel);
  free(q->info.parents);
  ts_refine_src_free(q->nsrc);
  ts_tissue_destroy(q->snap);
  ts_tissue_destroy(q->r);
}

/* The largest hand-over force, against its node's weight. */
static void largest_force(const refined *q) {
  const ts_tissue *r = q->r;
  double fmaxw = 0;
  uint32_t im = 0;
  for (uint32_t i = 0; i < r->n_nodes; i++) {
    if (r->inv_mass[i] == 0) continue;
    const double *f = r->hand->f[i];
    double w = sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]) * r->inv_mass[i] / 9.81;
    if (w > fmaxw) fmaxw = w, im = i;
  }
  printf("  largest hand-over force %.3g times its node's weight (node %u, %s)\n", fmaxw, im,
         im >= q->n0 ? "new" : "old");
}

/* Steps the twin a and the refinement r on: the first step against the
 * twin's (old nodes) and the interpolation (new ones), returned; then
 * `steps` - 1 more, each no more than bound plus the twin's largest move
 * (the largest excess in *worst). */
static double compare(ts_tissue *a, refined *q, ts_tool *tools, int steps, double bound, double *worst) {
  ts_tissue *r = q->r;
  const uint32_t n0 = q->n0, n1 = q->n1;
  double(*x0)[3] = positions(a);
  ck_assert(memcmp(x0, r->x, sizeof *x0 * n0) == 0);
  step(a, tools);
  step(r, tools);
  double(*ip)[3] = malloc(sizeof *ip * n1);
  ck_assert_ptr_nonnull(ip);
  memcpy(ip, a->x, sizeof *ip * n0);
  for (uint32_t i = n0; i < n1; i++)
    for (int c = 0; c < 3; c++) ip[i][c] = 0.5 * (ip[q->par[i - n0][0]][c] + ip[q->par[i - n0][1]][c]);
  const double moved = max_move(a, (const double(*)[3])x0, n0);
  const double jump = max_move(r, (const double(*)[3])ip, n1);
  printf("  first step after the install differs by %.3g m (the twin moved %.3g m)\n", jump, moved);
  ck_assert_msg(jump < QUANTUM + moved, "the first step differs by %.3g m (twin moved %.3g m)", jump, moved);
  free(ip);
  free(x0);
  *worst = -1;
  int worst_k = 0;
  double worst_mb = 0, node_worst = 0;
  for (int k = 2; k <= steps; k++) {
    double(*xa)[3] = positions(a), (*xr)[3] = positions(r);
    step(a, tools);
    step(r, tools);
    const double ma = max_move(a, (const double(*)[3])xa, n0), mr = max_move(r, (const double(*)[3])xr, n1);
    if (mr - ma > *worst) *worst = mr - ma, worst_k = k, worst_mb = mr;
    for (uint32_t i = 0; i < n0; i++)
      for (int c = 0; c < 3; c++) node_worst = fmax(node_worst, fabs((r->x[i][c] - xr[i][c]) - (a->x[i][c] - xa[i][c])));
    ck_assert_msg(mr < bound + ma, "step %d after the install moved a node %.3g m (twin %.3g m)", k, mr, ma);
    free(xa);
    free(xr);
  }
  double dmax = 0;
  for (uint32_t i = 0; i < n0; i++)
    for (int c = 0; c < 3; c++) dmax = fmax(dmax, fabs(a->x[i][c] - r->x[i][c]));
  printf("  steps 2-%d: largest move over the twin's %.3g m (step %d, %.3g m); an old node's step off the twin's by "
         "up to %.3g m; old nodes %.3g m from the twin\n",
         steps, *worst, worst_k, worst_mb, node_worst, dmax);
  return jump;
}

START_TEST(test_liver_pressed_massspring) {
  ts_tissue *a = NULL; /* the session's tissue; after the snapshot, the unrefined twin */
  ts_refine_src *src = NULL;
  take_liver(&a, &src);
  ts_tool tools[TS_MAX_TOOLS];
  press(a, tools, PRESS_STEPS);
  hold(a, tools, HOLD_STEPS);
  refined q;
  refine_live(a, src, tools, 0, &q);
  ts_local_mass lm;
  ck_assert_int_eq(ts_massspring_local_mass(q.r, &lm, NULL), 0);
  printf("liver pressed %.1f mm, mass-spring: %u triangles selected, %u -> %u nodes; local mass scaling on %u "
         "nodes (%.0f %% of their mass)\n",
         DEPTH * 1e3, q.nsel, q.n0, q.n1, lm.nodes, lm.region_mass > 0 ? 100 * lm.added / lm.region_mass : 0.0);
  largest_force(&q);
  double worst;
  const double jump = compare(a, &q, tools, LIVER_STEPS, HELD_BOUND, &worst);
#ifndef TS_SANITIZED /* it needs the 20-step hold (above) */
  /* the bound is loose here: the liver still creeps down under
     gravity at about g / drag (65 um a step), which it allows on top of
     the quantum, and a refinement without the hand-over stays within it
     (50 um off, measured). The hand-over's own share, the difference from
     the twin, within the quantum alone: measured 8.1 um (6.6 um with the
     node forces alone) */
  ck_assert_msg(jump < QUANTUM, "the first step differs by %.3g m from the twin's", jump);
#else
  (void)jump;
#endif
  refined_free(&q);
  ts_refine_src_free(src);
  ts_tissue_destroy(a);
}
END_TEST

START_TEST(test_liver_fast_press_massspring) {
  ts_tissue *a = NULL;
  ts_refine_src *src = NULL;
  take_liver(&a, &src);
  ts_tool tools[TS_MAX_TOOLS];
  press(a, tools, FAST_PRESS_STEPS);
  refined q;
  refine_live(a, src, tools, FAST_BLEND, &q);
  printf("liver pressed %.1f mm in %d steps, refined at once: %u -> %u nodes, blend %.2f s\n", DEPTH * 1e3, FAST_PRESS_STEPS,
         q.n0, q.n1, FAST_BLEND);
  largest_force(&q);
  double worst;
  compare(a, &q, tools, BLEND_STEPS, FAST_BOUND, &worst);
  refined_free(&q);
  ts_refine_src_free(src);
  ts_tissue_destroy(a);
}
END_TEST

static Suite *refine_liver_suite(void) {
  Suite *s = suite_create("refine_liver");
  TCase *tc = tcase_create("liver");
  /* the normal build: the fixture's 20 steps, then 62 + 20 and 32 + 400
     liver steps in the cases (measured 169 s of CPU for all, the fast
     case 120 s of it); each case's bound is CTest's 600 s for the whole
     run on a loaded machine. Under the sanitizers 24 steps in all */
  tcase_set_timeout(tc, 540);
  tcase_add_unchecked_fixture(tc, liver_setup, liver_teardown);
  tcase_add_test(tc, test_liver_pressed_massspring);
  tcase_add_test(tc, test_liver_fast_press_massspring);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a failing case's fork keeps what it printed */
  SRunner *sr = srunner_create(refine_liver_suite());
  g_fork = srunner_fork_status(sr) != CK_NOFORK;
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
