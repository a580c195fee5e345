/*
 * ts_ms_guard.c: the mass-spring step's inversion guard, which keeps a
 * layered tissue's layers the right way up where a tool presses them and
 * turns back what a tool left folded through.
 *
 * A spring network has reflected equilibria. A 5 mm sphere pressed 3 to 7
 * mm into the daemon's default patch at 1 to 3 m/s (or 6 mm at 0.5 m/s)
 * squeezed a column's nodes of two sheets together on its surface, the
 * springs pushed them apart the wrong way, and the top layer stayed folded
 * through after the tool had gone: one to four columns, about 2 mm from the
 * rest shape, until a reset. Springs alone cannot tell the two states apart
 * (every spring of a column mirrored through its layer has its rest length).
 *
 * The guard is an energy term on the prisms' corner tetrahedra
 * (ts_corner_tet.h: each sheet triangle with each corner of the other
 * sheet's; one corner pushed through the layer turns one inside out):
 * with r = V / V0 a tetrahedron's signed volume over its rest volume,
 *   E = 1/2 kappa |V0| (r - r_min)^2  for r < r_min (TS_FOLD_MIN), else 0,
 * kappa = TS_FOLD_STIFF times the layer's small-strain modulus (young, Pa).
 * Its forces, -dE/dx = -kappa |V0| / V0 (r - r_min) dV/dx, are added to the
 * springs' before each substep's update; being a potential's, they keep the
 * integrator's energy balance (ts_massspring_energy counts E, and the
 * divergence test with it). TS_FOLD_STIFF: pushing a node back through its
 * layer has to beat the column springs it compresses on the way (at r = 0 a
 * column is squeezed to nothing: tension k L0, k = E A / L0, against about
 * 2 kappa r_min A from the six tetrahedra round the node, A the node's
 * share of the sheet). Measured on the press above (5 and 2 mm spheres,
 * 2 to 7 mm deep, 0.5 to 3 m/s, 48 presses lifted off): without the guard
 * 34 left a column folded through, 2.0 to 5.9 mm from the untouched patch
 * 0.5 s after the lift; with kappa at 0.25, 0.5, 1 or 2 times young none
 * did (worst 2 um; with 1 and the sweep below, 0.8-1.2 um); at 4 and 8 the
 * pushed nodes jittered. 1, in the middle of the working range
 * (test_robust's test_massspring_press_unfolds).
 *
 * Which prisms (ts_fold_guard.h, which the position-based solver's guard,
 * ts_xpbd_guard.c, shares): where a tool acts, and what is inside out where
 * a tool has been. At each step's start the prisms of every column with a
 * node that touched a tool at the end of the last step (the contact marks,
 * ms->clist), and the ones it watched in the last step, are kept in its
 * list while one of their tetrahedra is under TS_FOLD_WATCH of its rest
 * volume; the list's tetrahedra are the ones the forces are evaluated for,
 * each substep. A sweep looks at 1/TS_FOLD_SWEEP of the prisms each step,
 * in turn, and lists those a tool has been near that are inside out: folds
 * no tool touches any more (a sheet pulled through, a grasp let go). In
 * random abuse of the default patch (test_robust's poses, 6 seeds x sphere,
 * capsule and jaws, 1 s after the tool had gone) the contact columns alone
 * left 16 of the 18 runs folded (2 mm from the untouched patch), with the
 * sweep none (under 0.2 um). A fold stays in the list until it has undone
 * itself; where nothing is squeezed or inside out the step does exactly
 * what it did without the guard.
 * Two exceptions:
 *   - a prism already inside out when the step is prepared is the tissue's
 *     own shape (test_self_contact's fold, whose crease springs are given
 *     their folded lengths), not guarded;
 *   - t->guard_tools_only (a session with self-contact, whose settle after
 *     the step moves the nodes the guard pushes): no sweep. A flap thrown
 *     onto the patch is squeezed inside out as it lands; the guard pushing
 *     its outer sheet back out between the settles drove it 19 mm through
 *     the lower sheet (test_self_contact), against 0.3 mm without.
 *
 * Stability: the guard stiffens the nodes it acts on, kappa |g|^2 / |V0|
 * per tetrahedron (g = dV/dx). Its share of the largest squared frequency,
 * bounded by Gershgorin's rows at the step's start (times TS__MSG_MARGIN,
 * since the gradients change within the step), is added to the springs'
 * in the substep count (ts_ms_bounds.c). The rows take the list's
 * tetrahedra under r_min and those whose volume, changing at TS__MSG_REACH
 * times its rate at the step's start, could get there within the step;
 * the others push nothing. Counting every listed one (between r_min and
 * TS_FOLD_WATCH) cost the capped runs of tests/bench/run mechanics:patch-S
 * (the tool 8 mm in) inertia: at 2 substeps a scale of 160-545 and 73 %
 * RMS off the physical tool force, against 97-296 and 51 % so and with the
 * guard off; at 4, up to 36 against 24.4. A step with nothing in reach
 * counts as before.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_fold_guard.h"
#include "ts_ms_internal.h"

#define TS__MSG_MARGIN 1.5 /* on the step start's stiffness bound */
#define TS__MSG_REACH 2.0  /* on a tetrahedron's rate of change in the bound */

