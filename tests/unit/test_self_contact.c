/*
 * test_self_contact.c: tissue self-contact (server/core/ts_self_contact.h).
 *
 *   - detection through the tree equals the brute force over every (surface
 *     node, contact triangle) pair on random folded and jittered states of
 *     a patch: the same pairs, and the same barycentric coordinates and
 *     normals bit for bit (both sides run the same exact test on the same
 *     doubles; the tree only chooses which pairs are tested);
 *   - the tree walked against itself (ts_aabb_self.h) hands over exactly
 *     the leaf pairs of an all-pairs test of the leaf boxes, each unordered
 *     pair once, plain and with the rest and displacement boxes' pruning;
 *     the walk's detection equals the former per-node query and the brute
 *     force with the skip rule and without, across a rebuild and a new
 *     tree; a node slid just past the skip over its own sheet, where the
 *     pruning bounds are tight, is found as the references find it;
 *   - a fold: the patch's left half anchored flat (outer surface at y = 0),
 *     the right half turned over it about the centre line (its outer
 *     surface 3 mm above, facing down; the springs across the crease given
 *     their folded lengths, so the fold itself is at rest) and thrown down
 *     at 0.5 m/s under gravity, 0.1 s. Without self-contact the flap's
 *     outer nodes go through the lower sheet (measured 8.9 mm below y = 0
 *     in mass-spring, 9.4 mm in XPBD); with it no flap node gets behind the
 *     lower sheet in XPBD (lowest 0.87 mm: the thickness, 1 mm, less the
 *     sweeps' residual) and none more than 0.5 mm in mass-spring (lowest
 *     -0.33 mm; -0.12 mm with the substep count of each step's last
 *     strains instead of its largest, -0.09 mm in the former query order;
 *     see fold_case for why it may dip).
 *
 * Turning the response off (ts_self_contact_project returning at once) or
 * the detection (ts_self_contact_detect storing nothing) fails the fold's
 * "with" cases (measured: the flap ends about as deep as without), and a
 * detection that skips candidates fails the brute-force comparison. The
 * walk visiting mirrors too fails the three comparisons (twice the pairs);
 * a displacement bound of rest_skip + h instead of rest_skip - h, or a rest
 * bound of 1.5 rest_skip, fails the slide (checked by editing them in).
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_self.h"
#include "ts_aabb_tree.h"
#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_self_contact.h"
#include "ts_tissue.h"
#include "ts_xpbd.h"

#define GAP 3e-3   /* m: the folded flap's outer surface above the lower one */
#define THROW 0.5  /* m/s: the flap's initial downward speed */

static ts_tissue *flat_patch(uint32_t resolution) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = resolution;
  d.curvature_radius = 0;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

static int in_flap(const ts_tissue *t, uint32_t i) { return t->rest[i][0] >= -1e-9; }

/* The right half turned about the line x = 0, y = GAP / 2 onto the left
 * (x -> -x, y -> GAP - y), into x (rest untouched). */
static void fold_positions(const ts_tissue *t, double (*x)[3]) {
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    memcpy(x[i], t->rest[i], sizeof x[i]);
    if (!in_flap(t, i)) continue;
    x[i][0] = -t->rest[i][0];
    x[i][1] = GAP - t->rest[i][1];
  }
}

/* The fold set up in t: positions, crease springs at their folded lengths,
 * left half anchored, the flap free (its boundary nodes, anchored by the
 * builder, given twice the inverse mass of the heaviest free node of their
 * sheet: about a boundary node's half share) and thrown down. */
