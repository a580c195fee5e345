/*
 * test_extrude_real.c: Check suite for the prism criterion shared by the
 * extrusion and the tissue builder (ts_prism_check, server/core/
 * ts_extrude_prism.c), the crease directions, pleat relaxation and depth
 * thinning of the extrusion (ts_extrude_dir.c, ts_extrude_relax.c,
 * ts_extrude.c), and every shared real mesh (../shared/data/meshes,
 * SOURCES.md) through extrusion to a built tissue.
 *
 * Independent measurements: a prism's volume by quadrature of its
 * Jacobian (3-point triangle rule x 2-point Gauss in depth, exact for the
 * linear wedge, whose Jacobian is linear over the triangle and quadratic in
 * depth), its Jacobian sampled at the corners over 101 depths, and the shell
 * volume between two closed sheets by the divergence theorem.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extrude_fixtures.h"
#include "mesh_fixtures.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_material.h"
#include "ts_mesh.h"
#include "ts_meshtopo.h"
#include "ts_tissue.h"

/* Jacobian determinant of the wedge P -> Q at reference (xi, eta, z),
 * sign chosen positive for a sound prism (P counter-clockwise from outside,
 * Q inwards). */
static double wedge_det(const double P[3][3], const double Q[3][3], double xi, double eta, double z) {
  double N[3] = {1 - xi - eta, xi, eta}, X[3][3];
  for (int i = 0; i < 3; i++)
    for (int a = 0; a < 3; a++) X[i][a] = (1 - z) * P[i][a] + z * Q[i][a];
  double dxi[3], deta[3], dz[3] = {0, 0, 0};
  for (int a = 0; a < 3; a++) {
    dxi[a] = X[1][a] - X[0][a];
    deta[a] = X[2][a] - X[0][a];
    for (int i = 0; i < 3; i++) dz[a] += N[i] * (Q[i][a] - P[i][a]);
  }
  double c[3] = {dxi[1] * deta[2] - dxi[2] * deta[1], dxi[2] * deta[0] - dxi[0] * deta[2],
                 dxi[0] * deta[1] - dxi[1] * deta[0]};
  return -(c[0] * dz[0] + c[1] * dz[1] + c[2] * dz[2]);
}

/* Volume by quadrature: midpoint-of-edges rule on the triangle (degree 2,
 * weights 1/6 on the reference triangle of area 1/2) x 2-point Gauss in z. */
static double quad_volume(const double P[3][3], const double Q[3][3]) {
  const double pts[3][2] = {{0.5, 0}, {0.5, 0.5}, {0, 0.5}};
  const double gz[2] = {0.5 - 0.5 / sqrt(3.0), 0.5 + 0.5 / sqrt(3.0)};
  double v = 0;
  for (int q = 0; q < 3; q++)
    for (int g = 0; g < 2; g++) v += (1.0 / 6.0) * 0.5 * wedge_det(P, Q, pts[q][0], pts[q][1], gz[g]);
  return v;
}

/* Smallest corner Jacobian sampled over z = k/100. */
static double sampled_min_det(const double P[3][3], const double Q[3][3]) {
  const double corner[3][2] = {{0, 0}, {1, 0}, {0, 1}};
  double lo = INFINITY;
  for (int k = 0; k <= 100; k++)
    for (int i = 0; i < 3; i++) lo = fmin(lo, wedge_det(P, Q, corner[i][0], corner[i][1], k / 100.0));
  return lo;
}

static void prism_of(const ts_extrusion *e, uint32_t layer, uint32_t f, double P[3][3], double Q[3][3]) {
  for (int k = 0; k < 3; k++) {
    memcpy(P[k], e->x[(size_t)layer * e->nv + e->surface_tris[f][k]], sizeof P[k]);
    memcpy(Q[k], e->x[(size_t)(layer + 1) * e->nv + e->surface_tris[f][k]], sizeof Q[k]);
  }
}

/* Signed volume of tetrahedron (a, b, c, d), positive when d lies on the
 * side of (a, b, c) its counter-clockwise normal points away from. */
static double tet(const double *a, const double *b, const double *c, const double *d) {
  double u[3], v[3], w[3];
  for (int k = 0; k < 3; k++) u[k] = b[k] - a[k], v[k] = c[k] - a[k], w[k] = d[k] - a[k];
  return -((u[1] * v[2] - u[2] * v[1]) * w[0] + (u[2] * v[0] - u[0] * v[2]) * w[1] +
           (u[0] * v[1] - u[1] * v[0]) * w[2]) / 6;
}

