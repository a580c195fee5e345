/*
 * test_contact_descent.c: the live contact's candidates by the method's
 * descent (ts_collide_tissue_tris*, issue 5: root boxes, OBB x AABB down to
 * leaf pairs) against the former candidates, the triangles whose fat leaf
 * boxes meet the tool's swept root box (ts_contact_def.box_candidates, kept
 * as this reference), on the standard tool path (tests/bench/bench_path.h:
 * approach, press 8 mm, drag) over patch-S and the liver, for every tool
 * kind: the 5 mm sphere of the path, a 1 mm capsule (thinner than the
 * triangles: the triangle pass acts), the grasper jaws and the dental
 * instrument (mesh: vertex and thin triangle passes, swept).
 *
 * Each step starts both responses (ts_contact_begin + ts_contact_project)
 * from the same positions and compares what they did: the same vertices
 * touching, the same positions within 1e-12 m and the same reaction force
 * within 1e-9 of its size. Why 1e-12 m: the descent lists the triangles
 * in the order the root box's query did, so the two responses do the same
 * arithmetic and agree to the bit (largest difference 0 m on every path
 * here); the bound leaves room for rounding should the order ever differ
 * harmlessly, while a candidate the descent missed leaves a vertex inside
 * the tool by up to the tool's press, millimetres. The order matters: with
 * the triangles in ascending index order instead, the triangle passes,
 * which move shared corners one triangle after another, made patch-S's
 * sphere differ at t = 4.83 s (a vertex touching by one and not the
 * other) and the liver's at t = 4.76 s (43 against 44 touching), and this
 * test failed. The
 * positions then go on from the reference's result, so the tool ploughs
 * the surface as it would in a session.
 *
 * The mass-spring step's triangle pass (ts__ms_thin_pass) for the instrument
 * and the capsule is compared likewise: through the descent (use_tree 1)
 * against the scan of every surface triangle (use_tree 0): bitwise the same
 * positions and marks.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench_path.c"
#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_contact.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_mesh_io.h"
#include "ts_ms_internal.h"
#include "ts_obb_tree.h"
#include "ts_tissue.h"

#define POS_TOL 1e-12   /* m: see the top */
#define FORCE_TOL 1e-9  /* of the force's size */
#define STRIDE 0.008    /* s between the compared steps along the path */
#define T0 0.9          /* s: the path from just before the touch ... */
/* s: ... through the press into the drag. A sanitizer build (memory and
 * undefined behaviour, not the figures) stops at 1.7 s, the touch and the
 * first 2.4 mm of the press: the same steps as the normal build's first
 * 99, so what holds there holds here, at a fifth of the time (413 s
 * under ASan for the whole window, CI's slowest test). The drag, where
 * the triangles' order decides (see the top), runs in the normal build. */
#ifdef TS_TEST_SANITIZED
#define T1 1.7
#else
#define T1 4.5
#endif

/* ---- fixtures (as tests/bench/bench_scenario.c builds them) ---- */

static ts_tissue *patch_s(void) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

static ts_tissue *liver(void) {
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
  ck_assert_int_eq(ts_tissue_build(ex, layers, NULL, pd.gravity, &t), 0);
  ts_extrusion_free(ex);
  ts_mesh_free(mesh);
  return t;
}

static ts_mesh *instrument(void) {
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = TS_BENCH_INSTRUMENT_SCALE;
  ts_mesh *m = NULL;
  int rc = ts_mesh_read_file(path, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", path, err);
  return m;
}

/* The path over the tissue's highest outer-sheet node, down along -y,
 * dragged along +x (bench_scenario.c's place_path). */
static void path_on(const ts_tissue *t, ts_bench_path *p) {
  uint32_t n = t->nodes_per_sheet ? t->nodes_per_sheet : t->n_nodes, top = 0;
  for (uint32_t i = 1; i < n; i++)
    if (t->rest[i][1] > t->rest[top][1]) top = i;
  const double up[3] = {0, 1, 0}, along[3] = {1, 0, 0};
  ck_assert_int_eq(ts_bench_path_init(p, t->rest[top], up, along), 0);
}

enum { SPHERE, CAPSULE, JAWS, MESH, N_KINDS };
static const char *kind_name[N_KINDS] = {"sphere", "capsule", "jaws", "mesh"};

static ts_obb_tree *tool_tree(int kind, const ts_mesh *m) {
  ts_tool_shape_def d = ts_default_tool_shape_def();
  switch (kind) {
  case SPHERE:
    d.kind = TS_SHAPE_SPHERE;
    d.radius = TS_BENCH_SPHERE_RADIUS;
    break;
  case CAPSULE:
    d.kind = TS_SHAPE_CAPSULE;
    d.radius = 0.5e-3; /* 1 mm thick: slips between patch-S's 1.6 mm nodes but for the pass */
    d.length = 0.02;
    break;
  case JAWS:
    d.kind = TS_SHAPE_JAWS;
    break;
  default:
    d.kind = TS_SHAPE_MESH;
    d.mesh = m;
    break;
  }
  ts_obb_tree *tr = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tr), 0);
  return tr;
}

