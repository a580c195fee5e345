/*
 * test_ms_mesh_contact.c: the bounded signed distance of a mesh tool
 * (ts_obb_tree_mesh_sdf_within, ts_obb_sdf.c) and the mass-spring contact
 * that uses it (ts_ms_contact.c, issue 5: the node projection's cost scales
 * with the nodes near the tool), against the full query they replace.
 *
 *  - Bounded against full, on random points around the dental instrument
 *    (its real size, open at the handle's end), a closed cube, an open one
 *    and a shallow open tray: for every limit tried, a result other than INFINITY is the
 *    full query's bit for bit (distance and direction), and INFINITY comes
 *    only where the full query's distance is above the limit. Half of the
 *    points are put at the limit from a random surface point (along the
 *    face's normal, within a few ulps of it either way), where an
 *    off-by-margin pruning loses the winner.
 *  - The certificate the pruning rests on (sdf_outside_root: no point
 *    outside the root box has a negative distance, but beyond an open
 *    mesh's rim plane) holds for those meshes on random points outside
 *    their root boxes within the reach; the tray has negative points beyond
 *    its rim plane (why the bounded query is the full one there).
 *  - A mass-spring session with the instrument pressed into the patch,
 *    dragged and lifted, tilted so that its long handle's sphere covers
 *    much of the patch: the positions, previous positions, velocities, the
 *    tool's force, torque and contacts after every step are the same bit
 *    for bit as with the full query (the tree's sdf_outside_root cleared,
 *    which makes the bounded query the full one: the code path before).
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_massspring.h"
#include "ts_mesh.h"
#include "ts_mesh_io.h"
#include "ts_obb_tree.h"
#include "ts_tissue.h"
#include "ts_tool.h"
#include "test_util.h"

static uint64_t rng = 0x5deece66dull;
static double urand(void) { /* xorshift64*, uniform in [0, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static ts_obb_tree *tree_of(const ts_mesh *m) {
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *t = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &t), 0);
  return t;
}

/* The dental instrument at its real size (centimetres in the file). */
static ts_obb_tree *instrument(void) {
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts io = ts_mesh_import_opts_default();
  io.scale = 0.01;
  ts_mesh *m = NULL;
  ck_assert_msg(ts_mesh_import_file(path, TS_MESH_AUTO, &io, &m, NULL, NULL, err, sizeof err) == 0,
                "%s", err);
  ts_obb_tree *t = tree_of(m);
  ts_mesh_free(m);
  return t;
}

/* The box [-h, h]^2 x [-hz, hz], counter-clockwise seen from outside;
 * without the +z face when open (its rim a flat square, the rest below). */
static ts_obb_tree *tray(double h, double hz, int open) {
  static const int V[8][3] = {{-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1},
                              {-1, -1, 1},  {1, -1, 1},  {1, 1, 1},  {-1, 1, 1}};
  static const uint32_t T[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7},
                                    {0, 1, 5}, {0, 5, 4}, {3, 7, 6}, {3, 6, 2},
                                    {0, 4, 7}, {0, 7, 3}, {1, 2, 6}, {1, 6, 5}};
  ts_mesh *m = NULL;
  ck_assert_int_eq(ts_mesh_alloc(8, open ? 10 : 12, &m), 0);
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 3; k++) m->v[i][k] = (k == 2 ? hz : h) * V[i][k];
  uint32_t n = 0;
  for (int f = 0; f < 12; f++)
    if (!open || (f != 2 && f != 3)) memcpy(m->t[n++], T[f], sizeof T[f]);
  ts_obb_tree *t = tree_of(m);
  ts_mesh_free(m);
  return t;
}

/* A point at about distance lim from a random point of a random triangle,
 * off its front or back side (random), moved by up to 4 ulps of lim. */
static void near_limit(const ts_obb_tree *t, double lim, double p[3]) {
  const uint32_t f = (uint32_t)(urand() * t->n_tris) % t->n_tris;
  double a = urand(), b = urand();
  if (a + b > 1) a = 1 - a, b = 1 - b;
  const double *v0 = t->v[t->t[f][0]], *v1 = t->v[t->t[f][1]], *v2 = t->v[t->t[f][2]];
  const double side = urand() < 0.5 ? 1.0 : -1.0;
  double d = lim + (urand() * 8.0 - 4.0) * 2.220446049250313e-16 * lim;
  for (int k = 0; k < 3; k++)
    p[k] = v0[k] + a * (v1[k] - v0[k]) + b * (v2[k] - v0[k]) + side * d * t->fnorm[f][k];
}

