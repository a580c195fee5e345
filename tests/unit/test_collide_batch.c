/*
 * test_collide_batch.c: the candidate walks that descend the tool's tree
 * once for a batch of tissue boxes (ts_collide_tissue_tris_wide and
 * ts_collide_tissue_tris_among, batch_hits in server/core/ts_collide_cand.c)
 * against the walk that descends it once per tissue leaf
 * (ts_collide_tissue_tris with no positions: the fat leaf boxes). The same
 * tests on the same doubles, so the same triangles in the same order, no
 * tolerance:
 *
 *   - the dental instrument lying on and pressed into a grid of 28800
 *     triangles at several poses and growths, several hundred leaves in
 *     the root box's reach (more than two batches of 128, so the batches'
 *     seams are crossed) of which the tool's leaves take only some: the
 *     wide walk with no tissue growth equals the walk, and the superset of
 *     a wide walk with tissue growth, filtered (_among), equals it too;
 *   - a tool tree made by hand as a chain of 60 levels whose deepest leaf
 *     alone reaches 400 tissue triangles: the batch's lists (16 levels of
 *     128) overflow and the boxes are descended one at a time; a chain of
 *     1000 levels (deeper than the walk's fixed stacks: wide only, _among
 *     declines it with TS_ERANGE) too.
 *
 * Checked against breakage: with batch_hits' leaves taken without the 15
 * axes, the grid's candidates differ from the walk's; with the one-at-a-time
 * descent after an overflow left out (no box a candidate), the chains'
 * counts fail; with the last, partial batch of the walk not emitted, the
 * grid's counts differ.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_error.h"
#include "ts_mesh_io.h"
#include "ts_obb_tree.h"

static void same_list(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb,
                      const char *what) {
  ck_assert_msg(na == nb, "%s: %u candidates, the walk %u", what, na, nb);
  for (uint32_t i = 0; i < na; i++)
    ck_assert_msg(a[i] == b[i], "%s: candidate %u: %u, the walk %u", what, i, a[i], b[i]);
}

/* The walk, the wide walk without tissue growth and the filtered superset
 * of one with tissue growth tg, for the tool at its pose grown by g; returns
 * the walk's count. */
static uint32_t check_pose(ts_posed_tool *pt, const ts_aabb_tree *tis, double g, double tg,
                           uint32_t *ref, uint32_t *got, uint32_t *sup, const char *what) {
  const uint32_t cap = tis->n_tris;
  const uint32_t nr = ts_collide_tissue_tris(pt, tis, NULL, g, ref, cap, NULL);
  const uint32_t nw = ts_collide_tissue_tris_wide(pt, tis, g, 0, got, cap);
  char w[160];
  snprintf(w, sizeof w, "%s, wide", what);
  same_list(got, nw, ref, nr, w);
  const uint32_t ns = ts_collide_tissue_tris_wide(pt, tis, g, tg, sup, cap);
  ck_assert_uint_le(ns, cap);
  ck_assert_uint_ge(ns, nr);
  uint32_t na = 0;
  ck_assert_int_eq(ts_collide_tissue_tris_among(pt, tis, sup, ns, g, got, cap, &na), 0);
  snprintf(w, sizeof w, "%s, among %u", what, ns);
  same_list(got, na, ref, nr, w);
  return nr;
}

