/*
 * test_collide_defer.c: the tissue tree's deferred refit
 * (ts_aabb_tree_defer_*: the escape test fused into a caller's own pass
 * over the points) and the live steps that use it.
 *
 * - Tree level, on the default patch under 200 random bumps: a tree whose
 *   every point is noted, and one whose moved points only are noted, end
 *   each bump with the same boxes (bit for bit), escapes and refits as
 *   ts_aabb_tree_refit's pass, and validate; a tree that is not armed, or
 *   whose notes overflowed, takes the full refit; any other refit disarms.
 *   Boxes are compared exactly: the same references give the same boxes.
 * - The mass-spring step (ts_ms_contact.c): the instrument and a 1 mm
 *   capsule (two triangle passes in one substep, the second on the armed
 *   tree) pressed and dragged along the standard path over patch-S; after
 *   every step the surface tree, refitted for what was noted since its last
 *   use (ts__ms_surface_tree), validates against the nodes' positions, so
 *   that every move of the step's contact was noted (a move not noted
 *   leaves a point beyond its fat box: validation names it).
 *
 * - The node projection's moves are noted: a sphere put down 2 mm into
 *   patch-S at once, the tree refitted for the notes, validates.
 *
 * Checked against breakage: with defer_refit refitting nothing the tree
 * case fails at its first bump; with the contact's notes removed the
 * projection case fails at its first placement. The stepping case did not
 * fail then (a substep's moves after the tree's first use stay within the
 * margin there): it checks that the step's uses keep the tree valid.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench_path.c"
#include "ts_aabb_tree.h"
#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_mesh_io.h"
#include "ts_ms_internal.h"
#include "ts_obb_tree.h"
#include "ts_tissue.h"

static uint64_t rng_state = 1;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double urange(double a, double b) { return a + (b - a) * urand(); }

static double dist3(const double a[3], const double b[3]) {
  double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
  return sqrt(dx * dx + dy * dy + dz * dz);
}

static void same_boxes(const ts_aabb_tree *a, const ts_aabb_tree *b, const char *what, int it) {
  uint32_t differ = 0;
  for (uint32_t i = 0; i < a->n_nodes; i++)
    differ += memcmp(a->nodes[i].lo, b->nodes[i].lo, sizeof a->nodes[i].lo) != 0 ||
              memcmp(a->nodes[i].hi, b->nodes[i].hi, sizeof a->nodes[i].hi) != 0;
  ck_assert_msg(differ == 0, "%s, bump %d: %u boxes differ from the full refit's", what, it, differ);
}

START_TEST(test_defer_refit) {
  rng_state = 5;
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ts_aabb_tree *full, *all, *part;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &full), 0);
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &all), 0);
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &part), 0);
  const double(*x)[3] = (const double(*)[3])t->x;
  char err[256] = "";
  uint64_t escaped = 0, rebuilt = 0;
  for (int it = 0; it < 200; it++) {
    /* a smooth bump of 0.1-2 mm over 3-12 mm: some points escape, most not */
    double c[3];
    memcpy(c, t->x[(uint32_t)(urand() * t->n_nodes) % t->n_nodes], sizeof c);
    double rad = urange(0.003, 0.012), amp = urange(0.0001, 0.002);
    double dir[3] = {urange(-0.3, 0.3), urange(-1, 1), urange(-0.3, 0.3)};
    ts_aabb_tree_defer_begin(all);
    ts_aabb_tree_defer_begin(part);
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      double dd = dist3(t->x[i], c);
      if (dd < rad) {
        double w = 0.5 * (1 + cos(M_PI * dd / rad));
        for (int k = 0; k < 3; k++) t->x[i][k] += amp * w * dir[k];
        ts_aabb_tree_defer_note(part, i, t->x[i]);
      }
      ts_aabb_tree_defer_note(all, i, t->x[i]);
    }
    ck_assert(ts_aabb_tree_defer_armed(all) && ts_aabb_tree_defer_armed(part));
    int rf = ts_aabb_tree_refit(full, x);
    int ra = ts_aabb_tree_defer_refit(all, x), rp = ts_aabb_tree_defer_refit(part, x);
    ck_assert_int_ge(rf, 0);
    ck_assert_int_eq(ra, rf);
    ck_assert_int_eq(rp, rf);
    ck_assert(!ts_aabb_tree_defer_armed(all) && !ts_aabb_tree_defer_armed(part));
    rebuilt += rf == 1;
    ck_assert_msg(ts_aabb_tree_validate(all, x, err, sizeof err) == 0, "bump %d: %s", it, err);
    ck_assert_msg(ts_aabb_tree_validate(part, x, err, sizeof err) == 0, "bump %d: %s", it, err);
    ck_assert_uint_eq(all->stats.escaped, full->stats.escaped);
    ck_assert_uint_eq(part->stats.escaped, full->stats.escaped);
    ck_assert_uint_eq(part->stats.leaves_refit, full->stats.leaves_refit);
    same_boxes(all, full, "every point noted", it);
    same_boxes(part, full, "moved points noted", it);
    escaped += full->stats.escaped;
  }
  fprintf(stderr, "test_defer_refit: %u nodes, 200 bumps, %.1f escaped per bump, %llu rebuilds\n",
          t->n_nodes, escaped / 200.0, (unsigned long long)rebuilt);
  ck_assert_uint_gt(escaped, 200); /* the bumps did move points out */

  uint32_t p = part->used[part->n_used / 2];
  /* not armed: a note does nothing and defer_refit is the full refit */
  t->x[p][1] += 0.001;
  ts_aabb_tree_defer_note(part, p, t->x[p]);
  ck_assert_uint_eq(part->n_pend, 0);
  ck_assert_int_ge(ts_aabb_tree_defer_refit(part, x), 0);
  ck_assert_uint_eq(part->stats.escaped, 1);
  ck_assert_msg(ts_aabb_tree_validate(part, x, err, sizeof err) == 0, "%s", err);
  /* any other refit disarms */
  ts_aabb_tree_defer_begin(part);
  ck_assert_int_ge(ts_aabb_tree_refit(part, x), 0);
  ck_assert(!ts_aabb_tree_defer_armed(part));
  ts_aabb_tree_defer_begin(part);
  ts_aabb_tree_defer_cancel(part);
  ck_assert(!ts_aabb_tree_defer_armed(part));
  /* the promise broken (armed, a point moved 1 mm and not noted): what
   * validation reports; a full refit repairs it */
  ts_aabb_tree_defer_begin(part);
  t->x[p][1] += 0.001;
  ck_assert_int_eq(ts_aabb_tree_defer_refit(part, x), 0);
  ck_assert_uint_eq(part->stats.escaped, 0);
  ck_assert_int_eq(ts_aabb_tree_validate(part, x, NULL, 0), TS_EINTERNAL);
  ck_assert_int_ge(ts_aabb_tree_refit(part, x), 0);
  ck_assert_msg(ts_aabb_tree_validate(part, x, err, sizeof err) == 0, "%s", err);
  /* overflow: more notes than points (repeats) disarm; the full refit */
  ts_aabb_tree_defer_begin(part);
  t->x[p][1] += 0.001;
  for (uint32_t k = 0; k <= part->n_points; k++) ts_aabb_tree_defer_note(part, p, t->x[p]);
  ck_assert(!ts_aabb_tree_defer_armed(part));
  uint32_t q = part->used[part->n_used / 3]; /* moved after the overflow, not noted */
  t->x[q][0] += 0.001;
  ck_assert_int_ge(ts_aabb_tree_defer_refit(part, x), 0);
  ck_assert_uint_eq(part->stats.escaped, 2);
  ck_assert_msg(ts_aabb_tree_validate(part, x, err, sizeof err) == 0, "%s", err);
  /* a NaN noted is refused, tree unchanged */
  ts_aabb_node keep = part->nodes[0];
  ts_aabb_tree_defer_begin(part);
  double y = t->x[p][0];
  t->x[p][0] = NAN;
  ts_aabb_tree_defer_note(part, p, t->x[p]);
  ck_assert_uint_eq(part->n_pend, 1);
  ck_assert_int_eq(ts_aabb_tree_defer_refit(part, x), TS_ENAN);
  t->x[p][0] = y;
  ck_assert(memcmp(&keep, &part->nodes[0], sizeof keep) == 0);
  ck_assert_int_eq(ts_aabb_tree_defer_refit(NULL, x), TS_EINVAL);

  ts_aabb_tree_destroy(full);
  ts_aabb_tree_destroy(all);
  ts_aabb_tree_destroy(part);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- the mass-spring step's contact ---- */

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

