/*
 * test_refine_rebuild.c: Check suite for the refinement's local spring
 * rebuild (ts_refine_springs.c): after a refinement only the springs with
 * an end on a changed vertex are computed, the rest are copied from the
 * old tissue, and the result must be the whole build's (ts_tissue_build on
 * the refined extrusion, TS_REFINE_REBUILD_FULL) exactly.
 *
 * Cases: the default patch refined by Loop and by longest-edge bisection on
 * a region at its centre and on one touching its anchored rim; Loop with
 * its smoothing rules on the rest shape (old vertices move); a tissue
 * refined twice (each chain local or whole throughout); the liver. Each
 * compares, bit for bit (no tolerance: the local path runs the builder's own
 * arithmetic on the same numbers in the same order, so any difference is a
 * bug):
 *   - the tissues: every spring field in order, render and contact
 *     triangles, rest positions, inverse masses, columns, layers;
 *   - XPBD built on each (bending and volume constraints on): every
 *     distance, bending and volume constraint in sweep order;
 *   - one mass-spring step and one XPBD step from the refined state:
 *     positions and velocities.
 * and that the local path was taken and computed fewer springs than there
 * are. The ring taken one prism too narrow (TS_REFINE_REBUILD_NARROW: only
 * the changed prisms) must give different springs: that is what shows the
 * comparison can fail.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_mesh_io.h"
#include "ts_refine.h"
#include "ts_tissue.h"
#include "ts_xpbd.h"
#include "ts_xpbd_internal.h"

#define DT 1e-3

/* Bitwise equality of two doubles (NaN-safe, -0 != +0). */
static int same(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Index of the first spring that differs in any field, or UINT32_MAX. */
static uint32_t first_spring_diff(const ts_tissue *a, const ts_tissue *b) {
  if (a->n_springs != b->n_springs) return 0;
  for (uint32_t i = 0; i < a->n_springs; i++) {
    const ts_spring *p = &a->springs[i], *q = &b->springs[i];
    if (p->a != q->a || p->b != q->b || p->kind != q->kind || p->layer != q->layer || !same(p->rest, q->rest) ||
        !same(p->k, q->k) || !same(p->k1, q->k1) || !same(p->b1, q->b1) || !same(p->k2, q->k2) ||
        !same(p->b2, q->b2) || !same(p->c, q->c) || !same(p->strain_min, q->strain_min) ||
        !same(p->strain_max, q->strain_max))
      return i;
  }
  return UINT32_MAX;
}

static void assert_same_tissue(const ts_tissue *a, const ts_tissue *b, const char *what) {
  ck_assert_uint_eq(a->n_nodes, b->n_nodes);
  ck_assert_uint_eq(a->n_springs, b->n_springs);
  ck_assert_uint_eq(a->n_tris, b->n_tris);
  uint32_t d = first_spring_diff(a, b);
  ck_assert_msg(d == UINT32_MAX, "%s: spring %u differs (%u-%u kind %u vs %u-%u kind %u, k %.17g vs %.17g)", what, d,
                a->springs[d].a, a->springs[d].b, a->springs[d].kind, b->springs[d].a, b->springs[d].b,
                b->springs[d].kind, a->springs[d].k, b->springs[d].k);
  ck_assert_msg(memcmp(a->tris, b->tris, sizeof *a->tris * a->n_tris) == 0, "%s: render triangles", what);
  /* the contact surface (the solid's boundary) follows the render triangles' node map in both */
  ck_assert_ptr_nonnull(a->contact_tris);
  ck_assert_ptr_nonnull(b->contact_tris);
  ck_assert_uint_eq(a->n_contact_tris, b->n_contact_tris);
  ck_assert_msg(memcmp(a->contact_tris, b->contact_tris, sizeof *a->contact_tris * a->n_contact_tris) == 0,
                "%s: contact triangles", what);
  ck_assert_msg(memcmp(a->rest, b->rest, sizeof *a->rest * a->n_nodes) == 0, "%s: rest", what);
  ck_assert_msg(memcmp(a->inv_mass, b->inv_mass, sizeof *a->inv_mass * a->n_nodes) == 0, "%s: masses", what);
  ck_assert_msg(memcmp(a->x, b->x, sizeof *a->x * a->n_nodes) == 0, "%s: state", what);
  ck_assert_uint_eq(a->n_layers, b->n_layers);
  ck_assert_uint_eq(a->n_render_groups, b->n_render_groups);
  ck_assert_msg(memcmp(a->layer_tri_count, b->layer_tri_count, sizeof a->layer_tri_count) == 0, "%s: groups", what);
  ck_assert_msg(memcmp(a->layers, b->layers, sizeof a->layers) == 0, "%s: layers", what);
  ck_assert_msg(memcmp(a->render_group_name, b->render_group_name, sizeof a->render_group_name) == 0, "%s: names",
                what);
  ck_assert_uint_eq(ts_tissue_columns(a), ts_tissue_columns(b));
  /* here and below: plain checks per item and one assertion for the first
   * that differs (each passing Check assertion writes its location to the
   * runner's file, a system call per item on the liver's tens of thousands) */
  uint32_t bad = UINT32_MAX;
  for (uint32_t j = 0; j < ts_tissue_columns(a) && bad == UINT32_MAX; j++)
    for (uint32_t s = 0; s < a->n_sheets; s++)
      if (ts_tissue_sheet_node(a, s, j) != ts_tissue_sheet_node(b, s, j)) bad = j;
  ck_assert_msg(bad == UINT32_MAX, "%s: column %u's nodes differ", what, bad);
}

/* XPBD's constraints on a and b (bending and volume on), compared field
 * by field in sweep order. */
static void assert_same_xpbd(const ts_tissue *a, const ts_tissue *b, const char *what) {
  ts_xpbd_def def = ts_xpbd_default_def();
  def.bending = 1;
  def.volume = 1;
  ts_xpbd *xa = NULL, *xb = NULL;
  ck_assert_int_eq(ts_xpbd_build(a, &def, &xa), 0);
  ck_assert_int_eq(ts_xpbd_build(b, &def, &xb), 0);
  ck_assert_uint_eq(xa->n_springs, xb->n_springs);
  ck_assert_uint_gt(xa->n_bend, 0);
  ck_assert_uint_gt(xa->n_vol, 0);
  ck_assert_uint_eq(xa->n_bend, xb->n_bend);
  ck_assert_uint_eq(xa->n_vol, xb->n_vol);
  uint32_t bad = UINT32_MAX;
  for (uint32_t i = 0; i < xa->n_springs && bad == UINT32_MAX; i++) {
    const ts__dist *p = &xa->dist[i], *q = &xb->dist[i];
    if (!(p->a == q->a && p->b == q->b && same(p->rest, q->rest) && same(p->alpha0, q->alpha0) &&
          same(p->w1, q->w1) && same(p->b1, q->b1) && same(p->w2, q->w2) && same(p->b2, q->b2) &&
          same(p->c, q->c) && xa->spring_of[i] == xb->spring_of[i]))
      bad = i;
  }
  ck_assert_msg(bad == UINT32_MAX, "%s: XPBD distance constraint %u differs", what, bad);
  for (uint32_t i = 0; i < xa->n_bend && bad == UINT32_MAX; i++)
    if (!(memcmp(xa->bend[i].p, xb->bend[i].p, sizeof xa->bend[i].p) == 0 &&
          same(xa->bend[i].theta0, xb->bend[i].theta0) && same(xa->bend[i].alpha, xb->bend[i].alpha)))
      bad = i;
  ck_assert_msg(bad == UINT32_MAX, "%s: XPBD bending constraint %u differs", what, bad);
  for (uint32_t i = 0; i < xa->n_vol && bad == UINT32_MAX; i++)
    if (!(memcmp(xa->vol[i].p, xb->vol[i].p, sizeof xa->vol[i].p) == 0 && same(xa->vol[i].v0, xb->vol[i].v0) &&
          same(xa->vol[i].alpha, xb->vol[i].alpha)))
      bad = i;
  ck_assert_msg(bad == UINT32_MAX, "%s: XPBD volume constraint %u differs", what, bad);
  ts_xpbd_destroy(xa);
  ts_xpbd_destroy(xb);
}

/* One step of each solver from the refined state (copies: the tissues stay
 * as they are), positions and velocities bit for bit. */
static void assert_same_step(const ts_tissue *a, const ts_tissue *b, const char *what) {
  for (int solver = 0; solver < 2; solver++) {
    ts_tissue *ca = NULL, *cb = NULL;
    ck_assert_int_eq(ts_refine_snapshot(a, &ca), 0);
    ck_assert_int_eq(ts_refine_snapshot(b, &cb), 0);
    if (solver == 0) {
      ts_step_stats sa, sb;
      ck_assert_int_eq(ts_massspring_step(ca, DT, NULL, 0, &sa), 0);
      ck_assert_int_eq(ts_massspring_step(cb, DT, NULL, 0, &sb), 0);
    } else {
      ts_xpbd_def def = ts_xpbd_default_def();
      def.bending = def.volume = 1;
      ts_xpbd *xa = ts_xpbd_create(ca, &def), *xb = ts_xpbd_create(cb, &def);
      ck_assert_ptr_nonnull(xa);
      ck_assert_ptr_nonnull(xb);
      ts_xpbd_stats sa, sb;
      ck_assert_int_eq(ts_xpbd_step(xa, ca, DT, NULL, 0, &sa), 0);
      ck_assert_int_eq(ts_xpbd_step(xb, cb, DT, NULL, 0, &sb), 0);
      ts_xpbd_destroy(xa);
      ts_xpbd_destroy(xb);
    }
    /* the step moved the tissue (gravity), so equal is not trivially so */
    ck_assert_msg(memcmp(ca->x, a->x, sizeof *ca->x * a->n_nodes) != 0, "%s: the step did not move", what);
    ck_assert_msg(memcmp(ca->x, cb->x, sizeof *ca->x * ca->n_nodes) == 0, "%s: %s step: positions differ", what,
                  solver ? "XPBD" : "mass-spring");
    ck_assert_msg(memcmp(ca->v, cb->v, sizeof *ca->v * ca->n_nodes) == 0, "%s: %s step: velocities differ", what,
                  solver ? "XPBD" : "mass-spring");
    ts_tissue_destroy(ca);
    ts_tissue_destroy(cb);
  }
}

/* Refines t (source s) on the triangles a ray from o along dir picks within
 * range, by `method`, with the springs made `how`. blend: the hand-over's
 * (< 0: none). */
static int smooth_rest; /* Loop's smoothing of the rest shape (offline use): set by test_smooth */

static void refine(const ts_refine_src *s, const ts_tissue *t, const double o[3], const double dir[3], double range,
                   int method, int how, double blend, ts_tissue **out, ts_refine_src **sout, ts_refine_info *info) {
  uint32_t *sel = NULL, n = 0;
  ck_assert_int_eq(ts_refine_pick(s, t, o, dir, range, &sel, &n, NULL), 0);
  ck_assert_uint_gt(n, 2);
  ts_refine_opts opts = {method, 0, 0, smooth_rest, blend, NULL, 0, how, 0, 0};
  char err[256];
  memset(info, 0, sizeof *info);
  int rc = ts_refine_run(s, t, sel, n, &opts, out, sout, info, err, sizeof err);
  ck_assert_msg(rc == 0, "refine: %s", err);
  free(info->parents);
  info->parents = NULL;
  free(sel);
}

/* The whole comparison on one refinement of (s, t). */
static void check_case(const ts_refine_src *s, const ts_tissue *t, const double o[3], const double dir[3], double range,
                       int method, double blend, const char *what) {
  ts_tissue *tl = NULL, *tf = NULL, *tn = NULL;
  ts_refine_src *sl = NULL, *sf = NULL, *sn = NULL;
  ts_refine_info il, iff, in;
  refine(s, t, o, dir, range, method, TS_REFINE_REBUILD_LOCAL, blend, &tl, &sl, &il);
  refine(s, t, o, dir, range, method, TS_REFINE_REBUILD_FULL, blend, &tf, &sf, &iff);
  ck_assert_msg(il.local == 1, "%s: the local path was not taken", what);
  ck_assert_int_eq(iff.local, 0);
  ck_assert_uint_eq(iff.springs_computed, tf->n_springs);
  ck_assert_uint_gt(il.springs_computed, 0);
  ck_assert_msg(il.springs_computed < tl->n_springs / 2, "%s: %u of %u springs computed", what, il.springs_computed,
                tl->n_springs);
  assert_same_tissue(tl, tf, what);
  assert_same_xpbd(tl, tf, what);
  assert_same_step(tl, tf, what);
  /* one prism too narrow: must differ (the comparison can fail) */
  refine(s, t, o, dir, range, method, TS_REFINE_REBUILD_NARROW, blend, &tn, &sn, &in);
  ck_assert_int_eq(in.local, 1);
  ck_assert_msg(first_spring_diff(tn, tf) != UINT32_MAX, "%s: the narrow ring gave the whole build's springs", what);
  fprintf(stderr, "%s: %u springs, %u computed, %u prisms of %u\n", what, tl->n_springs, il.springs_computed,
          il.prisms_computed, iff.prisms_computed);
  ts_tissue_destroy(tl);
  ts_tissue_destroy(tf);
  ts_tissue_destroy(tn);
  ts_refine_src_free(sl);
  ts_refine_src_free(sf);
  ts_refine_src_free(sn);
}

static const double DOWN[3] = {0, -1, 0};

/* The default patch (0.08 m square, anchored rim), regions of 5 mm
 * (server/refine.c's default range): at the centre, and at x = 38 mm,
 * whose triangles reach the rim at 40 mm. _i: 0 Loop, 1 LEB; the
 * hand-over on for Loop (its forces read the springs too), off for LEB. */
START_TEST(test_patch) {
  const int method = _i ? TS_REFINE_LEB : TS_REFINE_LOOP;
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL;
  ts_refine_src *s = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_refine_src_patch(&d, &s), 0);
  const double centre[3] = {0.003, 0.05, 0.002}, rim[3] = {0.038, 0.05, 0.001};
  check_case(s, t, centre, DOWN, 0.005, method, _i ? -1.0 : 0.0, _i ? "patch LEB centre" : "patch Loop centre");
  /* the rim region really touches anchored nodes */
  uint32_t *sel = NULL, n = 0;
  ck_assert_int_eq(ts_refine_pick(s, t, rim, DOWN, 0.005, &sel, &n, NULL), 0);
  int anchored = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) anchored |= s->anchored[s->e->surface_tris[sel[i]][k]];
  free(sel);
  ck_assert_msg(anchored, "the rim region has no anchored vertex");
  check_case(s, t, rim, DOWN, 0.005, method, -1.0, _i ? "patch LEB rim" : "patch Loop rim");
  ts_tissue_destroy(t);
  ts_refine_src_free(s);
}
END_TEST

