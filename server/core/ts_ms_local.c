/*
 * ts_ms_local.c: local mass scaling of a refined region: after a live
 * refinement (ts_refine.h), inertia is added to the few nodes whose own
 * stability bound the refinement put below the unrefined tissue's, just
 * enough that the tissue's stable substep, and so its substep count, is
 * back to the unrefined one.
 *
 * Why. A refinement halves the in-sheet springs of a small region: k =
 * E A / L doubles for them and the new nodes are lighter, so that region's
 * in-sheet modes are about twice as fast as anything else, and the bound on
 * the fastest mode (ts_ms_bounds.c) is set by it alone: measured, patch-S
 * took 13 substeps per 1 ms step before a refinement of a 5 mm region, 27
 * (Loop) and 26 (LEB) after; the default patch 7 before, 13 and 12 after.
 * One small marked lesion made the whole session twice as slow.
 *
 * What. The conventional mass scaling of explicit finite-element codes for
 * their few small elements (LS-DYNA's DT2MS adds mass only to the elements
 * whose own time step is below the target; L. Olovsson, K. Simonsson and
 * M. Unosson, Int. J. Numer. Meth. Engng 63(10):1436-1445, 2005, discuss
 * it beside the selective kind of ts_ms_sms.c). Here a node's own bound is
 * its Gershgorin row of M^-1 K: R_i / m_i, R_i = max over its three rows of
 * sum over its springs of kc n_r (n . 1) (1 + [the other end free]), the
 * row of abs_product (ts_ms_bounds.c) without the neighbours' masses, so
 * that adding mass to a node lowers its own bound alone. For a threshold
 * tau every free node gets the inertia m'_i = max(m_i, R_i / tau); the
 * largest tau whose tissue bound (the same Collatz-Wielandt bound the step
 * takes, over the same springs) gives a stable substep at least the
 * unrefined tissue's is found by bisection on log tau (10 halvings between
 * the largest row of the unrefined tissue, recorded with its bounds, and
 * the largest row now, some 8 times apart: tau within 0.2 % of the
 * optimum), tau never below that floor, so that only the nodes whose rows
 * are above every row of the unrefined tissue get any: the refined nodes
 * and their neighbours (test_local_scale.c checks it). Where the floor
 * binds (the refined region's nodes, all at the floor, form a block whose
 * bound is above the unrefined tissue's scattered largest rows), the
 * substep comes back to within a substep or two of the unrefined one
 * rather than to it. Letting tau go below the floor on the same nodes
 * (those above every row of the unrefined tissue, no other) would bring
 * more of it back but costs more than the finer spacing explains:
 * measured on patch-S's resolution (test_local_scale, tau down to a
 * quarter of the floor), LEB 14 -> 13 substeps (13 unrefined) with 2.85
 * instead of 2.19 times those nodes' mass, Loop 15 -> 14 only, with 3.02
 * instead of 2.35 times (halving a sheet's spacing needs at most 3 times,
 * the test's bound), so the floor stays. Cost: up to 12 answers from the
 * bound over the in-sheet springs, each whether a tau's inertia reaches
 * the target substep (reaches_at: both Collatz-Wielandt runs in one pass
 * over the springs, stopped once the answer is certain either way; the
 * springs' records made once, see bisect below), the last tau's inertia
 * then set without a bound. On patch-S refined by Loop
 * (a driver timing it alone, CPU, min of 5): 4.3-4.5 ms, against 49-54 ms
 * when each answer took both runs apart and to the end (18-23 ms with
 * only the yes answers stopped early); patch-L 53 ms against 609 ms (a
 * live refinement runs off the stepping thread, server/refine.c).
 *
 * The target. The first prepare of a tissue records its bounds
 * (t->lms_ref: w^2 and the damping rate, without drag) and every tissue
 * derived from it keeps them (ts_tissue_copy_settings: a refinement, a
 * refinement of a refinement, a snapshot), so the target is the unrefined
 * tissue's, not the last refinement's. Which springs: where the unrefined
 * tissue ran with selective mass scaling (its through-thickness modes
 * slowed to the in-sheet springs' bound), the in-sheet (EDGE) springs
 * alone, since the selective scaling then brings the through-thickness
 * modes down to whatever the in-sheet bound is with the added inertia
 * (ts__ms_sms_choose sees ms->iw); otherwise (lumped masses: the liver)
 * every spring. A tissue whose reference is over the in-sheet springs but
 * which has no columns (mass_scaling off) is left alone.
 *
 * Statics and dynamics. As with the uniform inertia scale (ts_ms_bounds.c):
 * gravity, drag and external forces keep the physical masses (ms->mass),
 * only the inertia (ms->iw, M~'s diagonal) carries dm, so every static
 * equilibrium is unchanged; only those nodes' motion slows down. Strain
 * limiting and the mesh tools' triangle pass, position projections, keep
 * weighting by the physical masses; the energies and the divergence test's
 * kinetic energy stay physical. So does the hand-over's node force
 * (ts_handover.h: f = m a - F with the physical m): matching the unrefined
 * accelerations over the added inertia instead (m' a - F) made the first
 * step after a refinement under a moving sphere 43 um off the unrefined
 * twin against 24 um (test_refine_async, async case; the bound there is
 * 37 um), the heavier nodes' slower response within the step, not their
 * start, being what differs; at rest both are within 0.5 um. It
 * composes with the uniform inertia scale of a capped session (that scale
 * multiplies the inertia, added mass included, and is chosen from the
 * bounds with it) and with the selective scaling (M~ + diag(dm)).
 *
 * Measured (tests/bench/bench_mesh.c, refined_step_*; test_local_scale.c):
 * see README "Local refinement" for the figures.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_ms_internal.h"

#define LOCAL_HALVINGS 10 /* bisection steps on log tau */
#define LOCAL_FLOOR_MARGIN 1e-6