static void make_fold(ts_tissue *t) {
  fold_positions(t, t->x);
  for (uint32_t s = 0; s < t->n_springs; s++) {
    ts_spring *sp = &t->springs[s];
    if (in_flap(t, sp->a) == in_flap(t, sp->b)) continue;
    double d2 = 0;
    for (int k = 0; k < 3; k++) d2 += (t->x[sp->a][k] - t->x[sp->b][k]) * (t->x[sp->a][k] - t->x[sp->b][k]);
    sp->rest = sqrt(d2);
  }
  const uint32_t nps = t->nodes_per_sheet;
  ck_assert_uint_gt(nps, 0);
  for (uint32_t sh = 0; sh < t->n_sheets; sh++) {
    double heavy = INFINITY;
    for (uint32_t j = 0; j < nps; j++) {
      const double w = t->inv_mass[sh * nps + j];
      if (w > 0 && w < heavy) heavy = w;
    }
    ck_assert(isfinite(heavy));
    for (uint32_t j = 0; j < nps; j++) {
      const uint32_t i = sh * nps + j;
      if (!in_flap(t, i)) {
        t->inv_mass[i] = 0;
        continue;
      }
      if (t->inv_mass[i] == 0) t->inv_mass[i] = 2 * heavy;
    }
  }
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    memset(t->v[i], 0, sizeof t->v[i]);
    if (in_flap(t, i) && t->rest[i][0] > 1e-9) t->v[i][1] = -THROW;
    if (t->x_prev) memcpy(t->x_prev[i], t->x[i], sizeof t->x_prev[i]);
  }
}

/* The lowest y of the flap's outer-sheet nodes more than 10 mm from the
 * crease (over the lower sheet's flat outer surface, y = 0). */
static double flap_low(const ts_tissue *t) {
  double lo = INFINITY;
  for (uint32_t j = 0; j < t->nodes_per_sheet; j++)
    if (t->rest[j][0] > 0.01 && t->x[j][1] < lo) lo = t->x[j][1];
  return lo;
}

enum { MS = 0, XPBD = 1 };

/* Runs the fold for 0.1 s (100 steps of 1 ms); returns the lowest flap_low
 * seen and the most pairs of a step in *pairs. */
static double run_fold(int solver, int self, uint32_t *pairs) {
  ts_tissue *t = flat_patch(13);
  ts_xpbd *xp = NULL;
  if (solver == XPBD) {
    /* the bending and volume constraints' rest shape is the folded one
     * (so the fold is at rest); the skip rule keeps reading the builder's
     * flat rest positions */
    double (*flat)[3] = malloc(sizeof *flat * t->n_nodes);
    ck_assert_ptr_nonnull(flat);
    memcpy(flat, t->rest, sizeof *flat * t->n_nodes);
    make_fold(t);
    memcpy(t->rest, t->x, sizeof *flat * t->n_nodes);
    ts_xpbd_def d = ts_xpbd_default_def();
    xp = ts_xpbd_create(t, &d);
    ck_assert_ptr_nonnull(xp);
    memcpy(t->rest, flat, sizeof *flat * t->n_nodes);
    free(flat);
  } else {
    make_fold(t);
    /* the step's cached constants (stable substep, hot springs) for the new
     * masses and rest lengths */
    ck_assert_int_eq(ts_massspring_prepare(t), 0);
    /* the inversion guard under tools only, as a session with self-contact
     * sets it (server/session_self.c; ts_ms_guard.c says why) */
    t->guard_tools_only = self;
  }
  ts_self_contact sc;
  ck_assert_int_eq(ts_self_contact_init(&sc, NULL), 0);
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  if (xp && self) ck_assert_int_eq(ts_xpbd_set_self_contact(xp, &sc, tree), 0);
  double low = flap_low(t);
  *pairs = 0;
  for (int step = 0; step < 100; step++) {
    if (xp) {
      ts_xpbd_stats st;
      ck_assert_int_eq(ts_xpbd_step(xp, t, 1e-3, NULL, 0, &st), 0);
      if (st.self_contacts > *pairs) *pairs = st.self_contacts;
    } else {
      ts_step_stats st;
      const int rc = ts_massspring_step(t, 1e-3, NULL, 0, &st);
      ck_assert_msg(rc == 0, "mass-spring step %d (self-contact %d): %d", step, self, rc);
      if (self) {
        ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])t->x), 0);
        ts_self_contact_detect(&sc, tree, t, (const double (*)[3])t->x);
        ts_self_contact_settle(&sc, t, 4);
        if (sc.n > *pairs) *pairs = sc.n;
      }
    }
    const double l = flap_low(t);
    if (l < low) low = l;
  }
  ck_assert_uint_eq(sc.overflow, 0);
  ts_aabb_tree_destroy(tree);
  ts_self_contact_free(&sc);
  ts_xpbd_destroy(xp);
  ts_tissue_destroy(t);
  return low;
}

