/*
 * test_refine_checks.c: Check suite for the edges of local refinement
 * (server/core/ts_refine.h) on the built-in patch: LEB's propagation past
 * the selection (its new vertices are nodes of the tissue like the others:
 * no "second search" live, ts_refine.h); refusals (empty selection, index
 * out of range, over the node limit, a bad method, a ray that misses, the
 * XPBD fit's bad arguments) with the source left usable; a prism inverted
 * in the current shape refuses a refinement that rebuilds it, not one
 * elsewhere; and the install's plan at its thresholds
 * (ts_handover_install_plan, ts_handover_drift).
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_region.h"
#include "refine_fixture.h"

/* The install's plan (ts_handover_install_plan): carry converged
 * corrections near their state, chase otherwise for a few rounds, then
 * carry what is near enough and fit again what is not (or what did not
 * converge); a drift that is not a number fits again. And the drift
 * itself: the largest coordinate change, NaN for a NaN position. */
START_TEST(test_install_plan) {
  const double near = 0.5 * TS_HANDOVER_CARRY_DRIFT, mid = 0.5 * (TS_HANDOVER_CARRY_DRIFT + TS_HANDOVER_CHASED_DRIFT),
               far = 2 * TS_HANDOVER_CHASED_DRIFT, good = 0.5 * TS_HANDOVER_CARRY_ERR, bad = 2 * TS_HANDOVER_CARRY_ERR;
  const int last = TS_HANDOVER_CHASE_ROUNDS;
  ck_assert_int_eq(ts_handover_install_plan(near, good, 0), TS_INSTALL_CARRY);
  ck_assert_int_eq(ts_handover_install_plan(near, bad, 0), TS_INSTALL_CHASE);
  ck_assert_int_eq(ts_handover_install_plan(near, NAN, 0), TS_INSTALL_CHASE);
  ck_assert_int_eq(ts_handover_install_plan(mid, good, last - 1), TS_INSTALL_CHASE);
  ck_assert_int_eq(ts_handover_install_plan(mid, good, last), TS_INSTALL_CARRY);
  ck_assert_int_eq(ts_handover_install_plan(mid, bad, last), TS_INSTALL_REFIT);
  ck_assert_int_eq(ts_handover_install_plan(far, good, last), TS_INSTALL_REFIT);
  ck_assert_int_eq(ts_handover_install_plan(NAN, good, 0), TS_INSTALL_REFIT);
  sim a;
  sim_init(&a, 0);
  ts_tissue *b = NULL;
  ck_assert_int_eq(ts_refine_snapshot(a.t, &b), 0);
  ck_assert(ts_handover_drift(a.t, b) == 0);
  b->x[7][2] += 3e-5;
  b->x[9][0] -= 1e-5;
  ck_assert(fabs(ts_handover_drift(a.t, b) - 3e-5) < 1e-12);
  b->x[11][1] = NAN;
  ck_assert(isnan(ts_handover_drift(a.t, b)));
  ck_assert(isnan(ts_handover_drift(NULL, b)));
  ts_tissue_destroy(b);
  sim_free(&a);
}
END_TEST
/* LEB's propagation past the selection (ts_refine.h: why the live path has
 * no "second search"): on the default patch at rest, the live LEB of the
 * live cases' pick makes new surface vertices off the selected triangles
 * (Rivara's propagation into their neighbours; measured 8 of 50), and each
 * of them, like every new vertex, is the midpoint of its parents' rest
 * positions in every sheet (on the rest shape: inside the model) and a
 * free node of the refined tissue with its mass and springs, stepped as
 * the others: nothing lies outside the model to remove. */
