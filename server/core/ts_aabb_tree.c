/*
 * ts_aabb_tree.c: the tissue's AABB tree: top-down median build, fat leaves
 * with per-point reference positions, bottom-up refit of what escaped, and
 * rebuild when loose (Box2D's b2DynamicTree enlarged boxes; the surface area
 * heuristic of Goldsmith & Salmon 1987 as the looseness measure). See
 * ts_aabb_tree.h.
 */
#include "ts_aabb_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree_internal.h"
#include "ts_error.h"

_Static_assert(sizeof(ts_aabb_node) == 64, "an AABB node is one cache line");

/* min and max without libm calls (positions are checked finite) */
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))


/* The moved-point refit runs on memory that the step's mechanics has just
 * pushed out of the caches: it asks for the points' slots and positions
 * PREFETCH entries ahead, and for their references half as far ahead.
 * Measured on patch-L's standard path (tests/bench/run --quick
 * collide:patch-L, 5,698 listed points a step, 17 escaping; 2026-12-05):
 * 52-83 us a step, and 15-26 us when the same call is repeated at once
 * with the caches warm, so most of it waits on memory. Tried and dropped:
 * reading a chunk's slots first and then the positions of its surface
 * points only (about half the listed nodes are interior): 66-69 us against
 * 52-83 us in alternated runs, no gain past the noise. */
#define PREFETCH 16
#if defined(__GNUC__)
#define PREFETCH_READ(p) __builtin_prefetch((p), 0, 1)
#else
#define PREFETCH_READ(p) ((void)(p))
#endif

/* keeps the node count 2n-1 inside int32_t */
#define MAX_TRIS (1u << 30)

ts_aabb_tree_def ts_default_aabb_tree_def(void) {
  ts_aabb_tree_def d = {.margin = 0.2e-3, .loose_ratio = 2.0};
  return d;
}

static double box_area(const double lo[3], const double hi[3]) {
  double a = hi[0] - lo[0], b = hi[1] - lo[1], c = hi[2] - lo[2];
  return 2.0 * (a * b + b * c + c * a);
}

/* Rounding of a float reference: |x - (float)x| <= |x| 2^-24; the fat box
 * grows by twice that on top of the margin, so a point is inside it both
 * right after it escaped (at its rounded reference) and while it stays
 * within the margin of it. */
#define FLOAT_SLACK 0x1p-22

/* the fat box of triangle k from the reference positions */
static void fat_box(const ts_aabb_tree *t, uint32_t k, double lo[3], double hi[3]) {
  const uint32_t *tr = t->tris[k];
  const double m = t->def.margin;
  const float *r0 = t->ref[t->slot[tr[0]]], *r1 = t->ref[t->slot[tr[1]]],
              *r2 = t->ref[t->slot[tr[2]]];
  for (int a = 0; a < 3; a++) {
    double p = r0[a], q = r1[a], r = r2[a];
    double big = MAX(fabs(p), MAX(fabs(q), fabs(r))) * FLOAT_SLACK;
    lo[a] = MIN(p, MIN(q, r)) - m - big;
    hi[a] = MAX(p, MAX(q, r)) + m + big;
  }
}

void ts__aabb_set_ref(ts_aabb_tree *t, uint32_t i, const double x[3]) {
  t->ref[i][0] = (float)x[0];
  t->ref[i][1] = (float)x[1];
  t->ref[i][2] = (float)x[2];
}

/* ---- build ---- */

static int key_less(const ts_aabb_tree *t, uint32_t a, uint32_t b, int axis) {
  double ka = t->cent[a][axis], kb = t->cent[b][axis];
  return ka < kb || (ka == kb && a < b);
}

/* Reorders v[0..n) so that v[k] is the k-th smallest by (centroid, index)
 * and everything before it is smaller (quickselect, median-of-three). */
