/*
 * test_step_stop.c: a step asked to stop (ts_tissue.stop, what a stopping
 * daemon sets: server.h's stopping) leaves before its next substep with
 * TS_ESHUTDOWN, for both moving solvers (mass-spring and XPBD), so that
 * shutting down does not wait out a step of a huge tissue (a 1,048,576-node
 * patch's step took 11 s, over --shutdown-timeout's 5 s). On the default
 * patch falling under gravity: steps with the flag clear move the nodes;
 * with it set the step returns TS_ESHUTDOWN and no node, velocity or the
 * clock moves (the flag is read before the first substep); with no flag
 * (NULL, every tissue outside the daemon) steps go on as before.
 * The quasi-static solves (a session's press, its build's settling under
 * gravity) look at the flag every 64th sweep: with it set, the plain and
 * the accelerated relaxation and the refined region solve return
 * TS_ESHUTDOWN with no node moved (the solve's start restored, the refined
 * copy not written back); with it clear each converges (a press's solve
 * on the patch at --patch-resolution 120, 57,600 nodes, took 5.9 s in a
 * daemon).
 * Builds look at the flag too (a 1,048,576-node patch's build took 40 s,
 * about 30 s of it in the step's preparation, and a stop waited it out): the
 * patch's springs (each layer's prisms, each sheet's springs), the step's
 * preparation (between its stages, and in the stability bounds' power
 * iterations and the hot springs' passes), and a mesh's build, each
 * returning TS_ESHUTDOWN and no tissue when it is set, and what they
 * built before when it is clear; a prepared tissue asked to prepare again
 * keeps its step data; a derived tissue keeps the flag.
 */
#include "ts_check.h"
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_massspring.h"
#include "ts_mesh_io.h"
#include "ts_mesh_tissue.h"
#include "ts_ms_internal.h"
#include "ts_qstatic.h"
#include "ts_qstatic_refine.h"
#include "ts_tissue.h"
#include "ts_xpbd.h"
#include "../integration/grid_obj.h"

/* The default patch at resolution 12 (576 nodes): enough for several
 * substeps and sweeps, cheap under the sanitizers. */
static ts_tissue *small_patch(void) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 12;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

typedef int (*step_fn)(void *solver, ts_tissue *t);

static int ms_step(void *solver, ts_tissue *t) {
  (void)solver;
  return ts_massspring_step(t, 1e-3, NULL, 0, NULL);
}

static int xpbd_step(void *solver, ts_tissue *t) {
  return ts_xpbd_step(solver, t, 1e-3, NULL, 0, NULL);
}

/* Three steps with the flag clear, one with it set, one with no flag. */
static void check(const char *name, ts_tissue *t, void *solver, step_fn step) {
  atomic_int stop;
  atomic_init(&stop, 0);
  t->stop = &stop;
  const size_t bytes = sizeof *t->x * t->n_nodes;
  double(*x0)[3] = malloc(bytes);
  double(*v0)[3] = malloc(bytes);
  ck_assert_ptr_nonnull(x0);
  ck_assert_ptr_nonnull(v0);
  memcpy(x0, t->x, bytes);
  for (int k = 0; k < 3; k++) ck_assert_int_eq(step(solver, t), 0);
  ck_assert_msg(memcmp(x0, t->x, bytes) != 0, "%s: gravity moved nothing", name);

  memcpy(x0, t->x, bytes);
  memcpy(v0, t->v, bytes);
  const double time = t->time;
  const uint64_t steps = t->steps;
  atomic_store(&stop, 1);
  ck_assert_int_eq(step(solver, t), TS_ESHUTDOWN);
  ck_assert_msg(memcmp(x0, t->x, bytes) == 0, "%s: a stopped step moved a node", name);
  ck_assert_msg(memcmp(v0, t->v, bytes) == 0, "%s: a stopped step changed a velocity", name);
  ck_assert(t->time == time);
  ck_assert_uint_eq(t->steps, steps);

  t->stop = NULL; /* no flag: a step as ever (from the state left) */
  ck_assert_int_eq(step(solver, t), 0);
  ck_assert_uint_eq(t->steps, steps + 1);
  free(x0);
  free(v0);
}

