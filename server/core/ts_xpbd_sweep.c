/*
 * ts_xpbd_sweep.c: the position-based solver's Gauss-Seidel sweeps over its
 * distance, bending and volume constraints (ts_xpbd.c: eq. 26 of the XPBD
 * paper, with a damper in parallel); the distance sweep is the step's hot
 * loop.
 */
#include <math.h>
#include <string.h>

#include "ts_xpbd_internal.h"

/* One sweep over the distance constraints; returns the largest |C +
 * alpha~ lambda| met. */
double ts__xpbd_sweep_distance(ts_xpbd *s, ts_tissue *t) {
  double (*restrict x)[3] = t->x;
  const double (*restrict xp)[3] = (const double (*)[3])s->x_prev;
  const double *restrict im = t->inv_mass;
  const ts__dist *restrict c = s->dist;
  const double *restrict inv_den = s->inv_den, *restrict at = s->at, *restrict gam = s->gamma;
  const double *restrict rest = s->rest_now;
  double *restrict lam = s->lam_d;
  const uint32_t n = s->n_springs;
  const int damped = s->has_gamma;
  double res = 0;
  for (uint32_t j = 0; j < n; j++) {
    if (inv_den[j] == 0) continue;
    const uint32_t a = c[j].a, b = c[j].b;
    const double dx = x[a][0] - x[b][0], dy = x[a][1] - x[b][1], dz = x[a][2] - x[b][2];
    const double l2 = dx * dx + dy * dy + dz * dz;
    if (!(l2 > 1e-24)) continue; /* coincident ends have no direction */
    const double l = sqrt(l2), il = 1.0 / l;
    const double r = l - rest[j] + at[j] * lam[j]; /* C + alpha~ lambda */
    double num = -r;
    if (damped) { /* gamma grad C . (x - x_prev) */
      const double dv = dx * (x[a][0] - xp[a][0] - x[b][0] + xp[b][0]) +
                        dy * (x[a][1] - xp[a][1] - x[b][1] + xp[b][1]) +
                        dz * (x[a][2] - xp[a][2] - x[b][2] + xp[b][2]);
      num -= gam[j] * dv * il;
    }
    if (fabs(r) > res) res = fabs(r);
    const double dl = num * inv_den[j];
    lam[j] += dl;
    const double sa = im[a] * dl * il, sb = im[b] * dl * il;
    x[a][0] += sa * dx, x[a][1] += sa * dy, x[a][2] += sa * dz;
    x[b][0] -= sb * dx, x[b][1] -= sb * dy, x[b][2] -= sb * dz;
  }
  return res;
}

/* The XPBD update of a constraint over np nodes with value C, gradient g,
 * compliance alpha and multiplier *lam; bh = beta / h, the stiffness-
 * proportional damper's gamma. */
static void solve_general(ts_tissue *t, const double (*xp)[3], const uint32_t *idx, int np,
                          double C, double (*g)[3], double alpha, double *lam, double ih2,
                          double bh) {
  const double *im = t->inv_mass;
  double (*x)[3] = t->x;
  double wsum = 0, dv = 0;
  for (int i = 0; i < np; i++) {
    wsum += im[idx[i]] * ts__xpbd_dot3(g[i], g[i]);
    if (bh > 0)
      for (int k = 0; k < 3; k++) dv += g[i][k] * (x[idx[i]][k] - xp[idx[i]][k]);
  }
  if (!(wsum > 0)) return;
  const double at = alpha * ih2, gamma = alpha > 0 ? bh : 0.0;
  const double dl = (-C - at * *lam - gamma * dv) / ((1.0 + gamma) * wsum + at);
  *lam += dl;
  for (int i = 0; i < np; i++) {
    const double w = im[idx[i]] * dl;
    if (w == 0) continue;
    for (int k = 0; k < 3; k++) x[idx[i]][k] += w * g[i][k];
  }
}

void ts__xpbd_sweep_bending(ts_xpbd *s, ts_tissue *t, double ih2, double bh) {
  const double (*xp)[3] = (const double (*)[3])s->x_prev;
  for (uint32_t j = 0; j < s->n_bend; j++) {
    const ts__bend *c = &s->bend[j];
    double p[4][3], g[4][3];
    for (int i = 0; i < 4; i++) memcpy(p[i], t->x[c->p[i]], sizeof p[i]);
    double th = ts_xpbd_dihedral((const double (*)[3])p, g);
    if (isnan(th)) continue;
    /* the angle difference on the circle, in (-pi, pi] */
    double C = remainder(th - c->theta0, 2.0 * TS__PI);
    solve_general(t, xp, c->p, 4, C, g, c->alpha, &s->lam_b[j], ih2, bh);
  }
}

void ts__xpbd_sweep_volume(ts_xpbd *s, ts_tissue *t, double ih2, double bh) {
  const double (*xp)[3] = (const double (*)[3])s->x_prev;
  for (uint32_t j = 0; j < s->n_vol; j++) {
    const ts__vol *c = &s->vol[j];
    double p[6][3], g[6][3];
    for (int i = 0; i < 6; i++) memcpy(p[i], t->x[c->p[i]], sizeof p[i]);
    double C = ts_xpbd_prism_volume((const double (*)[3])p, g) - c->v0;
    solve_general(t, xp, c->p, 6, C, g, c->alpha, &s->lam_v[j], ih2, bh);
  }
}
