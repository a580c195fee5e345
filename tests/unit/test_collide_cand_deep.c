/*
 * test_collide_cand_deep.c: the live contact's candidate descent
 * (ts_collide_tissue_tris*, server/core/ts_collide_cand.c) on deep trees,
 * against a brute force of the same criterion: a triangle is a candidate
 * when some leaf box of the tool (grown by the margin) meets the
 * triangle's box (its bounds, grown by 1e-7 m) by its bounds and by the 15
 * axes. Counts and sets must be equal: both sides apply the same tests to
 * the same doubles, so no tolerance.
 *
 *   - a long thin strip of 40000 triangles (80 m by 1 mm; the builder's
 *     worst shape for a tree of boxes) under the dental instrument lying
 *     along it, at several places: the builders' median splits keep the
 *     tissue tree at 17 levels, and the descent equals the brute force;
 *   - hand-made trees deeper than the walks' fixed 512-entry stacks, which
 *     no builder makes: a tissue tree that is a chain of 1500 levels (each
 *     level one leaf and the rest), under a box over all of it, over its
 *     deepest 10 triangles, and with its depth field understated (then the
 *     root box's superset stands in); and a tool tree that is a chain of
 *     1000 levels whose deepest leaf alone reaches the tissue. Before, the
 *     walk stopped where its stack filled and returned what it had (0 of the
 *     deepest 10, 0 of the tool's), with no sign; these counts then fail.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_mesh_io.h"
#include "ts_obb_tree.h"
#include "ts_sat.h"

#define SLACK 1e-7 /* m: the descent's triangle box slack (ts_collide_cand.c) */

static void tri_box(const double (*x)[3], const uint32_t t[3], double lo[3], double hi[3]) {
  for (int k = 0; k < 3; k++) {
    lo[k] = fmin(x[t[0]][k], fmin(x[t[1]][k], x[t[2]][k])) - SLACK;
    hi[k] = fmax(x[t[0]][k], fmax(x[t[1]][k], x[t[2]][k])) + SLACK;
  }
}

/* world box of a tree node at (R, o), grown by g, and its bounds' half
 * extents (as ts_collide_cand.c's world_box) */
static void place(const ts_obb *l, const double R[3][3], const double o[3], double g, ts_obb *w,
                  double ext[3]) {
  for (int k = 0; k < 3; k++)
    w->c[k] = R[k][0] * l->c[0] + R[k][1] * l->c[1] + R[k][2] * l->c[2] + o[k];
  for (int a = 0; a < 3; a++)
    for (int k = 0; k < 3; k++)
      w->r[a][k] = R[k][0] * l->r[a][0] + R[k][1] * l->r[a][1] + R[k][2] * l->r[a][2];
  memcpy(w->e, l->e, sizeof w->e);
  for (int k = 0; k < 3; k++)
    ext[k] = w->e[0] * fabs(w->r[0][k]) + w->e[1] * fabs(w->r[1][k]) + w->e[2] * fabs(w->r[2][k]);
  if (g > 0)
    for (int k = 0; k < 3; k++) {
      ext[k] += g * (fabs(w->r[0][k]) + fabs(w->r[1][k]) + fabs(w->r[2][k]));
      w->e[k] += g;
    }
}

static int bounds_meet(const ts_obb *w, const double ext[3], const double lo[3],
                       const double hi[3]) {
  for (int k = 0; k < 3; k++)
    if (w->c[k] - ext[k] > hi[k] || w->c[k] + ext[k] < lo[k]) return 0;
  return 1;
}

/* The brute force: every triangle against every tool leaf (the leaves
 * placed once). Writes the candidates in ascending order; returns their
 * count. */
static uint32_t brute(const ts_obb_tree *tool, const double R[3][3], const double o[3],
                      uint32_t n_tris, const uint32_t (*tris)[3], const double (*x)[3], double g,
                      uint32_t *out) {
  ts_obb *w = malloc(sizeof *w * tool->n_nodes);
  double(*ext)[3] = malloc(sizeof *ext * tool->n_nodes);
  uint32_t *leaf = malloc(sizeof *leaf * tool->n_nodes), n_leaves = 0;
  ck_assert(w && ext && leaf);
  for (uint32_t i = 0; i < tool->n_nodes; i++)
    if (tool->nodes[i].feature >= 0) {
      place(&tool->nodes[i].box, R, o, g, &w[n_leaves], ext[n_leaves]);
      leaf[n_leaves++] = i;
    }
  uint32_t n = 0;
  for (uint32_t k = 0; k < n_tris; k++) {
    double lo[3], hi[3];
    tri_box(x, tris[k], lo, hi);
    for (uint32_t i = 0; i < n_leaves; i++)
      if (bounds_meet(&w[i], ext[i], lo, hi) && ts_sat_obb_aabb(&w[i], lo, hi, TS_SAT_EPS)) {
        out[n++] = k;
        break;
      }
  }
  free(w);
  free(ext);
  free(leaf);
  return n;
}

