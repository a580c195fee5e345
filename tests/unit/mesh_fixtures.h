/*
 * mesh_fixtures.h: meshes and measurements shared by the extrusion,
 * subdivision, mesh-tool and robustness suites: generated shapes
 * whose properties are known in closed form (icosahedron, cube, torus,
 * curved grid patch, latitude-longitude sphere), loading the shared real meshes, and independent
 * measurements (enclosed volume, area, smallest angle, the topology check
 * every operation must pass). Header-only, static inline, so each suite
 * takes what it uses.
 */
#ifndef TS_TEST_MESH_FIXTURES_H
#define TS_TEST_MESH_FIXTURES_H

#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_mesh.h"
#include "ts_mesh_io.h"
#include "ts_meshtopo.h"

static inline ts_mesh *fx_mesh(uint32_t nv, uint32_t nt) {
  ts_mesh *m = NULL;
  ck_assert_int_eq(ts_mesh_alloc(nv, nt, &m), 0);
  return m;
}

/* Regular icosahedron of circumradius r, counter-clockwise from outside. */
static inline ts_mesh *fx_icosahedron(double r) {
  static const int tri[20][3] = {{0, 11, 5}, {0, 5, 1},  {0, 1, 7},   {0, 7, 10}, {0, 10, 11},
                                 {1, 5, 9},  {5, 11, 4}, {11, 10, 2}, {10, 7, 6}, {7, 1, 8},
                                 {3, 9, 4},  {3, 4, 2},  {3, 2, 6},   {3, 6, 8},  {3, 8, 9},
                                 {4, 9, 5},  {2, 4, 11}, {6, 2, 10},  {8, 6, 7},  {9, 8, 1}};
  double p = (1 + sqrt(5.0)) / 2;
  double v[12][3] = {{-1, p, 0}, {1, p, 0}, {-1, -p, 0}, {1, -p, 0}, {0, -1, p}, {0, 1, p},
                     {0, -1, -p}, {0, 1, -p}, {p, 0, -1}, {p, 0, 1}, {-p, 0, -1}, {-p, 0, 1}};
  ts_mesh *m = fx_mesh(12, 20);
  double s = r / sqrt(1 + p * p);
  for (int i = 0; i < 12; i++)
    for (int k = 0; k < 3; k++) m->v[i][k] = v[i][k] * s;
  for (int f = 0; f < 20; f++)
    for (int k = 0; k < 3; k++) m->t[f][k] = (uint32_t)tri[f][k];
  return m;
}

/* Axis-aligned cube of side s centred at the origin, two triangles a face
 * (diagonals chosen differently on different faces). */
static inline ts_mesh *fx_cube(double s) {
  static const int tri[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7}, {0, 1, 5}, {0, 5, 4},
                                 {1, 2, 6}, {1, 6, 5}, {2, 3, 7}, {2, 7, 6}, {3, 0, 4}, {3, 4, 7}};
  ts_mesh *m = fx_mesh(8, 12);
  for (int i = 0; i < 8; i++) {
    m->v[i][0] = ((i == 1 || i == 2 || i == 5 || i == 6) ? 0.5 : -0.5) * s;
    m->v[i][1] = ((i == 2 || i == 3 || i == 6 || i == 7) ? 0.5 : -0.5) * s;
    m->v[i][2] = (i >= 4 ? 0.5 : -0.5) * s;
  }
  for (int f = 0; f < 12; f++)
    for (int k = 0; k < 3; k++) m->t[f][k] = (uint32_t)tri[f][k];
  return m;
}

/* Torus (major radius R, minor r) with nu x nv quads, two triangles each. */
static inline ts_mesh *fx_torus(double R, double r, uint32_t nu, uint32_t nv) {
  ts_mesh *m = fx_mesh(nu * nv, 2 * nu * nv);
  for (uint32_t i = 0; i < nu; i++)
    for (uint32_t j = 0; j < nv; j++) {
      double u = 2 * M_PI * i / nu, w = 2 * M_PI * j / nv;
      double *p = m->v[i * nv + j];
      p[0] = (R + r * cos(w)) * cos(u);
      p[1] = (R + r * cos(w)) * sin(u);
      p[2] = r * sin(w);
    }
  uint32_t f = 0;
  for (uint32_t i = 0; i < nu; i++)
    for (uint32_t j = 0; j < nv; j++) {
      uint32_t a = i * nv + j, b = ((i + 1) % nu) * nv + j, c = ((i + 1) % nu) * nv + (j + 1) % nv,
               d = i * nv + (j + 1) % nv;
      m->t[f][0] = a, m->t[f][1] = b, m->t[f][2] = c, f++;
      m->t[f][0] = a, m->t[f][1] = c, m->t[f][2] = d, f++;
    }
  return m;
}

