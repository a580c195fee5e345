/*
 * test_refine_hold.c: Check suite for what keeps a live refinement's part
 * on the physics thread short (server/refine.c; server/core/ts_refine.h,
 * ts_handover.h), on the built-in patch:
 *   - the refined masses (ts_refine.h, "masses"): outside the refined
 *     region every node keeps its mass bit for bit (the region's nodes
 *     share what it weighed), for Loop with its smoothing rules, Loop's
 *     midpoints and LEB alike, so the hand-over's map touches the region
 *     only (before, Loop's smoothed rest shape rescaled every mass by about
 *     1e-7 and the map touched every free node: 9,252 of the 10,028
 *     nodes of a resolution-50 patch, whole-tissue passes at every
 *     install);
 *   - a snapshot into a room made beforehand (ts_refine_snapshot_reserve,
 *     ts_refine_snapshot_into) equals ts_refine_snapshot's, bit for bit,
 *     with and without a hand-over, and into an earlier snapshot (the
 *     chase) too; a room of other sizes is refused and left as it was;
 *   - the hand-over renewed in its own arrays (ts_handover_renew), on the
 *     touched nodes and springs only where nothing else changed, equals
 *     the one ts_handover_create makes afresh, bit for bit: after a first
 *     refinement, after XPBD's fit (which changes untouched rest lengths)
 *     and during an earlier refinement's blend;
 *   - a shared source (ts_refine_src_share) is freed by its last holder
 *     (under ASan: no leak, no double free).
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_handover_internal.h"
#include "ts_region.h"
#include "refine_fixture.h"

/* One refinement of s->t (pressed or at rest) on a pick down from o (the
 * fixture's, refine_once), as
 * the daemon makes it (TS_REFINE_REBUILD_LOCAL, the default hand-over);
 * *out the refined tissue, *par its new nodes' parents (caller frees
 * both); src replaced by the refined source. */
static void refine_at(sim *s, ts_refine_src **src, const double o[3], int method, int smooth, const ts_tool *tool,
                      ts_tissue **out, uint32_t (**par)[2]) {
  uint32_t *sel = NULL, n = 0;
  const double d[3] = {0, -1, 0};
  ck_assert_int_eq(ts_refine_pick(*src, s->t, o, d, 0.005, &sel, &n, NULL), 0);
  ts_refine_opts opts = {method, 0, 0, smooth, 0, tool, tool ? 1 : 0, TS_REFINE_REBUILD_LOCAL, TS_HANDOVER_MS_DEFAULT, 0};
  ts_refine_src *nsrc = NULL;
  ts_refine_info info;
  memset(&info, 0, sizeof info);
  char err[256] = "";
  int rc = ts_refine_run(*src, s->t, sel, n, &opts, out, &nsrc, &info, err, sizeof err);
  ck_assert_msg(rc == 0, "refine: %s", err);
  free(sel);
  ts_refine_src_free(*src);
  *src = nsrc;
  *par = (uint32_t(*)[2])info.parents;
}

static void refine_once(sim *s, ts_refine_src **src, int method, int smooth, const ts_tool *tool,
                        ts_tissue **out, uint32_t (**par)[2]) {
  const double o[3] = {0.003, 0.05, 0.002};
  refine_at(s, src, o, method, smooth, tool, out, par);
}

static double mass_of(const ts_refine_src *s, const ts_tissue *t, uint32_t i) {
  return t->inv_mass[i] > 0 ? 1.0 / t->inv_mass[i] : s->mass[s->ext_of[i]];
}

/* Outside the region the masses stay, bit for bit, and the hand-over's
 * map touches the region only; the total stays (1e-12 relative: rounding
 * over a few thousand nodes). Two refinements in a row, the second
 * elsewhere on the first's source (whose region's masses were shared
 * out: they stay). */
