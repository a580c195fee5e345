/*
 * ts_xpbd_forces.c: the forces the position-based solver's constraints
 * exerted on each node in its last step (ts_xpbd_node_forces, read for the
 * haptic force and the force field): each constraint's gradient times its
 * multipliers summed over the substeps, scaled to the mean force.
 */
#include <math.h>
#include <string.h>

#include "ts_error.h"
#include "ts_xpbd_internal.h"

int ts_xpbd_node_forces(const ts_xpbd *s, const ts_tissue *t, double (*f)[3]) {
  if (!s || !t || !f || !t->x || t->n_nodes != s->n_nodes) return TS_EINVAL;
  const double (*x)[3] = (const double (*)[3])t->x;
  memset(f, 0, sizeof *f * s->n_nodes);
  const double sc = s->force_scale;
  for (uint32_t j = 0; j < s->n_springs; j++) {
    const ts__dist *c = &s->dist[j];
    double d[3];
    ts__xpbd_sub3(x[c->a], x[c->b], d);
    double l = sqrt(ts__xpbd_dot3(d, d)), lam = s->sum_d[j] * sc;
    if (!(l > 0) || lam == 0) continue;
    for (int k = 0; k < 3; k++) {
      double fk = d[k] / l * lam;
      f[c->a][k] += fk;
      f[c->b][k] -= fk;
    }
  }
  for (uint32_t j = 0; j < s->n_bend; j++) {
    const ts__bend *c = &s->bend[j];
    double p[4][3], g[4][3], lam = s->sum_b[j] * sc;
    if (lam == 0) continue;
    for (int i = 0; i < 4; i++) memcpy(p[i], x[c->p[i]], sizeof p[i]);
    if (isnan(ts_xpbd_dihedral((const double (*)[3])p, g))) continue;
    for (int i = 0; i < 4; i++)
      for (int k = 0; k < 3; k++) f[c->p[i]][k] += g[i][k] * lam;
  }
  for (uint32_t j = 0; j < s->n_vol; j++) {
    const ts__vol *c = &s->vol[j];
    double p[6][3], g[6][3], lam = s->sum_v[j] * sc;
    if (lam == 0) continue;
    for (int i = 0; i < 6; i++) memcpy(p[i], x[c->p[i]], sizeof p[i]);
    ts_xpbd_prism_volume((const double (*)[3])p, g);
    for (int i = 0; i < 6; i++)
      for (int k = 0; k < 3; k++) f[c->p[i]][k] += g[i][k] * lam;
  }
  return 0;
}
