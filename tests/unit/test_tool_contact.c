/*
 * test_tool_contact.c: tool against tool (core/ts_tool_contact.h): the
 * OBB x OBB detection between two tools of a session and the penalty each
 * gets from the other.
 *
 *   - two spheres: one contact on the centre line, force k (r_a + r_b - d)
 *     along it on the second and the opposite on the first, no torque about
 *     either centre; a sphere against a capsule held by its tip: the torque
 *     about the tip is the lever arm to the contact point times the force;
 *     the tools' own force (the solver's) only read, the push not piled up
 *     from step to step;
 *   - apart: only the root boxes are tested (one box test per pair) and the
 *     forces are untouched;
 *   - a mesh tool (the dental instrument) against a capsule: the contacts
 *     equal a brute-force test of every instrument triangle against the
 *     capsule (same triangles, points and normals to 1e-12 m), and the force
 *     equals the penalty of that brute-force set;
 *   - the penalty law on a hand-made set (deepest depth, depth-weighted
 *     normal and point);
 *   - bad input: coincident tools (no defined normal) give finite forces of
 *     the law's magnitude; a non-finite pose leaves that tool out; parked
 *     tools do not push each other until they have parted once;
 *   - a session's stiffness: forces in the ratio of two stiffnesses, the
 *     range a session may choose; the count of tools touching each tool.
 *
 * Tolerances: 1e-12 relative on forces computed from the same doubles by
 * other routes (rounding of a few operations), 1e-15 absolute where the
 * answer is exactly representable arithmetic on millimetre inputs.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_collide.h"
#include "ts_error.h"
#include "ts_mesh.h"
#include "ts_mesh_io.h"
#include "ts_obb_tree.h"
#include "ts_tool.h"
#include "ts_tool_contact.h"
#include "ts_tritri.h"

#define K TS_TOOL_CONTACT_STIFFNESS_DEFAULT

static ts_tool sphere(double r, double x, double y, double z) {
  ts_tool t;
  memset(&t, 0, sizeof t);
  t.kind = TS_TOOL_SPHERE;
  t.active = 1;
  t.radius = r;
  t.pos[0] = x, t.pos[1] = y, t.pos[2] = z;
  t.quat[0] = 1;
  return t;
}

static double norm3(const double v[3]) { return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]); }

static int finite6(const ts_tool_contact_slot *t) {
  for (int a = 0; a < 3; a++)
    if (!isfinite(t->force[a]) || !isfinite(t->torque[a])) return 0;
  return 1;
}

START_TEST(test_two_spheres) {
  ts_tool_contact tc;
  ck_assert_int_eq(ts_tool_contact_init(&tc, 2, 0), 0);
  ck_assert_double_eq(tc.stiffness, K);
  /* radii 5 and 3 mm, centres 7 mm apart along (2, 3, 6) / 7: 1 mm deep */
  ts_tool t[2] = {sphere(0.005, 0, 0, 0), sphere(0.003, 0.002, 0.003, 0.006)};
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 2), 0);
  ck_assert_uint_eq(tc.pairs, 1);
  ck_assert_uint_eq(tc.contacts, 1);
  const double u[3] = {2.0 / 7, 3.0 / 7, 6.0 / 7};
  const ts_tool_contact_slot *A = &tc.slot[0], *B = &tc.slot[1];
  for (int a = 0; a < 3; a++) {
    /* |F| = k * 1 mm = 1 N along the centre line, on B away from A */
    ck_assert_double_eq_tol(B->force[a], K * 0.001 * u[a], 1e-12);
    ck_assert_double_eq_tol(A->force[a], -B->force[a], 1e-18);
    /* the contact point is on the centre line: no moment about the centres */
    ck_assert_double_eq_tol(A->torque[a], 0, 1e-15);
    ck_assert_double_eq_tol(B->torque[a], 0, 1e-15);
  }
  ck_assert_double_eq_tol(norm3(B->force), 1.0, 1e-12);

  /* the tools' own force (the solver's, the tissue's reaction) is only read;
   * the push is the same each step, not piled up */
  t[0].force[1] = 0.25;
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 2), 0);
  ck_assert_double_eq(t[0].force[1], 0.25);
  ck_assert(t[1].force[0] == 0 && t[1].force[1] == 0 && t[1].force[2] == 0);
  ck_assert_double_eq_tol(B->force[1], K * 0.001 * u[1], 1e-12);
  t[0].force[1] = 0;

  /* apart by 0.1 mm: the root boxes alone (one box test), forces untouched */
  t[1].pos[0] = 0.0081 * u[0], t[1].pos[1] = 0.0081 * u[1], t[1].pos[2] = 0.0081 * u[2];
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 2), 0);
  ck_assert_uint_eq(tc.pairs, 0);
  ck_assert_uint_eq(tc.contacts, 0);
  for (int a = 0; a < 3; a++)
    ck_assert(A->force[a] == 0 && B->force[a] == 0 && A->torque[a] == 0 && B->torque[a] == 0);
  /* far apart along x (the boxes separate on a face axis): still one test */
  t[1].pos[0] = 0.05, t[1].pos[1] = t[1].pos[2] = 0;
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 2), 0);
  ck_assert_uint_eq(tc.box_tests, 1);
  /* an inactive tool is not tested */
  t[1].pos[0] = 0.007;
  t[1].active = 0;
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 2), 0);
  ck_assert_uint_eq(tc.box_tests, 0);
  ck_assert(A->force[0] == 0 && B->force[0] == 0);
  ts_tool_contact_free(&tc);
}
END_TEST