static void same_set(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb,
                     const char *what) {
  ck_assert_msg(na == nb, "%s: descent %u candidates, brute force %u", what, na, nb);
  for (uint32_t i = 0; i < na; i++)
    ck_assert_msg(a[i] == b[i], "%s: candidate %u: %u against %u", what, i, a[i], b[i]);
}

/* rotation about z by angle th (tool frame to world) */
static void rot_z(double th, double R[3][3]) {
  const double c = cos(th), s = sin(th);
  const double M[3][3] = {{c, -s, 0}, {s, c, 0}, {0, 0, 1}};
  memcpy(R, M, sizeof M);
}

START_TEST(test_long_strip) {
  /* 20000 rectangles of 4 x 1 mm along x, two triangles each: 80 m long,
   * 1 mm wide, in the plane y = 0 */
  const uint32_t squares = 20000, n_pts = 2 * (squares + 1), n_tris = 2 * squares;
  double(*x)[3] = malloc(sizeof *x * n_pts);
  uint32_t(*tris)[3] = malloc(sizeof *tris * n_tris);
  ck_assert(x && tris);
  for (uint32_t i = 0; i <= squares; i++) {
    x[2 * i][0] = x[2 * i + 1][0] = 0.004 * i;
    x[2 * i][1] = x[2 * i + 1][1] = 0;
    x[2 * i][2] = 0;
    x[2 * i + 1][2] = 0.001;
  }
  for (uint32_t i = 0; i < squares; i++) {
    const uint32_t a = 2 * i, b = 2 * i + 1, c = 2 * i + 2, d = 2 * i + 3;
    tris[2 * i][0] = a, tris[2 * i][1] = c, tris[2 * i][2] = b;
    tris[2 * i + 1][0] = b, tris[2 * i + 1][1] = c, tris[2 * i + 1][2] = d;
  }
  ts_aabb_tree *tis;
  ck_assert_int_eq(ts_aabb_tree_create(NULL, n_pts, (const double(*)[3])x, n_tris,
                                       (const uint32_t(*)[3])tris, &tis),
                   0);
  /* median splits: ceil(log2 40000) + 1 levels */
  ck_assert_uint_eq(tis->depth, 17);
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
  uint32_t *got = malloc(sizeof *got * n_tris), *ref = malloc(sizeof *ref * n_tris);
  ck_assert(got && ref);
  /* the instrument's frame turned so that its axis (y) lies along the strip
   * (x), at places along it and heights across its surface */
  double R[3][3];
  rot_z(-M_PI / 2, R);
  uint32_t total = 0;
  const double along[] = {0.0, 3.3, 41.7, 79.95}, height[] = {-0.002, 0.0, 0.0004};
  const double grow[] = {0, 0.0005};
  for (size_t i = 0; i < sizeof along / sizeof along[0]; i++)
    for (size_t j = 0; j < sizeof height / sizeof height[0]; j++)
      for (size_t k = 0; k < 2; k++) {
        const double o[3] = {along[i], height[j], 0.0005};
        ts_collide_stats st;
        uint32_t n = ts_collide_tissue_tris_frame(tool, R, o, tis, (const double(*)[3])x,
                                                  grow[k], got, n_tris, &st);
        uint32_t nb = brute(tool, R, o, n_tris, (const uint32_t(*)[3])tris,
                            (const double(*)[3])x, grow[k], ref);
        char what[96];
        snprintf(what, sizeof what, "strip at %g m, height %g m, grow %g m", along[i],
                 height[j], grow[k]);
        same_set(got, n, ref, nb, what);
        total += n;
      }
  fprintf(stderr, "test_collide_cand_deep: strip of %u triangles, tree %u levels: %u candidates "
          "over 24 poses, as the brute force\n", n_tris, tis->depth, total);
  ck_assert_uint_ge(total, 24); /* the poses reach the strip */
  free(got);
  free(ref);
  ts_obb_tree_destroy(tool);
  ts_mesh_free(m);
  ts_aabb_tree_destroy(tis);
  free(x);
  free(tris);
}
END_TEST

/* A tissue tree made by hand as a chain: internal node j (index 2j) has
 * triangle j's leaf (2j + 1) and the rest of the chain (2j + 2); the last
 * leaf is at 2(n - 1). n levels. */
typedef struct chain {
  ts_aabb_tree t;
  double (*x)[3];
} chain;