/* tol: how far behind the lower sheet a flap node may get (m). XPBD: 0,
 * the pass is a constraint of every sweep of every substep. Mass-spring:
 * 0.5 mm, half the outer layer's 1 mm (the mucosa; the node still on its
 * side of the layer's middle): the pass runs once per 1 ms step, so a node
 * faster than the
 * thickness per step (1 m/s; the thrown flap's rim whips past 2 m/s) can
 * get behind before it is seen (measured: 0.33 mm) and is then left to the
 * elastic model. */
static void fold_case(int solver, const char *name, double tol) {
  uint32_t p_off, p_on;
  const double off = run_fold(solver, 0, &p_off);
  const double on = run_fold(solver, 1, &p_on);
  fprintf(stderr, "test_self_contact: fold, %s: lowest flap node %.3f mm without self-contact, "
          "%.3f mm with (%u pairs at most in a step)\n", name, off * 1e3, on * 1e3, p_on);
  /* without: through the lower sheet by more than a millimetre */
  ck_assert_msg(off < -1e-3, "%s: the flap did not pass through without self-contact (%g m)",
                name, off);
  /* with: never behind the lower sheet's outer surface (y = 0) */
  ck_assert_msg(on >= -tol, "%s: a flap node got %g m behind the lower sheet", name, -on);
  ck_assert_uint_gt(p_on, 0);
}

START_TEST(test_fold_massspring) { fold_case(MS, "mass-spring", 0.5e-3); }
END_TEST

START_TEST(test_fold_xpbd) { fold_case(XPBD, "XPBD", 0); }
END_TEST

static int same_pair(const ts_self_pair *a, const ts_self_pair *b) {
  if (a->node != b->node || memcmp(a->tri, b->tri, sizeof a->tri)) return 0;
  for (int k = 0; k < 3; k++)
    if (a->bc[k] != b->bc[k] || a->n[k] != b->n[k]) return 0;
  return 1;
}

static int cmp_pair(const void *a, const void *b) {
  const ts_self_pair *p = a, *q = b;
  if (p->node != q->node) return p->node < q->node ? -1 : 1;
  for (int j = 0; j < 3; j++)
    if (p->tri[j] != q->tri[j]) return p->tri[j] < q->tri[j] ? -1 : 1;
  return 0;
}

