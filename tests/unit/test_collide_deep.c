/*
 * test_collide_deep.c: the pair walks of ts_collide.c (tool x tissue,
 * tool x tool, tissue x tissue, one tissue against itself) on hand-made
 * trees deeper than the walks' fixed 512-entry stacks, which no builder
 * makes, against brute forces over every pair of features.
 *
 * The trees are chains (each level one leaf and the rest), so a walk that
 * reaches the deepest leaves leaves a sibling pending at every level. The
 * geometry: sheet A, triangle k in the plane y = 0 at x from 10 um k;
 * sheet B, triangle k in the plane z = 2 um across A's triangle k (each
 * B triangle crosses its A triangle and no other), so every pair of sheets
 * meets in exactly one pair per index. Contacts must be the brute force's
 * (same pairs, and point, normal and depth equal to 1e-15 m: both sides
 * call the same exact test on the same doubles, so they agree bit for bit
 * but for the order the pairs come in).
 *
 * On the code before this test, every walk here stopped when its stack
 * filled and returned TS_EINTERNAL with no contacts; the return codes and
 * counts then fail.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_error.h"
#include "ts_obb_tree.h"
#include "ts_tritri.h"

#define H 1e-5   /* m: a triangle's legs */
#define ZB 2e-6  /* m: sheet B's plane */
#define TOL 1e-15

/* n triangles of sheet A (b = 0) or B (b = 1), 3 points each, into x from
 * point 3 * first */
static void sheet(double (*x)[3], uint32_t (*t)[3], uint32_t first, uint32_t n, int b) {
  for (uint32_t k = 0; k < n; k++) {
    const double x0 = 1.5 * H * k; /* 5 um gaps: no two triangles of a sheet touch */
    const double pa[3][3] = {{x0, 0, 0}, {x0 + H, 0, 0}, {x0, 0, H}};
    const double pb[3][3] = {{x0, -H / 2, ZB}, {x0 + H, -H / 2, ZB}, {x0, H / 2, ZB}};
    const uint32_t i = first + k;
    memcpy(x[3 * i], b ? pb : pa, sizeof pa);
    t[i][0] = 3 * i, t[i][1] = 3 * i + 1, t[i][2] = 3 * i + 2;
  }
}

static void tri_box(const double (*x)[3], const uint32_t t[3], double g, double lo[3],
                    double hi[3]) {
  for (int k = 0; k < 3; k++) {
    lo[k] = fmin(x[t[0]][k], fmin(x[t[1]][k], x[t[2]][k])) - g;
    hi[k] = fmax(x[t[0]][k], fmax(x[t[1]][k], x[t[2]][k])) + g;
  }
}

/* Node index of chain link j's leaf (j < n - 1: 2j + 1; the last: 2j) and of
 * its internal node (2j), n levels. */
static int32_t leaf_of(uint32_t j, uint32_t n) { return (int32_t)(j + 1 < n ? 2 * j + 1 : 2 * j); }

/* A tissue tree over n triangles (x, t: the caller's) as a chain. */
static void tissue_chain(ts_aabb_tree *c, const double (*x)[3], uint32_t (*t)[3], uint32_t n,
                         uint32_t n_points) {
  memset(c, 0, sizeof *c);
  c->tris = t;
  c->nodes = calloc(2 * n - 1, sizeof *c->nodes);
  c->leaf = malloc(sizeof *c->leaf * n);
  ck_assert(c->nodes && c->leaf);
  c->n_points = n_points;
  c->n_tris = n;
  c->n_nodes = 2 * n - 1;
  c->depth = n;
  for (uint32_t k = 0; k < n; k++) {
    ts_aabb_node *nd = &c->nodes[leaf_of(k, n)];
    nd->child[0] = nd->child[1] = -1;
    nd->tri = (int32_t)k;
    nd->parent = k + 1 < n ? (int32_t)(2 * k) : (int32_t)(2 * k - 2);
    c->leaf[k] = leaf_of(k, n);
    tri_box(x, t[k], 1e-6, nd->lo, nd->hi);
  }
  for (uint32_t j = n - 1; j-- > 0;) {
    ts_aabb_node *nd = &c->nodes[2 * j];
    nd->tri = -1;
    nd->parent = j ? (int32_t)(2 * j - 2) : -1;
    nd->child[0] = (int32_t)(2 * j + 1);
    nd->child[1] = (int32_t)(2 * j + 2);
    const ts_aabb_node *a = &c->nodes[nd->child[0]], *b = &c->nodes[nd->child[1]];
    for (int k = 0; k < 3; k++)
      nd->lo[k] = fmin(a->lo[k], b->lo[k]), nd->hi[k] = fmax(a->hi[k], b->hi[k]);
  }
}