/* A point in the root box grown by g, uniformly. */
static void around(const ts_obb_tree *t, double g, double p[3]) {
  const ts_obb *b = &t->nodes[0].box;
  double u[3];
  for (int a = 0; a < 3; a++) u[a] = (2 * urand() - 1) * (b->e[a] + g);
  for (int k = 0; k < 3; k++) p[k] = b->c[k] + u[0] * b->r[0][k] + u[1] * b->r[1][k] + u[2] * b->r[2][k];
}

/* Bounded against full on n points for the limits lims (m): returns the
 * results that were exact and outside the root box (the pruned descent's),
 * and counts those that were INFINITY in *far. */
static long check_within(const ts_obb_tree *t, const char *name, int n, const double *lims,
                         int nl, long *far) {
  long pruned_exact = 0;
  *far = 0;
  for (int i = 0; i < n; i++) {
    const double lim = lims[i % nl];
    double p[3];
    if (i % 2)
      near_limit(t, lim, p);
    else
      around(t, 20 * lim + 0.3 * t->reach * urand(), p);
    double nf[3], nw[3] = {7, 7, 7};
    const double sf = ts_obb_tree_mesh_sdf(t, p, nf);
    const double sw = ts_obb_tree_mesh_sdf_within(t, p, lim, nw);
    if (sw == INFINITY) {
      ck_assert_msg(sf > lim, "%s: point %d (%.17g %.17g %.17g), limit %.17g: bounded says farther, "
                    "full %.17g", name, i, p[0], p[1], p[2], lim, sf);
      ck_assert(nw[0] == 7 && nw[1] == 7 && nw[2] == 7); /* n not written */
      (*far)++;
      continue;
    }
    ck_assert_msg(memcmp(&sw, &sf, sizeof sf) == 0 && memcmp(nw, nf, sizeof nf) == 0,
                  "%s: point %d, limit %.17g: bounded %.17g, full %.17g", name, i, lim, sw, sf);
    const ts_obb *b = &t->nodes[0].box;
    double o = 0;
    for (int a = 0; a < 3; a++) {
      double s = 0;
      for (int k = 0; k < 3; k++) s += (p[k] - b->c[k]) * b->r[a][k];
      o = fmax(o, fabs(s) - b->e[a]);
    }
    pruned_exact += o > 0;
  }
  return pruned_exact;
}

/* Random points outside the root box, within `reach` of it: the full
 * query's distance is positive at every one but beyond an open mesh's rim
 * plane (the certificate). Returns the negative ones beyond it. */
static int check_outside(const ts_obb_tree *t, const char *name, int n, double reach) {
  const ts_obb *b = &t->nodes[0].box;
  const double *q = t->sdf_open_plane;
  int got = 0, beyond_neg = 0;
  for (int i = 0; got < n && i < 100 * n; i++) {
    double p[3];
    around(t, reach, p);
    int out = 0;
    for (int a = 0; a < 3 && !out; a++) {
      double s = 0;
      for (int k = 0; k < 3; k++) s += (p[k] - b->c[k]) * b->r[a][k];
      out = fabs(s) > b->e[a];
    }
    if (!out) continue;
    got++;
    const double sf = ts_obb_tree_mesh_sdf(t, p, NULL);
    if (p[0] * q[0] + p[1] * q[1] + p[2] * q[2] > q[3]) {
      beyond_neg += sf < 0;
      continue;
    }
    ck_assert_msg(sf > 0, "%s: (%.9g %.9g %.9g) outside the root box at %.9g", name, p[0], p[1],
                  p[2], sf);
  }
  ck_assert_int_eq(got, n);
  return beyond_neg;
}

