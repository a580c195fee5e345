/*
 * ts_massspring.c: the mass-spring step of the first method (see
 * ts_massspring.h): nonlinear anisotropic Kelvin springs (ts_material.h),
 * gravity, external forces and drag, integrated by the method's hybrid of
 * Verlet and Beeman with a second-order Taylor start, then strain limiting
 * and tool contact.
 *
 * The step is split by concept (ts_ms_internal.h lists the files): the
 * springs' copy (ts_ms_springs.c), the force loop (ts_ms_forces.c), the
 * integrator (ts_ms_integrate.c), strain limiting (ts_ms_limit.c), the
 * stability bounds and substep count (ts_ms_bounds.c), selective mass
 * scaling (ts_ms_sms.c), tool contact (ts_ms_contact.c) and the energies
 * (ts_ms_energy.c). This file prepares the step's private data and runs
 * the step: the substep count, per substep the forces, the update, strain
 * limiting and contact, then the divergence checks (a non-finite state, a
 * node faster than 100 m/s, or the kinetic energy growing by over 20 % per
 * step for 20 steps: an unstable mode grows geometrically; a tissue set
 * moving from rest, by a tool or by gravity, grows like t^2, over 20 % per
 * step only in its first ten steps). With t->max_substeps the substep
 * count also brings the inertia scale (ts_ms_bounds.c), applied to the
 * history before the substeps. After a refinement, prepare also adds
 * inertia to the few nodes the refinement made faster than the unrefined
 * tissue (local mass scaling, ts_ms_local.c) before the selective scaling
 * and the bounds are chosen, which then see it. No allocation in the step.
 */
#include "ts_massspring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

/* Strain limiting's blocks (ts_ms_internal.h): ms->hlim holds the hot
 * springs' original indices on entry, their indices in ms->lim on return. */
static void limit_blocks(const ts_tissue *t, struct ts__ms *ms) {
  const uint32_t ns = ms->n_springs, cls[3] = {ms->n_lin, ms->n_one, ms->n_two};
  uint32_t nb = 0, first = 0;
  for (int q = 0; q < 3; q++) {
    for (uint32_t s0 = 0; s0 < cls[q]; s0 += TS__BLK, nb++) {
      const uint32_t m = cls[q] - s0 < TS__BLK ? cls[q] - s0 : TS__BLK;
      double hi = INFINITY, lo = -INFINITY, il = 0;
      for (uint32_t j = first + s0; j < first + s0 + m; j++) {
        const ts_spring *sp = &t->springs[ms->hlim[j]];
        if (sp->strain_min == 0 && sp->strain_max == 0) continue;
        hi = TS__MIN(hi, sp->strain_max);
        lo = TS__MAX(lo, sp->strain_min);
        il = TS__MAX(il, sp->rest > 0 ? 1.0 / sp->rest : INFINITY);
      }
      ms->blk_first[nb] = first + s0, ms->blk_n[nb] = m;
      ms->blk_hi_min[nb] = hi, ms->blk_lo_max[nb] = lo, ms->blk_il_max[nb] = il;
      ms->blk_eps_max[nb] = INFINITY, ms->blk_eps_min[nb] = -INFINITY; /* not evaluated yet */
      ms->blk_x_max[nb] = INFINITY;
    }
    first += cls[q];
  }
  ms->n_blk = nb;
  /* the original index -> its index in lim (lim is in the original order) */
  uint32_t k = 0;
  for (uint32_t s = 0; s < ns; s++) {
    const ts_spring *sp = &t->springs[s];
    ms->cand[s] = sp->strain_min == 0 && sp->strain_max == 0 ? UINT32_MAX : k++;
  }
  for (uint32_t s = 0; s < ns; s++) ms->hlim[s] = ms->cand[ms->hlim[s]];
}

