/*
 * ts_ms_diverge.c: the mass-spring step's divergence tests (a non-finite
 * position or velocity, a node faster than any tissue moves, the kinetic
 * energy growing geometrically; the thresholds in ts_ms_internal.h, why
 * they are what they are in ts_ms_bounds.c) and what a diverged step says
 * about it: which test, by how much, over what, and the node, so that the
 * daemon's log and its Error to the clients can name the reason.
 */
#include <math.h>
#include <stdio.h>

#include "ts_massspring.h"
#include "ts_ms_internal.h"

/* Whether a run of kinetic energy growth long enough for the test is the
 * tissue's own energy coming free rather than the integration's: a layer
 * slipping off a deep tool or a buckled sheet snapping through starts from
 * rest and speeds up geometrically for tens of steps, as an instability
 * does (a 5 mm sphere held 6 mm deep in the default patch: from 2.6 nJ to
 * 0.59 uJ over 20 steps, 6 mm/s on average, and was reset as diverged),
 * but takes its kinetic energy from the springs' and gravity's: the total
 * (ts_massspring_energy) does not grow with it. An unstable integration
 * makes energy: its total grows with the kinetic. So the run is released
 * (not a divergence) while the total has grown by less than half the
 * kinetic energy's growth since the run's middle (its tenth step). One
 * pass over the springs there and each step from the test's on, only while
 * such a run lasts. */
static int released(const ts_tissue *t, const struct ts__ms *ms) {
  double k = 0, p = 0;
  if (ts_massspring_energy(t, &k, &p) != 0) return 0;
  const double k1 = ms->e_run1[0], p1 = ms->e_run1[1];
  if (!isfinite(k1 + p1) || !isfinite(k + p)) return 0;
  return (k + p) - (k1 + p1) < 0.5 * (k - k1);
}

/* The health pass, one loop over the nodes (2-4 % of a capped patch-S
 * step). Tried and dropped: eight independent lanes of sums and maxima,
 * vectorised, the scalar loop only to name a bad node (1.8-2.0 % of the
 * step against 2.0-2.2 %, perf's share of a profiling driver's step): it
 * reads x and v from memory like the rest of the step, and its chain of
 * additions was not what it waited on. */
int ts__ms_health(const ts_tissue *t, struct ts__ms *ms, double *ke_out, double *vmax2_out, ts_step_stats *stats) {
  int why = TS_DIVERGED_NONE;
  uint32_t node = 0, fastest = 0;
  double vmax2 = 0, ke = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const double *x = t->x[i], *v = t->v[i];
    double v2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if (!isfinite(x[0] + x[1] + x[2]) || !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED)) {
      why = !isfinite(x[0] + x[1] + x[2]) ? TS_DIVERGED_POSITION
            : !isfinite(v2)               ? TS_DIVERGED_VELOCITY
                                          : TS_DIVERGED_SPEED;
      node = i;
      vmax2 = v2;
      break;
    }
    if (v2 > vmax2) vmax2 = v2, fastest = i;
    if (t->inv_mass[i] > 0) ke += 0.5 * v2 / t->inv_mass[i];
  }
  uint32_t steps = 0;
  if (!why) {
    if (ke > TS__KE_FLOOR && ke > TS__GROWTH_RATIO * ms->ke_prev) {
      if (ms->growth == 0) ms->ke_run0 = ms->ke_prev;
      ms->growth++;
      /* halfway to the test: the total energy, for released (at the
       * middle, not the start, so that the short runs a pushing tool
       * starts cost no pass over the springs) */
      if (ms->growth == TS__GROWTH_STEPS / 2 &&
          ts_massspring_energy(t, &ms->e_run1[0], &ms->e_run1[1]) != 0)
        ms->e_run1[0] = ms->e_run1[1] = NAN;
    } else {
      ms->growth = 0;
    }
    ms->ke_prev = ke;
    if (ms->growth >= TS__GROWTH_STEPS && !released(t, ms))
      why = TS_DIVERGED_GROWTH, node = fastest, steps = ms->growth;
  }
  if (stats && why) {
    stats->diverged_why = why;
    stats->diverged_node = node;
    stats->diverged_value = why == TS_DIVERGED_GROWTH ? ke : sqrt(vmax2);
    stats->diverged_from = why == TS_DIVERGED_GROWTH ? ms->ke_run0 : 0.0;
    stats->diverged_steps = steps;
    stats->max_speed = sqrt(vmax2);
  }
  *ke_out = ke;
  *vmax2_out = vmax2;
  return why;
}

int ts_massspring_diverged_text(const ts_step_stats *st, char *buf, size_t cap) {
  if (!st || !buf) return 0;
  switch (st->diverged_why) {
  case TS_DIVERGED_POSITION:
    return snprintf(buf, cap, "node %u's position became non-finite (NaN or Inf)", st->diverged_node);
  case TS_DIVERGED_VELOCITY:
    return snprintf(buf, cap, "node %u's velocity became non-finite (NaN or Inf)", st->diverged_node);
  case TS_DIVERGED_SPEED:
    return snprintf(buf, cap, "node %u moved at %.3g m/s, over the %g m/s no tissue reaches",
                    st->diverged_node, st->diverged_value, TS__MAX_SPEED);
  case TS_DIVERGED_GROWTH:
    return snprintf(buf, cap,
                    "the kinetic energy grew from %.3g J to %.3g J (%.3g-fold) over %u steps, over %.0f %% a "
                    "step each (the fastest node %u at %.3g m/s)",
                    st->diverged_from, st->diverged_value,
                    st->diverged_from > 0 ? st->diverged_value / st->diverged_from : INFINITY,
                    st->diverged_steps, (TS__GROWTH_RATIO - 1.0) * 100.0, st->diverged_node, st->max_speed);
  default:
    return snprintf(buf, cap, "no divergence recorded");
  }
}
