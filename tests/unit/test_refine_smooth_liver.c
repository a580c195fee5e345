/*
 * test_refine_smooth_liver.c: Check suite for issue 4's no-jump bound on
 * the liver with Loop's smoothing rules live (ts_refine_opts.smooth_rest,
 * ts_refine_smooth.h), in both solvers: the liver as the daemon builds an
 * uploaded liver-smooth.obj (cm, the default layers, resting on its lowest
 * tenth, test_refine_liver.c's build and settings), settled under gravity,
 * the daemon's default sphere pressed 2 mm into its highest point in 40
 * steps and held 20, then the region a ray down through the sphere picks
 * (the default 5 mm range) refined by Loop with the smoothing, the default
 * hand-over (its blend as long as the rest change needs) and the session's
 * tool for the contact allowance; XPBD's hand-over fitted as server/refine.c
 * does (ts_handover_fit_xpbd; the sphere on the solver's node-wise path).
 * Beside an unrefined twin, the first step (every old node as the twin's,
 * every new one as its interpolated position) and every later step of the
 * whole blend (no node moves more than the twin's largest move plus) are
 * held to the quantum, the bound; the first step also to the
 * quantum alone (the creeping liver's motion would let a refinement without
 * its fit through). Measured (load 18 on 2 cores, which changes no figure):
 * the pick 79-81 triangles, 8,776 -> 9,304-9,316 nodes, rest change 0.38
 * mm, no vertex limited, blend 0.227 s; XPBD: fit 3.7 um, first step 3.9
 * um (the twin 68 um), steps 2-233 at most 0.73 um beyond the twin's
 * largest move (without the fit: first step 53.6 um, checked); mass-spring:
 * first step 6.2 um (the twin 62 um), steps 2-233 (the whole blend) at most
 * 6.8 um beyond the twin's largest move (step 27), at 126 substeps a step
 * (the twin 127, the settled liver 124: the blend costs what the pressed
 * liver costs, and that is about the rest state's since the step prices
 * each spring's stiffening where it is, ts_ms_bounds.c; before, 298 to 560
 * substeps a step, twin and refined alike, so only the blend's first 60
 * steps were checked). The mass-spring case with the whole blend took 82 s
 * of CPU at a load of about 10 on 2 cores (CK_RUN_CASE=ms, CK_FORK=no). Its
 * substep checks fail on the old count (298-560 a step, over 1.5 times the
 * settled 124) and on a count that measured the first step's strains
 * against the springs' own rest lengths instead of the blended ones (157 a
 * step through the blend, the twin 127: checked).
 * Under the sanitizers (memory and undefined behaviour, not the figures):
 * 0.8 mm pressed in 6 steps, a few steps of the blend, mass-spring only.
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
#include "ts_xpbd.h"

#include "frame.h" /* TS_MAX_TOOLS: the session's tools */

#define QUANTUM 10e-6 /* TS_DEFAULT_QUANTUM, proto/ts_codec.h: the wire's resolution, m */
#define DT 1e-3       /* server/config.c's default dt */
#define RADIUS 0.005  /* m: the daemon's default tool */
#define TS_MAXU(a, b) ((a) > (b) ? (a) : (b))
#ifdef TS_TEST_SANITIZED
#define SETTLE_STEPS 1
#define PRESS_STEPS 6
#define HOLD_STEPS 1
#define DEPTH 0.0008
#define CHECK_STEPS 3 /* of the blend */
#else
#define SETTLE_STEPS 20 /* test_refine_liver.c's */
#define PRESS_STEPS 40  /* 2 mm in 40 steps: 50 um a step */
#define HOLD_STEPS 20
#define DEPTH 0.002
#define CHECK_STEPS 0 /* 0: the whole blend and 5 steps after it (XPBD) */
#endif

typedef struct sim {
  ts_tissue *t;
  ts_xpbd *x; /* NULL: mass-spring */
} sim;

