/*
 * test_collision.c: Check suite for collision detection (issue 5): the
 * separating-axis test, the exact narrow phase, the tools' OBB trees, the
 * tissue's AABB tree with fat-box refits, the tree queries against a
 * brute-force all-pairs reference, and the swept query against tunnelling.
 *
 * Every reference here is independent of the code under test: box overlap by
 * clipping every edge of one box against the other solid box (two convex
 * polytopes meet exactly when an edge of one meets the other); triangle
 * intersection from segment-triangle crossings (Moller-Trumbore); closest
 * points by dense barycentric sampling; contact sets by testing every feature
 * pair; tunnelling by constructing poses whose end points are contact-free.
 * Tolerances are stated where they are used, with the reason.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_material.h"
#include "ts_mesh.h"
#include "ts_mesh_io.h"
#include "ts_obb_tree.h"
#include "ts_sat.h"
#include "ts_tissue.h"
#include "ts_tritri.h"

/* ---- random numbers (xorshift64*, deterministic) ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}
static double urange(double a, double b) { return a + (b - a) * urand(); }

/* uniform random rotation (Shoemake 1992) */
static void rand_quat(double q[4]) {
  double u1 = urand(), u2 = 2 * M_PI * urand(), u3 = 2 * M_PI * urand();
  double a = sqrt(1 - u1), b = sqrt(u1);
  q[0] = a * sin(u2), q[1] = a * cos(u2), q[2] = b * sin(u3), q[3] = b * cos(u3);
}

static void rand_rot(double r[3][3]) {
  double q[4];
  rand_quat(q);
  double R[3][3];
  ts_quat_to_mat(q, R);
  /* rows of the box = columns of R */
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) r[i][k] = R[k][i];
}

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
static void cross3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}
static double dist3(const double a[3], const double b[3]) {
  return sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
              (a[2] - b[2]) * (a[2] - b[2]));
}

/* ---- meshes ---- */

/* A mesh from shared/data/meshes, scaled to metres by the reader. */
static ts_mesh *load_obj(const char *name, double scale) {
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/%s", TS_SHARED_DIR, name);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = scale;
  ts_mesh *m = NULL;
  int rc = ts_mesh_read_file(path, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", path, err);
  return m;
}

/* A tissue that is just a surface (collision reads only x and tris). */
static ts_tissue *surface_tissue(const ts_mesh *m) {
  ts_tissue *t;
  ck_assert_int_eq(ts_tissue_alloc(m->n_verts, 0, m->n_tris, &t), 0);
  memcpy(t->x, m->v, sizeof *t->x * m->n_verts);
  memcpy(t->rest, m->v, sizeof *t->rest * m->n_verts);
  memcpy(t->tris, m->t, sizeof *t->tris * m->n_tris);
  return t;
}

static ts_tissue *default_patch(void) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

/* The scenarios of DESIGN.md (tests/bench/bench_scenario.c builds them the
 * same way): patch-S, the default patch at resolution 50, and the liver,
 * liver-smooth.obj through the import pipeline extruded inward into the
 * default three layers (pleat relaxation up to 1 mm, layers thinned down to
 * 0.1 of their depth, as ts_bench_liver_create), built into a tissue whose
 * surface (outer and inner sheets) is what the tools meet. Collision reads
 * only x and the surface triangles; the count is asserted so that a change
 * of the bench's build shows here. */
static ts_tissue *patch_s(void) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

static ts_tissue *scenario_liver(void) {
  char path[1024], msg[512] = "";
  snprintf(path, sizeof path, "%s/data/meshes/liver-smooth.obj", TS_SHARED_DIR);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 0.01; /* cm */
  ts_mesh *mesh = NULL;
  int rc = ts_mesh_import_file(path, TS_MESH_AUTO, &o, &mesh, NULL, NULL, msg, sizeof msg);
  ck_assert_msg(rc == 0, "%s: %s", path, msg);
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t nl = ts_material_default_layers(layers);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = nl;
  d.mode = TS_EXTRUDE_NORMAL;
  d.max_relax = 1e-3;
  d.min_depth_fraction = 0.1;
  for (uint32_t l = 0; l < nl; l++) d.thickness[l] = layers[l].thickness;
  ts_extrusion *ex = NULL;
  rc = ts_extrude(mesh, &d, &ex, msg, sizeof msg);
  ck_assert_msg(rc == 0, "liver extrusion: %s", msg);
  ts_patch_def pd = ts_default_patch_def();
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_build(ex, layers, NULL, pd.gravity, &t), 0); /* anchors: the surface is the same */
  ck_assert_uint_eq(t->n_tris, 4 * 4384); /* closed: every layer's top sheet and the innermost */
  ts_extrusion_free(ex);
  ts_mesh_free(mesh);
  return t;
}

/* A flat sheet of n x n points over size x size at height y, facing +y. */
static ts_tissue *flat_sheet(uint32_t n, double size, double y) {
  ts_tissue *t;
  ck_assert_int_eq(ts_tissue_alloc(n * n, 0, 2 * (n - 1) * (n - 1), &t), 0);
  for (uint32_t j = 0; j < n; j++)
    for (uint32_t i = 0; i < n; i++) {
      double *p = t->x[j * n + i];
      p[0] = -size / 2 + size * i / (n - 1);
      p[1] = y;
      p[2] = -size / 2 + size * j / (n - 1);
    }
  uint32_t k = 0;
  for (uint32_t j = 0; j + 1 < n; j++)
    for (uint32_t i = 0; i + 1 < n; i++) {
      uint32_t a = j * n + i, b = a + 1, c = a + n, d = c + 1;
      /* counter-clockwise seen from +y: x then -z... (a, c, b) has normal
       * (c-a)x(b-a) = (+z)x(+x) = +y */
      t->tris[k][0] = a, t->tris[k][1] = c, t->tris[k][2] = b, k++;
      t->tris[k][0] = b, t->tris[k][1] = c, t->tris[k][2] = d, k++;
    }
  memcpy(t->rest, t->x, sizeof *t->x * t->n_nodes);
  return t;
}

/* ---- reference: box overlap from edges against solid boxes ---- */

/* Segment p + s (q - p), s in [0, 1], against the closed box b (Liang-Barsky
 * in the box frame). */
static int ref_segment_box(const ts_obb *b, const double p[3], const double q[3]) {
  double lo = 0, hi = 1;
  for (int a = 0; a < 3; a++) {
    double o = 0, d = 0;
    for (int k = 0; k < 3; k++) o += (p[k] - b->c[k]) * b->r[a][k], d += (q[k] - p[k]) * b->r[a][k];
    if (d == 0) {
      if (o < -b->e[a] || o > b->e[a]) return 0;
      continue;
    }
    double s0 = (-b->e[a] - o) / d, s1 = (b->e[a] - o) / d;
    if (s0 > s1) {
      double s = s0;
      s0 = s1, s1 = s;
    }
    if (s0 > lo) lo = s0;
    if (s1 < hi) hi = s1;
    if (lo > hi) return 0;
  }
  return 1;
}

static int ref_edges_hit(const ts_obb *a, const ts_obb *b) {
  double c[8][3];
  ts_obb_corners(a, c);
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 3; k++) {
      int j = i ^ (1 << k);
      if (j > i && ref_segment_box(b, c[i], c[j])) return 1;
    }
  return 0;
}

static int ref_box_overlap(const ts_obb *a, const ts_obb *b, double grow) {
  ts_obb A = *a, B = *b;
  for (int k = 0; k < 3; k++) {
    A.e[k] = fmax(0, A.e[k] + grow);
    B.e[k] = fmax(0, B.e[k] + grow);
  }
  return ref_edges_hit(&A, &B) || ref_edges_hit(&B, &A);
}

static void rand_box(ts_obb *b, double spread) {
  for (int k = 0; k < 3; k++) {
    b->c[k] = urange(-spread, spread);
    b->e[k] = urange(0.02, 1.0);
  }
  rand_rot(b->r);
}

/* Classifies a pair by the reference with boxes grown and shrunk by delta:
 * 1 overlapping by more than delta, 0 apart by more than delta, -1 between. */
static int ref_class(const ts_obb *a, const ts_obb *b, double delta) {
  if (ref_box_overlap(a, b, -delta)) return 1;
  if (!ref_box_overlap(a, b, delta)) return 0;
  return -1;
}

START_TEST(test_sat_random) {
  rng_state = 1;
  /* delta 1e-9 on unit-sized boxes: the SAT's eps (1e-12 of the size) and
   * rounding (1e-15) are far below it, so outside that band both must agree */
  const double delta = 1e-9;
  int n = 20000, over = 0, apart = 0, band = 0;
  for (int i = 0; i < n; i++) {
    ts_obb a, b;
    rand_box(&a, 1.5);
    rand_box(&b, 1.5);
    int cls = ref_class(&a, &b, delta);
    int s = ts_sat_obb_obb(&a, &b, TS_SAT_EPS);
    if (cls < 0) {
      band++;
      continue;
    }
    ck_assert_msg(s == cls, "pair %d: sat %d reference %d", i, s, cls);
    ck_assert_int_eq(ts_sat_obb_obb(&b, &a, TS_SAT_EPS), cls);
    if (cls)
      over++;
    else
      apart++;
    /* depth: positive exactly when overlapping */
    double nrm[3];
    double d = ts_sat_obb_obb_depth(&a, &b, nrm);
    ck_assert_msg((d >= 0) == (cls == 1), "depth %g for class %d", d, cls);
    ck_assert_double_eq_tol(dot3(nrm, nrm), 1.0, 1e-12);
    if (cls == 1) {
      /* moving b by depth (plus delta) along the normal separates them */
      ts_obb m = b;
      for (int k = 0; k < 3; k++) m.c[k] += nrm[k] * (d + 2e-9);
      ck_assert_int_eq(ref_box_overlap(&a, &m, -1e-10), 0);
    }
  }
  /* both outcomes well represented, the borderline band empty in practice */
  ck_assert_int_gt(over, n / 5);
  ck_assert_int_gt(apart, n / 5);
  ck_assert_int_le(band, 2);

  /* against axis-aligned boxes: the AABB form agrees with the OBB form */
  for (int i = 0; i < 20000; i++) {
    ts_obb a, b;
    rand_box(&a, 1.5);
    rand_box(&b, 1.5);
    memset(b.r, 0, sizeof b.r);
    b.r[0][0] = b.r[1][1] = b.r[2][2] = 1;
    double lo[3], hi[3];
    for (int k = 0; k < 3; k++) lo[k] = b.c[k] - b.e[k], hi[k] = b.c[k] + b.e[k];
    int cls = ref_class(&a, &b, delta);
    int s = ts_sat_obb_aabb(&a, lo, hi, TS_SAT_EPS);
    if (cls >= 0) ck_assert_int_eq(s, cls);
    ck_assert_int_eq(s, ts_sat_obb_obb(&a, &b, TS_SAT_EPS));
  }
}
END_TEST