static void select_kth(const ts_aabb_tree *t, uint32_t *v, uint32_t n, uint32_t k, int axis) {
  uint32_t lo = 0, hi = n - 1;
  while (hi > lo) {
    uint32_t mid = lo + (hi - lo) / 2;
    /* median of three into v[hi] as the pivot */
    if (key_less(t, v[mid], v[lo], axis)) {
      uint32_t s = v[mid];
      v[mid] = v[lo];
      v[lo] = s;
    }
    if (key_less(t, v[hi], v[lo], axis)) {
      uint32_t s = v[hi];
      v[hi] = v[lo];
      v[lo] = s;
    }
    if (key_less(t, v[mid], v[hi], axis)) {
      uint32_t s = v[mid];
      v[mid] = v[hi];
      v[hi] = s;
    }
    uint32_t pivot = v[hi], store = lo;
    for (uint32_t i = lo; i < hi; i++) {
      if (key_less(t, v[i], pivot, axis)) {
        uint32_t s = v[i];
        v[i] = v[store];
        v[store] = s;
        store++;
      }
    }
    uint32_t s = v[store];
    v[store] = v[hi];
    v[hi] = s;
    if (store == k) return;
    if (store < k)
      lo = store + 1;
    else
      hi = store - 1;
  }
}

static int32_t build(ts_aabb_tree *t, uint32_t first, uint32_t count, int32_t parent,
                     uint32_t depth, int32_t *next) {
  int32_t idx = (*next)++;
  ts_aabb_node *nd = &t->nodes[idx];
  nd->parent = parent;
  if (depth > t->depth) t->depth = depth;
  if (count == 1) {
    uint32_t k = t->perm[first];
    nd->child[0] = nd->child[1] = -1;
    nd->tri = (int32_t)k;
    t->leaf[k] = idx;
    fat_box(t, k, nd->lo, nd->hi);
    return idx;
  }
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (uint32_t i = first; i < first + count; i++) {
    const double *c = t->cent[t->perm[i]];
    for (int a = 0; a < 3; a++) lo[a] = fmin(lo[a], c[a]), hi[a] = fmax(hi[a], c[a]);
  }
  int axis = 0;
  for (int a = 1; a < 3; a++)
    if (hi[a] - lo[a] > hi[axis] - lo[axis]) axis = a;
  uint32_t half = count / 2;
  select_kth(t, t->perm + first, count, half, axis);
  nd->tri = -1;
  int32_t c0 = build(t, first, half, idx, depth + 1, next);
  int32_t c1 = build(t, first + half, count - half, idx, depth + 1, next);
  nd = &t->nodes[idx];
  nd->child[0] = c0;
  nd->child[1] = c1;
  for (int a = 0; a < 3; a++) {
    nd->lo[a] = MIN(t->nodes[c0].lo[a], t->nodes[c1].lo[a]);
    nd->hi[a] = MAX(t->nodes[c0].hi[a], t->nodes[c1].hi[a]);
  }
  return idx;
}

static int used_finite(const ts_aabb_tree *t, const double (*x)[3]) {
  for (uint32_t i = 0; i < t->n_used; i++) {
    const double *p = x[t->used[i]];
    if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2])) return 0;
  }
  return 1;
}

static void do_build(ts_aabb_tree *t, const double (*x)[3]) {
  t->armed = 0;
  t->n_watch = 0; /* every point at its reference: none near its escape */
  for (uint32_t i = 0; i < t->n_used; i++) ts__aabb_set_ref(t, i, x[t->used[i]]);
  for (uint32_t k = 0; k < t->n_tris; k++) {
    const uint32_t *tr = t->tris[k];
    for (int a = 0; a < 3; a++) t->cent[k][a] = (x[tr[0]][a] + x[tr[1]][a] + x[tr[2]][a]) / 3.0;
    t->perm[k] = k;
  }
  t->depth = 0;
  t->area = 0;
  if (t->n_tris) {
    int32_t next = 0;
    build(t, 0, t->n_tris, -1, 1, &next);
    for (uint32_t i = 0; i < t->n_nodes; i++) t->area += box_area(t->nodes[i].lo, t->nodes[i].hi);
  }
  t->area_built = t->area;
  t->stats.rebuilds++;
}