START_TEST(test_sphere_capsule_torque) {
  ts_tool_contact tc;
  ck_assert_int_eq(ts_tool_contact_init(&tc, 3, 2000), 0);
  /* a capsule (radius 2 mm, 40 mm) held by its tip at (6, 0, -20) mm, its
   * axis turned from +y to +z; a 5 mm sphere at the origin: distance 6 mm,
   * depth 1 mm, normal +x, contact point midway between the surfaces at
   * (4.5, 0, 0) mm. F on the capsule = 2000 N/m * 1 mm = 2 N along +x; its
   * moment about the tip: (-1.5, 0, 20) mm x (2, 0, 0) N = (0, 0.04, 0) N m */
  ts_tool t[3];
  t[0] = sphere(0.005, 0, 0, 0);
  memset(&t[1], 0, sizeof t[1]); /* an inactive slot between them */
  memset(&t[2], 0, sizeof t[2]);
  t[2].kind = TS_TOOL_CAPSULE;
  t[2].active = 1;
  t[2].radius = 0.002;
  t[2].length = 0.04;
  t[2].pos[0] = 0.006, t[2].pos[2] = -0.02;
  t[2].quat[0] = sqrt(0.5), t[2].quat[1] = sqrt(0.5);
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 3), 0);
  ck_assert_uint_eq(tc.pairs, 1);
  ck_assert_double_eq_tol(tc.slot[2].force[0], 2.0, 1e-12);
  ck_assert_double_eq_tol(tc.slot[2].force[1], 0, 1e-12);
  ck_assert_double_eq_tol(tc.slot[2].force[2], 0, 1e-12);
  ck_assert_double_eq_tol(tc.slot[0].force[0], -2.0, 1e-12);
  ck_assert_double_eq_tol(tc.slot[2].torque[0], 0, 1e-14);
  ck_assert_double_eq_tol(tc.slot[2].torque[1], 0.04, 1e-14);
  ck_assert_double_eq_tol(tc.slot[2].torque[2], 0, 1e-14);
  for (int a = 0; a < 3; a++) ck_assert_double_eq_tol(tc.slot[0].torque[a], 0, 1e-14);
  ck_assert(tc.slot[1].force[0] == 0);
  ts_tool_contact_free(&tc);
}
END_TEST

