/*
 * ts_handover.c: the hand-over of a live refinement (see ts_handover.h for
 * why and how): the extra node forces that give the refined network the
 * unrefined one's accelerations, the new nodes' contact allowances, and the
 * smooth fade of both.
 */
#include "ts_handover.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

double ts_handover_weight(const ts_handover *h, double at) {
  if (!h) return 0.0;
  double u = (at - h->start) / h->duration;
  if (!(u > 0)) return 1.0;
  if (u >= 1) return 0.0;
  return 1.0 - u * u * (3.0 - 2.0 * u);
}

void ts_handover_free(ts_handover *h) {
  if (!h) return;
  free(h->f);
  free(h->f_res);
  free(h->rest);
  free(h->depth);
  free(h);
}

void ts_handover_expire(ts_tissue *t, double at) {
  if (t && t->hand && ts_handover_weight(t->hand, at) == 0.0) {
    ts_handover_free(t->hand);
    t->hand = NULL;
  }
}

/* The elastic tension of spring sp at length l with rest length L0 (the law
 * of ts_ms_forces.c without the damper), N. */
static double tension(const ts_spring *sp, double l, double L0) {
  double e = l - L0, s = e / L0;
  if (s < 0) s = 0;
  double kk;
  if (sp->k1 == 0 && sp->k2 == 0)
    kk = sp->k;
  else
    kk = sp->k1 * exp(fmin(sp->b1 * s, 700.0)) + sp->k2 * exp(fmin(sp->b2 * s, 700.0));
  return kk * e;
}

/* The rest length that gives spring sp the tension T at length l (the law
 * is monotonic in L0; bisection to rounding). */