int ts_aabb_tree_rebuild(ts_aabb_tree *t, const double (*x)[3]) {
  if (!t || (!x && t->n_used)) return TS_EINVAL;
  if (!used_finite(t, x)) return TS_ENAN;
  do_build(t, x);
  return 0;
}

/* ---- create / destroy ---- */

static void free_parts(ts_aabb_tree *t) {
  free(t->tris);
  free(t->nodes);
  free(t->leaf);
  free(t->ref);
  free(t->slot);
  free(t->used);
  free(t->adj_off);
  free(t->adj);
  free(t->mark);
  free(t->pmark);
  free(t->watch);
  free(t->queue);
  free(t->pend);
  free(t->tqueue);
  free(t->perm);
  free(t->cent);
}

void ts_aabb_tree_destroy(ts_aabb_tree *t) {
  if (!t) return;
  free_parts(t);
  free(t);
}

int ts_aabb_tree_create(const ts_aabb_tree_def *def, uint32_t n_points, const double (*x)[3],
                        uint32_t n_tris, const uint32_t (*tris)[3], ts_aabb_tree **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  ts_aabb_tree_def d = def ? *def : ts_default_aabb_tree_def();
  if (!(d.margin >= 0) || !isfinite(d.margin) || !(d.loose_ratio >= 1) || !isfinite(d.loose_ratio))
    return TS_EINVAL;
  if (n_tris && (!x || !tris)) return TS_EINVAL;
  if (n_tris > MAX_TRIS) return TS_ETOOBIG;
  for (uint32_t k = 0; k < n_tris; k++)
    for (int i = 0; i < 3; i++)
      if (tris[k][i] >= n_points) return TS_EINVAL;

  ts_aabb_tree *t = calloc(1, sizeof *t);
  if (!t) return TS_ENOMEM;
  t->def = d;
  t->n_points = n_points;
  t->esc2 = d.margin * ESCAPE * d.margin * ESCAPE;
  t->n_tris = n_tris;
  t->n_nodes = n_tris ? 2 * n_tris - 1 : 0;
  size_t nt = n_tris ? n_tris : 1, np = n_points ? n_points : 1;
  t->tris = malloc(sizeof *t->tris * nt);
  t->nodes = calloc(t->n_nodes ? t->n_nodes : 1, sizeof *t->nodes);
  t->leaf = malloc(sizeof *t->leaf * nt);
  t->slot = malloc(sizeof *t->slot * np);
  t->adj_off = calloc(np + 1, sizeof *t->adj_off);
  t->adj = malloc(sizeof *t->adj * 3 * nt);
  t->mark = calloc(nt, sizeof *t->mark);
  t->queue = malloc(sizeof *t->queue * np);
  t->pend = malloc(sizeof *t->pend * np);
  t->tqueue = malloc(sizeof *t->tqueue * nt);
  t->perm = malloc(sizeof *t->perm * nt);
  t->cent = malloc(sizeof *t->cent * nt);
  if (!t->tris || !t->nodes || !t->leaf || !t->slot || !t->adj_off || !t->adj || !t->mark ||
      !t->queue || !t->pend || !t->tqueue || !t->perm || !t->cent) {
    ts_aabb_tree_destroy(t);
    return TS_ENOMEM;
  }
  if (n_tris) memcpy(t->tris, tris, sizeof *t->tris * n_tris);

  /* point -> triangles (CSR) and the list of used points */
  for (uint32_t k = 0; k < n_tris; k++)
    for (int i = 0; i < 3; i++) t->adj_off[tris[k][i] + 1]++;
  uint32_t n_used = 0;
  for (uint32_t p = 0; p < n_points; p++) {
    if (t->adj_off[p + 1]) n_used++;
    t->adj_off[p + 1] += t->adj_off[p];
  }
  t->used = malloc(sizeof *t->used * (n_used ? n_used : 1));
  t->ref = calloc(n_used ? n_used : 1, sizeof *t->ref);
  t->pmark = calloc(n_used ? n_used : 1, sizeof *t->pmark);
  t->watch = malloc(sizeof *t->watch * (n_used ? n_used : 1));
  uint32_t *fill = malloc(sizeof *fill * np);
  if (!t->used || !t->ref || !t->pmark || !t->watch || !fill) {
    free(fill);
    ts_aabb_tree_destroy(t);
    return TS_ENOMEM;
  }
  memcpy(fill, t->adj_off, sizeof *fill * n_points);
  for (uint32_t k = 0; k < n_tris; k++)
    for (int i = 0; i < 3; i++) {
      uint32_t p = tris[k][i];
      /* a triangle listing a point twice is listed once around it */
      if (i > 0 && tris[k][i - 1] == p) continue;
      if (i == 2 && tris[k][0] == p) continue;
      t->adj[fill[p]++] = k;
    }
  /* close the gaps left by repeated corners: recompute the offsets */
  uint32_t w = 0;
  for (uint32_t p = 0; p < n_points; p++) {
    uint32_t b = t->adj_off[p], e = fill[p];
    t->adj_off[p] = w;
    for (uint32_t i = b; i < e; i++) t->adj[w++] = t->adj[i];
  }
  t->adj_off[n_points] = w;
  free(fill);
  for (uint32_t p = 0; p < n_points; p++) {
    t->slot[p] = UINT32_MAX;
    if (t->adj_off[p + 1] > t->adj_off[p]) t->slot[p] = t->n_used, t->used[t->n_used++] = p;
  }

  if (!used_finite(t, x)) {
    ts_aabb_tree_destroy(t);
    return TS_ENAN;
  }
  do_build(t, x);
  *out = t;
  return 0;
}