/* The triangle (0,0,0), (a,0,0), (0,0,-a) seen from +y (counter-clockwise
 * from outside, outside = +y), extruded towards -y. */
static void base_triangle(double P[3][3], double a) {
  memset(P, 0, sizeof(double) * 9);
  P[1][0] = a;
  P[2][2] = -a;
}

/* Hand-made prisms whose validity and volume are known. */
START_TEST(test_prism_check_cases) {
  const double a = 2e-3, t = 1e-3;
  double P[3][3], Q[3][3], v, j;
  base_triangle(P, a);
  /* right prism: valid, volume = area x thickness, Jacobian sine 1 */
  for (int k = 0; k < 3; k++) {
    memcpy(Q[k], P[k], sizeof Q[k]);
    Q[k][1] -= t;
  }
  ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, &j), 0);
  ck_assert_double_eq_tol(v, 0.5 * a * a * t, 1e-12 * a * a * t); /* rounding only */
  ck_assert_double_eq_tol(j, 1.0, 1e-12);

  /* sheared and twisted: the inner triangle rotated by +-60 degrees about
   * the prism's axis. Every intermediate triangle keeps its orientation and
   * the lateral edges point down, so both are valid; a fixed three-
   * tetrahedra split (P0 P1 P2 Q0, P1 P2 Q0 Q1, P2 Q0 Q1 Q2) calls one of
   * them inverted. The volume matches the quadrature. */
  int split_refuses = 0;
  for (int sgn = -1; sgn <= 1; sgn += 2) {
    double th = sgn * 60.0 * M_PI / 180.0, cx = a / 3, cz = -a / 3;
    for (int k = 0; k < 3; k++) {
      double x = P[k][0] - cx, z = P[k][2] - cz;
      Q[k][0] = cx + cos(th) * x - sin(th) * z;
      Q[k][2] = cz + sin(th) * x + cos(th) * z;
      Q[k][1] = -t;
    }
    ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, &j), 0);
    double vq = quad_volume((const double(*)[3])P, (const double(*)[3])Q);
    ck_assert_double_eq_tol(v, vq, 1e-12 * fabs(vq));
    ck_assert(v > 0 && v < 0.5 * a * a * t); /* the blend shrinks the middle */
    ck_assert(j > 0 && j < 1);
    double t0 = tet(P[0], P[1], P[2], Q[0]), t1 = tet(P[1], P[2], Q[0], Q[1]), t2 = tet(P[2], Q[0], Q[1], Q[2]);
    split_refuses += t0 <= 0 || t1 <= 0 || t2 <= 0;
  }
  ck_assert_int_eq(split_refuses, 1);

  /* one lateral edge leaning out over the face (a crease's normal): invalid
   * at any depth, however small */
  for (double depth = 1e-3; depth > 1e-9; depth /= 100) {
    for (int k = 0; k < 3; k++) {
      memcpy(Q[k], P[k], sizeof Q[k]);
      Q[k][1] -= depth;
    }
    Q[0][1] = P[0][1] + 0.1 * depth; /* vertex 0 moves up, out of the surface */
    Q[0][0] = P[0][0] - depth;
    ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, &j), TS_EMESH);
    ck_assert(j < 0);
  }

  /* a bulge offset past its centre: the lateral edges converge on a point
   * at z = 0.5 (the triangle shrinks through it); valid when they stop at
   * z = 0.4 of that */
  double c[3] = {a / 3, -t, -a / 3};
  for (int k = 0; k < 3; k++)
    for (int q = 0; q < 3; q++) Q[k][q] = P[k][q] + 2 * (c[q] - P[k][q]);
  ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, &j), TS_EMESH);
  for (int k = 0; k < 3; k++)
    for (int q = 0; q < 3; q++) Q[k][q] = P[k][q] + 0.8 * (c[q] - P[k][q]);
  ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, &j), 0);
  ck_assert_double_eq_tol(v, quad_volume((const double(*)[3])P, (const double(*)[3])Q), 1e-12 * v);

  /* degenerate, NaN, NULL */
  memcpy(Q, P, sizeof Q);
  ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, NULL), TS_EMESH);
  for (int k = 0; k < 3; k++) Q[k][1] -= t;
  double P2[3][3];
  memcpy(P2, P, sizeof P2);
  P2[2][2] = 0; /* collinear outer face */
  ck_assert_int_eq(ts_prism_check((const double(*)[3])P2, (const double(*)[3])Q, NULL, NULL), TS_EMESH);
  Q[1][0] = NAN;
  ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, &j), TS_EMESH);
  ck_assert_int_eq(ts_prism_check(NULL, (const double(*)[3])Q, &v, &j), TS_EINVAL);
}
END_TEST

