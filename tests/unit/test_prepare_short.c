/*
 * test_prepare_short.c: Check suite for the shortcuts ts_massspring_prepare
 * takes (ts_ms_bounds.c, ts_ms_local.c, ts_ms_springs.c), each of which
 * must give exactly what the whole work gives, bit for bit, so that a
 * prepared tissue, its substep and every figure downstream are unchanged:
 *   - the hot springs' counting sort: the records ordered by class, then
 *     node a, then the springs' own order, each the record of the spring
 *     it names, every spring once;
 *   - both Collatz-Wielandt bounds at once (their products the two lanes of
 *     one vector) equal each taken alone (scalar), bit for bit;
 *   - the Collatz-Wielandt bounds asked only whether they reach a substep
 *     (reach): the same answer as the whole iteration for substeps below,
 *     at and above the one the whole gives, the bounds bit for bit the
 *     whole's where they ran to the end, and an early stop where the
 *     answer is clearly yes and where it is clearly no;
 *   - the power iterations told the substep the selective scaling has to
 *     beat (beat): 1 exactly when the whole's estimates do not beat it,
 *     the estimates bit for bit the whole's where they do, and an early
 *     stop where the scaling clearly loses;
 *   - the bounds' spring records kept in one scratch block, filled once and
 *     remade only at the ends of nodes whose inertia changed (the local
 *     scaling's bisection), the in-sheet ones made straight from the
 *     springs: the same records, bounds and weights as made afresh.
 * On the default patch refined by Loop (its local mass scaling at work)
 * and unrefined. Tolerances: none; every comparison is exact, since the
 * shortcuts are meant to change no bit.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_ms_internal.h"
#include "ts_refine.h"
#include "ts_tissue.h"

/* The default patch, prepared (tissue 0), and refined by Loop on the
 * triangles a ray down through (3, 2) mm picks within 5 mm, prepared
 * (tissue 1): its prepare runs the local scaling's bisection. */
static ts_tissue *make(int refined) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t0 = NULL, *r = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t0), 0);
  ck_assert_int_eq(ts_massspring_prepare(t0), 0);
  if (!refined) return t0;
  ts_refine_src *s0 = NULL, *s1 = NULL;
  ck_assert_int_eq(ts_refine_src_patch(&d, &s0), 0);
  uint32_t *sel = NULL, n = 0;
  const double o[3] = {0.003, 0.05, 0.002}, dir[3] = {0, -1, 0};
  ck_assert_int_eq(ts_refine_pick(s0, t0, o, dir, 0.005, &sel, &n, NULL), 0);
  ts_refine_opts opts = {TS_REFINE_LOOP, 0, 0, 1, 0, NULL, 0, 0, 0, 0};
  char err[256];
  int rc = ts_refine_run(s0, t0, sel, n, &opts, &r, &s1, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "refine: %s", err);
  free(sel);
  ts_refine_src_free(s0);
  ts_refine_src_free(s1);
  ts_tissue_destroy(t0);
  ck_assert_int_eq(ts_massspring_prepare(r), 0);
  return r;
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* 1/s: a session's drag, so that the shortcuts add it where the whole does */
static const double drag = 40.0;

/* Four scratch arrays of n rows (the bounds' d, y pairs). */
static void scratch(double (*s[4])[3], uint32_t n) {
  for (int k = 0; k < 4; k++) {
    s[k] = malloc(sizeof *s[k] * n);
    ck_assert_ptr_nonnull(s[k]);
  }
}

