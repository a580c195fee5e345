/*
 * test_friction.c: Coulomb friction between a tool and the tissue in both
 * solvers (issue 5's "with Coulomb friction"): the mass-spring step's
 * force-level friction (ts_ms_contact.c) and the XPBD sessions' contact
 * (ts_contact.h, with the tool's coefficients through session_contact.c).
 *
 * The scene, the same for both: the daemon's default patch (80 mm, 17 nodes
 * a side, anchored rim, gravity) settled, then a 200 mm cube mesh tool, whose
 * flat bottom face covers the whole patch wherever it goes here, lowered
 * 3 mm into the dome's top and held. Every contact normal is then exactly
 * the face's, -y, so the tool's force splits exactly into the normal
 * reaction N = F_y and the friction T = (F_x, F_z): the sphere's and
 * capsule's ploughing (normals tilted along the drag) cannot mix in. Then
 *   stick: the tool moves 10 um along x in 50 ms and holds (the stick limit,
 *     mu_s N over the patch's tangential stiffness, is about 25 um here).
 *     T stays under mu_s N, the tissue holds the tool back, and the pressed
 *     nodes (those on its face) travel with it: measured, the mass-spring
 *     step holds 36 of 48 to 51 at the tool's 10 um within 5 % (asserted:
 *     3/5; the same with the scaled mass matrix and with lumped masses),
 *     the rest being the flattened dome's lightly pressed centre and rim,
 *     where Coulomb's law lets a small local pressure slip (partial slip);
 *     XPBD holds 30 of 57 (asserted: 2/5; 13 or 14 before its sticking
 *     vertices kept their anchors, ts_contact_friction.c): its sweeps leave
 *     the inner pressed nodes a few um off the face with a normal correction
 *     in some substeps only, and a node without one has no friction in that
 *     substep. The mean travel is between half the tool's and the tool's
 *     (+5 %);
 *     Creep: over the last 40 ms of the hold the pressed nodes' mean travel
 *     changes by under 0.002 mm/s in both solvers (measured: mass-spring
 *     0.0000 and 0.0003, XPBD 0.0009; XPBD was 0.0074, 0.3 um in 40 ms,
 *     before the anchors);
 *   slip: the tool then moves 12 mm more at 60 mm/s; the pressed nodes stay
 *     behind it (they travel under half the tool's way, but more than half
 *     the stick move), and over the second half of the move T_x / N is
 *     mu_k within 5 % (measured: mass-spring 0.3000, every pressed node
 *     slides with exactly mu_k times its reaction; XPBD 0.2955, its cone
 *     over the iterations);
 *   frictionless (0, 0): T is nothing but the rounding of the face's normal
 *     (under 1e-9 N) and the pressed nodes do not follow the tool.
 * The coefficients are larger than the daemon's default (0.1, 0.05) so that
 * the drag is well above the tissue's own noise: mu_s 0.5, mu_k 0.3.
 * Mass-spring force balance (as test_robust checks for normal contact): with
 * friction, the tool's force equals the weight minus the anchors' reaction
 * in all three components once the scene is at rest again (1 % of N).
 * And bad coefficients are refused (TS_EINVAL) by both steps with nothing
 * changed.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_massspring.h"
#include "core/ts_mesh.h"
#include "core/ts_obb_tree.h"
#include "core/ts_tissue.h"
#include "core/ts_xpbd.h"
#include "balance_fixture.h"
#include "mesh_fixtures.h"
#include "session_contact.h"

#define DT 1e-3
#define CUBE 0.2   /* m: the tool's side */
#define DEPTH 0.003 /* m: how far the face goes below the patch's top */
#define STICK 1e-5  /* m: the stick test's move (under the stick limit, ~25 um here) */

