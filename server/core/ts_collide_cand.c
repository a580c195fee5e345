/*
 * ts_collide_cand.c: the live contact's candidate triangles by the method's
 * descent (ts_collide.h, ts_collide_tissue_tris*): the root boxes, then the
 * tool's OBB tree against the tissue's AABB tree down to pairs of leaves
 * (a tool box against a tissue box by the tool box's axis-aligned bounds,
 * as ts_collide_tool_tissue; at a pair of leaves those bounds and the
 * 15-axis separating-axis test against the tissue triangle's own box, or
 * its fat leaf box when no positions are given), every tool box grown by
 * the caller's margin; the tissue side is split first (see descend). The
 * response (ts_contact.c, ts_ms_contact.c) then tests each candidate
 * exactly (signed distance of its corners, the triangle passes), as the
 * leaf test of ts_collide_tool_tissue would, but with its own allowances
 * and sweeps, which is why it wants the candidates rather than the
 * contacts.
 *
 * Before, the live paths took every triangle whose fat leaf box met the
 * axis-aligned box of the tool's root OBB (swept between two poses, grown
 * by the margin): for the jaws and the dental instrument on the standard
 * path that is 1.3 to 1.6 times the triangles their leaf boxes reach
 * (test_contact_descent). The tool boxes here are placed
 * from the tool's frame on the fly (a rotation per visited node) or taken
 * from a posed tool's cache; nothing is allocated (but a stack for a tree
 * deeper than any builder makes, see STACK).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_collide.h"
#include "ts_error.h"

/* Both walks are depth first, two children pushed for one popped, so a
 * walk down a tree of D levels (ts_aabb_tree.depth, ts_obb_tree.depth: 1
 * for a single leaf) holds at most D entries: one sibling left pending per
 * level above, and the two children at the deepest. The builders bound D
 * (the tissue tree splits at the median: 33 levels for 2^32 triangles; the
 * tool tree by the mean down to 48 levels and at the median below it, 81),
 * so the fixed stacks hold every tree they make. Before, a deeper tree
 * stopped the walk where the stack filled and the triangles beyond were
 * silently no candidates; now a tree deeper than STACK (hand-made, or a
 * future builder's) walks on a heap stack sized by its depth
 * (test_collide_cand_deep), and should even that allocation fail (or a
 * tree be deeper than its depth field says), the candidates are the brute
 * force's superset: every triangle whose box meets the root box's bounds. */
#define STACK 512
#define LEAF_SLACK 1e-7 /* m: as ts_collide_tool_tissue's triangle box */

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

/* The fallback when no stack can be had: every triangle whose box (its own
 * at x, else its fat leaf box) meets the root box's bounds, in ascending
 * order: a superset of the descent's (the response tests each exactly). */
static uint32_t root_scan(const ts_aabb_tree *tis, const double (*x)[3], const ts_obb *root,
                          const double rext[3], uint32_t *out, uint32_t cap,
                          ts_collide_stats *st) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < tis->n_tris; k++) {
    const uint32_t *t = tis->tris[k];
    const ts_aabb_node *leaf = &tis->nodes[tis->leaf[k]];
    double lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
      if (!x) {
        lo[a] = leaf->lo[a], hi[a] = leaf->hi[a];
        continue;
      }
      lo[a] = fmin(x[t[0]][a], fmin(x[t[1]][a], x[t[2]][a])) - LEAF_SLACK;
      hi[a] = fmax(x[t[0]][a], fmax(x[t[1]][a], x[t[2]][a])) + LEAF_SLACK;
    }
    st->box_tests++;
    if (root->c[0] - rext[0] > hi[0] || root->c[0] + rext[0] < lo[0] ||
        root->c[1] - rext[1] > hi[1] || root->c[1] + rext[1] < lo[1] ||
        root->c[2] - rext[2] > hi[2] || root->c[2] + rext[2] < lo[2])
      continue;
    if (n < cap) out[n] = k;
    n++;
  }
  return n;
}

