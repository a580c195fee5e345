/*
 * ts_ms_handover.c: a live refinement's hand-over in rest lengths as the
 * mass-spring step takes it (ts_handover.h, TS_HANDOVER_MS_REST).
 *
 * Why. The hand-over with node forces alone (TS_HANDOVER_MS_FORCE) gives
 * every node of the refined network its unrefined acceleration with an
 * extra force against the springs' own rest lengths. That force is a dead
 * load: it does not follow the state. Where the springs' push changes
 * fast (right after a fast press, the tissue lagging the tool) a node
 * whose load nothing else takes over snaps: on the liver pressed 2 mm at
 * 67 um a step and refined at once, new nodes just off the sphere's rim
 * (one parent held by the tool, one not) carried up to 3,700 times their
 * weight and moved by up to 0.26 mm a step beyond the unrefined twin
 * during the blend. And with Loop's smoothing rules on the rest shape,
 * where the new springs start 34-43 % off their rest lengths, the balance
 * of the node forces holds only at the carried-over state: 0.1-0.41 mm
 * off the twin in the first step (ts_refine.h).
 *
 * How. The tension each spring carries is put into its rest length, as
 * XPBD's hand-over does (ts_handover.c, create_mapped): a spring that was
 * there keeps its (blended) rest length, a half of a split edge takes its
 * parent edge's tension T at its own length l, any other new spring starts
 * unstretched (its rest length its current length, but not below half its
 * own rest length: ts_handover.c says why). For the half, the
 * rest length is the root of tension(l, L0) = T of the exponential law
 * (ts_material.h, without the damper),
 *     T(L0) = (k1 e^(b1 eps) + k2 e^(b2 eps)) (l - L0),  eps = max(0, l / L0 - 1),
 * which falls monotonically in L0: ts__handover_rest_for takes Newton's
 * steps kept inside a shrinking bracket (bisecting where a step would
 * leave it), to rounding; a compressed spring (T <= 0) is on the law's
 * linear part, L0 = l - T / (k1 + k2). What the rest lengths leave (the
 * gravity of the masses the refinement moved, an old prism diagonal the
 * refined network dropped) stays a node force, f = m a - F(rest), a the
 * unrefined accelerations carried over (ts_handover.h). The step
 * (ts_massspring_step) blends every spring's rest length from the
 * hand-over's to its own at the hand-over's weight, rest + w (hrest -
 * rest) (the same weight and formula as XPBD's, ts_xpbd_step.c), and adds
 * w f. So at the refinement the forces are the unrefined tissue's as with
 * node forces alone, but as the state moves each spring's force follows
 * its length by its own law, and a new node off a tool is held by the
 * springs of its split edge (equal tensions, opposite ways) rather than
 * by a fixed load. The strain limits are widened to the union of the
 * ranges of both rest lengths (from the smaller one times 1 + the lower
 * strain bound to the larger one times 1 + the upper): with the own range
 * alone the limiting would snap back at once the springs that start
 * beyond it (with Loop's smoothing, two under a pressed sphere), with the
 * blended range alone a compressed spring whose carried compression gave
 * it a longer rest length (under the sphere, a second refinement: 0.93 mm
 * for 0.87) was at its new lower bound at once and snapped (0.4 mm off the
 * twin in the first step, measured); strain limiting's screening (its
 * skip tests, ts_ms_limit.c) is set for the blended rest lengths and the
 * union ranges (screen_bounds), so that a blend step limits as a step at
 * rest does, a pass only where one can find something.
 *
 * Measured against an unrefined twin: see ts_handover.h ("In rest lengths
 * for the mass-spring step") and ts_refine.h.
 */
#include <math.h>
#include <stdlib.h>

#include "ts_handover.h"
#include "ts_ms_internal.h"

