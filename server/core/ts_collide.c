/*
 * ts_collide.c: simultaneous descent of two bounding-volume trees with exact
 * leaf tests (Gottschalk, Lin, Manocha 1996, "OBBTree", section 5), for
 * tool x tissue (OBB x AABB), tool x tool (OBB x OBB) and tissue x tissue
 * (AABB x AABB), the substepped sweep, and the brute-force reference. See
 * ts_collide.h.
 *
 * The descent keeps a stack of node pairs; a pair whose boxes overlap is
 * replaced by the pairs of its larger box's children (the smaller box when
 * the larger is a leaf). Tool x tissue tests a tool box against a tissue
 * box by the tool box's axis-aligned bounds only, and a pair of leaves also
 * against the triangle's own box (bounds, then all 15 axes) before the exact
 * test: the tissue's fat leaf boxes (ts_aabb_tree.h) let through several
 * times the pairs that its triangles' boxes do (patch-L on the standard
 * tool path: 735 leaf pairs a step, 167 exact tests). Both trees have bounded depth (AABB: median splits;
 * OBB: median below depth 48), so a fixed stack suffices for every tree the
 * builders make; a deeper one walks on a heap stack (see pstack).
 * Where the tool x tissue query's time goes (patch-L on the standard path,
 * tests/bench/run --quick collide:patch-L, 2026-12-05): 72-104 us a step
 * as the step meets it, 47-65 us for the same query repeated at once, so
 * about a third is cache misses on the tissue tree. Tried and dropped:
 * prefetching both tissue children as a pair descends the tissue (their
 * ratio of cold to warm time 1.47-1.59 against 1.54-1.60 without).
 */
#include "ts_collide.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

#define STACK 512

typedef struct pair {
  int32_t a, b;
} pair;

/* The pair walks' stack. A walk pops one pair and pushes two (the larger
 * box's children), leaving one sibling pending per level it goes down, and
 * a pair goes down at most (depth a - 1) + (depth b - 1) levels; a self walk
 * (a subtree against itself) pushes three and leaves two pending per level
 * of the one tree before its cross pairs start. So 2 (depth a + depth b) + 3
 * entries hold any walk (ts_aabb_tree.depth, ts_obb_tree.depth: 1 for a
 * single leaf). The builders keep that far below STACK (tissue: 33 levels
 * for 2^32 triangles; tool: 81), so the fixed stack serves every tree they
 * make; a deeper tree (hand-made, or a future builder's) walks on a heap
 * stack of that size (test_collide_deep), as ts_collide_cand.c's walks do.
 * Before, such a walk stopped with TS_EINTERNAL. A tree deeper than its
 * depth field says still stops with TS_EINTERNAL, never past the stack. */
typedef struct pstack {
  pair *s;
  int cap;
  pair *heap;
} pstack;

/* Returns 0, or TS_ENOMEM when a deep tree's heap stack cannot be had. */
static int pstack_init(pstack *ps, pair *fixed, uint32_t depth_a, uint32_t depth_b) {
  const uint64_t room = 2 * ((uint64_t)depth_a + depth_b) + 3;
  ps->heap = NULL;
  ps->s = fixed;
  ps->cap = STACK;
  if (room <= STACK) return 0;
  if (room > INT32_MAX) return TS_ENOMEM;
  ps->heap = malloc(sizeof *ps->heap * (size_t)room);
  if (!ps->heap) return TS_ENOMEM;
  ps->s = ps->heap;
  ps->cap = (int)room;
  return 0;
}

static void pstack_free(pstack *ps) { free(ps->heap); }

/* ---- small vector helpers ---- */