typedef struct scene {
  int xpbd; /* 0 mass-spring with the scaled mass matrix, 1 XPBD, 2 mass-spring lumped */
  ts_tissue *t;
  ts_xpbd *x;
  ts_session_contact sc;
  ts_tool tools[TS_MAX_TOOLS];
  ts_obb_tree *tree;
  ts_mesh *mesh;
  double *x0; /* the nodes' x when the press was complete */
} scene;

static void step(scene *s) {
  int rc;
  if (s->xpbd == 1) {
    ts_xpbd_stats st;
    rc = ts_session_contact_step(&s->sc, s->x, s->t, DT, s->tools, &st);
  } else {
    ts_step_stats st;
    rc = ts_massspring_step(s->t, DT, s->tools, 1, &st);
  }
  /* Check only on a failure: a passing ck_assert is a write to its pipe,
   * and this runs every step */
  if (rc != 0) ck_abort_msg("step: %s", ts_strerror(rc));
}

/* The tool's face height (y of the cube's bottom) for tool position y. */
static double face(const scene *s) { return s->tools[0].pos[1] - 0.5 * CUBE; }

/* Builds and settles the patch, then presses the cube DEPTH into it. */
static void scene_init(scene *s, int xpbd, double mu_s, double mu_k) {
  memset(s, 0, sizeof *s);
  s->xpbd = xpbd;
  ts_patch_def pd = ts_default_patch_def();
  pd.resolution = 17; /* the daemon's default patch-resolution */
  ck_assert_int_eq(ts_patch_create(&pd, &s->t), 0);
  if (xpbd == 2) { /* lumped masses: the other reaction path of ts_ms_integrate.c */
    s->t->mass_scaling = 0;
    ck_assert_int_eq(ts_massspring_prepare(s->t), 0);
  }
  if (xpbd == 1) {
    ts_xpbd_def d = ts_xpbd_default_def();
    d.damping = s->t->drag;
    ck_assert_int_eq(ts_xpbd_build(s->t, &d, &s->x), 0);
    ck_assert_int_eq(ts_session_contact_init(&s->sc, s->t), 0);
  }
  s->mesh = fx_cube(CUBE);
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = s->mesh;
  ck_assert_int_eq(ts_obb_tree_create(&d, &s->tree), 0);
  for (int i = 0; i < TS_MAX_TOOLS; i++) s->tools[i].quat[0] = 1;
  ts_tool *tl = &s->tools[0];
  tl->kind = TS_TOOL_MESH;
  tl->shape = s->tree;
  tl->radius = 0.005;
  tl->mu_static = mu_s;
  tl->mu_kinetic = mu_k;
  tl->pos[1] = 0.5 * CUBE + 0.002; /* above the patch */
  for (int i = 0; i < 120; i++) step(s); /* settle under gravity */
  tl->active = 1;
  for (int i = 0; i < 100; i++) { /* down to DEPTH under y = 0 in 100 ms */
    tl->pos[1] = 0.5 * CUBE + 0.002 - (0.002 + DEPTH) * (i + 1) / 100.0;
    step(s);
  }
  for (int i = 0; i < 150; i++) step(s); /* hold */
  s->x0 = malloc(sizeof *s->x0 * s->t->n_nodes);
  ck_assert_ptr_nonnull(s->x0);
  for (uint32_t i = 0; i < s->t->n_nodes; i++) s->x0[i] = s->t->x[i][0];
}

static void scene_free(scene *s) {
  if (s->xpbd == 1) {
    ts_session_contact_free(&s->sc);
    ts_xpbd_destroy(s->x);
  }
  free(s->x0);
  ts_obb_tree_destroy(s->tree);
  ts_mesh_free(s->mesh);
  ts_tissue_destroy(s->t);
}

/* The mean x travel since the press of the free nodes on the tool's face
 * (within 20 um of it; *n gets how many) and in *held how many of them
 * travelled `want` within 5 %. */