/* Translates a box by d. */
static void shift(ts_obb *b, const double d[3], double s) {
  for (int k = 0; k < 3; k++) b->c[k] += s * d[k];
}

START_TEST(test_sat_touching) {
  rng_state = 2;
  int n = 2000;
  for (int i = 0; i < n; i++) {
    ts_obb a, b;
    rand_box(&a, 0.5);
    /* face to face: b shares a's axes, moved along a's axis i by the sum of
     * the half-extents: touching up to rounding (1e-16), which must count as
     * overlap; moved 1e-9 further it must not */
    b = a;
    for (int k = 0; k < 3; k++) b.e[k] = urange(0.02, 1.0);
    int ax = i % 3;
    double sgn = i & 4 ? -1 : 1;
    b.c[0] = a.c[0], b.c[1] = a.c[1], b.c[2] = a.c[2];
    /* slide sideways inside the face so that the faces overlap */
    int u = (ax + 1) % 3;
    shift(&b, a.r[u], urange(-0.5, 0.5) * fmin(a.e[u], b.e[u]));
    shift(&b, a.r[ax], sgn * (a.e[ax] + b.e[ax]));
    ck_assert_msg(ts_sat_obb_obb(&a, &b, TS_SAT_EPS) == 1, "face touch %d", i);
    ck_assert_int_eq(ref_box_overlap(&a, &b, 1e-12), 1);
    ts_obb g = b;
    shift(&g, a.r[ax], sgn * 1e-9);
    ck_assert_msg(ts_sat_obb_obb(&a, &g, TS_SAT_EPS) == 0, "face gap %d", i);

    /* edge to face: b turned 45 degrees about a's axis w so that its edge
     * along w touches a's face across axis ax */
    int w = (ax + 2) % 3;
    b = a;
    double h = urange(0.05, 0.8);
    for (int k = 0; k < 3; k++) b.e[k] = h;
    double c45 = sqrt(0.5);
    for (int k = 0; k < 3; k++) {
      b.r[ax][k] = c45 * (a.r[ax][k] + a.r[u][k]);
      b.r[u][k] = c45 * (a.r[u][k] - a.r[ax][k]);
      b.r[w][k] = a.r[w][k];
    }
    b.c[0] = a.c[0], b.c[1] = a.c[1], b.c[2] = a.c[2];
    shift(&b, a.r[ax], a.e[ax] + h * sqrt(2.0));
    ck_assert_msg(ts_sat_obb_obb(&a, &b, TS_SAT_EPS) == 1, "edge touch %d", i);
    g = b;
    shift(&g, a.r[ax], 1e-9);
    ck_assert_msg(ts_sat_obb_obb(&a, &g, TS_SAT_EPS) == 0, "edge gap %d", i);
    ck_assert_int_eq(ref_box_overlap(&a, &g, -1e-10), 0);
  }
}
END_TEST

/* Rotation of the rows of r by angle th about unit axis u (Rodrigues). */
static void turn(double r[3][3], const double u[3], double th) {
  double c = cos(th), s = sin(th);
  for (int i = 0; i < 3; i++) {
    double v[3], x[3];
    memcpy(v, r[i], sizeof v);
    cross3(u, v, x);
    double d = dot3(u, v);
    for (int k = 0; k < 3; k++) r[i][k] = v[k] * c + x[k] * s + u[k] * d * (1 - c);
  }
}

START_TEST(test_sat_nearly_parallel) {
  rng_state = 3;
  /* b is a turned by 1e-7 .. 1e-15 rad, so every edge of b is nearly
   * parallel to one of a and the cross-product axes are rounding noise.
   * Overlapping by 1e-6 (far beyond eps and rounding) must be found;
   * apart by 1e-6 must be seen as apart. */
  int n = 5000, plain_wrong = 0;
  for (int i = 0; i < n; i++) {
    ts_obb a, b;
    rand_box(&a, 0.5);
    b = a;
    for (int k = 0; k < 3; k++) b.e[k] = urange(0.02, 1.0);
    double u[3] = {urange(-1, 1), urange(-1, 1), urange(-1, 1)};
    double l = sqrt(dot3(u, u));
    for (int k = 0; k < 3; k++) u[k] /= l;
    turn(b.r, u, pow(10.0, -urange(7, 15)));
    int ax = i % 3, v = (ax + 1) % 3;
    shift(&b, a.r[v], urange(-0.3, 0.3) * fmin(a.e[v], b.e[v]));
    ts_obb in = b, out = b;
    shift(&in, a.r[ax], a.e[ax] + b.e[ax] - 1e-6);
    shift(&out, a.r[ax], a.e[ax] + b.e[ax] + 1e-6);
    ck_assert_int_eq(ref_class(&a, &in, 1e-9), 1);
    ck_assert_int_eq(ref_class(&a, &out, 1e-9), 0);
    ck_assert_msg(ts_sat_obb_obb(&a, &in, TS_SAT_EPS) == 1, "parallel overlap %d", i);
    ck_assert_msg(ts_sat_obb_obb(&a, &out, TS_SAT_EPS) == 0, "parallel gap %d", i);
    plain_wrong += ts_sat_obb_obb(&a, &in, 0) != 1;
  }
  /* for the record: how often the test without eps reports a false gap */
  fprintf(stderr, "sat nearly parallel: %d/%d false separations without eps, 0 with\n", plain_wrong,
          n);
}
END_TEST

/* ---- reference: triangles ---- */

/* Closed segment-triangle crossing point (Moller-Trumbore with closed
 * bounds); 0 when they miss or the segment is parallel to the plane. */
static int ref_seg_tri(const double p[3], const double q[3], const double t[3][3], double x[3]) {
  double d[3], e1[3], e2[3], h[3], s[3], qv[3];
  for (int k = 0; k < 3; k++)
    d[k] = q[k] - p[k], e1[k] = t[1][k] - t[0][k], e2[k] = t[2][k] - t[0][k];
  cross3(d, e2, h);
  double det = dot3(e1, h);
  if (fabs(det) < 1e-300) return 0;
  for (int k = 0; k < 3; k++) s[k] = p[k] - t[0][k];
  double u = dot3(s, h) / det;
  if (u < 0 || u > 1) return 0;
  cross3(s, e1, qv);
  double v = dot3(d, qv) / det;
  if (v < 0 || u + v > 1) return 0;
  double w = dot3(e2, qv) / det;
  if (w < 0 || w > 1) return 0;
  for (int k = 0; k < 3; k++) x[k] = p[k] + w * d[k];
  return 1;
}

static void rand_tri(double t[3][3], double c, double s) {
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) t[i][k] = c + urange(-s, s);
}

START_TEST(test_tritri_random) {
  rng_state = 4;
  int n = 60000, hits = 0;
  for (int i = 0; i < n; i++) {
    double p[3][3], q[3][3], s0[3], s1[3];
    rand_tri(p, 0, 1);
    rand_tri(q, urange(-0.5, 0.5), 1);
    /* reference: crossing points of every edge of one with the other; for
     * non-coplanar triangles in general position the intersection is the
     * segment spanned by them */
    double x[6][3];
    int m = 0;
    for (int e = 0; e < 3; e++) {
      if (ref_seg_tri(p[e], p[(e + 1) % 3], q, x[m])) m++;
      if (ref_seg_tri(q[e], q[(e + 1) % 3], p, x[m])) m++;
    }
    int r = ts_tri_tri_intersect(p, q, s0, s1);
    ck_assert_msg((r != 0) == (m > 0), "pair %d: %d vs %d crossings", i, r, m);
    if (!m) continue;
    ck_assert_int_eq(r, 1);
    hits++;
    /* the two extreme crossing points along the segment's direction */
    double dir[3] = {s1[0] - s0[0], s1[1] - s0[1], s1[2] - s0[2]};
    int lo = 0, hi = 0;
    for (int j = 1; j < m; j++) {
      if (dot3(x[j], dir) < dot3(x[lo], dir)) lo = j;
      if (dot3(x[j], dir) > dot3(x[hi], dir)) hi = j;
    }
    /* 1e-9: endpoints come from different formulas (plane cut here, edge
     * crossing there); random triangles are well conditioned to ~1e-13 */
    ck_assert_msg(dist3(x[lo], s0) < 1e-9 && dist3(x[hi], s1) < 1e-9,
                  "pair %d: segment ends differ by %g and %g", i, dist3(x[lo], s0),
                  dist3(x[hi], s1));
  }
  ck_assert_int_gt(hits, n / 10);
  ck_assert_int_lt(hits, n - n / 10);
}
END_TEST

START_TEST(test_tritri_special) {
  double s0[3], s1[3];
  /* coplanar in z = 0 */
  double p[3][3] = {{0, 0, 0}, {2, 0, 0}, {0, 2, 0}};
  double q_over[3][3] = {{1, 1, 0}, {3, 1, 0}, {1, 3, 0}};          /* overlaps p's corner region */
  double q_apart[3][3] = {{1.5, 1.5, 0}, {3, 1.5, 0}, {1.5, 3, 0}}; /* beyond the hypotenuse */
  double q_touch[3][3] = {{1, 1, 0}, {3, 1, 0}, {3, 3, 0}}; /* vertex (1,1) on the hypotenuse */
  double q_in[3][3] = {{0.2, 0.2, 0}, {0.8, 0.2, 0}, {0.2, 0.8, 0}}; /* inside p */
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_over, s0, s1), 2);
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_apart, s0, s1), 0);
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_touch, s0, s1), 2);
  ck_assert_double_eq_tol(s0[0], 1.0, 1e-15); /* the common part is the point (1, 1) */
  ck_assert_double_eq_tol(s0[1], 1.0, 1e-15);
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_in, s0, s1), 2);
  ck_assert_double_eq_tol(s0[0], 0.4, 1e-15); /* centroid of q_in */
  ck_assert_double_eq_tol(s0[1], 0.4, 1e-15);
  /* a vertex of q exactly on p's interior, q otherwise above: one point */
  double q_vert[3][3] = {{0.5, 0.5, 0}, {1, 0.5, 1}, {0.5, 1, 1}};
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_vert, s0, s1), 1);
  ck_assert(dist3(s0, q_vert[0]) < 1e-15 && dist3(s1, q_vert[0]) < 1e-15);
  /* lifted by 1e-9: apart */
  double q_lift[3][3] = {{0.5, 0.5, 1e-9}, {1, 0.5, 1}, {0.5, 1, 1}};
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_lift, s0, s1), 0);
  /* q pierces p: segment from (0.5,0.5,0) to (1,0.5,0) along x */
  double q_pierce[3][3] = {{0.5, 0.5, -1}, {0.5, 0.5, 1}, {1.5, 0.5, 0}};
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_pierce, s0, s1), 1);
  double e0[3] = {0.5, 0.5, 0}, e1[3] = {1.5, 0.5, 0};
  ck_assert((dist3(s0, e0) < 1e-15 && dist3(s1, e1) < 1e-15) ||
            (dist3(s1, e0) < 1e-15 && dist3(s0, e1) < 1e-15));
  /* degenerate q (a segment) crossing p */
  double q_deg[3][3] = {{0.5, 0.5, -1}, {0.5, 0.5, 1}, {0.5, 0.5, 0}};
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_deg, s0, s1), 1);
  ck_assert(dist3(s0, e0) < 1e-15);
  double q_deg_off[3][3] = {{3, 3, -1}, {3, 3, 1}, {3, 3, 0}};
  ck_assert_int_eq(ts_tri_tri_intersect(p, q_deg_off, s0, s1), 0);
}
END_TEST

