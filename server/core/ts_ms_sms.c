/*
 * ts_ms_sms.c: selective mass scaling of the motion across a built
 * tissue's thin layers: choosing the link masses, factoring the columns'
 * tridiagonal mass matrices, solving with them.
 *
 * Selective mass scaling (L. Olovsson, K. Simonsson and M. Unosson,
 * "Selective mass scaling for explicit finite element analyses", Int. J.
 * Numer. Meth. Engng 63(10):1436-1445, 2005, and for thin walls modelled
 * with solid elements across their thickness, Olovsson and Simonsson,
 * Comput. Mech. 34(2):134-136, 2004). The layers are thin (1-2 mm) beside
 * the mesh spacing (1.6-5 mm), so the fastest modes of a built tissue are
 * the relative motions of a column of nodes across a slab: compressing or
 * shearing a layer through its thickness, some 3-5 times faster than
 * anything in the sheets and far above what a trainee can see or feel. For
 * tissues with columns (t->mass_scaling, ts_tissue_columns: node (s, j) of
 * sheet s on surface point j's extrusion line, through the tissue's column
 * map, so that a refined tissue, whose new nodes are appended, is scaled as
 * a freshly built one is), each link (s, j)-(s+1, j) gets a mass beta that acts only on the difference of the two nodes'
 * motions: M~ = M + sum beta (e_a - e_b)(e_a - e_b)^T. A column moving as a
 * whole (translation, and so gravity, momentum and every static
 * equilibrium) is unchanged; only the through-thickness modes slow down, to
 * the bound of the in-sheet springs (sms_choose). Bending adds a little
 * inertia to the relative sliding of the sheets, about (beta/m) (k t)^2 of
 * a mode's kinetic energy for wavenumber k: below 2 % for the patch's
 * first modes. M~ couples only the nodes of one column, a tridiagonal
 * matrix factored once (sms_factor), so a = M~^-1 F costs a few operations
 * per node. The per-link arrays (beta, the factors) are in column order,
 * slot k = s * nv + j for node col[k] (ms->col, the tissue's map); the
 * per-node ones (masses, accelerations) in node order. The integrator's formulas are unchanged; F_k - F_(k-1) in the
 * branch test is M~ (a_k - a_(k-1)), and the kinetic energy includes
 * (1/2) beta |v_a - v_b|^2. The step uses the scaling only when its bound
 * (ts_ms_bounds.c) allows a longer substep than the lumped masses' does
 * (ts_massspring_prepare): it gains nothing where the through-thickness
 * modes are not the fastest, e.g. a region refined finer than the layers
 * are thick (patch-S refined by Loop: its 0.8 mm edges under the 1 mm
 * mucosa) or the liver, whose extrusion thinned some prisms.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

uint32_t ts__ms_columns(const ts_tissue *t) {
  if (t->n_sheets < 2 || t->n_sheets > TS_MAX_LAYERS + 1) return 0;
  return ts_tissue_columns(t);
}

/* Column j's tridiagonal mass matrix: diagonal m_s + beta_(s-1) + beta_s
 * (m_s the inertia: the physical mass plus the local scaling's, ms->iw),
 * off-diagonal -beta_s between free neighbours. Factors it (L D L^T, a free
 * run at a time) into ms->sl, ms->sip. */
void ts__ms_sms_factor(const ts_tissue *t, struct ts__ms *ms) {
  const uint32_t nv = ms->nv, S = ms->S, *col = ms->col;
  for (uint32_t j = 0; j < nv; j++) {
    double piv_prev = 0, o_prev = 0;
    for (uint32_t s = 0; s < S; s++) {
      uint32_t k = s * nv + j, i = col[k];
      ms->sl[k] = 0;
      ms->sip[k] = 0;
      if (!(t->inv_mass[i] > 0)) {
        o_prev = 0;
        continue;
      }
      double d = 1.0 / ms->iw[i] + ms->beta[k] + (s > 0 ? ms->beta[k - nv] : 0.0);
      double l = o_prev != 0 ? o_prev / piv_prev : 0.0;
      double piv = d - l * o_prev;
      ms->sl[k] = l;
      ms->sip[k] = 1.0 / piv;
      piv_prev = piv;
      /* coupling to the node below, when both are free */
      o_prev = (s + 1 < S && t->inv_mass[col[k + nv]] > 0) ? -ms->beta[k] : 0.0;
    }
  }
}