START_TEST(test_within_matches_full) {
  ts_obb_tree *ti = instrument(), *tc = tray(0.005, 0.005, 0), *to = tray(0.005, 0.005, 1);
  /* a shallow open tray: beyond its opening, points whose closest point is
   * on the bottom count as inside, outside the root box */
  ts_obb_tree *tt = tray(0.005, 0.0005, 1);
  /* the mass-spring skins (1e-4 of the reach), 0, and wider bounds */
  const double li[] = {1e-4 * ti->reach, 0.0, 1e-5, 2e-4, 1e-3};
  const double lc[] = {1e-4 * tc->reach, 0.0, 1e-5, 2e-4, 1e-3};
  const double lt[] = {1e-4 * tt->reach, 0.0, 1e-5, 2e-4, 1e-3};
  struct {
    const ts_obb_tree *t;
    const char *name;
    const double *lims;
  } m[4] = {{ti, "instrument", li}, {tc, "closed cube", lc}, {to, "open cube", lc},
            {tt, "shallow open tray", lt}};
  const int n = TU_ITERS(40000, 8000);
  for (int j = 0; j < 4; j++) {
    ck_assert_msg(m[j].t->sdf_outside_root, "%s: no certificate", m[j].name);
    long far = 0;
    const long exact_out = check_within(m[j].t, m[j].name, n, m[j].lims, 5, &far);
    const int neg = check_outside(m[j].t, m[j].name, TU_ITERS(20000, 4000), m[j].t->reach);
    printf("%s: %d points, %ld farther than the limit (INFINITY), %ld outside the root box "
           "within it, bit for bit as the full query; %d negative beyond the rim's plane\n",
           m[j].name, n, far, exact_out, neg);
    /* both outcomes of the pruned descent are exercised */
    ck_assert_int_ge(far, n / 10);
    ck_assert_int_ge(exact_out, n / 20);
    if (j == 3) ck_assert_int_ge(neg, 10); /* the exclusion beyond the rim's plane matters */
  }
  ts_obb_tree_destroy(ti);
  ts_obb_tree_destroy(tc);
  ts_obb_tree_destroy(to);
  ts_obb_tree_destroy(tt);
}
END_TEST

/* A mesh whose rim is not flat (the cube without one triangle of its +z
 * face and one of its -x face) gets no certificate, and its bounded query
 * is the full one everywhere. */
START_TEST(test_within_uncertified) {
  static const int V[8][3] = {{-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1},
                              {-1, -1, 1},  {1, -1, 1},  {1, 1, 1},  {-1, 1, 1}};
  static const uint32_t T[10][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {0, 1, 5}, {0, 5, 4},
                                    {3, 7, 6}, {3, 6, 2}, {0, 4, 7}, {1, 2, 6}, {1, 6, 5}};
  ts_mesh *m = NULL;
  ck_assert_int_eq(ts_mesh_alloc(8, 10, &m), 0);
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 3; k++) m->v[i][k] = 0.005 * V[i][k];
  memcpy(m->t, T, sizeof T);
  ts_obb_tree *t = tree_of(m);
  ts_mesh_free(m);
  ck_assert_int_eq(t->sdf_outside_root, 0);
  for (int i = 0; i < 2000; i++) {
    double p[3], nf[3], nw[3];
    around(t, 0.01, p);
    const double sf = ts_obb_tree_mesh_sdf(t, p, nf), sw = ts_obb_tree_mesh_sdf_within(t, p, 1e-6, nw);
    ck_assert(memcmp(&sf, &sw, sizeof sf) == 0 && memcmp(nf, nw, sizeof nf) == 0);
  }
  ts_obb_tree_destroy(t);
}
END_TEST

/* The instrument on a path over a 40 mm patch with 24 nodes a side (1.7 mm
 * spacing: its 2.6 mm spatula meets nodes, not only triangles), tip down
 * and tilted 0.5 rad about z so that the handle leans over the patch:
 * 20 ms settling 3 mm above, 30 ms down to 2.5 mm below the surface,
 * 30 ms dragged 6 mm along x, 20 ms up. Friction on. Runs the path with
 * the certificate (the bounded query) and without it (the full query),
 * each step compared. */