int ts_aabb_tree_create_tissue(const ts_aabb_tree_def *def, const ts_tissue *tis,
                               ts_aabb_tree **out) {
  if (!tis) {
    if (out) *out = NULL;
    return TS_EINVAL;
  }
  return ts_aabb_tree_create(def, tis->n_nodes, (const double(*)[3])tis->x, ts_tissue_n_contact_tris(tis),
                             (const uint32_t(*)[3])ts_tissue_contact_tris(tis), out);
}

int ts_aabb_tree_set_topology(ts_aabb_tree *t, uint32_t n_points, const double (*x)[3],
                              uint32_t n_tris, const uint32_t (*tris)[3]) {
  if (!t) return TS_EINVAL;
  ts_aabb_tree *fresh;
  int rc = ts_aabb_tree_create(&t->def, n_points, x, n_tris, tris, &fresh);
  if (rc) return rc;
  ts_aabb_tree_stats st = t->stats;
  free_parts(t);
  *t = *fresh;
  free(fresh);
  t->stats.refits = st.refits;
  t->stats.rebuilds += st.rebuilds;
  return 0;
}

/* ---- refit ---- */

/* Step 2 of a refit, for the n_esc escaped points in t->queue (slots, each
 * once, their references already moved): their triangles get new fat boxes
 * (each once), then the walk up; a rebuild when that made the tree loose.
 * Returns 0 or 1 (rebuilt). */