/* path time 0.8 + 0.002 k s: from above the touch into the press; a
 * sanitizer build (memory and undefined behaviour, not the figures) takes
 * 40 steps from 1.4 s, the tools put down already touching: every step
 * runs the same code (300 steps took 119 s of a CI run's ASan suite) */
#ifdef TS_TEST_SANITIZED
#define MS_STEPS 40
#define MS_S0 1.4
#else
#define MS_STEPS 600
#define MS_S0 0.8
#endif

START_TEST(test_defer_ms_step) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50; /* patch-S */
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  ts_mesh *m = instrument();
  ts_tool_shape_def sd = ts_default_tool_shape_def();
  sd.kind = TS_SHAPE_MESH;
  sd.mesh = m;
  ts_obb_tree *itree = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&sd, &itree), 0);
  double tip_local[3];
  ck_assert_int_eq(ts_bench_instrument_tip(m, tip_local), 0);
  /* the standard path over the highest node (bench_scenario.c's) */
  uint32_t top = 0, ns = t->nodes_per_sheet ? t->nodes_per_sheet : t->n_nodes;
  for (uint32_t i = 1; i < ns; i++)
    if (t->rest[i][1] > t->rest[top][1]) top = i;
  const double up[3] = {0, 1, 0}, along[3] = {1, 0, 0};
  ts_bench_path path;
  ck_assert_int_eq(ts_bench_path_init(&path, t->rest[top], up, along), 0);
  char err[256] = "";
  uint64_t touching = 0, pushed = 0;
  for (int k = 0; k < MS_STEPS; k++) {
    const double s = MS_S0 + 0.002 * k;
    ts_tool tl[2];
    memset(tl, 0, sizeof tl);
    double R[3][3];
    tl[0].kind = TS_TOOL_MESH;
    tl[0].shape = itree;
    tl[0].active = 1;
    ts_bench_path_instrument_pose(&path, s, tip_local, 1.0, R, tl[0].pos);
    ts_bench_path_instrument_quat(&path, tl[0].quat);
    /* a 1 mm capsule lying 6 mm beside the tip, as deep: its own pass */
    double tip[3];
    ts_bench_path_tip(&path, s, tip);
    tl[1].kind = TS_TOOL_CAPSULE;
    tl[1].active = 1;
    tl[1].radius = 0.5e-3;
    tl[1].length = 0.01;
    tl[1].quat[0] = sqrt(0.5), tl[1].quat[3] = sqrt(0.5); /* its axis along x */
    for (int a = 0; a < 3; a++) tl[1].pos[a] = tip[a];
    tl[1].pos[2] += 0.006;
    ts_step_stats st;
    ck_assert_int_eq(ts_massspring_step(t, 1e-3, tl, 2, &st), 0);
    touching += tl[0].contacts + tl[1].contacts;
    /* every move since the tree's last use was noted: refitted for those,
     * the tree holds the nodes where they are */
    ts_aabb_tree *tree = ts__ms_surface_tree(t, t->ms);
    ck_assert_ptr_nonnull(tree);
    pushed += tree->stats.escaped;
    ck_assert_msg(ts_aabb_tree_validate(tree, (const double(*)[3])t->x, err, sizeof err) == 0,
                  "step %d: %s", k, err);
  }
  fprintf(stderr, "test_defer_ms_step: %d steps, %.1f contacts a step, %llu escaped at the "
          "checks\n", MS_STEPS, (double)touching / MS_STEPS, (unsigned long long)pushed);
  ck_assert_uint_gt(touching, MS_STEPS); /* the tools pressed */
  ts_obb_tree_destroy(itree);
  ts_mesh_free(m);
  ts_tissue_destroy(t);
}
END_TEST