/* What the extrusion accepts, the builder accepts, and only that: a flat
 * 5 x 5 patch extruded by 1 mm, then its inner sheet jittered at random
 * (fixed seed) by up to 1.5 mm sideways and +-1.2 mm in depth, 200 times.
 * Each time the extrusion's test (ts_prism_check over the prisms, what
 * ts_extrude counts in n_inverted) and the builder's verdict agree:
 * TS_EMESH exactly when a prism is refused, and a built tissue has mass on
 * every node. Both outcomes occur. */
START_TEST(test_builder_agrees_with_extrusion) {
  ts_mesh *m = fx_grid(5, 0.01, 0, 0);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 1;
  d.thickness[0] = 1e-3;
  d.mode = TS_EXTRUDE_DIRECTION;
  d.direction[1] = -1;
  ts_extrusion *e = NULL;
  char err[256];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  ts_layer layers[TS_MAX_LAYERS];
  ts_material_default_layers(layers);
  double (*rest)[3] = malloc(sizeof *rest * 2 * e->nv);
  ck_assert_ptr_nonnull(rest);
  memcpy(rest, e->x, sizeof *rest * 2 * e->nv);
  uint32_t seed = 7, n_ok = 0, n_bad = 0;
  for (int trial = 0; trial < 200; trial++) {
    memcpy(e->x, rest, sizeof *rest * 2 * e->nv);
    double amp = (trial % 4 + 1) / 4.0;
    for (uint32_t j = 0; j < e->nv; j++)
      for (int k = 0; k < 3; k++) {
        seed = seed * 1103515245u + 12345u;
        double r = ((seed >> 8) & 0xffff) / 65535.0 * 2 - 1;
        e->x[e->nv + j][k] += amp * r * (k == 1 ? 1.2e-3 : 1.5e-3);
      }
    uint32_t refused = 0;
    for (uint32_t f = 0; f < e->n_surface_tris; f++) {
      double P[3][3], Q[3][3];
      prism_of(e, 0, f, P, Q);
      refused += ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, NULL, NULL) != 0;
    }
    e->n_inverted = 0; /* the builder must find them itself */
    ts_tissue *t = NULL;
    int rc = ts_tissue_build(e, layers, NULL, NULL, &t);
    ck_assert_msg(rc == (refused ? TS_EMESH : 0), "trial %d: %u refused, builder %s", trial, refused,
                  ts_err_name(rc));
    if (rc == 0) {
      n_ok++;
      for (uint32_t i = 0; i < t->n_nodes; i++) ck_assert(t->inv_mass[i] > 0);
    } else {
      n_bad++;
    }
    ts_tissue_destroy(t);
  }
  printf("jittered prisms: %u built, %u refused by both\n", n_ok, n_bad);
  ck_assert_uint_gt(n_ok, 10);
  ck_assert_uint_gt(n_bad, 10);
  free(rest);
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

/* One shared mesh through to a tissue: extrudes with rc 0, the render
 * surface is a consistently wound manifold without degenerate triangles
 * and of the expected Euler characteristic, every prism passes the
 * independent checks (sampled Jacobian > 0, quadrature volume > 0 and equal
 * to ts_prism_check's), the prisms fill the shell between the outer and
 * innermost sheets exactly (closed surfaces: their volumes sum to the
 * difference of the sheets' enclosed volumes), every vertex keeps between
 * the floor and all of the depth, and the builder makes a tissue whose
 * masses add up to density x volume layer by layer. */
typedef struct mesh_case {
  const char *name;
  double scale;      /* file units to metres */
  double layer_scale; /* times the default stomach wall (1 + 1.5 + 2 mm) */
  int closed;
  int euler_render;  /* of the render surface */
  uint32_t crossings_full; /* triangle pairs crossing before the thinning took them out */
} mesh_case;

