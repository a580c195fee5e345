/*
 * extrude_fixtures.h: checks of an extrusion's render surface shared by the
 * extrusion, real-mesh and subdivision suites: the solid's closed boundary
 * (the render surface without the inner layers' top sheets) as a mesh
 * check and its enclosed volume, and the check that every layer's render
 * group starts with its top sheet facing outwards. A closed box with
 * gridded faces (the thin slab whose sheets cross when offset too deep).
 * Header-only, static inline.
 */
#ifndef TS_TEST_EXTRUDE_FIXTURES_H
#define TS_TEST_EXTRUDE_FIXTURES_H

#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mesh_fixtures.h"
#include "ts_extrude.h"
#include "ts_tritri.h"

/* The solid's closed boundary: the render surface without the inner
 * layers' top sheets (ts_extrusion_tri_inner), which lie inside it. */
static inline uint32_t fx_hull_tris(const ts_extrusion *e, uint32_t (**out)[3]) {
  uint32_t(*t)[3] = malloc(sizeof *t * (e->n_tris ? e->n_tris : 1)), n = 0;
  ck_assert_ptr_nonnull(t);
  for (uint32_t k = 0; k < e->n_tris; k++)
    if (!ts_extrusion_tri_inner(e, k)) memcpy(t[n++], e->tris[k], sizeof *t);
  *out = t;
  return n;
}

/* The solid's boundary in the render surface as a mesh check. */
static inline ts_meshtopo_report fx_check_hull(const ts_extrusion *e, const char *what) {
  uint32_t(*t)[3];
  uint32_t n = fx_hull_tris(e, &t);
  ts_meshtopo_report r =
      fx_check_mesh((const double(*)[3])e->x, e->n_sheets * e->nv, (const uint32_t(*)[3])t, n, what);
  free(t);
  return r;
}

static inline double fx_hull_volume(const ts_extrusion *e) {
  uint32_t(*t)[3];
  uint32_t n = fx_hull_tris(e, &t);
  double v = fx_volume_pts((const double(*)[3])e->x, (const uint32_t(*)[3])t, n);
  free(t);
  return v;
}

/* Every layer renders from the correct side: render group g starts with
 * layer g's top sheet, sheet g's copy of every surface triangle in the
 * surface's winding, and each of them faces outwards: its normal points
 * against the extrusion, the mean of its corners' offsets to sheet g+1, at
 * a cosine below -min_cos (the cube's corners leave at 54.7 degrees to the
 * faces, cosine 0.577; the curved shapes' within a few degrees). Returns
 * the signed volume enclosed by each layer's top sheet in vol (n_layers
 * entries, may be NULL): positive for a closed surface wound outwards. */
static inline void fx_check_layer_tops(const ts_extrusion *e, double min_cos, double *vol) {
  const uint32_t T = e->n_surface_tris, nv = e->nv;
  uint32_t start = 0;
  for (uint32_t g = 0; g < e->n_layers; g++) {
    ck_assert_uint_ge(e->group_tri_count[g], T);
    double v = 0;
    for (uint32_t f = 0; f < T; f++) {
      const uint32_t *tr = e->tris[start + f];
      for (int k = 0; k < 3; k++) ck_assert_uint_eq(tr[k], g * nv + e->surface_tris[f][k]);
      ck_assert(!ts_extrusion_tri_inner(e, start + f) == (g == 0));
      const double *a = e->x[tr[0]], *b = e->x[tr[1]], *c = e->x[tr[2]];
      double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, w[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
      double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
      double dcol[3] = {0, 0, 0};
      for (int k = 0; k < 3; k++)
        for (int q = 0; q < 3; q++) dcol[q] += e->x[tr[k] + nv][q] - e->x[tr[k]][q];
      double nn = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
      double dn = sqrt(dcol[0] * dcol[0] + dcol[1] * dcol[1] + dcol[2] * dcol[2]);
      double cosang = (n[0] * dcol[0] + n[1] * dcol[1] + n[2] * dcol[2]) / (nn * dn);
      ck_assert_msg(cosang < -min_cos, "layer %u top triangle %u faces inwards: cos %g", g, f, cosang);
      v += (a[0] * n[0] + a[1] * n[1] + a[2] * n[2]) / 6;
    }
    if (vol) vol[g] = v;
    start += e->group_tri_count[g];
  }
  ck_assert_uint_eq(start, e->n_tris);
}

typedef struct fx_box_item {
  double lo[3], hi[3];
  uint32_t k;
} fx_box_item;

static inline int fx_cmp_lo0(const void *a, const void *b) {
  double x = ((const fx_box_item *)a)->lo[0], y = ((const fx_box_item *)b)->lo[0];
  return x < y ? -1 : x > y;
}

/* An independent count of crossing pairs (what ts_extrude's check counts,
 * by another broad phase): every pair of e's render triangles (every
 * sheet and the side walls) with no column in common whose closed
 * triangles meet (ts_tri_tri_intersect), found by sorting their boxes
 * along x and sweeping. Grazing pairs (a corner just on the other
 * triangle) can go either way with the argument and corner order: on
 * spot.obj with only the folds thinned this count is 49 where the check's
 * (and an all-pairs loop in the check's order) is 52; on clean crossings
 * and where nothing crosses the two agree exactly. */
static inline uint32_t fx_count_crossings(const ts_extrusion *e) {
  const uint32_t n = e->n_tris, nv = e->nv;
  fx_box_item *b = malloc(sizeof *b * (n ? n : 1));
  ck_assert_ptr_nonnull(b);
  for (uint32_t k = 0; k < n; k++) {
    b[k].k = k;
    for (int q = 0; q < 3; q++) b[k].lo[q] = INFINITY, b[k].hi[q] = -INFINITY;
    for (int c = 0; c < 3; c++)
      for (int q = 0; q < 3; q++) {
        b[k].lo[q] = fmin(b[k].lo[q], e->x[e->tris[k][c]][q]);
        b[k].hi[q] = fmax(b[k].hi[q], e->x[e->tris[k][c]][q]);
      }
  }
  qsort(b, n, sizeof *b, fx_cmp_lo0);
  uint32_t count = 0;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = i + 1; j < n && b[j].lo[0] <= b[i].hi[0]; j++) {
      if (b[j].lo[1] > b[i].hi[1] || b[i].lo[1] > b[j].hi[1] || b[j].lo[2] > b[i].hi[2] || b[i].lo[2] > b[j].hi[2])
        continue;
      const uint32_t *p = e->tris[b[i].k], *q = e->tris[b[j].k];
      int shared = 0;
      for (int u = 0; u < 3 && !shared; u++)
        for (int w = 0; w < 3; w++)
          if (p[u] % nv == q[w] % nv) shared = 1;
      if (shared) continue;
      double P[3][3], Q[3][3];
      for (int c = 0; c < 3; c++) {
        memcpy(P[c], e->x[p[c]], sizeof P[c]);
        memcpy(Q[c], e->x[q[c]], sizeof Q[c]);
      }
      count += ts_tri_tri_intersect((const double(*)[3])P, (const double(*)[3])Q, NULL, NULL) != 0;
    }
  free(b);
  return count;
}

