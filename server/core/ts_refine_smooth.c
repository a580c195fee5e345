/*
 * ts_refine_smooth.c: Loop's smoothing rules for a live refinement
 * (ts_refine_smooth.h). The smoothed rest shape (ts_loop_extrusion,
 * TS_LOOP_SMOOTH) and Loop's topology with midpoints (TS_LOOP_LINEAR) have
 * the same vertices and triangles; every surface vertex j takes a share
 * a_j of its smoothing, through every sheet alike:
 *   x = x_mid + a_j (x_smooth - x_mid).
 * The rule:
 *   1. a_j = g for all, g = min(1, cap / (1.5 D / rate)): the blend time the
 *      largest rest change D needs within the cap (TS_REFINE_SMOOTH_MAX_BLEND),
 *      else the smoothing scaled back alike (the stated fallback);
 *   2. while a prism is inverted (ts_prism_check), a sheet triangle is turned
 *      over against its midpoint twin (normals opposed) or two sheet
 *      triangles with no column in common cross (the upload's crossing
 *      check, ts_extrude_cross.c), every vertex of them that moves halves
 *      its share (below TS_REFINE_SMOOTH_MIN_SHARE: none, its midpoint);
 *      the vertices so limited are counted.
 * It ends: the midpoint shape (all shares 0) has none of the three (its
 * triangles tile their parents', ts_refine.h), and a share only falls.
 * Why: on the liver's 1,000-triangle top region the full smoothing turns
 * sliver triangles over (0.07 mm edges beside 1.7 mm ones: the edge rule
 * moves a new vertex by up to an eighth of the neighbouring triangles,
 * beyond a sliver's width) and inverts 7 prisms, which ts_refine_run would
 * refuse; limiting only the vertices of those triangles keeps the
 * smoothing everywhere else.
 */
#include "ts_refine_smooth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude_internal.h"

static void tri_normal(const double (*x)[3], const uint32_t *t, double n[3]) {
  double u[3], v[3];
  for (int c = 0; c < 3; c++) {
    u[c] = x[t[1]][c] - x[t[0]][c];
    v[c] = x[t[2]][c] - x[t[0]][c];
  }
  n[0] = u[1] * v[2] - u[2] * v[1];
  n[1] = u[2] * v[0] - u[0] * v[2];
  n[2] = u[0] * v[1] - u[1] * v[0];
}

/* x of e = lin + share (smooth - lin) per surface vertex, through every sheet. */
static void apply(ts_extrusion *e, const ts_extrusion *lin, const double (*d)[3], const double *share) {
  const uint32_t nv = e->nv;
  for (uint32_t s = 0; s < e->n_sheets; s++)
    for (uint32_t j = 0; j < nv; j++) {
      const size_t k = (size_t)s * nv + j;
      for (int c = 0; c < 3; c++) e->x[k][c] = lin->x[k][c] + share[j] * d[k][c];
    }
}

