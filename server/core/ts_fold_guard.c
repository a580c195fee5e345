/*
 * ts_fold_guard.c: the prisms an inversion guard watches (ts_fold_guard.h
 * says which and why): made once from the tissue's layers, listed once a
 * step, their corner tetrahedra and energy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_corner_tet.h"
#include "ts_error.h"
#include "ts_fold_guard.h"

void ts_fold_guard_free(ts_fold_guard *g) {
  if (!g) return;
  free(g->prism);
  free(g->kappa);
  free(g->v0);
  free(g->colof);
  free(g->cstart);
  free(g->cprism);
  free(g->on_mark);
  free(g->by_tool);
  free(g->on);
  free(g->bstart);
  free(g->bprism);
  free(g);
}

double ts_fold_guard_tet(const ts_fold_guard *g, uint32_t q, int k, const double (*x)[3],
                         uint32_t idx[4], double grad[4][3]) {
  return ts_corner_tet(g->prism[q], k, x, idx, grad) / g->v0[q][k];
}

double ts_fold_guard_min_ratio(const ts_fold_guard *g, uint32_t q, const double (*x)[3]) {
  double r = INFINITY;
  for (int k = 0; k < 6; k++) {
    uint32_t idx[4];
    const double rk = ts_fold_guard_tet(g, q, k, x, idx, NULL);
    if (!(rk >= r)) r = rk; /* a NaN ratio counts as the smallest */
  }
  return r;
}

/* 1: contact triangle c has its three corners in the outer sheet. */
static int outer_tri(const ts_tissue *t, const ts_fold_guard *g, const uint32_t c[3]) {
  for (int k = 0; k < 3; k++)
    if (!(c[k] < t->n_nodes && g->colof[c[k]] != UINT32_MAX &&
          ts_tissue_sheet_node(t, 0, g->colof[c[k]]) == c[k]))
      return 0;
  return 1;
}

int ts_fold_guard_create(const ts_tissue *t, ts_fold_guard **out) {
  *out = NULL;
  const uint32_t S = t->n_sheets, n = t->n_nodes;
  if (S < 2 || S > TS_MAX_LAYERS + 1 || t->n_layers + 1 != S) return 0; /* no layers */
  const uint32_t nc = ts_tissue_columns(t);
  if (nc == 0) return 0;
  const uint32_t nt = ts_tissue_n_contact_tris(t);
  const uint32_t(*ct)[3] = (const uint32_t(*)[3])ts_tissue_contact_tris(t);
  ts_fold_guard *g = calloc(1, sizeof *g);
  if (!g) return TS_ENOMEM;
  g->n_nodes = n;
  g->colof = malloc(sizeof *g->colof * (n ? n : 1));
  g->cstart = calloc((size_t)nc + 1, sizeof *g->cstart);
  if (!g->colof || !g->cstart) goto oom;
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
    ts_fold_guard_free(g);
    return 0;
  }
  g->prism = malloc(sizeof *g->prism * np);
  g->kappa = malloc(sizeof *g->kappa * np);
  g->v0 = malloc(sizeof *g->v0 * np);
  g->on_mark = calloc(np, 1);
  g->by_tool = calloc(np, 1);
  g->on = malloc(sizeof *g->on * np);
  g->cprism = malloc(sizeof *g->cprism * np * 3);
  g->bstart = calloc(TS_FOLD_SWEEP + 1, sizeof *g->bstart);
  g->bprism = malloc(sizeof *g->bprism * np);
  if (!g->prism || !g->kappa || !g->v0 || !g->on_mark || !g->by_tool || !g->on || !g->cprism ||
      !g->bstart || !g->bprism)
    goto oom;
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
      g->kappa[q] = isfinite(E) && E > 0 ? TS_FOLD_STIFF * E : 0.0;
      for (int k = 0; k < 6; k++) {
        uint32_t idx[4];
        g->v0[q][k] = ts_corner_tet(p, k, (const double (*)[3])t->rest, idx, NULL);
        if (!(fabs(g->v0[q][k]) > 0) || !isfinite(g->v0[q][k])) g->kappa[q] = 0; /* flat at rest */
      }
      /* inside out as made: the tissue's own (ts_fold_guard.h) */
      if (g->kappa[q] > 0 && !(ts_fold_guard_min_ratio(g, q, (const double (*)[3])t->x) >= 0))
        g->kappa[q] = 0;
      for (int k = 0; k < 3; k++) g->cstart[g->colof[ct[f][k]] + 1]++;
    }
  }
  for (uint32_t j = 0; j < nc; j++) g->cstart[j + 1] += g->cstart[j];
  uint32_t *fill = malloc(sizeof *fill * (nc > TS_FOLD_SWEEP ? nc : TS_FOLD_SWEEP));
  if (!fill) goto oom;
  memcpy(fill, g->cstart, sizeof *fill * nc);
  for (uint32_t q = 0; q < g->n_prism; q++)
    for (int k = 0; k < 3; k++) g->cprism[fill[g->colof[g->prism[q][k]]]++] = q;
  /* the sweep's turns, by the first column (see ts_fold_guard.h) */
  for (uint32_t q = 0; q < g->n_prism; q++) g->bstart[g->colof[g->prism[q][0]] % TS_FOLD_SWEEP + 1]++;
  for (uint32_t k = 0; k < TS_FOLD_SWEEP; k++) g->bstart[k + 1] += g->bstart[k];
  memcpy(fill, g->bstart, sizeof *fill * TS_FOLD_SWEEP);
  for (uint32_t q = 0; q < g->n_prism; q++) g->bprism[fill[g->colof[g->prism[q][0]] % TS_FOLD_SWEEP]++] = q;
  free(fill);
  *out = g;
  return 0;