/* The tool's pose at time s of the path: the instrument as the benchmarks
 * hold it; the others with the tip (their frame's origin) at the path's
 * tip, local +y (towards the handle) along the outward normal, a sphere
 * raised by its radius; the jaws half open. */
static ts_pose pose_at(int kind, const ts_bench_path *p, double s, const double tip_local[3],
                       double radius) {
  ts_pose ps;
  memset(&ps, 0, sizeof ps);
  if (kind == MESH) {
    double R[3][3];
    ts_bench_path_instrument_pose(p, s, tip_local, 1.0, R, ps.p);
    ts_bench_path_instrument_quat(p, ps.q);
    return ps;
  }
  ts_tool sp;
  ts_bench_path_sphere(p, s, radius, &sp);
  memcpy(ps.q, sp.quat, sizeof ps.q);
  double tip[3];
  ts_bench_path_tip(p, s, tip);
  for (int k = 0; k < 3; k++) ps.p[k] = kind == SPHERE ? sp.pos[k] : tip[k];
  ps.jaw = kind == JAWS ? 0.5 : 0;
  return ps;
}

/* ---- the comparison ---- */

typedef struct tally {
  uint64_t steps, cand_box, cand_descent, tri_box, tri_descent, touching, tri_hits;
  double max_dx;
} tally;