static int cmp_u32(const void *a, const void *b) {
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

enum { ORDER_INDEX = 0, ORDER_TREE = 1 };

/* The descent splits the tissue side first: the tool's root box walks the
 * tissue tree as ts_aabb_tree_query_box walks it (so each triangle comes
 * once, in that order, with no sorting or marks), and at each tissue leaf
 * that its bounds reach the tool's tree is descended against the
 * triangle's box until one tool leaf box meets it by the 15 axes (one pair
 * of leaves is enough to make the triangle a candidate). Splitting the
 * larger box instead (ts_collide_tool_tissue's rule) reaches each
 * candidate through every tool leaf near it: on the standard path the
 * instrument's response took 4.4 times the root box's time that way
 * (collide:patch-L, 1127 against 259 us a step), for 54 candidates
 * instead of 80. */
/* The tool's tree against one tissue box [lo, hi], down to the first pair
 * of leaves that meet (1) or none (0); the root box and its bounds are the
 * caller's. *err is set (and 0 returned) when the stack would overflow. */
static inline int tool_hits(const src *s, const ts_obb_node *tn, int single, const ts_obb *root,
                            const double rext[3], double grow, const double lo[3],
                            const double hi[3], int32_t *tstack, int tstack_cap,
                            ts_collide_stats *st, int *err) {
  int hit = 0, tp = 0;
  tstack[tp++] = 0;
  while (tp > 0 && !hit) {
    const int32_t a = tstack[--tp];
    ts_obb oa;
    double ext[3];
    if (a == 0) {
      oa = *root;
      memcpy(ext, rext, sizeof ext);
    } else {
      world_box(s, a, grow, &oa, ext);
    }
    st->box_tests++;
    if (oa.c[0] - ext[0] > hi[0] || oa.c[0] + ext[0] < lo[0] ||
        oa.c[1] - ext[1] > hi[1] || oa.c[1] + ext[1] < lo[1] ||
        oa.c[2] - ext[2] > hi[2] || oa.c[2] + ext[2] < lo[2])
      continue;
    if (!tn || tn[a].feature >= 0) {
      /* a tool that is one box (a sphere, a capsule, a primitive's bound)
       * is taken by those bounds alone: its descent is then
       * ts_aabb_tree_query_box with the box's bounds, and the 15 axes at
       * the leaf, which rejected no triangle of the sphere or the capsule
       * on the standard path (test_contact_descent), made the sphere's
       * response 1.3 times slower (collide:patch-L, 437 against 310 us a
       * step beside main's build) */
      st->leaf_tests++;
      hit = single || ts_sat_obb_aabb(&oa, lo, hi, TS_SAT_EPS);
      continue;
    }
    if (tp + 2 > tstack_cap) {
      *err = TS_EINTERNAL;
      return 0;
    }
    tstack[tp++] = tn[a].child[1];
    tstack[tp++] = tn[a].child[0];
  }
  return hit;
}

/* The tool's tree against n tissue boxes at once (box[j]: lo then hi, each
 * inside the root box's bounds): hit[j] (cleared by the caller) set where
 * tool_hits would find a pair of leaves for box j. One descent of the tool's
 * tree carries the boxes that still reach each node (those whose bounds meet
 * the node's and that no leaf has taken yet), so a tool box is placed once
 * for all of them rather than once per box; a box is tested only at nodes
 * tool_hits would visit for it, in the same order, by the same tests on the
 * same doubles, and the predicate (a leaf whose ancestors' bounds and own
 * bounds and 15 axes meet the box) does not depend on the order anyway. The lists of the nodes on the way down are
 * kept one above the other in list (a child's list is its parent's,
 * filtered; a popped node's drops everything above its parent's). Returns
 * 0, or -1 when list or the stack would overflow (a tree deeper than these
 * lists hold: the caller then descends per box). */
#define BATCH 128                 /* boxes per descent */
#define BATCH_LIST (BATCH * 16)   /* 16 levels of full lists (the instrument's tree: 13) */
typedef struct batch_entry {
  int32_t node;
  uint16_t start, len; /* its parent's list */
} batch_entry;

static int batch_hits(const src *s, const ts_obb_node *tn, int single, const ts_obb *root,
                      const double rext[3], double grow, const double (*box)[6], uint32_t n,
                      uint8_t *hit) {
  uint16_t list[BATCH_LIST];
  batch_entry stack[STACK];
  if (n > BATCH) return -1;
  for (uint32_t j = 0; j < n; j++) list[j] = (uint16_t)j;
  int sp = 0;
  stack[sp++] = (batch_entry){0, 0, (uint16_t)n};
  while (sp > 0) {
    const batch_entry e = stack[--sp];
    uint32_t top = (uint32_t)e.start + e.len;
    if (top + e.len > BATCH_LIST) return -1;
    ts_obb oa;
    double ext[3];
    if (e.node == 0) {
      oa = *root;
      memcpy(ext, rext, sizeof ext);
    } else {
      world_box(s, e.node, grow, &oa, ext);
    }
    const double olo[3] = {oa.c[0] - ext[0], oa.c[1] - ext[1], oa.c[2] - ext[2]};
    const double ohi[3] = {oa.c[0] + ext[0], oa.c[1] + ext[1], oa.c[2] + ext[2]};
    const uint32_t start = top;
    for (uint32_t i = e.start; i < (uint32_t)e.start + e.len; i++) {
      const uint16_t j = list[i];
      const double *b = box[j];
      if (hit[j] || olo[0] > b[3] || ohi[0] < b[0] || olo[1] > b[4] || ohi[1] < b[1] ||
          olo[2] > b[5] || ohi[2] < b[2])
        continue;
      list[top++] = j;
    }
    if (top == start) continue;
    if (tn[e.node].feature >= 0) { /* a leaf: as tool_hits' */
      for (uint32_t i = start; i < top; i++)
        hit[list[i]] = (uint8_t)(single || ts_sat_obb_aabb(&oa, box[list[i]], box[list[i]] + 3,
                                                           TS_SAT_EPS));
      continue;
    }
    if (sp + 2 > STACK) return -1;
    const uint16_t len = (uint16_t)(top - start);
    stack[sp++] = (batch_entry){tn[e.node].child[1], (uint16_t)start, len};
    stack[sp++] = (batch_entry){tn[e.node].child[0], (uint16_t)start, len};
  }
  return 0;
}

/* A batch of m tissue boxes (triangles tri) that passed the root box's
 * bounds, in their order: those the tool's tree reaches appended to out
 * (n of them before; the count returned may exceed cap). A tree deeper than
 * batch_hits' lists takes tool_hits box by box; *err as tool_hits sets it. */
static uint32_t batch_emit(const src *s, const ts_obb_node *tn, int single, const ts_obb *root,
                           const double rext[3], double grow, const double (*box)[6],
                           const uint32_t *tri, uint8_t *hit, uint32_t m, int32_t *tstack,
                           int tstack_cap, ts_collide_stats *st, int *err, uint32_t *out,
                           uint32_t cap, uint32_t n) {
  if (batch_hits(s, tn, single, root, rext, grow, box, m, hit))
    for (uint32_t i = 0; i < m; i++) {
      hit[i] = (uint8_t)tool_hits(s, tn, single, root, rext, grow, box[i], box[i] + 3, tstack,
                                  tstack_cap, st, err);
      if (*err) return n;
    }
  for (uint32_t i = 0; i < m; i++) {
    if (!hit[i]) continue;
    if (n < cap) out[n] = tri[i];
    n++;
  }
  return n;
}

/* The descent splits the tissue side first: the tool's root box walks the
 * tissue tree as ts_aabb_tree_query_box walks it (so each triangle comes
 * once, in that order, with no sorting or marks), and at each tissue leaf
 * that its bounds reach the tool's tree is descended against the
 * triangle's box until one tool leaf box meets it by the 15 axes (one pair
 * of leaves is enough to make the triangle a candidate). Splitting the
 * larger box instead (ts_collide_tool_tissue's rule) reaches each
 * candidate through every tool leaf near it: on the standard path the
 * instrument's response took 4.4 times the root box's time that way
 * (collide:patch-L, 1127 against 259 us a step), for 54 candidates
 * instead of 80. tgrow (m, >= 0) grows every tissue box (the fat ones:
 * x NULL) on each side, for a superset over boxes that may grow by that
 * much (ts_collide_tissue_tris_wide); 0 for the exact walk. batched: the
 * leaves the root box reaches are gathered BATCH at a time, in the walk's
 * order, and the tool's tree descended once for each batch (batch_hits):
 * the same triangles in the same order, with the tool's boxes placed once
 * a batch rather than once a leaf; the stats then leave the batches' tests
 * out, so only the walk that reports none takes it
 * (ts_collide_tissue_tris_wide). */
static uint32_t descend(const src *s, const ts_aabb_tree *tis, const double (*x)[3], double grow,
                        double tgrow, int order, int batched, uint32_t *out, uint32_t cap,
                        ts_collide_stats *stats, int *err) {
  ts_collide_stats st = {0, 0};
  uint32_t n = 0;
  *err = 0;
  if (tis->n_tris == 0) {
    if (stats) *stats = st;
    return 0;
  }
  const ts_obb_node *tn = s->box ? NULL : s->tree->nodes;
  const int single = !tn || tn[0].feature >= 0;
  ts_obb root;
  double rext[3];
  world_box(s, 0, grow, &root, rext);
  int32_t fixed[2][STACK];
  int32_t *stack = fixed[0], *tstack = fixed[1], *heap = NULL;
  /* room: the depth of each tree (see STACK), at least 2 */
  const uint32_t tis_room = tis->depth > 2 ? tis->depth : 2;
  const uint32_t tool_room = tn && s->tree->depth > 2 ? s->tree->depth : 2;
  if (tis_room > STACK || tool_room > STACK) {
    heap = malloc(sizeof *heap * ((size_t)tis_room + tool_room));
    if (!heap) {
      n = root_scan(tis, x, &root, rext, out, cap, &st);
      if (stats) *stats = st;
      return n; /* in ascending order already */
    }
    stack = heap;
    tstack = heap + tis_room;
  }
  const int stack_cap = tis_room > STACK ? (int)tis_room : STACK;
  const int tstack_cap = tool_room > STACK ? (int)tool_room : STACK;
  double bbox[BATCH][6];
  uint32_t btri[BATCH], bm = 0;
  uint8_t bhit[BATCH];
  batched = batched && tn;
  int sp = 0;
  stack[sp++] = 0;
  while (sp > 0) {
    const ts_aabb_node *nb = &tis->nodes[stack[--sp]];
    st.box_tests++;
    if (root.c[0] - rext[0] > nb->hi[0] + tgrow || root.c[0] + rext[0] < nb->lo[0] - tgrow ||
        root.c[1] - rext[1] > nb->hi[1] + tgrow || root.c[1] + rext[1] < nb->lo[1] - tgrow ||
        root.c[2] - rext[2] > nb->hi[2] + tgrow || root.c[2] + rext[2] < nb->lo[2] - tgrow)
      continue;
    if (nb->tri < 0) {
      if (sp + 2 > stack_cap) { /* a tree deeper than its depth says */
        *err = TS_EINTERNAL;
        break;
      }
      stack[sp++] = nb->child[0];
      stack[sp++] = nb->child[1];
      continue;
    }
    /* a tissue leaf: the triangle's own box (or the fat leaf box) */
    const uint32_t *t = tis->tris[nb->tri];
    double lo[3], hi[3];
    for (int k = 0; k < 3; k++) {
      if (!x) { /* no positions: the fat leaf box, which holds the triangle */
        lo[k] = nb->lo[k] - tgrow, hi[k] = nb->hi[k] + tgrow;
        continue;
      }
      const double a = x[t[0]][k], b = x[t[1]][k], c = x[t[2]][k];
      lo[k] = fmin(a, fmin(b, c)) - LEAF_SLACK;
      hi[k] = fmax(a, fmax(b, c)) + LEAF_SLACK;
    }
    if (batched) {
      memcpy(bbox[bm], lo, sizeof lo);
      memcpy(bbox[bm] + 3, hi, sizeof hi);
      btri[bm] = (uint32_t)nb->tri;
      bhit[bm++] = 0;
      if (bm == BATCH) {
        n = batch_emit(s, tn, single, &root, rext, grow, (const double (*)[6])bbox, btri, bhit, bm,
                       tstack, tstack_cap, &st, err, out, cap, n);
        bm = 0;
        if (*err) break;
      }
      continue;
    }
    /* the tool's tree against it, to the first pair of leaves that meet */
    const int hit = tool_hits(s, tn, single, &root, rext, grow, lo, hi, tstack, tstack_cap, &st, err);
    if (*err) break;
    if (!hit) continue;
    if (n < cap) out[n] = (uint32_t)nb->tri;
    n++;
  }
  if (bm && !*err)
    n = batch_emit(s, tn, single, &root, rext, grow, (const double (*)[6])bbox, btri, bhit, bm,
                   tstack, tstack_cap, &st, err, out, cap, n);
  free(heap);
  if (*err) /* a tree deeper than its depth field: the superset, not a cut-short walk */
    n = root_scan(tis, x, &root, rext, out, cap, &st);
  if (stats) *stats = st;
  if (order == ORDER_INDEX) qsort(out, n < cap ? n : cap, sizeof *out, cmp_u32);
  return n;
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
  return descend(&s, tis, x, grow, 0.0, ORDER_TREE, 0, out, cap, stats, &err);
}

uint32_t ts_collide_tissue_tris_frame(const ts_obb_tree *tree, const double R[3][3],
                                      const double o[3], const ts_aabb_tree *tis,
                                      const double (*x)[3], double grow, uint32_t *out,
                                      uint32_t cap, ts_collide_stats *stats) {
  if (!tree || tree->kind == TS_SHAPE_JAWS || !R || !o || !args_ok(tis, x, grow, out, cap))
    return 0;
  const src s = {.tree = tree, .R = R, .o = o};
  int err;
  return descend(&s, tis, x, grow, 0.0, ORDER_INDEX, 0, out, cap, stats, &err);
}

uint32_t ts_collide_tissue_tris_box(const ts_obb *box, const ts_aabb_tree *tis,
                                    const double (*x)[3], double grow, uint32_t *out,
                                    uint32_t cap, ts_collide_stats *stats) {
  if (!box || !args_ok(tis, x, grow, out, cap)) return 0;
  const src s = {.box = box};
  int err;
  return descend(&s, tis, x, grow, 0.0, ORDER_INDEX, 0, out, cap, stats, &err);
}

uint32_t ts_collide_tissue_tris_wide(ts_posed_tool *pt, const ts_aabb_tree *tis, double grow,
                                     double tis_grow, uint32_t *out, uint32_t cap) {
  if (!pt || !pt->tree || !args_ok(tis, NULL, grow, out, cap) || !(tis_grow >= 0) ||
      !isfinite(tis_grow))
    return 0;
  const src s = {.pt = pt, .tree = pt->tree};
  int err;
  const uint32_t n = descend(&s, tis, NULL, grow, tis_grow, ORDER_TREE, 1, out, cap, NULL, &err);
  return err ? UINT32_MAX : n; /* a cut-short walk's superset is in another order */
}

int ts_collide_tissue_tris_among(ts_posed_tool *pt, const ts_aabb_tree *tis, const uint32_t *among,
                                 uint32_t n_among, double grow, uint32_t *out, uint32_t cap,
                                 uint32_t *n_out) {
  if (!pt || !pt->tree || !n_out || !args_ok(tis, NULL, grow, out, cap) || (n_among && !among))
    return TS_EINVAL;
  const ts_obb_node *tn = pt->tree->nodes;
  /* the fixed stacks only: a deeper tree takes the walk (descend) */
  if (tis->depth > STACK || pt->tree->depth > STACK) return TS_ERANGE;
  const src s = {.pt = pt, .tree = pt->tree};
  const int single = tn[0].feature >= 0;
  ts_obb root;
  double rext[3];
  world_box(&s, 0, grow, &root, rext);
  int32_t tstack[STACK];
  ts_collide_stats st = {0, 0};
  uint32_t n = 0;
  int err = 0;
  double box[BATCH][6];
  uint32_t tri[BATCH];
  uint8_t hit[BATCH];
  /* BATCH of the superset at a time, each in its order */
  for (uint32_t j0 = 0; j0 < n_among; j0 += BATCH) {
    const uint32_t j1 = n_among - j0 > BATCH ? j0 + BATCH : n_among;
    uint32_t m = 0;
    for (uint32_t j = j0; j < j1; j++) {
      const uint32_t k = among[j];
      if (k >= tis->n_tris) return TS_EINVAL;
      /* the walk's test at the leaf; its ancestors' boxes hold the leaf's
       * (each the exact union of its children's), so they pass when it does */
      const ts_aabb_node *nb = &tis->nodes[tis->leaf[k]];
      if (root.c[0] - rext[0] > nb->hi[0] || root.c[0] + rext[0] < nb->lo[0] ||
          root.c[1] - rext[1] > nb->hi[1] || root.c[1] + rext[1] < nb->lo[1] ||
          root.c[2] - rext[2] > nb->hi[2] || root.c[2] + rext[2] < nb->lo[2])
        continue;
      memcpy(box[m], nb->lo, sizeof nb->lo);
      memcpy(box[m] + 3, nb->hi, sizeof nb->hi);
      tri[m] = k;
      hit[m++] = 0;
    }
    n = batch_emit(&s, tn, single, &root, rext, grow, (const double (*)[6])box, tri, hit, m, tstack,
                   STACK, &st, &err, out, cap, n);
    if (err) return TS_ERANGE;
  }
  *n_out = n;
  return 0;
}
