/*
 * ts_handover.c: the hand-over of a live refinement (see ts_handover.h for
 * why and how): the extra node forces that give the refined network the
 * unrefined one's accelerations, the rest lengths that carry the tensions
 * over (and their fit to XPBD's own step), the new nodes' contact
 * allowances, and the smooth fade of all.
 */
#include "ts_handover.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_xpbd.h"

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
#define TS_FIT_MAX_TOOLS 64 /* tools a trial step takes (ts_xpbd_step's limit) */

/* The unrefined network's accelerations at its current state, carried to
 * the refined one's n nodes (acc): an old node keeps its own, a new node
 * gets the mean of its parents' with the push of a parent held by a tool
 * into it removed (the tool's reaction cancels it, so the node's motion,
 * which its new neighbours interpolate, has none). The forces are old's
 * springs at their rest lengths blended with hrest at weight w, gravity,
 * and w times the node forces hf (the view of one solver of the earlier
 * hand-over); fo: scratch, old->n_nodes. */
static void carried_acc(const ts_tissue *old, uint32_t n, const uint32_t (*parents)[2], const ts_tool *tools,
                        int n_tools, const double *hrest, const double (*hf)[3], double w, double (*fo)[3],
                        double (*acc)[3]) {
  const uint32_t n0 = old->n_nodes;
  double r = 0;
  for (int k = 0; k < n_tools; k++)
    if (tools[k].active) r = fmax(r, tools[k].radius);
  node_forces(old, hrest, hf, w, fo);
  for (uint32_t i = 0; i < n0; i++) {
    for (int c = 0; c < 3; c++) acc[i][c] = fo[i][c] * old->inv_mass[i];
    double nrm[3];
    if (old->inv_mass[i] > 0 && r > 0) {
      double pen = tool_depth(tools, n_tools, old->x[i], nrm);
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
}

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
  double(*accx)[3] = malloc(sizeof *accx * n);
  double *told = malloc(sizeof *told * (old->n_springs + 1));
  uint64_t *keys = malloc(sizeof *keys * 2 * ((size_t)old->n_springs + 1));
  if (h) {
    h->f = malloc(sizeof *h->f * n);
    h->f_res = malloc(sizeof *h->f_res * n);
    h->rest = malloc(sizeof *h->rest * (nt->n_springs + 1));
    h->depth = calloc(n, sizeof *h->depth);
  }
  if (!h || !fo || !acc || !accx || !told || !keys || !h->f || !h->f_res || !h->rest || !h->depth) {
    ts_handover_free(h);
    free(fo);
    free(acc);
    free(accx);
    free(told);
    free(keys);
    return TS_ENOMEM;
  }
  /* the unrefined network's accelerations, carried to the new nodes: the
   * mass-spring view (its own springs and the earlier hand-over's node
   * forces) and XPBD's (the earlier hand-over's rest lengths and residual) */
  const ts_handover *oh = old->hand;
  const double w_old = ts_handover_weight(oh, old->time);
  carried_acc(old, n, parents, tools, n_tools, NULL, oh ? (const double(*)[3])oh->f : NULL, w_old, fo, acc);
  carried_acc(old, n, parents, tools, n_tools, oh ? oh->rest : NULL, oh ? (const double(*)[3])oh->f_res : NULL,
              w_old, fo, accx);

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
      h->f_res[i][c] = im > 0 ? accx[i][c] / im - fo[i][c] : 0.0;
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
  free(accx);
  h->start = nt->time;
  h->duration = duration;
  *out = h;
  return 0;
}

#define FIT_PASSES 12    /* trial steps at most */
#define FIT_TOL 0.5e-6   /* m: the first step's error at which the fit stops */

/* A copy of a hand-over (its arrays too), or NULL for h NULL or out of
 * memory (*rc TS_ENOMEM then). */
static ts_handover *copy_hand(const ts_handover *h, uint32_t n, uint32_t ns, int *rc) {
  if (!h) return NULL;
  ts_handover *c = calloc(1, sizeof *c);
  if (c) {
    *c = *h;
    c->f = malloc(sizeof *c->f * n);
    c->f_res = malloc(sizeof *c->f_res * n);
    c->rest = malloc(sizeof *c->rest * (ns + 1));
    c->depth = malloc(sizeof *c->depth * n);
  }
  if (!c || !c->f || !c->f_res || !c->rest || !c->depth) {
    ts_handover_free(c);
    *rc = TS_ENOMEM;
    return NULL;
  }
  memcpy(c->f, h->f, sizeof *c->f * n);
  memcpy(c->f_res, h->f_res, sizeof *c->f_res * n);
  memcpy(c->rest, h->rest, sizeof *c->rest * ns);
  memcpy(c->depth, h->depth, sizeof *c->depth * n);
  return c;
}

/* One XPBD step (built from def, tools at their current poses) of a copy
 * of t's state: disp gets each node's displacement, m. t is left as it
 * was (the copy has its own state arrays, in ws: 6 per node, and its own
 * hand-over, since a diverged step resets it). Returns 0 or an error of
 * ts_xpbd_build/step. */
static int trial_step(const ts_tissue *t, const ts_xpbd_def *def, const ts_tool *tools, int n_tools, double dt,
                      double (*ws)[3], uint8_t *branch, double (*disp)[3]) {
  const uint32_t n = t->n_nodes;
  ts_tissue c = *t;
  c.x = ws;
  c.v = ws + n;
  c.x_prev = ws + 2 * (size_t)n;
  c.f = ws + 3 * (size_t)n;
  c.acc = ws + 4 * (size_t)n;
  c.acc_prev = ws + 5 * (size_t)n;
  c.branch = branch;
  c.ms = NULL;
  memcpy(c.x, t->x, sizeof *c.x * n);
  memcpy(c.v, t->v, sizeof *c.v * n);
  memcpy(c.x_prev, t->x_prev, sizeof *c.x_prev * n);
  memset(c.f, 0, sizeof *c.f * n);
  memset(c.acc, 0, sizeof *c.acc * n);
  memset(c.acc_prev, 0, sizeof *c.acc_prev * n);
  memset(branch, 0, n);
  int rc = 0;
  c.hand = copy_hand(t->hand, n, t->n_springs, &rc);
  if (rc) return rc;
  ts_tool tl[TS_FIT_MAX_TOOLS];
  const int k = n_tools < TS_FIT_MAX_TOOLS ? n_tools : TS_FIT_MAX_TOOLS;
  if (k > 0) memcpy(tl, tools, sizeof *tl * (size_t)k);
  ts_xpbd *x = NULL;
  rc = ts_xpbd_build(&c, def, &x);
  if (!rc) rc = ts_xpbd_step(x, &c, dt, k > 0 ? tl : NULL, k, NULL);
  ts_xpbd_destroy(x);
  ts_handover_free(c.hand);
  if (rc) return rc;
  for (uint32_t i = 0; i < n; i++)
    for (int q = 0; q < 3; q++) disp[i][q] = c.x[i][q] - t->x[i][q];
  return 0;
}

int ts_handover_fit_xpbd(ts_tissue *nt, const ts_tissue *old, const uint32_t (*parents)[2], const ts_xpbd_def *def,
                         const ts_tool *tools, int n_tools, double dt, double *err) {
  if (err) *err = NAN;
  if (!nt || !old || !def || !nt->hand || nt->n_nodes < old->n_nodes ||
      (nt->n_nodes > old->n_nodes && !parents) || !(dt > 0) || !(dt <= 1.0) || n_tools < 0 ||
      (n_tools > 0 && !tools))
    return TS_EINVAL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes, ns = nt->n_springs;
  for (uint32_t i = n0; i < n; i++)
    if (parents[i - n0][0] >= i || parents[i - n0][1] >= i) return TS_EINVAL;
  double(*ws)[3] = malloc(sizeof *ws * 6 * (size_t)n);
  uint8_t *branch = malloc(n);
  double(*want)[3] = malloc(sizeof *want * n), (*e)[3] = malloc(sizeof *e * n), (*be)[3] = malloc(sizeof *be * n);
  double *best = malloc(sizeof *best * (ns + 1));
  int rc = TS_ENOMEM, started = 0;
  if (!ws || !branch || !want || !e || !be || !best) goto out;
  /* the unrefined tissue's step, interpolated onto the new nodes */
  rc = trial_step(old, def, tools, n_tools, dt, ws, branch, want);
  if (rc) goto out;
  for (uint32_t i = n0; i < n; i++)
    for (int k = 0; k < 3; k++) want[i][k] = 0.5 * (want[parents[i - n0][0]][k] + want[parents[i - n0][1]][k]);
  double *rest = nt->hand->rest, best_err = INFINITY, step = 1.0;
  memcpy(best, rest, sizeof *best * ns);
  started = 1;
  for (int pass = 0; pass < FIT_PASSES; pass++) {
    rc = trial_step(nt, def, tools, n_tools, dt, ws, branch, e);
    int diverged = 0;
    if (rc == TS_EDIVERGED && pass > 0) { /* a correction too far: shorter */
      rc = 0;
      diverged = 1;
    } else if (rc) {
      goto out;
    }
    double emax = diverged ? INFINITY : 0.0;
    for (uint32_t i = 0; i < n && !diverged; i++)
      for (int k = 0; k < 3; k++) {
        e[i][k] = nt->inv_mass[i] > 0 ? want[i][k] - e[i][k] : 0.0;
        emax = fmax(emax, fabs(e[i][k]));
      }
    if (!(emax == emax)) emax = INFINITY; /* NaN */
    if (emax < best_err) { /* the best so far: correct from here */
      best_err = emax;
      memcpy(best, rest, sizeof *best * ns);
      memcpy(be, e, sizeof *be * n);
      /* (the step stays: a full one after a shortened one overshoots
         again, measured) */
    } else { /* worse: a step half as long from the best */
      step *= 0.5;
    }
    if (best_err < FIT_TOL || pass + 1 == FIT_PASSES) break;
    /* move the network's equilibrium by step * e: each spring's rest length
       such that it keeps its tension when stretched by that */
    for (uint32_t j = 0; j < ns; j++) {
      const ts_spring *sp = &nt->springs[j];
      double d[3], l = 0, dl = 0;
      for (int k = 0; k < 3; k++) {
        d[k] = nt->x[sp->b][k] - nt->x[sp->a][k];
        l += d[k] * d[k];
      }
      l = sqrt(l);
      rest[j] = best[j];
      if (!(l > 0)) continue;
      for (int k = 0; k < 3; k++) dl += d[k] / l * (be[sp->b][k] - be[sp->a][k]);
      if (dl != 0) rest[j] = rest_for(sp, l + step * dl, tension(sp, l, best[j]));
    }
  }
  if (err) *err = best_err;
  rc = 0;
out:
  if (started) memcpy(nt->hand->rest, best, sizeof *best * ns); /* the best met */
  free(ws);
  free(branch);
  free(want);
  free(e);
  free(be);
  free(best);
  return rc;
}
