/*
 * ts_handover_install.c: when a live refinement of an XPBD session is
 * installed (ts_handover.h, "When a live refinement ... is installed"):
 * how far the tissue has drifted from the state the hand-over was last
 * fitted at, and whether the fit's corrections are carried there as they
 * are, fitted again off the physics thread at a fresh snapshot, or fitted
 * again at the install. The thresholds and their measurements are in
 * ts_handover.h.
 */
#include "ts_handover.h"

#include <math.h>

double ts_handover_drift(const ts_tissue *cur, const ts_tissue *fitted) {
  if (!cur || !fitted) return NAN;
  const uint32_t n = cur->n_nodes < fitted->n_nodes ? cur->n_nodes : fitted->n_nodes;
  double m = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      const double d = fabs(cur->x[i][c] - fitted->x[i][c]);
      if (isnan(d)) return NAN;
      if (d > m) m = d;
    }
  return m;
}

int ts_handover_install_plan(double drift, double fit_err, int rounds) {
  if (!isfinite(drift)) return TS_INSTALL_REFIT;
  const int converged = fit_err <= TS_HANDOVER_CARRY_ERR; /* (NaN: no) */
  if (converged && drift <= TS_HANDOVER_CARRY_DRIFT) return TS_INSTALL_CARRY;
  if (rounds < TS_HANDOVER_CHASE_ROUNDS) return TS_INSTALL_CHASE;
  return converged && drift <= TS_HANDOVER_CHASED_DRIFT ? TS_INSTALL_CARRY : TS_INSTALL_REFIT;
}