START_TEST(test_hot_order) {
  ts_tissue *t = make(_i);
  const uint32_t ns = t->n_springs;
  ts__hs *hs = malloc(sizeof *hs * ns);
  uint32_t *orig = malloc(sizeof *orig * ns), *seen = calloc(ns, sizeof *seen), cnt[3];
  ck_assert_ptr_nonnull(hs);
  ck_assert_ptr_nonnull(orig);
  ck_assert_ptr_nonnull(seen);
  ck_assert_int_eq(ts__ms_build_hot(t, hs, cnt, orig), 0);
  ck_assert_uint_eq(cnt[0] + cnt[1] + cnt[2], ns);
  uint32_t in_class[3] = {0, 0, 0};
  for (uint32_t k = 0; k < ns; k++) {
    ck_assert_uint_lt(orig[k], ns);
    ck_assert_uint_eq(seen[orig[k]]++, 0); /* every spring once */
    ts__hs h;
    const int c = ts__ms_hot_spring(&t->springs[orig[k]], &h);
    ck_assert_int_eq(memcmp(&h, &hs[k], sizeof h), 0);
    in_class[c]++;
    if (k == 0) continue;
    ts__hs hp;
    const int cp = ts__ms_hot_spring(&t->springs[orig[k - 1]], &hp);
    /* (class, a, index) strictly increasing */
    const int up = cp < c || (cp == c && (hp.a < h.a || (hp.a == h.a && orig[k - 1] < orig[k])));
    ck_assert_msg(up, "records %u and %u out of order", k - 1, k);
  }
  for (int c = 0; c < 3; c++) ck_assert_uint_eq(in_class[c], cnt[c]);
  /* the step's own copy is this one */
  ck_assert_int_eq(memcmp(t->ms->hs, hs, sizeof *hs * ns), 0);
  free(hs);
  free(orig);
  free(seen);
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_reach_answers) {
  ts_tissue *t = make(_i);
  const struct ts__ms *ms = t->ms;
  const uint32_t n = t->n_nodes;
  double (*s[4])[3];
  scratch(s, n);
  double w2f, gf;
  ck_assert_int_eq(ts__ms_scaled_bounds(t, ms->iw, ms->hs, ms->n_springs, s[0], s[1], s[2], s[3], NULL, &w2f, &gf), 0);
  /* the weights too: the stiffness's are what the step's stiffened bound reads */
  double (*wd)[3] = malloc(sizeof *wd * n);
  ck_assert_ptr_nonnull(wd);
  memcpy(wd, s[0], sizeof *wd * n);
  ck_assert(same_bits(ts__ms_scaled_bound(t, ms->iw, ms->hs, ms->n_springs, 0, s[0], s[1]), w2f));
  ck_assert_int_eq(memcmp(wd, s[0], sizeof *wd * n), 0);
  ck_assert(same_bits(ts__ms_scaled_bound(t, ms->iw, ms->hs, ms->n_springs, 1, s[0], s[1]), gf));
  ck_assert_int_eq(memcmp(ms->wd, wd, sizeof *wd * n), 0); /* and the prepare kept them */
  free(wd);
  const double hf = ts__ms_step_bound(w2f, gf + drag, 1.0);
  ck_assert(hf > 0 && isfinite(hf));
  const double hs[] = {0.5 * hf, 0.99 * hf, hf, nextafter(hf, INFINITY), 1.01 * hf, 2 * hf};
  for (size_t q = 0; q < sizeof hs / sizeof hs[0]; q++) {
    const double reach[2] = {hs[q], drag};
    double w2, g;
    const int rc = ts__ms_scaled_bounds(t, ms->iw, ms->hs, ms->n_springs, s[0], s[1], s[2], s[3], reach, &w2, &g);
    ck_assert(rc >= 0 && rc <= 2);
    const int yes = rc == 1 || (rc == 0 && ts__ms_step_bound(w2, g + drag, 1.0) >= hs[q]);
    ck_assert_msg(yes == (hf >= hs[q]), "substep %.9g of the whole's %.9g: answered %d", hs[q], hf, yes);
    /* the bounds so far never below the whole's (they only fall) */
    ck_assert(w2 >= w2f && g >= gf);
    if (rc == 0) { /* ran to the end: the whole's bounds */
      ck_assert(same_bits(w2, w2f));
      ck_assert(same_bits(g, gf));
    }
  }
  /* half the whole's substep is reached long before the 20th iteration */
  const double half[2] = {0.5 * hf, drag};
  double w2, g;
  ck_assert_int_eq(ts__ms_scaled_bounds(t, ms->iw, ms->hs, ms->n_springs, s[0], s[1], s[2], s[3], half, &w2, &g), 1);
  ck_assert(w2 > w2f || g > gf);
  /* and twice it is out of reach long before (the Rayleigh quotients'
   * lower bound): the bounds so far are still above the whole's */
  const double twice[2] = {2 * hf, drag};
  ck_assert_int_eq(ts__ms_scaled_bounds(t, ms->iw, ms->hs, ms->n_springs, s[0], s[1], s[2], s[3], twice, &w2, &g), 2);
  ck_assert(w2 > w2f || g > gf);
  for (int k = 0; k < 4; k++) free(s[k]);
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_power_beat) {
  ts_tissue *t = make(_i);
  const struct ts__ms *ms = t->ms;
  ck_assert_msg(ms->sms, "the patch is prepared with its selective scaling");
  const uint32_t n = t->n_nodes;
  double (*s[4])[3];
  scratch(s, n);
  double pw, pg;
  ck_assert_int_eq(ts__ms_power_bounds(t, ms, s[0], s[1], s[2], s[3], NULL, &pw, &pg, NULL), 0);
  /* the prepared bounds are these, with their margin */
  ck_assert(same_bits(ms->w2, TS__SMS_MARGIN * pw));
  ck_assert(same_bits(ms->g, TS__SMS_MARGIN * pg));
  const double hp = ts__ms_step_bound(TS__SMS_MARGIN * pw, TS__SMS_MARGIN * pg + drag, 1.0);
  const double hs[] = {0.5 * hp, nextafter(hp, 0), hp, 1.01 * hp, 10 * hp};
  for (size_t q = 0; q < sizeof hs / sizeof hs[0]; q++) {
    const double beat[2] = {hs[q], drag};
    double w2, g;
    const int rc = ts__ms_power_bounds(t, ms, s[0], s[1], s[2], s[3], beat, &w2, &g, NULL);
    ck_assert_int_eq(rc, hp > hs[q] ? 0 : 1); /* kept exactly when the whole's beat it */
    ck_assert(w2 <= pw && g <= pg);          /* the estimates so far never above the whole's */
    if (rc == 0) {
      ck_assert(same_bits(w2, pw));
      ck_assert(same_bits(g, pg));
    }
  }
  /* ten times the substep is lost at once, long before the 80th iteration */
  const double far[2] = {10 * hp, drag};
  double w2, g;
  ck_assert_int_eq(ts__ms_power_bounds(t, ms, s[0], s[1], s[2], s[3], far, &w2, &g, NULL), 1);
  ck_assert(w2 < pw || g < pg);
  for (int k = 0; k < 4; k++) free(s[k]);
  ts_tissue_destroy(t);
}
END_TEST