START_TEST(test_leb_outside_selection) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL, *r = NULL;
  ts_refine_src *src = NULL, *nsrc = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_refine_src_patch(&d, &src), 0);
  uint32_t *sel = NULL, n = 0;
  const double o[3] = {0.003, 0.05, 0.002}, dir[3] = {0, -1, 0};
  ck_assert_int_eq(ts_refine_pick(src, t, o, dir, 0.005, &sel, &n, NULL), 0);
  ts_refine_opts opts = {TS_REFINE_LEB, 0, 0, 0, 0, NULL, 0, 0, 0, 0};
  ts_refine_info info;
  info.parents = NULL;
  char err[256];
  ck_assert_msg(ts_refine_run(src, t, sel, n, &opts, &r, &nsrc, &info, err, sizeof err) == 0, "%s", err);
  const ts_extrusion *e = src->e, *e2 = nsrc->e;
  ck_assert_uint_eq(e2->nv - e->nv, info.new_verts);
  uint32_t *deg = calloc(r->n_nodes, sizeof *deg);
  ck_assert_ptr_nonnull(deg);
  for (uint32_t i = 0; i < r->n_springs; i++) deg[r->springs[i].a]++, deg[r->springs[i].b]++;
  uint32_t off = 0;
  for (uint32_t j = e->nv; j < e2->nv; j++) {
    int on = 0;
    /* 1e-9 m: on a selected triangle up to rounding (~1e-17 m); a vertex off
       them is at least half an edge (1.7 mm) away */
    for (uint32_t i = 0; i < n && !on; i++) {
      const uint32_t *tr = e->surface_tris[sel[i]];
      on = ts_point_triangle_distance(e2->x[j], e->x[tr[0]], e->x[tr[1]], e->x[tr[2]], NULL) <= 1e-9;
    }
    off += !on;
    for (uint32_t sh = 0; sh < e2->n_sheets; sh++) {
      const uint32_t k = sh * e2->nv + j, i = nsrc->node_of[k];
      ck_assert_uint_ge(i, t->n_nodes);
      const uint32_t *p = info.parents[i - t->n_nodes];
      /* 1e-15 m: the midpoint's rounding on ~0.05 m coordinates */
      for (int c = 0; c < 3; c++)
        ck_assert(fabs(r->rest[i][c] - 0.5 * (r->rest[p[0]][c] + r->rest[p[1]][c])) < 1e-15);
      ck_assert(r->inv_mass[i] > 0 && nsrc->mass[k] > 0);
      /* at least its two half edges and its column's spring */
      ck_assert_uint_ge(deg[i], 3);
    }
  }
  printf("leb: %u triangles selected, %u new surface vertices, %u of them off the selected triangles\n",
         info.selected, info.new_verts, off);
  ck_assert_uint_gt(off, 0); /* the propagation does reach past the selection here */
  /* and the refined tissue steps (the new nodes with the others) */
  ck_assert_int_eq(ts_massspring_step(r, DT, NULL, 0, NULL), 0);
  for (uint32_t i = 0; i < r->n_nodes; i++) ck_assert(isfinite(r->x[i][0] + r->x[i][1] + r->x[i][2]));
  free(deg);
  free(sel);
  free(info.parents);
  ts_tissue_destroy(r);
  ts_tissue_destroy(t);
  ts_refine_src_free(src);
  ts_refine_src_free(nsrc);
}
END_TEST