START_TEST(test_penalty_law) {
  /* two contacts, depths 1 and 3 mm, normals +x and +y, points (0,0,0)
   * and (4,0,0) mm: |F| = k * 3 mm, direction (1, 3, 0) / sqrt(10), at
   * (1 * 0 + 3 * 4) / 4 = 3 mm along x */
  ts_contact c[3];
  memset(c, 0, sizeof c);
  c[0].normal[0] = 1, c[0].depth = 0.001;
  c[1].normal[1] = 1, c[1].depth = 0.003, c[1].point[0] = 0.004;
  /* a contact with a non-finite field is left out */
  c[2].normal[2] = 1, c[2].depth = NAN;
  double ta[3] = {0, 0, 0}, tb[3] = {0.003, 0.01, 0}, fa[3], Ta[3], fb[3], Tb[3];
  ck_assert_int_eq(ts_tool_contact_penalty(c, 3, 1000, ta, tb, fa, Ta, fb, Tb), 1);
  const double s = sqrt(10);
  ck_assert_double_eq_tol(fb[0], 3.0 / s, 1e-12);
  ck_assert_double_eq_tol(fb[1], 9.0 / s, 1e-12);
  ck_assert_double_eq_tol(fb[2], 0, 1e-15);
  for (int a = 0; a < 3; a++) ck_assert_double_eq_tol(fa[a], -fb[a], 1e-18);
  /* about tip a at the origin: (3, 0, 0) mm x fa; about tip b at (3, 10, 0)
   * mm: (0, -10, 0) mm x fb */
  ck_assert_double_eq_tol(Ta[2], 0.003 * fa[1], 1e-15);
  ck_assert_double_eq_tol(Ta[0], 0, 1e-15);
  ck_assert_double_eq_tol(Tb[2], 0.01 * fb[0], 1e-15);
  /* none: zero, 0 */
  ck_assert_int_eq(ts_tool_contact_penalty(c, 0, 1000, ta, tb, fa, Ta, fb, Tb), 0);
  ck_assert(fa[0] == 0 && fb[1] == 0 && Ta[2] == 0 && Tb[2] == 0);
  /* touching only (all depths 0): zero force, the plain mean direction */
  c[0].depth = c[1].depth = 0;
  ck_assert_int_eq(ts_tool_contact_penalty(c, 2, 1000, ta, tb, fa, Ta, fb, Tb), 1);
  ck_assert(norm3(fb) == 0);
  /* opposite normals that cancel: the deepest contact's normal */
  c[0].normal[0] = 1, c[0].normal[1] = 0, c[0].depth = 0.002;
  c[1].normal[0] = -1, c[1].normal[1] = 0, c[1].depth = 0.002;
  ck_assert_int_eq(ts_tool_contact_penalty(c, 2, 1000, ta, tb, fa, Ta, fb, Tb), 1);
  ck_assert_double_eq_tol(fb[0], 2.0, 1e-12);
}
END_TEST

static ts_mesh *load_instrument(void) {
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 0.01; /* centimetres: the daemon's --tool-mesh ...@0.01 */
  ts_mesh *m = NULL;
  int rc = ts_mesh_read_file(path, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", path, err);
  return m;
}

static int by_feature(const void *a, const void *b) {
  const ts_contact *x = a, *y = b;
  return x->a < y->a ? -1 : x->a > y->a;
}

/* The instrument's tree and its bounds at its pose (identity, at the
 * origin). */
static ts_obb_tree *instrument_tree(ts_mesh **m, double lo[3], double hi[3]) {
  *m = load_instrument();
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = *m;
  ts_obb_tree *tree;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), 0);
  for (int a = 0; a < 3; a++) lo[a] = INFINITY, hi[a] = -INFINITY;
  for (uint32_t i = 0; i < tree->n_verts; i++)
    for (int a = 0; a < 3; a++) lo[a] = fmin(lo[a], tree->v[i][a]), hi[a] = fmax(hi[a], tree->v[i][a]);
  return tree;
}

/* Grid pose (ix, iz) of 5 x 5: the instrument (t[0]) at the origin and a
 * capsule (t[1], radius 0.5 mm) along y (the tool frame's axis), crossing
 * it at a point of its x-z bounds and 0.3 of its height. */
static void grid_pose(const ts_obb_tree *tree, const double lo[3], const double hi[3], int ix,
                      int iz, ts_tool t[2]) {
  memset(t, 0, 2 * sizeof *t);
  t[0].kind = TS_TOOL_MESH;
  t[0].shape = tree;
  t[0].active = 1;
  t[0].quat[0] = 1;
  t[1].kind = TS_TOOL_CAPSULE;
  t[1].active = 1;
  t[1].radius = 0.0005;
  t[1].quat[0] = 1;
  double fx = (ix + 0.5) / 5, fz = (iz + 0.5) / 5;
  t[1].pos[0] = lo[0] + fx * (hi[0] - lo[0]);
  t[1].pos[2] = lo[2] + fz * (hi[2] - lo[2]);
  t[1].pos[1] = lo[1] + 0.3 * (hi[1] - lo[1]);
  t[1].length = 0.2 * (hi[1] - lo[1]);
}