static double pressed_travel(const scene *s, double want, uint32_t *n, uint32_t *held) {
  double sum = 0, y = face(s);
  uint32_t k = 0, h = 0;
  for (uint32_t i = 0; i < s->t->n_nodes; i++) {
    if (!(s->t->inv_mass[i] > 0) || fabs(s->t->x[i][1] - y) > 2e-5) continue;
    double d = s->t->x[i][0] - s->x0[i];
    sum += d;
    k++;
    if (fabs(d - want) <= 0.05 * want) h++;
  }
  *n = k;
  *held = h;
  return k ? sum / k : 0.0;
}

/* Moves the tool by dx along x in `steps` steps (uniformly); returns the
 * mean of T_x / N over the second half of the move. */
static double drag(scene *s, double dx, int steps) {
  ts_tool *tl = &s->tools[0];
  const double x0 = tl->pos[0];
  double ratio = 0;
  int cnt = 0;
  for (int i = 0; i < steps; i++) {
    tl->pos[0] = x0 + dx * (i + 1) / steps;
    step(s);
    if (2 * i >= steps) {
      ratio += tl->force[0] / tl->force[1];
      cnt++;
    }
  }
  return cnt ? ratio / cnt : 0.0;
}

static void stick_slip(int xpbd) {
  const char *what = xpbd == 1 ? "XPBD" : xpbd ? "mass-spring lumped" : "mass-spring";
  const double mu_s = 0.5, mu_k = 0.3;
  scene s;
  scene_init(&s, xpbd, mu_s, mu_k);
  ts_tool *tl = &s.tools[0];
  const double N0 = tl->force[1];
  printf("%s: cube pressed %.1f mm: N %.5g N, T (%.3g %.3g) N, %u contacts\n", what,
         DEPTH * 1e3, N0, tl->force[0], tl->force[2], tl->contacts);
  /* measured 0.0638 (XPBD) to 0.0650 N (2026-12-04); a change by a quarter
   * shows here */
  ck_assert_msg(N0 > 0.049 && N0 < 0.081, "%s: normal reaction %.6g N", what, N0);
  /* stick */
  drag(&s, STICK, 50);
  double worst = 0, tv_hold = 0;
  uint32_t np, held;
  for (int i = 0; i < 60; i++) { /* hold; |T| / N stays within the cone */
    step(&s);
    double tr = hypot(tl->force[0], tl->force[2]) / tl->force[1];
    if (tr > worst) worst = tr;
    if (i == 19) tv_hold = pressed_travel(&s, STICK, &np, &held);
  }
  double tv = pressed_travel(&s, STICK, &np, &held);
  /* creep: how fast the pressed nodes slide back under the tool at rest
   * (the tangential load of the stretched tissue), over the last 40 ms */
  const double creep = (tv_hold - tv) / (40 * DT);
  printf("%s creep at rest: %.4f mm/s (pressed nodes' mean travel %.5f mm -> %.5f mm over "
         "40 ms)\n", what, creep * 1e3, tv_hold * 1e3, tv * 1e3);
  const double t_stick = tl->force[0];
  printf("%s stick: tool %.4f mm, pressed nodes %u, mean travel %.4f mm, %u of them %.4f mm "
         "within 5 %%; T/N %.4f now, %.4f at most (mu_s %.2g); N %.5g N\n",
         what, STICK * 1e3, np, tv * 1e3, held, STICK * 1e3, t_stick / tl->force[1], worst,
         mu_s, tl->force[1]);
  /* slip */
  double r = drag(&s, 0.012, 200);
  uint32_t np2, held2;
  double tv2 = pressed_travel(&s, STICK, &np2, &held2);
  printf("%s slip: tool +12 mm at 60 mm/s: T_x/N %.4f while moving (mu_k %.2g, %.2f %%), "
         "pressed nodes (%u) travelled %.4f mm; N %.5g N\n",
         what, -r, mu_k, 100 * (-r - mu_k) / mu_k, np2, tv2 * 1e3, tl->force[1]);
  ck_assert_uint_ge(np, 10);
  /* the loaded nodes move with the tool: the mass-spring step holds all but the lightly
   * pressed centre and rim of the flattened dome (partial slip, as Coulomb's law gives
   * where the tangential load exceeds mu_s times a small local pressure); XPBD (30 of 57
   * measured) also lets go of the inner nodes its sweeps leave without a normal
   * correction in some substeps */
  ck_assert_msg(held >= (xpbd == 1 ? 2 * np / 5 : 3 * np / 5), "%s: %u of %u pressed nodes stuck",
                what, held, np);
  ck_assert_msg(tv > 0.5 * STICK && tv <= 1.05 * STICK, "%s: mean travel %.6g m, tool %.3g m",
                what, tv, STICK);
  ck_assert_msg(worst < mu_s, "%s: T/N %.6g over mu_s", what, worst);
  /* creep at rest (measured: mass-spring under 0.001 mm/s, XPBD 0.0009 mm/s with its
   * sticking anchors; 0.0074 without them) */
  ck_assert_msg(fabs(creep) < 0.002e-3, "%s: creep %.6g mm/s", what, creep * 1e3);
  ck_assert_msg(t_stick < 0, "%s: the tissue holds the tool back (T_x %.6g N)", what, t_stick);
  ck_assert_uint_ge(np2, 10);
  ck_assert_msg(fabs(-r - mu_k) <= 0.05 * mu_k, "%s: T/N %.6g while sliding, mu_k %.3g", what,
                -r, mu_k);
  ck_assert_msg(tv2 < 0.5 * 0.0120, "%s: the nodes slid (travelled %.6g m)", what, tv2);
  ck_assert_msg(tv2 > 0.5 * STICK, "%s: friction dragged them (travelled %.6g m)", what, tv2);
  scene_free(&s);
}