/* How many springs the scaling looks at: the in-sheet ones (sheet) or the
 * step's own. */
static uint32_t spring_count(const ts_tissue *t, const struct ts__ms *ms, int sheet) {
  if (!sheet) return ms->n_springs;
  uint32_t ne = 0;
  for (uint32_t s = 0; s < t->n_springs; s++) ne += t->springs[s].kind == TS_SPRING_EDGE;
  return ne;
}

/* Those springs' records for the bounds (ts__ms_abs_fill) over iw; their
 * count. The in-sheet ones are made from t's springs on the fly, in t's
 * order, as a copy of them as hot springs gave them before (a copy of 30
 * MB on a resolution-200 patch, 477,000 in-sheet springs). */
static uint32_t spring_records(const ts_tissue *t, const struct ts__ms *ms, int sheet, const double *iw,
                               ts__asp *as) {
  return sheet ? ts__ms_abs_fill_sheet(t, iw, as) : ts__ms_abs_fill(t, iw, ms->hs, ms->n_springs, as);
}

/* Spring sp's part of the rows R_i (see the top of the file) into y. */
static void node_row_add(const ts_tissue *t, const ts__hs *sp, double (*y)[3]) {
  const double *im = t->inv_mass;
  const int fa = im[sp->a] > 0, fb = im[sp->b] > 0;
  double n[3], l2 = 0, kc = sp->k1 + sp->k2;
  for (int r = 0; r < 3; r++) {
    n[r] = t->rest[sp->b][r] - t->rest[sp->a][r];
    l2 += n[r] * n[r];
  }
  if (l2 > 0)
    for (int r = 0; r < 3; r++) n[r] = fabs(n[r]) / sqrt(l2);
  else
    n[0] = n[1] = n[2] = 1.0;
  const double sn = n[0] + n[1] + n[2];
  for (int r = 0; r < 3; r++) {
    if (fa) y[sp->a][r] += kc * n[r] * sn * (1.0 + fb);
    if (fb) y[sp->b][r] += kc * n[r] * sn * (1.0 + fa);
  }
}

/* R_i (see the top of the file) for every node into R, over the in-sheet
 * springs (sheet) or the step's. */
static void node_rows(const ts_tissue *t, const struct ts__ms *ms, int sheet, double (*y)[3], double *R) {
  memset(y, 0, sizeof *y * t->n_nodes);
  if (sheet) {
    for (uint32_t s = 0; s < t->n_springs; s++) {
      if (t->springs[s].kind != TS_SPRING_EDGE) continue;
      ts__hs h;
      ts__ms_hot_spring(&t->springs[s], &h);
      node_row_add(t, &h, y);
    }
  } else {
    for (uint32_t s = 0; s < ms->n_springs; s++) node_row_add(t, &ms->hs[s], y);
  }
  for (uint32_t i = 0; i < t->n_nodes; i++) R[i] = fmax(y[i][0], fmax(y[i][1], y[i][2]));
}

/* Sets iw for the threshold tau (INFINITY: the physical masses). */
static void set_inertia(const ts_tissue *t, double *iw, const double *R, double tau) {
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const double w = t->inv_mass[i];
    const double mt = w > 0 && tau < INFINITY ? R[i] / tau : 0.0;
    iw[i] = w > 0 && mt * w > 1.0 ? 1.0 / mt : w;
  }
}