START_TEST(test_grid) {
  /* 120 x 120 squares of 0.25 mm, two triangles each, in the plane y = 0 */
  const uint32_t q = 120, n_pts = (q + 1) * (q + 1), n_tris = 2 * q * q;
  const double h = 2.5e-4;
  double(*x)[3] = malloc(sizeof *x * n_pts);
  uint32_t(*tris)[3] = malloc(sizeof *tris * n_tris);
  uint32_t *ref = malloc(sizeof *ref * n_tris), *got = malloc(sizeof *got * n_tris);
  uint32_t *sup = malloc(sizeof *sup * n_tris);
  ck_assert(x && tris && ref && got && sup);
  for (uint32_t i = 0; i <= q; i++)
    for (uint32_t j = 0; j <= q; j++) {
      double *p = x[i * (q + 1) + j];
      p[0] = h * i, p[1] = 0, p[2] = h * j;
    }
  for (uint32_t i = 0; i < q; i++)
    for (uint32_t j = 0; j < q; j++) {
      const uint32_t a = i * (q + 1) + j, b = a + 1, c = a + q + 1, d = c + 1;
      uint32_t *t = tris[2 * (i * q + j)];
      t[0] = a, t[1] = c, t[2] = b;
      t += 3;
      t[0] = b, t[1] = c, t[2] = d;
    }
  ts_aabb_tree *tis;
  ck_assert_int_eq(ts_aabb_tree_create(NULL, n_pts, (const double(*)[3])x, n_tris,
                                       (const uint32_t(*)[3])tris, &tis),
                   0);
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts io = ts_mesh_import_opts_default();
  io.scale = 0.01;
  ts_mesh *m = NULL;
  ck_assert_msg(ts_mesh_read_file(path, TS_MESH_AUTO, &io, &m, NULL, err, sizeof err) == 0, "%s",
                err);
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *tool;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tool), 0);
  ts_posed_tool pt;
  ck_assert_int_eq(ts_posed_tool_init(&pt, tool), 0);
  /* the instrument's axis (y) turned into the grid's plane, along x and
   * then across it, lying on the grid or pressed 0.3 mm into it, at its
   * middle; the growths of a begin (margin and half the travel) and wider */
  const double turn[] = {0.0, 0.7, 1.9}, depth[] = {0.0, -3e-4}, grow[] = {2e-4, 1e-3};
  uint32_t most = 0, total = 0, poses = 0, rejected = 0;
  for (size_t i = 0; i < sizeof turn / sizeof turn[0]; i++)
    for (size_t j = 0; j < sizeof depth / sizeof depth[0]; j++)
      for (size_t k = 0; k < sizeof grow / sizeof grow[0]; k++) {
        /* y to x by a quarter turn about z, then turned by turn[i] about y */
        const double a = -M_PI / 4, b = 0.5 * turn[i];
        const double qz[4] = {cos(a), 0, 0, sin(a)}, qy[4] = {cos(b), 0, sin(b), 0};
        ts_pose p = {.jaw = 0};
        /* qy * qz */
        p.q[0] = qy[0] * qz[0] - qy[2] * qz[2];
        p.q[1] = qy[0] * qz[1] + qy[2] * qz[3];
        p.q[2] = qy[0] * qz[2] + qy[2] * qz[0];
        p.q[3] = qy[0] * qz[3] - qy[2] * qz[1];
        p.p[0] = 0.5 * q * h, p.p[1] = depth[j], p.p[2] = 0.5 * q * h;
        ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &p), 0);
        char what[96];
        snprintf(what, sizeof what, "turn %g, depth %g m, grow %g m", turn[i], depth[j], grow[k]);
        const uint32_t nr = check_pose(&pt, tis, grow[k], 5e-4, ref, got, sup, what);
        /* the root box's bounds reach more leaves than the tool's leaves */
        const ts_obb *rb;
        const double *ext;
        rb = ts_posed_tool_box_ext(&pt, 0, &ext);
        double lo[3], hi[3];
        for (int c = 0; c < 3; c++) {
          const double e = ext[c] + grow[k] * (fabs(rb->r[0][c]) + fabs(rb->r[1][c]) +
                                               fabs(rb->r[2][c]));
          lo[c] = rb->c[c] - e, hi[c] = rb->c[c] + e;
        }
        const uint32_t nroot = ts_aabb_tree_query_box(tis, lo, hi, got, n_tris);
        rejected += nroot - nr;
        most = nr > most ? nr : most;
        total += nr;
        poses++;
      }
  fprintf(stderr, "test_collide_batch: grid of %u triangles: %u candidates over %u poses (at "
          "most %u), %u of the root box's leaves rejected, as the walk\n", n_tris, total, poses,
          most, rejected);
  ck_assert_uint_gt(most, 2 * 128); /* more than two batches */
  ck_assert_uint_gt(rejected, 0);   /* the tool's tree decides */
  ts_posed_tool_free(&pt);
  ts_obb_tree_destroy(tool);
  ts_mesh_free(m);
  ts_aabb_tree_destroy(tis);
  free(x);
  free(tris);
  free(ref);
  free(got);
  free(sup);
}
END_TEST

/* A tool tree as a chain of m levels (as test_collide_cand_deep's): internal
 * node j (index 2j) has the rest of the chain (2j + 2) first and leaf j
 * (2j + 1) second; leaf j a 1 mm cube at y = 10 mm + j mm, out of reach,
 * but the deepest, at the origin. */