/* sampled minimum distance between two triangles on an N x N barycentric grid */
static double sampled_tri_tri(const double p[3][3], const double q[3][3], int N) {
  static double ps[1000][3], qs[1000][3];
  int np = 0;
  for (int i = 0; i <= N; i++)
    for (int j = 0; i + j <= N; j++) {
      double a = (double)i / N, b = (double)j / N, c = 1 - a - b;
      for (int k = 0; k < 3; k++) {
        ps[np][k] = a * p[0][k] + b * p[1][k] + c * p[2][k];
        qs[np][k] = a * q[0][k] + b * q[1][k] + c * q[2][k];
      }
      np++;
    }
  double best = INFINITY;
  for (int i = 0; i < np; i++)
    for (int j = 0; j < np; j++) {
      double d = dist3(ps[i], qs[j]);
      if (d < best) best = d;
    }
  return best;
}

static double tri_max_edge(const double t[3][3]) {
  return fmax(dist3(t[0], t[1]), fmax(dist3(t[1], t[2]), dist3(t[2], t[0])));
}

START_TEST(test_closest_features) {
  rng_state = 5;
  const int N = 24;
  for (int i = 0; i < 300; i++) {
    double p[3][3], q[3][3], cp[3], cq[3], c[3];
    rand_tri(p, 0, 1);
    rand_tri(q, urange(1.0, 2.5), 1);
    double d = ts_closest_triangle_triangle(p, q, cp, cq);
    /* the returned points lie on their triangles and are d apart */
    ck_assert_double_le(ts_closest_point_triangle(cp, p, c), 1e-12);
    ck_assert_double_le(ts_closest_point_triangle(cq, q, c), 1e-12);
    ck_assert_double_eq_tol(dist3(cp, cq), d, 1e-12);
    /* no sampled pair is closer; and the true minimum is within one grid
     * step of each triangle of the sampled one */
    double s = sampled_tri_tri(p, q, N);
    ck_assert_double_le(d, s + 1e-12);
    ck_assert_double_ge(d, s - (tri_max_edge(p) + tri_max_edge(q)) / N);
  }
  /* point-triangle and segment-segment on known values */
  double t[3][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}}, c[3];
  double pt1[3] = {0.25, 0.25, 2};
  ck_assert_double_eq_tol(ts_closest_point_triangle(pt1, t, c), 2.0, 1e-15);
  double pt2[3] = {2, 2, 0}; /* nearest the hypotenuse at (0.5, 0.5) */
  ck_assert_double_eq_tol(ts_closest_point_triangle(pt2, t, c), 1.5 * sqrt(2.0), 1e-15);
  double pt3[3] = {-1, -1, 1}; /* vertex region of (0,0,0) */
  ck_assert_double_eq_tol(ts_closest_point_triangle(pt3, t, c), sqrt(3.0), 1e-15);
  double a0[3] = {0, 0, 0}, a1[3] = {1, 0, 0}, b0[3] = {0.5, 1, -1}, b1[3] = {0.5, 1, 1}, ca[3],
         cb[3];
  ck_assert_double_eq_tol(ts_closest_segment_segment(a0, a1, b0, b1, ca, cb), 1.0, 1e-15);
  ck_assert_double_eq_tol(ca[0], 0.5, 1e-15);
  /* parallel segments, overlapping in projection: distance 1 */
  double c0[3] = {0.2, 1, 0}, c1[3] = {3, 1, 0};
  ck_assert_double_eq_tol(ts_closest_segment_segment(a0, a1, c0, c1, ca, cb), 1.0, 1e-15);
  /* a segment through the triangle: distance 0, the crossing point */
  double s0[3] = {0.2, 0.3, -1}, s1[3] = {0.2, 0.3, 1}, cs[3], ct[3];
  ck_assert_double_eq_tol(ts_closest_segment_triangle(s0, s1, t, cs, ct), 0.0, 1e-15);
  ck_assert_double_eq_tol(ct[2], 0.0, 1e-15);
  ck_assert_double_eq_tol(ct[0], 0.2, 1e-15);
}
END_TEST

START_TEST(test_contact_features) {
  /* a tissue triangle in y = 0 facing +y, 20 mm across */
  double T[3][3] = {{-0.01, 0, 0.01}, {0.01, 0, 0.01}, {0, 0, -0.01}};
  ts_hit h;
  /* sphere r 5 mm with its centre 3 mm above: depth 2 mm, normal -y */
  double c[3] = {0.001, 0.003, 0.0};
  ck_assert_int_eq(ts_contact_sphere_triangle(c, 0.005, T, &h), 1);
  ck_assert_double_eq_tol(h.depth, 0.002, 1e-15);
  ck_assert_double_eq_tol(h.normal[1], -1.0, 1e-15);
  ck_assert_double_eq_tol(h.point[0], 0.001, 1e-15);
  c[1] = 0.0051;
  ck_assert_int_eq(ts_contact_sphere_triangle(c, 0.005, T, &h), 0);
  /* centre on the triangle: inward normal (-y), depth r */
  c[1] = 0;
  ck_assert_int_eq(ts_contact_sphere_triangle(c, 0.005, T, &h), 1);
  ck_assert_double_eq_tol(h.depth, 0.005, 1e-15);
  ck_assert_double_eq_tol(h.normal[1], -1.0, 1e-15);
  /* capsule lying along x 1 mm above, r 2 mm: depth 1 mm */
  double a[3] = {-0.02, 0.001, 0}, b[3] = {0.02, 0.001, 0};
  ck_assert_int_eq(ts_contact_capsule_triangle(a, b, 0.002, T, &h), 1);
  ck_assert_double_eq_tol(h.depth, 0.001, 1e-15);
  ck_assert_double_eq_tol(h.normal[1], -1.0, 1e-15);
  /* capsule standing through the triangle, lower end 3 mm below: 2 + 3 mm */
  double a2[3] = {0, -0.003, 0}, b2[3] = {0, 0.02, 0};
  ck_assert_int_eq(ts_contact_capsule_triangle(a2, b2, 0.002, T, &h), 1);
  ck_assert_double_eq_tol(h.depth, 0.005, 1e-15);
  ck_assert_double_eq_tol(h.normal[1], -1.0, 1e-15);
  /* a tool face parallel to the triangle, 1 mm below it, counter-clockwise
   * seen from -y (outward normal -y): they do not intersect, no contact */
  double F[3][3] = {{-0.002, -0.001, -0.002}, {0.002, -0.001, -0.002}, {0, -0.001, 0.002}};
  ck_assert_int_eq(ts_contact_face_triangle(F, T, &h), 0);
  /* a face tilted to cut the tissue plane: corners at y = -1 mm and +1 mm */
  double G[3][3] = {{-0.002, -0.001, 0.0}, {0.002, -0.001, 0.0}, {0.0, 0.001, 0.002}};
  ck_assert_int_eq(ts_contact_face_triangle(G, T, &h), 1);
  {
    /* outward normal of G */
    double e1[3], e2[3], n[3];
    for (int k = 0; k < 3; k++) e1[k] = G[1][k] - G[0][k], e2[k] = G[2][k] - G[0][k];
    cross3(e1, e2, n);
    double l = sqrt(dot3(n, n));
    for (int k = 0; k < 3; k++) ck_assert_double_eq_tol(h.normal[k], n[k] / l, 1e-15);
    /* the intersection is the line y = 0 in G: z = 1 mm, x in [-1, 1] mm;
     * its midpoint (0, 0, 1 mm) */
    ck_assert_double_eq_tol(h.point[0], 0.0, 1e-15);
    ck_assert_double_eq_tol(h.point[1], 0.0, 1e-15);
    ck_assert_double_eq_tol(h.point[2], 0.001, 1e-15);
    /* outward normal (0, -1, 1)/sqrt 2; G's prism along it meets the plane
     * y = 0 in the triangle (-2, 0, -1), (2, 0, -1), (0, 0, 3) mm, inside T.
     * Its deepest corners behind G's plane are (+-2, 0, -1) mm: distance
     * |z - 1 mm| / sqrt 2 = sqrt 2 mm */
    ck_assert_double_eq_tol(h.depth, sqrt(2.0) * 1e-3, 1e-15);
  }
  /* box 4 x 2 x 4 mm whose bottom face is 0.5 mm below the triangle's plane */
  ts_obb box = {
      .c = {0, 0.0005, 0}, .r = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, .e = {0.002, 0.001, 0.002}};
  ck_assert_int_eq(ts_contact_box_triangle(&box, T, &h), 1);
  ck_assert_double_eq_tol(h.depth, 0.0005, 1e-15);
  ck_assert_double_eq_tol(h.normal[1], -1.0, 1e-15);
  box.c[1] = 0.00101;
  ck_assert_int_eq(ts_contact_box_triangle(&box, T, &h), 0);
}
END_TEST

/* ---- OBB trees ---- */

/* The surface of a box with half-extents e, as 12 triangles. */
static ts_mesh *box_mesh(const double e[3]) {
  ts_mesh *m;
  ck_assert_int_eq(ts_mesh_alloc(8, 12, &m), 0);
  for (int n = 0; n < 8; n++)
    for (int k = 0; k < 3; k++) m->v[n][k] = (n >> k & 1 ? 1 : -1) * e[k];
  static const uint32_t f[12][3] = {{0, 2, 3}, {0, 3, 1}, {4, 5, 7}, {4, 7, 6},
                                    {0, 1, 5}, {0, 5, 4}, {2, 6, 7}, {2, 7, 3},
                                    {0, 4, 6}, {0, 6, 2}, {1, 3, 7}, {1, 7, 5}};
  memcpy(m->t, f, sizeof f);
  return m;
}

