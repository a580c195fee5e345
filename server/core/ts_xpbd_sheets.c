/*
 * ts_xpbd_sheets.c: the position-based solver's bending and volume
 * constraints (ts_xpbd.c, "Material to compliance"): the tissue's sheet
 * structure read from its column map and render triangles (the sheet
 * triangles, their unique edges and per-sheet areas), a bending constraint
 * at every interior edge of every sheet with the discrete-shells stiffness
 * of the sheet's share of the slabs beside it, and a volume constraint for
 * every prism of every slab with its bulk modulus.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_xpbd_internal.h"

void ts__xpbd_sheets_free(ts__sheets *sh) {
  free(sh->node);
  free(sh->tri);
  free(sh->tri_e);
  free(sh->ekey);
  free(sh->ecount);
  free(sh->eopp);
  free(sh->earea);
  memset(sh, 0, sizeof *sh);
}

static uint64_t edge_key(uint32_t a, uint32_t b) {
  return a < b ? (uint64_t)a << 32 | b : (uint64_t)b << 32 | a;
}

static int cmp_u64(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

/* Index of edge (a, b) in sh->ekey, or UINT32_MAX. */
static uint32_t find_edge(const ts__sheets *sh, uint32_t a, uint32_t b) {
  uint64_t k = edge_key(a, b);
  const uint64_t *hit = bsearch(&k, sh->ekey, sh->E, sizeof k, cmp_u64);
  return hit ? (uint32_t)(hit - sh->ekey) : UINT32_MAX;
}

static double tri_area(const double *a, const double *b, const double *c) {
  double u[3], v[3], n[3];
  ts__xpbd_sub3(b, a, u);
  ts__xpbd_sub3(c, a, v);
  ts__xpbd_cross3(u, v, n);
  return 0.5 * sqrt(ts__xpbd_dot3(n, n));
}

static int layers_ok(const ts_tissue *t) {
  if (t->n_layers < 1 || t->n_layers > TS_MAX_LAYERS) return 0;
  for (uint32_t l = 0; l < t->n_layers; l++) {
    const ts_layer *L = &t->layers[l];
    if (!(L->thickness > 0) || !isfinite(L->thickness)) return 0;
    if (!(L->young > 0) || !isfinite(L->young)) return 0;
  }
  return 1;
}