struct ts__msguard {
  ts_fold_guard *fg; /* the prisms and the step's list (ts_fold_guard.h) */
  double *row;       /* per node scratch: the Gershgorin rows */
};

void ts__ms_guard_free(struct ts__msguard *g) {
  if (!g) return;
  ts_fold_guard_free(g->fg);
  free(g->row);
  free(g);
}

int ts__ms_guard_prepare(const ts_tissue *t, struct ts__ms *ms) {
  ms->guard = NULL;
  ms->w2_guard = 0;
  ts_fold_guard *fg = NULL;
  int rc = ts_fold_guard_create(t, &fg);
  if (rc || !fg) return rc; /* no layers: no guard */
  struct ts__msguard *g = calloc(1, sizeof *g);
  double *row = calloc(t->n_nodes, sizeof *row);
  if (!g || !row) {
    ts_fold_guard_free(fg);
    free(g);
    free(row);
    return TS_ENOMEM;
  }
  g->fg = fg;
  g->row = row;
  ms->guard = g;
  return 0;
}

void ts__ms_guard_watch(const ts_tissue *t, struct ts__ms *ms, double dt) {
  struct ts__msguard *mg = ms->guard;
  ms->w2_guard = 0;
  if (!mg) return;
  ts_fold_guard *g = mg->fg;
  const double(*x)[3] = (const double(*)[3])t->x;
  ts_fold_guard_near(g, ms->clist, ms->n_clist);
  const uint32_t n_on = ts_fold_guard_watch(g, x, ms->clist, ms->n_clist, !t->guard_tools_only,
                                             t->steps);
  if (n_on == 0) return;
  /* the list's share of the largest squared frequency: Gershgorin's rows of
   * M^-1/2 (sum of kappa / |V0| g g^T) M^-1/2, each tetrahedron's rank-one
   * term as |u_i| * sum_j |u_j|, u_j = sqrt(w_j) |g_j| */
  const double *iw = ms->iw;
  double *row = mg->row;
  for (uint32_t a = 0; a < n_on; a++) {
    const uint32_t q = g->on[a];
    for (int k = 0; k < 6; k++) {
      uint32_t idx[4];
      double gr[4][3], u[4], su = 0;
      const double r = ts_fold_guard_tet(g, q, k, x, idx, gr);
      double dv = 0; /* dV/dt */
      for (int b = 0; b < 4; b++)
        for (int c = 0; c < 3; c++) dv += gr[b][c] * t->v[idx[b]][c];
      /* one that cannot reach r_min within the step at twice its rate
       * adds no stiffness this step */
      if (r - TS__MSG_REACH * fabs(dv / g->v0[q][k]) * dt >= TS_FOLD_MIN) continue;
      const double kt = g->kappa[q] / fabs(g->v0[q][k]);
      for (int b = 0; b < 4; b++) {
        u[b] = sqrt(iw[idx[b]] * (gr[b][0] * gr[b][0] + gr[b][1] * gr[b][1] + gr[b][2] * gr[b][2]));
        su += u[b];
      }
      for (int b = 0; b < 4; b++) row[idx[b]] += kt * u[b] * su;
    }
  }
  double w2 = 0;
  for (uint32_t a = 0; a < n_on; a++)
    for (int k = 0; k < 6; k++) {
      const uint32_t i = g->prism[g->on[a]][k];
      if (row[i] > w2) w2 = row[i];
    }
  for (uint32_t a = 0; a < n_on; a++) /* the scratch back to zero */
    for (int k = 0; k < 6; k++) row[g->prism[g->on[a]][k]] = 0;
  ms->w2_guard = isfinite(w2) ? TS__MSG_MARGIN * w2 : INFINITY;
}

uint32_t ts__ms_guard_forces(const ts_tissue *t, struct ts__ms *ms) {
  const ts_fold_guard *g = ms->guard ? ms->guard->fg : NULL;
  if (!g || g->n_on == 0) return 0;
  const double(*x)[3] = (const double(*)[3])t->x;
  double(*f4)[4] = ms->f4;
  uint32_t active = 0;
  for (uint32_t a = 0; a < g->n_on; a++) {
    const uint32_t q = g->on[a];
    for (int k = 0; k < 6; k++) {
      uint32_t idx[4];
      double gr[4][3];
      const double v0 = g->v0[q][k];
      const double r = ts_fold_guard_tet(g, q, k, x, idx, gr);
      if (!(r < TS_FOLD_MIN)) continue;
      /* -dE/dx_i = -kappa |V0| (r - r_min) g_i / V0 */
      const double s = -g->kappa[q] * (r - TS_FOLD_MIN) * (v0 > 0 ? 1.0 : -1.0);
      for (int b = 0; b < 4; b++)
        for (int c = 0; c < 3; c++) f4[idx[b]][c] += s * gr[b][c];
      active++;
    }
  }
  return active;
}

double ts__ms_guard_energy(const ts_tissue *t, const struct ts__ms *ms) {
  return ms->guard ? ts_fold_guard_energy(ms->guard->fg, (const double (*)[3])t->x) : 0.0;
}
