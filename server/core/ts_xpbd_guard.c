/*
 * ts_xpbd_guard.c: the position-based solver's inversion guard, which turns
 * back what a tool left folded through a layer (the prisms and why:
 * ts_fold_guard.h; the mass-spring step's form: ts_ms_guard.c).
 *
 * The guard's energy, 1/2 kappa |V0| (r - r_min)^2 for r = V / V0 under
 * r_min, is a one-sided compliant constraint on each listed corner
 * tetrahedron: C = r - r_min >= 0 with compliance alpha = 1 / (kappa |V0|)
 * (XPBD's energy C^2 / (2 alpha)), so that its stiffness, like the
 * distance constraints', is the material's whatever the substeps and
 * iterations. Each Gauss-Seidel sweep, after the volume constraints and
 * before the contacts, projects
 *   dlambda = (-C - alpha~ lambda) / (sum_i w_i |grad_i C|^2 + alpha~),
 *   alpha~ = alpha / h^2, grad_i C = (dV/dx_i) / V0,
 * with the multiplier's sum kept at or above 0 (lambda + dlambda >= 0: the
 * guard pushes, never pulls), no damper. A tetrahedron over r_min with no
 * multiplier is left alone, so a step with nothing inside out does what it
 * did without the guard.
 *
 * Which prisms: the sweep's (ts_fold_guard_watch: the prisms found inside
 * out, kept while squeezed), and of those only the ones with no node near a
 * tool: none of the tools' contact candidates or held nodes at the end of
 * the last step. Under a tool the solver is as it was without a guard; the
 * fold a tool leaves is undone once the tool has moved off. Unlike the
 * mass-spring step's guard, this one does not act under the tools: there
 * the rigid contact projection and the guard fought over a tool thinner
 * than the triangles (test_contact's tunnel: a 1 mm capsule pushed 20 mm
 * into patch-S had six top-sheet nodes slip round its core and left one
 * 0.14 mm inside it; kappa 0.1 to 4 times the modulus and r_min 0 to 0.25
 * slipped nodes likewise or made the step diverge: kappa 0.1, 0.25 and 0.5
 * at r_min 0.25, 0.25 at 0.05, 4 at 0), and where a guard
 * holds a tool's nodes still, the tool does not feel the guard's push
 * (its force fell from 1.82 N to 0.35 N there). t->guard_tools_only (a
 * session with self-contact, ts_tissue.h) turns the guard off.
 *
 * Measured (test_robust, the default patch): XPBD's random abuse (sphere,
 * capsule, jaws, sphere mesh) left the patch 2.1 to 2.6 mm from the
 * untouched one 1 s after the tool had gone without the guard, 3e-13 mm
 * with it; a 5 mm sphere pressed 3 mm deep and lifted, 2.02 mm without,
 * 2e-10 um with.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_fold_guard.h"
#include "ts_xpbd_internal.h"

int ts__xpbd_guard_make(ts_xpbd *s, const ts_tissue *t) {
  s->guard = NULL;
  s->lam_g = NULL;
  s->touched = s->near_list = NULL;
  s->near = NULL;
  s->n_touched = s->n_near = 0;
  int rc = ts_fold_guard_create(t, &s->guard);
  if (rc || !s->guard) return rc;
  s->lam_g = calloc((size_t)s->guard->n_prism * 6, sizeof *s->lam_g);
  s->touched = malloc(sizeof *s->touched * t->n_nodes);
  s->near_list = malloc(sizeof *s->near_list * t->n_nodes);
  s->near = calloc(t->n_nodes, 1);
  return s->lam_g && s->touched && s->near_list && s->near ? 0 : TS_ENOMEM;
}

void ts__xpbd_guard_free(ts_xpbd *s) {
  ts_fold_guard_free(s->guard);
  free(s->lam_g);
  free(s->touched);
  free(s->near_list);
  free(s->near);
  s->guard = NULL;
  s->lam_g = NULL;
  s->touched = s->near_list = NULL;
  s->near = NULL;
}

/* near[i]: bit 0 near a tool this step (at the end of the last), bit 1
 * noted at this step's end; each node is noted once, so the lists hold at
 * most n_nodes whatever the tools' candidates overlap. */