START_TEST(test_detect_brute) {
  ts_tissue *t = flat_patch(13);
  double (*x)[3] = malloc(sizeof *x * t->n_nodes);
  ck_assert_ptr_nonnull(x);
  ts_self_contact sc;
  ck_assert_int_eq(ts_self_contact_init(&sc, NULL), 0);
  ts_self_pair *ref = malloc(sizeof *ref * sc.def.cap);
  ck_assert_ptr_nonnull(ref);
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  srand(5);
  uint64_t total = 0;
  for (int trial = 0; trial < 40; trial++) {
    /* folded with the flap's outer surface 0-2 mm above, every node moved
     * by up to 0.8 mm along each axis */
    fold_positions(t, x);
    const double drop = GAP - 2e-3 * rand() / RAND_MAX;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      if (in_flap(t, i)) x[i][1] -= drop;
      for (int k = 0; k < 3; k++) x[i][k] += 0.8e-3 * (2.0 * rand() / RAND_MAX - 1);
    }
    ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])x), 0);
    ts_self_contact_detect(&sc, tree, t, (const double (*)[3])x);
    const uint32_t nb = ts_self_contact_brute(&sc.def, t, (const double (*)[3])x, ref, sc.def.cap);
    ck_assert_uint_eq(sc.found, nb);
    ck_assert_uint_le(nb, sc.def.cap);
    qsort(sc.pair, sc.n, sizeof *sc.pair, cmp_pair);
    for (uint32_t i = 0; i < nb; i++)
      ck_assert_msg(same_pair(&sc.pair[i], &ref[i]), "trial %d: pair %u differs", trial, i);
    total += nb;
  }
  fprintf(stderr, "test_self_contact: 40 folded and jittered states, %llu pairs, as the brute "
          "force\n", (unsigned long long)total);
  ck_assert_uint_gt(total, 400); /* the states do touch */
  ck_assert_uint_eq(sc.overflow, 0);
  ts_aabb_tree_destroy(tree);
  ts_self_contact_free(&sc);
  free(ref);
  free(x);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- the tree walked against itself (ts_aabb_self.h) ---- */

/* folded states of the all-pairs comparison (6,600 leaves: 22 million box
 * pairs each); the sanitizer builds take two, at a twentieth of the speed */
#ifdef TS_TEST_SANITIZED
#define WALK_TRIALS 2
#else
#define WALK_TRIALS 4
#endif

typedef struct leaf_list {
  uint64_t *key; /* min(a, b) << 32 | max(a, b) */
  uint32_t n, cap;
  uint32_t self_pairs; /* a leaf met with itself (must stay 0) */
} leaf_list;

static void collect(void *ctx, uint32_t a, uint32_t b) {
  leaf_list *l = ctx;
  if (a == b) l->self_pairs++;
  ck_assert_uint_lt(l->n, l->cap);
  const uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
  l->key[l->n++] = lo << 32 | hi;
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t p = *(const uint64_t *)a, q = *(const uint64_t *)b;
  return p < q ? -1 : p > q;
}

static int boxes_meet(const double *alo, const double *ahi, const double *blo, const double *bhi,
                      double g) {
  for (int k = 0; k < 3; k++)
    if (alo[k] > bhi[k] + g || blo[k] > ahi[k] + g) return 0;
  return 1;
}

/* the largest distance between two boxes, squared */
static double far2(const double *alo, const double *ahi, const double *blo, const double *bhi) {
  double s = 0;
  for (int k = 0; k < 3; k++) {
    const double a = fabs(ahi[k] - blo[k]), b = fabs(bhi[k] - alo[k]);
    s += (a > b ? a : b) * (a > b ? a : b);
  }
  return s;
}

/* On folded and jittered states of a patch: the walk hands over exactly
 * the leaf pairs of the all-pairs test (each unordered pair once, never a
 * leaf with itself), without rest boxes and with them (then exactly those
 * whose leaves' rest boxes reach skip apart: a pair left out higher up has
 * every leaf pair below it closer still). */