/* Reads the sheet structure of t: TS_EINVAL when it has none. */
int ts__xpbd_sheets_build(const ts_tissue *t, ts__sheets *sh) {
  memset(sh, 0, sizeof *sh);
  uint32_t S = t->n_sheets, nps = ts_tissue_columns(t);
  if (S < 1 || nps < 3 || (uint64_t)S * nps != t->n_nodes) return TS_EINVAL;
  if (!layers_ok(t)) return TS_EINVAL;
  if (S >= 2 ? t->n_layers != S - 1 : t->n_layers != 1) return TS_EINVAL;
  if (!t->tris || !t->rest) return TS_EINVAL;
  sh->S = S;
  sh->nps = nps;
  /* the map, and its inverse: slot[i] = s * nps + j for node i */
  sh->node = malloc(sizeof *sh->node * t->n_nodes);
  uint32_t *slot = malloc(sizeof *slot * t->n_nodes);
  if (!sh->node || !slot) {
    free(slot);
    ts__xpbd_sheets_free(sh);
    return TS_ENOMEM;
  }
  for (uint32_t q = 0, k = 0; q < S; q++)
    for (uint32_t j = 0; j < nps; j++, k++) {
      sh->node[k] = ts_tissue_sheet_node(t, q, j);
      slot[sh->node[k]] = k;
    }

  /* the sheet triangles: the render triangles lying in sheet 0, else in
   * the last sheet */
  int rc = 0;
  for (int pass = 0; pass < 2 && sh->T == 0 && !rc; pass++) {
    uint32_t base = pass == 0 ? 0 : (S - 1) * nps;
    uint32_t cnt = 0;
    for (uint32_t i = 0; i < t->n_tris; i++) {
      const uint32_t *tr = t->tris[i];
      int in = 1;
      for (int k = 0; k < 3; k++) in &= tr[k] < t->n_nodes && slot[tr[k]] - base < nps;
      cnt += (uint32_t)in;
    }
    if (cnt == 0) continue;
    sh->tri = malloc(sizeof *sh->tri * cnt);
    if (!sh->tri) {
      rc = TS_ENOMEM;
      break;
    }
    for (uint32_t i = 0; i < t->n_tris; i++) {
      const uint32_t *tr = t->tris[i];
      int in = 1;
      for (int k = 0; k < 3; k++) in &= tr[k] < t->n_nodes && slot[tr[k]] - base < nps;
      if (!in) continue;
      if (tr[0] == tr[1] || tr[1] == tr[2] || tr[0] == tr[2]) {
        rc = TS_EINVAL;
        break;
      }
      for (int k = 0; k < 3; k++) sh->tri[sh->T][k] = slot[tr[k]] - base;
      sh->T++;
    }
  }
  free(slot);
  if (!rc && sh->T == 0) rc = TS_EINVAL;
  if (rc) {
    ts__xpbd_sheets_free(sh);
    return rc;
  }

  /* unique edges */
  uint32_t T = sh->T;
  uint64_t *keys = malloc(sizeof *keys * 3 * (size_t)T);
  sh->tri_e = malloc(sizeof *sh->tri_e * T);
  if (!keys || !sh->tri_e) {
    free(keys);
    ts__xpbd_sheets_free(sh);
    return TS_ENOMEM;
  }
  for (uint32_t k = 0; k < T; k++)
    for (int i = 0; i < 3; i++) keys[3 * k + i] = edge_key(sh->tri[k][i], sh->tri[k][(i + 1) % 3]);
  qsort(keys, 3 * (size_t)T, sizeof *keys, cmp_u64);
  uint32_t E = 0;
  for (size_t i = 0; i < 3 * (size_t)T; i++)
    if (i == 0 || keys[i] != keys[i - 1]) keys[E++] = keys[i];
  sh->ekey = keys;
  sh->E = E;
  sh->ecount = calloc(E, sizeof *sh->ecount);
  sh->eopp = malloc(sizeof *sh->eopp * E);
  sh->earea = calloc((size_t)S * E, sizeof *sh->earea);
  if (!sh->ecount || !sh->eopp || !sh->earea) {
    ts__xpbd_sheets_free(sh);
    return TS_ENOMEM;
  }
  for (uint32_t k = 0; k < T; k++) {
    for (int i = 0; i < 3; i++) {
      uint32_t e = find_edge(sh, sh->tri[k][i], sh->tri[k][(i + 1) % 3]);
      sh->tri_e[k][i] = e;
      if (sh->ecount[e] < 2) sh->eopp[e][sh->ecount[e]] = sh->tri[k][(i + 2) % 3];
      sh->ecount[e]++;
    }
  }
  for (uint32_t s = 0; s < S; s++) {
    const double (*p)[3] = (const double (*)[3])t->rest;
    const uint32_t *nd = sh->node + (size_t)s * nps;
    for (uint32_t k = 0; k < T; k++) {
      const uint32_t *tr = sh->tri[k];
      double A = tri_area(p[nd[tr[0]]], p[nd[tr[1]]], p[nd[tr[2]]]);
      for (int i = 0; i < 3; i++) sh->earea[(size_t)s * E + sh->tri_e[k][i]] += A;
    }
  }
  return 0;
}

/* The sheet's share of slab l's thickness: half of it, or all of it for a
 * tissue of a single sheet. */
static double share(const ts__sheets *sh, uint32_t l, const ts_tissue *t) {
  return sh->S == 1 ? t->layers[l].thickness : 0.5 * t->layers[l].thickness;
}

/* Slabs beside sheet s: [*lo, *hi). */
static void slabs_of(const ts__sheets *sh, uint32_t s, uint32_t *lo, uint32_t *hi) {
  if (sh->S == 1) {
    *lo = 0;
    *hi = 1;
    return;
  }
  *lo = s > 0 ? s - 1 : 0;
  *hi = s < sh->S - 1 ? s + 1 : s;
}