START_TEST(test_obb_fit) {
  rng_state = 6;
  for (int it = 0; it < 50; it++) {
    /* a box mesh turned and moved: the root box must be that box (its
     * surface's covariance has the box axes as eigenvectors, by symmetry,
     * with distinct eigenvalues for distinct extents) */
    double e[3] = {0.04, 0.02, 0.01}, R[3][3], q[4], t[3];
    ts_mesh *m = box_mesh(e);
    rand_quat(q);
    ts_quat_to_mat(q, R);
    for (int k = 0; k < 3; k++) t[k] = urange(-1, 1);
    for (uint32_t i = 0; i < m->n_verts; i++) {
      double v[3];
      for (int k = 0; k < 3; k++) v[k] = dot3(R[k], m->v[i]) + t[k];
      memcpy(m->v[i], v, sizeof v);
    }
    ts_tool_shape_def d = ts_default_tool_shape_def();
    d.kind = TS_SHAPE_MESH;
    d.mesh = m;
    ts_obb_tree *tree;
    ck_assert_int_eq(ts_obb_tree_create(&d, &tree), 0);
    char err[256] = "";
    ck_assert_msg(ts_obb_tree_validate(tree, 1e-12, err, sizeof err) == 0, "%s", err);
    const ts_obb *b = &tree->nodes[0].box;
    for (int k = 0; k < 3; k++) ck_assert_double_eq_tol(b->c[k], t[k], 1e-12);
    /* each box axis is one of R's columns; its extent the matching e */
    for (int a = 0; a < 3; a++) {
      int found = 0;
      for (int j = 0; j < 3; j++) {
        double col[3] = {R[0][j], R[1][j], R[2][j]};
        if (fabs(fabs(dot3(b->r[a], col)) - 1) < 1e-12) {
          ck_assert_double_eq_tol(b->e[a], e[j], 1e-12);
          found = 1;
        }
      }
      ck_assert_msg(found, "axis %d is not a box axis", a);
    }
    ts_obb_tree_destroy(tree);
    ts_mesh_free(m);
  }

  /* the dental instrument: a valid tree, every triangle inside its boxes
   * (1e-12 m: rounding of the projections) */
  ts_mesh *m = load_obj("dental_instrument_light.obj", 0.01);
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *tree;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), 0);
  char err[256] = "";
  ck_assert_msg(ts_obb_tree_validate(tree, 1e-12, err, sizeof err) == 0, "%s", err);
  ck_assert_uint_eq(tree->n_nodes, 2 * 784 - 1);
  ck_assert_uint_le(tree->depth, 48);
  /* the instrument is a flat blade 0.41 mm thick overall (y from -0.174 to
   * 0.234 mm); its thinnest part is thinner but not zero */
  ck_assert_double_gt(tree->thickness, 0.02e-3);
  ck_assert_double_le(tree->thickness, 0.41e-3);
  /* the root box is long along z (71.2 mm) */
  const ts_obb *b = &tree->nodes[0].box;
  double emax = fmax(b->e[0], fmax(b->e[1], b->e[2]));
  ck_assert_double_eq_tol(2 * emax, 0.0712, 0.0005);
  ts_obb_tree_destroy(tree);
  ts_mesh_free(m);

  /* primitives */
  d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_JAWS;
  d.length = 0.01;
  d.jaw_thickness = 0.001;
  d.jaw_width = 0.004;
  d.jaw_max_angle = M_PI / 3;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), 0);
  ck_assert_int_eq(ts_obb_tree_validate(tree, 0, err, sizeof err), 0);
  ts_posed_tool pt;
  ck_assert_int_eq(ts_posed_tool_init(&pt, tree), 0);
  ts_pose pose = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}, .jaw = 1};
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &pose), 0);
  /* open by 60 degrees: jaw 0's inner tip edge at (L sin 30, L - L cos 30) */
  ts_obb j0, j1;
  ts_posed_tool_jaw(&pt, 0, &j0);
  ts_posed_tool_jaw(&pt, 1, &j1);
  double tip0[3] = {0.01 * 0.5, 0.01 * (1 - cos(M_PI / 6)), 0};
  double tip1[3] = {-0.01 * 0.5, 0.01 * (1 - cos(M_PI / 6)), 0};
  ck_assert(ts_obb_contains(&j0, tip0, 1e-15));
  ck_assert(ts_obb_contains(&j1, tip1, 1e-15));
  ck_assert(!ts_obb_contains(&j0, tip1, 1e-6));
  /* the root box holds both jaws */
  double cc[8][3];
  ts_obb_corners(&j0, cc);
  for (int i = 0; i < 8; i++) ck_assert(ts_obb_contains(ts_posed_tool_box(&pt, 0), cc[i], 1e-15));
  /* closed: the jaws touch along x = 0 and meet at the tip (0, 0, 0) */
  pose.jaw = 0;
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &pose), 0);
  ts_posed_tool_jaw(&pt, 0, &j0);
  ck_assert_double_eq_tol(j0.c[0], 0.0005, 1e-15);
  ck_assert_double_eq_tol(j0.c[1], 0.005, 1e-15);
  ts_posed_tool_free(&pt);
  ts_obb_tree_destroy(tree);
}
END_TEST

/* ---- AABB tree refit ---- */

START_TEST(test_aabb_refit) {
  rng_state = 7;
  ts_tissue *t = default_patch();
  ts_aabb_tree *tree;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  char err[256] = "";
  const double(*x)[3] = (const double(*)[3])t->x;
  ck_assert_msg(ts_aabb_tree_validate(tree, x, err, sizeof err) == 0, "%s", err);
  ck_assert_uint_eq(tree->n_nodes, 2 * ts_tissue_n_contact_tris(t) - 1);
  /* median splits: depth ceil(log2 n) + 1 at most */
  ck_assert_uint_le(tree->depth, (uint32_t)ceil(log2(ts_tissue_n_contact_tris(t))) + 1);
  const double margin = tree->def.margin;

  /* moves shorter than the margin refit nothing */
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double u[3] = {urange(-1, 1), urange(-1, 1), urange(-1, 1)}, l = sqrt(dot3(u, u));
    double r = urange(0, 0.95) * margin;
    for (int k = 0; k < 3; k++) t->x[i][k] += r * u[k] / l;
  }
  ck_assert_int_eq(ts_aabb_tree_refit(tree, x), 0);
  ck_assert_uint_eq(tree->stats.escaped, 0);
  ck_assert_uint_eq(tree->stats.leaves_refit, 0);
  ck_assert_msg(ts_aabb_tree_validate(tree, x, err, sizeof err) == 0, "%s", err);
  memcpy(t->x, t->rest, sizeof *t->x * t->n_nodes);
  ck_assert_int_eq(ts_aabb_tree_refit(tree, x), 0);

  /* random local deformations: a smooth bump of radius 4..15 mm moving the
   * nodes under it by up to 3 mm */
  uint64_t escaped = 0, refit = 0, rebuilt = 0;
  for (int it = 0; it < 300; it++) {
    double c[3];
    memcpy(c, t->x[(uint32_t)(urand() * t->n_nodes) % t->n_nodes], sizeof c);
    double rad = urange(0.004, 0.015), amp = urange(0.0002, 0.003);
    double dir[3] = {urange(-0.3, 0.3), urange(-1, 1), urange(-0.3, 0.3)};
    uint32_t moved_far = 0;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      double d = dist3(t->x[i], c);
      if (d >= rad) continue;
      double w = 0.5 * (1 + cos(M_PI * d / rad));
      for (int k = 0; k < 3; k++) t->x[i][k] += amp * w * dir[k];
      if (amp * w * fmax(fabs(dir[0]), fmax(fabs(dir[1]), fabs(dir[2]))) > 0) moved_far++;
    }
    int rc = ts_aabb_tree_refit(tree, x);
    ck_assert_int_ge(rc, 0);
    rebuilt += rc == 1;
    ck_assert_msg(ts_aabb_tree_validate(tree, x, err, sizeof err) == 0, "iteration %d: %s", it,
                  err);
    /* locality: only nodes under the bump can escape */
    ck_assert_uint_le(tree->stats.escaped, moved_far);
    escaped += tree->stats.escaped;
    refit += tree->stats.leaves_refit;
  }
  fprintf(stderr,
          "aabb refit: %u tris, 300 bumps: %.1f escaped nodes, %.1f leaves refit per step, %llu "
          "rebuilds\n",
          ts_tissue_n_contact_tris(t), escaped / 300.0, refit / 300.0, (unsigned long long)rebuilt);
  ck_assert_uint_gt(escaped, 0);
  ck_assert_uint_lt(refit / 300, ts_tissue_n_contact_tris(t) / 4);

  /* a large global deformation (stretch x by 3) makes the tree loose: it is
   * rebuilt, and valid */
  uint64_t rb = tree->stats.rebuilds;
  for (uint32_t i = 0; i < t->n_nodes; i++) t->x[i][0] *= 3;
  ck_assert_int_eq(ts_aabb_tree_refit(tree, x), 1);
  ck_assert_uint_eq(tree->stats.rebuilds, rb + 1);
  ck_assert_msg(ts_aabb_tree_validate(tree, x, err, sizeof err) == 0, "%s", err);
  ck_assert_double_eq(tree->area, tree->area_built);

  /* a NaN position: refused, tree unchanged */
  double keep = t->x[5][1];
  t->x[5][1] = NAN;
  ck_assert_int_eq(ts_aabb_tree_refit(tree, x), TS_ENAN);
  t->x[5][1] = keep;
  ck_assert_msg(ts_aabb_tree_validate(tree, x, err, sizeof err) == 0, "%s", err);

  /* new topology: half the triangles */
  ck_assert_int_eq(
      ts_aabb_tree_set_topology(tree, t->n_nodes, x, ts_tissue_n_contact_tris(t) / 2,
                                (const uint32_t(*)[3])ts_tissue_contact_tris(t)),
      0);
  ck_assert_uint_eq(tree->n_tris, ts_tissue_n_contact_tris(t) / 2);
  ck_assert_msg(ts_aabb_tree_validate(tree, x, err, sizeof err) == 0, "%s", err);
  ts_aabb_tree_destroy(tree);
  ts_tissue_destroy(t);
}
END_TEST

/* The moved-point refit against the full one: two trees over the same
 * tissue through the same random local bumps, one told which nodes each bump
 * moved (in a shuffled order, with repeats and with nodes no triangle uses),
 * must end every step with bitwise the same boxes and the same escapes; a
 * point left off the list is caught by validation; bad lists are refused. */