/* Refined twice, overlapping regions (the second at the first's edge, so
 * it refines refined triangles and old ones), Loop then LEB: the local
 * chain against the whole chain. */
START_TEST(test_twice) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL, *l1 = NULL, *f1 = NULL, *l2 = NULL, *f2 = NULL;
  ts_refine_src *s = NULL, *sl1 = NULL, *sf1 = NULL, *sl2 = NULL, *sf2 = NULL;
  ts_refine_info il, iff;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_refine_src_patch(&d, &s), 0);
  const double o1[3] = {0.003, 0.05, 0.002}, o2[3] = {0.007, 0.05, 0.004};
  refine(s, t, o1, DOWN, 0.005, TS_REFINE_LOOP, TS_REFINE_REBUILD_LOCAL, -1.0, &l1, &sl1, &il);
  refine(s, t, o1, DOWN, 0.005, TS_REFINE_LOOP, TS_REFINE_REBUILD_FULL, -1.0, &f1, &sf1, &iff);
  assert_same_tissue(l1, f1, "first refinement");
  refine(sl1, l1, o2, DOWN, 0.005, TS_REFINE_LEB, TS_REFINE_REBUILD_LOCAL, 0.0, &l2, &sl2, &il);
  refine(sf1, f1, o2, DOWN, 0.005, TS_REFINE_LEB, TS_REFINE_REBUILD_FULL, 0.0, &f2, &sf2, &iff);
  ck_assert_int_eq(il.local, 1);
  ck_assert_uint_lt(il.springs_computed, l2->n_springs / 2);
  ck_assert_uint_gt(l2->n_nodes, l1->n_nodes);
  assert_same_tissue(l2, f2, "second refinement");
  assert_same_xpbd(l2, f2, "second refinement");
  assert_same_step(l2, f2, "second refinement");
  /* and the second refinement's own comparison, from the same first one */
  check_case(sl1, l1, o2, DOWN, 0.005, TS_REFINE_LEB, -1.0, "second refinement, local vs whole");
  ts_tissue_destroy(t);
  ts_tissue_destroy(l1);
  ts_tissue_destroy(f1);
  ts_tissue_destroy(l2);
  ts_tissue_destroy(f2);
  ts_refine_src_free(s);
  ts_refine_src_free(sl1);
  ts_refine_src_free(sf1);
  ts_refine_src_free(sl2);
  ts_refine_src_free(sf2);
}
END_TEST