static void chain_make(chain *c, uint32_t n) {
  memset(c, 0, sizeof *c);
  c->x = malloc(sizeof *c->x * 3 * n);
  c->t.tris = malloc(sizeof *c->t.tris * n);
  c->t.nodes = calloc(2 * n - 1, sizeof *c->t.nodes);
  c->t.leaf = malloc(sizeof *c->t.leaf * n);
  ck_assert(c->x && c->t.tris && c->t.nodes && c->t.leaf);
  c->t.n_points = 3 * n;
  c->t.n_tris = n;
  c->t.n_nodes = 2 * n - 1;
  c->t.depth = n;
  /* triangle k: 10 um along x from the last, in the plane y = 0 */
  for (uint32_t k = 0; k < n; k++) {
    const double x0 = 1e-5 * k;
    const double p[3][3] = {{x0, 0, 0}, {x0 + 1e-5, 0, 0}, {x0, 0, 1e-5}};
    memcpy(c->x[3 * k], p, sizeof p);
    c->t.tris[k][0] = 3 * k, c->t.tris[k][1] = 3 * k + 1, c->t.tris[k][2] = 3 * k + 2;
  }
  for (uint32_t k = 0; k < n; k++) {
    const int32_t leaf = k + 1 < n ? (int32_t)(2 * k + 1) : (int32_t)(2 * k);
    ts_aabb_node *nd = &c->t.nodes[leaf];
    nd->child[0] = nd->child[1] = -1;
    nd->tri = (int32_t)k;
    nd->parent = k + 1 < n ? (int32_t)(2 * k) : (int32_t)(2 * k - 2);
    c->t.leaf[k] = leaf;
    double lo[3], hi[3];
    tri_box((const double(*)[3])c->x, c->t.tris[k], lo, hi);
    for (int a = 0; a < 3; a++) nd->lo[a] = lo[a] - 1e-6, nd->hi[a] = hi[a] + 1e-6;
  }
  /* internal nodes from the deepest up: the union of their children */
  for (uint32_t j = n - 1; j-- > 0;) {
    ts_aabb_node *nd = &c->t.nodes[2 * j];
    nd->tri = -1;
    nd->parent = j ? (int32_t)(2 * j - 2) : -1;
    nd->child[0] = (int32_t)(2 * j + 1);
    nd->child[1] = (int32_t)(2 * j + 2);
    const ts_aabb_node *a = &c->t.nodes[nd->child[0]], *b = &c->t.nodes[nd->child[1]];
    for (int k = 0; k < 3; k++) nd->lo[k] = fmin(a->lo[k], b->lo[k]), nd->hi[k] = fmax(a->hi[k], b->hi[k]);
  }
}

static void chain_free(chain *c) {
  free(c->x);
  free(c->t.tris);
  free(c->t.nodes);
  free(c->t.leaf);
}

/* the triangles whose boxes meet a world box's bounds, ascending */
static uint32_t brute_box(const chain *c, const ts_obb *b, uint32_t *out) {
  double ext[3];
  for (int k = 0; k < 3; k++)
    ext[k] = b->e[0] * fabs(b->r[0][k]) + b->e[1] * fabs(b->r[1][k]) + b->e[2] * fabs(b->r[2][k]);
  uint32_t n = 0;
  for (uint32_t k = 0; k < c->t.n_tris; k++) {
    double lo[3], hi[3];
    tri_box((const double(*)[3])c->x, c->t.tris[k], lo, hi);
    if (bounds_meet(b, ext, lo, hi)) out[n++] = k;
  }
  return n;
}

START_TEST(test_deep_tissue_chain) {
  const uint32_t n = 1500;
  chain c;
  chain_make(&c, n);
  uint32_t *got = malloc(sizeof *got * n), *ref = malloc(sizeof *ref * n);
  ck_assert(got && ref);
  /* a box over all of it, then one over the deepest 10 triangles only
   * (x from 14.905 mm: triangle 1490 spans 14.90-14.91 mm, 1489 ends at
   * 14.90) */
  const ts_obb all = {.c = {0.0075, 0, 0}, .r = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, .e = {0.01, 0.001, 0.001}};
  const ts_obb deep = {.c = {0.0150025, 0, 0}, .r = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, .e = {0.0000975, 0.001, 0.001}};
  uint32_t na = ts_collide_tissue_tris_box(&all, &c.t, (const double(*)[3])c.x, 0, got, n, NULL);
  same_set(got, na, ref, brute_box(&c, &all, ref), "chain of 1500, box over all");
  ck_assert_uint_eq(na, n);
  uint32_t nd = ts_collide_tissue_tris_box(&deep, &c.t, (const double(*)[3])c.x, 0, got, n, NULL);
  same_set(got, nd, ref, brute_box(&c, &deep, ref), "chain of 1500, box over the deepest");
  ck_assert_uint_eq(nd, 10); /* triangles 1490..1499 */
  ck_assert_uint_eq(got[0], 1490);
  /* the depth field understated: the walk's stack fills, and the root
   * box's superset (here the same set: the tool is that one box) stands in
   * rather than a walk cut short */
  c.t.depth = 20;
  nd = ts_collide_tissue_tris_box(&deep, &c.t, (const double(*)[3])c.x, 0, got, n, NULL);
  same_set(got, nd, ref, brute_box(&c, &deep, ref), "chain of 1500, depth understated");
  fprintf(stderr, "test_collide_cand_deep: tissue chain of %u levels: %u and %u candidates, as "
          "the brute force\n", n, na, nd);
  free(got);
  free(ref);
  chain_free(&c);
}
END_TEST