int ts__aabb_refit_escaped(ts_aabb_tree *t, const double (*x)[3], uint32_t n_esc) {
  t->stats.escaped = n_esc;
  if (n_esc == 0) return 0;
  if (++t->stamp == 0) {
    memset(t->mark, 0, sizeof *t->mark * t->n_tris);
    t->stamp = 1;
  }
  uint32_t n_tri = 0;
  for (uint32_t i = 0; i < n_esc; i++) {
    uint32_t p = t->used[t->queue[i]];
    for (uint32_t j = t->adj_off[p]; j < t->adj_off[p + 1]; j++) {
      uint32_t k = t->adj[j];
      if (t->mark[k] == t->stamp) continue;
      t->mark[k] = t->stamp;
      t->tqueue[n_tri++] = k;
    }
  }
  for (uint32_t i = 0; i < n_tri; i++) {
    uint32_t k = t->tqueue[i];
    ts_aabb_node *lf = &t->nodes[t->leaf[k]];
    double lo[3], hi[3];
    fat_box(t, k, lo, hi);
    t->area += box_area(lo, hi) - box_area(lf->lo, lf->hi);
    memcpy(lf->lo, lo, sizeof lo);
    memcpy(lf->hi, hi, sizeof hi);
  }
  t->stats.leaves_refit = n_tri;
  for (uint32_t i = 0; i < n_tri; i++) {
    int32_t n = t->nodes[t->leaf[t->tqueue[i]]].parent;
    while (n >= 0) {
      ts_aabb_node *nd = &t->nodes[n];
      const ts_aabb_node *a = &t->nodes[nd->child[0]], *b = &t->nodes[nd->child[1]];
      double lo[3], hi[3];
      for (int ax = 0; ax < 3; ax++) {
        lo[ax] = MIN(a->lo[ax], b->lo[ax]);
        hi[ax] = MAX(a->hi[ax], b->hi[ax]);
      }
      if (memcmp(lo, nd->lo, sizeof lo) == 0 && memcmp(hi, nd->hi, sizeof hi) == 0) break;
      t->area += box_area(lo, hi) - box_area(nd->lo, nd->hi);
      memcpy(nd->lo, lo, sizeof lo);
      memcpy(nd->hi, hi, sizeof hi);
      t->stats.internal_refit++;
      n = nd->parent;
    }
  }
  if (t->area > t->def.loose_ratio * t->area_built) {
    do_build(t, x);
    return 1;
  }
  return 0;
}

int ts_aabb_tree_refit(ts_aabb_tree *t, const double (*x)[3]) {
  if (!t || (!x && t->n_used)) return TS_EINVAL;
  const double m = t->def.margin * ESCAPE, m2 = m * m;
  t->stats.refits++;
  t->stats.escaped = t->stats.leaves_refit = t->stats.internal_refit = 0;
  t->armed = 0;

  /* 1. points that left their reference box (NaN fails the comparison too) */
  /* locals: the stores into queue could alias the tree's fields otherwise */
  const uint32_t n_used = t->n_used, *used = t->used;
  const float(*ref)[3] = (const float(*)[3])t->ref;
  uint32_t *queue = t->queue, n_esc = 0;
  for (uint32_t i = 0; i < n_used; i++) {
    const double *a = x[used[i]];
    const float *r = ref[i];
    /* one Euclidean test (it implies the per-axis one the fat box needs);
     * a NaN fails the comparison and escapes, to be refused below */
    double dx = a[0] - r[0], dy = a[1] - r[1], dz = a[2] - r[2];
    if (!(dx * dx + dy * dy + dz * dz <= m2)) {
      if (!isfinite(a[0]) || !isfinite(a[1]) || !isfinite(a[2])) return TS_ENAN;
      queue[n_esc++] = i;
    }
  }
  for (uint32_t i = 0; i < n_esc; i++) ts__aabb_set_ref(t, t->queue[i], x[t->used[t->queue[i]]]);
  /* 2. their triangles, the walk up */
  return ts__aabb_refit_escaped(t, x, n_esc);
}