START_TEST(test_mesh_capsule_vs_brute) {
  ts_mesh *m;
  double lo[3], hi[3];
  ts_obb_tree *tree = instrument_tree(&m, lo, hi);
  ts_tool_contact tc;
  ck_assert_int_eq(ts_tool_contact_init(&tc, 2, 0), 0);
  ts_contact *ref = malloc(sizeof *ref * tree->n_tris);
  ck_assert_ptr_nonnull(ref);
  uint32_t poses_with = 0;
  /* capsules (radius 0.5 mm) along y (the tool frame's axis), crossing the
   * instrument at a grid of points over its x-z bounds and heights */
  for (int ix = 0; ix < 5; ix++) {
    for (int iz = 0; iz < 5; iz++) {
      ts_tool t[2];
      grid_pose(tree, lo, hi, ix, iz, t);
      ck_assert_int_eq(ts_tool_contact_step(&tc, t, 2), 0);
      /* brute force: every instrument triangle against the capsule */
      ts_posed_tool pt;
      ck_assert_int_eq(ts_posed_tool_init(&pt, tree), 0);
      ts_pose p0 = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}};
      ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &p0), 0);
      double a[3] = {t[1].pos[0], t[1].pos[1], t[1].pos[2]};
      double b[3] = {a[0], a[1] + t[1].length, a[2]};
      uint32_t n = 0;
      for (uint32_t f = 0; f < tree->n_tris; f++) {
        double T[3][3];
        ts_hit h;
        ts_posed_tool_triangle(&pt, f, T);
        if (!ts_contact_capsule_triangle(a, b, t[1].radius, (const double(*)[3])T, &h)) continue;
        ts_contact *c = &ref[n++];
        c->a = f;
        c->b = 0;
        /* the capsule's normal points into the triangle; the pair's from
         * the instrument (first) into the capsule (second) */
        for (int k = 0; k < 3; k++) c->point[k] = h.point[k], c->normal[k] = -h.normal[k];
        c->depth = h.depth;
        c->toi = 1;
      }
      ts_posed_tool_free(&pt);
      ck_assert_uint_eq(tc.buf.total, n);
      ck_assert_uint_eq(tc.contacts, n);
      ck_assert_uint_eq(tc.pairs, n > 0);
      if (!n) {
        ck_assert(tc.slot[0].force[0] == 0 && tc.slot[1].force[1] == 0);
        continue;
      }
      poses_with++;
      qsort(tc.buf.c, tc.buf.n, sizeof *tc.buf.c, by_feature);
      for (uint32_t i = 0; i < n; i++) {
        ck_assert_uint_eq(tc.buf.c[i].a, ref[i].a);
        for (int k = 0; k < 3; k++) {
          ck_assert_double_eq_tol(tc.buf.c[i].point[k], ref[i].point[k], 1e-12);
          ck_assert_double_eq_tol(tc.buf.c[i].normal[k], ref[i].normal[k], 1e-12);
        }
        ck_assert_double_eq_tol(tc.buf.c[i].depth, ref[i].depth, 1e-12);
      }
      double fa[3], Ta[3], fb[3], Tb[3];
      ck_assert_int_eq(ts_tool_contact_penalty(ref, n, K, t[0].pos, t[1].pos, fa, Ta, fb, Tb), 1);
      for (int k = 0; k < 3; k++) {
        ck_assert_double_eq_tol(tc.slot[0].force[k], fa[k], 1e-12 * (1 + norm3(fa)));
        ck_assert_double_eq_tol(tc.slot[1].force[k], fb[k], 1e-12 * (1 + norm3(fb)));
        ck_assert_double_eq_tol(tc.slot[0].torque[k], Ta[k], 1e-12 * (1 + norm3(Ta)));
        ck_assert_double_eq_tol(tc.slot[1].torque[k], Tb[k], 1e-12 * (1 + norm3(Tb)));
        ck_assert_double_eq_tol(tc.slot[0].force[k], -tc.slot[1].force[k], 1e-15);
      }
      /* magnitude: k times the deepest contact */
      double dmax = 0;
      for (uint32_t i = 0; i < n; i++) dmax = fmax(dmax, ref[i].depth);
      ck_assert_double_eq_tol(norm3(tc.slot[1].force), K * dmax, 1e-12);
    }
  }
  fprintf(stderr, "test_tool_contact: instrument x capsule, %u of 25 poses in contact\n",
          poses_with);
  ck_assert_uint_ge(poses_with, 5); /* the grid meets the instrument at several */
  free(ref);
  ts_tool_contact_free(&tc);
  ts_obb_tree_destroy(tree);
  ts_mesh_free(m);
}
END_TEST