/* The bounds' spring records as the preparation keeps them (one scratch
 * block, filled once, remade only where a node's inertia changed): the
 * same records, bounds and weights, bit for bit, as made afresh. */
START_TEST(test_records) {
  ts_tissue *t = make(_i);
  const struct ts__ms *ms = t->ms;
  const uint32_t n = t->n_nodes, ns = ms->n_springs;
  double (*s[4])[3];
  scratch(s, n);
  ts__scratch sc = {0};
  ts__asp *as = ts__scratch_get(&sc, ts__ms_abs_bytes(ns));
  ck_assert_ptr_nonnull(as);
  ck_assert_ptr_eq(ts__scratch_get(&sc, 8), as); /* a smaller need: the same block */
  ts__asp *fresh = malloc(ts__ms_abs_bytes(ns));
  ck_assert_ptr_nonnull(fresh);

  /* the in-sheet records made from the springs equal those made from a
   * copy of them as hot springs (what the bisection and the selective
   * scaling read before) */
  ts__hs *edges = malloc(sizeof *edges * t->n_springs);
  ck_assert_ptr_nonnull(edges);
  uint32_t ne = 0;
  for (uint32_t k = 0; k < t->n_springs; k++)
    if (t->springs[k].kind == TS_SPRING_EDGE) ts__ms_hot_spring(&t->springs[k], &edges[ne++]);
  ck_assert_uint_gt(ne, 0);
  const uint32_t na_sheet = ts__ms_abs_fill_sheet(t, ms->iw, as);
  ck_assert_uint_eq(ts__ms_abs_fill(t, ms->iw, edges, ne, fresh), na_sheet);
  ck_assert_int_eq(memcmp(as, fresh, ts__ms_abs_bytes(na_sheet)), 0);
  ck_assert(same_bits(ts__ms_abs_bound(t, as, na_sheet, 0, s[0], s[1]),
                      ts__ms_scaled_bound(t, ms->iw, edges, ne, 0, s[2], s[3])));
  ck_assert_int_eq(memcmp(s[0], s[2], sizeof *s[0] * n), 0);

  /* over the step's springs: both bounds, their weights and a reach answer */
  const uint32_t na = ts__ms_abs_fill(t, ms->iw, ms->hs, ns, as);
  ck_assert_uint_gt(na, 0);
  double w2a, ga, w2b, gb;
  ck_assert_int_eq(ts__ms_abs_bounds(t, as, na, s[0], s[1], s[2], s[3], NULL, &w2a, &ga), 0);
  double (*wd)[3] = malloc(sizeof *wd * n);
  ck_assert_ptr_nonnull(wd);
  memcpy(wd, s[0], sizeof *wd * n);
  ck_assert_int_eq(ts__ms_scaled_bounds(t, ms->iw, ms->hs, ns, s[0], s[1], s[2], s[3], NULL, &w2b, &gb), 0);
  ck_assert(same_bits(w2a, w2b) && same_bits(ga, gb));
  ck_assert_int_eq(memcmp(wd, s[0], sizeof *wd * n), 0);
  ck_assert(same_bits(ts__ms_abs_bound(t, as, na, 1, s[0], s[1]), gb));
  const double reach[2] = {0.99 * ts__ms_step_bound(w2b, gb + drag, 1.0), drag};
  const int ra = ts__ms_abs_bounds(t, as, na, s[0], s[1], s[2], s[3], reach, &w2a, &ga);
  ck_assert_int_eq(ts__ms_scaled_bounds(t, ms->iw, ms->hs, ns, s[0], s[1], s[2], s[3], reach, &w2b, &gb), ra);
  ck_assert(same_bits(w2a, w2b) && same_bits(ga, gb));

  /* a few nodes' inertia changed: the records at their ends remade equal
   * all of them made afresh, and only those are listed */
  double *iw2 = malloc(sizeof *iw2 * n);
  unsigned char *mark = calloc(n, 1);
  uint32_t *idx = malloc(sizeof *idx * na);
  ck_assert(iw2 && mark && idx);
  memcpy(iw2, ms->iw, sizeof *iw2 * n);
  uint32_t changed = 0;
  for (uint32_t i = 0; i < n; i += 97)
    if (iw2[i] > 0) {
      iw2[i] *= 0.37;
      mark[i] = 1;
      changed++;
    }
  ck_assert_uint_gt(changed, 3);
  const uint32_t ni = ts__ms_abs_touching(as, na, mark, idx);
  ck_assert(ni >= changed && ni < na);
  ts__ms_abs_reweigh(as, idx, ni, iw2);
  ck_assert_uint_eq(ts__ms_abs_fill(t, iw2, ms->hs, ns, fresh), na);
  ck_assert_int_eq(memcmp(as, fresh, ts__ms_abs_bytes(na)), 0);
  /* and back */
  ts__ms_abs_reweigh(as, idx, ni, ms->iw);
  ck_assert_uint_eq(ts__ms_abs_fill(t, ms->iw, ms->hs, ns, fresh), na);
  ck_assert_int_eq(memcmp(as, fresh, ts__ms_abs_bytes(na)), 0);

  /* the power iterations in the scratch block: the same estimates */
  double pw, pg, qw, qg;
  ck_assert_int_eq(ts__ms_power_bounds(t, ms, s[0], s[1], s[2], s[3], NULL, &pw, &pg, NULL), 0);
  ck_assert_int_eq(ts__ms_power_bounds(t, ms, s[0], s[1], s[2], s[3], NULL, &qw, &qg, &sc), 0);
  ck_assert(same_bits(pw, qw) && same_bits(pg, qg));

  free(iw2);
  free(mark);
  free(idx);
  free(wd);
  free(edges);
  free(fresh);
  ts__scratch_free(&sc);
  ck_assert_ptr_null(sc.p);
  for (int k = 0; k < 4; k++) free(s[k]);
  ts_tissue_destroy(t);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("prepare_short");
  TCase *tc = tcase_create("exact");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_hot_order, 0, 2);
  tcase_add_loop_test(tc, test_reach_answers, 0, 2);
  tcase_add_loop_test(tc, test_power_beat, 0, 2);
  tcase_add_loop_test(tc, test_records, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
