/*
 * ts_ms_limit.c: strain limiting, the method's spring deformation
 * constraints applied after each substep's update.
 *
 * Strain limiting (X. Provot, "Deformation constraints in a mass-spring
 * model to describe rigid cloth behavior", Graphics Interface 1995): after
 * the update every spring outside its strain range [min, max] has its ends
 * moved along it, in inverse proportion to their masses (anchors do not
 * move), to the nearest end of the range; t->strain_iterations Gauss-Seidel
 * passes, stopping early when a pass finds nothing. A node moved by d takes
 * the velocity Verlet's formula gives for its corrected position (d/2h
 * more); a Beeman node takes the velocity of its corrected move and goes on
 * as a Verlet node (correct_velocity).
 *
 * Speed. Most substeps correct nothing, and two tests say so without a
 * pass: the whole tissue's strain extremes (ts__ms_limit_needed), and when
 * that fails (one spring near its bound anywhere, as under a tool) the same
 * test per block of the force loop (limit_first), which leaves a few
 * springs to check; the first pass starts at the first of them that is
 * broken, as a whole pass would have. Same results bit for bit
 * (tests/unit/test_ms_limit.c); on a capped patch-S step in contact (0.3
 * to 0.4 corrections a step) the share of the step spent here went from
 * 13-15 % to 6 % (perf, the benchmark's path). The passes then visit only
 * the springs that can be broken when they come to them (sparse_passes):
 * the screening's candidates and the springs at the nodes a correction
 * moved, found through a per-node index of the limited springs, instead of
 * every limited spring from the first correction on and in every later
 * pass. Same results bit for bit; a capped patch-S step along the standard
 * path with the sphere pressed in (a profiling driver, 2,000 steps, 773
 * corrections; the old and the new code alternated three times, load under
 * 1): 529 us a step on average before, 476-482 us after; perf put 6.2 %
 * of the step here before, under 0.7 % after.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

/* The velocity of node i after a constraint moved it by dx: Verlet's
 * formula of the corrected position, v = (x_(k+1) - x_(k-1)) / 2h, i.e. dx
 * / 2h more. A Beeman or Taylor node takes the velocity of the move it
 * actually made, (x_(k+1) - x_k) / h, and continues as a Verlet node: its
 * velocity formula would otherwise keep the push the constraint cancelled
 * (a node held on its bound would keep a velocity of about h a / 2). */
static inline void correct_velocity(ts_tissue *t, uint32_t i, const double dx[3], double h) {
  if (t->branch[i] == TS_BRANCH_VERLET) {
    for (int c = 0; c < 3; c++) t->v[i][c] += 0.5 * dx[c] / h;
  } else {
    for (int c = 0; c < 3; c++) t->v[i][c] = (t->x[i][c] - t->x_prev[i][c]) / h;
    t->branch[i] = TS_BRANCH_VERLET;
  }
}

/* A spring's length changes by at most the moves of its two ends, so after
 * an update that moved no node by more than d, every spring's strain is
 * within 2 d / L0 of its strain at the force evaluation before it (the
 * strain extremes that ts__ms_spring_forces recorded). When that interval
 * stays inside every limited spring's range, with a margin of 1e-9 for the
 * rounding of the lengths, a pass would find nothing to correct and is
 * skipped: the result is the same, without a sweep over every spring. */
int ts__ms_limit_needed(const struct ts__ms *ms) {
  const double margin = 1e-9;
  double reach = 2.0 * sqrt(ms->move2) * ms->lim_il_max;
  if (!(reach < INFINITY)) return 1; /* also NaN */
  return !(ms->eps_max + reach < ms->lim_hi_min - margin &&
           ms->eps_min - reach > ms->lim_lo_max + margin);
}

/* 1 when limited spring p is outside its range at x and has an end that
 * can move (the pass below corrects it), with *l2 its length squared. */
static inline int limit_broken(const ts__lim *p, const double (*x)[3], const double *im,
                               double *l2) {
  const uint32_t a = p->a, b = p->b;
  const double d0 = x[b][0] - x[a][0], d1 = x[b][1] - x[a][1], d2 = x[b][2] - x[a][2];
  *l2 = d0 * d0 + d1 * d1 + d2 * d2;
  if (!(*l2 > p->hi * p->hi || (*l2 < p->lo * p->lo && *l2 > 0))) return 0;
  return im[a] + im[b] > 0;
}

static int cmp_u32(const void *x, const void *y) {
  const uint32_t p = *(const uint32_t *)x, q = *(const uint32_t *)y;
  return p < q ? -1 : p > q;
}

