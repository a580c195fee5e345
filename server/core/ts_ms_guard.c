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
 *   E = 1/2 kappa |V0| (r - r_min)^2  for r < r_min (TS__MSG_MIN), else 0,
 * kappa = TS__MSG_STIFF times the layer's small-strain modulus (young, Pa).
 * Its forces, -dE/dx = -kappa |V0| / V0 (r - r_min) dV/dx, are added to the
 * springs' before each substep's update; being a potential's, they keep the
 * integrator's energy balance (ts_massspring_energy counts E, and the
 * divergence test with it). TS__MSG_STIFF: pushing a node back through its
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
 * Which prisms: where a tool acts, and what is inside out. At each step's
 * start the prisms of every column with a node that touched a tool at the
 * end of the last step (the contact marks, ms->clist), and the ones it
 * watched in the last step, are kept in its list while one of their
 * tetrahedra is under TS__MSG_WATCH of its rest volume; the list's
 * tetrahedra are the ones the forces are evaluated for, each substep. A
 * sweep looks at 1/TS__MSG_SWEEP of all the prisms each step, in turn, and
 * lists those turned inside out (a tetrahedron under TS__MSG_FOLD): folds
 * no tool touches any more (a sheet pulled through, a grasp let go). In
 * random abuse of the default patch (test_robust's poses, 6 seeds x sphere,
 * capsule and jaws, 1 s after the tool had gone) the contact columns alone
 * left 16 of the 18 runs folded (2 mm from the untouched patch), with the
 * sweep none (under 0.2 um). A fold stays in the list until it has undone
 * itself; where nothing is squeezed or inside out the step does exactly
 * what it did without the guard. The sweep lists only what is inside out,
 * not the squeezed: the liver of test_refine_smooth_liver, sagging onto
 * its anchored base, squeezes corner tetrahedra far from the tool to a few
 * per cent of their volume, and the sweep met them at other steps in the
 * refined tissue than in its twin (its prisms are others), so the guard
 * pushed at other times (0.19 mm against the twin's 0.06 mm in a step).
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
 * TS__MSG_WATCH) cost the capped runs of tests/bench/run mechanics:patch-S
 * (the tool 8 mm in) inertia: at 2 substeps a scale of 160-545 and 73 %
 * RMS off the physical tool force, against 97-296 and 51 % so and with the
 * guard off; at 4, up to 36 against 24.4. A step with nothing in reach
 * counts as before.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_corner_tet.h"
#include "ts_error.h"
#include "ts_ms_internal.h"

#define TS__MSG_WATCH 0.5  /* a tetrahedron under this of its rest volume: listed */
#define TS__MSG_MIN 0.25   /* under this: pushed back (r_min) */
#define TS__MSG_STIFF 1.0  /* kappa over the layer's young */
#define TS__MSG_SWEEP 32   /* steps to look at every prism once */
#define TS__MSG_FOLD 0.0   /* the sweep lists a prism with a tetrahedron under this */
#define TS__MSG_MARGIN 1.5 /* on the step start's stiffness bound */
#define TS__MSG_REACH 2.0  /* on a tetrahedron's rate of change in the bound */

struct ts__msguard {
  uint32_t n_prism;
  uint32_t (*prism)[6]; /* sheet triangle, then the next sheet's */
  double *kappa;        /* per prism: Pa (0: no guard there) */
  double (*v0)[6];      /* per prism: its corner tetrahedra's rest volumes */
  uint32_t *colof;      /* per node: its column (UINT32_MAX: none) */
  uint32_t *cstart;     /* per column + 1: its prisms in cprism[cstart[j]..] */
  uint32_t *cprism;
  uint8_t *on_mark;     /* per prism: in the list */
  uint32_t n_on;
  uint32_t *on;         /* the listed prisms */
  uint32_t sweep;       /* the next prism the sweep looks at */
  double *row;          /* per node scratch: the Gershgorin rows */
};

void ts__ms_guard_free(struct ts__msguard *g) {
  if (!g) return;
  free(g->prism);
  free(g->kappa);
  free(g->v0);
  free(g->colof);
  free(g->cstart);
  free(g->cprism);
  free(g->on_mark);
  free(g->on);
  free(g->row);
  free(g);
}

/* The smallest of prism q's six volume ratios at x. */
static double min_ratio(const struct ts__msguard *g, uint32_t q, const double (*x)[3]) {
  double r = INFINITY;
  for (int k = 0; k < 6; k++) {
    uint32_t idx[4];
    const double rk = ts_corner_tet(g->prism[q], k, x, idx, NULL) / g->v0[q][k];
    if (!(rk >= r)) r = rk; /* a NaN ratio counts as the smallest */
  }
  return r;
}

/* 1: contact triangle c has its three corners in the outer sheet. */
static int outer_tri(const ts_tissue *t, const struct ts__msguard *g, const uint32_t c[3]) {
  for (int k = 0; k < 3; k++)
    if (!(c[k] < t->n_nodes && g->colof[c[k]] != UINT32_MAX &&
          ts_tissue_sheet_node(t, 0, g->colof[c[k]]) == c[k]))
      return 0;
  return 1;
}