START_TEST(test_massspring_stops) {
  ts_tissue *t = small_patch();
  check("mass-spring", t, NULL, ms_step);
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_xpbd_stops) {
  ts_tissue *t = small_patch();
  ts_xpbd *s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  check("XPBD", t, s, xpbd_step);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

/* The solves from rest under gravity (nothing held), whole tissue or the
 * region around the patch's middle, stopped (want TS_ESHUTDOWN, x as it
 * was) or not (want convergence). */
static void qs_solves(ts_tissue *t, ts_qstatic *q, int stopped) {
  const size_t bytes = sizeof *t->x * t->n_nodes;
  double(*x)[3] = malloc(bytes);
  ck_assert_ptr_nonnull(x);
  const int want = stopped ? TS_ESHUTDOWN : 0;
  ts_qstatic_stats st;

  memcpy(x, t->rest, bytes);
  ck_assert_int_eq(ts_qstatic_solve(q, x, NULL, NULL, 0, NULL, &st), want);
  ck_assert_int_eq(memcmp(x, t->rest, bytes) == 0, stopped);
  if (!stopped) ck_assert(st.converged);

  memcpy(x, t->rest, bytes);
  ck_assert_int_eq(ts_qstatic_prepare(q, x, NULL, NULL, 0, NULL, 0), 0);
  ck_assert_int_eq(ts_qstatic_relax_accel(q, x, NULL, &st), want);
  ck_assert_int_eq(memcmp(x, t->rest, bytes) == 0, stopped);
  if (!stopped) ck_assert(st.converged);

  uint32_t mid = 0;
  for (uint32_t i = 1; i < t->nodes_per_sheet; i++)
    if (fabs(t->rest[i][0]) + fabs(t->rest[i][2]) < fabs(t->rest[mid][0]) + fabs(t->rest[mid][2]))
      mid = i;
  ts_qsrefine *r = NULL;
  ts_qsrefine_def d = {.max_edge = ts_qsrefine_mean_edge(q, t)};
  ck_assert_int_eq(ts_qsrefine_create(q, t, &d, &r), 0);
  memcpy(x, t->rest, bytes);
  ck_assert_int_eq(ts_qsrefine_solve(r, x, t->rest[mid], 0.015, NULL, NULL, 0, NULL, &st), want);
  ck_assert_int_eq(memcmp(x, t->rest, bytes) == 0, stopped);
  if (!stopped) ck_assert(st.converged);
  ts_qsrefine_destroy(r);
  free(x);
}

START_TEST(test_qstatic_stops) {
  ts_tissue *t = small_patch();
  atomic_int stop;
  atomic_init(&stop, 0);
  t->stop = &stop; /* the solver takes the tissue's flag when made */
  ts_qstatic_params p = ts_qstatic_default_params(t);
  ts_qstatic *q = NULL;
  ck_assert_int_eq(ts_qstatic_create(t, &p, &q), 0);
  qs_solves(t, q, 0);
  atomic_store(&stop, 1);
  qs_solves(t, q, 1);
  ts_qstatic_destroy(q);
  ts_tissue_destroy(t);
}
END_TEST

/* The patch of resolution 12 built with the flag set (nothing), clear
 * (the same tissue as ts_patch_create's, bit for bit) and prepared again
 * with it set (refused, the step data kept). */
START_TEST(test_patch_build_stops) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 12;
  atomic_int stop;
  atomic_init(&stop, 1);
  ts_tissue *t = (ts_tissue *)1;
  ck_assert_int_eq(ts_patch_create_stoppable(&d, &stop, &t), TS_ESHUTDOWN);
  ck_assert_ptr_null(t);

  atomic_store(&stop, 0);
  ck_assert_int_eq(ts_patch_create_stoppable(&d, &stop, &t), 0);
  ts_tissue *ref = small_patch();
  ck_assert_ptr_eq(t->stop, &stop);
  ck_assert_uint_eq(t->n_nodes, ref->n_nodes);
  ck_assert_uint_eq(t->n_springs, ref->n_springs);
  ck_assert(memcmp(t->springs, ref->springs, sizeof *t->springs * t->n_springs) == 0);
  ck_assert(memcmp(t->inv_mass, ref->inv_mass, sizeof *t->inv_mass * t->n_nodes) == 0);
  ck_assert(t->stable_dt == ref->stable_dt && t->stable_dt > 0);
  ck_assert(t->ms->w2 == ref->ms->w2 && t->ms->g == ref->ms->g);

  /* derived tissues (a refinement's) keep the flag */
  ts_tissue *c = NULL;
  ck_assert_int_eq(ts_tissue_alloc(4, 0, 0, &c), 0);
  ts_tissue_copy_settings(c, t);
  ck_assert_ptr_eq(c->stop, &stop);
  ts_tissue_destroy(c);

  /* asked again with the flag set: refused, the tissue keeps its step data */
  struct ts__ms *ms = t->ms;
  const double dt = t->stable_dt;
  atomic_store(&stop, 1);
  ck_assert_int_eq(ts_massspring_prepare(t), TS_ESHUTDOWN);
  ck_assert_ptr_eq(t->ms, ms);
  ck_assert(t->stable_dt == dt);
  t->stop = NULL;
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  ck_assert(t->stable_dt == dt);
  ts_tissue_destroy(ref);
  ts_tissue_destroy(t);
}
END_TEST

/* The preparation's long passes: the springs' build (before each layer's
 * prisms and each sheet's springs), the hot springs (every 2^20 springs
 * and before the sort) and the power iterations (before each). */
