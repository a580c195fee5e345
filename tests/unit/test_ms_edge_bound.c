/*
 * test_ms_edge_bound.c: Check suite for the contact surface's edge bound
 * of the mass-spring step (ts_massspring.c, contact_edge_bound): what a
 * sphere's or capsule's thin pass asks before it can act, taken from the
 * rest shape at preparation instead of a scan of the surface in every step.
 * The steps are the same bit for bit as with the scan (the bound forced
 * off), the scanned edge never exceeds the bound, and a refinement that
 * shortens the longest edge gets a new bound.
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
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_ms_internal.h"
#include "ts_refine.h"
#include "ts_tissue.h"
#include "test_util.h"

#define DT 1e-3

static ts_tissue *patch_s(void) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  d.gravity[1] = 0;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

/* The bound as contact_edge_bound's rule gives it, computed here
 * independently: the longest contact edge at rest times (1 + the largest
 * strain_max). */
static double rule_bound(const ts_tissue *t) {
  double s_max = 0, m = 0;
  for (uint32_t s = 0; s < t->n_springs; s++) s_max = fmax(s_max, t->springs[s].strain_max);
  const uint32_t(*tris)[3] = (const uint32_t(*)[3])ts_tissue_contact_tris(t);
  for (uint32_t f = 0; f < ts_tissue_n_contact_tris(t); f++)
    for (int k = 0; k < 3; k++) {
      const double *a = t->rest[tris[f][k]], *b = t->rest[tris[f][(k + 1) % 3]];
      m = fmax(m, sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                       (a[2] - b[2]) * (a[2] - b[2])));
    }
  return m * (1 + s_max);
}

/* The path's steps: 60 pressing, 40 sliding, 20 lifting. It stops at the
 * lift's end: every tool here touches from step 22 to 29 on until step 99
 * and nothing after, the scan's decision is the bound's at every step (the
 * pass acts for the 1 mm tools, not for the 5 mm sphere) and the longest
 * edge stays at its rest length, 0.714 of the bound (measured over the
 * path's former 200 steps). So a step after the lift is the same code on
 * the same positions in both tissues with no contact for the pass to act
 * on: the 80 steps of recoil the path had after its lift, 40 % of the
 * case, checked nothing the lift does not. */
#define PATH_STEPS 120

/* Of those, the first 20 at least touch nothing: the tools come down at
 * 0.05 mm a step from 1 mm above, and patch-S has no gravity here, so until
 * a tool touches both tissues are at rest and a step leaves them as they
 * were, bit for bit (checked). A sanitizer build (memory and undefined
 * behaviour) leaves out 18 of them: the tool starts where it would be
 * after them and the path goes on from there as in the normal build, with
 * the same assertions at every step. */
#define SKIP_APPROACH TU_ITERS(0, 18)

/* A sanitizer build (memory and undefined behaviour, not the figures)
 * runs one tool whose pass acts, the 1 mm sphere: the 5 mm sphere's steps
 * are the plain step without the pass, which every other mass-spring test
 * runs there, and its figure (the bound says no) is the normal build's; it
 * was a third of this test's 68 s under ASan. The 1 mm capsule takes the
 * sphere's path through the bound, the scan and the step with the same
 * assertions, the pass with a capsule's distance (test_ms_thin's capsules
 * run that there), and it took 15 s of the 38 s of CPU left. */
#ifdef TS_TEST_SANITIZED
#define SCAN_TOOLS 1
#else
#define SCAN_TOOLS 3
#endif

/* patch-S twice, a tool pressed 2 mm in at 0.05 m/s, slid 2 mm along x and
 * lifted off at 0.5 m/s (swept): loop index 0 a 1 mm sphere (the pass
 * acts), 1 a 1 mm capsule, 2 the 5 mm sphere of test_thick_unchanged (the
 * pass cannot act). One tissue steps with the bound, the other with it
 * forced off (edge_bound -1: the scan every step, the rule before the
 * bound). Every position, force, torque and contact count equal bit for
 * bit at every step, and the edge the scan measures never over the bound.
 * The bound's decision: the pass can act for the 1 mm tools, not for the
 * 5 mm sphere (as the scan's, at rest: the pass there costs a refit of the
 * surface's tree every substep). */