START_TEST(test_aabb_refit_moved) {
  rng_state = 11;
  ts_tissue *t = default_patch();
  ts_aabb_tree *full, *part;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &full), 0);
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &part), 0);
  const double(*x)[3] = (const double(*)[3])t->x;
  char err[256] = "";
  uint32_t *moved = malloc(sizeof *moved * 3 * t->n_nodes);
  ck_assert_ptr_nonnull(moved);
  uint32_t unused = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) unused += part->slot[i] == UINT32_MAX;
  uint64_t escaped = 0, rebuilt = 0;
  for (int it = 0; it < 200; it++) {
    double c[3];
    memcpy(c, t->x[(uint32_t)(urand() * t->n_nodes) % t->n_nodes], sizeof c);
    double rad = urange(0.003, 0.012), amp = urange(0.0001, 0.002);
    double dir[3] = {urange(-0.3, 0.3), urange(-1, 1), urange(-0.3, 0.3)};
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      double d = dist3(t->x[i], c);
      if (d >= rad) continue;
      double w = 0.5 * (1 + cos(M_PI * d / rad));
      for (int k = 0; k < 3; k++) t->x[i][k] += amp * w * dir[k];
      moved[n++] = i;
      if (urand() < 0.3) moved[n++] = i; /* a repeat */
    }
    for (uint32_t i = n; i > 1; i--) { /* any order */
      uint32_t j = (uint32_t)(urand() * i) % i, s = moved[i - 1];
      moved[i - 1] = moved[j], moved[j] = s;
    }
    int rf = ts_aabb_tree_refit(full, x), rp = ts_aabb_tree_refit_moved(part, x, moved, n);
    ck_assert_int_ge(rf, 0);
    ck_assert_int_eq(rp, rf);
    rebuilt += rp == 1;
    ck_assert_msg(ts_aabb_tree_validate(part, x, err, sizeof err) == 0, "iteration %d: %s", it,
                  err);
    ck_assert_uint_eq(part->stats.escaped, full->stats.escaped);
    ck_assert_uint_eq(part->stats.leaves_refit, full->stats.leaves_refit);
    escaped += part->stats.escaped;
    uint32_t differ = 0;
    for (uint32_t i = 0; i < part->n_nodes; i++)
      differ += memcmp(part->nodes[i].lo, full->nodes[i].lo, sizeof part->nodes[i].lo) != 0 ||
                memcmp(part->nodes[i].hi, full->nodes[i].hi, sizeof part->nodes[i].hi) != 0;
    ck_assert_msg(differ == 0, "iteration %d: %u boxes differ", it, differ);
    /* the summed area is kept in a different order: equal to rounding */
    ck_assert_double_eq_tol(part->area, full->area, 1e-9 * full->area);
  }
  fprintf(stderr, "aabb refit_moved: %u nodes (%u unused), 200 bumps, %.1f escaped per step, %llu rebuilds\n",
          t->n_nodes, unused, escaped / 200.0, (unsigned long long)rebuilt);
  ck_assert_uint_gt(escaped, 0);

  /* nothing listed: nothing checked, nothing changes */
  ck_assert_int_eq(ts_aabb_tree_refit_moved(part, x, NULL, 0), 0);
  ck_assert_uint_eq(part->stats.escaped, 0);

  /* a promise broken (a point moved 1 mm but not listed) is what validation
   * reports; listing it repairs the tree */
  uint32_t p = part->used[part->n_used / 2];
  t->x[p][1] += 0.001;
  ck_assert_int_eq(ts_aabb_tree_refit_moved(part, x, NULL, 0), 0);
  ck_assert_int_eq(ts_aabb_tree_validate(part, x, NULL, 0), TS_EINTERNAL);
  ck_assert_int_ge(ts_aabb_tree_refit_moved(part, x, &p, 1), 0);
  ck_assert_uint_eq(part->stats.escaped, 1);
  ck_assert_msg(ts_aabb_tree_validate(part, x, err, sizeof err) == 0, "%s", err);

  /* bad lists: refused, tree unchanged */
  ts_aabb_node keep = part->nodes[0];
  uint32_t bad[2] = {p, t->n_nodes};
  t->x[p][1] += 0.001;
  ck_assert_int_eq(ts_aabb_tree_refit_moved(part, x, bad, 2), TS_EINVAL);
  ck_assert_int_eq(ts_aabb_tree_refit_moved(part, x, NULL, 1), TS_EINVAL);
  ck_assert_int_eq(ts_aabb_tree_refit_moved(NULL, x, &p, 1), TS_EINVAL);
  double y = t->x[p][0];
  t->x[p][0] = NAN;
  ck_assert_int_eq(ts_aabb_tree_refit_moved(part, x, &p, 1), TS_ENAN);
  t->x[p][0] = y;
  ck_assert(memcmp(&keep, &part->nodes[0], sizeof keep) == 0);
  ck_assert_int_ge(ts_aabb_tree_refit_moved(part, x, &p, 1), 0);
  ck_assert_msg(ts_aabb_tree_validate(part, x, err, sizeof err) == 0, "%s", err);

  free(moved);
  ts_aabb_tree_destroy(full);
  ts_aabb_tree_destroy(part);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- tree queries against brute force ---- */

static int cmp_contact(const void *pa, const void *pb) {
  const ts_contact *a = pa, *b = pb;
  if (a->a != b->a) return a->a < b->a ? -1 : 1;
  if (a->b != b->b) return a->b < b->b ? -1 : 1;
  return 0;
}

/* Same set: same feature pairs, points/normals/depths within 1e-9. */
static void assert_same_contacts(ts_contacts *x, ts_contacts *y, const char *what, int pose) {
  ck_assert_msg(x->total == y->total, "%s pose %d: %u contacts vs %u", what, pose, x->total,
                y->total);
  ck_assert_uint_eq(x->n, x->total);
  qsort(x->c, x->n, sizeof *x->c, cmp_contact);
  qsort(y->c, y->n, sizeof *y->c, cmp_contact);
  for (uint32_t i = 0; i < x->n; i++) {
    const ts_contact *a = &x->c[i], *b = &y->c[i];
    ck_assert_msg(a->a == b->a && a->b == b->b, "%s pose %d: pair %u: (%u,%u) vs (%u,%u)", what,
                  pose, i, a->a, a->b, b->a, b->b);
    ck_assert(dist3(a->point, b->point) <= 1e-9);
    ck_assert(dist3(a->normal, b->normal) <= 1e-9);
    ck_assert(fabs(a->depth - b->depth) <= 1e-9);
    ck_assert_double_eq_tol(dot3(a->normal, a->normal), 1.0, 1e-12);
    ck_assert(a->depth >= 0);
  }
}

typedef struct tool_case {
  const char *name;
  ts_obb_tree *tree;
  int poses;
} tool_case;

/* Random poses near the tissue: a random surface point plus an offset of
 * up to `spread`, any orientation, any jaw opening. */
static void random_pose(const ts_tissue *t, double spread, ts_pose *p) {
  const uint32_t n = ts_tissue_n_contact_tris(t), k = (uint32_t)(urand() * n) % n;
  const uint32_t *c = ts_tissue_contact_tris(t)[k]; /* where a tool meets it */
  double a = urand(), b = urand();
  if (a + b > 1) a = 1 - a, b = 1 - b;
  for (int j = 0; j < 3; j++) {
    const double *A = t->x[c[0]], *B = t->x[c[1]], *C = t->x[c[2]];
    p->p[j] = A[j] + a * (B[j] - A[j]) + b * (C[j] - A[j]) + urange(-spread, spread);
  }
  rand_quat(p->q);
  p->jaw = urand();
}

static void compare_on(ts_tissue *t, const tool_case *tools, int n_tools, const char *label,
                       int deform) {
  ts_aabb_tree *tree;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  const double(*x)[3] = (const double(*)[3])t->x;
  ts_contacts A, B;
  ck_assert_int_eq(ts_contacts_init(&A, 100000), 0);
  ck_assert_int_eq(ts_contacts_init(&B, 100000), 0);
  for (int ti = 0; ti < n_tools; ti++) {
    ts_posed_tool pt;
    ck_assert_int_eq(ts_posed_tool_init(&pt, tools[ti].tree), 0);
    int with = 0;
    uint64_t total = 0, leaf = 0;
    double spread = fmin(tools[ti].tree->reach, 0.02);
    for (int i = 0; i < tools[ti].poses; i++) {
      if (deform && i % 10 == 0) {
        /* a local dent before every tenth pose, then a refit */
        double c[3];
        memcpy(c, t->x[(uint32_t)(urand() * t->n_nodes) % t->n_nodes], sizeof c);
        double amp = urange(-0.004, 0.004);
        for (uint32_t j = 0; j < t->n_nodes; j++) {
          double d = dist3(t->x[j], c);
          if (d < 0.012) t->x[j][1] += amp * 0.5 * (1 + cos(M_PI * d / 0.012));
        }
        ck_assert_int_ge(ts_aabb_tree_refit(tree, x), 0);
      }
      ts_pose pose;
      random_pose(t, spread, &pose);
      ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &pose), 0);
      ts_collide_stats st;
      ck_assert_int_eq(ts_collide_tool_tissue(&pt, tree, x, &A, &st), 0);
      ck_assert_int_eq(ts_collide_tool_tissue_brute(&pt, tree, x, &B), 0);
      assert_same_contacts(&A, &B, tools[ti].name, i);
      with += A.total > 0;
      total += A.total;
      leaf += st.leaf_tests;
    }
    fprintf(stderr, "%s x %s: %d poses, %d with contacts, %llu contacts, %.1f leaf tests/pose\n",
            tools[ti].name, label, tools[ti].poses, with, (unsigned long long)total,
            (double)leaf / tools[ti].poses);
    /* the poses exercise contact: most of them touch */
    ck_assert_int_gt(with, tools[ti].poses / 4);
    ts_posed_tool_free(&pt);
  }
  ts_contacts_free(&A);
  ts_contacts_free(&B);
  ts_aabb_tree_destroy(tree);
}

static int n_tool_cases(tool_case *c, ts_mesh *dental) {
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = dental;
  ck_assert_int_eq(ts_obb_tree_create(&d, &c[0].tree), 0);
  c[0].name = "dental";
  c[0].poses = TU_ITERS(400, 80);
  d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_SPHERE;
  d.radius = 0.006;
  ck_assert_int_eq(ts_obb_tree_create(&d, &c[1].tree), 0);
  c[1].name = "sphere";
  c[1].poses = TU_ITERS(1000, 200);
  d.kind = TS_SHAPE_CAPSULE;
  d.radius = 0.003;
  d.length = 0.03;
  ck_assert_int_eq(ts_obb_tree_create(&d, &c[2].tree), 0);
  c[2].name = "capsule";
  c[2].poses = TU_ITERS(1000, 200);
  d.kind = TS_SHAPE_JAWS;
  d.length = 0.012;
  ck_assert_int_eq(ts_obb_tree_create(&d, &c[3].tree), 0);
  c[3].name = "jaws";
  c[3].poses = TU_ITERS(1000, 200);
  return 4;
}