oom:
  ts_fold_guard_free(g);
  return TS_ENOMEM;
}

void ts_fold_guard_near(ts_fold_guard *g, const uint32_t *nodes, uint32_t n) {
  for (uint32_t c = 0; c < n; c++) {
    const uint32_t i = nodes[c];
    const uint32_t j = i < g->n_nodes ? g->colof[i] : UINT32_MAX;
    if (j == UINT32_MAX) continue;
    for (uint32_t e = g->cstart[j]; e < g->cstart[j + 1]; e++) g->by_tool[g->cprism[e]] = 1;
  }
}

uint32_t ts_fold_guard_watch(ts_fold_guard *g, const double (*x)[3], const uint32_t *touched,
                             uint32_t n_touched, int sweep, uint64_t step) {
  uint32_t n_on = 0;
  for (uint32_t a = 0; a < g->n_on; a++) { /* the last step's, while squeezed */
    const uint32_t q = g->on[a];
    if (ts_fold_guard_min_ratio(g, q, x) < TS_FOLD_WATCH) g->on[n_on++] = q;
    else g->on_mark[q] = 0;
  }
  for (uint32_t c = 0; c < n_touched; c++) { /* the columns the tools touch */
    const uint32_t i = touched[c];
    const uint32_t j = i < g->n_nodes ? g->colof[i] : UINT32_MAX;
    if (j == UINT32_MAX) continue;
    for (uint32_t e = g->cstart[j]; e < g->cstart[j + 1]; e++) {
      const uint32_t q = g->cprism[e];
      if (g->on_mark[q] || !(g->kappa[q] > 0)) continue;
      if (ts_fold_guard_min_ratio(g, q, x) < TS_FOLD_WATCH) g->on_mark[q] = 1, g->on[n_on++] = q;
    }
  }
  /* and a share of all the prisms a tool has been near, in turn: a fold a
   * tool left where it no longer touches */
  const uint32_t b = (uint32_t)(step % TS_FOLD_SWEEP);
  for (uint32_t e = sweep ? g->bstart[b] : 0; sweep && e < g->bstart[b + 1]; e++) {
    const uint32_t q = g->bprism[e];
    if (g->on_mark[q] || !g->by_tool[q] || !(g->kappa[q] > 0)) continue;
    if (ts_fold_guard_min_ratio(g, q, x) < TS_FOLD_INSIDE_OUT) g->on_mark[q] = 1, g->on[n_on++] = q;
  }
  g->n_on = n_on;
  return n_on;
}

double ts_fold_guard_energy(const ts_fold_guard *g, const double (*x)[3]) {
  if (!g) return 0.0;
  double e = 0;
  for (uint32_t a = 0; a < g->n_on; a++) {
    const uint32_t q = g->on[a];
    for (int k = 0; k < 6; k++) {
      uint32_t idx[4];
      const double r = ts_fold_guard_tet(g, q, k, x, idx, NULL);
      if (r < TS_FOLD_MIN) e += 0.5 * g->kappa[q] * fabs(g->v0[q][k]) * (r - TS_FOLD_MIN) * (r - TS_FOLD_MIN);
    }
  }
  return e;
}
