/*
 * test_tree_watch.c: the watched refit of the tissue's surface tree
 * (ts_aabb_tree_refit_watch / _watched) and the XPBD step that refits
 * through it (ts_xpbd_def.tree_slack): one full pass per step, the later
 * substeps checking only the points near their escape while a bound on
 * every node's move stays within the slack. Everything must be bit for bit
 * what a full refit every substep gives.
 *
 * - Tree level, on patch-S under random local bumps moved over 8
 *   "substeps" each: a tree refitted in full at every substep and one
 *   watched (the bound: the bump's largest move so far) end every substep
 *   with the same boxes, references and area (memcmp); a third tree,
 *   watched without the guard (never a full pass after the first), must
 *   differ somewhere (the case moves points past the slack).
 * - The XPBD step, the dental instrument along the standard path over
 *   patch-S (the bench's path, at twice its speed), and the same with a
 *   tree of 20 um margin (slack 10 um) and the tool at ten times the
 *   speed, so that the bound passes the slack within steps and the full
 *   pass runs mid-step: two solvers, slack 0 (a full refit every substep,
 *   the step of before) and the default, each with its own tissue, tree
 *   and tool, compared after every step: positions, velocities, the
 *   tool's force and torque, touching count, the last substep's
 *   candidates (vertices and triangles, in order) and the trees (boxes,
 *   references, area), all bit for bit. A difference in any substep
 *   reaches the positions at the step's end.
 *
 * Checked against breakage: with the guard removed from the step (the
 * bound taken as 0, so the later substeps never pass over the surface)
 * the fast case fails at its first step whose bound passes the slack (a
 * tree reference differs); with refit_watched checking nothing the tree
 * case fails at its first bump.
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
#include "ts_xpbd.h"

static uint64_t rng_state = 7;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* the trees' state that queries see: boxes, references, area */
static int same_tree(const ts_aabb_tree *a, const ts_aabb_tree *b) {
  if (a->n_nodes != b->n_nodes || a->n_used != b->n_used) return 0;
  for (uint32_t i = 0; i < a->n_nodes; i++)
    if (memcmp(a->nodes[i].lo, b->nodes[i].lo, sizeof a->nodes[i].lo) ||
        memcmp(a->nodes[i].hi, b->nodes[i].hi, sizeof a->nodes[i].hi) ||
        a->nodes[i].tri != b->nodes[i].tri)
      return 0;
  if (memcmp(a->ref, b->ref, sizeof *a->ref * a->n_used)) return 0;
  return memcmp(&a->area, &b->area, sizeof a->area) == 0 && a->stats.rebuilds == b->stats.rebuilds;
}

/* ---- tree level ---- */

#define BUMPS TU_ITERS(200, 40)
#define SUBS 8

START_TEST(test_watch_tree) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50; /* patch-S */
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  const uint32_t n = t->n_nodes;
  const double slack = 5e-5;
  ts_aabb_tree *full, *watched, *bare;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &full), 0);
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &watched), 0);
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &bare), 0);
  ck_assert_int_eq(ts_aabb_tree_refit_watch(watched, NULL, 1.0), TS_EINVAL); /* over half the margin */
  double (*x0)[3] = malloc(sizeof *x0 * n), (*x)[3] = malloc(sizeof *x * n);
  ck_assert_ptr_nonnull(x0);
  ck_assert_ptr_nonnull(x);
  memcpy(x0, t->x, sizeof *x0 * n);
  uint32_t bare_differs = 0, watched_refits = 0, passes = 0, escaped = 0;
  for (int b = 0; b < BUMPS; b++) {
    /* a bump: nodes within r of a random surface node move along a random
     * direction by up to amp (10 um .. 0.3 mm) over the substeps */
    const uint32_t c = (uint32_t)(urand() * t->nodes_per_sheet);
    const double r = 0.003 + 0.01 * urand(), amp = 1e-5 + 3e-4 * urand();
    double dir[3] = {urand() - 0.5, urand() - 0.5, urand() - 0.5};
    const double dl = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    double moved = INFINITY, step = 0;
    for (int j = 0; j < SUBS; j++) {
      const double s = (double)(j + 1) / SUBS;
      double most = 0;
      for (uint32_t i = 0; i < n; i++) {
        const double e = sqrt(pow(x0[i][0] - x0[c][0], 2) + pow(x0[i][1] - x0[c][1], 2) +
                              pow(x0[i][2] - x0[c][2], 2));
        const double w = e < r ? amp * (1 - e / r) * s : 0.0;
        for (int k = 0; k < 3; k++) x[i][k] = x0[i][k] + w * dir[k] / dl;
        most = fmax(most, w);
      }
      ck_assert_int_ge(ts_aabb_tree_refit(full, (const double(*)[3])x), 0);
      escaped += full->stats.escaped;
      /* the bound: the largest move since the last full pass */
      moved = j == 0 ? INFINITY : most - step;
      int rc;
      if (moved <= slack) {
        rc = ts_aabb_tree_refit_watched(watched, (const double(*)[3])x);
        watched_refits++;
      } else {
        rc = ts_aabb_tree_refit_watch(watched, (const double(*)[3])x, slack);
        passes++;
      }
      ck_assert_int_ge(rc, 0);
      if (rc != 0 || moved > slack) step = most; /* the bound restarts here */
      ck_assert_msg(same_tree(full, watched), "bump %d substep %d: the watched tree differs", b, j);
      /* unguarded: one pass at the bump's start, watched after */
      rc = j == 0 ? ts_aabb_tree_refit_watch(bare, (const double(*)[3])x, slack)
                  : ts_aabb_tree_refit_watched(bare, (const double(*)[3])x);
      ck_assert_int_ge(rc, 0);
      bare_differs += !same_tree(full, bare);
    }
    memcpy(x0, x, sizeof *x0 * n);
  }
  char err[256] = "";
  ck_assert_msg(ts_aabb_tree_validate(watched, (const double(*)[3])x, err, sizeof err) == 0, "%s", err);
  fprintf(stderr,
          "test_watch_tree: %d bumps x %d substeps: %u watched refits, %u full passes, %u escapes, "
          "the unguarded tree differed at %u\n",
          BUMPS, SUBS, watched_refits, passes, escaped, bare_differs);
  ck_assert_uint_gt(watched_refits, 0);
  ck_assert_uint_gt(passes, (uint32_t)BUMPS); /* some mid-bump */
  ck_assert_uint_gt(bare_differs, 0);         /* the case needs the guard */
  free(x0);
  free(x);
  ts_aabb_tree_destroy(full);
  ts_aabb_tree_destroy(watched);
  ts_aabb_tree_destroy(bare);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- the XPBD step ---- */

