/*
 * test_ms_thin.c: Check suite for the mass-spring step's spheres and
 * capsules thinner than the tissue's node spacing (issue 5, beside
 * test_contact's test_no_tunnelling_patch_massspring): the triangle pass of
 * ts_ms_contact.c for primitives, pressed slowly and driven through at
 * 0.5 m/s, each with the pass on and off (ts_tool.thin_off); that a thick
 * tool, which the pass never moves, steps bit for bit as with the pass off;
 * and the swept tool's torque and friction taken at the pose of its
 * contacts (ts__ms_tool_at).
 *
 * The tissue is patch-S (the default patch at resolution 50: 80 mm, nodes
 * 1.63 mm apart) without gravity. The tools are placed between the nodes:
 * the sphere over the centre of the grid cell at the patch's axis (its four
 * corners 1.15 mm away horizontally), the capsule lying along x over the
 * middle of the rows at z = -0.82 and +0.82 mm. References are geometric:
 * how far the tool went below the rest surface, the side of the tool a node
 * is on, and that a sphere's normals all pass through its centre.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_ms_internal.h"
#include "ts_tissue.h"
#include "patch_fixture.h"
#include "test_util.h"

#define DT 1e-3 /* s: the session step */
#define PI 3.14159265358979323846

/* The slow tools here come down at 0.05 mm a step from 1 mm above the
 * surface, so their first 20 steps touch nothing. patch-S has no gravity
 * here: until a tool touches, it is at rest and a step leaves it as it
 * was, positions, velocities and previous positions bit for bit
 * (checked). A sanitizer build (memory and undefined behaviour, not the
 * figures) leaves out 18 of those steps: the tool starts 18 steps further
 * down (0.1 mm above the surface) and the path goes on from there as in
 * the normal build, the same contact from the same state with the same
 * assertions. They were a sixth of each slow press under ASan+UBSan. */
#define SKIP_APPROACH TU_ITERS(0, 18)

static ts_tissue *patch_s(void) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  d.gravity[1] = 0;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

/* The top-sheet nodes at the corners of the grid cell around the patch's
 * axis (|x|, |z| < 1 mm at rest: 0.82 mm each way): up to 4 in c. */
static uint32_t cell_corners(const ts_tissue *t, uint32_t c[4]) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < t->nodes_per_sheet && n < 4; k++)
    if (fabs(t->rest[k][0]) < 1e-3 && fabs(t->rest[k][2]) < 1e-3) c[n++] = k;
  return n;
}

static double corners_y(const ts_tissue *t, const uint32_t c[4]) {
  return 0.25 * (t->x[c[0]][1] + t->x[c[1]][1] + t->x[c[2]][1] + t->x[c[3]][1]);
}

/* A sphere over the cell's centre, or a 20 mm capsule lying along x over
 * the middle between two node rows (x from -10 to 10 mm, z = 0), its
 * lowest point `above` over height y0; frictionless, pass on. */
static ts_tool thin_tool(int capsule, double radius, double y0, double above) {
  ts_tool tl;
  memset(&tl, 0, sizeof tl);
  tl.kind = capsule ? TS_TOOL_CAPSULE : TS_TOOL_SPHERE;
  tl.active = 1;
  tl.radius = radius;
  tl.quat[0] = 1;
  if (capsule) {
    tl.length = 0.02;
    tl.quat[0] = cos(-PI / 4), tl.quat[3] = sin(-PI / 4); /* local +y to +x */
    tl.pos[0] = -0.01;
  }
  tl.pos[1] = y0 + above + radius;
  return tl;
}

static double deepest_node(const ts_tissue *t, const ts_tool *tl) {
  double m = INFINITY;
  for (uint32_t k = 0; k < t->n_nodes; k++)
    if (t->inv_mass[k] > 0) m = fmin(m, ts_tool_distance(tl, t->x[k], NULL));
  return -m;
}

/* The height of the top surface over (px, pz): the highest of the
 * top-sheet triangles whose current xz projection holds the point (NAN:
 * none does). */