/* y <- M~^-1 y over the free nodes (anchored rows are left at zero). */
void ts__ms_sms_solve(const ts_tissue *t, const struct ts__ms *ms, double (*y)[3]) {
  const uint32_t nv = ms->nv, S = ms->S, *col = ms->col;
  for (uint32_t j = 0; j < nv; j++) {
    for (uint32_t s = 0; s < S; s++) { /* forward: y_s -= l_s y_(s-1) */
      uint32_t k = s * nv + j, i = col[k];
      if (!(t->inv_mass[i] > 0)) {
        y[i][0] = y[i][1] = y[i][2] = 0;
        continue;
      }
      if (ms->sl[k] != 0)
        for (int c = 0; c < 3; c++) y[i][c] -= ms->sl[k] * y[col[k - nv]][c];
    }
    for (uint32_t s = S; s-- > 0;) { /* back: a_s = (y_s - o_s a_(s+1)) / piv_s */
      uint32_t k = s * nv + j, i = col[k];
      if (!(t->inv_mass[i] > 0)) continue;
      double o = (s + 1 < S && t->inv_mass[col[k + nv]] > 0) ? -ms->beta[k] : 0.0;
      for (int c = 0; c < 3; c++) {
        double below = o != 0 ? y[col[k + nv]][c] : 0.0;
        y[i][c] = (y[i][c] - o * below) * ms->sip[k];
      }
    }
  }
}

/* x . M~ x over the free nodes. */
double ts__ms_sms_mass_dot(const ts_tissue *t, const struct ts__ms *ms, const double (*x)[3]) {
  double sum = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (t->inv_mass[i] > 0) sum += (x[i][0] * x[i][0] + x[i][1] * x[i][1] + x[i][2] * x[i][2]) / ms->iw[i];
  if (ms->sms)
    for (uint32_t k = 0; k + ms->nv < t->n_nodes; k++) {
      uint32_t a = ms->col[k], b = ms->col[k + ms->nv];
      double wa = t->inv_mass[a] > 0, wb = t->inv_mass[b] > 0;
      double d0 = wb * x[b][0] - wa * x[a][0], d1 = wb * x[b][1] - wa * x[a][1],
             d2 = wb * x[b][2] - wa * x[a][2];
      sum += ms->beta[k] * (d0 * d0 + d1 * d1 + d2 * d2);
    }
  return sum;
}


/* Chooses the links' masses beta: for the link (s, j)-(s+1, j), k_t the
 * small-strain constants of every spring across slab s at either end, mu
 * the reduced mass of the two ends; beta = max(0, k_t / w_t^2 - mu) brings
 * the relative motion's frequency sqrt(k_t / (mu + beta)) down to w_t, the
 * bound on the in-sheet springs alone (so the scaling never reaches below
 * what the sheets' own resolution limits the step to). A spring's ends are
 * placed in their sheets through ms->col. d, y: 3 n_nodes doubles each;
 * sc: scratch for the in-sheet springs' records. Returns 0, -1 when there
 * is nothing to scale, -2 when out of memory. */
int ts__ms_sms_choose(const ts_tissue *t, struct ts__ms *ms, double (*d)[3], double (*y)[3],
                      ts__scratch *sc) {
  const uint32_t nv = ms->nv, n = t->n_nodes, *col = ms->col;
  uint32_t ne = 0;
  for (uint32_t s = 0; s < t->n_springs; s++) ne += t->springs[s].kind == TS_SPRING_EDGE;
  if (ne == 0) return -1;
  /* the in-sheet springs' records made from t's springs as the bound reads
   * them (no copy of them as hot springs first) in the caller's scratch */
  ts__asp *as = ts__scratch_get(sc, ts__ms_abs_bytes(ne));
  uint32_t *sheet = malloc(sizeof *sheet * n); /* node -> its sheet */
  if (!as || !sheet) {
    free(sheet);
    return -2;
  }
  double wt2 = ts__ms_abs_bound(t, as, ts__ms_abs_fill_sheet(t, ms->iw, as), 0, d, y);
  if (!(wt2 > 0) || !isfinite(wt2)) {
    free(sheet);
    return -1;
  }
  for (uint32_t k = 0; k < n; k++) sheet[col[k]] = k / nv;
  /* k_t per link: d[i][0] the springs from node i down across its slab,
   * d[i][1] those from node i up across the slab above */
  for (uint32_t i = 0; i < n; i++) d[i][0] = d[i][1] = 0;
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *h = &ms->hs[s];
    uint32_t sa = sheet[h->a], sb = sheet[h->b];
    if (sa == sb) continue;
    uint32_t up = sa < sb ? h->a : h->b, dn = sa < sb ? h->b : h->a;
    d[up][0] += h->k1 + h->k2;
    d[dn][1] += h->k1 + h->k2;
  }
  free(sheet);
  for (uint32_t k = 0; k < n; k++) {
    ms->beta[k] = 0;
    if (k + nv >= n) continue;
    const uint32_t i = col[k], b = col[k + nv];
    double wa = ms->iw[i], wb = ms->iw[b]; /* the inertia, local scaling's included */
    if (!(wa > 0) && !(wb > 0)) continue;
    double mu = wa > 0 && wb > 0 ? 1.0 / (wa + wb) : wa > 0 ? 1.0 / wa : 1.0 / wb;
    double kt = d[i][0] + d[b][1];
    double beta = kt / wt2 - mu;
    ms->beta[k] = beta > 0 ? beta : 0.0;
  }
  return 0;
}