/* Issue 5's test: the tree queries against brute force on thousands of
 * random poses (400 dental, 1000 each sphere, capsule and jaws; half as
 * many again on the dented patch) around the scenario tissues. Time: the
 * queries case took 37 s wall (11 s CPU) in the normal build at load 7.
 * A sanitizer build runs a fifth of the poses (TU_ITERS: 680 per tissue,
 * every tool on both tissues; a tenth left the jaws on the dented patch 13
 * poses with contacts against the 12 asserted), enough to show a memory
 * error on the query paths: with the full counts under ASan+UBSan each case
 * took 220 s wall at load 15 to 21, 80 % of unit.test_collision's time. */
START_TEST(test_query_vs_brute_liver) {
  rng_state = 8;
  ts_mesh *dental = load_obj("dental_instrument_light.obj", 0.01);
  ts_tissue *t = scenario_liver();
  tool_case c[4];
  int n = n_tool_cases(c, dental);
  compare_on(t, c, n, "liver", 0);
  for (int i = 0; i < n; i++) ts_obb_tree_destroy(c[i].tree);
  ts_tissue_destroy(t);
  ts_mesh_free(dental);
}
END_TEST

START_TEST(test_query_vs_brute_patch) {
  rng_state = 9;
  ts_mesh *dental = load_obj("dental_instrument_light.obj", 0.01);
  ts_tissue *t = patch_s();
  tool_case c[4];
  int n = n_tool_cases(c, dental);
  compare_on(t, c, n, "patch", 0);
  /* and with the tissue dented between poses (refits in between) */
  for (int i = 0; i < n; i++) c[i].poses /= 2;
  compare_on(t, c, n, "dented patch", 1);
  for (int i = 0; i < n; i++) ts_obb_tree_destroy(c[i].tree);
  ts_tissue_destroy(t);
  ts_mesh_free(dental);
}
END_TEST

/* ---- tool x tool, tissue x tissue ---- */

START_TEST(test_tool_tool) {
  rng_state = 10;
  ts_tool_shape_def d = ts_default_tool_shape_def();
  ts_obb_tree *s1, *s2, *cap, *jaws, *dent;
  d.kind = TS_SHAPE_SPHERE;
  d.radius = 0.005;
  ck_assert_int_eq(ts_obb_tree_create(&d, &s1), 0);
  d.radius = 0.003;
  ck_assert_int_eq(ts_obb_tree_create(&d, &s2), 0);
  d.kind = TS_SHAPE_CAPSULE;
  d.radius = 0.002;
  d.length = 0.04;
  ck_assert_int_eq(ts_obb_tree_create(&d, &cap), 0);
  d.kind = TS_SHAPE_JAWS;
  d.length = 0.01;
  ck_assert_int_eq(ts_obb_tree_create(&d, &jaws), 0);
  ts_mesh *m = load_obj("dental_instrument_light.obj", 0.01);
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ck_assert_int_eq(ts_obb_tree_create(&d, &dent), 0);

  ts_posed_tool A, B;
  ts_contacts buf;
  ck_assert_int_eq(ts_contacts_init(&buf, 100000), 0);
  ts_pose pa = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}}, pb = {.p = {0.007, 0, 0}, .q = {1, 0, 0, 0}};

  /* two spheres 7 mm apart, radii 5 and 3 mm: depth 1 mm along +x */
  ck_assert_int_eq(ts_posed_tool_init(&A, s1), 0);
  ck_assert_int_eq(ts_posed_tool_init(&B, s2), 0);
  ts_posed_tool_set_pose(&A, &pa);
  ts_posed_tool_set_pose(&B, &pb);
  ck_assert_int_eq(ts_collide_tool_tool(&A, &B, &buf, NULL), 0);
  ck_assert_uint_eq(buf.n, 1);
  ck_assert_double_eq_tol(buf.c[0].depth, 0.001, 1e-15);
  ck_assert_double_eq_tol(buf.c[0].normal[0], 1.0, 1e-15);
  ck_assert_double_eq_tol(buf.c[0].point[0], 0.0045, 1e-15);
  pb.p[0] = 0.0081;
  ts_posed_tool_set_pose(&B, &pb);
  ck_assert_int_eq(ts_collide_tool_tool(&A, &B, &buf, NULL), 0);
  ck_assert_uint_eq(buf.n, 0);
  ts_posed_tool_free(&B);

  /* sphere against a capsule lying along z (turned 90 degrees about x) at
   * x = 6 mm: distance 6, radii 5 + 2: depth 1 mm, normal +x */
  ck_assert_int_eq(ts_posed_tool_init(&B, cap), 0);
  ts_pose pc = {.p = {0.006, 0, -0.02}, .q = {sqrt(0.5), sqrt(0.5), 0, 0}};
  ts_posed_tool_set_pose(&B, &pc);
  ck_assert_int_eq(ts_collide_tool_tool(&A, &B, &buf, NULL), 0);
  ck_assert_uint_eq(buf.n, 1);
  ck_assert_double_eq_tol(buf.c[0].depth, 0.001, 1e-15);
  ck_assert_double_eq_tol(buf.c[0].normal[0], 1.0, 1e-15);
  ts_posed_tool_free(&B);

  /* sphere against the closed jaws (tip at the origin, body up +y, jaw 0 at
   * x in [0, 1.5 mm]): sphere centre at x = 1.5 + 4 mm, y = 5 mm: 1 mm deep
   * into jaw 0's outer face, normal from the sphere towards -x */
  ck_assert_int_eq(ts_posed_tool_init(&B, jaws), 0);
  ts_pose pj = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}, .jaw = 0};
  ts_posed_tool_set_pose(&B, &pj);
  ts_pose ps = {.p = {0.0015 + 0.004, 0.005, 0}, .q = {1, 0, 0, 0}};
  ts_posed_tool_set_pose(&A, &ps);
  ck_assert_int_eq(ts_collide_tool_tool(&A, &B, &buf, NULL), 0);
  ck_assert_uint_eq(buf.n, 1);
  ck_assert_uint_eq(buf.c[0].b, 0);
  ck_assert_double_eq_tol(buf.c[0].depth, 0.001, 1e-12);
  ck_assert_double_eq_tol(buf.c[0].normal[0], -1.0, 1e-12);
  /* the same from the jaws' side: normal flips */
  ck_assert_int_eq(ts_collide_tool_tool(&B, &A, &buf, NULL), 0);
  ck_assert_uint_eq(buf.n, 1);
  ck_assert_double_eq_tol(buf.c[0].normal[0], 1.0, 1e-12);
  ck_assert_double_eq_tol(buf.c[0].depth, 0.001, 1e-12);
  ts_posed_tool_free(&B);
  ts_posed_tool_free(&A);

  /* two dental instruments: against every face pair tested directly */
  ck_assert_int_eq(ts_posed_tool_init(&A, dent), 0);
  ck_assert_int_eq(ts_posed_tool_init(&B, dent), 0);
  ts_contacts ref;
  ck_assert_int_eq(ts_contacts_init(&ref, 100000), 0);
  int with = 0;
  for (int it = 0; it < 40; it++) {
    ts_pose p1 = {.p = {0, 0, 0}}, p2;
    rand_quat(p1.q);
    rand_quat(p2.q);
    for (int k = 0; k < 3; k++) p2.p[k] = urange(-0.0015, 0.0015);
    ts_posed_tool_set_pose(&A, &p1);
    ts_posed_tool_set_pose(&B, &p2);
    ck_assert_int_eq(ts_collide_tool_tool(&A, &B, &buf, NULL), 0);
    ref.n = ref.total = 0;
    for (uint32_t fa = 0; fa < dent->n_tris; fa++) {
      double F[3][3];
      ts_posed_tool_triangle(&A, fa, F);
      for (uint32_t fb = 0; fb < dent->n_tris; fb++) {
        double T[3][3];
        ts_hit h;
        ts_posed_tool_triangle(&B, fb, T);
        if (ts_contact_face_triangle(F, T, &h)) {
          ts_contact *c = &ref.c[ref.n++];
          ref.total++;
          c->a = fa, c->b = fb;
          memcpy(c->point, h.point, sizeof h.point);
          memcpy(c->normal, h.normal, sizeof h.normal);
          c->depth = h.depth;
        }
      }
    }
    assert_same_contacts(&buf, &ref, "dental x dental", it);
    with += buf.n > 0;
  }
  ck_assert_int_gt(with, 5);
  ts_contacts_free(&ref);
  ts_posed_tool_free(&A);
  ts_posed_tool_free(&B);
  ts_contacts_free(&buf);
  ts_obb_tree_destroy(s1);
  ts_obb_tree_destroy(s2);
  ts_obb_tree_destroy(cap);
  ts_obb_tree_destroy(jaws);
  ts_obb_tree_destroy(dent);
  ts_mesh_free(m);
}
END_TEST

