/*
 * ts_collide_cand.c: the live contact's candidate triangles by the method's
 * descent (ts_collide.h, ts_collide_tissue_tris*): the root boxes, then the
 * tool's OBB tree against the tissue's AABB tree down to pairs of leaves
 * (a tool box against a tissue box by the tool box's axis-aligned bounds
 * above the leaves, as ts_collide_tool_tissue; at a pair of leaves those
 * bounds and the 15-axis separating-axis test against the tissue
 * triangle's own box), every tool box grown by the caller's margin. The
 * response (ts_contact.c, ts_ms_contact.c) then tests each candidate
 * exactly (signed distance of its corners, the triangle passes), as the
 * leaf test of ts_collide_tool_tissue would, but with its own allowances
 * and sweeps, which is why it wants the candidates rather than the
 * contacts.
 *
 * Before, the live paths took every triangle whose fat leaf box met the
 * axis-aligned box of the tool's root OBB (swept between two poses, grown
 * by the margin): for a slanted mesh tool that box holds several times the
 * triangles the tool's leaf boxes reach. The tool boxes here are placed
 * from the tool's frame on the fly (a rotation per visited node) or taken
 * from a posed tool's cache; nothing is allocated.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_collide.h"
#include "ts_error.h"

#define STACK 512
#define LEAF_SLACK 1e-7 /* m: as ts_collide_tool_tissue's triangle box */

typedef struct cand_pair {
  int32_t a, b;
} cand_pair;

/* Where the tool's world boxes come from. */
typedef struct src {
  ts_posed_tool *pt;        /* a posed tool's cache, or */
  const ts_obb_tree *tree;  /* a tree placed at (R, o), or */
  const ts_obb *box;        /* a single world box (node 0 only) */
  const double (*R)[3];
  const double *o;
} src;

static void world_box(const src *s, int32_t i, double grow, ts_obb *w, double ext[3]) {
  if (s->pt) {
    const double *e;
    *w = *ts_posed_tool_box_ext(s->pt, i, &e);
    memcpy(ext, e, sizeof(double) * 3);
  } else if (s->box) {
    *w = *s->box;
    for (int k = 0; k < 3; k++)
      ext[k] = w->e[0] * fabs(w->r[0][k]) + w->e[1] * fabs(w->r[1][k]) + w->e[2] * fabs(w->r[2][k]);
  } else {
    const ts_obb *l = &s->tree->nodes[i].box;
    for (int k = 0; k < 3; k++)
      w->c[k] = s->R[k][0] * l->c[0] + s->R[k][1] * l->c[1] + s->R[k][2] * l->c[2] + s->o[k];
    for (int a = 0; a < 3; a++)
      for (int k = 0; k < 3; k++)
        w->r[a][k] = s->R[k][0] * l->r[a][0] + s->R[k][1] * l->r[a][1] + s->R[k][2] * l->r[a][2];
    memcpy(w->e, l->e, sizeof w->e);
    for (int k = 0; k < 3; k++)
      ext[k] = w->e[0] * fabs(w->r[0][k]) + w->e[1] * fabs(w->r[1][k]) + w->e[2] * fabs(w->r[2][k]);
  }
  /* grown by `grow` along its own axes: its bounds grow by grow times the
   * axes' summed |components| */
  if (grow > 0)
    for (int k = 0; k < 3; k++) {
      ext[k] += grow * (fabs(w->r[0][k]) + fabs(w->r[1][k]) + fabs(w->r[2][k]));
      w->e[k] += grow;
    }
}