static void check_local(int method, int smooth) {
  sim s;
  sim_init(&s, 0);
  ts_patch_def d = ts_default_patch_def();
  ts_refine_src *src = NULL;
  ck_assert_int_eq(ts_refine_src_patch(&d, &src), 0);
  for (int round = 0; round < 2; round++) {
    const double total = ts_refine_total_mass(src);
    ts_tissue *r = NULL;
    uint32_t(*par)[2] = NULL;
    const double o[2][3] = {{0.003, 0.05, 0.002}, {-0.004, 0.05, -0.003}}; /* two regions apart */
    refine_at(&s, &src, o[round], method, smooth, NULL, &r, &par);
    const uint32_t n0 = s.t->n_nodes;
    uint32_t changed = 0;
    for (uint32_t i = 0; i < n0; i++) changed += s.t->inv_mass[i] != r->inv_mass[i];
    ck_assert_ptr_nonnull(r->hand);
    ck_assert_ptr_nonnull(r->hand->map);
    const uint32_t touched = r->hand->map->n_nodes;
    printf("  method %d smooth %d round %d: %u of %u old nodes changed mass, %u of %u nodes touched\n", method,
           smooth, round, changed, n0, touched, r->n_nodes);
    /* the region (a 5 mm pick through the patch's four sheets): 86-108
     * nodes of 2,304 changed their mass and 276-336 of about 2,500 are
     * touched, measured; with every mass rescaled (the rule before) Loop's
     * smoothing touched every free node */
    ck_assert_uint_lt(changed, n0 / 10);
    ck_assert_uint_lt(touched, r->n_nodes / 4);
    const double now = ts_refine_total_mass(src);
    ck_assert_msg(fabs(now - total) <= 1e-12 * total, "total %.17g, was %.17g", now, total);
    double sum = 0;
    for (uint32_t i = 0; i < r->n_nodes; i++) sum += mass_of(src, r, i);
    ck_assert_msg(fabs(sum - total) <= 1e-12 * total, "tissue %.17g, was %.17g", sum, total);
    free(par);
    ts_tissue_destroy(s.t);
    s.t = r;
  }
  ts_refine_src_free(src);
  sim_free(&s);
}

START_TEST(test_local_masses_loop_smooth) { check_local(TS_REFINE_LOOP, 1); }
END_TEST
START_TEST(test_local_masses_loop_mid) { check_local(TS_REFINE_LOOP, 0); }
END_TEST
START_TEST(test_local_masses_leb) { check_local(TS_REFINE_LEB, 0); }
END_TEST

/* a and b hold the same snapshot, bit for bit (what ts_refine_snapshot
 * copies: nodes, springs, surfaces, layers, settings, column map,
 * hand-over) */
