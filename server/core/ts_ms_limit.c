/*
 * ts_ms_limit.c: strain limiting, the method's spring deformation
 * constraints applied after each substep's update.
 *
 * Strain limiting (X. Provot, "Deformation constraints in a mass-spring
 * model to describe rigid cloth behavior", Graphics Interface 1995): after
 * the update every spring outside its strain range [min, max] has its ends
 * moved along it, in inverse proportion to their masses (anchors do not
 * move), to the nearest end of the range; t->strain_iterations Gauss-Seidel
 * passes, stopping early when a pass finds nothing. A node moved by d takes
 * the velocity Verlet's formula gives for its corrected position (d/2h
 * more); a Beeman node takes the velocity of its corrected move and goes on
 * as a Verlet node (correct_velocity).
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

/* The velocity of node i after a constraint moved it by dx: Verlet's
 * formula of the corrected position, v = (x_(k+1) - x_(k-1)) / 2h, i.e. dx
 * / 2h more. A Beeman or Taylor node takes the velocity of the move it
 * actually made, (x_(k+1) - x_k) / h, and continues as a Verlet node: its
 * velocity formula would otherwise keep the push the constraint cancelled
 * (a node held on its bound would keep a velocity of about h a / 2). */
static inline void correct_velocity(ts_tissue *t, uint32_t i, const double dx[3], double h) {
  if (t->branch[i] == TS_BRANCH_VERLET) {
    for (int c = 0; c < 3; c++) t->v[i][c] += 0.5 * dx[c] / h;
  } else {
    for (int c = 0; c < 3; c++) t->v[i][c] = (t->x[i][c] - t->x_prev[i][c]) / h;
    t->branch[i] = TS_BRANCH_VERLET;
  }
}

/* A spring's length changes by at most the moves of its two ends, so after
 * an update that moved no node by more than d, every spring's strain is
 * within 2 d / L0 of its strain at the force evaluation before it (the
 * strain extremes that ts__ms_spring_forces recorded). When that interval
 * stays inside every limited spring's range, with a margin of 1e-9 for the
 * rounding of the lengths, a pass would find nothing to correct and is
 * skipped: the result is the same, without a sweep over every spring. */
int ts__ms_limit_needed(const struct ts__ms *ms) {
  const double margin = 1e-9;
  double reach = 2.0 * sqrt(ms->move2) * ms->lim_il_max;
  if (!(reach < INFINITY)) return 1; /* also NaN */
  return !(ms->eps_max + reach < ms->lim_hi_min - margin &&
           ms->eps_min - reach > ms->lim_lo_max + margin);
}

/* Provot's strain limiting; returns the number of corrections. */
uint32_t ts__ms_limit_strain(ts_tissue *t, const struct ts__ms *ms, double h) {
  double (*x)[3] = t->x;
  const double *im = t->inv_mass;
  uint32_t total = 0;
  for (uint32_t it = 0; it < t->strain_iterations; it++) {
    uint32_t fixes = 0;
    for (uint32_t s = 0; s < ms->n_lim; s++) {
      const ts__lim *p = &ms->lim[s];
      const uint32_t a = p->a, b = p->b;
      double d[3] = {x[b][0] - x[a][0], x[b][1] - x[a][1], x[b][2] - x[a][2]};
      double l2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
      double target;
      if (l2 > p->hi * p->hi)
        target = p->hi;
      else if (l2 < p->lo * p->lo && l2 > 0)
        target = p->lo;
      else
        continue;
      double wa = im[a], wb = im[b], ws = wa + wb;
      if (!(ws > 0)) continue;
      double l = sqrt(l2), q = (l - target) / (l * ws);
      uint32_t ends[2] = {a, b};
      double w[2] = {wa, -wb};
      for (int e = 0; e < 2; e++) {
        uint32_t i = ends[e];
        if (!(im[i] > 0)) continue;
        double dx[3];
        for (int c = 0; c < 3; c++) {
          dx[c] = w[e] * q * d[c];
          x[i][c] += dx[c];
        }
        correct_velocity(t, i, dx, h);
      }
      fixes++;
    }
    total += fixes;
    if (!fixes) break;
  }
  return total;
}
