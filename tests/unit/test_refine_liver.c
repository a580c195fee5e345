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
 * the hand-over). Measured: 79 triangles selected, 8,776 -> 9,304 nodes,
 * no local mass scaling needed (the liver's slivers already set its
 * substep: 118 substeps a step at rest), steps 2-10 at most 0.5 um over
 * the twin's largest move (steps 2-30: 5.4 um), each old node's step
 * within 23 um of the twin's. The first step's 8.1 um needs the 20-step
 * hold: refined after 10, it is 21.7 um off the twin's (within the issue's
 * bound, not the quantum alone).
 * Open (not asserted here, it fails): refined at once when a fast press
 * stops (2 mm in 30 steps, 67 um a step, then held), the refined tissue
 * runs away within a few steps: up to 1.6 mm a step frictionless, 0.96 mm
 * with the default friction (the twin 80 um), its springs at the strain
 * limit and its substeps going from 286 to 526; the new nodes under the
 * sphere then carry hand-over forces of 0.02 N (8,000 times their weight),
 * against 1e-4 N after a 5-step hold, when the bound holds (13 um in the
 * first step, 0.2 um over the twin's after it). Without the hand-over's
 * node force nothing runs away (0.2 mm off in the first step, then within
 * 65 um of the twin's moves).
 */
#include <check.h>
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
#define SETTLE_STEPS 20     /* under gravity, no tool: the sag is still under way (the twin moves
                               60 um a step at the refinement), the harder case; each liver step
                               costs 0.1-0.3 s of CPU (118 substeps), so the suite stays short */
#define PRESS_STEPS 40      /* 2 mm in 40 steps: 50 um a step, 5 % of the daemon's 1 m/s */
#define HOLD_STEPS 20       /* held before the snapshot */
#define ASYNC_STEPS 2       /* the twin's steps between the snapshot and the install */
#define LIVER_STEPS 10      /* checked after the install */
#define DEPTH 0.002         /* m */
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

START_TEST(test_liver_pressed_massspring) {
  ts_tissue *a = NULL; /* the session's tissue; after the snapshot, the unrefined twin */
  ts_refine_src *src = NULL, *nsrc = NULL;
  build_liver(&a, &src);
  const uint32_t n0 = a->n_nodes;
  uint32_t top = 0; /* the outer sheet's highest node */
  ck_assert_uint_gt(a->nodes_per_sheet, 0);
  for (uint32_t i = 1; i < a->nodes_per_sheet; i++)
    if (a->rest[i][1] > a->rest[top][1]) top = i;
  ts_tool tools[TS_MAX_TOOLS];
  tools_at(tools, a->rest[top], 0);
  tools[0].active = 0;
  for (int i = 0; i < SETTLE_STEPS; i++) step(a, tools);
  double at[3]; /* where the sphere comes down: over the settled top */
  memcpy(at, a->x[top], sizeof at);
  for (int i = 1; i <= PRESS_STEPS + HOLD_STEPS; i++) {
    tools_at(tools, at, DEPTH * (i < PRESS_STEPS ? (double)i / PRESS_STEPS : 1.0));
    step(a, tools);
  }
  ck_assert_uint_gt(tools[0].contacts, 0);

  /* the snapshot, refined as server/refine.c's refine_work does */
  ts_tissue *snap = NULL, *r = NULL;
  ck_assert_int_eq(ts_refine_snapshot(a, &snap), 0);
  const double o[3] = {tools[0].pos[0], 0.05, tools[0].pos[2]}, d[3] = {0, -1, 0};
  uint32_t *sel = NULL, nsel = 0;
  ck_assert_int_eq(ts_refine_pick(src, snap, o, d, 0.005, &sel, &nsel, NULL), 0);
  ts_refine_opts opts = {TS_REFINE_LOOP, 0, 0, 0, 0, tools, TS_MAX_TOOLS, TS_REFINE_REBUILD_LOCAL};
  ts_refine_info info;
  info.parents = NULL;
  char err[256] = "";
  ck_assert_msg(ts_refine_run(src, snap, sel, nsel, &opts, &r, &nsrc, &info, err, sizeof err) == 0, "%s", err);
  ck_assert_ptr_nonnull(r->hand);
  const uint32_t(*par)[2] = (const uint32_t(*)[2])info.parents;
  const uint32_t n1 = r->n_nodes;
  /* the twin steps on meanwhile, the tool held */
  for (int i = 0; i < ASYNC_STEPS; i++) step(a, tools);
  /* the install (server/refine.c's install) */
  ck_assert_int_eq(ts_refine_restate(r, a, par), 0);
  ck_assert_int_eq(ts_handover_renew(r, a, par, tools, TS_MAX_TOOLS, NULL), 0);
  ck_assert_int_eq(ts_massspring_carry_tools(r, a), 0);
  ts_local_mass lm;
  ck_assert_int_eq(ts_massspring_local_mass(r, &lm, NULL), 0);
  printf("liver pressed %.1f mm, mass-spring: %u triangles selected, %u -> %u nodes; local mass scaling on %u "
         "nodes (%.0f %% of their mass)\n",
         DEPTH * 1e3, nsel, n0, n1, lm.nodes, lm.region_mass > 0 ? 100 * lm.added / lm.region_mass : 0.0);

  /* the first step: old nodes as the twin's, new ones as their
     interpolated positions */
  double(*x0)[3] = positions(a);
  ck_assert(memcmp(x0, r->x, sizeof *x0 * n0) == 0);
  step(a, tools);
  step(r, tools);
  double(*ip)[3] = malloc(sizeof *ip * n1);
  ck_assert_ptr_nonnull(ip);
  memcpy(ip, a->x, sizeof *ip * n0);
  for (uint32_t i = n0; i < n1; i++)
    for (int c = 0; c < 3; c++) ip[i][c] = 0.5 * (ip[par[i - n0][0]][c] + ip[par[i - n0][1]][c]);
  const double moved = max_move(a, (const double(*)[3])x0, n0);
  const double jump = max_move(r, (const double(*)[3])ip, n1);
  printf("  first step after the install differs by %.3g m (the twin moved %.3g m)\n", jump, moved);
  ck_assert_msg(jump < QUANTUM + moved, "the first step differs by %.3g m (twin moved %.3g m)", jump, moved);
  /* the bound is loose here: the liver still creeps down under
     gravity at about g / drag (65 um a step), which it allows on top of
     the quantum, and a refinement without the hand-over stays within it
     (50 um off, measured). The hand-over's own share, the difference from
     the twin, within the quantum alone: measured 7.4 um */
  ck_assert_msg(jump < QUANTUM, "the first step differs by %.3g m from the twin's", jump);
  free(ip);
  free(x0);

  /* the next steps: no node moves more than the quantum plus the twin's
     largest move */
  double worst = -1, worst_mb = 0, node_worst = 0;
  int worst_k = 0;
  for (int k = 2; k <= LIVER_STEPS; k++) {
    double(*xa)[3] = positions(a), (*xr)[3] = positions(r);
    step(a, tools);
    step(r, tools);
    const double ma = max_move(a, (const double(*)[3])xa, n0), mr = max_move(r, (const double(*)[3])xr, n1);
    if (mr - ma > worst) worst = mr - ma, worst_k = k, worst_mb = mr;
    for (uint32_t i = 0; i < n0; i++) /* each old node's step against the twin's */
      for (int c = 0; c < 3; c++) node_worst = fmax(node_worst, fabs((r->x[i][c] - xr[i][c]) - (a->x[i][c] - xa[i][c])));
    ck_assert_msg(mr < QUANTUM + ma, "step %d after the install moved a node %.3g m (twin %.3g m)", k, mr, ma);
    free(xa);
    free(xr);
  }
  double dmax = 0;
  for (uint32_t i = 0; i < n0; i++)
    for (int c = 0; c < 3; c++) dmax = fmax(dmax, fabs(a->x[i][c] - r->x[i][c]));
  printf("  steps 2-%d: largest move over the twin's %.3g m (step %d, %.3g m); an old node's step off the twin's by "
         "up to %.3g m; old nodes %.3g m from the twin\n",
         LIVER_STEPS, worst, worst_k, worst_mb, node_worst, dmax);
  free(sel);
  free(info.parents);
  ts_refine_src_free(src);
  ts_refine_src_free(nsrc);
  ts_tissue_destroy(snap);
  ts_tissue_destroy(r);
  ts_tissue_destroy(a);
}
END_TEST

static Suite *refine_liver_suite(void) {
  Suite *s = suite_create("refine_liver");
  TCase *tc = tcase_create("liver");
  tcase_set_timeout(tc, 300); /* 120 liver steps of 0.1-0.3 s of CPU each; more under the sanitizers */
  tcase_add_test(tc, test_liver_pressed_massspring);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(refine_liver_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