START_TEST(test_massspring_stick_slip) { stick_slip(0); }
END_TEST

START_TEST(test_xpbd_stick_slip) { stick_slip(1); }
END_TEST

START_TEST(test_lumped_stick_slip) { stick_slip(2); }
END_TEST

/* Frictionless: a flat face pulls nothing along. */
static void frictionless(int xpbd) {
  const char *what = xpbd ? "XPBD" : "mass-spring";
  scene s;
  scene_init(&s, xpbd, 0, 0);
  ts_tool *tl = &s.tools[0];
  double worst = 0;
  for (int i = 0; i < 100; i++) {
    tl->pos[0] += 1e-4;
    step(&s);
    worst = fmax(worst, fabs(tl->force[0]) + fabs(tl->force[2]));
  }
  uint32_t np, held;
  double tv = pressed_travel(&s, 1e-3, &np, &held);
  printf("%s frictionless: tool 10 mm, pressed nodes (%u) %.4f mm, |T| at most %.3g N\n", what,
         np, tv * 1e3, worst);
  ck_assert_uint_ge(np, 10);
  /* nothing but the rounding of the face's normal (-y) */
  ck_assert_msg(worst <= 1e-9 * tl->force[1], "%s: T %.6g N", what, worst);
  ck_assert_msg(fabs(tv) < 0.1e-3, "%s: nodes dragged %.6g m", what, tv);
  scene_free(&s);
}

START_TEST(test_massspring_frictionless) { frictionless(0); }
END_TEST

START_TEST(test_xpbd_frictionless) { frictionless(1); }
END_TEST

/* Mass-spring balance with friction: after a drag that the tissue resists
 * (stick), at rest, tool force = weight - anchors' reaction, all three
 * components, within 1 % of N (test_robust's bound for normal contact). */
