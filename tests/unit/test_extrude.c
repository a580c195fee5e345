/*
 * test_extrude.c: Check suite for multi-layer extrusion (server/core/
 * ts_extrude.c). Shapes whose offsets are known in closed form: a flat patch
 * translated along a direction (exact positions, a closed render surface
 * whose enclosed volume is area x thickness), a cube (angle-weighted corner
 * normals are (1,1,1)/sqrt(3) whatever the diagonals), a regular icosahedron
 * (radial normals: sheets at radius R - depth; offset past the centre
 * inverts exactly the 20 prisms of the layer that crosses it), a dome offset
 * past its radius of curvature, the stomach-like curved patch and the shared
 * liver meshes (tests/unit/test_extrude_real.c has every shared mesh through
 * to a built tissue). After every extrusion the render surface must be a closed,
 * consistently wound manifold without degenerate triangles and with the
 * Euler characteristic of the solid's boundary (2 for a disc-like patch, 4
 * for a closed surface's outer and inner sheets). Bad input gets the intended
 * error code and a message.
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
#include "ts_mesh.h"
#include "ts_meshtopo.h"

static ts_extrude_def layers3(double t0, double t1, double t2) {
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 3;
  d.thickness[0] = t0;
  d.thickness[1] = t1;
  d.thickness[2] = t2;
  d.mode = TS_EXTRUDE_NORMAL;
  return d;
}

static uint32_t count_boundary_edges(const ts_mesh *m) {
  ts_meshtopo *t = NULL;
  ck_assert_int_eq(ts_meshtopo_build(m, &t), 0);
  uint32_t n = 0;
  for (uint32_t e = 0; e < t->n_edges; e++) n += ts_meshtopo_edge_valence(t, e) == 1;
  ts_meshtopo_free(t);
  return n;
}

/* A flat 40 mm patch translated down by 1 + 1.5 + 2 mm: positions exact,
 * render groups as documented, a closed surface enclosing area x 4.5 mm. */