int ts__ms_handover_index(const ts_tissue *t, struct ts__ms *ms, const uint32_t *orig) {
  const uint32_t ns = t->n_springs;
  ms->hot_of = malloc(sizeof *ms->hot_of * (2 * (size_t)ns + 1));
  if (!ms->hot_of) return -1;
  ms->lim_of = ms->hot_of + ns;
  for (uint32_t q = 0; q < ns; q++) ms->hot_of[orig[q]] = q;
  uint32_t k = 0; /* lim is in the springs' order (ts_massspring_prepare) */
  for (uint32_t j = 0; j < ns; j++) {
    const ts_spring *sp = &t->springs[j];
    ms->lim_of[j] = sp->strain_min == 0 && sp->strain_max == 0 ? UINT32_MAX : k++;
  }
  return 0;
}

/* Strain limiting's screening (ts_ms_limit.c: ts__ms_limit_needed and,
 * per block of the force loop, limit_first) for the rest lengths and
 * ranges just set: each limited spring's range in strain of the rest
 * length the force loop now measures its strain against (ms->soa.L0, whose
 * extremes it records), lim.lo / L0 - 1 to lim.hi / L0 - 1, and its 1 /
 * L0; the tissue's and each block's tightest. Without it a blend ran a
 * whole pass over every limited spring in every substep (the liver, 64,000
 * limited springs). The tests stay what they were, a pass skipped only
 * where it would find nothing (the 1e-9 margin there covers the rounding of
 * these quotients, some 1e-16); with the springs' own rest lengths the
 * bounds are prepare's, strain_min and strain_max, to rounding. */
static void screen_bounds(struct ts__ms *ms) {
  double hi_all = INFINITY, lo_all = -INFINITY, il_all = 0;
  for (uint32_t k = 0; k < ms->n_blk; k++) {
    double hi = INFINITY, lo = -INFINITY, il = 0;
    for (uint32_t s = ms->blk_first[k]; s < ms->blk_first[k] + ms->blk_n[k]; s++) {
      const uint32_t q = ms->hlim[s];
      if (q == UINT32_MAX) continue;
      const double L0 = ms->soa.L0[s];
      if (!(L0 > 0)) { /* as prepare's: no strain to screen by */
        il = INFINITY;
        continue;
      }
      hi = TS__MIN(hi, ms->lim[q].hi / L0 - 1.0);
      lo = TS__MAX(lo, ms->lim[q].lo / L0 - 1.0);
      il = TS__MAX(il, 1.0 / L0);
    }
    ms->blk_hi_min[k] = hi, ms->blk_lo_max[k] = lo, ms->blk_il_max[k] = il;
    hi_all = TS__MIN(hi_all, hi), lo_all = TS__MAX(lo_all, lo), il_all = TS__MAX(il_all, il);
  }
  ms->lim_hi_min = hi_all, ms->lim_lo_max = lo_all, ms->lim_il_max = il_all;
}

void ts__ms_handover_rest(const ts_tissue *t, struct ts__ms *ms, double w) {
  const ts_handover *h = t->hand;
  const int on = h && h->ms_rest && h->rest && w > 0;
  if (!on && !ms->hr_on) return;
  const uint32_t ns = t->n_springs;
  for (uint32_t j = 0; j < ns; j++) {
    const ts_spring *sp = &t->springs[j];
    double L0 = sp->rest;
    if (on) {
      const double b = L0 + w * (h->rest[j] - L0);
      if (b > 0 && b < INFINITY) L0 = b;
    }
    /* the same values as ts_massspring_prepare's for the own rest length */
    const double iL0 = L0 > 0 ? 1.0 / L0 : 0.0;
    const uint32_t q = ms->hot_of[j];
    ms->hs[q].L0 = L0, ms->hs[q].iL0 = iL0;
    ms->soa.L0[q] = L0, ms->soa.iL0[q] = iL0;
    const uint32_t k = ms->lim_of[j];
    if (k != UINT32_MAX) { /* the union of the ranges (see the top) */
      const double lo = L0 < sp->rest ? L0 : sp->rest, hi = L0 > sp->rest ? L0 : sp->rest;
      ms->lim[k].lo = lo * (1 + sp->strain_min);
      ms->lim[k].hi = hi * (1 + sp->strain_max);
    }
  }
  screen_bounds(ms);
  ms->hr_on = on;
}