START_TEST(test_refusals) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL, *r = NULL;
  ts_refine_src *src = NULL, *nsrc = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_refine_src_patch(&d, &src), 0);
  char err[256];
  ts_refine_opts o = {TS_REFINE_LOOP, 0, 0, 0, 0, NULL, 0, 0, 0, 0};
  uint32_t sel[2] = {10, 11};
  ck_assert_int_eq(ts_refine_run(src, t, sel, 0, &o, &r, &nsrc, NULL, err, sizeof err), TS_EINVAL);
  ck_assert(strstr(err, "empty") != NULL);
  uint32_t bad[2] = {10, 99999};
  ck_assert_int_eq(ts_refine_run(src, t, bad, 2, &o, &r, &nsrc, NULL, err, sizeof err), TS_EINVAL);
  ck_assert(strstr(err, "out of range") != NULL);
  o.max_nodes = t->n_nodes + 3; /* fewer than one new vertex per sheet */
  ck_assert_int_eq(ts_refine_run(src, t, sel, 2, &o, &r, &nsrc, NULL, err, sizeof err), TS_EFULL);
  o.method = 7;
  ck_assert_int_eq(ts_refine_run(src, t, sel, 2, &o, &r, &nsrc, NULL, err, sizeof err), TS_EINVAL);
  ck_assert_ptr_null(r);
  ck_assert_ptr_null(nsrc);
  /* render triangles: every layer's top sheet maps (the outer sheet, and
   * the submucosa's opening group 1, seen when the mucosa is hidden), a
   * side wall or the bottom does not */
  uint32_t st = 0;
  ck_assert_int_eq(ts_refine_surface_tri(src, t, 5, &st), 0);
  ck_assert_uint_eq(st, 5);
  ck_assert_int_eq(ts_refine_surface_tri(src, t, t->layer_tri_count[0] + 5, &st), 0);
  ck_assert_uint_eq(st, 5);
  ck_assert_int_eq(ts_refine_surface_tri(src, t, src->e->n_surface_tris, &st), TS_EINVAL);
  ck_assert_int_eq(ts_refine_surface_tri(src, t, t->n_tris - 1, &st), TS_EINVAL);
  ck_assert_int_eq(ts_refine_surface_tri(src, t, t->n_tris, &st), TS_EINVAL);
  /* a ray that misses */
  uint32_t *ps = NULL, np = 0;
  const double o2[3] = {1, 1, 1}, dir[3] = {0, 1, 0};
  ck_assert_int_eq(ts_refine_pick(src, t, o2, dir, 0.005, &ps, &np, NULL), TS_ERANGE);
  /* the XPBD fit: a tissue without a hand-over, a bad step, no parents */
  {
    ts_xpbd_def xd = ts_xpbd_default_def();
    ck_assert_int_eq(ts_handover_fit_xpbd(t, t, NULL, &xd, NULL, 0, 0, DT, NULL), TS_EINVAL);
  }
  /* the source is still usable after the refusals */
  o.method = TS_REFINE_LEB;
  o.max_nodes = 0;
  ck_assert_int_eq(ts_refine_run(src, t, sel, 2, &o, &r, &nsrc, NULL, err, sizeof err), 0);
  ck_assert_uint_gt(r->n_nodes, t->n_nodes);
  ck_assert_int_eq(check_surface(r), 2);
  {
    ts_xpbd_def xd = ts_xpbd_default_def();
    ts_handover_fit_stats fs;
    fs.err = 0;
    ck_assert_ptr_nonnull(r->hand);
    ck_assert_int_eq(ts_handover_fit_xpbd(r, t, NULL, &xd, NULL, 0, 0, DT, &fs), TS_EINVAL); /* new nodes, no parents */
    ck_assert_int_eq(ts_handover_fit_xpbd(r, t, NULL, &xd, NULL, 0, 0, 0.0, &fs), TS_EINVAL);
    ck_assert(isnan(fs.err));
  }
  ts_tissue_destroy(r);
  ts_tissue_destroy(t);
  ts_refine_src_free(src);
  ts_refine_src_free(nsrc);
}
END_TEST

/* Whether any layer-0 prism around outer-surface vertex j of src is
 * refused (ts_prism_check) at t's current positions. */
static int inverted_at(const ts_refine_src *src, const ts_tissue *t, uint32_t j) {
  const ts_extrusion *e = src->e;
  for (uint32_t f = 0; f < e->n_surface_tris; f++) {
    const uint32_t *tr = e->surface_tris[f];
    if (tr[0] != j && tr[1] != j && tr[2] != j) continue;
    double P[3][3], Q[3][3];
    for (int k = 0; k < 3; k++) {
      memcpy(P[k], t->x[src->node_of[tr[k]]], sizeof P[k]);
      memcpy(Q[k], t->x[src->node_of[e->nv + tr[k]]], sizeof Q[k]);
    }
    if (ts_prism_check((const double (*)[3])P, (const double (*)[3])Q, NULL, NULL)) return 1;
  }
  return 0;
}

/* Outer node j turned through the next sheet (mirrored at its node there):
 * the layer-0 prisms around it are inverted in the current shape. */