START_TEST(test_walk_pairs) {
  ts_tissue *t = flat_patch(41); /* 2 mm triangles: the 4 mm skip prunes */
  double (*x)[3] = malloc(sizeof *x * t->n_nodes);
  ck_assert_ptr_nonnull(x);
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  const uint32_t nl = tree->n_tris;
  leaf_list got = {0}, want = {0};
  got.cap = want.cap = nl * 64;
  got.key = malloc(sizeof *got.key * got.cap);
  want.key = malloc(sizeof *want.key * want.cap);
  double (*rlo)[3] = malloc(sizeof *rlo * tree->n_nodes), (*rhi)[3] = malloc(sizeof *rhi * tree->n_nodes);
  double (*dlo)[3] = malloc(sizeof *dlo * tree->n_nodes), (*dhi)[3] = malloc(sizeof *dhi * tree->n_nodes);
  ck_assert(got.key && want.key && rlo && rhi && dlo && dhi);
  const double g = 1e-3, skip = 4e-3, dskip = 3e-3;
  uint64_t total_both = 0;
  const uint32_t meet_cap = nl * 64;
  uint64_t *meet = malloc(sizeof *meet * meet_cap);
  ck_assert_ptr_nonnull(meet);
  srand(11);
  uint64_t total = 0, total_pruned = 0;
  for (int trial = 0; trial < WALK_TRIALS; trial++) {
    fold_positions(t, x);
    const double drop = GAP - 2e-3 * rand() / RAND_MAX;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      if (in_flap(t, i)) x[i][1] -= drop;
      for (int k = 0; k < 3; k++) x[i][k] += 0.8e-3 * (2.0 * rand() / RAND_MAX - 1);
    }
    ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])x), 0);
    if (trial == 1) ck_assert_int_eq(ts_aabb_tree_rebuild(tree, (const double (*)[3])x), 0);
    ck_assert_int_eq(ts_aabb_self_boxes(tree, (const double (*)[3])t->rest, NULL, rlo, rhi), 0);
    ck_assert_int_eq(ts_aabb_self_boxes(tree, (const double (*)[3])x, (const double (*)[3])t->rest,
                                        dlo, dhi), 0);
    /* the all-pairs test once: the leaf pairs whose boxes meet */
    uint32_t nmeet = 0;
    for (uint32_t a = 0; a < nl; a++)
      for (uint32_t b = a + 1; b < nl; b++) {
        const ts_aabb_node *na = &tree->nodes[tree->leaf[a]], *nb = &tree->nodes[tree->leaf[b]];
        if (!boxes_meet(na->lo, na->hi, nb->lo, nb->hi, g)) continue;
        ck_assert_uint_lt(nmeet, meet_cap);
        meet[nmeet++] = (uint64_t)a << 32 | b;
      }
    /* plain; the rest boxes; the rest and the displacement boxes */
    for (int pruned = 0; pruned < 3; pruned++) {
      ts_aabb_self_def d = {.grow = g};
      if (pruned) d.prune[0] = (ts_aabb_self_prune){(const double (*)[3])rlo, (const double (*)[3])rhi, skip};
      if (pruned == 2) d.prune[1] = (ts_aabb_self_prune){(const double (*)[3])dlo, (const double (*)[3])dhi, dskip};
      got.n = got.self_pairs = want.n = 0;
      ts_aabb_self_stats st;
      ck_assert_int_eq(ts_aabb_self_walk(tree, &d, collect, &got, &st), 0);
      ck_assert_uint_eq(got.self_pairs, 0);
      ck_assert_uint_eq(st.leaf_pairs, got.n);
      for (uint32_t m = 0; m < nmeet; m++) {
          const uint32_t a = (uint32_t)(meet[m] >> 32), b = (uint32_t)meet[m];
          const int32_t la = tree->leaf[a], lb = tree->leaf[b];
          /* the walk's own threshold: skip less 1e-9 of it (ts_aabb_self.h) */
          const double sk = skip * (1 - 1e-9);
          if (pruned && far2(rlo[la], rhi[la], rlo[lb], rhi[lb]) < sk * sk) continue;
          const double dk = dskip * (1 - 1e-9);
          if (pruned == 2 && far2(dlo[la], dhi[la], dlo[lb], dhi[lb]) < dk * dk) continue;
          ck_assert_uint_lt(want.n, want.cap);
          want.key[want.n++] = (uint64_t)a << 32 | b;
        }
      qsort(got.key, got.n, sizeof *got.key, cmp_u64);
      ck_assert_uint_eq(got.n, want.n);
      for (uint32_t i = 0; i < got.n; i++)
        ck_assert_msg(got.key[i] == want.key[i], "trial %d (%s): leaf pair %u differs", trial,
                      pruned == 2 ? "rest and displacement boxes" : pruned ? "rest boxes" : "plain", i);
      if (pruned == 2) {
        total_both += got.n;
        ck_assert_uint_gt(st.pruned[1], 0);
      } else if (pruned) {
        total_pruned += got.n;
        ck_assert_uint_gt(st.pruned[0], 0);
        ck_assert_uint_eq(st.pruned[1], 0);
      } else {
        total += got.n;
      }
    }
  }
  fprintf(stderr, "test_self_contact: tree against itself on %d folded states: %llu leaf pairs "
          "as the all-pairs test, %llu of them beyond the rest boxes' skip, %llu beyond the "
          "displacement boxes' too\n",
          WALK_TRIALS, (unsigned long long)total, (unsigned long long)total_pruned,
          (unsigned long long)total_both);
  ck_assert_uint_gt(total, 1000);
  ck_assert_uint_lt(total_pruned, total); /* the rest boxes do leave pairs out */
  ck_assert_uint_lt(total_both, total_pruned); /* the displacement boxes more */
  ck_assert_uint_gt(total_both, 0);     /* and not all: the fold's halves meet */
  ts_aabb_self_def bad = {.grow = -1};
  ck_assert_int_ne(ts_aabb_self_walk(tree, &bad, collect, &got, NULL), 0);
  ts_aabb_tree_destroy(tree);
  free(got.key);
  free(want.key);
  free(rlo);
  free(rhi);
  free(dlo);
  free(dhi);
  free(meet);
  free(x);
  ts_tissue_destroy(t);
}
END_TEST

