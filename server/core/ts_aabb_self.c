/*
 * ts_aabb_self.c: the tissue's AABB tree walked against itself, with the
 * pruning by second (rest) boxes (see ts_aabb_self.h).
 */
#include "ts_aabb_self.h"

#include <math.h>
#include <string.h>

#include "ts_error.h"

typedef struct walk {
  const ts_aabb_node *nodes;
  const ts_aabb_self_def *d;
  double skip2[2]; /* per prune set (skip (1 - 1e-9))^2; 0: unused */
  ts_aabb_self_fn fn;
  void *ctx;
  ts_aabb_self_stats st;
} walk;

static int overlap(const ts_aabb_node *a, const ts_aabb_node *b, double g) {
  for (int k = 0; k < 3; k++)
    if (a->lo[k] > b->hi[k] + g || b->lo[k] > a->hi[k] + g) return 0;
  return 1;
}

/* 1 when the largest distance between set s's boxes i and j is under its
 * skip: every pair below them is left out by that set's rule */
static int far_under(const walk *w, int s, int32_t i, int32_t j) {
  const ts_aabb_self_prune *p = &w->d->prune[s];
  const double *li = p->lo[i], *hi = p->hi[i], *lj = p->lo[j], *hj = p->hi[j];
  double d2 = 0;
  for (int k = 0; k < 3; k++) {
    const double a = fabs(hi[k] - lj[k]), b = fabs(hj[k] - li[k]);
    const double m = a > b ? a : b;
    d2 += m * m;
    if (d2 >= w->skip2[s]) return 0;
  }
  return 1;
}

static int prune(walk *w, int32_t i, int32_t j) {
  for (int s = 0; s < 2; s++)
    if (w->skip2[s] > 0 && far_under(w, s, i, j)) {
      w->st.pruned[s]++;
      return 1;
    }
  return 0;
}

static double extent(const ts_aabb_node *n) {
  return (n->hi[0] - n->lo[0]) + (n->hi[1] - n->lo[1]) + (n->hi[2] - n->lo[2]);
}

static void pair(walk *w, int32_t a, int32_t b) {
  const ts_aabb_node *na = &w->nodes[a], *nb = &w->nodes[b];
  w->st.node_pairs++;
  if (!overlap(na, nb, w->d->grow)) return;
  if (prune(w, a, b)) return;
  const int la = na->child[0] < 0, lb = nb->child[0] < 0;
  if (la && lb) {
    w->st.leaf_pairs++;
    w->fn(w->ctx, (uint32_t)na->tri, (uint32_t)nb->tri);
  } else if (lb || (!la && extent(na) >= extent(nb))) {
    pair(w, na->child[0], b);
    pair(w, na->child[1], b);
  } else {
    pair(w, a, nb->child[0]);
    pair(w, a, nb->child[1]);
  }
}

/* every pair of distinct leaves under node i */
static void self(walk *w, int32_t i) {
  const ts_aabb_node *n = &w->nodes[i];
  if (n->child[0] < 0) return; /* one leaf: no pair */
  if (prune(w, i, i)) return;
  self(w, n->child[0]);
  self(w, n->child[1]);
  pair(w, n->child[0], n->child[1]);
}

int ts_aabb_self_walk(const ts_aabb_tree *tree, const ts_aabb_self_def *def, ts_aabb_self_fn fn,
                      void *ctx, ts_aabb_self_stats *st) {
  if (st) memset(st, 0, sizeof *st);
  if (!tree || !def || !fn || !(def->grow >= 0 && isfinite(def->grow))) return TS_EINVAL;
  if (!tree->n_nodes) return 0;
  walk w = {.nodes = tree->nodes, .d = def, .fn = fn, .ctx = ctx};
  for (int s = 0; s < 2; s++) {
    const ts_aabb_self_prune *p = &def->prune[s];
    if (p->lo && p->hi && p->skip > 0 && isfinite(p->skip)) {
      const double k = p->skip * (1 - 1e-9);
      w.skip2[s] = k * k;
    }
  }
  self(&w, 0);
  if (st) *st = w.st;
  return 0;
}

int ts_aabb_self_boxes(const ts_aabb_tree *tree, const double (*p)[3], const double (*q)[3],
                       double (*lo)[3], double (*hi)[3]) {
  if (!tree || !p || !lo || !hi) return TS_EINVAL;
  /* every child comes after its parent: children are done first backwards */
  for (uint32_t i = tree->n_nodes; i-- > 0;) {
    const ts_aabb_node *n = &tree->nodes[i];
    if (n->child[0] < 0) {
      const uint32_t *t = tree->tris[n->tri];
      for (int k = 0; k < 3; k++) {
        double v[3];
        for (int c = 0; c < 3; c++) v[c] = q ? p[t[c]][k] - q[t[c]][k] : p[t[c]][k];
        lo[i][k] = hi[i][k] = v[0];
        for (int c = 1; c < 3; c++) {
          if (v[c] < lo[i][k]) lo[i][k] = v[c];
          if (v[c] > hi[i][k]) hi[i][k] = v[c];
        }
      }
    } else {
      const int32_t a = n->child[0], b = n->child[1];
      for (int k = 0; k < 3; k++) {
        lo[i][k] = lo[a][k] < lo[b][k] ? lo[a][k] : lo[b][k];
        hi[i][k] = hi[a][k] > hi[b][k] ? hi[a][k] : hi[b][k];
      }
    }
  }
  return 0;
}