static void tissue_chain_free(ts_aabb_tree *c) {
  free(c->nodes);
  free(c->leaf);
}

/* A mesh tool whose tree is a chain over n triangles (its own copy of x, t),
 * boxes axis-aligned in the tool frame (the rest of the chain first, so the
 * walk leaves a leaf pending at every level). */
static void tool_chain(ts_obb_tree *tool, const double (*x)[3], const uint32_t (*t)[3],
                       uint32_t n) {
  memset(tool, 0, sizeof *tool);
  tool->kind = TS_SHAPE_MESH;
  tool->n_verts = 3 * n;
  tool->n_tris = n;
  tool->v = malloc(sizeof *tool->v * 3 * n);
  tool->t = malloc(sizeof *tool->t * n);
  tool->n_nodes = 2 * n - 1;
  tool->depth = n;
  tool->nodes = calloc(tool->n_nodes, sizeof *tool->nodes);
  ck_assert(tool->v && tool->t && tool->nodes);
  memcpy(tool->v, x, sizeof *tool->v * 3 * n);
  memcpy(tool->t, t, sizeof *tool->t * n);
  const ts_obb I = {.c = {0, 0, 0}, .r = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, .e = {0, 0, 0}};
  for (uint32_t k = 0; k < n; k++) {
    ts_obb_node *nd = &tool->nodes[leaf_of(k, n)];
    double lo[3], hi[3];
    tri_box(x, t[k], 1e-9, lo, hi);
    nd->box = I;
    for (int a = 0; a < 3; a++) nd->box.c[a] = 0.5 * (lo[a] + hi[a]), nd->box.e[a] = 0.5 * (hi[a] - lo[a]);
    nd->child[0] = nd->child[1] = -1;
    nd->feature = (int32_t)k;
    nd->count = 1;
  }
  for (uint32_t j = n - 1; j-- > 0;) {
    ts_obb_node *nd = &tool->nodes[2 * j];
    nd->feature = -1;
    nd->child[0] = (int32_t)(2 * j + 2);
    nd->child[1] = (int32_t)(2 * j + 1);
    nd->count = n - j;
    const ts_obb *a = &tool->nodes[nd->child[0]].box, *b = &tool->nodes[nd->child[1]].box;
    nd->box = I;
    for (int k = 0; k < 3; k++) {
      const double lo = fmin(a->c[k] - a->e[k], b->c[k] - b->e[k]);
      const double hi = fmax(a->c[k] + a->e[k], b->c[k] + b->e[k]);
      nd->box.c[k] = 0.5 * (lo + hi);
      nd->box.e[k] = 0.5 * (hi - lo);
    }
  }
}

static void tool_chain_free(ts_obb_tree *tool) {
  free(tool->v);
  free(tool->t);
  free(tool->nodes);
}

static int cmp_contact(const void *p, const void *q) {
  const ts_contact *a = p, *b = q;
  if (a->a != b->a) return a->a < b->a ? -1 : 1;
  return a->b < b->b ? -1 : a->b > b->b;
}

/* got and ref hold the same contacts (sorted here by pair) */
static void same_contacts(ts_contacts *got, ts_contacts *ref, const char *what) {
  ck_assert_msg(got->n == ref->n, "%s: %u contacts, brute force %u", what, got->n, ref->n);
  qsort(got->c, got->n, sizeof *got->c, cmp_contact);
  qsort(ref->c, ref->n, sizeof *ref->c, cmp_contact);
  for (uint32_t i = 0; i < got->n; i++) {
    const ts_contact *g = &got->c[i], *r = &ref->c[i];
    ck_assert_msg(g->a == r->a && g->b == r->b, "%s: pair %u (%u, %u), brute force (%u, %u)",
                  what, i, g->a, g->b, r->a, r->b);
    for (int k = 0; k < 3; k++) {
      ck_assert_double_eq_tol(g->point[k], r->point[k], TOL);
      ck_assert_double_eq_tol(g->normal[k], r->normal[k], TOL);
    }
    ck_assert_double_eq_tol(g->depth, r->depth, TOL);
  }
}

static void push(ts_contacts *buf, uint32_t a, uint32_t b, const ts_hit *h) {
  ck_assert_uint_lt(buf->n, buf->cap);
  ts_contact *c = &buf->c[buf->n++];
  c->a = a, c->b = b;
  memcpy(c->point, h->point, sizeof c->point);
  memcpy(c->normal, h->normal, sizeof c->normal);
  c->depth = h->depth;
  c->toi = 1;
  buf->total = buf->n;
}

