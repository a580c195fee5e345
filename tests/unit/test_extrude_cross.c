/*
 * test_extrude_cross.c: Check suite for the extrusion's crossing check
 * (server/core/ts_extrude_cross.c) as the thinning uses it: the tree kept
 * across rounds and refitted for the moved columns finds exactly the pairs a
 * fresh tree finds, and a surface of many overlapping closed parts is
 * refused at the check's cap of pairs per round instead of being counted
 * pair by pair. A live refinement's rest shape (midpoints: LEB, linear Loop)
 * does not make the layers cross (ts_refine.h says why).
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
#include "ts_extrude_internal.h"
#include "ts_leb.h"
#include "ts_loop.h"
#include "ts_mesh.h"

static int cmp_pair(const void *pa, const void *pb) {
  const uint32_t *a = pa, *b = pb;
  if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
  return a[1] < b[1] ? -1 : a[1] > b[1];
}

/* Every pair of c over e's positions now, sorted; *n their count. */
static uint32_t (*pairs_of(const ts__cross_check *c, const ts_extrusion *e, uint32_t *n))[2] {
  uint32_t(*p)[2] = malloc(sizeof *p * TS__CROSS_CAP);
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(ts__cross_check_pairs(c, e, p, TS__CROSS_CAP, n), 0);
  ck_assert_uint_le(*n, TS__CROSS_CAP);
  qsort(p, *n, sizeof *p, cmp_pair);
  return p;
}

/* liver-smooth at the full 4.5 mm (no thinning: refused, returned; its
 * sheets cross at hundreds of pairs). Then rounds as the thinning makes them: the
 * inner sheets of a changing third of the columns pulled towards the
 * surface (by 0.8, as a thinning step), the kept tree refitted for just
 * those nodes. After every round its pairs are exactly those of a tree
 * built afresh over the same positions (the same set, compared sorted), and
 * the pulling changes the set (the rounds test something). */
START_TEST(test_refit_pairs_equal_rebuild) {
  ts_mesh *m = fx_load("liver-smooth.obj", 0.01);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 3;
  d.thickness[0] = 1e-3;
  d.thickness[1] = 1.5e-3;
  d.thickness[2] = 2e-3;
  d.mode = TS_EXTRUDE_NORMAL;
  d.max_relax = 1e-3;
  ts_extrusion *e = NULL;
  char err[512];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);

  ts__cross_check *kept = NULL;
  ck_assert_int_eq(ts__cross_check_new(e, &kept), 0);
  uint32_t n0;
  uint32_t(*p0)[2] = pairs_of(kept, e, &n0);
  ck_assert_uint_gt(n0, 100);

  const uint32_t nv = e->nv, S = e->n_sheets;
  uint32_t *moved = malloc(sizeof *moved * (size_t)S * nv);
  ck_assert_ptr_nonnull(moved);
  uint32_t n_prev = n0, changes = 0;
  for (uint32_t round = 0; round < 6; round++) {
    uint32_t n_moved = 0;
    for (uint32_t j = 0; j < nv; j++) {
      if ((j + round) % 3) continue;
      for (uint32_t s = 1; s < S; s++) {
        double *x = e->x[(size_t)s * nv + j];
        for (int k = 0; k < 3; k++) x[k] = e->x[j][k] + 0.8 * (x[k] - e->x[j][k]);
        moved[n_moved++] = s * nv + j;
      }
    }
    ck_assert_int_eq(ts__cross_check_moved(kept, e, moved, n_moved), 0);
    uint32_t nk, nf;
    uint32_t(*pk)[2] = pairs_of(kept, e, &nk);
    ts__cross_check *fresh = NULL;
    ck_assert_int_eq(ts__cross_check_new(e, &fresh), 0);
    uint32_t(*pf)[2] = pairs_of(fresh, e, &nf);
    printf("round %u: %u nodes moved, %u pairs (kept tree) vs %u (fresh tree)\n", round, n_moved, nk, nf);
    ck_assert_uint_eq(nk, nf);
    ck_assert_int_eq(memcmp(pk, pf, sizeof *pk * nk), 0);
    changes += nk != n_prev;
    n_prev = nk;
    free(pk);
    free(pf);
    ts__cross_check_free(fresh);
  }
  ck_assert_uint_gt(changes, 0);
  ck_assert_uint_lt(n_prev, n0);
  free(moved);
  free(p0);
  ts__cross_check_free(kept);
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