START_TEST(test_same_steps_as_scan) {
  const int capsule = _i == 1;
  const double r = _i == 2 ? 5e-3 : 1e-3;
  ts_tissue *tt[2] = {patch_s(), patch_s()};
  ts_tool tl[2];
  double y0 = -INFINITY;
  for (uint32_t k = 0; k < tt[0]->nodes_per_sheet; k++) y0 = fmax(y0, tt[0]->rest[k][1]);
  for (int s = 0; s < 2; s++) {
    ck_assert_int_eq(ts_massspring_prepare(tt[s]), 0);
    memset(&tl[s], 0, sizeof tl[s]);
    tl[s].kind = capsule ? TS_TOOL_CAPSULE : TS_TOOL_SPHERE;
    tl[s].active = 1;
    tl[s].radius = r;
    tl[s].quat[0] = 1;
    if (capsule) {
      tl[s].length = 0.02;
      tl[s].quat[0] = cos(-M_PI / 4), tl[s].quat[3] = sin(-M_PI / 4);
      tl[s].pos[0] = -0.01;
    }
    tl[s].pos[1] = y0 + 1e-3 + r - SKIP_APPROACH * 5e-5;
  }
  const double bound = tt[0]->ms->edge_bound;
  ck_assert_double_eq_tol(bound, rule_bound(tt[0]), 1e-15);
  ck_assert_double_gt(bound, 0);
  double worst = 0;
  uint32_t contacts = 0, acting = 0;
  for (int i = SKIP_APPROACH; i < PATH_STEPS; i++) {
    for (int s = 0; s < 2; s++) {
      if (i < 60)
        tl[s].pos[1] -= 5e-5;
      else if (i < 100)
        tl[s].pos[0] += 5e-5;
      else
        tl[s].pos[1] += 5e-4;
      if (s == 1) tt[1]->ms->edge_bound = -1;
      ck_assert_int_eq(ts_massspring_step(tt[s], DT, &tl[s], 1, NULL), 0);
    }
    const double edge = ts__ms_longest_edge(tt[0]);
    worst = fmax(worst, edge / bound);
    ck_assert_msg(edge <= bound, "step %d: edge %.6g mm over the bound %.6g mm", i, edge * 1e3, bound * 1e3);
    ts__ptool p;
    ts__ms_prepare_tool(&p, &tl[0]);
    acting += ts__ms_thin_can_act(&p, edge);
    ck_assert_int_eq(ts__ms_thin_can_act_bound(&p, bound), _i < 2); /* the step's decision */
    ck_assert_msg(memcmp(tt[0]->x, tt[1]->x, sizeof *tt[0]->x * tt[0]->n_nodes) == 0, "step %d", i);
    ck_assert(memcmp(tl[0].force, tl[1].force, sizeof tl[0].force) == 0);
    ck_assert(memcmp(tl[0].torque, tl[1].torque, sizeof tl[0].torque) == 0);
    ck_assert_uint_eq(tl[0].contacts, tl[1].contacts);
    contacts = tl[0].contacts > contacts ? tl[0].contacts : contacts;
  }
  printf("%s r %.3g mm: bound %.4g mm, longest edge up to %.4f of it, pass could act (scan) at %u of %d "
         "steps, %u contacts at most\n",
         capsule ? "capsule" : "sphere", r * 1e3, bound * 1e3, worst, acting, PATH_STEPS - SKIP_APPROACH,
         contacts);
  ck_assert_uint_gt(contacts, 0);
  if (_i < 2) ck_assert_uint_gt(acting, 0);
  else ck_assert_uint_eq(acting, 0);
  ts_tissue_destroy(tt[0]);
  ts_tissue_destroy(tt[1]);
}
END_TEST

/* A closed 30 mm box, 2 cells a side (its longest contact edges: the
 * 21 mm face diagonals), the stomach wall's layers; longest-edge bisection
 * of every surface triangle down to half the longest edge. The refined
 * tissue's bound (prepared by ts_refine_run) is its own rule's value, at
 * most 0.75 of the coarse one (the diagonals are gone), and a step of it
 * runs. */
START_TEST(test_bound_after_refine) {
  const double len[3] = {0.03, 0.03, 0.03};
  const uint32_t cells[3] = {2, 2, 2};
  ts_mesh *m = fx_box(len, cells);
  ts_layer layers[TS_MAX_LAYERS];
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = ts_material_default_layers(layers);
  for (uint32_t l = 0; l < d.n_layers; l++) d.thickness[l] = layers[l].thickness;
  d.mode = TS_EXTRUDE_NORMAL;
  d.min_depth_fraction = 0.1;
  ts_extrusion *e = NULL;
  char err[512] = "";
  ck_assert_msg(ts_extrude(m, &d, &e, err, sizeof err) == 0, "%s", err);
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_build(e, layers, NULL, NULL, &t), 0);
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  const double before = t->ms->edge_bound;
  ck_assert_double_eq_tol(before, rule_bound(t), 1e-15);
  ck_assert_double_gt(before, 0.021);

  ts_refine_src *src = NULL, *src2 = NULL;
  ck_assert_int_eq(ts_refine_src_create(e, layers, NULL, NULL, &src), 0);
  uint32_t *sel = malloc(sizeof *sel * e->n_surface_tris);
  for (uint32_t f = 0; f < e->n_surface_tris; f++) sel[f] = f;
  ts_refine_opts o;
  memset(&o, 0, sizeof o);
  o.method = TS_REFINE_LEB;
  o.blend_time = -1;
  ts_refine_info info;
  memset(&info, 0, sizeof info);
  ts_tissue *t2 = NULL;
  int rc = ts_refine_run(src, t, sel, e->n_surface_tris, &o, &t2, &src2, &info, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", ts_err_name(rc), err);
  if (!t2->ms) ck_assert_int_eq(ts_massspring_prepare(t2), 0);
  const double after = t2->ms->edge_bound;
  printf("box 2 cells a side: bound %.4g mm, after bisection (%u new surface vertices) %.4g mm\n",
         before * 1e3, info.new_verts, after * 1e3);
  ck_assert_uint_gt(info.new_verts, 0);
  ck_assert_double_eq_tol(after, rule_bound(t2), 1e-15);
  ck_assert_double_le(after, 0.75 * before);
  ck_assert_int_eq(ts_massspring_step(t2, DT, NULL, 0, NULL), 0);
  ck_assert_double_eq(t2->ms->edge_bound, after);
  free(info.parents);
  free(sel);
  ts_refine_src_free(src);
  ts_refine_src_free(src2);
  ts_tissue_destroy(t);
  ts_tissue_destroy(t2);
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ms_edge_bound");
  TCase *tc = tcase_create("steps");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_same_steps_as_scan, 0, SCAN_TOOLS);
  suite_add_tcase(s, tc);
  tc = tcase_create("refine");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_bound_after_refine);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