START_TEST(test_massspring_balance) {
  scene s;
  scene_init(&s, 0, 0.5, 0.3);
  ts_tool *tl = &s.tools[0];
  tl->pos[2] += 2e-4;
  drag(&s, STICK, 50);
  for (int i = 0; i < 250; i++) step(&s);
  ts_tissue *t = s.t;
  double want[3];
  fx_tool_balance(t, want);
  printf("mass-spring balance with friction: tool (%.6g %.6g %.6g) N, weight - anchors "
         "(%.6g %.6g %.6g) N\n",
         tl->force[0], tl->force[1], tl->force[2], want[0], want[1], want[2]);
  ck_assert_msg(fabs(tl->force[0]) > 0.05 * tl->force[1], "a real tangential force: %.6g N",
                tl->force[0]);
  for (int k = 0; k < 3; k++)
    ck_assert_msg(fabs(tl->force[k] - want[k]) <= 0.01 * tl->force[1],
                  "axis %d: tool %.6g N, balance %.6g N", k, tl->force[k], want[k]);
  scene_free(&s);
}
END_TEST

/* Bad coefficients: TS_EINVAL (TS_ENAN for a NaN in the mass-spring step),
 * nothing stepped. */
START_TEST(test_bad_coefficients) {
  const double bad[][2] = {{0.1, 0.2}, {-0.1, 0}, {0.1, -0.01}, {2.5, 0.1}, {NAN, 0}, {INFINITY, 0}};
  for (unsigned k = 0; k < sizeof bad / sizeof bad[0]; k++)
    ck_assert_int_eq(ts_tool_friction_valid(bad[k][0], bad[k][1]), TS_EINVAL);
  ck_assert_int_eq(ts_tool_friction_valid(0, 0), 0);
  ck_assert_int_eq(ts_tool_friction_valid(TS_TOOL_MU_MAX, TS_TOOL_MU_MAX), 0);
  ck_assert_int_eq(ts_tool_friction_valid(TS_TOOL_MU_STATIC_DEFAULT, TS_TOOL_MU_KINETIC_DEFAULT), 0);
  ts_patch_def pd = ts_default_patch_def();
  pd.resolution = 9;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &t), 0);
  ts_tool tl[TS_MAX_TOOLS];
  memset(tl, 0, sizeof tl);
  tl[0] = (ts_tool){.kind = TS_TOOL_SPHERE, .active = 1, .radius = 0.005, .quat = {1, 0, 0, 0},
                    .mu_static = 0.1, .mu_kinetic = 0.2};
  ts_step_stats st;
  ck_assert_int_eq(ts_massspring_step(t, DT, tl, 1, &st), TS_EINVAL);
  tl[0].mu_static = NAN;
  ck_assert_int_eq(ts_massspring_step(t, DT, tl, 1, &st), TS_ENAN);
  ck_assert_double_eq(t->time, 0);
  ts_xpbd_def d = ts_xpbd_default_def();
  ts_xpbd *x = NULL;
  ck_assert_int_eq(ts_xpbd_build(t, &d, &x), 0);
  ts_session_contact sc;
  ck_assert_int_eq(ts_session_contact_init(&sc, t), 0);
  tl[0].mu_static = 3;
  tl[0].mu_kinetic = 0.1;
  ts_xpbd_stats xs;
  ck_assert_int_eq(ts_session_contact_step(&sc, x, t, DT, tl, &xs), TS_EINVAL);
  ck_assert_double_eq(t->time, 0);
  tl[0].mu_static = 0.3;
  ck_assert_int_eq(ts_session_contact_step(&sc, x, t, DT, tl, &xs), 0);
  ts_session_contact_free(&sc);
  ts_xpbd_destroy(x);
  ts_tissue_destroy(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("friction");
  TCase *tc = tcase_create("friction");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_bad_coefficients);
  tcase_add_test(tc, test_massspring_stick_slip);
  tcase_add_test(tc, test_lumped_stick_slip);
  tcase_add_test(tc, test_massspring_frictionless);
  tcase_add_test(tc, test_massspring_balance);
  tcase_add_test(tc, test_xpbd_stick_slip);
  tcase_add_test(tc, test_xpbd_frictionless);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