int ts_aabb_tree_refit_moved(ts_aabb_tree *t, const double (*x)[3], const uint32_t *moved,
                             uint32_t n_moved) {
  if (!t || (!x && t->n_used) || (!moved && n_moved)) return TS_EINVAL;
  for (uint32_t i = 0; i < n_moved; i++)
    if (moved[i] >= t->n_points) return TS_EINVAL;
  const double m = t->def.margin * ESCAPE, m2 = m * m;
  t->stats.refits++;
  t->stats.escaped = t->stats.leaves_refit = t->stats.internal_refit = 0;
  t->armed = 0;

  /* 1. the listed points that left their reference box, each queued once
   * (pmark); nothing changes before all are known finite */
  if (++t->pstamp == 0) {
    memset(t->pmark, 0, sizeof *t->pmark * (t->n_used ? t->n_used : 1));
    t->pstamp = 1;
  }
  const uint32_t stamp = t->pstamp, *slot = t->slot;
  const float(*ref)[3] = (const float(*)[3])t->ref;
  uint32_t *queue = t->queue, *pmark = t->pmark, n_esc = 0;
  for (uint32_t i = 0; i < n_moved; i++) {
    /* without a branch on unused points (surface and interior points
     * alternate in a list of moved tissue nodes, a branch mispredicted half
     * the time): they read reference 0 and are dropped with the rare escape */
    if (i + PREFETCH < n_moved) {
      PREFETCH_READ(&slot[moved[i + PREFETCH]]);
      PREFETCH_READ(x[moved[i + PREFETCH]]);
      /* and the reference of a point whose slot came in meanwhile */
      const uint32_t s2 = slot[moved[i + PREFETCH / 2]];
      PREFETCH_READ(ref[s2 != UINT32_MAX ? s2 : 0]);
    }
    const uint32_t s = slot[moved[i]], used = s != UINT32_MAX, sc = used ? s : 0;
    const double *a = x[moved[i]];
    const float *r = ref[sc];
    double dx = a[0] - r[0], dy = a[1] - r[1], dz = a[2] - r[2];
    if ((!(dx * dx + dy * dy + dz * dz <= m2)) & used) {
      if (!isfinite(a[0]) || !isfinite(a[1]) || !isfinite(a[2])) return TS_ENAN;
      /* a repeat escapes again (its reference moves below): queued once */
      if (pmark[s] == stamp) continue;
      pmark[s] = stamp;
      queue[n_esc++] = s;
    }
  }
  for (uint32_t i = 0; i < n_esc; i++) ts__aabb_set_ref(t, queue[i], x[t->used[queue[i]]]);
  /* 2. their triangles, the walk up */
  return ts__aabb_refit_escaped(t, x, n_esc);
}

/* ---- deferred refit (the escape test in the caller's loop) ---- */

void ts_aabb_tree_defer_begin(ts_aabb_tree *t) {
  if (!t) return;
  t->n_pend = 0;
  t->armed = 1;
}

void ts_aabb_tree_defer_cancel(ts_aabb_tree *t) {
  if (t) t->armed = 0;
}

int ts_aabb_tree_defer_refit(ts_aabb_tree *t, const double (*x)[3]) {
  if (!t || (!x && t->n_used)) return TS_EINVAL;
  if (!t->armed) return ts_aabb_tree_refit(t, x);
  /* the noted points only (each checked again: a note may be stale) */
  const uint32_t n = t->n_pend;
  t->n_pend = 0;
  return ts_aabb_tree_refit_moved(t, x, t->pend, n);
}

/* ---- checks and queries ---- */

static int fail(char *err, size_t cap, const char *what, long a, long b) {
  if (err && cap) snprintf(err, cap, "%s (%ld, %ld)", what, a, b);
  return TS_EINTERNAL;
}