/* The bisection's spring records, made once over the physical masses. A
 * tau at or above the floor changes the inertia of a node only where
 * (R_i / floor) w_i > 1 (set_inertia's test; a larger tau only lowers
 * R_i / tau, rounding included): those nodes are marked, and each question
 * remakes only the records with a marked end (ts__ms_abs_reweigh: the
 * same bits as all of them afresh). That every other node kept its mass is
 * checked at each question all the same; where one did not, every record
 * is made afresh from then on. Making all the records for each question,
 * as before, took a pass over every spring and, on a resolution-200
 * patch (477,000 in-sheet springs), 34 MB of fresh memory each time. */
typedef struct bisect {
  const struct ts__ms *ms;
  int sheet, all;
  ts__asp *as;
  uint32_t na, ni;
  const uint32_t *idx;
  const unsigned char *mark;
} bisect;

/* Sets iw for the threshold tau; whether the bound over the records then
 * gives a stable substep of href or more (1), or not (0). Both bounds in
 * one pass over the springs an iteration, and the iterations stop once the
 * answer is certain, yes or no (ts__ms_scaled_bounds' reach): the same
 * answers as each bound's whole run taken apart (test_prepare_short), so
 * the same tau and the same inertia to the bit. */
static int reaches_at(const ts_tissue *t, double *iw, bisect *q, const double *R, double tau, double drag,
                      double href, double (*d)[3], double (*y)[3], double (*d1)[3], double (*y1)[3]) {
  set_inertia(t, iw, R, tau);
  for (uint32_t i = 0; i < t->n_nodes && !q->all; i++)
    if (!q->mark[i] && iw[i] != t->inv_mass[i]) q->all = 1;
  if (q->all)
    q->na = spring_records(t, q->ms, q->sheet, iw, q->as);
  else
    ts__ms_abs_reweigh(q->as, q->idx, q->ni, iw);
  const double reach[2] = {href, drag};
  double w2, g;
  const int rc = ts__ms_abs_bounds(t, q->as, q->na, d, y, d1, y1, reach, &w2, &g);
  if (rc == 2) return 0;
  return rc == 1 || ts__ms_step_bound(w2, g + drag, 1.0) >= href;
}

int ts__ms_local_choose(const ts_tissue *t, struct ts__ms *ms, uint32_t n_col, double (*d)[3],
                        double (*y)[3], ts__scratch *sc) {
  const uint32_t n = t->n_nodes;
  memcpy(ms->iw, t->inv_mass, sizeof *ms->iw * n);
  memset(ms->dm, 0, sizeof *ms->dm * n);
  ms->dm_nodes = 0;
  ms->dm_total = ms->dm_region = ms->dm_target = 0;
  const double w2r = t->lms_ref[0], gr = t->lms_ref[1];
  if (!t->local_mass_scaling || !(w2r > 0) || !isfinite(w2r) || !(gr >= 0) || !isfinite(gr)) return 0;
  const int sheet = t->lms_ref_sheet != 0;
  if (sheet && !n_col) return 0;
  const uint32_t ns = spring_count(t, ms, sheet);
  if (!ns) return 0;
  double *R = malloc(sizeof *R * n);
  double (*d1)[3] = malloc(sizeof *d1 * n), (*y1)[3] = malloc(sizeof *y1 * n);
  int rc = -2;
  if (!R || !d1 || !y1) goto done;
  const double drag = isfinite(t->drag) && t->drag > 0 ? t->drag : 0.0;
  const double href = ts__ms_step_bound(w2r, gr + drag, 1.0);
  double *iw = ms->iw;
  node_rows(t, ms, sheet, y, R);
  /* the floor a hair above the unrefined tissue's largest row: a node the
   * refinement did not touch keeps its row (ts_refine.c keeps its mass)
   * and gets nothing */
  const double floor_tau = t->lms_ref[2] * (1.0 + LOCAL_FLOOR_MARGIN);
  double hi = 0;
  for (uint32_t i = 0; i < n; i++)
    if (t->inv_mass[i] > 0) hi = fmax(hi, R[i] * t->inv_mass[i]);
  /* something to do only where a row is above every row of the unrefined
   * tissue (the floor) and the substep is short of the target */
  int r = 1;
  if (floor_tau > 0 && hi > floor_tau) {
    /* the records, then the indices of those with a marked end, then the marks */
    const size_t rb = ts__ms_abs_bytes(ns);
    char *blk = ts__scratch_get(sc, rb + sizeof(uint32_t) * (size_t)ns + n);
    if (!blk) goto done;
    bisect q = {.ms = ms, .sheet = sheet, .as = (ts__asp *)(void *)blk};
    uint32_t *idx = (uint32_t *)(void *)(blk + rb);
    unsigned char *mark = (unsigned char *)(idx + ns);
    for (uint32_t i = 0; i < n; i++) {
      const double w = t->inv_mass[i];
      mark[i] = w > 0 && R[i] / floor_tau * w > 1.0;
    }
    q.na = spring_records(t, ms, sheet, t->inv_mass, q.as);
    q.ni = ts__ms_abs_touching(q.as, q.na, mark, idx);
    q.idx = idx;
    q.mark = mark;
    if ((r = reaches_at(t, iw, &q, R, INFINITY, drag, href, d, y, d1, y1)) == 0) {
      double lo = floor_tau;
      if ((r = reaches_at(t, iw, &q, R, lo, drag, href, d, y, d1, y1)) == 1)
        for (int k = 0; k < LOCAL_HALVINGS; k++) {
          const double mid = sqrt(lo * hi);
          if (reaches_at(t, iw, &q, R, mid, drag, href, d, y, d1, y1))
            lo = mid;
          else
            hi = mid;
        }
      set_inertia(t, iw, R, lo);
      for (uint32_t i = 0; i < n; i++) {
        if (!(t->inv_mass[i] > 0) || iw[i] == t->inv_mass[i]) continue;
        const double m = 1.0 / t->inv_mass[i];
        ms->dm[i] = 1.0 / iw[i] - m;
        ms->dm_nodes++;
        ms->dm_total += ms->dm[i];
        ms->dm_region += m;
      }
      ms->dm_target = href;
    }
  }
  rc = 0; /* (a tau of INFINITY, the last one set where nothing is added, is the physical masses) */
done:
  free(R);
  free(d1);
  free(y1);
  return rc;
}