START_TEST(test_coincident_and_bad) {
  ts_tool_contact tc;
  ck_assert_int_eq(ts_tool_contact_init(&tc, 4, 0), 0);
  /* two spheres at one centre: no normal is defined; the force is finite,
   * k (r_a + r_b) along the fallback direction */
  ts_tool t[4] = {sphere(0.005, 0.01, 0.02, 0.03), sphere(0.003, 0.01, 0.02, 0.03),
                  sphere(0.004, 1, 1, 1), sphere(0.004, 2, 2, 2)};
  t[2].active = t[3].active = 0;
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 4), 0);
  ck_assert(finite6(&tc.slot[0]) && finite6(&tc.slot[1]));
  ck_assert_double_eq_tol(norm3(tc.slot[1].force), K * 0.008, 1e-12);
  ck_assert_double_eq_tol(tc.slot[0].force[1], -tc.slot[1].force[1], 1e-18);
  /* two capsules on one segment, two jaws at one pose, a capsule in the
   * jaws: finite */
  ts_tool c = t[0];
  c.kind = TS_TOOL_CAPSULE;
  c.length = 0.02;
  c.radius = 0.002;
  ts_tool j = c;
  j.kind = TS_TOOL_JAWS;
  j.length = 0;
  ts_tool pairs[3][2] = {{c, c}, {j, j}, {j, c}};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(ts_tool_contact_step(&tc, pairs[k], 2), 0);
    ck_assert_uint_eq(tc.pairs, 1);
    ck_assert_msg(finite6(&tc.slot[0]) && finite6(&tc.slot[1]), "pair %d", k);
    ck_assert_msg(norm3(tc.slot[1].force) > 0, "pair %d", k);
  }
  /* two instruments at one pose: every face on its twin */
  ts_mesh *m = load_instrument();
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *tree;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tree), 0);
  ts_tool mm[2];
  memset(mm, 0, sizeof mm);
  for (int k = 0; k < 2; k++) {
    mm[k].kind = TS_TOOL_MESH;
    mm[k].shape = tree;
    mm[k].active = 1;
    mm[k].quat[0] = 1;
  }
  int rc = ts_tool_contact_step(&tc, mm, 2);
  ck_assert(rc == 0);
  ck_assert(finite6(&tc.slot[0]) && finite6(&tc.slot[1]));
  ck_assert_uint_eq(tc.pairs, 1);

  /* a non-finite pose: that tool is left out, the call says why */
  ts_tool bad[2] = {sphere(0.005, 0, 0, 0), sphere(0.005, NAN, 0, 0)};
  ck_assert_int_eq(ts_tool_contact_step(&tc, bad, 2), TS_ENAN);
  ck_assert_uint_eq(tc.pairs, 0);
  ck_assert(tc.slot[0].force[0] == 0 && finite6(&tc.slot[0]));
  /* a mesh tool without its shape */
  mm[1].shape = NULL;
  ck_assert_int_eq(ts_tool_contact_step(&tc, mm, 2), TS_EINVAL);
  /* bad arguments */
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 5), TS_EINVAL);
  ck_assert_int_eq(ts_tool_contact_step(NULL, t, 2), TS_EINVAL);
  ts_tool_contact z;
  ck_assert_int_eq(ts_tool_contact_init(&z, 0, 0), TS_EINVAL);
  ck_assert_int_eq(ts_tool_contact_init(&z, 2, -1), TS_EINVAL);
  ck_assert_int_eq(ts_tool_contact_init(&z, 2, NAN), TS_EINVAL);
  ts_tool_contact_free(&z); /* zeroed by the failed init: safe */
  ts_tool_contact_free(&tc);
  ts_obb_tree_destroy(tree);
  ts_mesh_free(m);
}
END_TEST