/* The node projection's moves are noted: a 5 mm sphere put down 2 mm into
 * patch-S at once (no triangle pass: thin_off) moves the nodes under it by
 * up to 2 mm within one contact call, ten times the margin (asserted: over five), after the
 * surface tree was refitted and armed; refitted for what was noted, the
 * tree must be valid. */
START_TEST(test_defer_ms_projection) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  uint32_t top = 0, ns = t->nodes_per_sheet ? t->nodes_per_sheet : t->n_nodes;
  for (uint32_t i = 1; i < ns; i++)
    if (t->rest[i][1] > t->rest[top][1]) top = i;
  char err[256] = "";
  uint64_t moved = 0;
  for (int k = 0; k < 20; k++) {
    ts_tissue_reset(t);
    ts__ms_clear_contacts(t->ms); /* disarmed: the first use refits fully, then arms */
    ts_aabb_tree *tree = ts__ms_surface_tree(t, t->ms);
    ck_assert_ptr_nonnull(tree);
    ck_assert(ts_aabb_tree_defer_armed(tree));
    ts_tool tl;
    memset(&tl, 0, sizeof tl);
    tl.kind = TS_TOOL_SPHERE;
    tl.active = 1;
    tl.radius = 0.005;
    tl.quat[0] = 1;
    tl.thin_off = 1;
    memcpy(tl.pos, t->rest[top], sizeof tl.pos);
    tl.pos[0] += 0.002 * (k % 5), tl.pos[2] += 0.002 * (k / 5);
    tl.pos[1] += tl.radius - 0.002; /* 2 mm deep */
    ts__ptool p;
    ts__ms_prepare_tool(&p, &tl);
    p.index = 0;
    ts__ms_contact(t, t->ms, &p, 0);
    ck_assert_uint_gt(t->ms->n_clist, 0); /* it pushed nodes out */
    double far = 0;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      double dd = dist3(t->x[i], t->rest[i]);
      if (dd > far) far = dd;
    }
    ck_assert_double_gt(far, 5 * tree->def.margin); /* a move far beyond the margin */
    tree = ts__ms_surface_tree(t, t->ms);
    moved += tree->stats.escaped;
    ck_assert_msg(ts_aabb_tree_validate(tree, (const double(*)[3])t->x, err, sizeof err) == 0,
                  "placement %d: %s", k, err);
  }
  fprintf(stderr, "test_defer_ms_projection: 20 placements, %.1f escaped per placement\n",
          moved / 20.0);
  ts_tissue_destroy(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("collide_defer");
  TCase *tc = tcase_create("defer");
  tcase_set_timeout(tc, 600); /* wall time: a loaded machine */
  tcase_add_test(tc, test_defer_refit);
  tcase_add_test(tc, test_defer_ms_step);
  tcase_add_test(tc, test_defer_ms_projection);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