/* every pair (i of xa/ta, j of xb/tb) that ts_contact_face_triangle finds;
 * self: i < j only, pairs that share a point left out */
static void brute_pairs(const double (*xa)[3], const uint32_t (*ta)[3], uint32_t na,
                        const double (*xb)[3], const uint32_t (*tb)[3], uint32_t nb, int self,
                        ts_contacts *out) {
  out->n = out->total = 0;
  for (uint32_t i = 0; i < na; i++) {
    double alo[3], ahi[3], A[3][3];
    tri_box(xa, ta[i], 1e-9, alo, ahi);
    for (int c = 0; c < 3; c++) memcpy(A[c], xa[ta[i][c]], sizeof A[c]);
    for (uint32_t j = self ? i + 1 : 0; j < nb; j++) {
      double blo[3], bhi[3], B[3][3];
      tri_box(xb, tb[j], 1e-9, blo, bhi);
      if (alo[0] > bhi[0] || blo[0] > ahi[0] || alo[1] > bhi[1] || blo[1] > ahi[1] ||
          alo[2] > bhi[2] || blo[2] > ahi[2])
        continue; /* triangles that meet have overlapping boxes */
      if (self) {
        int share = 0;
        for (int p = 0; p < 3; p++)
          for (int q = 0; q < 3; q++) share |= ta[i][p] == tb[j][q];
        if (share) continue;
      }
      for (int c = 0; c < 3; c++) memcpy(B[c], xb[tb[j][c]], sizeof B[c]);
      ts_hit h;
      if (ts_contact_face_triangle((const double(*)[3])A, (const double(*)[3])B, &h))
        push(out, i, j, &h);
    }
  }
}

typedef struct two_sheets {
  double (*x)[3];
  uint32_t (*t)[3];
  uint32_t n; /* per sheet: A is 0..n-1, B is n..2n-1 */
} two_sheets;

static void two_sheets_make(two_sheets *s, uint32_t n) {
  s->n = n;
  s->x = malloc(sizeof *s->x * 6 * n);
  s->t = malloc(sizeof *s->t * 2 * n);
  ck_assert(s->x && s->t);
  sheet(s->x, s->t, 0, n, 0);
  sheet(s->x, s->t, n, n, 1);
}

/* sheet B alone, indexed from 0 */
static void sheet_b(const two_sheets *s, double (**x)[3], uint32_t (**t)[3]) {
  *x = malloc(sizeof **x * 3 * s->n);
  *t = malloc(sizeof **t * s->n);
  ck_assert(*x && *t);
  sheet(*x, *t, 0, s->n, 1);
}

START_TEST(test_deep_tool_tissue) {
  const uint32_t n = 1200; /* both chains: 1200 levels each */
  two_sheets s;
  two_sheets_make(&s, n);
  ts_aabb_tree tis;
  tissue_chain(&tis, (const double(*)[3])s.x, s.t, n, 3 * n);
  double(*xb)[3];
  uint32_t(*tb)[3];
  sheet_b(&s, &xb, &tb);
  ts_obb_tree tool;
  tool_chain(&tool, (const double(*)[3])xb, (const uint32_t(*)[3])tb, n);
  ts_posed_tool pt;
  ck_assert_int_eq(ts_posed_tool_init(&pt, &tool), 0);
  ts_contacts got, ref;
  ck_assert_int_eq(ts_contacts_init(&got, 2 * n), 0);
  ck_assert_int_eq(ts_contacts_init(&ref, 2 * n), 0);
  ts_collide_stats st;
  ck_assert_int_eq(ts_collide_tool_tissue(&pt, &tis, (const double(*)[3])s.x, &got, &st), 0);
  ck_assert_int_eq(ts_collide_tool_tissue_brute(&pt, &tis, (const double(*)[3])s.x, &ref), 0);
  ck_assert_uint_eq(ref.n, n); /* tool triangle k crosses tissue triangle k, no other */
  same_contacts(&got, &ref, "tool chain x tissue chain");
  fprintf(stderr, "test_collide_deep: tool x tissue, chains of %u levels: %u contacts (%llu box "
          "tests), as the brute force\n", n, got.n, (unsigned long long)st.box_tests);
  /* the depth field understated: the walk stops with TS_EINTERNAL rather
   * than running past its stack */
  tis.depth = 10, tool.depth = 10;
  ck_assert_int_eq(ts_collide_tool_tissue(&pt, &tis, (const double(*)[3])s.x, &got, NULL),
                   TS_EINTERNAL);
  ts_contacts_free(&got);
  ts_contacts_free(&ref);
  ts_posed_tool_free(&pt);
  tool_chain_free(&tool);
  tissue_chain_free(&tis);
  free(xb);
  free(tb);
  free(s.x);
  free(s.t);
}
END_TEST