/* Bending constraints of every interior sheet edge of every sheet. */
int ts__xpbd_add_bending(ts_xpbd *s, const ts_tissue *t, const ts__sheets *sh) {
  uint32_t interior = 0;
  for (uint32_t e = 0; e < sh->E; e++) interior += sh->ecount[e] == 2;
  uint64_t n = (uint64_t)interior * sh->S;
  if (n >= UINT32_MAX) return TS_ETOOBIG;
  s->bend = malloc(sizeof *s->bend * (n ? n : 1));
  if (!s->bend) return TS_ENOMEM;
  double nu = s->def.poisson;
  for (uint32_t sheet = 0; sheet < sh->S; sheet++) {
    uint32_t lo, hi;
    slabs_of(sh, sheet, &lo, &hi);
    double D = 0;
    for (uint32_t l = lo; l < hi; l++) {
      double th = share(sh, l, t);
      D += t->layers[l].young * th * th * th / (12.0 * (1.0 - nu * nu));
    }
    const uint32_t *nd = sh->node + (size_t)sheet * sh->nps; /* column -> node */
    for (uint32_t e = 0; e < sh->E; e++) {
      if (sh->ecount[e] != 2) continue;
      ts__bend *b = &s->bend[s->n_bend];
      b->p[0] = nd[(uint32_t)(sh->ekey[e] >> 32)];
      b->p[1] = nd[(uint32_t)(sh->ekey[e] & 0xffffffffu)];
      b->p[2] = nd[sh->eopp[e][0]];
      b->p[3] = nd[sh->eopp[e][1]];
      double p[4][3];
      for (int i = 0; i < 4; i++) memcpy(p[i], t->rest[b->p[i]], sizeof p[i]);
      double theta0 = ts_xpbd_dihedral((const double (*)[3])p, NULL);
      double Ae = sh->earea[(size_t)sheet * sh->E + e];
      double e2 = 0;
      for (int k = 0; k < 3; k++) e2 += (p[1][k] - p[0][k]) * (p[1][k] - p[0][k]);
      double kb = 3.0 * D * e2 / Ae;
      if (!isfinite(theta0) || !(kb > 0) || !isfinite(kb)) continue; /* degenerate */
      b->theta0 = theta0;
      b->alpha = 1.0 / kb;
      s->n_bend++;
    }
  }
  return 0;
}

/* Volume constraints of every prism of every slab. */
int ts__xpbd_add_volume(ts_xpbd *s, const ts_tissue *t, const ts__sheets *sh) {
  if (sh->S < 2) return 0;
  uint64_t n = (uint64_t)sh->T * (sh->S - 1);
  if (n >= UINT32_MAX) return TS_ETOOBIG;
  s->vol = malloc(sizeof *s->vol * n);
  if (!s->vol) return TS_ENOMEM;
  double nu = s->def.poisson;
  for (uint32_t l = 0; l + 1 < sh->S; l++) {
    double K = t->layers[l].young / (3.0 * (1.0 - 2.0 * nu));
    for (uint32_t k = 0; k < sh->T; k++) {
      ts__vol *v = &s->vol[s->n_vol];
      double p[6][3];
      for (int i = 0; i < 3; i++) {
        v->p[i] = sh->node[l * sh->nps + sh->tri[k][i]];
        v->p[i + 3] = sh->node[(l + 1) * sh->nps + sh->tri[k][i]];
      }
      for (int i = 0; i < 6; i++) memcpy(p[i], t->rest[v->p[i]], sizeof p[i]);
      double v0 = ts_xpbd_prism_volume((const double (*)[3])p, NULL);
      if (!(fabs(v0) > 0) || !isfinite(v0)) continue; /* degenerate */
      v->v0 = v0;
      v->alpha = fabs(v0) / K;
      s->n_vol++;
    }
  }
  return 0;
}