/* K closed boxes 30 mm across (8 cells a side), each moved by a further
 * (0.7, 0.5, 0.3) mm from the last and turned by a few degrees: all
 * overlap, every pair crossing along the lines where their faces and
 * their layers' sheets meet, far more than TS__CROSS_CAP pairs in all. The
 * extrusion (the daemon's thinning, floor 0.1) is refused with TS_EMESH
 * and a message naming the count and the cap; the check stopped at cap + 1
 * pairs (n_crossings: it did not count them all) in its first round (no
 * round's pairs were thinned: n_crossings_thinned 0). Without the cap
 * the same call counts every pair of every round. */
START_TEST(test_overlapping_parts_capped) {
  const double len[3] = {0.03, 0.03, 0.03};
  const uint32_t cells[3] = {8, 8, 8};
  const uint32_t K = 24;
  ts_mesh *box = fx_box(len, cells);
  ts_mesh *m = fx_mesh(K * box->n_verts, K * box->n_tris);
  for (uint32_t p = 0; p < K; p++) {
    double a = 0.05 * p, c = cos(a), s = sin(a);
    for (uint32_t j = 0; j < box->n_verts; j++) {
      const double *v = box->v[j];
      double *w = m->v[p * box->n_verts + j];
      w[0] = c * v[0] - s * v[1] + 7e-4 * p;
      w[1] = s * v[0] + c * v[1] + 5e-4 * p;
      w[2] = v[2] + 3e-4 * p;
    }
    for (uint32_t f = 0; f < box->n_tris; f++)
      for (int k = 0; k < 3; k++) m->t[p * box->n_tris + f][k] = p * box->n_verts + box->t[f][k];
  }
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 3;
  d.thickness[0] = 1e-3;
  d.thickness[1] = 1.5e-3;
  d.thickness[2] = 2e-3;
  d.mode = TS_EXTRUDE_NORMAL;
  d.min_depth_fraction = 0.1;
  ts_extrusion *e = NULL;
  char err[512] = "";
  int rc = ts_extrude(m, &d, &e, err, sizeof err);
  printf("%u overlapping boxes, %u triangles: %s (%s)\n", K, m->n_tris, err, ts_err_name(rc));
  ck_assert_int_eq(rc, TS_EMESH);
  ck_assert_ptr_nonnull(e);
  ck_assert_uint_eq(e->n_crossings, TS__CROSS_CAP + 1);
  ck_assert_uint_eq(e->n_crossings_thinned, 0);
  ck_assert_uint_gt(e->n_tris, 0); /* assembled, for a tool to show */
  char want[96];
  snprintf(want, sizeof want, "%u or more triangle pairs", TS__CROSS_CAP + 1);
  ck_assert_msg(strstr(err, want) != NULL, "%s", err);
  snprintf(want, sizeof want, "cap of %u", TS__CROSS_CAP);
  ck_assert_msg(strstr(err, want) != NULL, "%s", err);
  ts_extrusion_free(e);

  /* without thinning (and layers thin enough, 0.3 mm, that no prism folds
   * at the boxes' edges): the one count stops at the cap as well */
  d.min_depth_fraction = 0;
  d.thickness[0] = d.thickness[1] = d.thickness[2] = 1e-4;
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), TS_EMESH);
  ck_assert_uint_eq(e->n_crossings, TS__CROSS_CAP + 1);
  ck_assert_msg(strstr(err, want) != NULL, "%s", err);
  ts_extrusion_free(e);
  ts_mesh_free(m);
  ts_mesh_free(box);
}
END_TEST