static ts_mesh *instrument(void) {
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = TS_BENCH_INSTRUMENT_SCALE;
  ts_mesh *m = NULL;
  int rc = ts_mesh_read_file(path, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", path, err);
  return m;
}

typedef struct side {
  ts_tissue *t;
  ts_xpbd *s;
  ts_aabb_tree *tree;
  ts_posed_tool pt;
  ts_contact_ws ws;
  ts_xpbd_tool xt;
} side;

static void side_init(side *sd, ts_obb_tree *itree, double slack, double margin,
                      const ts_pose *start) {
  memset(sd, 0, sizeof *sd);
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50; /* patch-S */
  ck_assert_int_eq(ts_patch_create(&d, &sd->t), 0);
  ts_xpbd_def xd = ts_xpbd_default_def();
  xd.tree_slack = slack;
  sd->s = ts_xpbd_create(sd->t, &xd);
  ck_assert_ptr_nonnull(sd->s);
  ts_aabb_tree_def td = ts_default_aabb_tree_def();
  td.margin = margin;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(&td, sd->t, &sd->tree), 0);
  ck_assert_int_eq(ts_posed_tool_init(&sd->pt, itree), 0);
  ck_assert_int_eq(ts_contact_ws_init(&sd->ws, NULL, sd->t->n_nodes, sd->t->n_nodes,
                                      ts_tissue_n_contact_tris(sd->t)),
                   0);
  sd->xt.posed = &sd->pt;
  sd->xt.contact = &sd->ws;
  sd->xt.prev = sd->xt.pose = *start;
}

static void side_free(side *sd) {
  ts_contact_ws_free(&sd->ws);
  ts_posed_tool_free(&sd->pt);
  ts_aabb_tree_destroy(sd->tree);
  ts_xpbd_destroy(sd->s);
  ts_tissue_destroy(sd->t);
}

static void same_sides(const side *a, const side *b, int k) {
  const uint32_t n = a->t->n_nodes;
  ck_assert_msg(memcmp(a->t->x, b->t->x, sizeof *a->t->x * n) == 0, "step %d: positions differ", k);
  ck_assert_msg(memcmp(a->t->v, b->t->v, sizeof *a->t->v * n) == 0, "step %d: velocities differ", k);
  ck_assert_msg(memcmp(a->xt.force, b->xt.force, sizeof a->xt.force) == 0 &&
                    memcmp(a->xt.torque, b->xt.torque, sizeof a->xt.torque) == 0,
                "step %d: the tool's force differs", k);
  ck_assert_msg(a->xt.contacts == b->xt.contacts, "step %d: touching %u and %u", k, a->xt.contacts,
                b->xt.contacts);
  int same = a->ws.n == b->ws.n && a->ws.n_tris == b->ws.n_tris;
  for (uint32_t i = 0; same && i < a->ws.n; i++) same = a->ws.v[i].node == b->ws.v[i].node;
  for (uint32_t i = 0; same && i < a->ws.n_tris; i++) same = a->ws.tri_buf[i] == b->ws.tri_buf[i];
  ck_assert_msg(same, "step %d: the candidates differ (%u and %u vertices)", k, a->ws.n, b->ws.n);
  ck_assert_msg(same_tree(a->tree, b->tree), "step %d: the trees differ", k);
}

/* Steps both sides along the standard path from path time s0 by ds a 1 ms
 * step; returns the touching vertices summed over the steps. */