int ts__ms_guard_prepare(const ts_tissue *t, struct ts__ms *ms) {
  ms->guard = NULL;
  ms->w2_guard = 0;
  const uint32_t nc = ts__ms_columns(t), S = t->n_sheets, n = t->n_nodes;
  if (nc == 0 || S < 2 || t->n_layers + 1 != S) return 0; /* no layers: no guard */
  const uint32_t nt = ts_tissue_n_contact_tris(t);
  const uint32_t(*ct)[3] = (const uint32_t(*)[3])ts_tissue_contact_tris(t);
  struct ts__msguard *g = calloc(1, sizeof *g);
  if (!g) return TS_ENOMEM;
  g->colof = malloc(sizeof *g->colof * n);
  g->cstart = calloc((size_t)nc + 1, sizeof *g->cstart);
  g->row = calloc(n, sizeof *g->row);
  if (!g->colof || !g->cstart || !g->row) goto oom;
  for (uint32_t i = 0; i < n; i++) g->colof[i] = UINT32_MAX;
  for (uint32_t s = 0; s < S; s++)
    for (uint32_t j = 0; j < nc; j++) {
      const uint32_t i = ts_tissue_sheet_node(t, s, j);
      if (i < n) g->colof[i] = j;
    }
  /* the outer sheet's triangles (the contact surface's with all three
   * corners in sheet 0), one prism per layer under each */
  uint32_t m = 0;
  for (uint32_t f = 0; f < nt; f++) m += outer_tri(t, g, ct[f]);
  const uint64_t np = (uint64_t)m * (S - 1);
  if (np == 0 || np >= UINT32_MAX / 3) {
    ts__ms_guard_free(g);
    return 0;
  }
  g->prism = malloc(sizeof *g->prism * np);
  g->kappa = malloc(sizeof *g->kappa * np);
  g->v0 = malloc(sizeof *g->v0 * np);
  g->on_mark = calloc(np, 1);
  g->on = malloc(sizeof *g->on * np);
  g->cprism = malloc(sizeof *g->cprism * np * 3);
  if (!g->prism || !g->kappa || !g->v0 || !g->on_mark || !g->on || !g->cprism) goto oom;
  for (uint32_t f = 0; f < nt; f++) {
    if (!outer_tri(t, g, ct[f])) continue;
    for (uint32_t s = 0; s + 1 < S; s++) {
      const uint32_t q = g->n_prism++;
      uint32_t *p = g->prism[q];
      for (int k = 0; k < 3; k++) {
        p[k] = ts_tissue_sheet_node(t, s, g->colof[ct[f][k]]);
        p[k + 3] = ts_tissue_sheet_node(t, s + 1, g->colof[ct[f][k]]);
      }
      const double E = t->layers[s].young;
      g->kappa[q] = isfinite(E) && E > 0 ? TS__MSG_STIFF * E : 0.0;
      for (int k = 0; k < 6; k++) {
        uint32_t idx[4];
        g->v0[q][k] = ts_corner_tet(p, k, (const double (*)[3])t->rest, idx, NULL);
        if (!(fabs(g->v0[q][k]) > 0) || !isfinite(g->v0[q][k])) g->kappa[q] = 0; /* flat at rest */
      }
      /* inside out as prepared: the tissue's own (see the top) */
      if (g->kappa[q] > 0 && !(min_ratio(g, q, (const double (*)[3])t->x) >= 0)) g->kappa[q] = 0;
      for (int k = 0; k < 3; k++) g->cstart[g->colof[ct[f][k]] + 1]++;
    }
  }
  for (uint32_t j = 0; j < nc; j++) g->cstart[j + 1] += g->cstart[j];
  uint32_t *fill = malloc(sizeof *fill * nc);
  if (!fill) goto oom;
  memcpy(fill, g->cstart, sizeof *fill * nc);
  for (uint32_t q = 0; q < g->n_prism; q++)
    for (int k = 0; k < 3; k++) g->cprism[fill[g->colof[g->prism[q][k]]]++] = q;
  free(fill);
  ms->guard = g;
  return 0;
oom:
  ts__ms_guard_free(g);
  return TS_ENOMEM;
}