START_TEST(test_deep_tool_tool) {
  const uint32_t n = 1000;
  two_sheets s;
  two_sheets_make(&s, n);
  double(*xb)[3];
  uint32_t(*tb)[3];
  sheet_b(&s, &xb, &tb);
  ts_obb_tree ta, tbt;
  tool_chain(&ta, (const double(*)[3])s.x, (const uint32_t(*)[3])s.t, n); /* sheet A */
  tool_chain(&tbt, (const double(*)[3])xb, (const uint32_t(*)[3])tb, n);
  ts_posed_tool pa, pb;
  ck_assert_int_eq(ts_posed_tool_init(&pa, &ta), 0);
  ck_assert_int_eq(ts_posed_tool_init(&pb, &tbt), 0);
  ts_contacts got, ref;
  ck_assert_int_eq(ts_contacts_init(&got, 2 * n), 0);
  ck_assert_int_eq(ts_contacts_init(&ref, 2 * n), 0);
  ck_assert_int_eq(ts_collide_tool_tool(&pa, &pb, &got, NULL), 0);
  /* mesh x mesh: a's triangle as the face against b's (feature_feature) */
  brute_pairs((const double(*)[3])s.x, (const uint32_t(*)[3])s.t, n, (const double(*)[3])xb,
              (const uint32_t(*)[3])tb, n, 0, &ref);
  ck_assert_uint_eq(ref.n, n);
  same_contacts(&got, &ref, "tool chain x tool chain");
  fprintf(stderr, "test_collide_deep: tool x tool, chains of %u levels: %u contacts, as the "
          "brute force\n", n, got.n);
  ts_contacts_free(&got);
  ts_contacts_free(&ref);
  ts_posed_tool_free(&pa);
  ts_posed_tool_free(&pb);
  tool_chain_free(&ta);
  tool_chain_free(&tbt);
  free(xb);
  free(tb);
  free(s.x);
  free(s.t);
}
END_TEST

START_TEST(test_deep_tissue_tissue) {
  const uint32_t n = 1000;
  two_sheets s;
  two_sheets_make(&s, n);
  double(*xb)[3];
  uint32_t(*tb)[3];
  sheet_b(&s, &xb, &tb);
  ts_aabb_tree A, B;
  tissue_chain(&A, (const double(*)[3])s.x, s.t, n, 3 * n);
  tissue_chain(&B, (const double(*)[3])xb, tb, n, 3 * n);
  ts_contacts got, ref;
  ck_assert_int_eq(ts_contacts_init(&got, 4 * n), 0);
  ck_assert_int_eq(ts_contacts_init(&ref, 4 * n), 0);
  ck_assert_int_eq(ts_collide_tissue_tissue(&A, (const double(*)[3])s.x, &B,
                                            (const double(*)[3])xb, &got, NULL),
                   0);
  brute_pairs((const double(*)[3])s.x, (const uint32_t(*)[3])s.t, n, (const double(*)[3])xb,
              (const uint32_t(*)[3])tb, n, 0, &ref);
  ck_assert_uint_eq(ref.n, n);
  same_contacts(&got, &ref, "tissue chain x tissue chain");
  tissue_chain_free(&A);
  tissue_chain_free(&B);

  /* both sheets in one tissue, one chain of 2n levels, against itself */
  ts_aabb_tree S;
  tissue_chain(&S, (const double(*)[3])s.x, s.t, 2 * n, 6 * n);
  ck_assert_int_eq(ts_collide_tissue_self(&S, (const double(*)[3])s.x, NULL, NULL, &got, NULL), 0);
  brute_pairs((const double(*)[3])s.x, (const uint32_t(*)[3])s.t, 2 * n, (const double(*)[3])s.x,
              (const uint32_t(*)[3])s.t, 2 * n, 1, &ref);
  ck_assert_uint_eq(ref.n, n); /* (k, n + k) */
  same_contacts(&got, &ref, "chain of both sheets against itself");
  fprintf(stderr, "test_collide_deep: tissue x tissue (%u levels) and self (%u levels): %u "
          "contacts each, as the brute force\n", n, 2 * n, got.n);
  tissue_chain_free(&S);
  ts_contacts_free(&got);
  ts_contacts_free(&ref);
  free(xb);
  free(tb);
  free(s.x);
  free(s.t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("collide_deep");
  TCase *tc = tcase_create("deep");
  tcase_add_test(tc, test_deep_tool_tissue);
  tcase_add_test(tc, test_deep_tool_tool);
  tcase_add_test(tc, test_deep_tissue_tissue);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