static void tools_at(ts_tool tools[TS_MAX_TOOLS], const double top[3], double depth, int active) {
  memset(tools, 0, sizeof *tools * TS_MAX_TOOLS);
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    tools[i].kind = TS_TOOL_SPHERE;
    tools[i].radius = RADIUS;
    tools[i].quat[0] = 1;
    tools[i].pos[1] = 0.05;
    tools[i].mu_static = TS_TOOL_MU_STATIC_DEFAULT;
    tools[i].mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
  }
  tools[0].active = active;
  tools[0].pos[0] = top[0];
  tools[0].pos[1] = top[1] + RADIUS - depth;
  tools[0].pos[2] = top[2];
}

/* One step; returns the mass-spring step's substeps (0 for XPBD). */
static uint32_t step(sim *s, ts_tool *tools) {
  ts_step_stats st;
  memset(&st, 0, sizeof st);
  int rc = s->x ? ts_xpbd_step(s->x, s->t, DT, tools, TS_MAX_TOOLS, NULL)
                : ts_massspring_step(s->t, DT, tools, TS_MAX_TOOLS, &st);
  ck_assert_msg(rc == 0, "step: %s", ts_err_name(rc));
  return s->x ? 0 : st.substeps;
}

static ts_xpbd_def xpbd_def(const ts_tissue *t) { /* server/session.c's */
  ts_xpbd_def d = ts_xpbd_default_def();
  d.damping = t->drag;
  return d;
}

static double (*positions(const ts_tissue *t))[3] {
  double(*x)[3] = malloc(sizeof *x * t->n_nodes);
  ck_assert_ptr_nonnull(x);
  memcpy(x, t->x, sizeof *x * t->n_nodes);
  return x;
}

static double max_move(const ts_tissue *t, const double (*x0)[3], uint32_t n) {
  double m = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) m = fmax(m, fabs(t->x[i][c] - x0[i][c]));
  return m;
}

/* The liver as the daemon builds it (test_refine_liver.c's build_liver),
 * settled, pressed and held; tools get the held sphere. */
static uint32_t pressed_liver(sim *s, int xpbd, ts_refine_src **src, ts_tool tools[TS_MAX_TOOLS]) {
  char path[1024], err[512] = "";
  snprintf(path, sizeof path, "%s/data/meshes/liver-smooth.obj", TS_SHARED_DIR);
  size_t len = 0;
  uint8_t *data = tu_read_file(path, &len);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 0.01; /* cm */
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t nl = ts_material_default_layers(layers);
  ts_mesh_tissue mt;
  int rc = ts_mesh_tissue_build(data, len, TS_MESH_OBJ, &o, layers, nl, &mt, err, sizeof err);
  free(data);
  ck_assert_msg(rc == 0, "liver: %s", err);
  ts_patch_def pd = ts_default_patch_def();
  ck_assert_int_eq(ts_refine_src_create(mt.e, layers, mt.anchors, pd.gravity, src), 0);
  s->t = mt.t;
  mt.t = NULL;
  ts_mesh_tissue_free(&mt);
  s->t->max_substeps = 0;       /* the session's default: no cap */
  s->t->local_mass_scaling = 1; /* server/config.c's default */
  s->x = NULL;
  if (xpbd) {
    ts_xpbd_def d = xpbd_def(s->t);
    ck_assert_int_eq(ts_xpbd_build(s->t, &d, &s->x), 0);
  }
  const double far[3] = {0, 1, 0};
  tools_at(tools, far, 0, 0);
  uint32_t rest_sub = 0; /* the settling liver's, no tool: the rest state's count */
  for (int i = 0; i < SETTLE_STEPS; i++) rest_sub = step(s, tools);
  uint32_t top = 0; /* the outer sheet's highest node */
  for (uint32_t i = 1; i < s->t->nodes_per_sheet; i++)
    if (s->t->rest[i][1] > s->t->rest[top][1]) top = i;
  double at[3];
  memcpy(at, s->t->x[top], sizeof at);
  for (int i = 1; i <= PRESS_STEPS + HOLD_STEPS; i++) {
    tools_at(tools, at, DEPTH * (i < PRESS_STEPS ? (double)i / PRESS_STEPS : 1.0), 1);
    step(s, tools);
  }
  ck_assert_uint_gt(tools[0].contacts, 0);
  return rest_sub;
}