/* A latitude-longitude sphere of radius r: poles and nlat - 1 rings of nlon
 * vertices on the sphere, counter-clockwise seen from outside. */
static inline ts_mesh *fx_uv_sphere(double r, uint32_t nlat, uint32_t nlon) {
  uint32_t nv = 2 + (nlat - 1) * nlon, nt = 2 * nlon * (nlat - 1);
  ts_mesh *m = fx_mesh(nv, nt);
  m->v[0][0] = 0, m->v[0][1] = r, m->v[0][2] = 0;
  m->v[1][0] = 0, m->v[1][1] = -r, m->v[1][2] = 0;
  for (uint32_t i = 1; i < nlat; i++)
    for (uint32_t j = 0; j < nlon; j++) {
      double th = M_PI * i / nlat, ph = 2 * M_PI * j / nlon;
      double *v = m->v[2 + (i - 1) * nlon + j];
      v[0] = r * sin(th) * cos(ph);
      v[1] = r * cos(th);
      v[2] = -r * sin(th) * sin(ph);
    }
  uint32_t n = 0;
#define FX_RING(i, j) (2 + ((i) - 1) * nlon + ((j) % nlon))
  for (uint32_t j = 0; j < nlon; j++) {
    uint32_t a[3] = {0, FX_RING(1, j), FX_RING(1, j + 1)};
    memcpy(m->t[n++], a, sizeof a);
    uint32_t b[3] = {1, FX_RING(nlat - 1, j + 1), FX_RING(nlat - 1, j)};
    memcpy(m->t[n++], b, sizeof b);
  }
  for (uint32_t i = 1; i + 1 < nlat; i++)
    for (uint32_t j = 0; j < nlon; j++) {
      uint32_t a[3] = {FX_RING(i, j), FX_RING(i + 1, j), FX_RING(i + 1, j + 1)};
      uint32_t b[3] = {FX_RING(i, j), FX_RING(i + 1, j + 1), FX_RING(i, j + 1)};
      memcpy(m->t[n++], a, sizeof a);
      memcpy(m->t[n++], b, sizeof b);
    }
#undef FX_RING
  ck_assert_uint_eq(n, nt);
  return m;
}

/* Square patch of side `size` in x and z, res x res vertices, on the dome
 * y = -(x^2 + z^2) / (2 R) (R = 0: flat), facing +y. union_jack: the
 * diagonals alternate so interior vertices have valence 4 and 8 (as the
 * built-in patch); otherwise all diagonals run one way (valence 6). */
static inline ts_mesh *fx_grid(uint32_t res, double size, double R, int union_jack) {
  ts_mesh *m = fx_mesh(res * res, 2 * (res - 1) * (res - 1));
  for (uint32_t zi = 0; zi < res; zi++)
    for (uint32_t xi = 0; xi < res; xi++) {
      double *p = m->v[zi * res + xi];
      p[0] = -size / 2 + size * xi / (res - 1);
      p[2] = -size / 2 + size * zi / (res - 1);
      p[1] = R > 0 ? -(p[0] * p[0] + p[2] * p[2]) / (2 * R) : 0.0;
    }
  uint32_t f = 0;
  for (uint32_t zi = 0; zi + 1 < res; zi++)
    for (uint32_t xi = 0; xi + 1 < res; xi++) {
      uint32_t a = zi * res + xi, b = a + 1, c = a + res, d = c + 1;
      /* seen from +y, (a, c, b) is counter-clockwise: x cross z = -y */
      if (!union_jack || (xi + zi) % 2 == 0) {
        m->t[f][0] = a, m->t[f][1] = c, m->t[f][2] = b, f++;
        m->t[f][0] = b, m->t[f][1] = c, m->t[f][2] = d, f++;
      } else {
        m->t[f][0] = a, m->t[f][1] = c, m->t[f][2] = d, f++;
        m->t[f][0] = a, m->t[f][1] = d, m->t[f][2] = b, f++;
      }
    }
  return m;
}

/* Copy of m with only the triangles whose keep flag is set, vertices no
 * kept triangle uses dropped (order kept). */
static inline ts_mesh *fx_keep_tris(const ts_mesh *m, const uint8_t *keep) {
  uint32_t *map = malloc(sizeof *map * m->n_verts);
  uint32_t nv = 0, nt = 0;
  for (uint32_t v = 0; v < m->n_verts; v++) map[v] = UINT32_MAX;
  for (uint32_t f = 0; f < m->n_tris; f++)
    if (keep[f]) {
      nt++;
      for (int k = 0; k < 3; k++) map[m->t[f][k]] = 0;
    }
  for (uint32_t v = 0; v < m->n_verts; v++)
    if (map[v] == 0) map[v] = nv++;
  ts_mesh *r = fx_mesh(nv, nt);
  for (uint32_t v = 0; v < m->n_verts; v++)
    if (map[v] != UINT32_MAX) memcpy(r->v[map[v]], m->v[v], sizeof r->v[0]);
  nt = 0;
  for (uint32_t f = 0; f < m->n_tris; f++)
    if (keep[f]) {
      for (int k = 0; k < 3; k++) r->t[nt][k] = map[m->t[f][k]];
      nt++;
    }
  free(map);
  return r;
}