static void same_snapshot(const ts_tissue *a, const ts_tissue *b) {
  const size_t n = a->n_nodes;
  ck_assert_uint_eq(a->n_nodes, b->n_nodes);
  ck_assert_uint_eq(a->n_springs, b->n_springs);
  ck_assert_uint_eq(a->n_tris, b->n_tris);
  ck_assert(memcmp(a->x, b->x, sizeof *a->x * n) == 0);
  ck_assert(memcmp(a->v, b->v, sizeof *a->v * n) == 0);
  ck_assert(memcmp(a->f, b->f, sizeof *a->f * n) == 0);
  ck_assert(memcmp(a->f_ext, b->f_ext, sizeof *a->f_ext * n) == 0);
  ck_assert(memcmp(a->inv_mass, b->inv_mass, sizeof *a->inv_mass * n) == 0);
  ck_assert(memcmp(a->rest, b->rest, sizeof *a->rest * n) == 0);
  ck_assert(memcmp(a->x_prev, b->x_prev, sizeof *a->x_prev * n) == 0);
  ck_assert(memcmp(a->acc, b->acc, sizeof *a->acc * n) == 0);
  ck_assert(memcmp(a->acc_prev, b->acc_prev, sizeof *a->acc_prev * n) == 0);
  ck_assert(memcmp(a->branch, b->branch, n) == 0);
  ck_assert(memcmp(a->springs, b->springs, sizeof *a->springs * a->n_springs) == 0);
  ck_assert(memcmp(a->tris, b->tris, sizeof *a->tris * a->n_tris) == 0);
  ck_assert_uint_eq(ts_tissue_n_contact_tris(a), ts_tissue_n_contact_tris(b));
  ck_assert(memcmp(ts_tissue_contact_tris(a), ts_tissue_contact_tris(b),
                   sizeof *a->tris * ts_tissue_n_contact_tris(a)) == 0);
  ck_assert_uint_eq(ts_tissue_columns(a), ts_tissue_columns(b));
  for (uint32_t sh = 0; sh < a->n_sheets && ts_tissue_columns(a); sh++)
    for (uint32_t j = 0; j < ts_tissue_columns(a); j++)
      ck_assert_uint_eq(ts_tissue_sheet_node(a, sh, j), ts_tissue_sheet_node(b, sh, j));
  ck_assert(a->time == b->time && a->steps == b->steps && a->h_prev == b->h_prev);
  ck_assert(a->stable_dt == b->stable_dt && a->drag == b->drag && a->stop == b->stop);
  ck_assert_uint_eq(a->n_layers, b->n_layers);
  ck_assert(memcmp(a->layers, b->layers, sizeof a->layers) == 0);
  ck_assert_int_eq(a->hand != NULL, b->hand != NULL);
  ck_assert_ptr_null(b->ms); /* no step data: the copy's first step prepares it */
  if (!a->hand) return;
  ck_assert(a->hand->start == b->hand->start && a->hand->duration == b->hand->duration);
  ck_assert_int_eq(a->hand->ms_rest, b->hand->ms_rest);
  ck_assert(memcmp(a->hand->f, b->hand->f, sizeof *a->hand->f * n) == 0);
  ck_assert(memcmp(a->hand->f_res, b->hand->f_res, sizeof *a->hand->f_res * n) == 0);
  ck_assert(memcmp(a->hand->rest, b->hand->rest, sizeof *a->hand->rest * a->n_springs) == 0);
  ck_assert(memcmp(a->hand->depth, b->hand->depth, sizeof *a->hand->depth * n) == 0);
}

