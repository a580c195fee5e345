/*
 * test_contact_plan.c: the contact's candidates planned once for a
 * solver's substeps (ts_contact_plan, ts_contact_plan.c). Two workspaces,
 * the same tissue tree and the same poses of the dental instrument: one
 * planned over the substeps' span, one walking the tree at every begin;
 * every substep's candidates (triangles and vertices, in order) must be
 * the same. The tissue is patch-S with the default 0.2 mm tree margin and
 * the largest slack, 0.1 mm: its nodes first jittered (up to 0.19 mm) and
 * refitted so that their references sit off them, then every node moved over the substeps by up to the slack in a
 * direction of its own, the tree refitted at each (escapes in most
 * substeps, fat boxes growing towards the tool); the instrument along the
 * standard path pressed into the patch, each span 4 ms of the path (twice
 * the path's speed) over 8 substeps, or standing still (every other
 * trial: the tool's side of the superset then no wider than a begin's). A begin outside the span takes the
 * walk (its candidates the same, no plan used).
 *
 * Checked against breakage: with the tissue boxes' growth left out of the
 * superset (E taken 0 in ts_contact_plan) the candidates differ; with the
 * tool's cover left out (G taken as the widest begin's growth, the begin's
 * check skipped) too. The XPBD step's trajectory with plans against slack
 * 0 (no plans) is test_tree_watch's.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench_path.c"
#include "test_util.h"
#include "ts_aabb_tree.h"
#include "ts_contact.h"
#include "ts_error.h"
#include "ts_mesh_io.h"
#include "ts_obb_tree.h"
#include "ts_tissue.h"

static uint64_t rng_state = 11;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* a random unit vector */
static void unit(double u[3]) {
  double l2;
  do {
    for (int k = 0; k < 3; k++) u[k] = 2 * urand() - 1;
    l2 = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
  } while (l2 > 1 || l2 < 1e-6);
  const double l = sqrt(l2);
  for (int k = 0; k < 3; k++) u[k] /= l;
}

static int same(const ts_contact_ws *a, const ts_contact_ws *b) {
  if (a->n != b->n || a->n_tris != b->n_tris || a->dropped != b->dropped) return 0;
  for (uint32_t i = 0; i < a->n; i++)
    if (a->v[i].node != b->v[i].node) return 0;
  for (uint32_t i = 0; i < a->n_tris; i++)
    if (a->tri_buf[i] != b->tri_buf[i]) return 0;
  return 1;
}

#define TRIALS TU_ITERS(60, 15)
#define SUBS 8