static uint64_t run_path(double margin, double s0, double ds, int steps, uint64_t *passes,
                         uint64_t *refits, uint64_t *planned) {
  ts_mesh *m = instrument();
  ts_tool_shape_def shd = ts_default_tool_shape_def();
  shd.kind = TS_SHAPE_MESH;
  shd.mesh = m;
  ts_obb_tree *itree = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&shd, &itree), 0);
  double tip_local[3];
  ck_assert_int_eq(ts_bench_instrument_tip(m, tip_local), 0);
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  ts_tissue *probe;
  ck_assert_int_eq(ts_patch_create(&d, &probe), 0);
  uint32_t top = 0, ns = probe->nodes_per_sheet ? probe->nodes_per_sheet : probe->n_nodes;
  for (uint32_t i = 1; i < ns; i++)
    if (probe->rest[i][1] > probe->rest[top][1]) top = i;
  const double up[3] = {0, 1, 0}, along[3] = {1, 0, 0};
  ts_bench_path path;
  ck_assert_int_eq(ts_bench_path_init(&path, probe->rest[top], up, along), 0);
  ts_tissue_destroy(probe);

  ts_pose p = {.jaw = 0};
  double R[3][3];
  ts_bench_path_instrument_pose(&path, s0, tip_local, 1.0, R, p.p);
  ts_bench_path_instrument_quat(&path, p.q);
  side a, b;
  side_init(&a, itree, 0.0, margin, &p);
  side_init(&b, itree, TS_XPBD_TREE_SLACK_DEFAULT, margin, &p);
  uint64_t touching = 0;
  for (int k = 0; k < steps; k++) {
    ts_bench_path_instrument_pose(&path, s0 + ds * (k + 1), tip_local, 1.0, R, p.p);
    side *both[2] = {&a, &b};
    for (int q = 0; q < 2; q++) {
      both[q]->xt.prev = both[q]->xt.pose;
      both[q]->xt.pose = p;
      TU_OK_AT(ts_xpbd_step_posed(both[q]->s, both[q]->t, 1e-3, NULL, 0, both[q]->tree,
                                  &both[q]->xt, 1, NULL),
               k);
    }
    same_sides(&a, &b, k);
    touching += a.xt.contacts;
  }
  *passes = b.tree->stats.watch_passes;
  *refits = b.tree->stats.refits;
  *planned = b.ws.plan_uses;
  ck_assert_uint_eq(a.tree->stats.watch_passes, 0); /* slack 0: the plain refit */
  ck_assert_uint_eq(a.ws.plan_uses, 0);             /* and a walk at every substep */
  side_free(&a);
  side_free(&b);
  ts_obb_tree_destroy(itree);
  ts_mesh_free(m);
  return touching;
}

/* path time 2.1 + 0.002 k s: the press, 4 to 5 mm in, 80 steps (a sanitizer build:
 * 50 steps from 2.2 s, touching; every step runs the same code) */
#define PATH_STEPS TU_ITERS(80, 50)
#define PATH_S0 TU_ITERS(2.1, 2.2)

START_TEST(test_watch_xpbd_path) {
  uint64_t passes, refits, planned;
  const uint64_t touching =
      run_path(0.2e-3, PATH_S0, 0.002, PATH_STEPS, &passes, &refits, &planned);
  fprintf(stderr, "test_watch_xpbd_path: %d steps, %.1f touching a step, %llu full passes of %llu "
          "refits, %llu planned candidate sets\n", PATH_STEPS, (double)touching / PATH_STEPS,
          (unsigned long long)passes, (unsigned long long)refits, (unsigned long long)planned);
  ck_assert_uint_gt(touching, 0);
  ck_assert_uint_lt(passes, refits); /* watched refits ran */
  ck_assert_uint_ge(planned, refits - passes); /* every watched substep took the plan */
}
END_TEST

/* a 20 um tree margin (slack 10 um) and the tool at 10 times the path's
 * speed (20 ms of path a step): the bound passes the slack mid-step */
#define FAST_STEPS TU_ITERS(60, 25)

START_TEST(test_watch_xpbd_fast) {
  uint64_t passes, refits, planned;
  const uint64_t touching = run_path(2e-5, PATH_S0, 0.02, FAST_STEPS, &passes, &refits, &planned);
  fprintf(stderr, "test_watch_xpbd_fast: %d steps, %.1f touching a step, %llu full passes of %llu "
          "refits, %llu planned candidate sets\n", FAST_STEPS, (double)touching / FAST_STEPS,
          (unsigned long long)passes, (unsigned long long)refits, (unsigned long long)planned);
  ck_assert_uint_gt(touching, 0);
  ck_assert_uint_gt(planned, 0); /* plans made mid-step too */
  ck_assert_uint_gt(passes, (uint64_t)FAST_STEPS); /* full passes mid-step */
  ck_assert_uint_lt(passes, refits);               /* and watched ones */
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tree_watch");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_watch_tree);
  tcase_add_test(tc, test_watch_xpbd_path);
  tcase_add_test(tc, test_watch_xpbd_fast);
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