/* Loop with its smoothing rules on the rest shape (smooth_rest: old
 * vertices of the region move, so the prisms around them change shape
 * without being refined), at the centre and at the rim. */
START_TEST(test_smooth) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL;
  ts_refine_src *s = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_refine_src_patch(&d, &s), 0);
  const double centre[3] = {0.003, 0.05, 0.002}, rim[3] = {0.038, 0.05, 0.001};
  smooth_rest = 1;
  check_case(s, t, centre, DOWN, 0.005, TS_REFINE_LOOP, -1.0, "patch smooth Loop centre");
  check_case(s, t, rim, DOWN, 0.005, TS_REFINE_LOOP, -1.0, "patch smooth Loop rim");
  smooth_rest = 0;
  ts_tissue_destroy(t);
  ts_refine_src_free(s);
}
END_TEST

/* The liver (tests/bench's scenario: liver-smooth.obj in cm, the default
 * three layers extruded inward with pleat relaxation up to 1 mm and layers
 * down to 0.1 of their depth), no anchors; a 5 mm region at its top.
 * Built once for both cases (an unchecked fixture, in the runner before
 * the cases' forks: the cases only read it) instead of in each. */
static ts_mesh *g_mesh;
static ts_extrusion *g_ex;
static ts_tissue *g_liver;
static ts_refine_src *g_src;

