/*
 * ts_handover_law.c: the spring law as a live refinement's hand-over
 * (ts_handover.h) reads it: a spring's elastic tension at a length and rest
 * length, the rest length that gives it a tension at a length (the
 * inverse, for the rest lengths that carry the tensions over), and the
 * elastic spring forces plus gravity on a set of nodes.
 */
#include <math.h>
#include <string.h>

#include "ts_handover_internal.h"

/* The elastic tension of spring sp at length l with rest length L0 (the law
 * of ts_ms_forces.c without the damper), N. */
double ts__handover_tension(const ts_spring *sp, double l, double L0) {
  double e = l - L0, s = e / L0;
  if (s < 0) s = 0;
  double kk;
  if (sp->k1 == 0 && sp->k2 == 0)
    kk = sp->k;
  else
    kk = sp->k1 * exp(fmin(sp->b1 * s, 700.0)) + sp->k2 * exp(fmin(sp->b2 * s, 700.0));
  return kk * e;
}

/* The elastic tension of spring sp at length l with rest length L0 (as
 * tension) and its derivative with respect to L0 (N/m, negative). */
static double tension_d(const ts_spring *sp, double l, double L0, double *dT) {
  double e = l - L0, s = e / L0, ds = -l / (L0 * L0);
  if (s < 0) s = 0, ds = 0;
  double kk, dkk = 0;
  if (sp->k1 == 0 && sp->k2 == 0) {
    kk = sp->k;
  } else {
    const double u1 = sp->b1 * s, u2 = sp->b2 * s;
    const double e1 = exp(fmin(u1, 700.0)), e2 = exp(fmin(u2, 700.0));
    kk = sp->k1 * e1 + sp->k2 * e2;
    if (u1 < 700) dkk += sp->k1 * sp->b1 * e1;
    if (u2 < 700) dkk += sp->k2 * sp->b2 * e2;
  }
  *dT = dkk * ds * e - kk;
  return kk * e;
}

/* The rest length that gives spring sp the tension T at length l (the law
 * is monotonic in L0: Newton's method kept inside a shrinking bracket,
 * bisecting where a Newton step would leave it, to rounding; a few
 * iterations where bisection took some fifty, each with two exponentials:
 * most of a fit's time besides its trial steps, measured on the liver). */
double ts__handover_rest_for(const ts_spring *sp, double l, double T) {
  const double k0 = sp->k1 == 0 && sp->k2 == 0 ? sp->k : sp->k1 + sp->k2;
  if (T <= 0) /* compressed: the law is linear there */
    return k0 > 0 ? l - T / k0 : l;
  double lo = l * 0.25, hi = l;
  if (ts__handover_tension(sp, l, lo) < T) return lo; /* beyond the law's reach: the nearest */
  if (ts__handover_tension(sp, l, hi) > T) return hi;
  /* start from the law's linear part */
  double x = k0 > 0 ? l - T / k0 : 0.5 * (lo + hi);
  if (!(x > lo && x < hi)) x = 0.5 * (lo + hi);
  for (int it = 0; it < 200 && hi - lo > 1e-15 * l; it++) {
    double dT, g = tension_d(sp, l, x, &dT) - T;
    if (g == 0) return x;
    if (g > 0)
      lo = x;
    else
      hi = x;
    double xn = dT < 0 ? x - g / dT : 0.5 * (lo + hi);
    if (!(xn > lo && xn < hi)) xn = 0.5 * (lo + hi);
    if (fabs(xn - x) <= 1e-15 * l) return xn;
    x = xn;
  }
  return x;
}

double ts__handover_spring_length(const ts_tissue *t, const ts_spring *sp) {
  const double *xa = t->x[sp->a], *xb = t->x[sp->b];
  double d[3] = {xb[0] - xa[0], xb[1] - xa[1], xb[2] - xa[2]};
  return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

/* The rest length spring j of t has in the steps at weight w: its own, or
 * the hand-over's blended towards it (XPBD's view, ts_xpbd_step.c). */
double ts__handover_rest_at(const ts_tissue *t, uint32_t j, const double *hrest, double w) {
  double L0 = t->springs[j].rest;
  return hrest && w > 0 ? L0 + w * (hrest[j] - L0) : L0;
}

/* The elastic spring forces plus gravity on t's nodes nodes[0..nn) (mark[i]
 * set for exactly those) at their current positions, from t's springs
 * springs[0..ns) (every spring of t with a marked end, ascending: each
 * marked node sums its springs in the order of a pass over all of them),
 * their rest lengths blended with hrest at weight w (NULL: their own), plus
 * w times the node forces hf (NULL: none). f (t->n_nodes) is written at the
 * marked nodes only. */
void ts__handover_node_forces(const ts_tissue *t, const uint32_t *nodes, uint32_t nn, const uint8_t *mark,
                              const uint32_t *springs, uint32_t ns, const double *hrest, const double (*hf)[3],
                              double w, double (*f)[3]) {
  for (uint32_t q = 0; q < nn; q++) memset(f[nodes[q]], 0, sizeof f[0]);
  for (uint32_t q = 0; q < ns; q++) {
    const uint32_t j = springs[q];
    const ts_spring *sp = &t->springs[j];
    const double *xa = t->x[sp->a], *xb = t->x[sp->b];
    double d[3] = {xb[0] - xa[0], xb[1] - xa[1], xb[2] - xa[2]};
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    double L0 = ts__handover_rest_at(t, j, hrest, w);
    if (!(l > 0) || !(L0 > 0)) continue;
    double fs = ts__handover_tension(sp, l, L0) / l;
    const int ma = mark[sp->a], mb = mark[sp->b];
    for (int c = 0; c < 3; c++) {
      if (ma) f[sp->a][c] += fs * d[c];
      if (mb) f[sp->b][c] -= fs * d[c];
    }
  }
  for (uint32_t q = 0; q < nn; q++) {
    const uint32_t i = nodes[q];
    if (t->inv_mass[i] == 0) continue;
    double m = 1.0 / t->inv_mass[i];
    for (int c = 0; c < 3; c++) f[i][c] += m * t->gravity[c];
    if (hf && w > 0)
      for (int c = 0; c < 3; c++) f[i][c] += w * hf[i][c];
  }
}