static void check_real_mesh(const mesh_case *mc) {
  ts_mesh *m = fx_load(mc->name, mc->scale);
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t nl = ts_material_default_layers(layers);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = nl;
  d.mode = TS_EXTRUDE_NORMAL;
  double D = 0;
  for (uint32_t l = 0; l < nl; l++) D += d.thickness[l] = layers[l].thickness * mc->layer_scale;
  d.max_relax = 1e-3;
  d.min_depth_fraction = 0.1;
  ts_extrusion *e = NULL;
  char err[512] = "";
  int rc = ts_extrude(m, &d, &e, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", mc->name, err);
  printf("%s: %u vertices, %u triangles, depth %.3g mm: %u tilted, %u relaxed (%.3g mm), %u "
         "thinned (least %.3g); %s\n",
         mc->name, m->n_verts, m->n_tris, D * 1e3, e->n_tilted, e->n_relaxed, e->max_relaxed * 1e3,
         e->n_thinned, e->min_depth_kept, err);
  ck_assert_uint_eq(e->n_inverted, 0);
  ck_assert(e->n_thinned == 0 || strstr(err, "warning") != NULL);
  ck_assert_double_le(e->max_relaxed, 1e-3);

  ts_meshtopo_report r = fx_check_hull(e, mc->name);
  ck_assert_int_eq(r.euler, mc->euler_render);
  ck_assert_uint_eq(r.n_boundary_edges, 0);
  /* every layer's top sheet faces outwards: against its columns, at a
   * cosine below -0.05 (the "most normal" directions at creases lean up to
   * about 85 degrees from a face: ts_extrude_dir.c) */
  double top_vol[TS_MAX_LAYERS];
  fx_check_layer_tops(e, 0.05, top_vol);
  if (mc->closed) /* each encloses a positive volume, shrinking layer by layer */
    for (uint32_t l = 0; l < nl; l++) {
      ck_assert_double_gt(top_vol[l], 0);
      if (l) ck_assert_double_lt(top_vol[l], top_vol[l - 1]);
    }
  /* no sheets cross, by the extrusion's check and by an independent count;
   * at full depth (the closed ones) they did, and the thinning took them
   * out (n_crossings_thinned: the pairs it found) */
  uint32_t brute = fx_count_crossings(e);
  printf("%s: %u crossing triangle pairs (independent count %u), %u thinned away\n", mc->name, e->n_crossings,
         brute, e->n_crossings_thinned);
  ck_assert_uint_eq(e->n_crossings, 0);
  ck_assert_uint_eq(brute, 0);
  ck_assert_uint_eq(e->n_crossings_thinned, mc->crossings_full);

  /* depth kept per vertex: full, or thinned to no less than the floor; the
   * count of thinned vertices as reported */
  uint32_t thinned = 0;
  for (uint32_t j = 0; j < e->nv; j++) {
    double dep = fx_dist(e->x[j], e->x[(size_t)nl * e->nv + j]);
    ck_assert_double_le(dep, D * (1 + 1e-12));
    ck_assert_double_ge(dep, 0.1 * D * (1 - 1e-12));
    thinned += dep < D * (1 - 1e-9);
  }
  ck_assert_uint_eq(thinned, e->n_thinned);

  /* every prism, independently */
  double layer_vol[TS_MAX_LAYERS] = {0};
  for (uint32_t l = 0; l < nl; l++)
    for (uint32_t f = 0; f < e->n_surface_tris; f++) {
      double P[3][3], Q[3][3], v;
      prism_of(e, l, f, P, Q);
      ck_assert_int_eq(ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &v, NULL), 0);
      double vq = quad_volume((const double(*)[3])P, (const double(*)[3])Q);
      ck_assert_msg(vq > 0, "%s: layer %u prism %u volume %g", mc->name, l, f, vq);
      ck_assert_double_eq_tol(v, vq, 1e-9 * vq);
      ck_assert_msg(sampled_min_det((const double(*)[3])P, (const double(*)[3])Q) > 0,
                    "%s: layer %u prism %u folds", mc->name, l, f);
      layer_vol[l] += vq;
    }
  if (mc->closed) /* the prisms fill each shell exactly (rounding: 1e-9) */
    for (uint32_t l = 0; l < nl; l++) {
      double vo = fx_volume_pts((const double(*)[3])e->x + (size_t)l * e->nv,
                                (const uint32_t(*)[3])e->surface_tris, e->n_surface_tris);
      double vi = fx_volume_pts((const double(*)[3])e->x + (size_t)(l + 1) * e->nv,
                                (const uint32_t(*)[3])e->surface_tris, e->n_surface_tris);
      ck_assert_double_eq_tol(layer_vol[l], vo - vi, 1e-9 * vo);
    }

  ts_tissue *t = NULL;
  rc = ts_tissue_build(e, layers, NULL, NULL, &t);
  ck_assert_msg(rc == 0, "%s: ts_tissue_build: %s", mc->name, ts_err_name(rc));
  ck_assert_uint_eq(t->n_nodes, (nl + 1) * m->n_verts);
  double mass = 0, want = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    ck_assert(t->inv_mass[i] > 0);
    mass += 1 / t->inv_mass[i];
  }
  for (uint32_t l = 0; l < nl; l++) want += layers[l].density * layer_vol[l];
  ck_assert_double_eq_tol(mass, want, 1e-9 * want);
  ts_tissue_destroy(t);
  ts_extrusion_free(e);
  ts_mesh_free(m);
}