static double surface_at(const ts_tissue *t, double px, double pz) {
  double best = NAN;
  for (uint32_t f = 0; f < t->n_tris; f++) {
    const uint32_t *c = t->tris[f];
    if (c[0] >= t->nodes_per_sheet || c[1] >= t->nodes_per_sheet || c[2] >= t->nodes_per_sheet)
      continue;
    const double *a = t->x[c[0]], *b = t->x[c[1]], *d = t->x[c[2]];
    const double det = (b[0] - a[0]) * (d[2] - a[2]) - (d[0] - a[0]) * (b[2] - a[2]);
    if (det == 0) continue;
    const double u = ((px - a[0]) * (d[2] - a[2]) - (d[0] - a[0]) * (pz - a[2])) / det;
    const double v = ((b[0] - a[0]) * (pz - a[2]) - (px - a[0]) * (b[2] - a[2])) / det;
    if (u < 0 || v < 0 || u + v > 1) continue;
    const double y = a[1] + u * (b[1] - a[1]) + v * (d[1] - a[1]);
    if (!(y <= best)) best = y;
  }
  return best;
}

/* Slow press: the tool's lowest point lowered from 1 mm above the cell to
 * PRESS below it at 0.05 m/s (0.05 mm a step, a tenth of the radius at
 * most: never swept), then held 50 ms. Gives the dent of the surface under
 * the tool (over the sphere's centre, under the capsule's middle: x = z =
 * 0) below its rest height, and the tool's force. */
#define PRESS 0.002 /* m */
static void press(int capsule, double radius, int off, double *dent, double f[3]) {
  ts_tissue *t = patch_s();
  uint32_t c[4];
  ck_assert_uint_eq(cell_corners(t, c), 4);
  const double y0 = surface_at(t, 0, 0);
  ck_assert(isfinite(y0));
  ts_tool tl = thin_tool(capsule, radius, y0, 0.001 - SKIP_APPROACH * 5e-5);
  tl.thin_off = off;
  const int n = (int)lround((0.001 + PRESS) / 5e-5) - SKIP_APPROACH;
  double deep = 0;
  for (int i = 1; i <= n + 50; i++) {
    if (i <= n) tl.pos[1] -= 5e-5;
    ck_assert_int_eq(ts_massspring_step(t, DT, &tl, 1, NULL), 0);
    deep = fmax(deep, deepest_node(t, &tl));
  }
  *dent = y0 - surface_at(t, 0, 0);
  memcpy(f, tl.force, sizeof tl.force);
  printf("ms thin %s r %.2g mm pressed %.1f mm slowly, pass %s: surface under it %.4f mm down (the "
         "cell's corners %.4f), force (%.4g %.4g %.4g) N, %u contacts, deepest node %.3g m in\n",
         capsule ? "capsule" : "sphere", radius * 1e3, PRESS * 1e3, off ? "off" : "on", *dent * 1e3,
         (y0 - corners_y(t, c)) * 1e3, f[0], f[1], f[2], tl.contacts, deep);
  ck_assert_msg(deep < 1e-9, "a node %.3g m inside", deep);
  ts_tissue_destroy(t);
}

/* The four tools (sphere and capsule, radius 0.5 and 1 mm; loop index i:
 * bit 0 capsule, bit 1 the 1 mm radius) pressed PRESS in. With the pass
 * the surface under the tool goes down with it, less the pass's allowance
 * (the tool rests a quarter of its diameter, half its radius, behind the
 * triangles it pierces): dent within 50 um of PRESS - r / 2 (measured
 * 1.753 and 1.751 mm for the 0.5 mm sphere and capsule, 1.505 and 1.543
 * mm for the 1 mm ones: the 1 mm capsule also rests on the rows either
 * side, 0.82 mm from its core, 0.43 mm above its lowest point, and the
 * surface between them sags a little less than the pass lets it); the force points up,
 * at least 1 mN and 3 times its tangential part. Without the pass the
 * thin tools slip between the nodes: the surface moves less than 0.1 mm
 * and the force is under 1 mN. Not so the 1 mm capsule pressed slowly: its
 * core is 0.82 mm from the rows either side, so the node projection holds
 * it alone (it needs the pass at 0.5 m/s: test_thin_primitive_fast). */