static int cmp_u32(const void *a, const void *b) {
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts out[0..n) and drops repeats; returns the new count. */
static uint32_t sort_unique(uint32_t *out, uint32_t n) {
  if (n < 2) return n;
  qsort(out, n, sizeof *out, cmp_u32);
  uint32_t m = 1;
  for (uint32_t i = 1; i < n; i++)
    if (out[i] != out[m - 1]) out[m++] = out[i];
  return m;
}

/* A leaf's place in the order ts_aabb_tree_query_box lists the leaves (a
 * walk that takes child[1] before child[0]): the path from the root, one
 * bit per level from the top, 0 for child[1]. Two leaves part at a level
 * both reach, so the zero padding of the shorter path does not matter;
 * the depth (at most ceil(log2 n) + 1) stays far below 64. */
static uint64_t leaf_key(const ts_aabb_tree *tis, uint32_t tri) {
  uint64_t bits = 0;
  uint32_t depth = 0;
  for (int32_t i = tis->leaf[tri]; tis->nodes[i].parent >= 0; i = tis->nodes[i].parent) {
    bits |= (uint64_t)(tis->nodes[tis->nodes[i].parent].child[0] == i) << depth;
    depth++;
  }
  return depth ? bits << (64 - depth) : 0;
}

/* Heap sort of out[0..n) by leaf_key: with the keys in key[] (n entries),
 * or, key NULL (more candidates than the caller's scratch holds), each key
 * found again where compared. No allocation. */
static uint64_t key_of(const ts_aabb_tree *tis, const uint32_t *out, const uint64_t *key,
                       uint32_t i) {
  return key ? key[i] : leaf_key(tis, out[i]);
}

static void swap_at(uint32_t *out, uint64_t *key, uint32_t i, uint32_t j) {
  const uint32_t t = out[i];
  out[i] = out[j], out[j] = t;
  if (key) {
    const uint64_t k = key[i];
    key[i] = key[j], key[j] = k;
  }
}

static void sift(const ts_aabb_tree *tis, uint32_t *out, uint64_t *key, uint32_t i, uint32_t n) {
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= n) return;
    uint64_t kc = key_of(tis, out, key, c);
    if (c + 1 < n) {
      const uint64_t k1 = key_of(tis, out, key, c + 1);
      if (k1 > kc) c++, kc = k1;
    }
    if (kc <= key_of(tis, out, key, i)) return;
    swap_at(out, key, i, c);
    i = c;
  }
}

#define KEY_SCRATCH 2048 /* keys kept on the stack (16 KB); more are found again */

static void sort_tree_order(const ts_aabb_tree *tis, uint32_t *out, uint32_t n) {
  if (n < 2) return;
  uint64_t scratch[KEY_SCRATCH], *key = n <= KEY_SCRATCH ? scratch : NULL;
  for (uint32_t i = 0; key && i < n; i++) key[i] = leaf_key(tis, out[i]);
  for (uint32_t i = n / 2; i-- > 0;) sift(tis, out, key, i, n);
  for (uint32_t e = n - 1; e > 0; e--) {
    swap_at(out, key, 0, e);
    sift(tis, out, key, 0, e);
  }
}

enum { ORDER_INDEX = 0, ORDER_TREE = 1 };