START_TEST(test_flat_patch_direction) {
  const uint32_t res = 9;
  const double size = 0.04;
  ts_mesh *m = fx_grid(res, size, 0, 1);
  ts_extrude_def d = layers3(1e-3, 1.5e-3, 2e-3);
  d.mode = TS_EXTRUDE_DIRECTION;
  d.direction[1] = -2.0; /* not unit: normalised */
  ts_extrusion *e = NULL;
  char err[256];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  ck_assert_uint_eq(e->n_layers, 3);
  ck_assert_uint_eq(e->n_sheets, 4);
  ck_assert_uint_eq(e->nv, res * res);
  ck_assert_uint_eq(e->n_inverted, 0);
  double depth = 0;
  for (uint32_t s = 0; s < 4; s++) {
    if (s) depth += d.thickness[s - 1];
    for (uint32_t j = 0; j < e->nv; j++) {
      const double *p = e->x[s * e->nv + j];
      ck_assert_double_eq_tol(p[0], m->v[j][0], 1e-15);
      ck_assert_double_eq_tol(p[1], -depth, 1e-15);
      ck_assert_double_eq_tol(p[2], m->v[j][2], 1e-15);
    }
  }
  uint32_t T = m->n_tris, B = 4 * (res - 1);
  ck_assert_uint_eq(count_boundary_edges(m), B);
  ck_assert_uint_eq(e->n_surface_tris, T);
  ck_assert_uint_eq(e->n_tris, 4 * T + 2 * B * 3);
  ck_assert_uint_eq(e->n_groups, 3);
  ck_assert_uint_eq(e->group_tri_count[0], T + 2 * B);
  ck_assert_uint_eq(e->group_tri_count[1], T + 2 * B);
  ck_assert_uint_eq(e->group_tri_count[2], T + 2 * B + T);
  fx_check_layer_tops(e, 0.999, NULL); /* flat: every top faces +y exactly */
  ck_assert_uint_eq(e->n_crossings, 0);
  uint32_t nb = 0;
  for (uint32_t j = 0; j < e->nv; j++) nb += e->boundary[j];
  ck_assert_uint_eq(nb, B);

  ts_meshtopo_report r = fx_check_hull(e, "flat patch render surface");
  ck_assert_uint_eq(r.n_boundary_edges, 0);
  ck_assert_int_eq(r.euler, 2);
  ck_assert_int_eq(r.genus, 0);
  ck_assert_uint_eq(r.n_components, 1);
  /* outward winding everywhere: the divergence-theorem volume is the slab's
   * (rounding of ~1e3 terms of size 1e-11 m^3: relative 1e-9 is ample) */
  ck_assert_double_eq_tol(fx_hull_volume(e), size * size * 4.5e-3, 1e-9 * size * size * 4.5e-3);

  /* each group renders from the correct side: its layer's top faces +y,
   * the bottom -y, walls away from the patch's vertical axis */
  uint32_t k = 0;
  for (uint32_t g = 0; g < 3; g++)
    for (uint32_t i = 0; i < e->group_tri_count[g]; i++, k++) {
      const double *a = e->x[e->tris[k][0]], *b = e->x[e->tris[k][1]], *c = e->x[e->tris[k][2]];
      double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, w[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
      double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
      double cen[3] = {(a[0] + b[0] + c[0]) / 3, (a[1] + b[1] + c[1]) / 3, (a[2] + b[2] + c[2]) / 3};
      int top = i < T, bottom = g == 2 && i >= T + 2 * B;
      if (top) {
        ck_assert(n[1] > 0 && fabs(n[0]) < 1e-18 && fabs(n[2]) < 1e-18);
        ck_assert_double_eq_tol(cen[1], -(g > 0 ? 1e-3 : 0) - (g > 1 ? 1.5e-3 : 0), 1e-15);
      } else if (bottom)
        ck_assert(n[1] < 0 && fabs(n[0]) < 1e-18 && fabs(n[2]) < 1e-18);
      else {
        ck_assert(fabs(n[1]) < 1e-18);
        ck_assert(n[0] * cen[0] + n[2] * cen[2] > 0);
        /* the wall of layer g lies between sheets g and g+1 */
        ck_assert(cen[1] < 0);
      }
    }
  ck_assert_uint_eq(k, e->n_tris);
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

/* Angle-weighted normals do not depend on the triangulation: every corner
 * of a cube moves along -(1,1,1)/sqrt(3) (signs by octant), however its
 * three faces are cut; the inner sheet is a cube of side s - 2t/sqrt(3). */
START_TEST(test_cube_angle_weighted) {
  const double s = 0.01, t = 1e-3;
  ts_mesh *m = fx_cube(s);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 1;
  d.thickness[0] = t;
  ts_extrusion *e = NULL;
  char err[256];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  for (uint32_t j = 0; j < 8; j++)
    for (int k = 0; k < 3; k++) {
      double sign = m->v[j][k] > 0 ? 1 : -1;
      ck_assert_double_eq_tol(e->x[8 + j][k], m->v[j][k] - sign * t / sqrt(3.0), 1e-16);
    }
  ts_meshtopo_report r = fx_check_hull(e, "cube render surface");
  ck_assert_uint_eq(r.n_boundary_edges, 0);
  ck_assert_uint_eq(r.n_components, 2);
  ck_assert_int_eq(r.euler, 4);
  double si = s - 2 * t / sqrt(3.0);
  ck_assert_double_eq_tol(fx_hull_volume(e), s * s * s - si * si * si, 1e-12 * s * s * s);
  ck_assert_uint_eq(e->n_groups, 1);
  ck_assert_uint_eq(e->group_tri_count[0], 24);
  fx_check_layer_tops(e, 0.577, NULL); /* the corners' directions: cosine 1/sqrt(3) = 0.5774 to a face */
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

static double ico_volume(double r) {
  double a = 4 * r / sqrt(10 + 2 * sqrt(5.0)); /* edge from circumradius */
  return 5 * (3 + sqrt(5.0)) / 12 * a * a * a;
}

/* A regular icosahedron of radius 5 mm: vertex normals are radial, so sheet
 * s lies at radius 5 mm - depth_s and the render surface encloses the shell
 * between two icosahedra. */
START_TEST(test_icosahedron_sheets) {
  const double R = 5e-3;
  ts_mesh *m = fx_icosahedron(R);
  ck_assert_double_eq_tol(fx_volume_pts((const double(*)[3])m->v, (const uint32_t(*)[3])m->t, 20),
                          ico_volume(R), 1e-12 * ico_volume(R));
  ts_extrude_def d = layers3(1e-3, 1.5e-3, 2e-3);
  ts_extrusion *e = NULL;
  char err[256];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  double depth = 0;
  for (uint32_t s = 0; s < 4; s++) {
    if (s) depth += d.thickness[s - 1];
    for (uint32_t j = 0; j < 12; j++) {
      const double *p = e->x[s * 12 + j];
      ck_assert_double_eq_tol(sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]), R - depth, 1e-15);
      /* along the original vertex's ray */
      double cosang = (p[0] * m->v[j][0] + p[1] * m->v[j][1] + p[2] * m->v[j][2]) / ((R - depth) * R);
      ck_assert_double_eq_tol(cosang, 1.0, 1e-12);
    }
  }
  ts_meshtopo_report r = fx_check_hull(e, "icosahedron render surface");
  ck_assert_uint_eq(r.n_components, 2);
  ck_assert_int_eq(r.euler, 4);
  ck_assert_uint_eq(e->n_tris, 80);
  ck_assert_uint_eq(e->group_tri_count[0], 20);
  ck_assert_uint_eq(e->group_tri_count[1], 20);
  ck_assert_uint_eq(e->group_tri_count[2], 40);
  double want = ico_volume(R) - ico_volume(R - 4.5e-3);
  ck_assert_double_eq_tol(fx_hull_volume(e), want, 1e-10 * want);
  /* each layer's top sheet is the icosahedron at its depth, wound outwards:
   * it encloses that icosahedron's volume, positive (the radial offsets
   * meet the faces at cos 0.795, the inradius over the circumradius) */
  double vol[3];
  fx_check_layer_tops(e, 0.79, vol);
  const double top_depth[3] = {0, 1e-3, 2.5e-3};
  for (int g = 0; g < 3; g++) {
    double v = ico_volume(R - top_depth[g]);
    ck_assert_double_eq_tol(vol[g], v, 1e-10 * v);
  }
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

/* Offsetting a convex bulge inwards past its centre of curvature inverts
 * the prisms of the layer that crosses the centre, and only those: layers of
 * 2 mm on a 5 mm icosahedron put sheet 3 at 6 mm depth, so all 20 prisms of
 * layer 2 (4 -> 6 mm) pass through the centre. At 4.9 mm nothing inverts. */
START_TEST(test_inverted_prisms_reported) {
  ts_mesh *m = fx_icosahedron(5e-3);
  ts_extrude_def d = layers3(2e-3, 2e-3, 2e-3);
  ts_extrusion *e = NULL;
  char err[512];
  int rc = ts_extrude(m, &d, &e, err, sizeof err);
  ck_assert_int_eq(rc, TS_EMESH);
  ck_assert_ptr_nonnull(e); /* still returned so a tool can show it */
  ck_assert_uint_eq(e->n_inverted, 20);
  ck_assert_msg(strstr(err, "layer 2") && strstr(err, "inverted") && strstr(err, "20 inverted"), "%s", err);
  ts_extrusion_free(e);

  d = layers3(2e-3, 2e-3, 0.9e-3);
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  ck_assert_uint_eq(e->n_inverted, 0);
  ts_extrusion_free(e);
  ts_mesh_free(m);

  /* a dome of apex curvature radius 10 mm, 12 mm across: 3 x 4 mm layers go
   * past the centre of curvature below the apex; 3 x 2 mm do not */
  ts_mesh *dome = fx_grid(13, 0.012, 0.010, 1);
  d = layers3(4e-3, 4e-3, 4e-3);
  rc = ts_extrude(dome, &d, &e, err, sizeof err);
  ck_assert_int_eq(rc, TS_EMESH);
  ck_assert_uint_gt(e->n_inverted, 0);
  ck_assert_msg(strstr(err, "inverted") != NULL, "%s", err);
  /* the first two layers (0..8 mm) stay valid: every inverted prism is in layer 2 */
  ck_assert_msg(strstr(err, "layer 2") != NULL, "%s", err);
  ts_extrusion_free(e);
  d = layers3(2e-3, 2e-3, 2e-3);
  ck_assert_int_eq(ts_extrude(dome, &d, &e, err, sizeof err), 0);
  ck_assert_uint_eq(e->n_inverted, 0);
  fx_check_hull(e, "dome render surface");
  ts_extrusion_free(e);

  /* a direction pointing out of the surface grows the layers outwards:
   * every prism is inside out */
  d.mode = TS_EXTRUDE_DIRECTION;
  d.direction[1] = 1;
  ck_assert_int_eq(ts_extrude(dome, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_uint_eq(e->n_inverted, 3 * dome->n_tris);
  ts_extrusion_free(e);
  ts_mesh_free(dome);
}
END_TEST

/* The stomach-like patch (80 mm, dome radius 150 mm) along its normals:
 * every node of sheet s is exactly depth_s from its surface vertex, the
 * offsets point down, and the shell's volume lies between A d (1 - d/R) and
 * A d (the inward offset of a surface curved with radius >= R shrinks by at
 * most that factor). */
START_TEST(test_curved_patch_normals) {
  const double R = 0.15, d_all = 4.5e-3;
  ts_mesh *m = fx_grid(25, 0.08, R, 1);
  ts_extrude_def d = layers3(1e-3, 1.5e-3, 2e-3);
  ts_extrusion *e = NULL;
  char err[256];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  double depth = 0;
  for (uint32_t s = 1; s < 4; s++) {
    depth += d.thickness[s - 1];
    for (uint32_t j = 0; j < e->nv; j++) {
      const double *p = e->x[s * e->nv + j], *q = m->v[j];
      ck_assert_double_eq_tol(fx_dist(p, q), depth, 1e-15);
      ck_assert((q[1] - p[1]) / depth > 0.9); /* the corners' slope: cos = 0.936 */
    }
  }
  ts_meshtopo_report r = fx_check_hull(e, "curved patch render surface");
  ck_assert_int_eq(r.euler, 2);
  ck_assert_uint_eq(r.n_boundary_edges, 0);
  double A = fx_area(m), V = fx_hull_volume(e);
  ck_assert(V < A * d_all);
  ck_assert(V > A * d_all * (1 - d_all / R));
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

/* Independent count of folded prisms (the criterion of ts_prism_check, by
 * sampling rather than by its closed form): the wedge's Jacobian at each
 * corner i, J_i(z) = -(u(z) x v(z)) . (Q_i - P_i), over the intermediate
 * triangles T(z) = T + z (T' - T) sampled at z = k/400, relative to
 * |u(0) x v(0)| |Q_i - P_i|. A prism whose sampled value falls to 1e-6 or
 * below is folded for sure (sampling can only miss a dip, never invent
 * one); one whose samples all stay above 1 % is certainly sound. */
static void count_folds(const ts_extrusion *e, uint32_t *sure, uint32_t *possible) {
  *sure = *possible = 0;
  for (uint32_t s = 0; s < e->n_layers; s++)
    for (uint32_t f = 0; f < e->n_surface_tris; f++) {
      const double *p0[3], *p1[3];
      for (int i = 0; i < 3; i++) {
        p0[i] = e->x[s * e->nv + e->surface_tris[f][i]];
        p1[i] = e->x[(s + 1) * e->nv + e->surface_tris[f][i]];
      }
      double lo = INFINITY, a0 = 0;
      for (int k = 0; k <= 400; k++) {
        double t = k / 400.0, q[3][3];
        for (int i = 0; i < 3; i++)
          for (int a = 0; a < 3; a++) q[i][a] = p0[i][a] + t * (p1[i][a] - p0[i][a]);
        double u[3] = {q[1][0] - q[0][0], q[1][1] - q[0][1], q[1][2] - q[0][2]};
        double w[3] = {q[2][0] - q[0][0], q[2][1] - q[0][1], q[2][2] - q[0][2]};
        double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
        if (k == 0) a0 = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        for (int i = 0; i < 3; i++) {
          double d[3] = {p1[i][0] - p0[i][0], p1[i][1] - p0[i][1], p1[i][2] - p0[i][2]};
          double dl = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
          lo = fmin(lo, -(n[0] * d[0] + n[1] * d[1] + n[2] * d[2]) / (a0 * dl));
        }
      }
      *sure += lo <= 1e-6;
      *possible += lo < 0.01;
    }
}

/* Real meshes: the shared livers (centimetres) extruded inwards by 1, 1.5
 * and 2 mm. Their render surfaces are closed two-sheet manifolds (chi = 4)
 * whatever the geometry does. liver-smooth has a pleat of about a
 * millimetre (triangles folded back over their neighbours near vertex 386,
 * where the surface nearly touches itself): no direction points inwards
 * there, refused naming the vertex, unless max_relax lets the extrusion move
 * its two vertices (0.28 mm). Both livers are thinner than 2 x 4.5 mm in
 * places and have creases, so without thinning some prisms do fold: the call
 * must say so (TS_EMESH with the count), and the count must lie between the
 * folds an independent sampling finds for sure and those it cannot rule out. */
START_TEST(test_liver_extrusion) {
  const char *names[2] = {"liver-smooth.obj", "liver.obj"};
  for (int i = 0; i < 2; i++) {
    ts_mesh *m = fx_load(names[i], 0.01);
    ts_meshtopo_report in = fx_check(m, names[i]);
    ck_assert_int_eq(in.euler, 2);
    ts_extrude_def d = layers3(1e-3, 1.5e-3, 2e-3);
    ts_extrusion *e = NULL;
    char err[512];
    int rc = ts_extrude(m, &d, &e, err, sizeof err);
    if (i == 0) {
      ck_assert_int_eq(rc, TS_EMESH);
      ck_assert_ptr_null(e);
      ck_assert_msg(strstr(err, "vertex 386") && strstr(err, "no direction"), "%s", err);
      d.max_relax = 1e-3;
      rc = ts_extrude(m, &d, &e, err, sizeof err);
    }
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->n_relaxed, i == 0 ? 2 : 0);
    ck_assert_double_le(e->max_relaxed, 1e-3);
    ck_assert_int_eq(rc, e->n_inverted || e->n_crossings ? TS_EMESH : 0);
    uint32_t sure, possible;
    count_folds(e, &sure, &possible);
    printf("extrusion of %s by 1 + 1.5 + 2 mm: %u of %u prisms inverted (sampling: %u sure, %u possible)\n",
           names[i], e->n_inverted, 3 * m->n_tris, sure, possible);
    ck_assert_uint_ge(e->n_inverted, sure);
    ck_assert_uint_le(e->n_inverted, possible);
    ck_assert_uint_gt(sure, 0);
    ck_assert_uint_lt(e->n_inverted, 3 * m->n_tris / 10); /* creases and thin parts, not the whole organ */
    ts_meshtopo_report r = fx_check_hull(e, names[i]);
    ck_assert_int_eq(r.euler, 4);
    ck_assert_uint_eq(r.n_components, 2);
    ck_assert_uint_eq(r.n_boundary_edges, 0);
    ck_assert_uint_eq(e->n_tris, 4 * m->n_tris); /* closed: every layer's top sheet and the innermost */
    ts_extrusion_free(e);

    /* a thin layer: 0.2 mm */
    memset(&d, 0, sizeof d);
    d.n_layers = 1;
    d.thickness[0] = 0.2e-3;
    d.max_relax = 1e-3;
    rc = ts_extrude(m, &d, &e, err, sizeof err);
    ck_assert_ptr_nonnull(e);
    count_folds(e, &sure, &possible);
    ck_assert_uint_ge(e->n_inverted, sure);
    ck_assert_uint_le(e->n_inverted, possible);
    ck_assert_int_eq(rc, e->n_inverted || e->n_crossings ? TS_EMESH : 0);
    printf("extrusion of %s by 0.2 mm: %u of %u prisms inverted\n", names[i], e->n_inverted, m->n_tris);
    ts_extrusion_free(e);
    ts_mesh_free(m);
  }
}
END_TEST

/* Sheets that cross away from any inverted prism: the two big faces of a
 * slab 20 x 20 mm as an open surface of two flat components, wound
 * outwards (the bottom at y = -1 mm facing -y, the top facing +y and tilted
 * to y = 1 mm + x / 20, so the gap grows from 1.5 mm at x = -10 mm to 2.5
 * mm at x = 10 mm), no rim to fold. Offset inwards, each face's sheets are
 * planes parallel to it and every prism is a right prism, but a sheet of
 * one face at depth a and one of the other at depth b meet where the gap is
 * about a + b (the top's sheets lean by 1/20):
 *   - 0.5 + 0.7 mm: sheets at 1.2 mm meet where the gap is 2.4 mm (x = 8
 *     mm), a 0.5 mm one the other's 1.2 mm one at 1.7 mm (x = -6 mm):
 *     refused as a crossing (TS_EMESH, no prism inverted), located inside
 *     the slab between a triangle over the top and one over the bottom;
 *   - 0.3 + 0.4 mm: 1.4 mm at most, under the least gap: nothing crosses. */
START_TEST(test_slab_faces_crossing) {
  const double len[3] = {0.02, 0.002, 0.02};
  const uint32_t cells[3] = {20, 2, 20};
  ts_mesh *box = fx_box(len, cells);
  (void)len;
  uint8_t *keep = calloc(box->n_tris, 1);
  for (uint32_t f = 0; f < box->n_tris; f++) {
    const uint32_t *tr = box->t[f];
    keep[f] = fabs(box->v[tr[0]][1] - box->v[tr[1]][1]) < 1e-12 && fabs(box->v[tr[0]][1] - box->v[tr[2]][1]) < 1e-12;
  }
  ts_mesh *m = fx_keep_tris(box, keep);
  free(keep);
  for (uint32_t j = 0; j < m->n_verts; j++)
    if (m->v[j][1] > 0) m->v[j][1] += m->v[j][0] / 20;
  ck_assert_uint_eq(m->n_tris, 2 * 2 * 20 * 20);
  ts_meshtopo_report in = fx_check(m, "slab faces");
  ck_assert_uint_eq(in.n_components, 2);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 2;
  d.thickness[0] = 0.5e-3;
  d.thickness[1] = 0.7e-3;
  ts_extrusion *e = NULL;
  char err[512];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_ptr_nonnull(e);
  printf("slab faces 1.5 to 2.5 mm apart, 1.2 mm deep: %u crossing pairs, first sheets %u/%u over surface "
         "triangles %u/%u at (%.3f, %.3f, %.3f) mm\n",
         e->n_crossings, e->cross_sheet[0], e->cross_sheet[1], e->cross_tri[0], e->cross_tri[1],
         e->cross_point[0] * 1e3, e->cross_point[1] * 1e3, e->cross_point[2] * 1e3);
  ck_assert_msg(e->n_inverted == 0, "%s", err);
  ck_assert_uint_gt(e->n_crossings, 20); /* two lines across the 20 mm faces, 1 mm cells */
  ck_assert_double_le(fabs(e->cross_point[0]), 0.01);
  ck_assert_double_le(fabs(e->cross_point[2]), 0.01);
  ck_assert_double_le(fabs(e->cross_point[1]), 1.5e-3); /* between the faces */
  /* sheets 1 (at 0.5 mm) and 2 (at 1.2 mm) reach the other face's, or a
   * side wall (its layer 0 or 1) does where the gap is least; at least one
   * of the pair is a sheet's triangle, and two sheet triangles lie over
   * opposite faces */
  double yc[2] = {0, 0};
  int n_sheet_tris = 0;
  for (int i = 0; i < 2; i++) {
    if (e->cross_tri[i] == UINT32_MAX) {
      ck_assert_uint_le(e->cross_sheet[i], 1);
      continue;
    }
    n_sheet_tris++;
    ck_assert_uint_ge(e->cross_sheet[i], 1);
    ck_assert_uint_le(e->cross_sheet[i], 2);
    const uint32_t *tr = e->surface_tris[e->cross_tri[i]];
    yc[i] = (m->v[tr[0]][1] + m->v[tr[1]][1] + m->v[tr[2]][1]) / 3;
  }
  ck_assert_int_ge(n_sheet_tris, 1);
  if (n_sheet_tris == 2) ck_assert(yc[0] * yc[1] < 0);
  ck_assert_msg(strstr(err, "sheets cross") && strstr(err, "crossing triangle pairs in all"), "%s", err);
  ck_assert_uint_eq(fx_count_crossings(e), e->n_crossings); /* the AABB x AABB query finds them all */
  fx_check_layer_tops(e, 0.99, NULL);
  ts_extrusion_free(e);

  d.thickness[0] = 0.3e-3;
  d.thickness[1] = 0.4e-3; /* 0.7 mm */
  int rc = ts_extrude(m, &d, &e, err, sizeof err);
  ck_assert_msg(rc == 0, "%s", err);
  ck_assert_uint_eq(e->n_crossings, 0);
  ck_assert_uint_eq(fx_count_crossings(e), 0);
  ck_assert_uint_eq(e->n_inverted, 0);
  ts_extrusion_free(e);
  ts_mesh_free(m);
  ts_mesh_free(box);
}
END_TEST

/* The closed slab 20 x 2 x 20 mm extruded 3 mm deep (1 + 2 mm). Without
 * thinning its rims fold first: inverted prisms, reported as such. With the
 * daemon's thinning (floor 0.1) the folding rims are thinned and then the
 * crossing faces: the crossings found are reported in the warning
 * (n_crossings_thinned, hundreds of pairs), none is left, and the middle
 * of each face keeps less than half the slab's thickness. */
START_TEST(test_thin_slab_thinned) {
  const double len[3] = {0.02, 0.002, 0.02};
  const uint32_t cells[3] = {20, 2, 20};
  ts_mesh *m = fx_box(len, cells);
  ts_meshtopo_report in = fx_check(m, "slab");
  ck_assert_int_eq(in.euler, 2);
  ck_assert_double_eq_tol(fx_volume_pts((const double(*)[3])m->v, (const uint32_t(*)[3])m->t, m->n_tris),
                          0.02 * 0.002 * 0.02, 1e-12);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 2;
  d.thickness[0] = 1e-3;
  d.thickness[1] = 2e-3;
  ts_extrusion *e = NULL;
  char err[512];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_uint_gt(e->n_inverted, 0);
  ck_assert_msg(strstr(err, "inverted") != NULL, "%s", err);
  ts_extrusion_free(e);

  d.min_depth_fraction = 0.1;
  int rc = ts_extrude(m, &d, &e, err, sizeof err);
  ck_assert_msg(rc == 0, "%s", err);
  ck_assert_uint_eq(e->n_crossings, 0);
  ck_assert_uint_eq(e->n_inverted, 0);
  ck_assert_uint_gt(e->n_crossings_thinned, 100);
  ck_assert_uint_eq(fx_count_crossings(e), 0);
  ck_assert_msg(strstr(err, "warning") && strstr(err, "crossed at up to"), "%s", err);
  double centre_depth = 0;
  for (uint32_t j = 0; j < e->nv; j++)
    if (fabs(m->v[j][0]) < 1e-9 && fabs(m->v[j][2]) < 1e-9)
      centre_depth = fmax(centre_depth, fx_dist(e->x[j], e->x[2 * (size_t)e->nv + j]));
  printf("slab 3 mm deep, thinned: %u crossing pairs thinned away, %u vertices thinned, least %.3f; depth at "
         "the faces' centres %.3f mm\n",
         e->n_crossings_thinned, e->n_thinned, e->min_depth_kept, centre_depth * 1e3);
  ck_assert_double_ge(centre_depth, 0.1 * 3e-3 - 1e-12);
  ck_assert_double_lt(centre_depth, 1e-3);
  fx_check_layer_tops(e, 0.0, NULL);
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

START_TEST(test_bad_input) {
  ts_mesh *m = fx_grid(4, 0.01, 0, 0);
  ts_extrusion *e = NULL;
  char err[256];
  ts_extrude_def d = layers3(1e-3, 1e-3, 1e-3);

  ck_assert_int_eq(ts_extrude(NULL, &d, &e, err, sizeof err), TS_EINVAL);
  ck_assert_int_eq(ts_extrude(m, NULL, &e, err, sizeof err), TS_EINVAL);
  ck_assert_int_eq(ts_extrude(m, &d, NULL, err, sizeof err), TS_EINVAL);
  d.n_layers = 0;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  ck_assert_ptr_null(e);
  d.n_layers = TS_MAX_LAYERS + 1;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d = layers3(1e-3, -1e-3, 1e-3);
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  ck_assert_msg(strstr(err, "layer 1") != NULL, "%s", err);
  d = layers3(1e-3, NAN, 1e-3);
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d = layers3(1e-3, 1e-3, 1e-3);
  d.mode = TS_EXTRUDE_DIRECTION; /* zero direction */
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d.mode = 7;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EINVAL);
  d.mode = TS_EXTRUDE_NORMAL;

  m->v[5][1] = NAN;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "vertex 5") != NULL, "%s", err);
  m->v[5][1] = 0;
  m->t[3][2] = 99;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "out of range") != NULL, "%s", err);
  ts_mesh_free(m);

  /* inconsistent winding: one triangle flipped */
  m = fx_grid(4, 0.01, 0, 0);
  uint32_t s = m->t[4][1];
  m->t[4][1] = m->t[4][2];
  m->t[4][2] = s;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "orientation") != NULL, "%s", err);
  ts_mesh_free(m);

  /* a vertex no triangle uses has no normal */
  m = fx_grid(4, 0.01, 0, 0);
  ts_mesh *m2 = fx_mesh(m->n_verts + 1, m->n_tris);
  memcpy(m2->v, m->v, sizeof *m->v * m->n_verts);
  memcpy(m2->t, m->t, sizeof *m->t * m->n_tris);
  ck_assert_int_eq(ts_extrude(m2, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "vertex 16") != NULL, "%s", err);
  ts_mesh_free(m2);

  /* non-manifold: a third triangle on an interior edge */
  m2 = fx_mesh(m->n_verts + 1, m->n_tris + 1);
  memcpy(m2->v, m->v, sizeof *m->v * m->n_verts);
  memcpy(m2->t, m->t, sizeof *m->t * m->n_tris);
  m2->v[16][1] = 0.005;
  m2->t[m->n_tris][0] = m->t[1][0];
  m2->t[m->n_tris][1] = m->t[1][1];
  m2->t[m->n_tris][2] = 16;
  ck_assert_int_eq(ts_extrude(m2, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "shared by 3") != NULL, "%s", err);
  ck_assert_ptr_null(e);
  ts_mesh_free(m2);
  ts_mesh_free(m);
}
END_TEST

static Suite *extrude_suite(void) {
  Suite *s = suite_create("extrude");
  TCase *tc = tcase_create("extrude");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_flat_patch_direction);
  tcase_add_test(tc, test_cube_angle_weighted);
  tcase_add_test(tc, test_icosahedron_sheets);
  tcase_add_test(tc, test_inverted_prisms_reported);
  tcase_add_test(tc, test_curved_patch_normals);
  tcase_add_test(tc, test_liver_extrusion);
  tcase_add_test(tc, test_slab_faces_crossing);
  tcase_add_test(tc, test_thin_slab_thinned);
  tcase_add_test(tc, test_bad_input);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(extrude_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