START_TEST(test_thin_primitive_press) {
  const int capsule = _i & 1;
  const double r = _i & 2 ? 1e-3 : 5e-4;
  double dent, f[3];
  press(capsule, r, 0, &dent, f);
  ck_assert_msg(fabs(dent - (PRESS - 0.5 * r)) < 5e-5, "surface down %.4g mm", dent * 1e3);
  ck_assert_msg(f[1] > 1e-3 && f[1] > 3 * hypot(f[0], f[2]), "force (%.4g %.4g %.4g) N", f[0],
                f[1], f[2]);
  if (capsule && r > 8e-4) return;
#ifdef TS_TEST_SANITIZED
  /* a sanitizer build runs the pass's side alone: the pass-off press is
   * the plain node step, which every other mass-spring test runs there,
   * and the contrast it asserts is a figure of the physics, checked by the
   * normal build (it was 77 % of this test's 185 s under ASan with the
   * fast drive's) */
  return;
#endif
  press(capsule, r, 1, &dent, f);
  ck_assert_msg(dent < 1e-4, "without the pass: surface down %.4g mm", dent * 1e3);
  ck_assert_msg(fabs(f[1]) < 1e-3, "without the pass: force %.4g N", f[1]);
}
END_TEST

/* Driven down at `step` metres a step (0.5 mm: 0.5 m/s) from 1 mm above
 * the cell for 20 mm, as test_contact's tunnel_patch_ms. Watched at every
 * step: the top surface under the core (over the sphere's centre; under
 * the capsule's core at x = -9, -8, .., 9 mm), which must stay below the
 * core. (The nodes themselves may rise above a core that sits between
 * them: the dent around a thin tool is a funnel whose corners, 1.15 mm
 * from a sphere's axis, stand higher than its centre once it is a few
 * millimetres deep.) Gives the (point, step) pairs with the surface above
 * the core, how far the tool's lowest point went behind the surface at
 * most (behind), and the dent of the cell at the end. */
static uint32_t drive(int capsule, double radius, int off, double step, double *dent,
                      double *behind) {
  ts_tissue *t = patch_s();
  uint32_t c[4];
  ck_assert_uint_eq(cell_corners(t, c), 4);
  const double y0 = corners_y(t, c);
  ts_tool tl = thin_tool(capsule, radius, y0, 0.001);
  tl.thin_off = off;
  uint32_t wrong = 0;
  double deep = 0;
  *behind = -INFINITY;
  ts_step_stats st;
  const int n = (int)ceil(0.02 / step);
  for (int i = 0; i < n; i++) {
    tl.pos[1] -= step;
    ck_assert_int_eq(ts_massspring_step(t, DT, &tl, 1, &st), 0);
    for (int q = capsule ? -9 : 0; q <= (capsule ? 9 : 0); q++) {
      const double y = surface_at(t, q * 1e-3, 0.0);
      ck_assert(isfinite(y));
      wrong += y > tl.pos[1];
      *behind = fmax(*behind, y - (tl.pos[1] - radius));
    }
    deep = fmax(deep, deepest_node(t, &tl));
  }
  *dent = y0 - corners_y(t, c);
  printf("ms thin %s r %.2g mm driven 20 mm at %.2g m/s, pass %s: %u substeps a step, %u (point, "
         "step) with the surface above the core, the tool %.4g mm behind the surface at most, cell "
         "%.4g mm down, F %.4g N, deepest node %.3g m in\n",
         capsule ? "capsule" : "sphere", radius * 1e3, step / DT, off ? "off" : "on", st.substeps,
         wrong, *behind * 1e3, *dent * 1e3, tl.force[1], deep);
  ck_assert_msg(deep < 1e-9, "a node %.3g m inside", deep);
  ts_tissue_destroy(t);
  return wrong;
}