START_TEST(test_parked) {
  ts_tool_contact tc;
  ck_assert_int_eq(ts_tool_contact_init(&tc, 3, 0), 0);
  /* two tools taken and parked at one spot: no push while they overlap */
  ts_tool t[3] = {sphere(0.005, 0, 0.05, 0), sphere(0.005, 0, 0.05, 0), sphere(0.005, 0, 0.05, 0)};
  t[2].active = 0;
  ts_tool_contact_park(&tc, 0);
  ts_tool_contact_park(&tc, 1);
  ts_tool_contact_park(&tc, 99); /* out of range: ignored */
  for (int s = 0; s < 3; s++) {
    t[1].pos[0] = 0.002 * s; /* moving apart, still overlapping */
    ck_assert_int_eq(ts_tool_contact_step(&tc, t, 3), 0);
    ck_assert_uint_eq(tc.pairs, 0);
    ck_assert_uint_eq(tc.parked_pairs, 1);
    ck_assert(tc.slot[0].force[0] == 0 && tc.slot[1].force[0] == 0);
  }
  /* apart once, then back into contact: they push as any pair */
  t[1].pos[0] = 0.02;
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 3), 0);
  t[1].pos[0] = 0.009;
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 3), 0);
  ck_assert_uint_eq(tc.pairs, 1);
  ck_assert_double_eq_tol(tc.slot[1].force[0], K * 0.001, 1e-12);
  ts_tool_contact_free(&tc);
}
END_TEST

/* A session's own stiffness (CreateSession.tool_stiffness): the same poses
 * with k1 and k2 give forces and torques in the ratio k2 / k1. Within 1e-12
 * relative: the contacts are the same doubles (same poses, same code), and
 * the penalty k d_max n differs only by the rounding of the product with k
 * (1e-16 relative). Taken on the instrument against a capsule (many
 * contacts, a depth-weighted normal) and on two spheres. */
START_TEST(test_stiffness_ratio) {
  const double k1 = 400, k2 = 7000; /* 0.4 and 7 N/mm, both in the session range */
  ts_mesh *m;
  double lo[3], hi[3];
  ts_obb_tree *tree = instrument_tree(&m, lo, hi);
  ts_tool_contact c1, c2;
  ck_assert_int_eq(ts_tool_contact_init(&c1, 2, k1), 0);
  ck_assert_int_eq(ts_tool_contact_init(&c2, 2, k2), 0);
  ck_assert_double_eq(c1.stiffness, k1);
  ck_assert_double_eq(c2.stiffness, k2);
  uint32_t compared = 0;
  for (int ix = 0; ix < 5; ix++) {
    for (int iz = 0; iz < 5; iz++) {
      ts_tool t[2];
      grid_pose(tree, lo, hi, ix, iz, t);
      ck_assert_int_eq(ts_tool_contact_step(&c1, t, 2), 0);
      ck_assert_int_eq(ts_tool_contact_step(&c2, t, 2), 0);
      ck_assert_uint_eq(c1.contacts, c2.contacts);
      if (!c1.contacts) continue;
      compared++;
      for (int s = 0; s < 2; s++) {
        const double fn = norm3(c2.slot[s].force), tn = norm3(c2.slot[s].torque);
        ck_assert_double_gt(fn, 0);
        for (int a = 0; a < 3; a++) {
          ck_assert_double_eq_tol(c2.slot[s].force[a], c1.slot[s].force[a] * (k2 / k1), 1e-12 * fn);
          ck_assert_double_eq_tol(c2.slot[s].torque[a], c1.slot[s].torque[a] * (k2 / k1),
                                  1e-12 * tn + 1e-300);
        }
      }
    }
  }
  ck_assert_uint_ge(compared, 5);
  /* two spheres 1 mm deep: k times 1 mm exactly as the law says */
  ts_tool t[2] = {sphere(0.005, 0, 0, 0), sphere(0.003, 0.007, 0, 0)};
  ck_assert_int_eq(ts_tool_contact_step(&c1, t, 2), 0);
  ck_assert_int_eq(ts_tool_contact_step(&c2, t, 2), 0);
  ck_assert_double_eq_tol(c1.slot[1].force[0], k1 * 0.001, 1e-12 * k1 * 0.001);
  ck_assert_double_eq_tol(c2.slot[1].force[0], k2 * 0.001, 1e-12 * k2 * 0.001);
  ts_tool_contact_free(&c1);
  ts_tool_contact_free(&c2);
  ts_obb_tree_destroy(tree);
  ts_mesh_free(m);
}
END_TEST