/* The walk's detection against the former per-node query and the brute
 * force on the same states, exactly the same pair sets, with the skip rule
 * and without it (rest_skip 0: the crease's pairs too), across a rebuild
 * of the tree (its rest boxes recomputed in place) and a new tree at
 * another size (bound again). */
START_TEST(test_detect_methods) {
  ts_tissue *t = flat_patch(25); /* 3.3 mm triangles */
  double (*x)[3] = malloc(sizeof *x * t->n_nodes);
  ck_assert_ptr_nonnull(x);
  ts_self_contact w, r;
  ck_assert_int_eq(ts_self_contact_init(&w, NULL), 0);
  ck_assert_int_eq(ts_self_contact_init(&r, NULL), 0);
  ts_self_pair *ref = malloc(sizeof *ref * w.def.cap);
  ck_assert_ptr_nonnull(ref);
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  srand(23);
  uint64_t total[2] = {0, 0};
  for (int trial = 0; trial < 24; trial++) {
    const int noskip = trial % 2;
    w.def.rest_skip = r.def.rest_skip = noskip ? 0 : ts_default_self_contact_def().rest_skip;
    fold_positions(t, x);
    const double drop = GAP - 2.5e-3 * rand() / RAND_MAX;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      if (in_flap(t, i)) x[i][1] -= drop;
      for (int k = 0; k < 3; k++) x[i][k] += 0.6e-3 * (2.0 * rand() / RAND_MAX - 1);
    }
    ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])x), 0);
    if (trial == 10) ck_assert_int_eq(ts_aabb_tree_rebuild(tree, (const double (*)[3])x), 0);
    ts_self_contact_detect(&w, tree, t, (const double (*)[3])x);
    ts_self_contact_detect_pernode(&r, tree, t, (const double (*)[3])x);
    const uint32_t nb = ts_self_contact_brute(&w.def, t, (const double (*)[3])x, ref, w.def.cap);
    ck_assert_uint_eq(w.found, nb);
    ck_assert_uint_eq(r.found, nb);
    ck_assert_uint_le(nb, w.def.cap);
    qsort(r.pair, r.n, sizeof *r.pair, cmp_pair);
    for (uint32_t i = 0; i < nb; i++) {
      /* the walk's pairs come sorted already */
      ck_assert_msg(same_pair(&w.pair[i], &ref[i]), "trial %d: walk pair %u differs", trial, i);
      ck_assert_msg(same_pair(&r.pair[i], &ref[i]), "trial %d: per-node pair %u differs", trial, i);
    }
    if (!noskip) ck_assert_uint_gt(w.walk.pruned[0] + w.walk.pruned[1], 0);
    total[noskip] += nb;
  }
  fprintf(stderr, "test_self_contact: walk = per-node = brute force on 24 folded states: %llu "
          "pairs with the skip rule, %llu without\n", (unsigned long long)total[0],
          (unsigned long long)total[1]);
  ck_assert_uint_gt(total[0], 200);
  ck_assert_uint_gt(total[1], total[0]); /* the crease's pairs */
  ck_assert_uint_eq(w.overflow, 0);
  ck_assert_uint_eq(r.overflow, 0);
  /* another tissue and tree (more triangles): detect binds to them itself */
  ts_tissue *t2 = flat_patch(41);
  ts_aabb_tree *tree2 = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t2, &tree2), 0);
  w.def.rest_skip = ts_default_self_contact_def().rest_skip;
  ck_assert_uint_eq(ts_self_contact_detect(&w, tree2, t2, (const double (*)[3])t2->x), 0);
  ck_assert_uint_gt(w.walk.pruned[0] + w.walk.pruned[1], 0);
  ck_assert_int_eq(ts_self_contact_bind(&w, NULL, t2), TS_EINVAL);
  ts_aabb_tree_destroy(tree2);
  ts_tissue_destroy(t2);
  ts_aabb_tree_destroy(tree);
  ts_self_contact_free(&w);
  ts_self_contact_free(&r);
  free(ref);
  free(x);
  ts_tissue_destroy(t);
}
END_TEST