/* No tunnelling at 0.5 m/s (issue 5): with the pass the surface stays
 * under the core at every step, the tool no farther behind it than the
 * pass's allowance (half the radius) and 10 um (measured: 0.25 and 0.50
 * mm for the 0.5 and 1 mm tools), and the cell is pushed along, more than
 * 15 mm of the 20 mm drive (measured 17.6 to 18.4 mm; the 2 mm capsule of
 * test_no_tunnelling_patch_massspring: 18.8); without the pass the tool
 * goes through: the surface above the core, the cell pushed less than
 * 5 mm (measured: 0 for the 0.5 mm tools and the 1 mm sphere, 1.95 mm for
 * the 1 mm capsule, whose core meets the rows). */
START_TEST(test_thin_primitive_fast) {
  const int capsule = _i & 1;
  const double r = _i & 2 ? 1e-3 : 5e-4;
  double dent, behind;
  ck_assert_uint_eq(drive(capsule, r, 0, 5e-4, &dent, &behind), 0);
  ck_assert_msg(behind < 0.5 * r + 1e-5, "the tool %.4g mm behind the surface", behind * 1e3);
  ck_assert_msg(dent > 0.015, "cell down %.4g mm", dent * 1e3);
#ifdef TS_TEST_SANITIZED
  return; /* the pass-off drive in the normal build only (as in the press) */
#endif
  ck_assert_uint_gt(drive(capsule, r, 1, 5e-4, &dent, &behind), 0);
  ck_assert_msg(dent < 0.005, "without the pass: cell down %.4g mm", dent * 1e3);
}
END_TEST

/* A 5 mm sphere (thicker than the triangles: the pass never moves one,
 * ts_ms_contact.c) pressed 2 mm into patch-S with friction (0.4 / 0.3),
 * slid 2 mm along x and lifted away at 0.5 m/s (swept): every position,
 * force and torque bit for bit as with the pass off. The step skips its
 * pass (ts__ms_thin_can_act: patch-S's edges are too short for it to act),
 * so the pass itself is also run at every step's end on the pressed
 * tissue (a scan of every triangle, the sphere at its pose): it must mark
 * and move nothing. The path stops at the lift's end, 120 steps: the
 * sphere touches from step 22 to 99 and nothing after (measured), so the
 * 80 steps of recoil it had after the lift were the same code on the same
 * positions in both tissues, with nothing for the pass to act on. */
START_TEST(test_thick_unchanged) {
  ts_tissue *tt[2] = {patch_s(), patch_s()};
  uint32_t c[4];
  ck_assert_uint_eq(cell_corners(tt[0], c), 4);
  const double y0 = corners_y(tt[0], c);
  ts_tool tl[2];
  for (int s = 0; s < 2; s++) {
    tl[s] = thin_tool(0, 5e-3, y0, 0.001 - SKIP_APPROACH * 5e-5);
    tl[s].mu_static = 0.4, tl[s].mu_kinetic = 0.3;
    tl[s].thin_off = s;
  }
  uint32_t contacts = 0;
  for (int i = SKIP_APPROACH; i < 120; i++) {
    for (int s = 0; s < 2; s++) {
      if (i < 60)
        tl[s].pos[1] -= 5e-5;
      else if (i < 100)
        tl[s].pos[0] += 5e-5;
      else
        tl[s].pos[1] += 5e-4;
      ck_assert_int_eq(ts_massspring_step(tt[s], DT, &tl[s], 1, NULL), 0);
    }
    contacts = tl[0].contacts > contacts ? tl[0].contacts : contacts;
    ts__ptool p;
    ts__ms_prepare_tool(&p, &tl[0]);
    p.index = 0;
    ck_assert_int_eq(ts__ms_thin_can_act(&p, ts__ms_longest_edge(tt[0])), 0);
    ck_assert_ptr_nonnull(tt[0]->ms);
    ck_assert_uint_eq(ts__ms_thin_pass(tt[0], tt[0]->ms, &p, (const double (*)[3])p.R, tl[0].pos, 0, 1, 0), 0);
    ck_assert_msg(memcmp(tt[0]->x, tt[1]->x, sizeof *tt[0]->x * tt[0]->n_nodes) == 0, "step %d", i);
    ck_assert(memcmp(tl[0].force, tl[1].force, sizeof tl[0].force) == 0);
    ck_assert(memcmp(tl[0].torque, tl[1].torque, sizeof tl[0].torque) == 0);
    ck_assert_uint_eq(tl[0].contacts, tl[1].contacts);
    if (i == 59) printf("thick sphere pressed 2 mm: F %.4g N, %u contacts\n", tl[0].force[1], tl[0].contacts);
  }
  ck_assert_uint_gt(contacts, 3); /* it did press */
  ts_tissue_destroy(tt[0]);
  ts_tissue_destroy(tt[1]);
}
END_TEST