/* One of the shared real meshes (../shared/data/meshes/NAME), scaled. */
static inline ts_mesh *fx_load(const char *name, double scale) {
  char path[1024], err[256];
  snprintf(path, sizeof path, "%s/data/meshes/%s", TS_SHARED_DIR, name);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = scale;
  ts_mesh *m = NULL;
  int rc = ts_mesh_import_file(path, TS_MESH_AUTO, &o, &m, NULL, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "loading %s: %s (%s)", path, ts_err_name(rc), err);
  return m;
}

/* Enclosed volume by the divergence theorem, sum of a . (b x c) / 6. */
static inline double fx_volume_pts(const double (*x)[3], const uint32_t (*t)[3], uint32_t nt) {
  double v = 0;
  for (uint32_t f = 0; f < nt; f++) {
    const double *a = x[t[f][0]], *b = x[t[f][1]], *c = x[t[f][2]];
    v += a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2]) +
         a[2] * (b[0] * c[1] - b[1] * c[0]);
  }
  return v / 6;
}

static inline double fx_tri_area(const double *a, const double *b, const double *c) {
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, w[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
  return 0.5 * sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
}

static inline double fx_area(const ts_mesh *m) {
  double s = 0;
  for (uint32_t f = 0; f < m->n_tris; f++) s += fx_tri_area(m->v[m->t[f][0]], m->v[m->t[f][1]], m->v[m->t[f][2]]);
  return s;
}

static inline double fx_dist(const double *a, const double *b) {
  return sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
}

/* Smallest interior angle over all triangles, radians. */
static inline double fx_min_angle(const ts_mesh *m) {
  double best = M_PI;
  for (uint32_t f = 0; f < m->n_tris; f++)
    for (int i = 0; i < 3; i++) {
      const double *p = m->v[m->t[f][i]], *q = m->v[m->t[f][(i + 1) % 3]], *r = m->v[m->t[f][(i + 2) % 3]];
      double u[3] = {q[0] - p[0], q[1] - p[1], q[2] - p[2]}, w[3] = {r[0] - p[0], r[1] - p[1], r[2] - p[2]};
      double c = (u[0] * w[0] + u[1] * w[1] + u[2] * w[2]) / (fx_dist(p, q) * fx_dist(p, r));
      double a = acos(fmax(-1.0, fmin(1.0, c)));
      if (a < best) best = a;
    }
  return best;
}

static inline double fx_max_edge(const ts_mesh *m) {
  double best = 0;
  for (uint32_t f = 0; f < m->n_tris; f++)
    for (int i = 0; i < 3; i++) best = fmax(best, fx_dist(m->v[m->t[f][i]], m->v[m->t[f][(i + 1) % 3]]));
  return best;
}

/* The check every operation's result must pass: a manifold, consistently
 * wound, no degenerate triangle (and, for a plain mesh, no unused vertex: a
 * render surface leaves the inner sheets' nodes out); returns the report so
 * the caller can assert the Euler characteristic, boundary and genus it
 * expects. */
static inline ts_meshtopo_report fx_check_mesh(const double (*x)[3], uint32_t nv, const uint32_t (*t)[3],
                                               uint32_t nt, const char *what) {
  ts_mesh view = {nv, nt, (double(*)[3])x, (uint32_t(*)[3])t};
  ts_meshtopo *topo = NULL;
  ck_assert_int_eq(ts_meshtopo_build(&view, &topo), 0);
  ts_meshtopo_report r;
  char err[256];
  int rc = ts_meshtopo_check(&view, topo, &r, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", what, err);
  ck_assert_uint_eq(r.n_nonmanifold_edges, 0);
  ck_assert_uint_eq(r.n_nonmanifold_verts, 0);
  ck_assert_uint_eq(r.n_misoriented_edges, 0);
  ck_assert_uint_eq(r.n_degenerate_tris, 0);
  ts_meshtopo_free(topo);
  return r;
}

static inline ts_meshtopo_report fx_check(const ts_mesh *m, const char *what) {
  ts_meshtopo_report r =
      fx_check_mesh((const double(*)[3])m->v, m->n_verts, (const uint32_t(*)[3])m->t, m->n_tris, what);
  ck_assert_msg(r.n_verts_used == m->n_verts, "%s: %u of %u vertices used", what, r.n_verts_used, m->n_verts);
  return r;
}

#endif