static void liver_setup(void) {
  char path[1024], msg[512] = "";
  snprintf(path, sizeof path, "%s/data/meshes/liver-smooth.obj", TS_SHARED_DIR);
  ts_mesh_import_opts io = ts_mesh_import_opts_default();
  io.scale = 0.01;
  int rc = ts_mesh_import_file(path, TS_MESH_AUTO, &io, &g_mesh, NULL, NULL, msg, sizeof msg);
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
  rc = ts_extrude(g_mesh, &d, &g_ex, msg, sizeof msg);
  ck_assert_msg(rc == 0, "liver extrusion: %s", msg);
  ts_patch_def pd = ts_default_patch_def();
  ck_assert_int_eq(ts_tissue_build(g_ex, layers, NULL, pd.gravity, &g_liver), 0);
  ck_assert_int_eq(ts_refine_src_create(g_ex, layers, NULL, pd.gravity, &g_src), 0);
}

static void liver_teardown(void) {
  ts_tissue_destroy(g_liver);
  ts_refine_src_free(g_src);
  ts_extrusion_free(g_ex);
  ts_mesh_free(g_mesh);
  g_liver = NULL, g_src = NULL, g_ex = NULL, g_mesh = NULL;
}

/* _i: 0 Loop (with the hand-over), 1 LEB. */
START_TEST(test_liver) {
  ck_assert_ptr_nonnull(g_liver);
  const ts_tissue *t = g_liver;
  uint32_t top = 0;
  for (uint32_t j = 1; j < g_ex->nv; j++)
    if (t->rest[j][1] > t->rest[top][1]) top = j;
  const double o[3] = {t->rest[top][0], t->rest[top][1] + 0.05, t->rest[top][2]};
  check_case(g_src, t, o, DOWN, 0.005, _i ? TS_REFINE_LEB : TS_REFINE_LOOP, _i ? -1.0 : 0.0,
             _i ? "liver LEB" : "liver Loop");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("refine_rebuild");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, test_patch, 0, 2);
  tcase_add_test(tc, test_twice);
  tcase_add_test(tc, test_smooth);
  suite_add_tcase(s, tc);
  tc = tcase_create("liver");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, liver_setup, liver_teardown);
  /* a sanitizer build (memory and undefined behaviour) refines the liver
   * by Loop alone: LEB's local rebuild, with the same comparisons, is
   * test_patch's index 1 and test_twice's second refinement there, and the
   * liver's LEB case took 11 s of the suite's 42 s of CPU under ASan+UBSan */
  tcase_add_loop_test(tc, test_liver, 0, TU_ITERS(2, 1));
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