START_TEST(test_deep_tool_chain) {
  /* a tool tree as a chain of m levels: internal node j (index 2j) has the
   * rest of the chain (2j + 2) first and leaf j (2j + 1) second, so the
   * walk leaves a leaf pending at every level; leaf j is a 1 mm cube at
   * y = 10 mm + j mm, out of reach of the tissue, but the deepest, at the
   * origin */
  const uint32_t m = 1000;
  ts_obb_tree tool;
  memset(&tool, 0, sizeof tool);
  tool.kind = TS_SHAPE_MESH;
  tool.n_nodes = 2 * m - 1;
  tool.depth = m;
  tool.nodes = calloc(tool.n_nodes, sizeof *tool.nodes);
  ck_assert_ptr_nonnull(tool.nodes);
  const ts_obb unit = {.c = {0, 0, 0}, .r = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, .e = {5e-4, 5e-4, 5e-4}};
  for (uint32_t k = 0; k < m; k++) {
    const uint32_t idx = k + 1 < m ? 2 * k + 1 : 2 * k;
    ts_obb_node *nd = &tool.nodes[idx];
    nd->box = unit;
    nd->box.c[1] = k + 1 < m ? 0.01 + 0.001 * k : 0;
    nd->child[0] = nd->child[1] = -1;
    nd->feature = (int32_t)k;
    nd->count = 1;
  }
  for (uint32_t j = m - 1; j-- > 0;) {
    ts_obb_node *nd = &tool.nodes[2 * j];
    nd->feature = -1;
    nd->child[0] = (int32_t)(2 * j + 2);
    nd->child[1] = (int32_t)(2 * j + 1);
    nd->count = m - j;
    /* the axis-aligned union of its two children */
    const ts_obb *a = &tool.nodes[nd->child[0]].box, *b = &tool.nodes[nd->child[1]].box;
    nd->box = unit;
    for (int k = 0; k < 3; k++) {
      const double lo = fmin(a->c[k] - a->e[k], b->c[k] - b->e[k]);
      const double hi = fmax(a->c[k] + a->e[k], b->c[k] + b->e[k]);
      nd->box.c[k] = 0.5 * (lo + hi);
      nd->box.e[k] = 0.5 * (hi - lo);
    }
  }
  /* the tissue: two triangles at the origin, by the builder */
  const double x[4][3] = {{-2e-4, 0, -2e-4}, {2e-4, 0, -2e-4}, {-2e-4, 0, 2e-4}, {2e-4, 0, 2e-4}};
  const uint32_t tris[2][3] = {{0, 1, 2}, {1, 3, 2}};
  ts_aabb_tree *tis;
  ck_assert_int_eq(ts_aabb_tree_create(NULL, 4, x, 2, tris, &tis), 0);
  const double I[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, o[3] = {0, 0, 0};
  uint32_t got[2], ref[2];
  ts_collide_stats st;
  uint32_t n = ts_collide_tissue_tris_frame(&tool, I, o, tis, x, 0, got, 2, &st);
  uint32_t nb = brute(&tool, I, o, 2, tris, x, 0, ref);
  same_set(got, n, ref, nb, "tool chain of 1000");
  ck_assert_uint_eq(n, 2);
  fprintf(stderr, "test_collide_cand_deep: tool chain of %u levels: %u candidates (%llu box "
          "tests), as the brute force\n", m, n, (unsigned long long)st.box_tests);
  ts_aabb_tree_destroy(tis);
  free(tool.nodes);
}
END_TEST

int main(void) {
  Suite *s = suite_create("collide_cand_deep");
  TCase *tc = tcase_create("deep");
  tcase_add_test(tc, test_long_strip);
  tcase_add_test(tc, test_deep_tissue_chain);
  tcase_add_test(tc, test_deep_tool_chain);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