/* One case: the pressed liver in one solver, a copy of it refined by Loop
 * with the smoothing rules, both stepped through the blend. Returns the
 * first step's difference; *worst the largest step over the twin's. */
static double smooth_case(int xpbd, double *worst, double *blend) {
  sim a, b;
  ts_refine_src *src = NULL, *nsrc = NULL;
  ts_tool tools[TS_MAX_TOOLS];
  const uint32_t rest_sub = pressed_liver(&a, xpbd, &src, tools);
  b.t = NULL;
  ck_assert_int_eq(ts_refine_snapshot(a.t, &b.t), 0); /* the state the refinement starts from */
  uint32_t *sel = NULL, nsel = 0;
  const double o[3] = {tools[0].pos[0], 0.05, tools[0].pos[2]}, d[3] = {0, -1, 0};
  ck_assert_int_eq(ts_refine_pick(src, b.t, o, d, 0.005, &sel, &nsel, NULL), 0);
  ts_refine_opts opts = {TS_REFINE_LOOP, 0, 0, 1, 0, tools, TS_MAX_TOOLS, TS_REFINE_REBUILD_LOCAL,
                         TS_HANDOVER_MS_DEFAULT, 0};
  ts_refine_info info;
  info.parents = NULL;
  ts_tissue *r = NULL;
  char err[256] = "";
  ck_assert_msg(ts_refine_run(src, b.t, sel, nsel, &opts, &r, &nsrc, &info, err, sizeof err) == 0, "%s", err);
  ck_assert_ptr_nonnull(r->hand);
  const uint32_t(*par)[2] = (const uint32_t(*)[2])info.parents;
  const uint32_t n0 = a.t->n_nodes, n1 = r->n_nodes;
  *blend = r->hand->duration;
  printf("liver pressed %.1f mm, %s, Loop with the smoothing: %u triangles, %u -> %u nodes; rest moved up to "
         "%.3g m, %u vertices limited, blend %.3g s\n",
         DEPTH * 1e3, xpbd ? "xpbd" : "mass-spring", nsel, n0, n1, info.rest_move, info.smooth_limited,
         *blend);
  ck_assert(info.rest_move > 0); /* the smoothing is there */
  if (xpbd) {
    ts_xpbd_def xd = xpbd_def(r);
    ts_handover_fit_stats fs;
    ck_assert_int_eq(ts_handover_fit_xpbd(r, a.t, par, &xd, tools, TS_MAX_TOOLS, 0, DT, &fs), 0);
    printf("  fit: %u trials over %u nodes, %.3g m off\n", fs.trials, fs.nodes, fs.err);
  }
  ts_massspring_carry_tools(r, a.t);
  ts_tissue_destroy(b.t);
  b.t = r;
  b.x = NULL;
  if (xpbd) {
    ts_xpbd_def xd = xpbd_def(r);
    ck_assert_int_eq(ts_xpbd_build(r, &xd, &b.x), 0);
  }
  /* the first step */
  double(*x0)[3] = positions(a.t);
  step(&a, tools);
  step(&b, tools);
  double(*ip)[3] = malloc(sizeof *ip * n1);
  ck_assert_ptr_nonnull(ip);
  memcpy(ip, a.t->x, sizeof *ip * n0);
  for (uint32_t i = n0; i < n1; i++)
    for (int c = 0; c < 3; c++) ip[i][c] = 0.5 * (ip[par[i - n0][0]][c] + ip[par[i - n0][1]][c]);
  const double moved = max_move(a.t, (const double(*)[3])x0, n0), jump = max_move(b.t, (const double(*)[3])ip, n1);
  printf("  first step differs by %.3g m (the twin moved %.3g m)\n", jump, moved);
  ck_assert_msg(jump < QUANTUM + moved, "the first step differs by %.3g m (twin moved %.3g m)", jump, moved);
#ifndef TS_TEST_SANITIZED
  /* the liver creeps down under gravity (the twin moves 62-68 um a step
     here), which the bound allows on top of the quantum: XPBD's
     hand-over without its fit passes it (53.6 um off, checked). The
     hand-over's own share within the quantum alone, as test_refine_liver
     holds it: measured 6.2 um (mass-spring), 3.9 um (XPBD) */
  ck_assert_msg(jump < QUANTUM, "the first step differs by %.3g m from the twin's", jump);
#endif
  free(ip);
  free(x0);
  /* the blend, and a few steps after it */
  const int steps = CHECK_STEPS ? CHECK_STEPS : (int)ceil(*blend / DT) + 5;
  *worst = -1;
  int worst_k = 0;
  uint32_t max_b = 0;     /* the most substeps a step of the blend took */
  uint64_t sub_a = 0, sub_b = 0; /* all the steps': twin, refined */
  for (int k = 2; k <= steps; k++) {
    double(*xa)[3] = positions(a.t), (*xb)[3] = positions(b.t);
    sub_a += step(&a, tools);
    const uint32_t nb = step(&b, tools);
    sub_b += nb;
    max_b = TS_MAXU(max_b, nb);
    const double ma = max_move(a.t, (const double(*)[3])xa, n0), mb = max_move(b.t, (const double(*)[3])xb, n1);
    if (mb - ma > *worst) *worst = mb - ma, worst_k = k;
    ck_assert_msg(mb < QUANTUM + ma, "step %d moved a node %.3g m (twin %.3g m)", k, mb, ma);
    free(xa);
    free(xb);
  }
  printf("  steps 2-%d: largest move over the twin's %.3g m (step %d)%s\n", steps, *worst, worst_k,
         b.t->hand ? "" : ", the blend over");
  if (!CHECK_STEPS) ck_assert_ptr_null(b.t->hand);
  if (!xpbd) {
    /* what the blend costs: its substeps beside the twin's in the same
     * state and the settled liver's (ts_ms_bounds.c, stiffened_bound).
     * The pressed, sagging liver stretches springs at its anchored base
     * 20-30 %; priced at the fastest mode's place, as one factor on the
     * whole tissue, that took 298-560 substeps a step, twin and refined
     * alike, against 118 settled; with each spring's own stiffening, 126-127.
     * Under the sanitizers, 118 all (0.8 mm pressed, 3 steps) */
    const double mean_a = (double)sub_a / (steps - 1), mean_b = (double)sub_b / (steps - 1);
    printf("  substeps a step: %.1f in the blend (at most %u), %.1f the twin, %u settled\n", mean_b, max_b, mean_a,
           rest_sub);
    ck_assert_uint_gt(rest_sub, 0);
    ck_assert_msg(mean_b <= 1.1 * mean_a, "the blend %.1f substeps a step, the twin %.1f", mean_b, mean_a);
    ck_assert_msg(2 * max_b <= 3 * rest_sub, "the blend %u substeps a step, settled %u", max_b, rest_sub);
  }
  free(sel);
  free(info.parents);
  ts_refine_src_free(src);
  ts_refine_src_free(nsrc);
  ts_xpbd_destroy(a.x);
  ts_xpbd_destroy(b.x);
  ts_tissue_destroy(a.t);
  ts_tissue_destroy(b.t);
  return jump;
}

/* mass-spring */
START_TEST(test_liver_smooth_ms) {
  double worst = 0, blend = 0;
  smooth_case(0, &worst, &blend);
}
END_TEST

#ifndef TS_TEST_SANITIZED /* the same smoothing and hand-over code; XPBD's fit is the patch's too */
/* XPBD */
START_TEST(test_liver_smooth_xpbd) {
  double worst = 0, blend = 0;
  smooth_case(1, &worst, &blend);
}
END_TEST
#endif

static Suite *suite(void) {
  Suite *s = suite_create("refine_smooth_liver");
  TCase *ms = tcase_create("ms");
  tcase_set_timeout(ms, 540);
  tcase_add_test(ms, test_liver_smooth_ms);
  suite_add_tcase(s, ms);
#ifndef TS_TEST_SANITIZED
  TCase *xp = tcase_create("xpbd");
  tcase_set_timeout(xp, 540);
  tcase_add_test(xp, test_liver_smooth_xpbd);
  suite_add_tcase(s, xp);
#endif
  return s;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a failing case's fork keeps what it printed */
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