/* A closed box [-lx/2, lx/2] x [-ly/2, ly/2] x [-lz/2, lz/2] (m) with
 * cells[a] grid cells along axis a on every face, quads cut along one
 * diagonal, counter-clockwise from outside, shared edge vertices welded. */
static inline ts_mesh *fx_box(const double len[3], const uint32_t cells[3]) {
  const uint32_t c0 = cells[0], c1 = cells[1], c2 = cells[2];
  uint32_t nlat = (c0 + 1) * (c1 + 1) * (c2 + 1);
  uint32_t *id = malloc(sizeof *id * nlat);
  ck_assert_ptr_nonnull(id);
  for (uint32_t i = 0; i < nlat; i++) id[i] = UINT32_MAX;
  uint32_t nv = 0, nt = 0;
  for (uint32_t i = 0; i <= c0; i++)
    for (uint32_t j = 0; j <= c1; j++)
      for (uint32_t k = 0; k <= c2; k++)
        if (i == 0 || i == c0 || j == 0 || j == c1 || k == 0 || k == c2) id[(i * (c1 + 1) + j) * (c2 + 1) + k] = nv++;
  for (int a = 0; a < 3; a++) nt += 4 * cells[(a + 1) % 3] * cells[(a + 2) % 3];
  ts_mesh *m = fx_mesh(nv, nt);
  for (uint32_t i = 0; i <= c0; i++)
    for (uint32_t j = 0; j <= c1; j++)
      for (uint32_t k = 0; k <= c2; k++) {
        uint32_t v = id[(i * (c1 + 1) + j) * (c2 + 1) + k];
        if (v == UINT32_MAX) continue;
        m->v[v][0] = len[0] * ((double)i / c0 - 0.5);
        m->v[v][1] = len[1] * ((double)j / c1 - 0.5);
        m->v[v][2] = len[2] * ((double)k / c2 - 0.5);
      }
  uint32_t t = 0;
  for (int a = 0; a < 3; a++)
    for (int side = 0; side < 2; side++) {
      int u = (a + 1) % 3, w = (a + 2) % 3; /* e_u x e_w = e_a */
      for (uint32_t p = 0; p < cells[u]; p++)
        for (uint32_t q = 0; q < cells[w]; q++) {
          uint32_t corner[4];
          const uint32_t dp[4] = {0, 1, 1, 0}, dq[4] = {0, 0, 1, 1};
          for (int c = 0; c < 4; c++) {
            uint32_t ijk[3];
            ijk[a] = side ? cells[a] : 0;
            ijk[u] = p + dp[c];
            ijk[w] = q + dq[c];
            corner[c] = id[(ijk[0] * (c1 + 1) + ijk[1]) * (c2 + 1) + ijk[2]];
          }
          /* (p,q) -> (p+1,q) -> (p+1,q+1): normal +e_a; reversed on the low side */
          uint32_t A = corner[0], B = corner[1], C = corner[2], D = corner[3];
          if (side) {
            m->t[t][0] = A, m->t[t][1] = B, m->t[t][2] = C, t++;
            m->t[t][0] = A, m->t[t][1] = C, m->t[t][2] = D, t++;
          } else {
            m->t[t][0] = A, m->t[t][1] = C, m->t[t][2] = B, t++;
            m->t[t][0] = A, m->t[t][1] = D, m->t[t][2] = C, t++;
          }
        }
    }
  ck_assert_uint_eq(t, nt);
  free(id);
  return m;
}

#endif