START_TEST(test_plan_same_candidates) {
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = TS_BENCH_INSTRUMENT_SCALE;
  ts_mesh *m = NULL;
  ck_assert_msg(ts_mesh_read_file(path, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err) == 0, "%s: %s",
                path, err);
  ts_tool_shape_def shd = ts_default_tool_shape_def();
  shd.kind = TS_SHAPE_MESH;
  shd.mesh = m;
  ts_obb_tree *itree = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&shd, &itree), 0);
  double tip_local[3];
  ck_assert_int_eq(ts_bench_instrument_tip(m, tip_local), 0);

  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50; /* patch-S */
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  const uint32_t n = t->n_nodes;
  uint32_t top = 0, ns = t->nodes_per_sheet ? t->nodes_per_sheet : n;
  for (uint32_t i = 1; i < ns; i++)
    if (t->rest[i][1] > t->rest[top][1]) top = i;
  const double up[3] = {0, 1, 0}, along[3] = {1, 0, 0};
  ts_bench_path bp;
  ck_assert_int_eq(ts_bench_path_init(&bp, t->rest[top], up, along), 0);

  const double slack = 1e-4; /* half the default margin, the most allowed */
  ts_aabb_tree_def td = ts_default_aabb_tree_def();
  ts_aabb_tree *tree;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(&td, t, &tree), 0);
  ts_posed_tool pa, pb;
  ck_assert_int_eq(ts_posed_tool_init(&pa, itree), 0);
  ck_assert_int_eq(ts_posed_tool_init(&pb, itree), 0);
  ts_contact_ws wa, wb;
  const uint32_t nct = ts_tissue_n_contact_tris(t);
  ck_assert_int_eq(ts_contact_ws_init(&wa, NULL, n, n, nct), 0);
  ck_assert_int_eq(ts_contact_ws_init(&wb, NULL, n, n, nct), 0);

  double (*x0)[3] = malloc(sizeof *x0 * n), (*x)[3] = malloc(sizeof *x * n);
  double (*dir)[3] = malloc(sizeof *dir * n);
  ck_assert(x0 && x && dir);
  uint64_t begins = 0, cand = 0, escapes = 0;
  for (int k = 0; k < TRIALS; k++) {
    /* the nodes jittered off their references */
    for (uint32_t i = 0; i < n; i++) {
      double u[3];
      unit(u);
      const double r = 1.9e-4 * urand();
      for (int c = 0; c < 3; c++) x0[i][c] = t->rest[i][c] + r * u[c];
    }
    ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])x0), 0);
    for (uint32_t i = 0; i < n; i++) unit(dir[i]);
    /* the span: 4 ms of the path from 2.1 s + 10 ms k */
    const double s0 = 2.1 + 0.01 * k;
    ts_pose from = {.jaw = 0}, to = {.jaw = 0};
    double R[3][3];
    ts_bench_path_instrument_pose(&bp, s0, tip_local, 1.0, R, from.p);
    ts_bench_path_instrument_quat(&bp, from.q);
    /* every other span standing still: the superset's tool boxes then as
     * large as a begin's, only the tissue's growth between */
    ts_bench_path_instrument_pose(&bp, k % 2 ? s0 + 0.004 : s0, tip_local, 1.0, R, to.p);
    ts_bench_path_instrument_quat(&bp, to.q);
    ck_assert_int_eq(ts_contact_plan(&wa, &pa, &from, &to, tree, slack), 1);
    for (int j = 0; j < SUBS; j++) {
      const double f = (j + 1.0) / SUBS * (1 - 1e-3) * slack;
      for (uint32_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) x[i][c] = x0[i][c] + f * dir[i][c];
      ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])x), 0);
      escapes += tree->stats.escaped;
      ts_pose a, b;
      ts_pose_lerp(&from, &to, (double)j / SUBS, &a);
      ts_pose_lerp(&from, &to, (j + 1.0) / SUBS, &b);
      const uint64_t used = wa.plan_uses;
      const int ra = ts_contact_begin(&wa, &pa, &a, &b, tree, t->inv_mass, NULL);
      const int rb = ts_contact_begin(&wb, &pb, &a, &b, tree, t->inv_mass, NULL);
      ck_assert_int_eq(ra, rb);
      ck_assert_uint_eq(wa.plan_uses, used + 1);
      ck_assert_msg(same(&wa, &wb), "trial %d substep %d: the candidates differ (%u and %u)", k, j,
                    wa.n, wb.n);
      begins++;
      cand += wb.n;
    }
    /* a sweep beyond the span walks */
    ts_pose far = to;
    far.p[0] += 5e-3;
    const uint64_t used = wa.plan_uses;
    ck_assert_int_eq(ts_contact_begin(&wa, &pa, &to, &far, tree, t->inv_mass, NULL),
                     ts_contact_begin(&wb, &pb, &to, &far, tree, t->inv_mass, NULL));
    ck_assert_uint_eq(wa.plan_uses, used);
    ck_assert(same(&wa, &wb));
  }
  fprintf(stderr, "test_plan_same_candidates: %llu planned begins, %.1f candidates and %.1f "
          "escapes a begin\n", (unsigned long long)begins, (double)cand / begins,
          (double)escapes / begins);
  ck_assert_uint_gt(cand, 0);
  ck_assert_uint_gt(escapes, 0);
  ck_assert_uint_eq(wb.plan_uses, 0);
  free(x0);
  free(x);
  free(dir);
  ts_contact_ws_free(&wa);
  ts_contact_ws_free(&wb);
  ts_posed_tool_free(&pa);
  ts_posed_tool_free(&pb);
  ts_aabb_tree_destroy(tree);
  ts_tissue_destroy(t);
  ts_obb_tree_destroy(itree);
  ts_mesh_free(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("contact_plan");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_plan_same_candidates);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