#define PATH_STEPS 100
static void run_path(int bounded, double (*xs)[3], double (*ps)[3], double (*vs)[3],
                     double fs[][7], uint32_t *nn_out, uint32_t *projected) {
  ts_obb_tree *tr = instrument();
  tr->sdf_outside_root = bounded ? tr->sdf_outside_root : 0;
  double tipz = -INFINITY;
  for (uint32_t i = 0; i < tr->n_verts; i++) tipz = fmax(tipz, tr->v[i][2]);
  ts_patch_def pd = ts_default_patch_def();
  pd.size = 0.04;
  pd.resolution = 24;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &t), 0);
  double top = -INFINITY;
  for (uint32_t i = 0; i < t->n_nodes; i++) top = fmax(top, t->x[i][1]);
  /* q = turn about z by 0.5 rad after the tip-down turn (local z onto -y) */
  const double a = 0.25, q0[4] = {sqrt(0.5), sqrt(0.5), 0, 0}, q1[4] = {cos(a), 0, 0, sin(a)};
  ts_tool tool;
  memset(&tool, 0, sizeof tool);
  tool.kind = TS_TOOL_MESH;
  tool.shape = tr;
  tool.active = 1;
  tool.mu_static = 0.4;
  tool.mu_kinetic = 0.3;
  tool.quat[0] = q1[0] * q0[0] - q1[1] * q0[1] - q1[2] * q0[2] - q1[3] * q0[3];
  tool.quat[1] = q1[0] * q0[1] + q1[1] * q0[0] + q1[2] * q0[3] - q1[3] * q0[2];
  tool.quat[2] = q1[0] * q0[2] - q1[1] * q0[3] + q1[2] * q0[0] + q1[3] * q0[1];
  tool.quat[3] = q1[0] * q0[3] + q1[1] * q0[2] - q1[2] * q0[1] + q1[3] * q0[0];
  double R[3][3];
  ts_quat_to_mat(tool.quat, R);
  const uint32_t n = t->n_nodes;
  *nn_out = n;
  *projected = 0;
  for (int s = 0; s < PATH_STEPS; s++) {
    double tip[3] = {-0.003, top + 0.003, 0.001};
    if (s >= 20) tip[1] -= 0.0055 * fmin(1.0, (s - 20) / 30.0);
    if (s >= 50) tip[0] += 0.006 * fmin(1.0, (s - 50) / 30.0);
    if (s >= 80) tip[1] += 0.0055 * (s - 80) / 20.0;
    /* the tool's origin: the tip (local (0, 0, tipz)) on the path */
    for (int k = 0; k < 3; k++) tool.pos[k] = tip[k] - R[k][2] * tipz;
    ck_assert_int_eq(ts_massspring_step(t, 1e-3, &tool, 1, NULL), 0);
    memcpy(xs + (size_t)s * n, t->x, sizeof *xs * n);
    memcpy(ps + (size_t)s * n, t->x_prev, sizeof *ps * n);
    memcpy(vs + (size_t)s * n, t->v, sizeof *vs * n);
    memcpy(fs[s], tool.force, sizeof tool.force);
    memcpy(fs[s] + 3, tool.torque, sizeof tool.torque);
    fs[s][6] = tool.contacts;
    *projected += tool.contacts;
  }
  ts_tissue_destroy(t);
  ts_obb_tree_destroy(tr);
}

START_TEST(test_ms_path_bit_for_bit) {
  const uint32_t nmax = 24 * 24 * 4;
  double(*x[2])[3], (*p[2])[3], (*v[2])[3], (*f[2])[7];
  uint32_t n[2], hits[2];
  for (int b = 0; b < 2; b++) {
    x[b] = malloc(sizeof(double[3]) * nmax * PATH_STEPS);
    p[b] = malloc(sizeof(double[3]) * nmax * PATH_STEPS);
    v[b] = malloc(sizeof(double[3]) * nmax * PATH_STEPS);
    f[b] = malloc(sizeof(double[7]) * PATH_STEPS);
    ck_assert(x[b] && p[b] && v[b] && f[b]);
  }
  run_path(0, x[0], p[0], v[0], f[0], &n[0], &hits[0]);
  ck_assert_uint_le(n[0], nmax);
  run_path(1, x[1], p[1], v[1], f[1], &n[1], &hits[1]);
  ck_assert_uint_eq(n[0], n[1]);
  printf("instrument path, mass-spring: %u nodes, %d steps, %u node-steps in contact\n", n[0],
         PATH_STEPS, hits[0]);
  for (int s = 0; s < PATH_STEPS; s++) {
    const size_t o = (size_t)s * n[0], sz = sizeof(double[3]) * n[0];
    ck_assert_msg(memcmp(x[0] + o, x[1] + o, sz) == 0, "step %d: positions differ", s);
    ck_assert_msg(memcmp(p[0] + o, p[1] + o, sz) == 0, "step %d: previous positions differ", s);
    ck_assert_msg(memcmp(v[0] + o, v[1] + o, sz) == 0, "step %d: velocities differ", s);
    ck_assert_msg(memcmp(f[0][s], f[1][s], sizeof f[0][s]) == 0,
                  "step %d: force (%.17g %.17g %.17g) contacts %g against (%.17g %.17g %.17g) %g", s,
                  f[0][s][0], f[0][s][1], f[0][s][2], f[0][s][6], f[1][s][0], f[1][s][1],
                  f[1][s][2], f[1][s][6]);
  }
  ck_assert_uint_ge(hits[0], 200); /* the path touches: nodes are projected and held */
  for (int b = 0; b < 2; b++) {
    free(x[b]);
    free(p[b]);
    free(v[b]);
    free(f[b]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("ms_mesh_contact");
  TCase *tc = tcase_create("ms_mesh_contact");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_within_matches_full);
  tcase_add_test(tc, test_within_uncertified);
  tcase_add_test(tc, test_ms_path_bit_for_bit);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