/* What a sphere's or capsule's thin pass asks every step before it can act
 * (ts__ms_thin_can_act): how long the contact surface's edges can be. Each
 * is a spring (a sheet edge, or on a side wall an INTERLAYER spring or a
 * side diagonal) and strain limiting keeps every spring within rest (1 +
 * strain_max), so the rest shape's longest contact edge times (1 + the
 * largest strain_max) bounds them all, at every substep: computed here, at
 * preparation and so after every refinement (ts_refine.c re-prepares),
 * instead of scanning the surface in every step (about 2 % of a patch-S
 * step, with any sphere or capsule active). The bound holds through the
 * whole step, so it needs none of the scan's allowance for growth within
 * one (half again, ts__ms_thin_can_act): the pass is run when the bound
 * reaches the edge it takes to act (ts__ms_thin_can_act_bound). Where the
 * decision differs from the scan's, no edge can reach that length in the
 * step and the pass, run or not, moves nothing: the steps are the same bit
 * for bit (tests/unit/test_ms_edge_bound.c; on patch-S the bound is 3.63
 * mm, the scan's 1.5 x 2.59 mm at rest, so a 5 mm sphere's pass is still
 * skipped). -1 when a spring is not limited: its edge has no bound, and
 * the step measures. */
static double contact_edge_bound(const ts_tissue *t) {
  double s_max = 0;
  for (uint32_t s = 0; s < t->n_springs; s++) {
    const ts_spring *sp = &t->springs[s];
    if (sp->strain_min == 0 && sp->strain_max == 0) return -1;
    s_max = TS__MAX(s_max, sp->strain_max);
  }
  double m2 = 0;
  const uint32_t(*tris)[3] = (const uint32_t(*)[3])ts_tissue_contact_tris(t);
  for (uint32_t f = 0, nf = ts_tissue_n_contact_tris(t); f < nf; f++)
    for (int k = 0; k < 3; k++) {
      const double *a = t->rest[tris[f][k]], *b = t->rest[tris[f][(k + 1) % 3]];
      const double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
      m2 = TS__MAX(m2, dx * dx + dy * dy + dz * dz);
    }
  double bound = sqrt(m2) * (1 + s_max);
  return isfinite(bound) ? bound : -1;
}

/* The stability bounds of ts_massspring_prepare: the lumped masses'
 * Collatz-Wielandt bounds (and their weights, ms->wd); with the selective
 * mass scaling (ms->sms), M~^-1 K's and M~^-1 C's largest eigenvalues by
 * power iteration (ms->w2, ms->g, with their margin), the scaling kept only
 * where its bound allows the longer substep. The stiffness's and
 * the dampers' bounds are found two at a time, one pass over the springs an
 * iteration for both, each spring's constants for the products made once
 * for all the iterations; the same bounds bit for bit as one at a time
 * from the springs (w2, g, the weights and stable_dt compared on patches of
 * resolution 20, 50, 141 and 250). Measured with a driver timing
 * ts_massspring_prepare alone (best of 3, old and new alternated, load
 * under 1.5): patch-L (79,524 nodes) 1.40-1.41 s against 1.63-1.68 s; a
 * 250,000-node patch 5.15 s against 5.80 s. What is left of it is the
 * iterations' gathers and scatters over the nodes.
 * d, y: scratch of n_nodes rows. Returns 0, -1 when out of memory, or -2
 * when t->stop asked to stop (ts_tissue.stop: the iterations check it). */
static int prepare_bounds(ts_tissue *t, struct ts__ms *ms, uint32_t ns, double (*d)[3],
                          double (*y)[3], ts__scratch *sc) {
  const uint32_t n = t->n_nodes;
  double (*d2)[3] = malloc(sizeof *d2 * n);
  double (*y2)[3] = malloc(sizeof *y2 * n);
  int rc = -1;
  double w2l = 0, gl = 0; /* the lumped masses' bounds */
  ts__asp *as = ts__scratch_get(sc, ts__ms_abs_bytes(ns));
  if (!d2 || !y2 || !as) goto done;
  if (ts__ms_abs_bounds(t, as, ts__ms_abs_fill(t, ms->iw, ms->hs, ns, as), d, y, d2, y2, NULL, &w2l, &gl))
    goto done;
  if (ts_tissue_stop_asked(t)) { /* its iterations broke off: the build is abandoned */
    rc = -2;
    goto done;
  }
  memcpy(ms->wd, d, sizeof *d * n); /* the stiffness's weights: the stiffened bound's (ts_ms_bounds.c) */
  /* the scaling only where it lengthens the stable substep: where the
   * through-thickness modes are not the fastest (the in-sheet springs of a
   * region refined finer than the layers are thick, a mesh whose extrusion
   * thinned some prisms) it gains nothing, and its bound, an estimate with
   * a margin, is then shorter than the lumped masses' Gershgorin bound.
   * The lumped bound comes first, so that the power iterations stop as soon
   * as the scaling has lost: the same choice and the same bounds
   * (test_prepare_short), and on the liver, where it loses, the prepare
   * takes 27-41 ms of CPU instead of 89-124 ms with the bounds' other
   * shortcuts (a driver timing it alone, min of 5, old and new
   * alternated) */
  const double drag = isfinite(t->drag) && t->drag > 0 ? t->drag : 0.0;
  if (ms->sms) {
    ts__ms_sms_factor(t, ms);
    double pw = 0, pg = 0;
    const double beat[2] = {ts__ms_step_bound(w2l, gl + drag, 1.0), drag};
    rc = ts__ms_power_bounds(t, ms, d, y, d2, y2, beat, &pw, &pg, sc);
    if (rc < 0) goto done;
    ms->w2 = TS__SMS_MARGIN * pw;
    ms->g = TS__SMS_MARGIN * pg;
    if (rc == 1 || !(ts__ms_step_bound(ms->w2, ms->g + drag, 1.0) > beat[0])) ms->sms = 0;
  }
  if (!ms->sms) {
    ms->w2 = w2l;
    ms->g = gl;
  }
  rc = 0;
done:
  free(d2);
  free(y2);
  return rc;
}