START_TEST(test_tissue_tissue) {
  ts_tissue *t = default_patch();
  const double(*x)[3] = (const double(*)[3])t->x;
  ts_aabb_tree *a;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &a), 0);
  ts_contacts buf, ref;
  ck_assert_int_eq(ts_contacts_init(&buf, 200000), 0);
  ck_assert_int_eq(ts_contacts_init(&ref, 200000), 0);
  /* the patch at rest does not touch itself (triangles sharing a node
   * excepted) */
  ts_collide_stats st;
  ck_assert_int_eq(ts_collide_tissue_tissue(a, x, a, x, &buf, &st), 0);
  ck_assert_uint_eq(buf.total, 0);
  ck_assert_uint_gt(st.leaf_tests, 0);

  /* a copy turned 90 degrees about z, pushed through it: contacts equal the
   * all-pairs test */
  ts_tissue *u = default_patch();
  for (uint32_t i = 0; i < u->n_nodes; i++) {
    double px = u->x[i][0], py = u->x[i][1];
    u->x[i][0] = -py + 0.001, u->x[i][1] = px;
  }
  ts_aabb_tree *b;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, u, &b), 0);
  const double(*y)[3] = (const double(*)[3])u->x;
  ck_assert_int_eq(ts_collide_tissue_tissue(a, x, b, y, &buf, NULL), 0);
  for (uint32_t i = 0; i < ts_tissue_n_contact_tris(t); i++) {
    double P[3][3];
    for (int c = 0; c < 3; c++) memcpy(P[c], x[ts_tissue_contact_tris(t)[i][c]], sizeof P[c]);
    for (uint32_t j = 0; j < ts_tissue_n_contact_tris(u); j++) {
      double Q[3][3];
      ts_hit h;
      for (int c = 0; c < 3; c++) memcpy(Q[c], y[ts_tissue_contact_tris(u)[j][c]], sizeof Q[c]);
      if (ts_contact_face_triangle(P, Q, &h)) {
        ts_contact *c = &ref.c[ref.n++];
        ref.total++;
        c->a = i, c->b = j;
        memcpy(c->point, h.point, sizeof h.point);
        memcpy(c->normal, h.normal, sizeof h.normal);
        c->depth = h.depth;
      }
    }
  }
  ck_assert_uint_gt(ref.n, 100);
  assert_same_contacts(&buf, &ref, "patch x patch", 0);
  uint32_t crossing = buf.n;

  /* self-contact: fold the top sheet's +x half down through the rest */
  for (uint32_t j = 0; j < t->nodes_per_sheet; j++) {
    double *p = t->x[j];
    if (p[0] > 0.01) p[1] -= 2.0 * (p[0] - 0.01);
  }
  ck_assert_int_ge(ts_aabb_tree_refit(a, x), 0);
  ck_assert_int_eq(ts_collide_tissue_tissue(a, x, a, x, &buf, NULL), 0);
  ref.n = ref.total = 0;
  for (uint32_t i = 0; i < ts_tissue_n_contact_tris(t); i++)
    for (uint32_t j = i + 1; j < ts_tissue_n_contact_tris(t); j++) {
      const uint32_t *s = ts_tissue_contact_tris(t)[i], *r = ts_tissue_contact_tris(t)[j];
      int share = 0;
      for (int c = 0; c < 3; c++)
        for (int e = 0; e < 3; e++) share |= s[c] == r[e];
      if (share) continue;
      double P[3][3], Q[3][3];
      ts_hit h;
      for (int c = 0; c < 3; c++)
        memcpy(P[c], x[s[c]], sizeof P[c]), memcpy(Q[c], x[r[c]], sizeof Q[c]);
      if (ts_contact_face_triangle(P, Q, &h)) {
        ts_contact *c = &ref.c[ref.n++];
        ref.total++;
        c->a = i, c->b = j;
        memcpy(c->point, h.point, sizeof h.point);
        memcpy(c->normal, h.normal, sizeof h.normal);
        c->depth = h.depth;
      }
    }
  ck_assert_uint_gt(ref.n, 10);
  assert_same_contacts(&buf, &ref, "patch self", 0);
  fprintf(stderr, "tissue x tissue: crossing copies %u contacts, folded patch %u self-contacts\n",
          crossing, ref.n);

  ts_contacts_free(&buf);
  ts_contacts_free(&ref);
  ts_aabb_tree_destroy(a);
  ts_aabb_tree_destroy(b);
  ts_tissue_destroy(t);
  ts_tissue_destroy(u);
}
END_TEST

/* ---- sweep ---- */

/* A step of 1 ms at 0.5 m/s moves 0.5 mm. */
#define STEP_TRAVEL 0.5e-3

static void check_tunnel(ts_obb_tree *tool, ts_tissue *t, const ts_pose *from, const ts_pose *to,
                         const char *what, double *toi_out) {
  ts_aabb_tree *tree;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  const double(*x)[3] = (const double(*)[3])t->x;
  ts_posed_tool pt;
  ck_assert_int_eq(ts_posed_tool_init(&pt, tool), 0);
  ts_contacts buf;
  ck_assert_int_eq(ts_contacts_init(&buf, 10000), 0);
  /* the construction: both ends are free of contact */
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, from), 0);
  ck_assert_int_eq(ts_collide_tool_tissue(&pt, tree, x, &buf, NULL), 0);
  ck_assert_msg(buf.total == 0, "%s: start pose touches", what);
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, to), 0);
  ck_assert_int_eq(ts_collide_tool_tissue(&pt, tree, x, &buf, NULL), 0);
  ck_assert_msg(buf.total == 0, "%s: end pose touches", what);
  /* the sweep sees the crossing */
  ts_sweep_info info;
  ck_assert_int_eq(ts_collide_sweep(&pt, from, to, tree, x, NULL, &buf, &info), 0);
  fprintf(stderr, "sweep %s: travel %.3f mm, %u substeps, contact at toi %.3f, %u contacts\n", what,
          info.travel * 1e3, info.substeps, info.toi, buf.n);
  ck_assert_msg(buf.total > 0, "%s: tunnelled", what);
  ck_assert(info.toi > 0 && info.toi < 1);
  for (uint32_t i = 0; i < buf.n; i++) ck_assert_double_eq(buf.c[i].toi, info.toi);
  /* the tool is left where the contacts are */
  ts_pose at;
  ts_pose_lerp(from, to, info.toi, &at);
  for (int k = 0; k < 3; k++) ck_assert_double_eq_tol(pt.pose.p[k], at.p[k], 1e-15);
  /* the same contacts as a plain query there, none at earlier substeps */
  ts_contacts ref;
  ck_assert_int_eq(ts_contacts_init(&ref, 10000), 0);
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &at), 0);
  ck_assert_int_eq(ts_collide_tool_tissue(&pt, tree, x, &ref, NULL), 0);
  assert_same_contacts(&buf, &ref, what, 0);
  for (uint32_t k = 1; (double)k / info.substeps < info.toi - 1e-12; k++) {
    ts_pose_lerp(from, to, (double)k / info.substeps, &at);
    ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &at), 0);
    ck_assert_int_eq(ts_collide_tool_tissue(&pt, tree, x, &ref, NULL), 0);
    ck_assert_uint_eq(ref.total, 0);
  }
  ts_contacts_free(&ref);
  if (toi_out) *toi_out = info.toi;
  ts_contacts_free(&buf);
  ts_posed_tool_free(&pt);
  ts_aabb_tree_destroy(tree);
}

START_TEST(test_sweep_no_tunnel) {
  ts_tool_shape_def d = ts_default_tool_shape_def();
  /* a sphere of radius 0.1 mm through a sheet of zero thickness: from
   * 0.25 mm above to 0.25 mm below in one step */
  d.kind = TS_SHAPE_SPHERE;
  d.radius = 0.1e-3;
  ts_obb_tree *sphere;
  ck_assert_int_eq(ts_obb_tree_create(&d, &sphere), 0);
  ts_tissue *sheet = flat_sheet(41, 0.04, 0.0);
  ts_pose from = {.p = {0.0003, 0.25e-3, -0.0007}, .q = {1, 0, 0, 0}};
  ts_pose to = from;
  to.p[1] -= STEP_TRAVEL;
  double toi;
  check_tunnel(sphere, sheet, &from, &to, "sphere r 0.1 mm x sheet", &toi);
  /* substeps of at most half the diameter (0.1 mm): n = 5, and the first
   * k/5 with |0.25 - 0.5 k/5| <= 0.1 mm is k = 2 */
  ck_assert_double_eq_tol(toi, 0.4, 1e-15);

  /* through a one-layer patch 0.1 mm thick */
  ts_patch_def pd = ts_default_patch_def();
  pd.n_layers = 1;
  pd.layers[0].thickness = 0.1e-3;
  ts_tissue *thin;
  ck_assert_int_eq(ts_patch_create(&pd, &thin), 0);
  double top = thin->x[(pd.resolution / 2) * pd.resolution + pd.resolution / 2][1];
  ts_pose f2 = {.p = {0, top + 0.25e-3, 0}, .q = {1, 0, 0, 0}}, t2 = f2;
  t2.p[1] -= STEP_TRAVEL;
  check_tunnel(sphere, thin, &f2, &t2, "sphere r 0.1 mm x 0.1 mm patch", NULL);

  /* the dental instrument, blade flat (its thin axis y along the world y),
   * moving 0.5 mm down through the sheet: above it at the start, its upper
   * face below it at the end */
  ts_mesh *m = load_obj("dental_instrument_light.obj", 0.01);
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *dent;
  ck_assert_int_eq(ts_obb_tree_create(&d, &dent), 0);
  double ylo = INFINITY, yhi = -INFINITY;
  for (uint32_t i = 0; i < dent->n_verts; i++)
    ylo = fmin(ylo, dent->v[i][1]), yhi = fmax(yhi, dent->v[i][1]);
  ck_assert_double_lt(yhi - ylo, STEP_TRAVEL - 0.05e-3);
  ts_pose f3 = {.p = {0, -ylo + 0.02e-3, 0}, .q = {1, 0, 0, 0}}, t3 = f3;
  t3.p[1] -= STEP_TRAVEL;
  ts_tissue *big = flat_sheet(61, 0.09, 0.0);
  check_tunnel(dent, big, &f3, &t3, "dental x sheet", NULL);

  /* a long thin capsule dropping and turning: lying along +x (local +y
   * turned -90 degrees about z) 0.25 mm above the sheet at the start; at the
   * end its tip is 0.25 mm below and its far end (30 mm away) 0.5 mm lower
   * still, so rotation moves the far end as much as the drop does */
  d.kind = TS_SHAPE_CAPSULE;
  d.radius = 0.1e-3;
  d.length = 0.03;
  ts_obb_tree *cap;
  ck_assert_int_eq(ts_obb_tree_create(&d, &cap), 0);
  double a0 = -M_PI / 2, a1 = a0 - atan2(STEP_TRAVEL, 0.03);
  ts_pose f4 = {.p = {-0.015, 0.25e-3, 0.001}, .q = {cos(a0 / 2), 0, 0, sin(a0 / 2)}}, t4 = f4;
  t4.p[1] -= STEP_TRAVEL;
  t4.q[0] = cos(a1 / 2), t4.q[3] = sin(a1 / 2);
  check_tunnel(cap, sheet, &f4, &t4, "turning capsule x sheet", NULL);

  ts_obb_tree_destroy(sphere);
  ts_obb_tree_destroy(dent);
  ts_obb_tree_destroy(cap);
  ts_mesh_free(m);
  ts_tissue_destroy(sheet);
  ts_tissue_destroy(thin);
  ts_tissue_destroy(big);
}
END_TEST

/* The sweep (one descent, exact tests per substep) against a descent per
 * substep, on random short motions near a tissue. */