/* The index in ms->lim of the first limited spring the first pass would
 * correct, n_lim for none. The test of ts__ms_limit_needed, made per block
 * of the force loop (its strain extremes and its own springs' bounds),
 * leaves the few springs of the blocks it cannot clear; those are checked
 * in the pass's order (sorted), and the pass starts at the first broken
 * one: no node moved before it, so the pass up to there would have found
 * nothing. When many blocks remain the pass simply starts at 0. Same result
 * as a whole pass; in a capped patch-S step in contact (a few springs near
 * their bounds under the tool, 0.4 corrections a step) it skips a pass over
 * all 80,510 springs that took 13 % of the step. *n_cand: the number of
 * those springs, left sorted in ms->cand, or UINT32_MAX when many blocks
 * remained (every spring is then in doubt). */
static uint32_t limit_first(const ts_tissue *t, const struct ts__ms *ms, uint32_t *n_cand) {
  const double margin = 1e-9, d2 = 2.0 * sqrt(ms->move2);
  const double (*x)[3] = (const double (*)[3])t->x;
  const uint32_t many = ms->n_lim / 8 + TS__BLK;
  uint32_t nc = 0;
  *n_cand = UINT32_MAX;
  for (uint32_t k = 0; k < ms->n_blk; k++) {
    const double reach = d2 * ms->blk_il_max[k];
    if (reach < INFINITY && ms->blk_eps_max[k] + reach < ms->blk_hi_min[k] - margin &&
        ms->blk_eps_min[k] - reach > ms->blk_lo_max[k] + margin)
      continue;
    if (nc + ms->blk_n[k] > many) return 0;
    for (uint32_t s = ms->blk_first[k]; s < ms->blk_first[k] + ms->blk_n[k]; s++)
      if (ms->hlim[s] != UINT32_MAX) ms->cand[nc++] = ms->hlim[s];
  }
  qsort(ms->cand, nc, sizeof *ms->cand, cmp_u32);
  *n_cand = nc;
  for (uint32_t q = 0; q < nc; q++) {
    double l2;
    if (limit_broken(&ms->lim[ms->cand[q]], x, t->inv_mass, &l2)) return ms->cand[q];
  }
  return ms->n_lim;
}

/* Corrects limited spring p, broken with length squared l2 (limit_broken):
 * its ends moved to the nearest end of its range, their velocities and the
 * force loop's rows with them. moved[0..return) gets the nodes it moved. */
static inline int correct_spring(ts_tissue *t, const struct ts__ms *ms, const ts__lim *p,
                                 double l2, double h, uint32_t moved[2]) {
  double (*x)[3] = t->x;
  const double *im = t->inv_mass;
  const uint32_t a = p->a, b = p->b;
  const double target = l2 > p->hi * p->hi ? p->hi : p->lo;
  double d[3] = {x[b][0] - x[a][0], x[b][1] - x[a][1], x[b][2] - x[a][2]};
  double wa = im[a], wb = im[b], ws = wa + wb;
  double l = sqrt(l2), q = (l - target) / (l * ws);
  uint32_t ends[2] = {a, b};
  double w[2] = {wa, -wb};
  int nm = 0;
  for (int e = 0; e < 2; e++) {
    uint32_t i = ends[e];
    if (!(im[i] > 0)) continue;
    double dx[3];
    for (int c = 0; c < 3; c++) {
      dx[c] = w[e] * q * d[c];
      x[i][c] += dx[c];
    }
    correct_velocity(t, i, dx, h);
    double *row = ms->xv[i]; /* the force loop's row (ms->xv_ok) */
    row[0] = x[i][0], row[1] = x[i][1], row[2] = x[i][2];
    row[4] = t->v[i][0], row[5] = t->v[i][1], row[6] = t->v[i][2];
    moved[nm++] = i;
  }
  return nm;
}

/* Provot's passes over every limited spring, the first from `from`: the
 * passes when the sparse ones' index could not be made. */
static uint32_t whole_passes(ts_tissue *t, const struct ts__ms *ms, double h, uint32_t from) {
  uint32_t total = 0;
  for (uint32_t it = 0; it < t->strain_iterations; it++) {
    uint32_t fixes = 0;
    for (uint32_t s = it == 0 ? from : 0; s < ms->n_lim; s++) {
      double l2;
      uint32_t moved[2];
      if (!limit_broken(&ms->lim[s], (const double (*)[3])t->x, t->inv_mass, &l2)) continue;
      correct_spring(t, ms, &ms->lim[s], l2, h, moved);
      fixes++;
    }
    total += fixes;
    if (!fixes) break;
  }
  return total;
}

/* The sparse passes' index (ms->lim_off, see ts_ms_internal.h): 0, or -1
 * when out of memory. */