/* ts_refine.h: a live refinement cannot make sheets cross (new nodes at
 * midpoints of their own sheet's edges, conforming splits: every sheet the
 * same point set). liver-smooth and spot as the daemon extrudes them (no
 * crossings left after the thinning), then the whole surface refined the
 * two live ways: longest-edge bisection to half the longest edge, and Loop's
 * topology with midpoints (TS_LOOP_LINEAR) on every triangle. The crossing
 * check finds none on either (and the refinement did refine: 3 / 4 more
 * triangles at least). Loop's smoothing rules, which move the rest shape,
 * are not a live path and not claimed (on these two whole surfaces they
 * happen to give none either, measured). */
START_TEST(test_live_refinement_no_crossings) {
  const char *name = _i ? "spot.obj" : "liver-smooth.obj";
  ts_mesh *m = fx_load(name, _i ? 0.1 : 0.01);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 3;
  d.thickness[0] = 1e-3;
  d.thickness[1] = 1.5e-3;
  d.thickness[2] = 2e-3;
  d.mode = TS_EXTRUDE_NORMAL;
  d.max_relax = 1e-3;
  d.min_depth_fraction = 0.1;
  ts_extrusion *e = NULL;
  char err[512];
  ck_assert_msg(ts_extrude(m, &d, &e, err, sizeof err) == 0, "%s", err);
  ck_assert_uint_gt(e->n_crossings_thinned, 0);
  ck_assert_uint_eq(e->n_crossings, 0);

  double longest = 0;
  for (uint32_t f = 0; f < e->n_surface_tris; f++)
    for (int k = 0; k < 3; k++)
      longest = fmax(longest, fx_dist(e->x[e->surface_tris[f][k]], e->x[e->surface_tris[f][(k + 1) % 3]]));
  ts_leb_def ld;
  memset(&ld, 0, sizeof ld);
  ld.max_edge = 0.5 * longest;
  ts_extrusion *leb = NULL;
  ck_assert_msg(ts_leb_extrusion(e, &ld, &leb, NULL, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(ts__extrusion_count_crossings(leb, err, sizeof err), 0);
  uint32_t *sel = malloc(sizeof *sel * e->n_surface_tris);
  for (uint32_t f = 0; f < e->n_surface_tris; f++) sel[f] = f;
  ts_extrusion *loop = NULL;
  ck_assert_msg(ts_loop_extrusion(e, sel, e->n_surface_tris, TS_LOOP_LINEAR, &loop, NULL, err, sizeof err) == 0,
                "%s", err);
  ck_assert_int_eq(ts__extrusion_count_crossings(loop, err, sizeof err), 0);
  printf("%s: %u surface triangles; LEB to %.3g mm: %u, %u crossing pairs; Loop (midpoints): %u, %u crossing "
         "pairs\n",
         name, e->n_surface_tris, ld.max_edge * 1e3, leb->n_surface_tris, leb->n_crossings, loop->n_surface_tris,
         loop->n_crossings);
  ck_assert_uint_ge(4 * leb->n_surface_tris, 7 * e->n_surface_tris);
  ck_assert_uint_eq(loop->n_surface_tris, 4 * e->n_surface_tris);
  ck_assert_uint_eq(leb->n_crossings, 0);
  ck_assert_uint_eq(loop->n_crossings, 0);
  free(sel);
  ts_extrusion_free(leb);
  ts_extrusion_free(loop);
  ts_extrusion_free(e);
  ts_mesh_free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("extrude_cross");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_refit_pairs_equal_rebuild);
  tcase_add_test(tc, test_overlapping_parts_capped);
  tcase_add_loop_test(tc, test_live_refinement_no_crossings, 0, 2);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