int ts__refine_smooth(const ts_extrusion *e, const uint32_t *sel, uint32_t nd, double rate, double max_blend,
                      ts_extrusion **out, ts_loop_plan **plan, ts__refine_smooth_out *info, char *err,
                      size_t errcap) {
  if (!out || !plan || !info || !(rate > 0) || !(max_blend > 0) || !isfinite(rate) || !isfinite(max_blend))
    return TS_EINVAL;
  *out = NULL;
  *plan = NULL;
  memset(info, 0, sizeof *info);
  info->scale = 1;
  ts_extrusion *lin = NULL, *smo = NULL;
  ts_loop_plan *lp = NULL;
  int rc = ts_loop_extrusion(e, sel, nd, TS_LOOP_LINEAR, &lin, &lp, err, errcap);
  if (rc) {
    ts_extrusion_free(lin);
    return rc;
  }
  rc = ts_loop_extrusion(e, sel, nd, TS_LOOP_SMOOTH, &smo, NULL, NULL, 0);
  if (rc && !(rc == TS_EMESH && smo)) goto fail;
  rc = 0;
  const uint32_t nv = lin->nv, S = lin->n_sheets, nt = lin->n_surface_tris;
  const size_t N = (size_t)S * nv;
  if (smo->nv != nv || smo->n_sheets != S || smo->n_surface_tris != nt) {
    rc = TS_EINTERNAL;
    goto fail;
  }
  double(*d)[3] = malloc(sizeof *d * N);
  double *share = malloc(sizeof *share * nv), *mv = calloc(nv, sizeof *mv);
  uint8_t *mark = malloc(nv), *lim = calloc(nv, 1);
  uint32_t *moved = malloc(sizeof *moved * N);
  ts__cross_check *cc = NULL;
  if (!d || !share || !mv || !mark || !lim || !moved) {
    rc = TS_ENOMEM;
    goto out;
  }
  double D = 0;
  for (size_t k = 0; k < N; k++) {
    double m2 = 0;
    for (int c = 0; c < 3; c++) d[k][c] = smo->x[k][c] - lin->x[k][c], m2 += d[k][c] * d[k][c];
    const double m = sqrt(m2);
    if (m > mv[k % nv]) mv[k % nv] = m;
    if (m > D) D = m;
  }
  /* 1. the cap */
  const double need = 1.5 * D / rate;
  const double g = need > max_blend ? max_blend / need : 1.0;
  info->scale = g;
  for (uint32_t j = 0; j < nv; j++) share[j] = g;
  apply(smo, lin, (const double(*)[3])d, share);
  rc = ts__cross_check_new(smo, &cc);
  if (rc) goto out;
  /* 2. the limiter */
  for (;;) {
    info->rounds++;
    ts__extrusion_count_inverted(smo, mark, NULL, 0);
    for (uint32_t s = 0; s < S; s++)
      for (uint32_t f = 0; f < nt; f++) {
        double a[3], b[3];
        const uint32_t *t = smo->surface_tris[f];
        tri_normal((const double(*)[3])(smo->x + (size_t)s * nv), t, a);
        tri_normal((const double(*)[3])(lin->x + (size_t)s * nv), t, b);
        if (a[0] * b[0] + a[1] * b[1] + a[2] * b[2] <= 0) mark[t[0]] = mark[t[1]] = mark[t[2]] = 1;
      }
    uint32_t n_pairs = 0;
    rc = ts__cross_check_mark(cc, smo, mark, &n_pairs, NULL, 0);
    if (rc && rc != TS_EMESH) goto out;
    rc = 0;
    uint32_t changed = 0, n_moved = 0;
    for (uint32_t j = 0; j < nv; j++) {
      if (!mark[j] || share[j] == 0 || mv[j] == 0) continue;
      share[j] *= 0.5;
      if (share[j] < TS_REFINE_SMOOTH_MIN_SHARE) share[j] = 0;
      if (!lim[j]) lim[j] = 1, info->limited++;
      changed++;
      for (uint32_t s = 0; s < S; s++) moved[n_moved++] = s * nv + j;
    }
    int bad = 0;
    for (uint32_t j = 0; j < nv && !bad; j++) bad = mark[j];
    if (!bad) break;
    if (!changed) { /* nothing left to limit: the midpoint shape's own trouble */
      rc = TS_EMESH;
      if (err && errcap)
        snprintf(err, errcap, "refined rest shape: %u inverted prisms, %u crossing pairs with no smoothing left",
                 smo->n_inverted, n_pairs);
      goto out;
    }
    apply(smo, lin, (const double(*)[3])d, share);
    rc = ts__cross_check_moved(cc, smo, moved, n_moved);
    if (rc) goto out;
  }
  smo->n_inverted = 0;
  smo->n_crossings = 0;
  D = 0;
  for (size_t k = 0; k < N; k++) {
    const double m = share[k % nv] * sqrt(d[k][0] * d[k][0] + d[k][1] * d[k][1] + d[k][2] * d[k][2]);
    if (m > D) D = m;
  }
  info->rest_move = D;
  info->blend = 1.5 * D / rate;
out:
  ts__cross_check_free(cc);
  free(d);
  free(share);
  free(mv);
  free(mark);
  free(lim);
  free(moved);
  if (!rc) {
    ts_extrusion_free(lin);
    *out = smo;
    *plan = lp;
    return 0;
  }
fail:
  ts_extrusion_free(lin);
  ts_extrusion_free(smo);
  ts_loop_plan_free(lp);
  return rc;
}