void ts__ms_guard_watch(const ts_tissue *t, struct ts__ms *ms, double dt) {
  struct ts__msguard *g = ms->guard;
  ms->w2_guard = 0;
  if (!g) return;
  const double(*x)[3] = (const double(*)[3])t->x;
  uint32_t n_on = 0;
  for (uint32_t a = 0; a < g->n_on; a++) { /* the last step's, while squeezed */
    const uint32_t q = g->on[a];
    if (min_ratio(g, q, x) < TS__MSG_WATCH) g->on[n_on++] = q;
    else g->on_mark[q] = 0;
  }
  for (uint32_t c = 0; c < ms->n_clist; c++) { /* the columns the tools touch */
    const uint32_t i = ms->clist[c];
    const uint32_t j = i < t->n_nodes ? g->colof[i] : UINT32_MAX;
    if (j == UINT32_MAX) continue;
    for (uint32_t e = g->cstart[j]; e < g->cstart[j + 1]; e++) {
      const uint32_t q = g->cprism[e];
      if (g->on_mark[q] || !(g->kappa[q] > 0)) continue;
      if (min_ratio(g, q, x) < TS__MSG_WATCH) g->on_mark[q] = 1, g->on[n_on++] = q;
    }
  }
  /* and a share of all the prisms, in turn: a fold a tool left where it no
   * longer touches (pulled through, or a grasp let go) */
  const uint32_t chunk = t->guard_tools_only ? 0 : (g->n_prism + TS__MSG_SWEEP - 1) / TS__MSG_SWEEP;
  for (uint32_t e = 0; e < chunk; e++) {
    const uint32_t q = g->sweep;
    g->sweep = q + 1 < g->n_prism ? q + 1 : 0;
    if (g->on_mark[q] || !(g->kappa[q] > 0)) continue;
    if (min_ratio(g, q, x) < TS__MSG_FOLD) g->on_mark[q] = 1, g->on[n_on++] = q;
  }
  g->n_on = n_on;
  if (n_on == 0) return;
  /* the list's share of the largest squared frequency: Gershgorin's rows of
   * M^-1/2 (sum of kappa / |V0| g g^T) M^-1/2, each tetrahedron's rank-one
   * term as |u_i| * sum_j |u_j|, u_j = sqrt(w_j) |g_j| */
  const double *iw = ms->iw;
  for (uint32_t a = 0; a < n_on; a++) {
    const uint32_t q = g->on[a];
    for (int k = 0; k < 6; k++) {
      uint32_t idx[4];
      double gr[4][3], u[4], su = 0;
      const double r = ts_corner_tet(g->prism[q], k, x, idx, gr) / g->v0[q][k];
      double dv = 0; /* dV/dt */
      for (int b = 0; b < 4; b++)
        for (int c = 0; c < 3; c++) dv += gr[b][c] * t->v[idx[b]][c];
      /* one that cannot reach r_min within the step at twice its rate
       * adds no stiffness this step */
      if (r - TS__MSG_REACH * fabs(dv / g->v0[q][k]) * dt >= TS__MSG_MIN) continue;
      const double kt = g->kappa[q] / fabs(g->v0[q][k]);
      for (int b = 0; b < 4; b++) {
        u[b] = sqrt(iw[idx[b]] * (gr[b][0] * gr[b][0] + gr[b][1] * gr[b][1] + gr[b][2] * gr[b][2]));
        su += u[b];
      }
      for (int b = 0; b < 4; b++) g->row[idx[b]] += kt * u[b] * su;
    }
  }
  double w2 = 0;
  for (uint32_t a = 0; a < n_on; a++)
    for (int k = 0; k < 6; k++) {
      const uint32_t i = g->prism[g->on[a]][k];
      if (g->row[i] > w2) w2 = g->row[i];
    }
  for (uint32_t a = 0; a < n_on; a++) /* the scratch back to zero */
    for (int k = 0; k < 6; k++) g->row[g->prism[g->on[a]][k]] = 0;
  ms->w2_guard = isfinite(w2) ? TS__MSG_MARGIN * w2 : INFINITY;
}

uint32_t ts__ms_guard_forces(const ts_tissue *t, struct ts__ms *ms) {
  struct ts__msguard *g = ms->guard;
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
      const double r = ts_corner_tet(g->prism[q], k, x, idx, gr) / v0;
      if (!(r < TS__MSG_MIN)) continue;
      /* -dE/dx_i = -kappa |V0| (r - r_min) g_i / V0 */
      const double s = -g->kappa[q] * (r - TS__MSG_MIN) * (v0 > 0 ? 1.0 : -1.0);
      for (int b = 0; b < 4; b++)
        for (int c = 0; c < 3; c++) f4[idx[b]][c] += s * gr[b][c];
      active++;
    }
  }
  return active;
}

double ts__ms_guard_energy(const ts_tissue *t, const struct ts__ms *ms) {
  const struct ts__msguard *g = ms->guard;
  if (!g) return 0.0;
  double e = 0;
  for (uint32_t a = 0; a < g->n_on; a++) {
    const uint32_t q = g->on[a];
    for (int k = 0; k < 6; k++) {
      uint32_t idx[4];
      const double v0 = g->v0[q][k];
      const double r = ts_corner_tet(g->prism[q], k, (const double (*)[3])t->x, idx, NULL) / v0;
      if (r < TS__MSG_MIN) e += 0.5 * g->kappa[q] * fabs(v0) * (r - TS__MSG_MIN) * (r - TS__MSG_MIN);
    }
  }
  return e;
}