static uint32_t descend(const src *s, const ts_aabb_tree *tis, const double (*x)[3], double grow,
                        int order, uint32_t *out, uint32_t cap, ts_collide_stats *stats,
                        int *err) {
  ts_collide_stats st = {0, 0};
  uint32_t n = 0, over = 0;
  int full = 0;
  *err = 0;
  if (tis->n_tris == 0) {
    if (stats) *stats = st;
    return 0;
  }
  const ts_obb_node *tn = s->box ? NULL : s->tree->nodes;
  cand_pair stack[STACK];
  int sp = 0;
  stack[sp++] = (cand_pair){0, 0};
  while (sp > 0) {
    const cand_pair p = stack[--sp];
    ts_obb oa;
    double ext[3];
    world_box(s, p.a, grow, &oa, ext);
    const ts_aabb_node *nb = &tis->nodes[p.b];
    st.box_tests++;
    if (oa.c[0] - ext[0] > nb->hi[0] || oa.c[0] + ext[0] < nb->lo[0] ||
        oa.c[1] - ext[1] > nb->hi[1] || oa.c[1] + ext[1] < nb->lo[1] ||
        oa.c[2] - ext[2] > nb->hi[2] || oa.c[2] + ext[2] < nb->lo[2])
      continue;
    const int la = !tn || tn[p.a].feature >= 0, lb = nb->tri >= 0;
    if (la && lb) {
      /* the triangle's own box: its bounds, then the 15 axes */
      const uint32_t *t = tis->tris[nb->tri];
      double lo[3], hi[3];
      for (int k = 0; k < 3; k++) {
        if (!x) { /* no positions: the fat leaf box, which holds the triangle */
          lo[k] = nb->lo[k], hi[k] = nb->hi[k];
          continue;
        }
        const double a = x[t[0]][k], b = x[t[1]][k], c = x[t[2]][k];
        lo[k] = fmin(a, fmin(b, c)) - LEAF_SLACK;
        hi[k] = fmax(a, fmax(b, c)) + LEAF_SLACK;
      }
      if (oa.c[0] - ext[0] > hi[0] || oa.c[0] + ext[0] < lo[0] ||
          oa.c[1] - ext[1] > hi[1] || oa.c[1] + ext[1] < lo[1] ||
          oa.c[2] - ext[2] > hi[2] || oa.c[2] + ext[2] < lo[2])
        continue;
      if (!ts_sat_obb_aabb(&oa, lo, hi, TS_SAT_EPS)) continue;
      st.leaf_tests++;
      /* several tool leaves may reach one triangle: compact the repeats
       * when the buffer fills */
      const uint32_t tri = (uint32_t)nb->tri;
      if (n == cap && !full) {
        n = sort_unique(out, n);
        full = n == cap; /* still full: out stays sorted from here */
      }
      if (n < cap)
        out[n++] = tri;
      else if (!bsearch(&tri, out, n, sizeof *out, cmp_u32))
        over++; /* a triangle not stored (a repeat of one stored is not counted) */
      continue;
    }
    if (sp + 2 > STACK) {
      *err = TS_EINTERNAL;
      break;
    }
    const double sa = oa.e[0] + oa.e[1] + oa.e[2];
    const double sb = 0.5 * ((nb->hi[0] - nb->lo[0]) + (nb->hi[1] - nb->lo[1]) + (nb->hi[2] - nb->lo[2]));
    if (lb || (!la && sa >= sb)) {
      stack[sp++] = (cand_pair){tn[p.a].child[1], p.b};
      stack[sp++] = (cand_pair){tn[p.a].child[0], p.b};
    } else {
      stack[sp++] = (cand_pair){p.a, nb->child[1]};
      stack[sp++] = (cand_pair){p.a, nb->child[0]};
    }
  }
  if (stats) *stats = st;
  n = sort_unique(out, n);
  if (order == ORDER_TREE) sort_tree_order(tis, out, n);
  return n + over;
}

static int args_ok(const ts_aabb_tree *tis, const double (*x)[3], double grow, const uint32_t *out,
                   uint32_t cap) {
  (void)x; /* NULL: the fat leaf boxes stand for the triangles' */
  return tis && (out || !cap) && grow >= 0 && isfinite(grow);
}

uint32_t ts_collide_tissue_tris(ts_posed_tool *pt, const ts_aabb_tree *tis, const double (*x)[3],
                                double grow, uint32_t *out, uint32_t cap, ts_collide_stats *stats) {
  if (!pt || !pt->tree || !args_ok(tis, x, grow, out, cap)) return 0;
  const src s = {.pt = pt, .tree = pt->tree};
  int err;
  return descend(&s, tis, x, grow, ORDER_TREE, out, cap, stats, &err);
}

uint32_t ts_collide_tissue_tris_frame(const ts_obb_tree *tree, const double R[3][3],
                                      const double o[3], const ts_aabb_tree *tis,
                                      const double (*x)[3], double grow, uint32_t *out,
                                      uint32_t cap, ts_collide_stats *stats) {
  if (!tree || tree->kind == TS_SHAPE_JAWS || !R || !o || !args_ok(tis, x, grow, out, cap))
    return 0;
  const src s = {.tree = tree, .R = R, .o = o};
  int err;
  return descend(&s, tis, x, grow, ORDER_INDEX, out, cap, stats, &err);
}

uint32_t ts_collide_tissue_tris_box(const ts_obb *box, const ts_aabb_tree *tis,
                                    const double (*x)[3], double grow, uint32_t *out,
                                    uint32_t cap, ts_collide_stats *stats) {
  if (!box || !args_ok(tis, x, grow, out, cap)) return 0;
  const src s = {.box = box};
  int err;
  return descend(&s, tis, x, grow, ORDER_INDEX, out, cap, stats, &err);
}