static void compare_path(ts_tissue *t, int kind, const ts_mesh *m, const char *scen, tally *ty) {
  ts_bench_path path;
  path_on(t, &path);
  ts_obb_tree *tr = tool_tree(kind, m);
  ts_posed_tool pb, pd;
  ck_assert_int_eq(ts_posed_tool_init(&pb, tr), 0);
  ck_assert_int_eq(ts_posed_tool_init(&pd, tr), 0);
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  const uint32_t nn = t->n_nodes, ntri = ts_tissue_n_contact_tris(t);
  ts_contact_def cb = ts_default_contact_def(), cd = cb;
  cb.box_candidates = 1;
  ts_contact_ws wb, wd;
  ck_assert_int_eq(ts_contact_ws_init(&wb, &cb, nn, nn, ntri), 0);
  ck_assert_int_eq(ts_contact_ws_init(&wd, &cd, nn, nn, ntri), 0);
  double (*x)[3] = malloc(sizeof *x * nn), (*xb)[3] = malloc(sizeof *xb * nn);
  double (*xd)[3] = malloc(sizeof *xd * nn);
  int8_t *tb = calloc(nn, 1), *td = calloc(nn, 1);
  ck_assert(x && xb && xd && tb && td);
  memcpy(x, t->x, sizeof *x * nn);
  double tip_local[3] = {0, 0, 0};
  if (kind == MESH) ck_assert_int_eq(ts_bench_instrument_tip(m, tip_local), 0);
  memset(ty, 0, sizeof *ty);
  ts_pose prev = pose_at(kind, &path, T0, tip_local, TS_BENCH_SPHERE_RADIUS);
  for (double s = T0 + STRIDE; s < T1; s += STRIDE) {
    const ts_pose to = pose_at(kind, &path, s, tip_local, TS_BENCH_SPHERE_RADIUS);
    ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])x), 0);
    memcpy(xb, x, sizeof *x * nn);
    memcpy(xd, x, sizeof *x * nn);
    int rb = ts_contact_begin(&wb, &pb, &prev, &to, tree, t->inv_mass, NULL);
    int rd = ts_contact_begin(&wd, &pd, &prev, &to, tree, t->inv_mass, NULL);
    ck_assert_int_eq(rb, 0);
    ck_assert_int_eq(rd, 0);
    ty->cand_box += wb.n, ty->cand_descent += wd.n;
    ty->tri_box += wb.n_tris, ty->tri_descent += wd.n_tris;
    /* the sweep first, then a second projection as the solver's later sweeps */
    for (int sw = 0; sw < 2; sw++) {
      const int mode = sw ? TS_CONTACT_SWEEP_THIN : TS_CONTACT_SWEEP;
      int nb = ts_contact_project(&wb, &pb, xb, (const double (*)[3])x, t->inv_mass, mode);
      int nd = ts_contact_project(&wd, &pd, xd, (const double (*)[3])x, t->inv_mass, mode);
      ck_assert_msg(nb == nd, "%s %s t=%.3f pass %d: %d touching by the box, %d by the descent",
                    scen, kind_name[kind], s, sw, nb, nd);
      ck_assert_uint_eq(wb.tri_hits, wd.tri_hits);
    }
    memset(tb, 0, nn);
    memset(td, 0, nn);
    for (uint32_t j = 0; j < wb.n; j++) tb[wb.v[j].node] = (int8_t)wb.v[j].touching;
    for (uint32_t j = 0; j < wd.n; j++) td[wd.v[j].node] = (int8_t)wd.v[j].touching;
    /* plain checks per node and one assertion for the first node that
     * fails: each of Check's assertions that passes writes its location
     * to the runner's file (a system call, which the runner reads back),
     * and the two per node and step were most of this test's time (one
     * case's file grew to 483 MB in a sanitizer build's 99 steps a kind;
     * the test took 93 s of CPU there, now 10 s) */
    uint32_t bad_touch = UINT32_MAX, bad_pos = UINT32_MAX;
    double bad_d = 0;
    for (uint32_t i = 0; i < nn; i++) {
      if (tb[i] != td[i] && bad_touch == UINT32_MAX) bad_touch = i;
      double d2 = 0;
      for (int k = 0; k < 3; k++) d2 += (xb[i][k] - xd[i][k]) * (xb[i][k] - xd[i][k]);
      const double d = sqrt(d2);
      if (d > ty->max_dx) ty->max_dx = d;
      if (!(d <= POS_TOL) && bad_pos == UINT32_MAX) bad_pos = i, bad_d = d;
      ty->touching += tb[i] != 0;
    }
    ck_assert_msg(bad_touch == UINT32_MAX,
                  "%s %s t=%.3f: node %u touching %d by the box, %d by the descent", scen,
                  kind_name[kind], s, bad_touch, bad_touch < nn ? tb[bad_touch] : 0,
                  bad_touch < nn ? td[bad_touch] : 0);
    ck_assert_msg(bad_pos == UINT32_MAX, "%s %s t=%.3f: node %u differs by %.3g m", scen,
                  kind_name[kind], s, bad_pos, bad_d);
    double fb[3], fd[3];
    ts_contact_reaction(&wb, (const double (*)[3])xb, 1.0, fb, NULL);
    ts_contact_reaction(&wd, (const double (*)[3])xd, 1.0, fd, NULL);
    const double fs = sqrt(fb[0] * fb[0] + fb[1] * fb[1] + fb[2] * fb[2]);
    for (int k = 0; k < 3; k++) ck_assert_double_le(fabs(fb[k] - fd[k]), FORCE_TOL * fs + 1e-300);
    ty->tri_hits += wb.tri_hits;
    ty->steps++;
    memcpy(x, xb, sizeof *x * nn); /* on from the reference's result */
    prev = to;
  }
  fprintf(stderr,
          "%s %s: %llu steps, mean candidates %.1f (descent) vs %.1f (root box), triangles %.1f vs "
          "%.1f, mean touching %.1f, triangle pushes %llu, largest difference %.2g m\n",
          scen, kind_name[kind], (unsigned long long)ty->steps, (double)ty->cand_descent / ty->steps,
          (double)ty->cand_box / ty->steps, (double)ty->tri_descent / ty->steps,
          (double)ty->tri_box / ty->steps, (double)ty->touching / ty->steps,
          (unsigned long long)ty->tri_hits, ty->max_dx);
  free(x), free(xb), free(xd), free(tb), free(td);
  ts_contact_ws_free(&wb);
  ts_contact_ws_free(&wd);
  ts_aabb_tree_destroy(tree);
  ts_posed_tool_free(&pb);
  ts_posed_tool_free(&pd);
  ts_obb_tree_destroy(tr);
}

