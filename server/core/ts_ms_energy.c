/*
 * ts_ms_energy.c: the kinetic and potential energies of a tissue's state
 * (ts_massspring_energy), for the energy-drift tests and the statistics:
 * the springs' stored energy integrates the exponential law's tension over
 * the elongation exactly (with a series near zero strain).
 */
#include "ts_massspring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

/* k L0^2 times the integral of e^(b s) s ds from 0 to eps (eps > 0), the
 * stored energy of one term; the series near 0 avoids cancellation. */
static double term_energy(double k, double b, double L0, double eps) {
  if (eps <= 0 || b == 0) return 0.5 * k * L0 * L0 * eps * eps;
  double y = b * eps, psi;
  if (y < 1e-3)
    psi = eps * eps * (0.5 + y / 3.0 + y * y / 8.0);
  else
    psi = (exp(y) * (y - 1.0) + 1.0) / (b * b);
  return k * L0 * L0 * psi;
}

int ts_massspring_energy(const ts_tissue *t, double *kinetic, double *potential) {
  if (!t || !t->ms || t->ms->n_nodes != t->n_nodes) return TS_EINVAL;
  double ke = 0, pe = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double w = t->inv_mass[i];
    if (!(w > 0)) continue;
    const double *v = t->v[i], *x = t->x[i], *r = t->rest[i], *fe = t->f_ext[i];
    ke += 0.5 * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) / w;
    for (int c = 0; c < 3; c++) pe -= (t->gravity[c] / w + fe[c]) * (x[c] - r[c]);
  }
  const struct ts__ms *ms = t->ms;
  if (ms->sms) /* the scaled mass's share: (1/2) beta |v_below - v_above|^2 */
    ke = 0.5 * ts__ms_sms_mass_dot(t, ms, (const double (*)[3])t->v);
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *h = &ms->hs[s];
    double d[3] = {t->x[h->b][0] - t->x[h->a][0], t->x[h->b][1] - t->x[h->a][1],
                   t->x[h->b][2] - t->x[h->a][2]};
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (h->b1 == 0 && h->b2 == 0) {
      pe += 0.5 * (h->k1 + h->k2) * (l - h->L0) * (l - h->L0);
    } else {
      double eps = (l - h->L0) * h->iL0;
      pe += term_energy(h->k1, h->b1, h->L0, eps) + term_energy(h->k2, h->b2, h->L0, eps);
    }
  }
  pe += ts__ms_guard_energy(t, ms); /* the inversion guard's (ts_ms_guard.c) */
  if (kinetic) *kinetic = ke;
  if (potential) *potential = pe;
  return 0;
}