START_TEST(test_build_passes_stop) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 12;
  ts_extrusion *e = NULL;
  ck_assert_int_eq(ts_patch_extrusion(&d, &e), 0);
  atomic_int stop;
  atomic_init(&stop, 1);
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_build_unprepared(e, d.layers, NULL, d.gravity, &stop, &t),
                   TS_ESHUTDOWN);
  ck_assert_ptr_null(t);
  atomic_store(&stop, 0);
  ck_assert_int_eq(ts_tissue_build_unprepared(e, d.layers, NULL, d.gravity, &stop, &t), 0);
  ck_assert_ptr_nonnull(t);
  ck_assert_ptr_null(t->ms);
  ts_extrusion_free(e);

  t->stop = &stop;
  ts__hs *hs = malloc(sizeof *hs * t->n_springs);
  ck_assert_ptr_nonnull(hs);
  uint32_t cnt[3];
  atomic_store(&stop, 1);
  ck_assert_int_eq(ts__ms_build_hot(t, hs, cnt, NULL), -3);
  atomic_store(&stop, 0);
  ck_assert_int_eq(ts__ms_build_hot(t, hs, cnt, NULL), 0);
  ck_assert_uint_eq(cnt[0] + cnt[1] + cnt[2], t->n_springs);
  free(hs);

  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  const size_t rows = sizeof(double[3]) * t->n_nodes;
  double(*x0)[3] = malloc(rows), (*y0)[3] = malloc(rows), (*x1)[3] = malloc(rows),
  (*y1)[3] = malloc(rows);
  ck_assert(x0 && y0 && x1 && y1);
  double w2 = -1, g = -1;
  atomic_store(&stop, 1);
  ck_assert_int_eq(ts__ms_power_bounds(t, t->ms, x0, y0, x1, y1, NULL, &w2, &g, NULL), -2);
  atomic_store(&stop, 0);
  ck_assert_int_eq(ts__ms_power_bounds(t, t->ms, x0, y0, x1, y1, NULL, &w2, &g, NULL), 0);
  ck_assert(w2 > 0 && isfinite(w2) && g > 0 && isfinite(g));
  free(x0);
  free(y0);
  free(x1);
  free(y1);
  ts_tissue_destroy(t);
}
END_TEST

/* A small uploaded surface (a 6 x 6 grid, OBJ: grid_obj.h) extruded and
 * built with the flag set (TS_ESHUTDOWN, nothing made, err says the build
 * was stopped) and clear (made). */
START_TEST(test_mesh_build_stops) {
  const int g = 6;
  size_t n = 0;
  char *obj = ts_grid_obj(g, &n);
  ck_assert_ptr_nonnull(obj);
  ts_patch_def d = ts_default_patch_def();
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  atomic_int stop;
  atomic_init(&stop, 1);
  o.stop = &stop;
  char err[256] = "";
  const double th[3] = {d.layers[0].thickness, d.layers[1].thickness, d.layers[2].thickness};
  ts_extrusion *e = (ts_extrusion *)1;
  ck_assert_int_eq(ts_mesh_tissue_extrude((const uint8_t *)obj, n, TS_MESH_OBJ, &o, th, 3, &e,
                                          NULL, NULL, NULL, 0, err, sizeof err),
                   TS_ESHUTDOWN);
  ck_assert_ptr_null(e);
  ck_assert_msg(strstr(err, "stopped") != NULL, "%s", err);
  atomic_store(&stop, 0);
  ck_assert_int_eq(ts_mesh_tissue_extrude((const uint8_t *)obj, n, TS_MESH_OBJ, &o, th, 3, &e,
                                          NULL, NULL, NULL, 0, err, sizeof err),
                   0);
  ck_assert_uint_eq(e->nv, (uint32_t)(g * g));
  ts_extrusion_free(e);

  atomic_store(&stop, 1);
  ts_mesh_tissue mt;
  ck_assert_int_eq(ts_mesh_tissue_build((const uint8_t *)obj, n, TS_MESH_OBJ, &o, d.layers,
                                        d.n_layers, &mt, err, sizeof err),
                   TS_ESHUTDOWN);
  ck_assert_msg(strstr(err, "stopped") != NULL, "%s", err);
  atomic_store(&stop, 0);
  err[0] = 0;
  ck_assert_int_eq(ts_mesh_tissue_build((const uint8_t *)obj, n, TS_MESH_OBJ, &o, d.layers,
                                        d.n_layers, &mt, err, sizeof err),
                   0);
  ck_assert_ptr_eq(mt.t->stop, &stop);
  ck_assert_uint_eq(mt.t->n_nodes, (uint32_t)(g * g) * (d.n_layers + 1));
  ck_assert_ptr_nonnull(mt.t->ms);
  ts_mesh_tissue_free(&mt);
  free(obj);
}
END_TEST

int main(void) {
  Suite *s = suite_create("step_stop");
  TCase *c = tcase_create("stop");
  tcase_add_test(c, test_massspring_stops);
  tcase_add_test(c, test_xpbd_stops);
  tcase_add_test(c, test_qstatic_stops);
  tcase_add_test(c, test_patch_build_stops);
  tcase_add_test(c, test_build_passes_stop);
  tcase_add_test(c, test_mesh_build_stops);
  suite_add_tcase(s, c);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