/* ts_massspring_prepare's way out of a failed or stopped preparation: frees
 * what it had made and returns rc. */
static int prepare_fail(struct ts__ms *ms, void *d, void *y, ts__scratch *sc, int rc) {
  free(d);
  free(y);
  if (sc) ts__scratch_free(sc);
  free(ms->hot_of);
  free(ms);
  return rc;
}

int ts_massspring_prepare(ts_tissue *t) {
  if (!t || t->n_nodes == 0 || !t->x || !t->inv_mass || !t->rest) return TS_EINVAL;
  if (t->n_springs > 0 && !t->springs) return TS_EINVAL;
  /* The daemon stopping (ts_tissue.stop) is looked at between the stages
   * below and within the stability bounds' iterations, the longest of
   * them: on a 1,048,576-node patch the stages take up to 3 s each and the
   * whole about 30 s, which a stop would otherwise wait out. */
  if (ts_tissue_stop_asked(t)) return TS_ESHUTDOWN;
  uint32_t ns = t->n_springs, nl = 0, n = t->n_nodes;
  for (uint32_t s = 0; s < ns; s++) {
    const ts_spring *sp = &t->springs[s];
    if (sp->strain_min != 0 || sp->strain_max != 0) nl++;
  }
  const uint32_t n_col = t->mass_scaling ? ts__ms_columns(t) : 0; /* 0: no scaling */
  /* one block: the header, the hot springs (64-byte aligned), the limits,
   * the scaling's per-node arrays and the step's scratch */
  size_t off_hs = (sizeof(struct ts__ms) + 63) & ~(size_t)63;
  size_t off_lim = off_hs + sizeof(ts__hs) * ns;
  size_t off_node = (off_lim + sizeof(ts__lim) * nl + 63) & ~(size_t)63;
  size_t ns_pad = ((size_t)ns + TS__BLK + 7) & ~(size_t)7; /* 64-byte multiples */
  size_t off_pack = off_node + ((sizeof(double) * n * 19 + 63) & ~(size_t)63);
  /* xv (64 bytes a node) and f4 (32), the spring constants after them on a
   * 64-byte boundary again (n may be odd) */
  size_t off_soa = off_pack + ((sizeof(double) * 12 * (size_t)n + 63) & ~(size_t)63);
  size_t off_idx = off_soa + sizeof(double) * ns_pad * 7;
  size_t off_u32 = off_idx + sizeof(uint32_t) * ns_pad * 2;
  /* strain limiting's blocks (ts_ms_internal.h): at most ns / TS__BLK + 3 */
  size_t nb = (size_t)ns / TS__BLK + 3;
  size_t off_blk = (off_u32 + (2 * sizeof(uint32_t) + 1) * n + 63) & ~(size_t)63;
  size_t off_blk32 = off_blk + sizeof(double) * 6 * nb;
  size_t total = off_blk32 + sizeof(uint32_t) * (2 * nb + 2 * (size_t)ns);
  /* Tried and dropped (2026-12-05): the block on 2 MB pages when it is
   * that large (aligned to 2 MB, madvise MADV_HUGEPAGE; this kernel's
   * transparent huge pages are madvise-only, and the pages were taken:
   * AnonHugePages 122 MB on patch-L). One process stepping a copy with and
   * a copy without alternately, 300 steps a round, medians of 10-16
   * rounds: a capped patch-S step 513 us against 504 us, patch-L capped
   * 7.52 ms against 7.61 ms, patch-S uncapped 10.04 ms against 9.93 ms.
   * Separate bench_mechanics runs had shown 9 % more on patch-S: the
   * machine's noise, not the pages. */
  unsigned char *blk = aligned_alloc(64, (total + 63) & ~(size_t)63);
  if (!blk) return TS_ENOMEM;
  struct ts__ms *ms = (struct ts__ms *)blk;
  memset(ms, 0, sizeof *ms);
  if (t->ms) { /* the tools' last poses (friction's tool velocities) carry over */
    memcpy(ms->tl_pos, t->ms->tl_pos, sizeof ms->tl_pos);
    memcpy(ms->tl_quat, t->ms->tl_quat, sizeof ms->tl_quat);
    memcpy(ms->tl_seen, t->ms->tl_seen, sizeof ms->tl_seen);
    ms->inertia = t->ms->inertia; /* the scale the history is in */
  }
  if (!(ms->inertia >= 1.0)) ms->inertia = 1.0;
  ms->hs = (ts__hs *)(blk + off_hs);
  ms->lim = (ts__lim *)(blk + off_lim);
  double *node = (double *)(blk + off_node);
  ms->beta = node;
  ms->sl = node + n;
  ms->sip = node + 2 * (size_t)n;
  ms->an = (double (*)[3])(node + 3 * (size_t)n);
  ms->cn = (double (*)[3])(node + 6 * (size_t)n);
  ms->ob = node + 9 * (size_t)n;
  ms->mass = node + 10 * (size_t)n;
  ms->dm = node + 11 * (size_t)n;
  ms->iw = node + 12 * (size_t)n;
  ms->wd = (double (*)[3])(node + 13 * (size_t)n);
  ms->wy = (double (*)[3])(node + 16 * (size_t)n);
  ms->xv = (double (*)[8])(blk + off_pack);
  ms->f4 = (double (*)[4])(blk + off_pack + sizeof(double) * 8 * (size_t)n);
  double *soa = (double *)(blk + off_soa);
  double **soa_f[7] = {&ms->soa.L0, &ms->soa.iL0, &ms->soa.k1, &ms->soa.b1,
                       &ms->soa.k2, &ms->soa.b2, &ms->soa.c};
  for (int q = 0; q < 7; q++) *soa_f[q] = soa + q * ns_pad;
  ms->soa.a = (uint32_t *)(blk + off_idx);
  ms->soa.b = ms->soa.a + ns_pad;
  ms->clist = (uint32_t *)(blk + off_u32);
  ms->col = ms->clist + n;
  ms->ctool = (uint8_t *)(ms->col + n);
  double *bd = (double *)(blk + off_blk);
  ms->blk_hi_min = bd, ms->blk_lo_max = bd + nb, ms->blk_il_max = bd + 2 * nb;
  ms->blk_eps_max = bd + 3 * nb, ms->blk_eps_min = bd + 4 * nb, ms->blk_x_max = bd + 5 * nb;
  ms->blk_first = (uint32_t *)(blk + off_blk32);
  ms->blk_n = ms->blk_first + nb;
  ms->hlim = ms->blk_n + nb;
  ms->cand = ms->hlim + ns;
  /* zeroed a chunk at a time, the stop looked at between them: on a
   * 1,048,576-node patch this is 2 s, nearly all of it the new pages'
   * first touch */
  for (size_t o = 0, len = total - off_node, chunk = (size_t)64 << 20; o < len; o += chunk) {
    if (ts_tissue_stop_asked(t)) return prepare_fail(ms, NULL, NULL, NULL, TS_ESHUTDOWN);
    memset((unsigned char *)node + o, 0, len - o < chunk ? len - o : chunk);
  }
  ms->n_nodes = n;
  ms->n_springs = ns;
  uint32_t cnt[3];
  if (ts_tissue_stop_asked(t)) return prepare_fail(ms, NULL, NULL, NULL, TS_ESHUTDOWN);
  int rc = ts__ms_build_hot(t, ms->hs, cnt, ms->hlim); /* hlim: the original indices, for now */
  if (rc) return prepare_fail(ms, NULL, NULL, NULL, rc == -2 ? TS_ENOMEM : rc == -3 ? TS_ESHUTDOWN : TS_EINVAL);
  if (ts_tissue_stop_asked(t)) return prepare_fail(ms, NULL, NULL, NULL, TS_ESHUTDOWN);
  if (ts__ms_handover_index(t, ms, ms->hlim)) return prepare_fail(ms, NULL, NULL, NULL, TS_ENOMEM);
  ms->n_lin = cnt[0], ms->n_one = cnt[1], ms->n_two = cnt[2];
  for (size_t s = 0; s < ns_pad; s++) {
    const ts__hs *h = &ms->hs[s < ns ? s : 0];
    int pad = s >= ns;
    ms->soa.a[s] = pad ? 0 : h->a;
    ms->soa.b[s] = pad ? 0 : h->b;
    ms->soa.L0[s] = pad ? 1.0 : h->L0;
    ms->soa.iL0[s] = pad ? 1.0 : h->iL0;
    ms->soa.k1[s] = pad ? 0.0 : h->k1;
    ms->soa.b1[s] = pad ? 0.0 : h->b1;
    ms->soa.k2[s] = pad ? 0.0 : h->k2;
    ms->soa.b2[s] = pad ? 0.0 : h->b2;
    ms->soa.c[s] = pad ? 0.0 : h->c;
  }
  for (uint32_t s = 0; s < ns; s++) {
    const ts__hs *h = &ms->hs[s];
    ms->b_max = TS__MAX(ms->b_max, TS__MAX(h->b1, h->b2));
  }
  uint32_t k = 0;
  for (uint32_t s = 0; s < ns; s++) {
    const ts_spring *sp = &t->springs[s];
    if (sp->strain_min == 0 && sp->strain_max == 0) continue;
    ms->lim[k++] = (ts__lim){sp->a, sp->b, sp->rest * (1 + sp->strain_min),
                             sp->rest * (1 + sp->strain_max)};
  }
  ms->n_lim = k;
  if (ts_tissue_stop_asked(t)) return prepare_fail(ms, NULL, NULL, NULL, TS_ESHUTDOWN);
  limit_blocks(t, ms);
  ms->lim_hi_min = INFINITY, ms->lim_lo_max = -INFINITY, ms->lim_il_max = 0;
  for (uint32_t s = 0; s < ns; s++) {
    const ts_spring *sp = &t->springs[s];
    if (sp->strain_min == 0 && sp->strain_max == 0) continue;
    ms->lim_hi_min = TS__MIN(ms->lim_hi_min, sp->strain_max);
    ms->lim_lo_max = TS__MAX(ms->lim_lo_max, sp->strain_min);
    ms->lim_il_max = TS__MAX(ms->lim_il_max, sp->rest > 0 ? 1.0 / sp->rest : INFINITY);
  }
  ms->move2 = INFINITY; /* no update seen yet */
  ms->edge_bound = contact_edge_bound(t);
  for (uint32_t i = 0; i < n; i++) ms->mass[i] = t->inv_mass[i] > 0 ? 1.0 / t->inv_mass[i] : 0.0;

  if (ts_tissue_stop_asked(t)) return prepare_fail(ms, NULL, NULL, NULL, TS_ESHUTDOWN);
  double (*d)[3] = malloc(sizeof *d * n);
  double (*y)[3] = malloc(sizeof *y * n);
  /* one block of scratch for the bounds' spring records, borrowed by each
   * pass below in turn: fresh memory costs about 2.7 ms a megabyte on
   * these machines, and on a resolution-200 patch (1.3 million springs,
   * 477,000 of them in-sheet) the records are 94 MB, the in-sheet ones 34
   * MB, which the local scaling's bisection (for each of its questions),
   * the selective scaling's in-sheet bound, the lumped bounds and the
   * power iterations (their own records, 63 MB) each allocated afresh. Sized
   * at once for the largest borrower (every spring's record, and the
   * bisection's list and marks), so that it never grows. */
  ts__scratch sc = {0};
  const size_t sc_bytes = ts__ms_abs_bytes(ns) + sizeof(uint32_t) * (size_t)ns + n;
  if (!d || !y || !ts__scratch_get(&sc, sc_bytes) ||
      ts__ms_local_choose(t, ms, n_col, d, y, &sc)) /* ms->dm, ms->iw */
    return prepare_fail(ms, d, y, &sc, TS_ENOMEM);
  if (ts_tissue_stop_asked(t)) return prepare_fail(ms, d, y, &sc, TS_ESHUTDOWN);
  if (n_col) {
    ms->nv = n_col;
    ms->S = t->n_sheets;
    for (uint32_t sh = 0, q = 0; sh < ms->S; sh++)
      for (uint32_t j = 0; j < n_col; j++, q++) ms->col[q] = ts_tissue_sheet_node(t, sh, j);
    ms->col_identity = 1;
    for (uint32_t q = 0; q < n && ms->col_identity; q++) ms->col_identity = ms->col[q] == q;
    rc = ts__ms_sms_choose(t, ms, d, y, &sc);
    if (rc == -2) return prepare_fail(ms, d, y, &sc, TS_ENOMEM);
    ms->sms = rc == 0;
    if (ts_tissue_stop_asked(t)) return prepare_fail(ms, d, y, &sc, TS_ESHUTDOWN);
  }
  for (uint32_t q = 0; ms->sms && q < n; q++) { /* per slot */
    uint32_t below = q + ms->nv;
    ms->ob[q] = below < n && t->inv_mass[ms->col[below]] > 0 ? -ms->beta[q] : 0.0;
  }
  rc = prepare_bounds(t, ms, ns, d, y, &sc);
  if (rc) return prepare_fail(ms, d, y, &sc, rc == -2 ? TS_ESHUTDOWN : TS_ENOMEM);
  rc = ts__ms_local_reference(t, ms, d, y, &sc); /* the first prepare's bounds */
  free(d);
  free(y);
  ts__scratch_free(&sc);
  if (!rc) rc = ts__ms_guard_prepare(t, ms); /* frees its own on failure */
  if (rc) {
    free(ms->hot_of);
    free(blk);
    return TS_ENOMEM;
  }
  if (t->ms && t->ms->n_nodes == n) /* the same nodes: the jaws keep what they hold */
    for (int i = 0; i < TS__MAX_STEP_TOOLS; i++) {
      ms->grasp[i] = t->ms->grasp[i];
      t->ms->grasp[i] = NULL;
    }
  ts__ms_free(t->ms);
  t->ms = ms;
  t->stable_dt = ts__ms_step_bound(ms->w2, ms->g + TS__MAX(t->drag, 0.0), 1.0);
  return 0;
}