static void compare_all(ts_tissue *t, const char *scen) {
  ts_mesh *m = instrument();
  for (int kind = 0; kind < N_KINDS; kind++) {
    tally ty;
    compare_path(t, kind, m, scen, &ty);
    /* the path reaches the tissue: the comparison is not of empty sets */
    ck_assert_msg(ty.touching > 0, "%s %s: no contact on the path", scen, kind_name[kind]);
    /* the jaws' and the instrument's trees have boxes below the root, and
     * the descent through them leaves out triangles the root box reaches
     * (a descent that stopped at the root would not); a sphere's or
     * capsule's tree is its root, and the mid pose grown by half the
     * travel may take a few more (liver sphere: 205.2 against 204.6) */
    if (kind == JAWS || kind == MESH) ck_assert_uint_lt(ty.tri_descent, ty.tri_box);
  }
  ts_mesh_free(m);
}

START_TEST(test_descent_patch_s) {
  ts_tissue *t = patch_s();
  compare_all(t, "patch-S");
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_descent_liver) {
  ts_tissue *t = liver();
  compare_all(t, "liver");
  ts_tissue_destroy(t);
}
END_TEST

/* ---- the mass-spring triangle pass: descent against the scan ---- */

static void compare_ms_thin(ts_tissue *t, const char *scen) {
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  ts_mesh *m = instrument();
  ts_obb_tree *itree = tool_tree(MESH, m);
  ts_bench_path path;
  path_on(t, &path);
  double tip_local[3];
  ck_assert_int_eq(ts_bench_instrument_tip(m, tip_local), 0);
  const uint32_t nn = t->n_nodes;
  double (*x)[3] = malloc(sizeof *x * nn), (*xs)[3] = malloc(sizeof *xs * nn);
  ck_assert(x && xs);
  memcpy(x, t->x, sizeof *x * nn);
  uint64_t marked = 0, steps = 0;
  for (int kind = CAPSULE; kind <= MESH; kind += MESH - CAPSULE) {
    for (double s = T0; s < T1; s += STRIDE) {
      ts_tool tl;
      memset(&tl, 0, sizeof tl);
      tl.active = 1;
      const ts_pose ps = pose_at(kind, &path, s, tip_local, 0);
      memcpy(tl.pos, ps.p, sizeof tl.pos);
      memcpy(tl.quat, ps.q, sizeof tl.quat);
      if (kind == MESH) {
        tl.kind = TS_TOOL_MESH;
        tl.shape = itree;
      } else {
        tl.kind = TS_TOOL_CAPSULE;
        tl.radius = 0.5e-3;
        tl.length = 0.02;
      }
      ts__ptool mp;
      ts__ms_prepare_tool(&mp, &tl);
      const double (*R)[3] = (const double (*)[3])mp.R;
      memcpy(t->x, x, sizeof *x * nn);
      const uint32_t ns = ts__ms_thin_pass(t, t->ms, &mp, R, tl.pos, 0, 1, 0);
      ts__ms_clear_contacts(t->ms);
      memcpy(xs, t->x, sizeof *xs * nn);
      memcpy(t->x, x, sizeof *x * nn);
      const uint32_t nd = ts__ms_thin_pass(t, t->ms, &mp, R, tl.pos, 0, 1, 1);
      ts__ms_clear_contacts(t->ms);
      ck_assert_uint_eq(ns, nd);
      ck_assert_msg(memcmp(xs, t->x, sizeof *xs * nn) == 0, "%s %s t=%.3f: the passes differ",
                    scen, kind_name[kind], s);
      marked += nd;
      steps++;
      memcpy(x, t->x, sizeof *x * nn);
    }
  }
  fprintf(stderr, "%s ms thin pass: %llu steps, %llu corners marked, descent = scan\n", scen,
          (unsigned long long)steps, (unsigned long long)marked);
  ck_assert_uint_gt(marked, 0); /* the pass acted on the path */
  free(x), free(xs);
  ts_obb_tree_destroy(itree);
  ts_mesh_free(m);
}