/* resolution 141 (patch-L's 81,000 contact triangles) takes most of this
 * file's time under the sanitizers: the normal build runs it */
#ifdef TS_TEST_SANITIZED
#define SLIDE_PATCHES 1
#else
#define SLIDE_PATCHES 2
#endif

/* The pruning bounds are tight, not just safe: one outer-sheet node of a
 * flat patch lifted 0.5 mm and slid 4.2 to 8 mm along x over triangles it
 * was 4 mm or more from at rest (in contact with them: in front, closer
 * than h); its displacement differs from theirs by the slide, just over
 * rest_skip - h = 3 mm at the least. On the 2 mm triangles of resolution
 * 41 the walk finds what the brute force finds, on patch-L's 0.57 mm ones
 * (resolution 141, where the rest boxes are tight too) what the per-node
 * query finds (a displacement bound of rest_skip + h loses the first
 * one's short slides, a rest bound of 1.5 rest_skip the second's). */
START_TEST(test_detect_slide) {
  for (int fine = 0; fine < SLIDE_PATCHES; fine++) {
    ts_tissue *t = flat_patch(fine ? 141 : 41);
    double (*x)[3] = malloc(sizeof *x * t->n_nodes);
    ck_assert_ptr_nonnull(x);
    ts_self_contact w, r;
    ck_assert_int_eq(ts_self_contact_init(&w, NULL), 0);
    ck_assert_int_eq(ts_self_contact_init(&r, NULL), 0);
    ts_self_pair *ref = malloc(sizeof *ref * w.def.cap);
    ck_assert_ptr_nonnull(ref);
    ts_aabb_tree *tree = NULL;
    ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
    /* the outer-sheet node nearest (-10 mm, 0, 5 mm) */
    uint32_t p = 0;
    double best = INFINITY;
    for (uint32_t j = 0; j < t->nodes_per_sheet; j++) {
      const double dx = t->rest[j][0] + 0.01, dz = t->rest[j][2] - 0.005;
      if (dx * dx + dz * dz < best) best = dx * dx + dz * dz, p = j;
  }
  static const double slide[] = {4.2e-3, 4.6e-3, 5.0e-3, 5.5e-3, 6.5e-3, 8e-3};
  uint32_t total = 0;
  for (size_t k = 0; k < sizeof slide / sizeof slide[0]; k++) {
    memcpy(x, t->rest, sizeof *x * t->n_nodes);
    x[p][0] += slide[k];
    x[p][1] += 0.5e-3;
    ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double (*)[3])x), 0);
    ts_self_contact_detect(&w, tree, t, (const double (*)[3])x);
    uint32_t nb;
    if (fine) { /* the brute force would take minutes */
      nb = ts_self_contact_detect_pernode(&r, tree, t, (const double (*)[3])x);
      ck_assert_uint_eq(r.found, nb);
      qsort(r.pair, nb, sizeof *r.pair, cmp_pair);
      memcpy(ref, r.pair, sizeof *ref * nb);
    } else {
      nb = ts_self_contact_brute(&w.def, t, (const double (*)[3])x, ref, w.def.cap);
    }
    ck_assert_uint_eq(w.found, nb);
    for (uint32_t i = 0; i < nb; i++)
      ck_assert_msg(same_pair(&w.pair[i], &ref[i]), "slide %g mm: pair %u differs", slide[k] * 1e3, i);
    if (slide[k] < 5e-3) ck_assert_uint_gt(nb, 0); /* the short slides do touch */
    total += nb;
  }
  fprintf(stderr, "test_self_contact: one node slid 4.2-8 mm over its sheet (resolution %d): "
          "%u pairs, as the %s\n", fine ? 141 : 41, total, fine ? "per-node query" : "brute force");
  ts_aabb_tree_destroy(tree);
  ts_self_contact_free(&w);
  ts_self_contact_free(&r);
  free(ref);
  free(x);
  ts_tissue_destroy(t);
  }
}
END_TEST