/* The swept sphere's torque (ts_ms_integrate.c, add_reaction): a 0.8 mm
 * sphere over a node, pass off (node contacts only, each reaction along
 * the line from the node to the centre at the pose it was taken at),
 * frictionless, pressed 1 mm in slowly and then moved along x at 0.5 m/s
 * (0.5 mm a step, over half the radius: swept). Every reaction's line
 * passes through the sphere's centre at its pose, so the torque about the
 * tip (the centre) is zero but for rounding: under 1e-6 of |F| r. Taken
 * about the final centre instead, the swept poses' offsets from it (up to
 * 0.5 mm, a step's travel, across the force) gave |torque| up to 0.54 |F| r
 * (measured with add_reaction's lever arm from tool->pos; now 2.5e-16). */
START_TEST(test_swept_torque) {
  ts_tissue *t = patch_s();
  uint32_t node = UINT32_MAX;
  for (uint32_t k = 0; k < t->nodes_per_sheet; k++)
    if (fabs(t->rest[k][0] - 8.2e-4) < 1e-4 && fabs(t->rest[k][2] - 8.2e-4) < 1e-4) node = k;
  ck_assert_uint_ne(node, UINT32_MAX);
  const double r = 8e-4;
  ts_tool tl;
  memset(&tl, 0, sizeof tl);
  tl.kind = TS_TOOL_SPHERE;
  tl.active = 1;
  tl.radius = r;
  tl.quat[0] = 1;
  tl.thin_off = 1;
  tl.pos[0] = t->x[node][0], tl.pos[1] = t->x[node][1] + r + 1e-3, tl.pos[2] = t->x[node][2];
  for (int i = 0; i < 40; i++) { /* 2 mm at 0.05 mm a step: 1 mm in */
    tl.pos[1] -= 5e-5;
    ck_assert_int_eq(ts_massspring_step(t, DT, &tl, 1, NULL), 0);
  }
  double worst = 0, fy = 0;
  for (int i = 0; i < 10; i++) {
    tl.pos[0] += 5e-4;
    ck_assert_int_eq(ts_massspring_step(t, DT, &tl, 1, NULL), 0);
    const double F = sqrt(tl.force[0] * tl.force[0] + tl.force[1] * tl.force[1] + tl.force[2] * tl.force[2]);
    const double T = sqrt(tl.torque[0] * tl.torque[0] + tl.torque[1] * tl.torque[1] + tl.torque[2] * tl.torque[2]);
    ck_assert(F > 1e-4); /* it is pushing */
    worst = fmax(worst, T / (F * r));
    fy = fmin(fy, tl.force[1]);
    if (i == 9)
      printf("swept 0.8 mm sphere at 0.5 m/s: force (%.4g %.4g %.4g) N, torque (%.3g %.3g %.3g) N m, "
             "worst |torque| / (|F| r) %.3g\n",
             tl.force[0], tl.force[1], tl.force[2], tl.torque[0], tl.torque[1], tl.torque[2], worst);
  }
  ck_assert_msg(worst < 1e-6, "|torque| / (|F| r) %.3g", worst);
  ts_tissue_destroy(t);
}
END_TEST