START_TEST(test_snapshot_into_room) {
  sim s;
  sim_init(&s, 0);
  ts_patch_def d = ts_default_patch_def();
  ts_refine_src *src = NULL;
  ck_assert_int_eq(ts_refine_src_patch(&d, &src), 0);
  press(&s, 1);
  /* a refined tissue in its blend: a hand-over to copy */
  ts_tool tool = press_tool(0.003);
  ts_tissue *r = NULL;
  uint32_t(*par)[2] = NULL;
  refine_once(&s, &src, TS_REFINE_LOOP, 1, &tool, &r, &par);
  free(par);
  ts_tissue_destroy(s.t);
  s.t = r;
  for (int i = 0; i < 3; i++) step(&s, &tool);
  ck_assert_ptr_nonnull(s.t->hand);

  ts_tissue *fresh = NULL, *room = NULL;
  ck_assert_int_eq(ts_refine_snapshot(s.t, &fresh), 0);
  ck_assert_int_eq(ts_refine_snapshot_reserve(s.t->n_nodes, s.t->n_springs, s.t->n_tris, 1, &room), 0);
  ck_assert_ptr_nonnull(room->hand);
  ck_assert_int_eq(ts_refine_snapshot_into(s.t, room), 0);
  same_snapshot(fresh, room);

  /* the chase: the tissue steps on and is taken into the same snapshot's
   * arrays again */
  for (int i = 0; i < 3; i++) step(&s, &tool);
  const void *hand = room->hand, *hrest = room->hand->rest, *x = room->x;
  ck_assert_int_eq(ts_refine_snapshot_into(s.t, room), 0);
  ck_assert_ptr_eq(room->hand, hand);
  ck_assert_ptr_eq(room->hand->rest, hrest);
  ck_assert_ptr_eq(room->x, x);
  ts_tissue_destroy(fresh);
  ck_assert_int_eq(ts_refine_snapshot(s.t, &fresh), 0);
  same_snapshot(fresh, room);

  /* a room of other sizes: refused, left as it was */
  ts_tissue *other = NULL;
  ck_assert_int_eq(ts_refine_snapshot_reserve(s.t->n_nodes + 1, s.t->n_springs, s.t->n_tris, 0, &other), 0);
  other->x[0][0] = 42.0;
  ck_assert_int_eq(ts_refine_snapshot_into(s.t, other), TS_EMISMATCH);
  ck_assert(other->x[0][0] == 42.0 && other->time == 0 && !other->hand);
  ts_tissue_destroy(other);
  ck_assert_int_eq(ts_refine_snapshot_reserve(s.t->n_nodes, s.t->n_springs + 1, s.t->n_tris, 0, &other), 0);
  ck_assert_int_eq(ts_refine_snapshot_into(s.t, other), TS_EMISMATCH);
  ts_tissue_destroy(other);
  ck_assert_int_eq(ts_refine_snapshot_into(NULL, room), TS_EINVAL);
  ck_assert_int_eq(ts_refine_snapshot_into(s.t, NULL), TS_EINVAL);
  ck_assert_int_eq(ts_refine_snapshot_reserve(0, 1, 1, 0, &other), TS_EINVAL);
  ck_assert_ptr_null(other);

  /* a room without a hand-over's arrays gets them; after the blend (no
   * hand-over) a room's are dropped */
  ck_assert_int_eq(ts_refine_snapshot_reserve(s.t->n_nodes, s.t->n_springs, s.t->n_tris, 0, &other), 0);
  ck_assert_ptr_null(other->hand);
  ck_assert_int_eq(ts_refine_snapshot_into(s.t, other), 0);
  same_snapshot(fresh, other);
  ts_tissue_destroy(other);
  while (s.t->hand) step(&s, &tool);
  ck_assert_int_eq(ts_refine_snapshot_into(s.t, room), 0);
  ck_assert_ptr_null(room->hand);
  ts_tissue_destroy(fresh);
  ck_assert_int_eq(ts_refine_snapshot(s.t, &fresh), 0);
  same_snapshot(fresh, room);

  ts_tissue_destroy(fresh);
  ts_tissue_destroy(room);
  ts_refine_src_free(src);
  sim_free(&s);
}
END_TEST

/* The install's renewal of r's hand-over (r refined from a snapshot of
 * s->t, which has stepped on since) in its own arrays gives what
 * ts_handover_create gives afresh from the same state and tools, bit for
 * bit; *local gets whether it could write the touched entries only. */
static void check_renew(sim *s, ts_tissue *r, const uint32_t (*par)[2], const ts_tool *tool) {
  ck_assert_int_eq(ts_refine_restate(r, s->t, par), 0);
  const ts_handover *h0 = r->hand;
  const void *f0 = r->hand->f, *rest0 = r->hand->rest;
  ck_assert_int_eq(ts_handover_renew(r, s->t, par, tool, 1, NULL), 0);
  ck_assert_ptr_eq(r->hand, h0);
  ck_assert_ptr_eq(r->hand->f, f0);
  ck_assert_ptr_eq(r->hand->rest, rest0);
  ts_handover *fresh = NULL;
  ck_assert_int_eq(ts_handover_create(s->t, r, par, tool, 1, r->hand->duration, TS_HANDOVER_MS_DEFAULT, &fresh), 0);
  const size_t n = r->n_nodes;
  ck_assert(fresh->start == r->hand->start && fresh->duration == r->hand->duration);
  ck_assert_int_eq(fresh->plain, r->hand->plain);
  ck_assert(memcmp(fresh->f, r->hand->f, sizeof *fresh->f * n) == 0);
  ck_assert(memcmp(fresh->f_res, r->hand->f_res, sizeof *fresh->f_res * n) == 0);
  ck_assert(memcmp(fresh->rest, r->hand->rest, sizeof *fresh->rest * r->n_springs) == 0);
  ck_assert(memcmp(fresh->depth, r->hand->depth, sizeof *fresh->depth * n) == 0);
  ts_handover_free(fresh);
}