/* The session range (0.1 to 20 N/mm, 0 the default) and what is refused. */
START_TEST(test_stiffness_range) {
  const double ok[] = {0, TS_TOOL_CONTACT_STIFFNESS_MIN, 1000, TS_TOOL_CONTACT_STIFFNESS_MAX};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    ck_assert_int_eq(ts_tool_contact_stiffness_check(ok[i]), 0);
  const double bad[] = {-1, 1e-300, 99.999, 20000.001, 1e9, NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_int_eq(ts_tool_contact_stiffness_check(bad[i]), TS_ERANGE);
  ck_assert_double_eq(TS_TOOL_CONTACT_STIFFNESS_MIN, 100);
  ck_assert_double_eq(TS_TOOL_CONTACT_STIFFNESS_MAX, 20000);
  /* init takes any k > 0, refuses negative and non-finite ones */
  ts_tool_contact tc;
  ck_assert_int_eq(ts_tool_contact_init(&tc, 2, -1), TS_EINVAL);
  ck_assert_int_eq(ts_tool_contact_init(&tc, 2, NAN), TS_EINVAL);
  ck_assert_int_eq(ts_tool_contact_init(&tc, 2, 50), 0);
  ck_assert_double_eq(tc.stiffness, 50);
  ts_tool_contact_free(&tc);
}
END_TEST

/* ToolForce.tool_contacts: three 5 mm spheres in a row, centres 8 mm apart:
 * the middle one touches both ends (2), each end only the middle (1); the
 * ends 16 mm apart do not touch. Moved apart: 0 for all. */
START_TEST(test_touching_count) {
  ts_tool_contact tc;
  ck_assert_int_eq(ts_tool_contact_init(&tc, 3, 0), 0);
  ts_tool t[3] = {sphere(0.005, -0.008, 0, 0), sphere(0.005, 0, 0, 0), sphere(0.005, 0.008, 0, 0)};
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 3), 0);
  ck_assert_uint_eq(tc.pairs, 2);
  ck_assert_uint_eq(tc.slot[0].touching, 1);
  ck_assert_uint_eq(tc.slot[1].touching, 2);
  ck_assert_uint_eq(tc.slot[2].touching, 1);
  /* the middle one is pushed equally from both sides: no net force */
  ck_assert_double_eq_tol(tc.slot[1].force[0], 0, 1e-12);
  t[0].pos[0] = -0.05;
  t[2].pos[0] = 0.05;
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 3), 0);
  for (int i = 0; i < 3; i++) ck_assert_uint_eq(tc.slot[i].touching, 0);
  /* parked together: overlapping but not counted (no push) */
  t[0].pos[0] = t[2].pos[0] = 0;
  ts_tool_contact_park(&tc, 0);
  ts_tool_contact_park(&tc, 1);
  ts_tool_contact_park(&tc, 2);
  ck_assert_int_eq(ts_tool_contact_step(&tc, t, 3), 0);
  ck_assert_uint_eq(tc.parked_pairs, 3);
  for (int i = 0; i < 3; i++) ck_assert_uint_eq(tc.slot[i].touching, 0);
  ts_tool_contact_free(&tc);
}
END_TEST

static Suite *tool_contact_suite(void) {
  Suite *s = suite_create("tool_contact");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_two_spheres);
  tcase_add_test(tc, test_sphere_capsule_torque);
  tcase_add_test(tc, test_penalty_law);
  tcase_add_test(tc, test_mesh_capsule_vs_brute);
  tcase_add_test(tc, test_coincident_and_bad);
  tcase_add_test(tc, test_parked);
  tcase_add_test(tc, test_stiffness_ratio);
  tcase_add_test(tc, test_stiffness_range);
  tcase_add_test(tc, test_touching_count);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(tool_contact_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