static double rest_for(const ts_spring *sp, double l, double T) {
  if (T <= 0) { /* compressed: the law is linear there */
    double k0 = sp->k1 == 0 && sp->k2 == 0 ? sp->k : sp->k1 + sp->k2;
    return k0 > 0 ? l - T / k0 : l;
  }
  double lo = l * 0.25, hi = l;
  if (tension(sp, l, lo) < T) return lo; /* beyond the law's reach: the nearest */
  if (tension(sp, l, hi) > T) return hi;
  for (int it = 0; it < 100 && hi - lo > 1e-15 * l; it++) {
    double mid = 0.5 * (lo + hi);
    if (tension(sp, l, mid) > T)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

static double spring_length(const ts_tissue *t, const ts_spring *sp) {
  const double *xa = t->x[sp->a], *xb = t->x[sp->b];
  double d[3] = {xb[0] - xa[0], xb[1] - xa[1], xb[2] - xa[2]};
  return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

/* The rest length spring j of t has in the steps at weight w: its own, or
 * the hand-over's blended towards it (XPBD's view, ts_xpbd.c). */
static double rest_at(const ts_tissue *t, uint32_t j, const double *hrest, double w) {
  double L0 = t->springs[j].rest;
  return hrest && w > 0 ? L0 + w * (hrest[j] - L0) : L0;
}

/* The elastic spring forces plus gravity on every node of t at its current
 * positions, the springs' rest lengths blended with hrest at weight w (NULL:
 * their own), plus w times the node forces hf (NULL: none). */
static void node_forces(const ts_tissue *t, const double *hrest, const double (*hf)[3], double w,
                        double (*f)[3]) {
  memset(f, 0, sizeof *f * t->n_nodes);
  for (uint32_t j = 0; j < t->n_springs; j++) {
    const ts_spring *sp = &t->springs[j];
    const double *xa = t->x[sp->a], *xb = t->x[sp->b];
    double d[3] = {xb[0] - xa[0], xb[1] - xa[1], xb[2] - xa[2]};
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    double L0 = rest_at(t, j, hrest, w);
    if (!(l > 0) || !(L0 > 0)) continue;
    double fs = tension(sp, l, L0) / l;
    for (int c = 0; c < 3; c++) {
      f[sp->a][c] += fs * d[c];
      f[sp->b][c] -= fs * d[c];
    }
  }
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (t->inv_mass[i] == 0) continue;
    double m = 1.0 / t->inv_mass[i];
    for (int c = 0; c < 3; c++) f[i][c] += m * t->gravity[c];
    if (hf && w > 0)
      for (int c = 0; c < 3; c++) f[i][c] += w * hf[i][c];
  }
}

static int cmp_key(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

/* Index of old's spring between nodes a and b (keys: sorted (min << 32 |
 * max) << 0 pairs with the index in the next word), or -1. */
static int64_t find_spring(const uint64_t *keys, uint32_t n, uint32_t a, uint32_t b) {
  uint64_t k = (uint64_t)(a < b ? a : b) << 32 | (a < b ? b : a);
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (keys[2 * (size_t)mid] < k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && keys[2 * (size_t)lo] == k ? (int64_t)keys[2 * (size_t)lo + 1] : -1;
}

/* How deep x is inside the active tools (the deepest), m (negative:
 * outside, by the distance to the nearest); n (may be NULL) gets that
 * tool's outward normal at x. */
static double tool_depth(const ts_tool *tools, int n_tools, const double x[3], double n[3]) {
  double depth = -INFINITY;
  for (int k = 0; k < n_tools; k++) {
    const ts_tool *tl = &tools[k];
    if (!tl->active) continue;
    double a[3], b[3], ab[3], ap[3], l2 = 0, u = 0;
    ts_tool_segment(tl, a, b);
    for (int c = 0; c < 3; c++) {
      ab[c] = b[c] - a[c];
      ap[c] = x[c] - a[c];
      l2 += ab[c] * ab[c];
      u += ap[c] * ab[c];
    }
    u = l2 > 0 ? u / l2 : 0.0;
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double d[3], d2 = 0;
    for (int c = 0; c < 3; c++) {
      d[c] = ap[c] - u * ab[c];
      d2 += d[c] * d[c];
    }
    double dl = sqrt(d2), pen = tl->radius - dl;
    if (pen > depth) {
      depth = pen;
      if (n)
        for (int c = 0; c < 3; c++) n[c] = dl > 0 ? d[c] / dl : c == 1;
    }
  }
  return depth;
}

/* The contact band: a node this close to a tool's surface (relative to its
 * radius) is held by it in either solver (the mass-spring step's skin is
 * 1e-4 r; XPBD ends its substeps on the surface) */
#define CONTACT_BAND 1e-3

int ts_handover_create(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                       const ts_tool *tools, int n_tools, double duration, ts_handover **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!old || !nt || nt->n_nodes < old->n_nodes || (nt->n_nodes > old->n_nodes && !parents) ||
      !(duration > 0) || !isfinite(duration) || n_tools < 0 || (n_tools > 0 && !tools))
    return TS_EINVAL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  for (uint32_t i = n0; i < n; i++)
    if (parents[i - n0][0] >= i || parents[i - n0][1] >= i) return TS_EINVAL;
  ts_handover *h = calloc(1, sizeof *h);
  double(*fo)[3] = malloc(sizeof *fo * n);
  double(*acc)[3] = malloc(sizeof *acc * n);
  double *told = malloc(sizeof *told * (old->n_springs + 1));
  uint64_t *keys = malloc(sizeof *keys * 2 * ((size_t)old->n_springs + 1));
  if (h) {
    h->f = malloc(sizeof *h->f * n);
    h->f_res = malloc(sizeof *h->f_res * n);
    h->rest = malloc(sizeof *h->rest * (nt->n_springs + 1));
    h->depth = calloc(n, sizeof *h->depth);
  }
  if (!h || !fo || !acc || !told || !keys || !h->f || !h->f_res || !h->rest || !h->depth) {
    ts_handover_free(h);
    free(fo);
    free(acc);
    free(told);
    free(keys);
    return TS_ENOMEM;
  }
  /* the unrefined network's accelerations (the mass-spring view: its own
   * springs and the earlier hand-over's node forces), carried to the new
   * nodes */
  const ts_handover *oh = old->hand;
  const double w_old = ts_handover_weight(oh, old->time);
  node_forces(old, NULL, oh ? (const double(*)[3])oh->f : NULL, w_old, fo);
  for (uint32_t i = 0; i < n0; i++) {
    for (int c = 0; c < 3; c++) acc[i][c] = fo[i][c] * old->inv_mass[i];
    /* a node held by a tool: its reaction cancels the push into it, so the
     * node's motion, which its new neighbours interpolate, has none */
    double nrm[3];
    if (old->inv_mass[i] > 0 && n_tools > 0) {
      double pen = tool_depth(tools, n_tools, old->x[i], nrm);
      double r = 0;
      for (int k = 0; k < n_tools; k++)
        if (tools[k].active) r = fmax(r, tools[k].radius);
      double an = acc[i][0] * nrm[0] + acc[i][1] * nrm[1] + acc[i][2] * nrm[2];
      if (pen > -CONTACT_BAND * r && an < 0)
        for (int c = 0; c < 3; c++) acc[i][c] -= an * nrm[c];
    }
  }
  for (uint32_t i = n0; i < n; i++) {
    const uint32_t p = parents[i - n0][0], q = parents[i - n0][1];
    for (int c = 0; c < 3; c++) acc[i][c] = 0.5 * (acc[p][c] + acc[q][c]);
  }
  /* an old node keeps its own acceleration before the tool's reaction (the
   * tool reacts on it in the refined tissue as in the unrefined one) */
  for (uint32_t i = 0; i < n0; i++)
    for (int c = 0; c < 3; c++) acc[i][c] = fo[i][c] * old->inv_mass[i];

  /* the springs' hand-over rest lengths: each spring of the refined
   * network keeps the tension it had (a spring that was there) or its
   * parent edge's (a half of a split edge); any other new spring starts
   * unstretched. The tensions are the unrefined tissue's as the XPBD step
   * sees it (rest lengths blended by an earlier hand-over). */
  for (uint32_t j = 0; j < old->n_springs; j++) {
    const ts_spring *sp = &old->springs[j];
    told[j] = tension(sp, spring_length(old, sp), rest_at(old, j, oh ? oh->rest : NULL, w_old));
    keys[2 * (size_t)j] = (uint64_t)(sp->a < sp->b ? sp->a : sp->b) << 32 | (sp->a < sp->b ? sp->b : sp->a);
    keys[2 * (size_t)j + 1] = j;
  }
  qsort(keys, old->n_springs, 2 * sizeof *keys, cmp_key);
  for (uint32_t j = 0; j < nt->n_springs; j++) {
    const ts_spring *sp = &nt->springs[j];
    int64_t k = -1;
    if (sp->a < n0 && sp->b < n0) {
      k = find_spring(keys, old->n_springs, sp->a, sp->b);
    } else {
      uint32_t m = sp->a >= n0 ? sp->a : sp->b, o = sp->a >= n0 ? sp->b : sp->a;
      const uint32_t *pq = parents[m - n0];
      if (o == pq[0] || o == pq[1]) k = find_spring(keys, old->n_springs, pq[0], pq[1]);
    }
    const double l = spring_length(nt, sp);
    if (k >= 0) {
      const ts_spring *os = &old->springs[k];
      double L0o = rest_at(old, (uint32_t)k, oh ? oh->rest : NULL, w_old);
      if (sp->a < n0 && sp->b < n0 && os->k == sp->k && os->k1 == sp->k1 && os->k2 == sp->k2 &&
          os->b1 == sp->b1 && os->b2 == sp->b2 && os->rest == sp->rest)
        h->rest[j] = L0o; /* the same spring: as it was */
      else
        h->rest[j] = rest_for(sp, l, told[k]);
    } else {
      h->rest[j] = l > 0 ? l : sp->rest;
    }
  }
  free(told);
  free(keys);
  double rmax = 0;
  for (int k = 0; k < n_tools; k++)
    if (tools[k].active) rmax = fmax(rmax, tools[k].radius);
  /* the refined network's forces there, and what makes up the difference:
   * against its own springs (the mass-spring step's term) and against the
   * hand-over rest lengths (XPBD's residual term) */
  ts_tissue tmp = *nt;
  tmp.hand = NULL;
  node_forces(&tmp, NULL, NULL, 0.0, h->f);
  node_forces(&tmp, h->rest, NULL, 1.0, fo);
  for (uint32_t i = 0; i < n; i++) {
    const double im = nt->inv_mass[i];
    for (int c = 0; c < 3; c++) {
      h->f[i][c] = im > 0 ? acc[i][c] / im - h->f[i][c] : 0.0;
      h->f_res[i][c] = im > 0 ? acc[i][c] / im - fo[i][c] : 0.0;
    }
    if (im == 0) continue;
    double pen = tool_depth(tools, n_tools, nt->x[i], NULL), d = fmax(pen, 0.0);
    if (rmax > 0) /* a tool on the tissue: XPBD's rest lengths alone (ts_handover.h) */
      h->f_res[i][0] = h->f_res[i][1] = h->f_res[i][2] = 0;
    if (i < n0 && oh && oh->depth) d = fmax(d, w_old * oh->depth[i]);
    h->depth[i] = d;
  }
  free(fo);
  free(acc);
  h->start = nt->time;
  h->duration = duration;
  *out = h;
  return 0;
}