/* The install as server/refine.c makes it, on the pressed patch: a
 * snapshot refined (with XPBD's fit when xpbd: its rest lengths change
 * entries the map leaves untouched, so the renewal must write them all
 * again), the session 5 steps on, the renewal; and when twice, a second
 * refinement elsewhere during the first one's blend (an earlier hand-over
 * in effect: every entry written again). */
static void renew_case(int xpbd, int twice) {
  sim s;
  sim_init(&s, xpbd);
  ts_patch_def d = ts_default_patch_def();
  ts_refine_src *src = NULL;
  ck_assert_int_eq(ts_refine_src_patch(&d, &src), 0);
  press(&s, 1);
  ts_tool tool = press_tool(0.003);
  const double o[2][3] = {{0.003, 0.05, 0.002}, {-0.004, 0.05, -0.003}};
  for (int round = 0; round < 1 + twice; round++) {
    ts_tissue *snap = NULL, *r = NULL;
    ck_assert_int_eq(ts_refine_snapshot(s.t, &snap), 0);
    uint32_t(*par)[2] = NULL;
    sim at_snap = {snap, NULL};
    refine_at(&at_snap, &src, o[round], TS_REFINE_LOOP, 1, &tool, &r, &par);
    ck_assert_int_eq(r->hand->plain, round == 0); /* made with no earlier hand-over in effect */
    ts_xpbd_def xd = ts_xpbd_default_def();
    xd.damping = r->drag;
    if (xpbd) {
      ck_assert_int_eq(ts_handover_fit_xpbd(r, snap, (const uint32_t(*)[2])par, &xd, &tool, 1, 0, DT, NULL), 0);
      ck_assert_int_eq(r->hand->plain, 0);
    }
    for (int i = 0; i < 5; i++) step(&s, &tool);
    const int local = r->hand->plain && !s.t->hand; /* what the renewal may write only the touched entries for */
    check_renew(&s, r, (const uint32_t(*)[2])par, &tool);
    printf("  xpbd %d round %d: renewed %s\n", xpbd, round, local ? "on the touched entries" : "over the whole tissue");
    free(par);
    ts_tissue_destroy(snap);
    /* installed: the refined tissue steps on */
    ts_tissue_destroy(s.t);
    s.t = r;
    if (s.x) {
      ts_xpbd_destroy(s.x);
      s.x = NULL;
      ck_assert_int_eq(ts_xpbd_build(r, &xd, &s.x), 0);
    }
    for (int i = 0; i < 5; i++) step(&s, &tool);
  }
  ts_refine_src_free(src);
  sim_free(&s);
}

START_TEST(test_renew_in_place) { renew_case(0, 1); }
END_TEST
START_TEST(test_renew_after_fit) { renew_case(1, 0); }
END_TEST

START_TEST(test_src_share) {
  ts_patch_def d = ts_default_patch_def();
  ts_refine_src *src = NULL;
  ck_assert_int_eq(ts_refine_src_patch(&d, &src), 0);
  ck_assert_ptr_eq(ts_refine_src_share(src), src);
  ck_assert_ptr_eq(ts_refine_src_share(src), src);
  ck_assert_ptr_null(ts_refine_src_share(NULL));
  ts_refine_src_free(src);
  ts_refine_src_free(src);
  ck_assert(ts_refine_total_mass(src) > 0); /* one holder left: still there */
  ts_refine_src_free(src);              /* the last: freed (ASan: no leak) */
}
END_TEST

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a failing case's fork keeps what it printed */
  Suite *s = suite_create("refine_hold");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_local_masses_loop_smooth);
  tcase_add_test(tc, test_local_masses_loop_mid);
  tcase_add_test(tc, test_local_masses_leb);
  tcase_add_test(tc, test_snapshot_into_room);
  tcase_add_test(tc, test_renew_in_place);
  tcase_add_test(tc, test_renew_after_fit);
  tcase_add_test(tc, test_src_share);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
