/*
 * ts_xpbd_diverge.c: what a diverged XPBD step says about it. The step
 * (ts_xpbd_step.c) notes the first node that failed its health test (a
 * position or velocity not finite, or a node faster than any tissue moves,
 * TS__MAX_SPEED) and the substep; ts_xpbd_diverged_text puts it in words
 * for the daemon's log and its Error to the clients, as the mass-spring
 * step's ts_massspring_diverged_text does.
 */
#include <math.h>
#include <stdio.h>

#include "ts_xpbd.h"
#include "ts_xpbd_internal.h"

void ts__xpbd_why_note(ts__xpbd_why *w, const double x[3], double v2, uint32_t node, uint32_t substep) {
  if (w->why) return;
  w->why = !isfinite(x[0] + x[1] + x[2]) ? TS_DIVERGED_POSITION
           : !isfinite(v2)               ? TS_DIVERGED_VELOCITY
                                         : TS_DIVERGED_SPEED;
  w->node = node;
  w->speed = sqrt(v2);
  w->substep = substep;
}

int ts_xpbd_diverged_text(const ts_xpbd_stats *st, char *buf, size_t cap) {
  if (!st || !buf) return 0;
  switch (st->diverged_why) {
  case TS_DIVERGED_POSITION:
    return snprintf(buf, cap, "node %u's position became non-finite (NaN or Inf) in substep %u of %u",
                    st->diverged_node, st->diverged_substep, st->substeps);
  case TS_DIVERGED_VELOCITY:
    return snprintf(buf, cap, "node %u's velocity became non-finite (NaN or Inf) in substep %u of %u",
                    st->diverged_node, st->diverged_substep, st->substeps);
  case TS_DIVERGED_SPEED:
    return snprintf(buf, cap, "node %u moved at %.3g m/s in substep %u of %u, over the %g m/s no tissue reaches",
                    st->diverged_node, st->diverged_value, st->diverged_substep, st->substeps,
                    TS__MAX_SPEED);
  default:
    return snprintf(buf, cap, "no divergence recorded");
  }
}