static void tool_chain(ts_obb_tree *tool, uint32_t m) {
  memset(tool, 0, sizeof *tool);
  tool->kind = TS_SHAPE_MESH;
  tool->n_nodes = 2 * m - 1;
  tool->depth = m;
  tool->nodes = calloc(tool->n_nodes, sizeof *tool->nodes);
  ck_assert_ptr_nonnull(tool->nodes);
  const ts_obb unit = {.c = {0, 0, 0}, .r = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, .e = {5e-4, 5e-4, 5e-4}};
  for (uint32_t k = 0; k < m; k++) {
    const uint32_t idx = k + 1 < m ? 2 * k + 1 : 2 * k;
    ts_obb_node *nd = &tool->nodes[idx];
    nd->box = unit;
    nd->box.c[1] = k + 1 < m ? 0.01 + 0.001 * k : 0;
    nd->child[0] = nd->child[1] = -1;
    nd->feature = (int32_t)k;
    nd->count = 1;
  }
  for (uint32_t j = m - 1; j-- > 0;) {
    ts_obb_node *nd = &tool->nodes[2 * j];
    nd->feature = -1;
    nd->child[0] = (int32_t)(2 * j + 2);
    nd->child[1] = (int32_t)(2 * j + 1);
    nd->count = m - j;
    const ts_obb *a = &tool->nodes[nd->child[0]].box, *b = &tool->nodes[nd->child[1]].box;
    nd->box = unit;
    for (int k = 0; k < 3; k++) {
      const double lo = fmin(a->c[k] - a->e[k], b->c[k] - b->e[k]);
      const double hi = fmax(a->c[k] + a->e[k], b->c[k] + b->e[k]);
      nd->box.c[k] = 0.5 * (lo + hi);
      nd->box.e[k] = 0.5 * (hi - lo);
    }
  }
}

START_TEST(test_deep_lists) {
  /* 20 x 10 squares of 40 um at the origin, in y = 0: 400 triangles, all
   * inside the deepest leaf's 1 mm cube */
  const uint32_t qa = 20, qb = 10, n_pts = (qa + 1) * (qb + 1), n_tris = 2 * qa * qb;
  const double h = 4e-5;
  double(*x)[3] = malloc(sizeof *x * n_pts);
  uint32_t(*tris)[3] = malloc(sizeof *tris * n_tris);
  uint32_t *ref = malloc(sizeof *ref * n_tris), *got = malloc(sizeof *got * n_tris);
  uint32_t *sup = malloc(sizeof *sup * n_tris);
  ck_assert(x && tris && ref && got && sup);
  for (uint32_t i = 0; i <= qa; i++)
    for (uint32_t j = 0; j <= qb; j++) {
      double *p = x[i * (qb + 1) + j];
      p[0] = h * i - 4e-4, p[1] = 0, p[2] = h * j - 2e-4;
    }
  for (uint32_t i = 0; i < qa; i++)
    for (uint32_t j = 0; j < qb; j++) {
      const uint32_t a = i * (qb + 1) + j, b = a + 1, c = a + qb + 1, dd = c + 1;
      uint32_t *t = tris[2 * (i * qb + j)];
      t[0] = a, t[1] = c, t[2] = b;
      t += 3;
      t[0] = b, t[1] = c, t[2] = dd;
    }
  ts_aabb_tree *tis;
  ck_assert_int_eq(ts_aabb_tree_create(NULL, n_pts, (const double(*)[3])x, n_tris,
                                       (const uint32_t(*)[3])tris, &tis),
                   0);
  const uint32_t levels[] = {60, 1000};
  for (size_t i = 0; i < 2; i++) {
    ts_obb_tree tool;
    tool_chain(&tool, levels[i]);
    ts_posed_tool pt;
    ck_assert_int_eq(ts_posed_tool_init(&pt, &tool), 0);
    char what[64];
    snprintf(what, sizeof what, "tool chain of %u", levels[i]);
    uint32_t nr;
    if (tool.depth <= 512) {
      nr = check_pose(&pt, tis, 1e-4, 1e-4, ref, got, sup, what);
    } else { /* over the fixed stacks: the wide walk only */
      nr = ts_collide_tissue_tris(&pt, tis, NULL, 1e-4, ref, n_tris, NULL);
      const uint32_t nw = ts_collide_tissue_tris_wide(&pt, tis, 1e-4, 0, got, n_tris);
      same_list(got, nw, ref, nr, what);
      uint32_t na;
      ck_assert_int_eq(ts_collide_tissue_tris_among(&pt, tis, ref, nr, 1e-4, got, n_tris, &na),
                       TS_ERANGE);
    }
    ck_assert_uint_eq(nr, n_tris); /* every triangle, through the deepest leaf */
    fprintf(stderr, "test_collide_batch: %s: %u candidates, as the walk\n", what, nr);
    ts_posed_tool_free(&pt);
    free(tool.nodes);
  }
  ts_aabb_tree_destroy(tis);
  free(x);
  free(tris);
  free(ref);
  free(got);
  free(sup);
}
END_TEST

int main(void) {
  Suite *s = suite_create("collide_batch");
  TCase *tc = tcase_create("batch");
  tcase_add_test(tc, test_grid);
  tcase_add_test(tc, test_deep_lists);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