static void invert_at(const ts_refine_src *src, ts_tissue *t, uint32_t j) {
  uint32_t a = src->node_of[j], b = src->node_of[src->e->nv + j];
  for (int c = 0; c < 3; c++) t->x[a][c] = 2 * t->x[b][c] - t->x[a][c];
  ck_assert(inverted_at(src, t, j));
}

/* The current-shape check covers only the prisms a refinement builds anew:
 * with an outer node turned through the next sheet far from the selection
 * (the non-anchored vertex farthest from the selected triangle), Loop
 * refines and keeps that node as it is; turned at a vertex of the selected
 * triangle, the refinement is refused (TS_EMESH, the prism named) and
 * leaves nothing behind. */
START_TEST(test_inverted_elsewhere) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL, *r = NULL;
  ts_refine_src *src = NULL, *nsrc = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_refine_src_patch(&d, &src), 0);
  const ts_extrusion *e = src->e;
  /* the selection: the surface triangle nearest the patch's centre axis */
  uint32_t sel = 0;
  double best = INFINITY;
  for (uint32_t f = 0; f < e->n_surface_tris; f++) {
    const uint32_t *tr = e->surface_tris[f];
    double cx = 0, cz = 0;
    for (int k = 0; k < 3; k++) cx += e->x[tr[k]][0] / 3, cz += e->x[tr[k]][2] / 3;
    if (hypot(cx, cz) < best) best = hypot(cx, cz), sel = f;
  }
  const uint32_t *st = e->surface_tris[sel];
  uint32_t far = 0;
  double dmax = -1;
  for (uint32_t j = 0; j < e->nv; j++) {
    if (src->anchored[j]) continue;
    double dd = 0;
    for (int c = 0; c < 3; c++) {
      double m = (e->x[st[0]][c] + e->x[st[1]][c] + e->x[st[2]][c]) / 3;
      dd += (e->x[j][c] - m) * (e->x[j][c] - m);
    }
    if (dd > dmax) dmax = dd, far = j;
  }
  ck_assert(sqrt(dmax) > 0.01); /* m: several triangles away (the patch's are ~3 mm) */
  char err[256];
  ts_refine_opts o = {TS_REFINE_LOOP, 0, 0, 0, 0, NULL, 0, 0, 0, 0};
  invert_at(src, t, far);
  ts_refine_info info;
  info.parents = NULL;
  ck_assert_int_eq(ts_refine_run(src, t, &sel, 1, &o, &r, &nsrc, &info, err, sizeof err), 0);
  ck_assert_uint_gt(r->n_nodes, t->n_nodes);
  const uint32_t a = src->node_of[far];
  for (int c = 0; c < 3; c++) ck_assert(r->x[a][c] == t->x[a][c]); /* kept, bit for bit */
  ck_assert(inverted_at(nsrc, r, far)); /* still inverted: untouched */
  free(info.parents);
  ts_tissue_destroy(r);
  ts_refine_src_free(nsrc);
  r = NULL;
  nsrc = NULL;
  /* inside: a non-anchored vertex of the selected triangle */
  uint32_t in = src->anchored[st[0]] ? (src->anchored[st[1]] ? st[2] : st[1]) : st[0];
  invert_at(src, t, in);
  ck_assert_int_eq(ts_refine_run(src, t, &sel, 1, &o, &r, &nsrc, NULL, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "is inverted in the current shape") != NULL, "%s", err);
  ck_assert_msg(strstr(err, "layer 0") != NULL, "%s", err);
  ck_assert_ptr_null(r);
  ck_assert_ptr_null(nsrc);
  ts_tissue_destroy(t);
  ts_refine_src_free(src);
}
END_TEST

static Suite *refine_suite(void) {
  Suite *s = suite_create("refine_checks");
  TCase *tc = tcase_create("checks");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_leb_outside_selection);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_inverted_elsewhere);
  tcase_add_test(tc, test_install_plan);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a failing case's fork keeps what it printed */
  SRunner *sr = srunner_create(refine_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