double ts_massspring_stable_dt(const ts_tissue *t) {
  if (!t || t->n_nodes == 0 || !t->rest || !t->inv_mass) return 0.0;
  if (t->n_springs > 0 && !t->springs) return 0.0;
  double drag = isfinite(t->drag) && t->drag > 0 ? t->drag : 0.0;
  if (t->ms) return ts__ms_step_bound(t->ms->w2, t->ms->g + drag, 1.0);
  ts__hs *hs = malloc(sizeof *hs * (t->n_springs ? t->n_springs : 1));
  double w2 = 0, g = 0, h = 0;
  uint32_t cnt[3];
  if (hs && ts__ms_build_hot(t, hs, cnt, NULL) == 0 && ts__ms_rest_bounds(t, hs, &w2, &g) == 0)
    h = ts__ms_step_bound(w2, g + drag, 1.0);
  free(hs);
  return h > 0 && isfinite(h) ? h : 0.0;
}

int ts_massspring_step(ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                       ts_step_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (!t || t->n_nodes == 0 || !t->x || !t->v || !t->f || !t->inv_mass) return TS_EINVAL;
  if (!isfinite(dt)) return TS_ENAN;
  if (!(dt > 0) || dt > TS__MAX_DT) return TS_EINVAL;
  if (n_tools < 0 || n_tools > TS__MAX_STEP_TOOLS || (n_tools > 0 && !tools)) return TS_EINVAL;
  for (int i = 0; i < 3; i++)
    if (!isfinite(t->gravity[i])) return TS_ENAN;
  if (!isfinite(t->drag) || t->drag < 0) return TS_EINVAL;
  if (!isfinite(t->beeman_threshold) || t->beeman_threshold < 0) return TS_EINVAL;
  if (t->strain_iterations < 1 || t->strain_iterations > 1000) return TS_EINVAL;

  ts__ptool pt[TS__MAX_STEP_TOOLS];
  int np = 0;
  for (int i = 0; i < n_tools; i++) {
    if (!tools[i].active) continue;
    int rc = ts__ms_valid_tool(&tools[i]);
    if (rc) return rc;
  }
  if (!t->ms || t->ms->n_nodes != t->n_nodes || t->ms->n_springs != t->n_springs) {
    int rc = ts_massspring_prepare(t);
    if (rc) return rc;
  }
  struct ts__ms *ms = t->ms;

  /* a refinement's hand-over, weighted at the middle of the step (before
   * the substep count, which measures the strains against the rest lengths
   * the step integrates) */
  ms->wh = ts_handover_weight(t->hand, t->time + 0.5 * dt);
  ms->fh = ms->wh > 0 ? (const double (*)[3])t->hand->f : (const double (*)[3])t->f_ext;
  ms->depth = ms->wh > 0 ? t->hand->depth : NULL;
  if (!(ms->wh > 0)) ms->wh = 0;
  ts__ms_handover_rest(t, ms, ms->wh); /* in rest lengths: blended at the same weight */

  /* the inversion guard's prisms for this step, before the substep count
   * that allows for its stiffness (ts_ms_guard.c) */
  ts__ms_guard_watch(t, ms, dt);
  double phi, scale;
  double nsub = ts__ms_substep_count(t, ms, dt, &phi, &scale);
  if (!(nsub <= TS__MAX_SUBSTEPS)) return TS_ERANGE;
  ts__ms_inertia_set(t, ms, scale);
  uint32_t n = (uint32_t)nsub;
  double h = dt / n;

  int8_t slot[TS__MAX_STEP_TOOLS]; /* caller's index -> pt[] (-1: inactive or absent) */
  double edge = -1; /* the surface's longest edge, when a sphere's or capsule's pass asks
                       and no bound is known */
  memset(slot, -1, sizeof slot);
  for (int i = 0; i < n_tools; i++) {
    tools[i].force[0] = tools[i].force[1] = tools[i].force[2] = 0;
    tools[i].torque[0] = tools[i].torque[1] = tools[i].torque[2] = 0;
    tools[i].contacts = 0;
    if (!tools[i].active || tools[i].kind != TS_TOOL_JAWS) ts__ms_grasp_release(ms->grasp[i]);
    if (!tools[i].active) {
      ms->tl_seen[i] = 0;
      continue;
    }
    slot[i] = (int8_t)np;
    ts__ms_prepare_tool(&pt[np], &tools[i]);
    if (pt[np].thin) { /* a sphere's or capsule's triangle pass, where it can act */
      if (ms->edge_bound >= 0) {
        pt[np].thin = ts__ms_thin_can_act_bound(&pt[np], ms->edge_bound);
      } else {
        if (edge < 0) edge = ts__ms_longest_edge(t);
        pt[np].thin = ts__ms_thin_can_act(&pt[np], edge);
      }
    }
    ts__ms_tool_motion(ms, &pt[np], i, dt);
    ts__ms_tool_at(&pt[np], 0.0); /* a swept tool starts at its last pose */
    pt[np].index = i;
    if (tools[i].kind == TS_TOOL_JAWS) {
      int rc = ts__ms_grasp_begin(t, ms, &pt[np], i);
      if (rc) return rc;
    }
    np++;
  }

  int taylor = 0;
  if (t->h_prev == 0) { /* a start or a reset */
    taylor = 1;
    ms->ke_prev = 0;
    ms->growth = 0;
    ts__ms_clear_contacts(ms);
  } else if (h != t->h_prev) {
    taylor = 1;
  }

  /* after a refinement (a new step data, no contact marks yet) the nodes on
   * a tool are marked before the first substep, as the unrefined tissue's
   * were, so that its reaction holds them from the first substep on */
  if (t->hand && t->h_prev == 0)
    for (int j = 0; j < np; j++) ts__ms_contact(t, ms, &pt[j], 0);

  ts__ms_revalidate_contacts(t, ms, pt, slot);
  ms->xv_ok = 0; /* the nodes may have moved since the last step: the first pass fills the rows */
  uint64_t counts[3] = {0, 0, 0};
  uint32_t fixes = 0, guarded = 0;
  double xs_step = 0, es_step = -INFINITY; /* n >= 1: set in the first substep */
  for (uint32_t k = 0; k < n; k++) {
    if (ts_tissue_stop_asked(t)) return TS_ESHUTDOWN; /* the daemon is stopping: mid-step */
    ts__ms_spring_rows(t, ms); /* f4 only: the integrators copy it to t->f */
    xs_step = TS__MAX(xs_step, ms->x_seen), es_step = TS__MAX(es_step, ms->eps_max);
    guarded += ts__ms_guard_forces(t, ms);
    if (ms->sms)
      ts__ms_integrate_sms(t, ms, h, taylor, pt, slot, counts);
    else
      ts__ms_integrate(t, ms, h, taylor, pt, slot, counts);
    taylor = 0;
    if (ms->n_lim && ts__ms_limit_needed(ms)) fixes += ts__ms_limit_strain(t, ms, h);
    /* the nodes the jaws hold, moved with them (ts_ms_grasp.c) */
    for (int j = 0; j < np; j++) {
      ts__ms_grasp_place(t, ms, &pt[j], (double)(k + 1) / n, h);
      if (ts__ms_grasp_held(pt[j].grasp)) ms->xv_ok = 0; /* held nodes placed: rows refilled */
    }
    ts__ms_clear_contacts(ms);
    /* a sphere or capsule that moved more than half its radius since the
     * last step moves along its path, at the pose (k + 1) / n of the way
     * (ts__ms_tool_at, TS__CORE_STEP), its triangle pass swept from the
     * substep's last pose; the other tools stand at their poses through
     * the substeps, and their triangle pass sweeps from the last pose in
     * the first */
    for (int j = 0; j < np; j++) {
      ts__ms_tool_at(&pt[j], (double)(k + 1) / n);
      ts__ms_contact(t, ms, &pt[j], k == 0 || pt[j].swept);
    }
  }
  /* the largest strains of the step's evaluations, for the next step's
   * count (ts_ms_bounds.c), not its last one's */
  ms->x_seen = xs_step, ms->eps_max = es_step;
  t->h_prev = h;
  ms->n_last = n;
  t->time += dt;
  t->steps++;
  ts_handover_expire(t, t->time);

  /* health and statistics */
  double vmax2 = 0, ke = 0;
  const int bad = ts__ms_health(t, ms, &ke, &vmax2, stats) != TS_DIVERGED_NONE; /* ts_ms_diverge.c */
  if (stats) {
    uint64_t all = counts[0] + counts[1] + counts[2];
    stats->substeps = n;
    stats->substep = h;
    stats->stiffening = phi;
    stats->inertia_scale = ms->inertia;
    stats->added_mass = ms->dm_total;
    if (all) {
      stats->taylor_fraction = (double)counts[TS_BRANCH_TAYLOR] / all;
      stats->verlet_fraction = (double)counts[TS_BRANCH_VERLET] / all;
      stats->beeman_fraction = (double)counts[TS_BRANCH_BEEMAN] / all;
    }
    stats->max_strain = ms->eps_max;
    stats->min_strain = ms->eps_min;
    stats->strain_limited = fixes;
    stats->guard_pushes = guarded;
  }
  if (bad) {
    ts_tissue_reset(t);
    ts__ms_clear_contacts(ms);
    ms->x_seen = ms->eps_max = ms->eps_min = 0;
    if (stats) stats->diverged = 1;
    return TS_EDIVERGED;
  }

  uint32_t contacts = 0;
  for (int j = 0; j < np; j++) {
    for (int k = 0; k < 3; k++) {
      pt[j].tool->force[k] = pt[j].force[k] / n;
      pt[j].tool->torque[k] = pt[j].torque[k] / n;
    }
    pt[j].tool->contacts = pt[j].contacts + ts__ms_grasp_held(pt[j].grasp);
    contacts += pt[j].tool->contacts;
  }
  if (stats) {
    stats->contacts = contacts;
    stats->max_speed = sqrt(vmax2);
    stats->kinetic_energy = ke;
  }
  return 0;
}