static int limit_index(struct ts__ms *ms) {
  const uint32_t n = ms->n_nodes, nl = ms->n_lim;
  const size_t nw = ((size_t)nl + 63) / 64;
  const size_t sz = sizeof(uint32_t) * ((size_t)n + 1 + 2 * (size_t)nl) + 7;
  unsigned char *blk = malloc(sz + sizeof(uint64_t) * 2 * nw);
  if (!blk) return -1;
  uint32_t *off = (uint32_t *)blk, *at = off + n + 1;
  memset(off, 0, sizeof *off * ((size_t)n + 1));
  for (uint32_t q = 0; q < nl; q++) off[ms->lim[q].a + 1]++, off[ms->lim[q].b + 1]++;
  for (uint32_t i = 0; i < n; i++) off[i + 1] += off[i];
  for (uint32_t q = 0; q < nl; q++) { /* ascending per node: q ascends */
    at[off[ms->lim[q].a]++] = q;
    at[off[ms->lim[q].b]++] = q;
  }
  for (uint32_t i = n; i > 0; i--) off[i] = off[i - 1]; /* the starts again */
  off[0] = 0;
  ms->lim_off = off;
  ms->lim_at = at;
  ms->lim_due = (uint64_t *)(blk + (sz & ~(size_t)7));
  ms->lim_moved = ms->lim_due + nw;
  return 0;
}

/* The same passes, visiting only the springs that can be broken when the
 * pass comes to them: in the first, the screening's candidates (from
 * `from`; every spring from there when it left many); then the springs at a
 * node some correction of this call moved, those after the correction in
 * this pass, all of them in the next. A spring outside that set has both
 * ends where the update left them: the screening cleared it, or it was a
 * candidate whose check found it within its range, and neither has changed
 * since. So every broken spring is met in the same order as by the whole
 * passes, and the result is theirs, bit for bit (test_ms_limit.c); a
 * correction costs its nodes' springs instead of a walk over all of them. */
static uint32_t sparse_passes(ts_tissue *t, struct ts__ms *ms, double h, uint32_t from,
                              uint32_t nc) {
  const uint32_t nl = ms->n_lim, nw = (nl + 63) / 64;
  const uint32_t *off = ms->lim_off, *at = ms->lim_at;
  uint64_t *due = ms->lim_due, *mv = ms->lim_moved;
  memset(mv, 0, sizeof *mv * nw);
  memset(due, 0, sizeof *due * nw);
  if (nc == UINT32_MAX) {
    for (uint32_t q = from; q < nl; q++) due[q >> 6] |= 1ull << (q & 63);
  } else {
    for (uint32_t k = 0; k < nc; k++)
      if (ms->cand[k] >= from) due[ms->cand[k] >> 6] |= 1ull << (ms->cand[k] & 63);
  }
  uint32_t total = 0;
  for (uint32_t it = 0; it < t->strain_iterations; it++) {
    uint32_t fixes = 0;
    for (uint32_t w = 0; w < nw; w++) {
      uint64_t done = 0; /* this word's bits up to the last spring visited */
      uint64_t m;
      while ((m = due[w] & ~done) != 0) {
        const unsigned bit = (unsigned)__builtin_ctzll(m);
        done |= bit == 63 ? ~0ull : (2ull << bit) - 1;
        const uint32_t s = w * 64 + bit;
        double l2;
        if (!limit_broken(&ms->lim[s], (const double (*)[3])t->x, t->inv_mass, &l2)) continue;
        uint32_t moved[2];
        const int nm = correct_spring(t, ms, &ms->lim[s], l2, h, moved);
        for (int e = 0; e < nm; e++)
          for (uint32_t k = off[moved[e]]; k < off[moved[e] + 1]; k++) {
            const uint32_t q = at[k];
            const uint64_t b = 1ull << (q & 63);
            mv[q >> 6] |= b;
            if (q > s) due[q >> 6] |= b;
          }
        fixes++;
      }
    }
    total += fixes;
    if (!fixes) break;
    memcpy(due, mv, sizeof *due * nw);
  }
  return total;
}

/* Provot's strain limiting; returns the number of corrections. */
uint32_t ts__ms_limit_strain(ts_tissue *t, struct ts__ms *ms, double h) {
  uint32_t nc;
  const uint32_t from = limit_first(t, ms, &nc);
  if (from >= ms->n_lim) return 0; /* the first pass would find nothing */
  if (!ms->lim_off && !ms->lim_index_failed && limit_index(ms)) ms->lim_index_failed = 1;
  if (!ms->lim_off) return whole_passes(t, ms, h, from);
  return sparse_passes(t, ms, h, from, nc);
}