static void sweep_vs_substeps(ts_tissue *t, ts_obb_tree *tool, int n_moves, const char *what) {
  ts_aabb_tree *tree;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  const double(*x)[3] = (const double(*)[3])t->x;
  ts_posed_tool pt;
  ck_assert_int_eq(ts_posed_tool_init(&pt, tool), 0);
  ts_contacts buf, ref, small;
  ck_assert_int_eq(ts_contacts_init(&buf, 100000), 0);
  ck_assert_int_eq(ts_contacts_init(&ref, 100000), 0);
  ck_assert_int_eq(ts_contacts_init(&small, 2), 0);
  int hit = 0, early = 0;
  for (int i = 0; i < n_moves; i++) {
    ts_pose a, b;
    random_pose(t, fmin(tool->reach, 0.02), &a);
    /* up to 0.5 mm and 20 mrad in the step, the jaws up to a tenth */
    b = a;
    for (int k = 0; k < 3; k++) b.p[k] += urange(-0.3e-3, 0.3e-3);
    double u[3] = {urange(-1, 1), urange(-1, 1), urange(-1, 1)}, th = urange(0, 0.02);
    double l = sqrt(dot3(u, u)), dq[4] = {cos(th / 2), sin(th / 2) * u[0] / l,
                                          sin(th / 2) * u[1] / l, sin(th / 2) * u[2] / l};
    /* b.q = dq * a.q */
    b.q[0] = dq[0] * a.q[0] - dq[1] * a.q[1] - dq[2] * a.q[2] - dq[3] * a.q[3];
    b.q[1] = dq[0] * a.q[1] + dq[1] * a.q[0] + dq[2] * a.q[3] - dq[3] * a.q[2];
    b.q[2] = dq[0] * a.q[2] - dq[1] * a.q[3] + dq[2] * a.q[0] + dq[3] * a.q[1];
    b.q[3] = dq[0] * a.q[3] + dq[1] * a.q[2] - dq[2] * a.q[1] + dq[3] * a.q[0];
    b.jaw = fmin(1, a.jaw + urange(0, 0.1));
    /* the poses as the tool keeps them (normalised), so that both sides
     * interpolate the very same numbers */
    ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &a), 0);
    a = pt.pose;
    ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &b), 0);
    b = pt.pose;
    ts_sweep_info info, info2;
    int rc = ts_collide_sweep(&pt, &a, &b, tree, x, NULL, &buf, &info);
    ck_assert_int_eq(rc, 0);
    /* reference: the first substep with contacts, by plain queries */
    double toi = 1.0;
    ref.n = ref.total = 0;
    for (uint32_t k = 1; k <= info.substeps; k++) {
      ts_pose ps;
      if (k == info.substeps)
        ps = b;
      else
        ts_pose_lerp(&a, &b, (double)k / info.substeps, &ps);
      ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &ps), 0);
      ck_assert_int_eq(ts_collide_tool_tissue(&pt, tree, x, &ref, NULL), 0);
      if (ref.total) {
        toi = (double)k / info.substeps;
        break;
      }
    }
    ck_assert_double_eq(info.toi, toi);
    assert_same_contacts(&buf, &ref, what, i);
    hit += buf.total > 0;
    early += buf.total > 0 && toi < 1;
    /* with no room for the candidate pairs: the per-substep descent, the
     * same first substep and count */
    rc = ts_collide_sweep(&pt, &a, &b, tree, x, NULL, &small, &info2);
    ck_assert(rc == 0 || rc == TS_EFULL);
    ck_assert_double_eq(info2.toi, toi);
    ck_assert_uint_eq(small.total, ref.total);
  }
  fprintf(stderr, "sweep vs substeps, %s: %d moves, %d with contacts, %d before the end pose\n",
          what, n_moves, hit, early);
  ck_assert_int_gt(hit, n_moves / 4);
  ts_contacts_free(&buf);
  ts_contacts_free(&ref);
  ts_contacts_free(&small);
  ts_posed_tool_free(&pt);
  ts_aabb_tree_destroy(tree);
}

START_TEST(test_sweep_vs_substeps) {
  rng_state = 11;
  ts_mesh *dental = load_obj("dental_instrument_light.obj", 0.01);
  ts_mesh *liver = load_obj("liver-smooth.obj", 0.01);
  tool_case c[4];
  int n = n_tool_cases(c, dental);
  ts_tissue *lt = surface_tissue(liver), *pt = default_patch();
  for (int i = 0; i < n; i++) {
    const int moves = i == 0 ? TU_ITERS(100, 25) : TU_ITERS(200, 50);
    sweep_vs_substeps(lt, c[i].tree, moves, c[i].name);
    sweep_vs_substeps(pt, c[i].tree, moves, c[i].name);
  }
  for (int i = 0; i < n; i++) ts_obb_tree_destroy(c[i].tree);
  ts_tissue_destroy(lt);
  ts_tissue_destroy(pt);
  ts_mesh_free(liver);
  ts_mesh_free(dental);
}
END_TEST

/* ---- bad input ---- */

START_TEST(test_bad_input) {
  ts_tool_shape_def d = ts_default_tool_shape_def();
  ts_obb_tree *tree;
  d.radius = -1;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), TS_EINVAL);
  ck_assert_ptr_null(tree);
  d.radius = NAN;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), TS_ENAN);
  d = ts_default_tool_shape_def();
  d.kind = 42;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), TS_EINVAL);
  d.kind = TS_SHAPE_MESH;
  d.mesh = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), TS_EINVAL);
  ts_mesh *m;
  ck_assert_int_eq(ts_mesh_alloc(3, 1, &m), 0);
  m->t[0][0] = 0, m->t[0][1] = 1, m->t[0][2] = 3; /* out of range */
  d.mesh = m;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), TS_EINVAL);
  m->t[0][2] = 2;
  m->v[1][0] = INFINITY;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), TS_ENAN);
  /* a single degenerate triangle (all corners equal) is a valid tool */
  m->v[1][0] = 0;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), 0);
  ck_assert_int_eq(ts_obb_tree_validate(tree, 0, NULL, 0), 0);
  ck_assert_double_eq(tree->thickness, 0);

  ts_posed_tool pt;
  ck_assert_int_eq(ts_posed_tool_init(&pt, tree), 0);
  ts_pose p = {.p = {0, NAN, 0}, .q = {1, 0, 0, 0}};
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &p), TS_ENAN);
  p.p[1] = 0;
  p.q[0] = 0;
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &p), TS_EQUAT);
  p.q[0] = 2; /* normalised here */
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &p), 0);
  ck_assert_double_eq(pt.pose.q[0], 1.0);

  /* the degenerate tool against a sheet it lies in: no crash, a contact */
  ts_tissue *s = flat_sheet(5, 0.01, 0.0);
  ts_aabb_tree *at;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, s, &at), 0);
  ts_contacts buf;
  ck_assert_int_eq(ts_contacts_init(&buf, 4), 0);
  ck_assert_int_eq(ts_collide_tool_tissue(&pt, at, (const double(*)[3])s->x, &buf, NULL), 0);
  /* a degenerate face gives no contact (no normal to push along) */
  ck_assert_uint_eq(buf.total, 0);
  ts_posed_tool_free(&pt);
  ts_obb_tree_destroy(tree);
  ts_mesh_free(m);

  /* a buffer too small: TS_EFULL, the first cap kept, total counts all */
  d = ts_default_tool_shape_def();
  d.radius = 0.004;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), 0);
  ck_assert_int_eq(ts_posed_tool_init(&pt, tree), 0);
  ts_pose c = {.p = {0, 0.001, 0}, .q = {1, 0, 0, 0}};
  ts_posed_tool_set_pose(&pt, &c);
  ck_assert_int_eq(ts_collide_tool_tissue(&pt, at, (const double(*)[3])s->x, &buf, NULL), TS_EFULL);
  ck_assert_uint_eq(buf.n, 4);
  ck_assert_uint_gt(buf.total, 4);
  /* sweep with bad poses and defs */
  ts_pose bad = c;
  bad.q[0] = NAN;
  ck_assert_int_eq(ts_collide_sweep(&pt, &c, &bad, at, (const double(*)[3])s->x, NULL, &buf, NULL),
                   TS_ENAN);
  ts_sweep_def sd = {.max_substeps = 0, .travel_fraction = 0.5};
  ck_assert_int_eq(ts_collide_sweep(&pt, &c, &c, at, (const double(*)[3])s->x, &sd, &buf, NULL),
                   TS_EINVAL);
  ck_assert_int_eq(ts_collide_tool_tissue(NULL, at, (const double(*)[3])s->x, &buf, NULL),
                   TS_EINVAL);
  ts_posed_tool_free(&pt);
  ts_obb_tree_destroy(tree);
  ts_contacts_free(&buf);

  /* AABB trees: bad index, NaN position, bad def, empty */
  uint32_t tri[1][3] = {{0, 1, 9}};
  ts_aabb_tree *bt;
  ck_assert_int_eq(
      ts_aabb_tree_create(NULL, 3, (const double(*)[3])s->x, 1, (const uint32_t(*)[3])tri, &bt),
      TS_EINVAL);
  ck_assert_ptr_null(bt);
  tri[0][2] = 2;
  s->x[1][2] = NAN;
  ck_assert_int_eq(
      ts_aabb_tree_create(NULL, 3, (const double(*)[3])s->x, 1, (const uint32_t(*)[3])tri, &bt),
      TS_ENAN);
  s->x[1][2] = 0;
  ts_aabb_tree_def ad = {.margin = -1, .loose_ratio = 2};
  ck_assert_int_eq(
      ts_aabb_tree_create(&ad, 3, (const double(*)[3])s->x, 1, (const uint32_t(*)[3])tri, &bt),
      TS_EINVAL);
  ck_assert_int_eq(ts_aabb_tree_create(NULL, 3, (const double(*)[3])s->x, 0, NULL, &bt), 0);
  ck_assert_int_eq(ts_aabb_tree_validate(bt, (const double(*)[3])s->x, NULL, 0), 0);
  ck_assert_int_eq(ts_aabb_tree_refit(bt, (const double(*)[3])s->x), 0);
  ts_aabb_tree_destroy(bt);
  ts_aabb_tree_destroy(at);
  ts_tissue_destroy(s);
}
END_TEST

static Suite *collision_suite(void) {
  Suite *s = suite_create("collision");
  TCase *tc = tcase_create("sat");
  tcase_add_test(tc, test_sat_random);
  tcase_add_test(tc, test_sat_touching);
  tcase_add_test(tc, test_sat_nearly_parallel);
  suite_add_tcase(s, tc);
  tc = tcase_create("narrow");
  tcase_add_test(tc, test_tritri_random);
  tcase_add_test(tc, test_tritri_special);
  tcase_add_test(tc, test_closest_features);
  tcase_add_test(tc, test_contact_features);
  suite_add_tcase(s, tc);
  tc = tcase_create("trees");
  tcase_add_test(tc, test_obb_fit);
  tcase_add_test(tc, test_aabb_refit);
  tcase_add_test(tc, test_aabb_refit_moved);
  suite_add_tcase(s, tc);
  tc = tcase_create("queries");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_query_vs_brute_liver);
  tcase_add_test(tc, test_query_vs_brute_patch);
  tcase_add_test(tc, test_tool_tool);
  tcase_add_test(tc, test_tissue_tissue);
  tcase_add_test(tc, test_sweep_no_tunnel);
  tcase_add_test(tc, test_sweep_vs_substeps);
  tcase_add_test(tc, test_bad_input);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(collision_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