int ts__ms_local_reference(ts_tissue *t, const struct ts__ms *ms, double (*d)[3], double (*y)[3],
                           ts__scratch *sc) {
  if (t->lms_ref[0] > 0 || ms->dm_nodes > 0) return 0;
  /* the springs the bounds are over: the in-sheet ones under selective
   * scaling (their own bounds, not the step's), else the step's */
  const int sheet = ms->sms != 0;
  const uint32_t ns = spring_count(t, ms, sheet);
  if (!ns) return 0;
  double *R = malloc(sizeof *R * t->n_nodes), top = 0;
  if (!R) return -2;
  double w2 = ms->w2, g = ms->g;
  if (sheet) { /* both at once, the same bounds */
    double (*d1)[3] = malloc(sizeof *d1 * t->n_nodes), (*y1)[3] = malloc(sizeof *y1 * t->n_nodes);
    ts__asp *as = ts__scratch_get(sc, ts__ms_abs_bytes(ns));
    const int rc = d1 && y1 && as
                       ? ts__ms_abs_bounds(t, as, spring_records(t, ms, sheet, ms->iw, as), d, y, d1, y1,
                                           NULL, &w2, &g)
                       : -1;
    free(d1);
    free(y1);
    if (rc) {
      free(R);
      return -2;
    }
  }
  node_rows(t, ms, sheet, y, R);
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (t->inv_mass[i] > 0) top = fmax(top, R[i] * t->inv_mass[i]);
  free(R);
  if (!(w2 > 0) || !isfinite(w2) || !(g >= 0) || !isfinite(g) || !(top > 0) || !isfinite(top)) return 0;
  t->lms_ref[0] = w2;
  t->lms_ref[1] = g;
  t->lms_ref[2] = top;
  t->lms_ref_sheet = ms->sms != 0;
  return 0;
}

/* ---- public: the report ---- */

static int prepared(const ts_tissue *t) {
  return t && t->ms && t->ms->n_nodes == t->n_nodes && t->ms->n_springs == t->n_springs;
}

int ts_massspring_local_mass(const ts_tissue *t, ts_local_mass *out, double *per_node) {
  if (!out) return TS_EINVAL;
  memset(out, 0, sizeof *out);
  if (!prepared(t)) return TS_EINVAL;
  const struct ts__ms *ms = t->ms;
  out->nodes = ms->dm_nodes;
  out->added = ms->dm_total;
  out->region_mass = ms->dm_region;
  out->target_dt = ms->dm_target;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (t->inv_mass[i] > 0) out->tissue_mass += 1.0 / t->inv_mass[i];
  if (per_node) memcpy(per_node, ms->dm, sizeof *per_node * t->n_nodes);
  return 0;
}