START_TEST(test_ms_thin_patch_s) {
  ts_tissue *t = patch_s();
  compare_ms_thin(t, "patch-S");
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_ms_thin_liver) {
  ts_tissue *t = liver();
  compare_ms_thin(t, "liver");
  ts_tissue_destroy(t);
}
END_TEST

/* ---- the query itself ---- */

static int cmp_u32(const void *a, const void *b) {
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Bad arguments give no candidates, not a crash; the box form agrees with
 * the posed form for a one-box tool. */
START_TEST(test_args) {
  ts_tissue *t = patch_s();
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  uint32_t out[4096];
  ts_obb_tree *tr = tool_tree(SPHERE, NULL);
  ts_posed_tool pt;
  ck_assert_int_eq(ts_posed_tool_init(&pt, tr), 0);
  ck_assert_uint_eq(ts_collide_tissue_tris(NULL, tree, NULL, 0, out, 4096, NULL), 0);
  ck_assert_uint_eq(ts_collide_tissue_tris(&pt, NULL, NULL, 0, out, 4096, NULL), 0);
  ck_assert_uint_eq(ts_collide_tissue_tris(&pt, tree, NULL, -1, out, 4096, NULL), 0);
  ck_assert_uint_eq(ts_collide_tissue_tris(&pt, tree, NULL, NAN, out, 4096, NULL), 0);
  ck_assert_uint_eq(ts_collide_tissue_tris_box(NULL, tree, NULL, 0, out, 4096, NULL), 0);
  ck_assert_uint_eq(ts_collide_tissue_tris_frame(NULL, NULL, NULL, tree, NULL, 0, out, 4096, NULL),
                    0);
  /* the sphere pressed 2 mm into the top: its one box, posed or given */
  ts_bench_path path;
  path_on(t, &path);
  ts_pose ps = pose_at(SPHERE, &path, 2.0, NULL, TS_BENCH_SPHERE_RADIUS);
  ck_assert_int_eq(ts_posed_tool_set_pose(&pt, &ps), 0);
  const double (*x)[3] = (const double (*)[3])t->x;
  uint32_t a = ts_collide_tissue_tris(&pt, tree, x, 1e-4, out, 4096, NULL);
  ck_assert_uint_gt(a, 0);
  ck_assert_uint_le(a, 4096);
  uint32_t *o2 = malloc(sizeof *o2 * 4096);
  uint32_t b = ts_collide_tissue_tris_box(ts_posed_tool_box(&pt, 0), tree, x, 1e-4, o2, 4096, NULL);
  ck_assert_uint_eq(a, b);
  /* the box form ascending, each once; the posed one the same set in the
   * tree's order */
  for (uint32_t i = 1; i < b; i++) ck_assert_uint_lt(o2[i - 1], o2[i]);
  qsort(out, a, sizeof *out, cmp_u32);
  ck_assert_int_eq(memcmp(out, o2, sizeof *out * a), 0);
  /* a buffer too small: the count says so, what is stored is distinct */
  uint32_t c = ts_collide_tissue_tris(&pt, tree, x, 1e-4, o2, 3, NULL);
  ck_assert_uint_ge(c, 4);
  ck_assert(o2[0] != o2[1] && o2[1] != o2[2] && o2[0] != o2[2]);
  free(o2);
  ts_posed_tool_free(&pt);
  ts_obb_tree_destroy(tr);
  ts_aabb_tree_destroy(tree);
  ts_tissue_destroy(t);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("contact_descent");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600); /* a loaded machine: 11 min of wall clock for 1 min of CPU seen */
  tcase_add_test(tc, test_args);
  tcase_add_test(tc, test_descent_patch_s);
  tcase_add_test(tc, test_descent_liver);
  tcase_add_test(tc, test_ms_thin_patch_s);
  tcase_add_test(tc, test_ms_thin_liver);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