void ts__xpbd_guard_touch(ts_xpbd *s, uint32_t node) {
  if (!s->guard || node >= s->n_nodes || (s->near[node] & 2)) return;
  s->near[node] |= 2;
  s->touched[s->n_touched++] = node;
}

uint32_t ts__xpbd_guard_watch(ts_xpbd *s, const ts_tissue *t) {
  if (!s->guard) return 0;
  /* the nodes near the tools at the end of the last step are this step's
   * near ones */
  for (uint32_t a = 0; a < s->n_near; a++) s->near[s->near_list[a]] &= (uint8_t)~1u;
  uint32_t *swap = s->near_list;
  s->near_list = s->touched, s->n_near = s->n_touched;
  s->touched = swap, s->n_touched = 0;
  for (uint32_t a = 0; a < s->n_near; a++) s->near[s->near_list[a]] = 1;
  if (t->guard_tools_only) { /* no guard away from the tools: none at all here */
    ts__xpbd_guard_forget(s);
    return 0;
  }
  ts_fold_guard_near(s->guard, s->near_list, s->n_near);
  return ts_fold_guard_watch(s->guard, (const double (*)[3])t->x, NULL, 0, 1, t->steps);
}

void ts__xpbd_guard_forget(ts_xpbd *s) {
  ts_fold_guard *g = s->guard;
  if (!g) return;
  for (uint32_t a = 0; a < g->n_on; a++) g->on_mark[g->on[a]] = 0;
  g->n_on = 0;
}

uint32_t ts__xpbd_sweep_guard(ts_xpbd *s, ts_tissue *t, double ih2, int first) {
  const ts_fold_guard *g = s->guard;
  if (!g || g->n_on == 0) return 0;
  double(*x)[3] = t->x;
  const double *im = t->inv_mass;
  const uint8_t *near = s->near;
  double *lam = s->lam_g;
  if (first) memset(lam, 0, sizeof *lam * 6 * g->n_on);
  uint32_t pushed = 0;
  for (uint32_t a = 0; a < g->n_on; a++) {
    const uint32_t q = g->on[a];
    int by_tool = 0;
    for (int k = 0; k < 6; k++) by_tool |= near[g->prism[q][k]] & 1;
    if (by_tool) continue;
    for (int k = 0; k < 6; k++) {
      uint32_t idx[4];
      double gr[4][3];
      double *l = &lam[6 * a + k];
      const double v0 = g->v0[q][k];
      const double C = ts_fold_guard_tet(g, q, k, (const double (*)[3])x, idx, gr) - TS_FOLD_MIN;
      if (!(C < 0) && !(*l > 0)) continue;
      double wg = 0; /* sum of w |dV/dx|^2 */
      for (int b = 0; b < 4; b++)
        wg += im[idx[b]] * (gr[b][0] * gr[b][0] + gr[b][1] * gr[b][1] + gr[b][2] * gr[b][2]);
      if (!(wg > 0)) continue;
      const double at = ih2 / (g->kappa[q] * fabs(v0)); /* alpha~ */
      double dl = (-C - at * *l) / (wg / (v0 * v0) + at);
      if (*l + dl < 0) dl = -*l; /* it pushes, never pulls */
      if (!isfinite(dl) || dl == 0) continue;
      *l += dl;
      for (int b = 0; b < 4; b++) {
        const double sw = im[idx[b]] * dl / v0;
        for (int c = 0; c < 3; c++) x[idx[b]][c] += sw * gr[b][c];
      }
      pushed += C < 0;
    }
  }
  return pushed;
}