/* SOURCES.md: liver and liver-smooth in centimetres (the benchmark's liver
 * scenario: the default stomach wall, 4.5 mm), spot at 0.1 m per unit (as
 * the integration test uploads it), all three closed (render surface: outer
 * and inner sphere-like sheets, chi = 4). The dental instrument (cm) is an
 * open surface 0.4 mm thick, so only a thin coat fits inside it: the
 * stomach wall scaled by 1/200 (22.5 um); its render surface is one closed
 * shell (chi = 2). */
START_TEST(test_shared_meshes) {
  const mesh_case cases[] = {
      {"liver.obj", 0.01, 1, 1, 4, 6},
      {"liver-smooth.obj", 0.01, 1, 1, 4, 282},
      {"spot.obj", 0.1, 1, 1, 4, 52},
      {"dental_instrument_light.obj", 0.01, 0.005, 0, 2, 0},
  };
  check_real_mesh(&cases[_i]);
}
END_TEST

/* Thinning is bounded: with the floor at 0.9 of the depth the livers cannot
 * be unfolded, and the call refuses naming a triangle and saying how far it
 * thinned; min_depth_fraction outside [0, 1) and max_relax outside [0, 1 m]
 * are TS_EINVAL. A pleat-free surface is not moved by max_relax, and a
 * surface without folds is not thinned. */
START_TEST(test_thinning_bounds) {
  ts_mesh *m = fx_load("liver.obj", 0.01);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 3;
  d.thickness[0] = 1e-3;
  d.thickness[1] = 1.5e-3;
  d.thickness[2] = 2e-3;
  d.mode = TS_EXTRUDE_NORMAL;
  d.min_depth_fraction = 0.9;
  ts_extrusion *e = NULL;
  char err[512];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_ptr_nonnull(e);
  ck_assert_uint_gt(e->n_inverted, 0);
  ck_assert_double_ge(e->min_depth_kept, 0.9);
  ck_assert_msg(strstr(err, "triangle") && strstr(err, "thinned"), "%s", err);
  ts_extrusion_free(e);

  d.min_depth_fraction = 1;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d.min_depth_fraction = -0.1;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d.min_depth_fraction = NAN;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d.min_depth_fraction = 0;
  d.max_relax = -1e-3;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d.max_relax = 2;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  ck_assert_ptr_null(e);

  /* a thin layer on liver.obj needs neither: sheet 0 is the input exactly */
  memset(&d, 0, sizeof d);
  d.n_layers = 1;
  d.thickness[0] = 0.2e-3;
  d.max_relax = 1e-3;
  d.min_depth_fraction = 0.1;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  ck_assert_uint_eq(e->n_relaxed, 0);
  ck_assert_uint_eq(e->n_thinned, 0);
  ck_assert_double_eq(e->min_depth_kept, 1);
  ck_assert_str_eq(err, "");
  ck_assert_int_eq(memcmp(e->x, m->v, sizeof *m->v * m->n_verts), 0);
  ck_assert_uint_eq(e->n_tilted, 2); /* its two creases sharper than 90 degrees... */
  /* ...whose directions now see all their triangles */
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

static Suite *extrude_real_suite(void) {
  Suite *s = suite_create("extrude_real");
  TCase *tc = tcase_create("extrude_real");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_prism_check_cases);
  tcase_add_test(tc, test_builder_agrees_with_extrusion);
  tcase_add_loop_test(tc, test_shared_meshes, 0, 4);
  tcase_add_test(tc, test_thinning_bounds);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(extrude_real_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