/* The flat patch at rest has no pairs: its outer and inner sheets face
 * away from each other, and its rim nodes lie beside the side walls, not
 * over them (the count without the skip rule is printed: 0 too; the skip
 * rule is what leaves out the fold's crease, where both halves meet). */
START_TEST(test_rest_none) {
  ts_tissue *t = flat_patch(13);
  ts_self_contact sc;
  ck_assert_int_eq(ts_self_contact_init(&sc, NULL), 0);
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  ck_assert_uint_eq(ts_self_contact_detect(&sc, tree, t, (const double (*)[3])t->x), 0);
  sc.def.rest_skip = 0;
  const uint32_t n0 = ts_self_contact_detect(&sc, tree, t, (const double (*)[3])t->x);
  fprintf(stderr, "test_self_contact: flat patch at rest: 0 pairs, %u without the skip rule\n", n0);
  ts_aabb_tree_destroy(tree);
  ts_self_contact_free(&sc);
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_bad_def) {
  ts_self_contact sc;
  ts_self_contact_def d = ts_default_self_contact_def();
  d.thickness = 0;
  ck_assert_int_ne(ts_self_contact_init(&sc, &d), 0);
  d = ts_default_self_contact_def();
  d.thickness = NAN;
  ck_assert_int_ne(ts_self_contact_init(&sc, &d), 0);
  d = ts_default_self_contact_def();
  d.cap = 0;
  ck_assert_int_ne(ts_self_contact_init(&sc, &d), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("self_contact");
  TCase *tc = tcase_create("self");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_detect_brute);
  tcase_add_test(tc, test_walk_pairs);
  tcase_add_test(tc, test_detect_methods);
  tcase_add_test(tc, test_detect_slide);
  tcase_add_test(tc, test_rest_none);
  tcase_add_test(tc, test_bad_def);
  tcase_add_test(tc, test_fold_massspring);
  tcase_add_test(tc, test_fold_xpbd);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