int ts_aabb_tree_validate(const ts_aabb_tree *t, const double (*x)[3], char *err, size_t errcap) {
  if (!t) return fail(err, errcap, "no tree", 0, 0);
  if (t->n_nodes != (t->n_tris ? 2 * t->n_tris - 1 : 0))
    return fail(err, errcap, "node count", t->n_nodes, t->n_tris);
  if (!t->n_tris) return 0;
  if (t->nodes[0].parent != -1)
    return fail(err, errcap, "root has a parent", 0, t->nodes[0].parent);
  uint32_t leaves = 0;
  double area = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const ts_aabb_node *nd = &t->nodes[i];
    area += box_area(nd->lo, nd->hi);
    if (i > 0 && (nd->parent < 0 || (uint32_t)nd->parent >= i))
      return fail(err, errcap, "parent index not before the node", i, nd->parent);
    if (i > 0) {
      const ts_aabb_node *p = &t->nodes[nd->parent];
      if (p->child[0] != (int32_t)i && p->child[1] != (int32_t)i)
        return fail(err, errcap, "parent does not list the node", i, nd->parent);
    }
    if (nd->tri >= 0) {
      leaves++;
      if (nd->child[0] != -1 || nd->child[1] != -1)
        return fail(err, errcap, "leaf with children", i, nd->child[0]);
      if ((uint32_t)nd->tri >= t->n_tris || t->leaf[nd->tri] != (int32_t)i)
        return fail(err, errcap, "leaf/triangle map", i, nd->tri);
      const uint32_t *tr = t->tris[nd->tri];
      for (int c = 0; c < 3; c++)
        for (int a = 0; a < 3; a++)
          if (!(x[tr[c]][a] >= nd->lo[a] && x[tr[c]][a] <= nd->hi[a]))
            return fail(err, errcap, "triangle outside its fat box", nd->tri, c);
    } else {
      for (int c = 0; c < 2; c++) {
        int32_t ch = nd->child[c];
        if (ch <= (int32_t)i || (uint32_t)ch >= t->n_nodes || t->nodes[ch].parent != (int32_t)i)
          return fail(err, errcap, "bad child link", i, ch);
      }
      const ts_aabb_node *a = &t->nodes[nd->child[0]], *b = &t->nodes[nd->child[1]];
      for (int ax = 0; ax < 3; ax++)
        if (nd->lo[ax] != fmin(a->lo[ax], b->lo[ax]) || nd->hi[ax] != fmax(a->hi[ax], b->hi[ax]))
          return fail(err, errcap, "internal box is not the union of its children", i, ax);
    }
  }
  if (leaves != t->n_tris) return fail(err, errcap, "leaf count", leaves, t->n_tris);
  /* every node has a parent before it and is listed by it, and 2n-1 nodes with
   * n leaves: so the links form one tree over all nodes */
  for (uint32_t i = 0; i < t->n_used; i++) {
    uint32_t p = t->used[i];
    for (int a = 0; a < 3; a++)
      if (!(fabs(x[p][a] - t->ref[i][a]) <=
            t->def.margin + fabs((double)t->ref[i][a]) * FLOAT_SLACK))
        return fail(err, errcap, "point beyond margin of its reference", p, a);
  }
  if (!(fabs(area - t->area) <= 1e-6 * area + 1e-30))
    return fail(err, errcap, "summed area drifted (x1e12)", (long)(area * 1e12),
                (long)(t->area * 1e12));
  return 0;
}

uint32_t ts_aabb_tree_query_box(const ts_aabb_tree *t, const double lo[3], const double hi[3],
                                uint32_t *out, uint32_t cap) {
  if (!t || !t->n_tris) return 0;
  int32_t stack[128];
  int sp = 0;
  uint32_t n = 0;
  stack[sp++] = 0;
  while (sp > 0) {
    const ts_aabb_node *nd = &t->nodes[stack[--sp]];
    if (nd->lo[0] > hi[0] || nd->hi[0] < lo[0] || nd->lo[1] > hi[1] || nd->hi[1] < lo[1] ||
        nd->lo[2] > hi[2] || nd->hi[2] < lo[2])
      continue;
    if (nd->tri >= 0) {
      if (n < cap && out) out[n] = (uint32_t)nd->tri;
      n++;
    } else {
      stack[sp++] = nd->child[0];
      stack[sp++] = nd->child[1];
    }
  }
  return n;
}