/* The swept tool's friction (ts__ms_friction): the surface velocity under
 * a node is the tool's rigid motion about its origin at the pose the
 * contact was taken at (at_pos), not the final one. A node moving exactly
 * with that surface (its velocity v + w x (x - at_pos) over the substep,
 * no acceleration) needs no friction to stick: the force must be zero (to
 * rounding, 1e-12 N; measured 8.7e-14). About the final origin (2 mm
 * above at_pos, the turn 10 rad/s about z) it slips by 20 mm/s along x
 * relative to the tool and gets the force that stops that (measured with
 * the final origin: 0.2 N). */
START_TEST(test_swept_friction_origin) {
  ts_tissue *t = patch_s();
  ts_tool tl;
  memset(&tl, 0, sizeof tl);
  tl.kind = TS_TOOL_CAPSULE;
  tl.active = 1;
  tl.radius = 1e-3;
  tl.length = 0.01;
  tl.quat[0] = 1;
  tl.mu_static = 2, tl.mu_kinetic = 1;
  ts__ptool p;
  ts__ms_prepare_tool(&p, &tl);
  const double at[3] = {0, -2e-3, 0}, v[3] = {0.3, -0.1, 0}, w[3] = {0, 0, 10};
  memcpy(p.at_pos, at, sizeof at);
  memcpy(p.vel, v, sizeof v);
  memcpy(p.omega, w, sizeof w);
  const uint32_t i = 0;
  const double h = 1e-5, x[3] = {1e-3, 1.2e-3, 0}, n[3] = {0, 1, 0}, a[3] = {0, 0, 0};
  const double rr[3] = {x[0] - at[0], x[1] - at[1], x[2] - at[2]};
  const double vs[3] = {v[0] + w[1] * rr[2] - w[2] * rr[1], v[1] + w[2] * rr[0] - w[0] * rr[2],
                        v[2] + w[0] * rr[1] - w[1] * rr[0]};
  for (int k = 0; k < 3; k++) {
    t->x[i][k] = x[k];
    t->x_prev[i][k] = x[k] - h * (k == 1 ? 0.0 : vs[k]); /* the tangential part (n is y) */
  }
  double f[3];
  const int stuck = ts__ms_friction(t, i, &p, n, 1.0, a, 1.0 / 1e-4, h, f);
  printf("swept friction: stick %d, f (%.3g %.3g %.3g) N\n", stuck, f[0], f[1], f[2]);
  ck_assert_int_eq(stuck, 1);
  ck_assert_msg(fabs(f[0]) + fabs(f[1]) + fabs(f[2]) < 1e-12, "f (%.3g %.3g %.3g) N", f[0], f[1],
                f[2]);
  ts_tissue_destroy(t);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ms_thin");
  TCase *tc = tcase_create("ms_thin");
  tcase_set_timeout(tc, 600);
  /* a sanitizer build (memory and undefined behaviour) runs two of the
   * four tools, the 0.5 mm capsule and the 1 mm sphere (loop indices 1 and
   * 2): both kinds and both radii, each through the same pass and step
   * code as its sibling, with the same assertions; the normal build runs
   * all four (under ASan at load 8 each fast drive took 61-73 s and each
   * press 33-41 s: nearly all of the test) */
  tcase_add_loop_test(tc, test_thin_primitive_press, TU_ITERS(0, 1), TU_ITERS(4, 3));
  tcase_add_loop_test(tc, test_thin_primitive_fast, TU_ITERS(0, 1), TU_ITERS(4, 3));
  tcase_add_test(tc, test_thick_unchanged);
  tcase_add_test(tc, test_swept_torque);
  tcase_add_test(tc, test_swept_friction_origin);
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
