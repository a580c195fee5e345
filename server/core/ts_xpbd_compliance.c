/*
 * ts_xpbd_compliance.c: material to compliance for the position-based
 * solver's distance constraints (ts_xpbd.c, "Material to compliance"): a
 * spring's constraint made from its constants (the small-strain compliance
 * 1 / (k1 + k2) and the exponential law's terms), and the law's tangent
 * at the start of every substep, which the sweeps take as a linear
 * constraint.
 */
#include <math.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_xpbd_internal.h"

/* A spring's distance constraint: compliance and law from its constants
 * (k1, b1, k2, b2 of the exponential law; k alone for a hand-made linear
 * spring, as ts_massspring reads them) or the given compliance. TS_EINVAL
 * for an end out of range, equal ends, a rest length not positive and
 * finite, constants negative, NaN or infinite, exponents over 100, or no
 * stiffness at all. */
int ts__xpbd_make_distance(const ts_spring *sp, uint32_t n_nodes, const ts_xpbd_def *def,
                           double given, ts__dist *d) {
  if (sp->a >= n_nodes || sp->b >= n_nodes || sp->a == sp->b) return TS_EINVAL;
  if (!(sp->rest > 0) || !isfinite(sp->rest)) return TS_EINVAL;
  if (!(sp->c >= 0) || !isfinite(sp->c)) return TS_EINVAL;
  memset(d, 0, sizeof *d);
  d->a = sp->a;
  d->b = sp->b;
  d->rest = sp->rest;
  d->c = def->spring_dampers ? sp->c : 0.0;
  d->w1 = 1.0;
  if (def->compliance) {
    if (!(given >= 0) || !isfinite(given)) return TS_EINVAL;
    d->alpha0 = given;
    return 0;
  }
  double k1 = sp->k1, b1 = sp->b1, k2 = sp->k2, b2 = sp->b2;
  double v[5] = {sp->k, k1, k2, b1, b2};
  for (int i = 0; i < 5; i++)
    if (!(v[i] >= 0) || !isfinite(v[i])) return TS_EINVAL;
  if (b1 > 100 || b2 > 100) return TS_EINVAL;
  if (k1 == 0 && k2 == 0) k1 = sp->k, b1 = 0, b2 = 0; /* hand-made linear spring */
  double k = k1 + k2;
  if (!(k > 0) || !isfinite(k)) return TS_EINVAL;
  d->alpha0 = 1.0 / k;
  if (def->nonlinear && (b1 > 0 || b2 > 0)) {
    if (b1 == 0) { /* the exponential term first: the tangent tests b1 */
      double tk = k1, tb = b1;
      k1 = k2, b1 = b2, k2 = tk, b2 = tb;
    }
    d->w1 = k1 / k, d->b1 = b1;
    d->w2 = k2 / k, d->b2 = b2;
  }
  return 0;
}

/* Per-substep constants of the distance constraints, from the positions at
 * the start of the substep (x_prev): the rest length and compliance of the
 * constraint (for a stretched spring with the exponential law, its tangent
 * at the start length, see below), alpha~ = alpha / h^2, gamma, and the inverse of eq.
 * 26's denominator (1 + gamma) (w_a + w_b) + alpha~ (0 for a constraint
 * between two anchored nodes, which never moves). beta: the stiffness-
 * proportional damping (s).
 *
 * The law's tension is T(L) = k0 f(s) (L - L0), s = L / L0 - 1 > 0, f(s) =
 * w1 e^(b1 s) + w2 e^(b2 s), k0 = 1 / alpha0. Around the start length Lp it
 * is replaced by its tangent, T(Lp) + kt (L - Lp) with kt = k0 (f + s f'):
 * a linear constraint of compliance 1 / kt and rest length Lp - T(Lp) / kt.
 * Each substep is then one Newton step on the law, and at rest (L = Lp) the
 * constraint's tension is exactly the law's (around the predicted length
 * instead, h^2 g away from the rest state, the static state would be off
 * by O(h^4)). (Taking the secant k0 f(s) as
 * the constraint's stiffness instead is a fixed-point iteration that
 * oscillates wherever b s > 1 once the sweeps converge.) */
void ts__xpbd_linearise_distance(ts_xpbd *s, const ts_tissue *t, double h, double beta) {
  const double *im = t->inv_mass;
  const double (*x)[3] = (const double (*)[3])s->x_prev;
  const double ih = 1.0 / h, ih2 = ih * ih;
  int has_gamma = 0;
  for (uint32_t j = 0; j < s->n_springs; j++) {
    const ts__dist *c = &s->dist[j];
    double alpha = c->alpha0, rest = c->rest;
    if (c->b1 > 0) {
      double d[3];
      ts__xpbd_sub3(x[c->a], x[c->b], d);
      const double lp = sqrt(ts__xpbd_dot3(d, d)), st = lp / rest - 1.0;
      if (st > 0) { /* stretched: the tangent (NaN skips it; the step catches it) */
        const double e1 = c->w1 * ts_exp_pos(c->b1 * st);
        const double e2 = c->w2 > 0 ? c->w2 * ts_exp_pos(c->b2 * st) : 0.0;
        const double f = e1 + e2, ft = f + st * (c->b1 * e1 + c->b2 * e2); /* kt / k0 */
        alpha /= ft;
        rest = lp - f * st * rest / ft; /* Lp - T(Lp) / kt */
      }
    }
    /* gamma = alpha c / h for the damper c = beta k + c_spring */
    const double gamma = alpha > 0 ? (beta + alpha * c->c) * ih : 0.0;
    const double w = im[c->a] + im[c->b];
    s->rest_now[j] = rest;
    s->at[j] = alpha * ih2;
    s->gamma[j] = gamma;
    s->inv_den[j] = w > 0 ? 1.0 / ((1.0 + gamma) * w + s->at[j]) : 0.0;
    has_gamma |= gamma > 0;
  }
  s->has_gamma = has_gamma;
}