static double dot(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
static void sub(const double a[3], const double b[3], double o[3]) {
  o[0] = a[0] - b[0], o[1] = a[1] - b[1], o[2] = a[2] - b[2];
}

/* ---- buffer ---- */

int ts_contacts_init(ts_contacts *buf, uint32_t cap) {
  if (!buf) return TS_EINVAL;
  memset(buf, 0, sizeof *buf);
  if (cap == 0) return TS_EINVAL;
  buf->c = malloc(sizeof *buf->c * cap);
  if (!buf->c) return TS_ENOMEM;
  buf->cap = cap;
  return 0;
}

void ts_contacts_free(ts_contacts *buf) {
  if (!buf) return;
  free(buf->c);
  memset(buf, 0, sizeof *buf);
}

static void emit(ts_contacts *o, uint32_t a, uint32_t b, const ts_hit *h) {
  if (o->n < o->cap) {
    ts_contact *c = &o->c[o->n++];
    c->a = a;
    c->b = b;
    memcpy(c->point, h->point, sizeof c->point);
    memcpy(c->normal, h->normal, sizeof c->normal);
    c->depth = h->depth;
    c->toi = 1.0;
  }
  o->total++;
}

static int finish(const ts_contacts *o) { return o->total > o->n ? TS_EFULL : 0; }

/* ---- leaf tests ---- */

static void tissue_tri(const ts_aabb_tree *t, const double (*x)[3], uint32_t k, double T[3][3]) {
  for (int c = 0; c < 3; c++) memcpy(T[c], x[t->tris[k][c]], sizeof T[c]);
}

/* A tool feature against a triangle; the normal from the tool into it. */
static int feature_triangle(ts_posed_tool *pt, uint32_t f, const double T[3][3], ts_hit *h) {
  const ts_obb_tree *tr = pt->tree;
  switch (tr->kind) {
  case TS_SHAPE_MESH: {
    double F[3][3];
    ts_posed_tool_triangle(pt, f, F);
    return ts_contact_face_triangle(F, T, h);
  }
  case TS_SHAPE_SPHERE:
    return ts_contact_sphere_triangle(pt->pose.p, tr->radius, T, h);
  case TS_SHAPE_CAPSULE: {
    double a[3], b[3];
    ts_posed_tool_segment(pt, a, b);
    return ts_contact_capsule_triangle(a, b, tr->radius, T, h);
  }
  case TS_SHAPE_JAWS:
    return ts_contact_box_triangle(ts_posed_tool_box(pt, 1 + (int32_t)f), T, h);
  }
  return 0;
}

/* Slack of a triangle's own box in the leaf filter, m: far above rounding,
 * the brute force's box slack. */
#define LEAF_SLACK 1e-7

/* A triangle's axis-aligned box grown by LEAF_SLACK. */
static void tri_box(const double T[3][3], double lo[3], double hi[3]) {
  for (int k = 0; k < 3; k++) {
    double a = T[0][k], b = T[1][k], c = T[2][k];
    double l = a < b ? a : b, h = a < b ? b : a;
    lo[k] = (l < c ? l : c) - LEAF_SLACK;
    hi[k] = (h > c ? h : c) + LEAF_SLACK;
  }
}

static double obb_size(const ts_obb *b) { return b->e[0] + b->e[1] + b->e[2]; }
static double aabb_size(const ts_aabb_node *n) {
  return 0.5 * ((n->hi[0] - n->lo[0]) + (n->hi[1] - n->lo[1]) + (n->hi[2] - n->lo[2]));
}

/* ts_posed_tool_box_ext with the cached case inline (the descent asks for
 * a box several times per pose). */
static inline const ts_obb *tool_box_ext(ts_posed_tool *pt, int32_t i, const double **ext) {
  if (pt->stamp[i] != pt->cur) return ts_posed_tool_box_ext(pt, i, ext);
  *ext = pt->reach[i];
  return &pt->world[i];
}

/* ---- tool x tissue ---- */

int ts_collide_tool_tissue(ts_posed_tool *pt, const ts_aabb_tree *tis, const double (*x)[3],
                           ts_contacts *buf, ts_collide_stats *stats) {
  if (!pt || !pt->tree || !tis || !buf || (!x && tis->n_tris)) return TS_EINVAL;
  buf->n = buf->total = 0;
  ts_collide_stats st = {0, 0};
  if (tis->n_tris == 0) {
    if (stats) *stats = st;
    return 0;
  }
  const ts_obb_node *tn = pt->tree->nodes;
  pair fixed[STACK];
  pstack ps;
  int rc = pstack_init(&ps, fixed, pt->tree->depth, tis->depth);
  if (rc) return rc;
  pair *stack = ps.s;
  int sp = 0;
  stack[sp++] = (pair){0, 0};
  while (sp > 0) {
    pair p = stack[--sp];
    const double *ext;
    const ts_obb *oa = tool_box_ext(pt, p.a, &ext);
    const ts_aabb_node *nb = &tis->nodes[p.b];
    st.box_tests++;
    /* the tool box's axis-aligned bounds (three of the 15 axes, with its
     * world extents cached per pose). Above the leaves that is all: along
     * the standard tool path the other twelve axes reject about one pair in
     * fifty that passed these three (the boxes there are fat and nearly
     * aligned), for the cost of more than the rest of the descent, and a
     * pair let through only costs its children's tests. */
    if (oa->c[0] - ext[0] > nb->hi[0] || oa->c[0] + ext[0] < nb->lo[0] ||
        oa->c[1] - ext[1] > nb->hi[1] || oa->c[1] + ext[1] < nb->lo[1] ||
        oa->c[2] - ext[2] > nb->hi[2] || oa->c[2] + ext[2] < nb->lo[2])
      continue;
    int la = tn[p.a].feature >= 0, lb = nb->tri >= 0;
    if (la && lb) {
      /* the fat box let the pair through; the triangle's own box (grown by
       * LEAF_SLACK) often does not: the tool box's bounds and then the full
       * 15-axis test on it, before the exact test */
      double T[3][3], lo[3], hi[3];
      ts_hit h;
      tissue_tri(tis, x, (uint32_t)nb->tri, T);
      tri_box(T, lo, hi);
      if (oa->c[0] - ext[0] > hi[0] || oa->c[0] + ext[0] < lo[0] ||
          oa->c[1] - ext[1] > hi[1] || oa->c[1] + ext[1] < lo[1] ||
          oa->c[2] - ext[2] > hi[2] || oa->c[2] + ext[2] < lo[2])
        continue;
      if (!ts_sat_obb_aabb(oa, lo, hi, TS_SAT_EPS)) continue;
      st.leaf_tests++;
      if (feature_triangle(pt, (uint32_t)tn[p.a].feature, T, &h))
        emit(buf, (uint32_t)tn[p.a].feature, (uint32_t)nb->tri, &h);
      continue;
    }
    if (sp + 2 > ps.cap) { /* a tree deeper than its depth field says */
      rc = TS_EINTERNAL;
      break;
    }
    if (lb || (!la && obb_size(oa) >= aabb_size(nb))) {
      stack[sp++] = (pair){tn[p.a].child[1], p.b};
      stack[sp++] = (pair){tn[p.a].child[0], p.b};
    } else {
      stack[sp++] = (pair){p.a, nb->child[1]};
      stack[sp++] = (pair){p.a, nb->child[0]};
    }
  }
  pstack_free(&ps);
  if (stats) *stats = st;
  return rc ? rc : finish(buf);
}

/* ---- brute force ---- */

static int boxes_overlap(const double alo[3], const double ahi[3], const double blo[3],
                         const double bhi[3]) {
  return !(alo[0] > bhi[0] || ahi[0] < blo[0] || alo[1] > bhi[1] || ahi[1] < blo[1] ||
           alo[2] > bhi[2] || ahi[2] < blo[2]);
}

static void grow(double lo[3], double hi[3], const double p[3]) {
  for (int k = 0; k < 3; k++) lo[k] = fmin(lo[k], p[k]), hi[k] = fmax(hi[k], p[k]);
}

/* Bounding box of tool feature f at the current pose. */
static void feature_box(ts_posed_tool *pt, uint32_t f, const double (*wv)[3], double lo[3],
                        double hi[3]) {
  const ts_obb_tree *tr = pt->tree;
  for (int k = 0; k < 3; k++) lo[k] = INFINITY, hi[k] = -INFINITY;
  switch (tr->kind) {
  case TS_SHAPE_MESH:
    for (int c = 0; c < 3; c++) grow(lo, hi, wv[tr->t[f][c]]);
    break;
  case TS_SHAPE_SPHERE:
  case TS_SHAPE_CAPSULE: {
    double a[3], b[3];
    ts_posed_tool_segment(pt, a, b);
    grow(lo, hi, a);
    grow(lo, hi, b);
    for (int k = 0; k < 3; k++) lo[k] -= tr->radius, hi[k] += tr->radius;
    break;
  }
  case TS_SHAPE_JAWS: {
    ts_obb box;
    double c[8][3];
    ts_posed_tool_jaw(pt, (int)f, &box);
    ts_obb_corners(&box, c);
    for (int n = 0; n < 8; n++) grow(lo, hi, c[n]);
    break;
  }
  }
}

int ts_collide_tool_tissue_brute(ts_posed_tool *pt, const ts_aabb_tree *tis, const double (*x)[3],
                                 ts_contacts *buf) {
  if (!pt || !pt->tree || !tis || !buf || (!x && tis->n_tris)) return TS_EINVAL;
  buf->n = buf->total = 0;
  const ts_obb_tree *tr = pt->tree;
  const double slack = 1e-7;
  uint32_t nf = tr->kind == TS_SHAPE_MESH ? tr->n_tris : tr->kind == TS_SHAPE_JAWS ? 2 : 1;
  double(*wv)[3] = NULL;
  double(*flo)[3] = malloc(sizeof *flo * nf), (*fhi)[3] = malloc(sizeof *fhi * nf);
  uint32_t *cand = malloc(sizeof *cand * (tis->n_tris ? tis->n_tris : 1));
  double(*tlo)[3] = malloc(sizeof *tlo * (tis->n_tris ? tis->n_tris : 1));
  double(*thi)[3] = malloc(sizeof *thi * (tis->n_tris ? tis->n_tris : 1));
  if (tr->kind == TS_SHAPE_MESH) wv = malloc(sizeof *wv * tr->n_verts);
  int rc = 0;
  if (!flo || !fhi || !cand || !tlo || !thi || (tr->kind == TS_SHAPE_MESH && !wv)) {
    rc = TS_ENOMEM;
    goto out;
  }
  if (wv) {
    for (uint32_t i = 0; i < tr->n_verts; i++) {
      for (int k = 0; k < 3; k++) wv[i][k] = dot(pt->R[k], tr->v[i]) + pt->pose.p[k];
    }
  }
  /* the whole tool's box, then the tissue triangles that reach into it */
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (uint32_t f = 0; f < nf; f++) {
    feature_box(pt, f, (const double(*)[3])wv, flo[f], fhi[f]);
    for (int k = 0; k < 3; k++) {
      flo[f][k] -= slack, fhi[f][k] += slack;
      lo[k] = fmin(lo[k], flo[f][k]), hi[k] = fmax(hi[k], fhi[f][k]);
    }
  }
  uint32_t nc = 0;
  for (uint32_t k = 0; k < tis->n_tris; k++) {
    double a[3] = {INFINITY, INFINITY, INFINITY}, b[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int c = 0; c < 3; c++) grow(a, b, x[tis->tris[k][c]]);
    if (!boxes_overlap(a, b, lo, hi)) continue;
    memcpy(tlo[nc], a, sizeof a);
    memcpy(thi[nc], b, sizeof b);
    cand[nc++] = k;
  }
  for (uint32_t f = 0; f < nf; f++)
    for (uint32_t i = 0; i < nc; i++) {
      if (!boxes_overlap(flo[f], fhi[f], tlo[i], thi[i])) continue;
      double T[3][3];
      ts_hit h;
      tissue_tri(tis, x, cand[i], T);
      if (feature_triangle(pt, f, T, &h)) emit(buf, f, cand[i], &h);
    }
  rc = finish(buf);
out:
  free(wv);
  free(flo);
  free(fhi);
  free(cand);
  free(tlo);
  free(thi);
  return rc;
}

/* ---- tool x tool ---- */

static int is_round(const ts_obb_tree *t) {
  return t->kind == TS_SHAPE_SPHERE || t->kind == TS_SHAPE_CAPSULE;
}

/* The 12 triangles of a box's surface. */
static void box_triangles(const ts_obb *b, double tri[12][3][3]) {
  double c[8][3];
  ts_obb_corners(b, c);
  /* corner n has bit a set when on the + side of axis a; each face is the
   * quad of corners with bit a fixed, cut in two */
  int k = 0;
  for (int a = 0; a < 3; a++) {
    int u = 1 << ((a + 1) % 3), v = 1 << ((a + 2) % 3);
    for (int s = 0; s < 2; s++) {
      int base = s ? 1 << a : 0;
      int q[4] = {base, base | u, base | u | v, base | v};
      int half[2][3] = {{q[0], q[1], q[2]}, {q[0], q[2], q[3]}};
      for (int j = 0; j < 2; j++, k++)
        for (int m = 0; m < 3; m++) memcpy(tri[k][m], c[half[j][m]], sizeof c[0]);
    }
  }
}

/* Part of segment [p, q] inside the closed box: parameters [t0, t1]; 0 when
 * they do not meet. */
static int segment_in_box(const ts_obb *b, const double p[3], const double q[3], double *t0,
                          double *t1) {
  double lo = 0, hi = 1, w[3], d[3];
  sub(p, b->c, w);
  sub(q, p, d);
  for (int a = 0; a < 3; a++) {
    double os = dot(w, b->r[a]), ds = dot(d, b->r[a]);
    if (ds == 0) {
      if (fabs(os) > b->e[a]) return 0;
      continue;
    }
    double s0 = (-b->e[a] - os) / ds, s1 = (b->e[a] - os) / ds;
    if (s0 > s1) {
      double s = s0;
      s0 = s1, s1 = s;
    }
    lo = fmax(lo, s0), hi = fmin(hi, s1);
    if (lo > hi) return 0;
  }
  *t0 = lo, *t1 = hi;
  return 1;
}

/* A box (first) against a capsule core [p, q] of radius r (second). */
static int box_capsule(const ts_obb *box, const double p[3], const double q[3], double r,
                       ts_hit *h) {
  double t0, t1;
  if (segment_in_box(box, p, q, &t0, &t1)) {
    /* cores meet: the segment as a flat box, smallest overlap over the axes */
    ts_obb s;
    double d[3];
    sub(q, p, d);
    double l = sqrt(dot(d, d));
    double u[3] = {1, 0, 0};
    if (l > 0) u[0] = d[0] / l, u[1] = d[1] / l, u[2] = d[2] / l;
    /* any two unit vectors completing u to a right-handed frame */
    double o[3] = {fabs(u[0]) < 0.9 ? 1.0 : 0.0, fabs(u[0]) < 0.9 ? 0.0 : 1.0, 0.0};
    double v[3] = {u[1] * o[2] - u[2] * o[1], u[2] * o[0] - u[0] * o[2], u[0] * o[1] - u[1] * o[0]};
    double vl = sqrt(dot(v, v));
    for (int k = 0; k < 3; k++) v[k] /= vl;
    double w[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
    memcpy(s.r[0], u, sizeof u);
    memcpy(s.r[1], v, sizeof v);
    memcpy(s.r[2], w, sizeof w);
    for (int k = 0; k < 3; k++) s.c[k] = 0.5 * (p[k] + q[k]);
    s.e[0] = l / 2, s.e[1] = s.e[2] = 0;
    double depth = ts_sat_obb_obb_depth(box, &s, h->normal);
    h->depth = fmax(depth, 0) + r;
    for (int k = 0; k < 3; k++) h->point[k] = p[k] + 0.5 * (t0 + t1) * (q[k] - p[k]);
    return 1;
  }
  double tri[12][3][3], best = INFINITY, cs[3] = {0}, cb[3] = {0};
  box_triangles(box, tri);
  for (int i = 0; i < 12; i++) {
    double a[3], b[3];
    double d = ts_closest_segment_triangle(p, q, (const double(*)[3])tri[i], a, b);
    if (d < best) best = d, memcpy(cs, a, sizeof a), memcpy(cb, b, sizeof b);
  }
  if (!(best <= r)) return 0;
  if (best > 0) {
    for (int k = 0; k < 3; k++) h->normal[k] = (cs[k] - cb[k]) / best;
  } else {
    h->normal[0] = 0, h->normal[1] = 1, h->normal[2] = 0;
  }
  h->depth = r - best;
  for (int k = 0; k < 3; k++) h->point[k] = cb[k] + h->normal[k] * 0.5 * (best - h->depth);
  return 1;
}

static int box_box(const ts_obb *a, const ts_obb *b, ts_hit *h) {
  double depth = ts_sat_obb_obb_depth(a, b, h->normal);
  if (depth < 0) return 0;
  h->depth = depth;
  /* point: the mean of the corners of each box inside the other, else the
   * midpoint of the centres */
  double ca[8][3], cb[8][3], m[3] = {0, 0, 0};
  int n = 0;
  ts_obb_corners(a, ca);
  ts_obb_corners(b, cb);
  for (int i = 0; i < 8; i++) {
    if (ts_obb_contains(b, ca[i], 0)) n++, m[0] += ca[i][0], m[1] += ca[i][1], m[2] += ca[i][2];
    if (ts_obb_contains(a, cb[i], 0)) n++, m[0] += cb[i][0], m[1] += cb[i][1], m[2] += cb[i][2];
  }
  for (int k = 0; k < 3; k++) h->point[k] = n ? m[k] / n : 0.5 * (a->c[k] + b->c[k]);
  return 1;
}

static void flip(ts_hit *h) {
  for (int k = 0; k < 3; k++) h->normal[k] = -h->normal[k];
}

static int feature_feature(ts_posed_tool *A, uint32_t fa, ts_posed_tool *B, uint32_t fb,
                           ts_hit *h) {
  const ts_obb_tree *ta = A->tree, *tb = B->tree;
  if (tb->kind == TS_SHAPE_MESH) {
    double T[3][3];
    ts_posed_tool_triangle(B, fb, T);
    return feature_triangle(A, fa, T, h);
  }
  if (ta->kind == TS_SHAPE_MESH) {
    double T[3][3];
    ts_posed_tool_triangle(A, fa, T);
    if (!feature_triangle(B, fb, T, h)) return 0;
    flip(h);
    return 1;
  }
  if (is_round(ta) && is_round(tb)) {
    double a0[3], a1[3], b0[3], b1[3], ca[3], cb[3];
    ts_posed_tool_segment(A, a0, a1);
    ts_posed_tool_segment(B, b0, b1);
    double d = ts_closest_segment_segment(a0, a1, b0, b1, ca, cb);
    double rr = ta->radius + tb->radius;
    if (!(d <= rr)) return 0;
    if (d > 0) {
      for (int k = 0; k < 3; k++) h->normal[k] = (cb[k] - ca[k]) / d;
    } else {
      h->normal[0] = 0, h->normal[1] = 1, h->normal[2] = 0;
    }
    h->depth = rr - d;
    /* midway between the two surface points */
    for (int k = 0; k < 3; k++)
      h->point[k] = 0.5 * (ca[k] + h->normal[k] * ta->radius + cb[k] - h->normal[k] * tb->radius);
    return 1;
  }
  if (ta->kind == TS_SHAPE_JAWS && tb->kind == TS_SHAPE_JAWS)
    return box_box(ts_posed_tool_box(A, 1 + (int32_t)fa), ts_posed_tool_box(B, 1 + (int32_t)fb), h);
  if (ta->kind == TS_SHAPE_JAWS) {
    double p[3], q[3];
    ts_posed_tool_segment(B, p, q);
    return box_capsule(ts_posed_tool_box(A, 1 + (int32_t)fa), p, q, tb->radius, h);
  }
  double p[3], q[3];
  ts_posed_tool_segment(A, p, q);
  if (!box_capsule(ts_posed_tool_box(B, 1 + (int32_t)fb), p, q, ta->radius, h)) return 0;
  flip(h);
  return 1;
}

int ts_collide_tool_tool(ts_posed_tool *A, ts_posed_tool *B, ts_contacts *buf,
                         ts_collide_stats *stats) {
  if (!A || !B || !A->tree || !B->tree || !buf) return TS_EINVAL;
  buf->n = buf->total = 0;
  ts_collide_stats st = {0, 0};
  const ts_obb_node *na = A->tree->nodes, *nb = B->tree->nodes;
  pair fixed[STACK];
  pstack ps;
  int rc = pstack_init(&ps, fixed, A->tree->depth, B->tree->depth);
  if (rc) return rc;
  pair *stack = ps.s;
  int sp = 0;
  stack[sp++] = (pair){0, 0};
  while (sp > 0) {
    pair p = stack[--sp];
    const ts_obb *oa = ts_posed_tool_box(A, p.a), *ob = ts_posed_tool_box(B, p.b);
    st.box_tests++;
    if (!ts_sat_obb_obb(oa, ob, TS_SAT_EPS)) continue;
    int la = na[p.a].feature >= 0, lb = nb[p.b].feature >= 0;
    if (la && lb) {
      ts_hit h;
      st.leaf_tests++;
      if (feature_feature(A, (uint32_t)na[p.a].feature, B, (uint32_t)nb[p.b].feature, &h))
        emit(buf, (uint32_t)na[p.a].feature, (uint32_t)nb[p.b].feature, &h);
      continue;
    }
    if (sp + 2 > ps.cap) { /* a tree deeper than its depth field says */
      rc = TS_EINTERNAL;
      break;
    }
    if (lb || (!la && obb_size(oa) >= obb_size(ob))) {
      stack[sp++] = (pair){na[p.a].child[1], p.b};
      stack[sp++] = (pair){na[p.a].child[0], p.b};
    } else {
      stack[sp++] = (pair){p.a, nb[p.b].child[1]};
      stack[sp++] = (pair){p.a, nb[p.b].child[0]};
    }
  }
  pstack_free(&ps);
  if (stats) *stats = st;
  return rc ? rc : finish(buf);
}

/* ---- tissue x tissue ---- */

static int shares_point(const uint32_t *s, const uint32_t *t) {
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      if (s[i] == t[j]) return 1;
  return 0;
}

/* The AABB x AABB descent (A == B: one tissue against itself, every pair
 * once with ka < kb, pairs that share a point or that skip names left out):
 * each intersecting pair goes to visit, which stops the descent by returning
 * non-zero. */
static int tissue_pairs(const ts_aabb_tree *A, const double (*xa)[3], const ts_aabb_tree *B,
                        const double (*xb)[3], ts_collide_skip_fn skip, ts_collide_visit_fn visit,
                        void *ctx, ts_collide_stats *stats) {
  ts_collide_stats st = {0, 0};
  if (!A->n_tris || !B->n_tris) {
    if (stats) *stats = st;
    return 0;
  }
  const int self = A == B;
  pair fixed[STACK];
  pstack ps;
  int rc = pstack_init(&ps, fixed, A->depth, B->depth);
  if (rc) return rc;
  pair *stack = ps.s;
  int sp = 0;
  stack[sp++] = (pair){0, 0};
  while (sp > 0) {
    pair p = stack[--sp];
    const ts_aabb_node *na = &A->nodes[p.a], *nb = &B->nodes[p.b];
    if (sp + 3 > ps.cap) { /* a tree deeper than its depth field says */
      rc = TS_EINTERNAL;
      break;
    }
    if (self && p.a == p.b) {
      /* a subtree against itself: its two halves against themselves and
       * against each other, so every pair of leaves comes up once */
      if (na->tri < 0) {
        stack[sp++] = (pair){na->child[0], na->child[0]};
        stack[sp++] = (pair){na->child[1], na->child[1]};
        stack[sp++] = (pair){na->child[0], na->child[1]};
      }
      continue;
    }
    st.box_tests++;
    if (!boxes_overlap(na->lo, na->hi, nb->lo, nb->hi)) continue;
    int la = na->tri >= 0, lb = nb->tri >= 0;
    if (la && lb) {
      uint32_t ka = (uint32_t)na->tri, kb = (uint32_t)nb->tri;
      if (self) {
        if (shares_point(A->tris[ka], A->tris[kb])) continue;
        if (ka > kb) {
          uint32_t s = ka;
          ka = kb, kb = s;
        }
        if (skip && skip(ctx, ka, kb)) continue;
      }
      double Ta[3][3], Tb[3][3];
      ts_hit h;
      tissue_tri(A, xa, ka, Ta);
      tissue_tri(B, xb, kb, Tb);
      st.leaf_tests++;
      if (ts_contact_face_triangle(Ta, Tb, &h) && visit(ctx, ka, kb, &h)) break;
      continue;
    }
    if (lb || (!la && aabb_size(na) >= aabb_size(nb))) {
      stack[sp++] = (pair){na->child[1], p.b};
      stack[sp++] = (pair){na->child[0], p.b};
    } else {
      stack[sp++] = (pair){p.a, nb->child[1]};
      stack[sp++] = (pair){p.a, nb->child[0]};
    }
  }
  pstack_free(&ps);
  if (stats) *stats = st;
  return rc;
}

/* Stores the pairs in a contact buffer; a caller's skip goes along. */
typedef struct emit_ctx {
  ts_contacts *buf;
  ts_collide_skip_fn skip;
  void *skip_ctx;
} emit_ctx;

static int emit_visit(void *ctx, uint32_t ka, uint32_t kb, const ts_hit *h) {
  emit(((emit_ctx *)ctx)->buf, ka, kb, h);
  return 0;
}

static int emit_skip(void *ctx, uint32_t ka, uint32_t kb) {
  const emit_ctx *e = ctx;
  return e->skip(e->skip_ctx, ka, kb);
}

static int tissue_contacts(const ts_aabb_tree *A, const double (*xa)[3], const ts_aabb_tree *B,
                           const double (*xb)[3], ts_collide_skip_fn skip, void *ctx,
                           ts_contacts *buf, ts_collide_stats *stats) {
  if (!A || !B || !buf || (!xa && A->n_tris) || (!xb && B->n_tris)) return TS_EINVAL;
  buf->n = buf->total = 0;
  emit_ctx e = {buf, skip, ctx};
  int rc = tissue_pairs(A, xa, B, xb, skip ? emit_skip : NULL, emit_visit, &e, stats);
  return rc ? rc : finish(buf);
}

int ts_collide_tissue_tissue(const ts_aabb_tree *A, const double (*xa)[3], const ts_aabb_tree *B,
                             const double (*xb)[3], ts_contacts *buf, ts_collide_stats *stats) {
  return tissue_contacts(A, xa, B, xb, NULL, NULL, buf, stats);
}

int ts_collide_tissue_self(const ts_aabb_tree *A, const double (*x)[3], ts_collide_skip_fn skip,
                           void *ctx, ts_contacts *buf, ts_collide_stats *stats) {
  return tissue_contacts(A, x, A, x, skip, ctx, buf, stats);
}

int ts_collide_tissue_self_visit(const ts_aabb_tree *A, const double (*x)[3],
                                 ts_collide_skip_fn skip, ts_collide_visit_fn visit, void *ctx,
                                 ts_collide_stats *stats) {
  if (!A || !visit || (!x && A->n_tris)) return TS_EINVAL;
  return tissue_pairs(A, x, A, x, skip, visit, ctx, stats);
}

/* ---- sweep ---- */

ts_sweep_def ts_default_sweep_def(void) {
  ts_sweep_def d = {.max_substeps = 64, .travel_fraction = 0.5};
  return d;
}

/* The pairs (tool leaf, tissue leaf) whose boxes overlap with the tool's
 * boxes grown by `grow` (m) on every side, into buf->c[].a/.b (buf->total
 * counts them all). The same descent as ts_collide_tool_tissue. */
static int candidates(ts_posed_tool *pt, const ts_aabb_tree *tis, double grow, ts_contacts *buf) {
  buf->n = buf->total = 0;
  if (tis->n_tris == 0) return 0;
  const ts_obb_node *tn = pt->tree->nodes;
  pair fixed[STACK];
  pstack ps;
  int rc = pstack_init(&ps, fixed, pt->tree->depth, tis->depth);
  if (rc) return rc;
  pair *stack = ps.s;
  int sp = 0;
  stack[sp++] = (pair){0, 0};
  while (sp > 0) {
    pair p = stack[--sp];
    const double *ext;
    ts_obb oa = *ts_posed_tool_box_ext(pt, p.a, &ext);
    const ts_aabb_node *nb = &tis->nodes[p.b];
    double gx[3];
    for (int k = 0; k < 3; k++) {
      gx[k] = ext[k] + grow * (fabs(oa.r[0][k]) + fabs(oa.r[1][k]) + fabs(oa.r[2][k]));
      oa.e[k] += grow;
    }
    if (oa.c[0] - gx[0] > nb->hi[0] || oa.c[0] + gx[0] < nb->lo[0] || oa.c[1] - gx[1] > nb->hi[1] ||
        oa.c[1] + gx[1] < nb->lo[1] || oa.c[2] - gx[2] > nb->hi[2] || oa.c[2] + gx[2] < nb->lo[2])
      continue;
    if (!ts_sat_obb_aabb(&oa, nb->lo, nb->hi, TS_SAT_EPS)) continue;
    int la = tn[p.a].feature >= 0, lb = nb->tri >= 0;
    if (la && lb) {
      if (buf->n < buf->cap) {
        buf->c[buf->n].a = (uint32_t)tn[p.a].feature;
        buf->c[buf->n].b = (uint32_t)nb->tri;
        buf->n++;
      }
      buf->total++;
      continue;
    }
    if (sp + 2 > ps.cap) { /* a tree deeper than its depth field says */
      rc = TS_EINTERNAL;
      break;
    }
    if (lb || (!la && obb_size(&oa) >= aabb_size(nb))) {
      stack[sp++] = (pair){tn[p.a].child[1], p.b};
      stack[sp++] = (pair){tn[p.a].child[0], p.b};
    } else {
      stack[sp++] = (pair){p.a, nb->child[1]};
      stack[sp++] = (pair){p.a, nb->child[0]};
    }
  }
  pstack_free(&ps);
  return rc;
}

int ts_collide_sweep(ts_posed_tool *pt, const ts_pose *from, const ts_pose *to,
                     const ts_aabb_tree *tis, const double (*x)[3], const ts_sweep_def *def,
                     ts_contacts *buf, ts_sweep_info *info) {
  if (!pt || !pt->tree || !from || !to || !tis || !buf || (!x && tis->n_tris)) return TS_EINVAL;
  ts_sweep_def d = def ? *def : ts_default_sweep_def();
  if (d.max_substeps < 1 || !(d.travel_fraction > 0 && d.travel_fraction <= 1)) return TS_EINVAL;
  /* validate and normalise both poses through the placed tool */
  ts_pose a, b;
  int rc = ts_posed_tool_set_pose(pt, from);
  if (rc) return rc;
  a = pt->pose;
  rc = ts_posed_tool_set_pose(pt, to);
  if (rc) return rc;
  b = pt->pose;

  const ts_obb_tree *tr = pt->tree;
  double dp[3];
  sub(b.p, a.p, dp);
  double qd = fabs(a.q[0] * b.q[0] + a.q[1] * b.q[1] + a.q[2] * b.q[2] + a.q[3] * b.q[3]);
  double angle = 2.0 * acos(qd > 1 ? 1 : qd);
  double travel = sqrt(dot(dp, dp)) + angle * tr->reach;
  if (tr->kind == TS_SHAPE_JAWS) {
    /* each jaw turns by half the change of the opening angle about the hinge */
    double arm = sqrt(tr->length * tr->length + tr->jaw_thickness * tr->jaw_thickness +
                      tr->jaw_width * tr->jaw_width / 4);
    travel += fabs(b.jaw - a.jaw) * tr->jaw_max_angle / 2 * arm;
  }
  uint32_t n = d.max_substeps;
  double step = d.travel_fraction * tr->thickness;
  if (step > 0) {
    double k = ceil(travel / step);
    if (k < 1) k = 1;
    if (k < n) n = (uint32_t)k;
  }
  ts_sweep_info inf = {.toi = 1.0, .substeps = n, .tested = 0, .travel = travel};
  buf->n = buf->total = 0;

  /* one descent at the mid pose with every tool box grown by half the travel
   * (no tool point is farther than that from its mid-pose place at any
   * substep), then the exact tests of those pairs at each substep; when the
   * pairs do not fit in the buffer, a descent per substep */
  int pairs = 0;
  uint32_t np = 0;
  if (n > 1) {
    ts_pose mid;
    ts_pose_lerp(&a, &b, 0.5, &mid);
    rc = ts_posed_tool_set_pose(pt, &mid);
    if (rc) return rc;
    rc = candidates(pt, tis, travel * (0.5 + 1e-9) + 1e-12, buf);
    if (rc) return rc;
    pairs = buf->total <= buf->cap;
    np = buf->n;
    inf.candidates = buf->total;
  }
  for (uint32_t k = 1; k <= n; k++) {
    double s = (double)k / n;
    ts_pose ps;
    if (k == n)
      ps = b;
    else
      ts_pose_lerp(&a, &b, s, &ps);
    rc = ts_posed_tool_set_pose(pt, &ps);
    if (rc) break;
    inf.tested = k;
    if (pairs) {
      /* contacts are written over pairs already tested (w <= i), and only
       * in the substep that ends the search */
      uint32_t w = 0;
      for (uint32_t i = 0; i < np; i++) {
        double T[3][3];
        ts_hit h;
        uint32_t f = buf->c[i].a, tri = buf->c[i].b;
        tissue_tri(tis, x, tri, T);
        if (!feature_triangle(pt, f, T, &h)) continue;
        ts_contact *c = &buf->c[w++];
        c->a = f;
        c->b = tri;
        memcpy(c->point, h.point, sizeof c->point);
        memcpy(c->normal, h.normal, sizeof c->normal);
        c->depth = h.depth;
      }
      buf->n = buf->total = w;
      if (w == 0) buf->n = np; /* keep the pairs for the next substep */
    } else {
      rc = ts_collide_tool_tissue(pt, tis, x, buf, NULL);
    }
    if (buf->total > 0) {
      inf.toi = s;
      for (uint32_t i = 0; i < buf->n; i++) buf->c[i].toi = s;
      break;
    }
    if (rc) break;
  }
  if (buf->total == 0) buf->n = 0;
  if (info) *info = inf;
  return rc;
}

/* ---- a mesh tool through one tissue triangle ---- */

int ts_collide_mesh_pierce(const ts_obb_tree *tool, const double T[3][3], double max_depth,
                           ts_hit *hit) {
  if (!tool || tool->kind != TS_SHAPE_MESH || !tool->nodes || !T || !hit) return 0;
  double lo[3], hi[3];
  tri_box(T, lo, hi);
  double best = -1;
  ts_hit h, deep = {{0, 0, 0}, {0, 0, 0}, 0};
  int32_t stack[STACK];
  int sp = 0;
  stack[sp++] = 0;
  while (sp > 0) {
    const ts_obb_node *nd = &tool->nodes[stack[--sp]];
    /* the node box's axis-aligned bounds in the tool frame against T's */
    const ts_obb *b = &nd->box;
    int apart = 0;
    for (int k = 0; k < 3 && !apart; k++) {
      const double e = b->e[0] * fabs(b->r[0][k]) + b->e[1] * fabs(b->r[1][k]) +
                       b->e[2] * fabs(b->r[2][k]);
      apart = b->c[k] + e < lo[k] || b->c[k] - e > hi[k];
    }
    if (apart) continue;
    if (nd->feature >= 0) {
      const uint32_t *tri = tool->t[nd->feature];
      double F[3][3];
      for (int c = 0; c < 3; c++) memcpy(F[c], tool->v[tri[c]], sizeof F[c]);
      /* T as the face: depth = how far the tool triangle's part over T
       * lies behind T's plane */
      if (ts_contact_face_triangle(T, (const double (*)[3])F, &h) && h.depth > best) {
        best = h.depth;
        deep = h;
      }
      continue;
    }
    if (sp + 2 > STACK) continue; /* deeper than any built tree */
    stack[sp++] = nd->child[0];
    stack[sp++] = nd->child[1];
  }
  if (best < 0 || best > max_depth) return 0;
  *hit = deep;
  for (int k = 0; k < 3; k++) hit->normal[k] = -deep.normal[k];
  return 1;
}

int ts_collide_barycentric(const double T[3][3], const double p[3], double bc[3]) {
  double e0[3], e1[3], d[3];
  for (int k = 0; k < 3; k++) e0[k] = T[1][k] - T[0][k], e1[k] = T[2][k] - T[0][k], d[k] = p[k] - T[0][k];
  const double d00 = e0[0] * e0[0] + e0[1] * e0[1] + e0[2] * e0[2];
  const double d01 = e0[0] * e1[0] + e0[1] * e1[1] + e0[2] * e1[2];
  const double d11 = e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2];
  const double d20 = d[0] * e0[0] + d[1] * e0[1] + d[2] * e0[2];
  const double d21 = d[0] * e1[0] + d[1] * e1[1] + d[2] * e1[2];
  const double den = d00 * d11 - d01 * d01;
  if (!(den > 0)) {
    bc[0] = bc[1] = bc[2] = 1.0 / 3;
    return 0;
  }
  double v = (d11 * d20 - d01 * d21) / den, w = (d00 * d21 - d01 * d20) / den;
  v = v < 0 ? 0 : v > 1 ? 1 : v;
  w = w < 0 ? 0 : w > 1 - v ? 1 - v : w;
  bc[0] = 1 - v - w, bc[1] = v, bc[2] = w;
  return 1;
}

int ts_collide_mesh_pierce_posed(const ts_obb_tree *tool, const double R[3][3], const double o[3],
                                 const double X[3][3], double max_depth, ts_hit *hit,
                                 double bc[3]) {
  double T[3][3];
  for (int c = 0; c < 3; c++) { /* into the tool's frame: R^T (x - o) */
    double d[3];
    for (int k = 0; k < 3; k++) d[k] = X[c][k] - o[k];
    for (int k = 0; k < 3; k++) T[c][k] = R[0][k] * d[0] + R[1][k] * d[1] + R[2][k] * d[2];
  }
  if (!ts_collide_mesh_pierce(tool, (const double (*)[3])T, max_depth, hit)) return 0;
  const int ok = ts_collide_barycentric((const double (*)[3])T, hit->point, bc);
  double n[3];
  for (int k = 0; k < 3; k++)
    n[k] = R[k][0] * hit->normal[0] + R[k][1] * hit->normal[1] + R[k][2] * hit->normal[2];
  memcpy(hit->normal, n, sizeof n);
  return ok ? 1 : 2;
}
