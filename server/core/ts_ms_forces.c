/*
 * ts_ms_forces.c: the spring law's evaluation, the step's hot loop: the
 * tension of every Kelvin spring (ts_material.h: k'(eps) = k1 e^(b1 eps+) +
 * k2 e^(b2 eps+), eps+ = max(eps, 0), times L - L0, plus the damper's
 * c dL/dt) added into the node forces, with the strain extremes the
 * substep count needs (ts_ms_bounds.c).
 *
 * Speed. The springs are sorted by the number of exponential terms (0, 1,
 * 2) and then by node (ts_ms_springs.c), so that each of the three force
 * loops is straight-line code walking memory in order; their constants are
 * kept one array per field (ts__soa), so that the vector lanes load them
 * directly. Before the loops, each node's x and v are copied into one
 * 64-byte row (x, 0, v, 0: ms->xv) and its force is kept as a row of four
 * (ms->f4): O(nodes), and made five times over they did not make the loop
 * measurably slower. In the step the integrator reads the force rows
 * directly, copying them to t->f and clearing them for the next pass
 * (ms->f4_zero; ts__ms_spring_rows), and writes the rows of x and v of the
 * nodes it updates (ms->xv_ok, below); ts__ms_spring_forces, for the
 * tests, still fills, clears and copies here.
 * The loop runs over blocks of 16 springs: the gather reads a spring end as
 * two 4-wide loads of one cache line and forms, per spring, b - a, and for
 * four springs at once |b - a|^2 and (v_b - v_a).(b - a) as vector lanes
 * (4 x 4 transposes of the products; the same operations in the same order
 * as the component loop they replace), one block ahead of the arithmetic
 * (spring_class); then the square roots (vectorised: this
 * file is compiled without errno for math functions), the division, the
 * exponentials (ts_exp_spring: branch-free, degree 9 by Estrin's scheme,
 * 2e-14 relative) and
 * the tension run as loops over the block's lanes; then the scatter adds
 * each spring's force row into node b's row and into node a's, kept in
 * registers over the run of springs from a (instead of a chain of
 * store-to-load forwards), and records the block's strain extremes for
 * strain limiting (ts_ms_limit.c). It is built for AVX-512 (8 lanes), AVX2
 * and the baseline where the compiler can, the path chosen at each pass from
 * what the CPU supports, all without contracting into FMA
 * (server/core/CMakeLists.txt), so that every path rounds alike
 * (test_ms_forces's test_paths_agree: bit for bit). No allocation in the
 * step.
 * Measured (tests/bench/run --quick mechanics:patch-S, whole steps): 43 to
 * 73 million spring evaluations per second with the AVX2 build, against
 * 216-229 million for a plain linear spring loop in the same runs. Then,
 * same command, the old loop and the new one a minute apart on a quiet
 * moment of a shared 2-core box: patch-S 76.6 to 95.2 million (0.336 to
 * 0.411 of the linear loop of the same run, 1.49 to 1.97 times Bullet),
 * patch-L 71.6 to 94.7 million (0.342 to 0.443 of the linear loop); on
 * busier moments the ratios to the linear loop were 0.34-0.35 before and
 * 0.43 after on patch-S, 0.35-0.36 and 0.37-0.48 on patch-L. Alternating
 * runs of the old and the new loop, best of 30 rounds each: patch-S 75 to
 * 95 million, patch-L 76 to 91 million.
 * What each part gave (best of interleaved runs, patch-S): the AVX-512
 * build +15 %, the scatter's registers +5 to 10 % (patch-L more), the
 * degree-9 exponential +6 to 8 %. Tried and dropped: FMA contraction (+2 %,
 * and the builds would round differently), blocks of 32, prefetching the
 * next blocks' nodes, the strain extremes in vector lanes (within noise).
 * The node rows (x, v packed; forces as rows of four), same results bit for
 * bit: the loop alone on a settled patch-S (a profiling driver, old and new
 * alternated, load 9 on the 2 cores) went from 8.2-8.6 to 6.4-6.5 ns a
 * spring (0.66-0.69 to 0.52 ms a pass); perf put 61 % of the old loop's
 * samples in its scalar gathers and scatter, 37 % after. It is still memory
 * work above all: with its arithmetic taken out the loop took 5 ns a
 * spring, 4 without reading the constants, and the exponentials' share is
 * about 1.6 ns (replaced by 1 + y; both measured before the dot products
 * moved into the gather). Whole steps, main's build and this one
 * alternated (tests/bench/run --quick mechanics:patch-S,patch-L, three
 * rounds each, load 6.8 to 9.8): patch-S 82-92 million
 * evaluations per second (0.427-0.447 of the linear loop) before, 103-107
 * million (0.519-0.530) after; patch-L 75-80 million (0.438-0.446) before,
 * 88-95 million (0.502-0.524) after. The same on a quiet moment (load 0.7
 * to 0.9, two rounds): patch-S 92-97 million (0.439-0.451, 1.54-1.56 times
 * Bullet) before, 117-118 million (0.540-0.546, 1.91-1.92 times Bullet)
 * after; patch-L 86-89 million (0.449-0.452) before, 98-100 million
 * (0.501-0.520) after; capped at one substep, patch-S 0.84-0.88 of a core
 * at 1 kHz before, 0.69-0.70 after (strain limiting's screening included).
 * Tried with the rows and dropped: blocks of 32 (no change), prefetching
 * the rows of the block after next (7 to 12 % slower), the lengths and dot
 * products as strided loads in the vector loop (5 % slower than forming
 * them in the gather).
 * The force rows' copy to t->f and their clearing moved into the
 * integrator (same results bit for bit): the force evaluation 15-85 us
 * cheaper a pass on patch-S, the integrator 0-10 us dearer, the two 1-11 %
 * cheaper, 3-4 % in most runs (two copies of the settled patch stepped alternately in one
 * process, medians, load 9-17; ts_ms_integrate.c). Whole steps, main's
 * build and this one alternated (tests/bench/run --quick
 * mechanics:patch-S,patch-L, three rounds each, load 8-14): patch-S
 * 104-110 million evaluations per second (2.21-2.48 times Bullet) before,
 * 109-113 million (2.17-2.54) after; patch-L 83-95 million (4.66-5.28)
 * before, 89-96 million (4.62-5.71) after; capped at one substep, patch-S
 * 0.75-0.80 of a core at 1 kHz before, 0.73-0.78 after: a few per cent,
 * within these runs' noise. What is left of the
 * copies: the rows' fill from t->x and t->v, 22 us a pass on patch-S (3 %
 * of a capped step), which the integrator could write instead once contact
 * and strain limiting keep the rows of the nodes they move.
 * The rows kept from pass to pass (ms->xv_ok): the integrators write each
 * node's row as they update it, strain limiting the rows of the nodes it
 * moves, and the pass refreshes only the rows of the nodes contact marked
 * (it marks every node it moves); the step fills them all at its first
 * pass and after the jaws place nodes. Same results bit for bit (a patch-S
 * run along the benchmark's tool path with friction, main's build and
 * this one: the same hash of x, v and the tool force; test_ms_forces's
 * test_step_rows_kept). Whole steps, main's build and this one alternated
 * (tests/bench/run --quick mechanics:patch-S,patch-L, three rounds each,
 * load 9-16): patch-S 125.7-128.4 million evaluations per second
 * (0.563-0.575 of the linear loop, 2.48-2.68 times Bullet) before,
 * 134.4-137.1 million (0.573-0.594, 2.66-2.78 times Bullet) after;
 * patch-L 96.7-114.9 million (0.508-0.593) before, 104.2-113.4 million
 * (0.559-0.570) after; capped at one substep, patch-S 0.635-0.664 of a
 * core at 1 kHz before, 0.596-0.705 after (one pass a step: nothing kept,
 * within noise).
 * Tried and dropped: the spring law in single precision, per spring b - a,
 * |b - a|^2, (v_b - v_a).(b - a) and L^2 - L0^2 formed in double (so that
 * L - L0 = (L^2 - L0^2) / (L + L0) keeps float's relative precision at small
 * strains), then the length, the strain, e^x (Cephes' expf polynomial,
 * degree 7, to 88), the tension and the damper as 16 float lanes, the
 * constants but L0 as float (40 of the 64 bytes), the tension back to
 * double for the scatter. Forces within 1.2e-7 (settled) to 3.6e-7 (30 %
 * stretched, random velocities) of the largest |F|, worst node 2e-5 of its
 * own |F| where the settled forces nearly cancel; but the loop alone
 * (a profiling driver: both loops in one process on patch-S and patch-L
 * settled, alternate rounds, medians of 20, load 5-13) ran at 0.80-0.94 of
 * this loop's speed. With the arithmetic taken out of both (the
 * constants still read) the float version ran 1.10-1.16 times this loop on
 * patch-S and 1.00 on patch-L, and this loop 1.42-1.50 times itself on
 * patch-S and 1.02-1.15 on patch-L: the gather and the scatter bound the
 * loop, on patch-L almost wholly, so no cheaper arithmetic can give the
 * 1.4 times the targets would need.
 * The gather's sums as the lanes of 4 x 4 transposes instead of a scalar
 * reduction per spring, the gather one block ahead, and the max, min and
 * cap as compares (masked blends) instead of the |a - b| forms, same results
 * bit for bit in these runs: the loop alone (a profiling driver:
 * ts__ms_spring_forces on patch-S after 50 capped steps, 500 calls a round,
 * best of 20 rounds; main's build and this one alternated, load 9-16) took
 * 490-556 us a pass before and 448-476 after (8-14 % less); the gather one
 * block ahead alone (to spare the sums' stores a forward into the wide
 * loads, where perf had put 8 % of the samples) changed nothing measurable
 * (whole capped steps 717-782 us against 712-735 us before).
 * Tried and dropped: the constants k1, b1, k2, b2 and c as float (20 of the
 * 64 bytes a spring reads; the loop 430-440 us against 451-458 us, 4-5 %),
 * for 3 % of a step the law would hold to 6e-8 of k' instead of 2e-14 and a
 * constant past FLT_MAX would have to be refused.
 * Where the loop's time goes (patch-S settled 20 steps, the loop alone,
 * ~440 us a pass at load 8-10 on the 2 cores; each variant against this
 * loop in one process, alternate rounds of 50 passes, 20 rounds): the
 * exponentials ~110 us (replaced by 1 + y), all the arithmetic between
 * gather and scatter ~190 us (leaving gather, scatter and one constant
 * stream, 248-273 us), the six other constant streams ~75 us; the square
 * root and the division too little to measure (replaced by an add, no
 * change). The exponential's polynomial by Estrin's scheme instead of
 * Horner's (same coefficients, 1.38e-14 instead of 1.37e-14 against expl):
 * 0.916 and 0.921 of the time (medians; faster in 17 and 18 rounds of 20);
 * patch-L (resolution 141) 0.998 (10 rounds): its dependency chain, not the
 * operation count, was what the loop waited on (forces moved by at most
 * 5e-19 N of 4e-3 N, rounding). Whole steps, main's build and this one
 * alternated (tests/bench/run --quick mechanics:patch-S,patch-L, three
 * rounds each, load 5.9-7.2): patch-S 88-134 million evaluations per
 * second (0.593-0.603 of the linear loop, 2.33-2.39 times Bullet) before,
 * 90-144 million (0.586-0.639, 2.60-2.69 times Bullet) after; patch-L
 * 70-120 million (0.497-0.601) before, 91-113 million (0.534-0.614)
 * after: a few per cent, within these runs' noise. Tried and dropped in the
 * same harness:
 * springs sorted by (a, b) instead of (a, original index) (within 1 %);
 * nodes renumbered along a Morton curve with the springs re-sorted (12 %
 * slower on patch-S, 70 % on patch-L: the sheet-by-sheet order already
 * walks a few sequential streams) or with the sheets interleaved (no
 * change); the gather as whole 64-byte rows and one 8-wide transpose
 * (0.994); the strain extremes as a lane-wise tree per block (no gain);
 * non-temporal prefetches of the constants four blocks ahead (no gain);
 * e / L0 instead of e * (1 / L0), one stream fewer (7 % slower: the
 * division); -fno-trapping-math on this file (21-28 % slower); a
 * 32-entry table exponential with a degree-5 polynomial (GCC 12 would not
 * vectorise its lookup: twice as slow).
 * The short exponential. The exponentials still cost 22 % of the loop
 * (the loop alone on a settled patch-S, a profiling driver, best of 10
 * rounds of 200 passes: 3.27-3.31 ns a spring with them replaced by
 * 1 + y, 4.22-4.26 with them), and the law alone (no gather, no scatter)
 * is half of it, so they are not hidden behind the memory work. Most
 * blocks' b eps are small (patch-S pressed 8 mm by the sphere: the largest
 * of 67 % of its blocks is under 1/16, of 88 % under 1/8; resting, 99 %
 * under 1/16), where e^y needs no range reduction: a block whose largest b
 * eps at the last pass (ms->blk_x_max) was under 1/16 takes
 * ts_exp_spring_small (degree 7 about 1/16, valid to 1/8: 16 operations
 * against 28), and is done again with ts_exp_spring when a lane turns out
 * past 1/8. The choice is the block's, made alike on every path (they
 * still agree bit for bit), and the law still holds to the tolerances of
 * test_ms_forces (test_forces_short_exponential). The loop alone (as
 * above, main's build and this one alternated): 4.11-4.14 ns a spring
 * before, 3.89-3.91 after; a capped patch-S step (the profiling driver of
 * ts_ms_integrate.c, best of 4): 475 to 457 us resting, 497 to 486 us
 * pressed. Tried and dropped: the force loop over runs of springs with
 * consecutive ends (a0 + j, b0 + j) reading the nodes from per-component
 * arrays with no index and no transpose, the runs sorted first in each
 * class: 3.8 ns a run spring against 4.2 ns through the gathers, but only
 * 67 % of patch-S's springs form runs of 16 (its quads' diagonals
 * alternate), the rest lost their node order, and the component arrays
 * had to be kept beside the rows: the whole loop 4.35 ns against 4.11.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

/* Four doubles in one vector (GCC and clang vector extensions: one AVX
 * register, two SSE2 ones in the baseline build; lane by lane the same
 * IEEE operations as scalar code, so that the sums round as before). */
typedef double ts__v4 __attribute__((vector_size(32)));

/* The gathered block of TS__BLK springs (see spring_class): b - a as rows
 * (the scatter's), |b - a|^2 (the square roots are taken in place) and
 * (v_b - v_a).(b - a). */
typedef struct ts__gath {
  ts__v4 dr[TS__BLK];
  double len[TS__BLK], dvd[TS__BLK];
} ts__gath;

/* Gathers the m springs (m <= TS__BLK) from ia[0..m), ib[0..m) into g:
 * two rows a spring end; the padding lanes j >= m at rest (rest length L0[j],
 * 1 for none). */
static inline __attribute__((always_inline)) void
gather(const uint32_t *restrict ia, const uint32_t *restrict ib, uint32_t m,
       const double *restrict L0, const double (*restrict xv)[8], ts__gath *restrict g) {
  uint32_t j0 = 0;
  for (; j0 + 4 <= m; j0 += 4) { /* four springs: their sums as lanes */
    ts__v4 dd[4], wd[4];
    for (int q = 0; q < 4; q++) {
      const uint32_t a = ia[j0 + q], b = ib[j0 + q];
      const ts__v4 d = *(const ts__v4 *)&xv[b][0] - *(const ts__v4 *)&xv[a][0];
      const ts__v4 w = *(const ts__v4 *)&xv[b][4] - *(const ts__v4 *)&xv[a][4];
      g->dr[j0 + q] = d;
      dd[q] = d * d, wd[q] = w * d;
    }
    /* the 4 x 4 transposes: x, y, z of the four springs as three vectors,
     * summed x + y + z as the component form, lane by lane */
    const ts__v4 dl = __builtin_shufflevector(dd[0], dd[1], 0, 4, 2, 6);
    const ts__v4 dh = __builtin_shufflevector(dd[0], dd[1], 1, 5, 3, 7);
    const ts__v4 el = __builtin_shufflevector(dd[2], dd[3], 0, 4, 2, 6);
    const ts__v4 eh = __builtin_shufflevector(dd[2], dd[3], 1, 5, 3, 7);
    const ts__v4 wl = __builtin_shufflevector(wd[0], wd[1], 0, 4, 2, 6);
    const ts__v4 wh = __builtin_shufflevector(wd[0], wd[1], 1, 5, 3, 7);
    const ts__v4 ul = __builtin_shufflevector(wd[2], wd[3], 0, 4, 2, 6);
    const ts__v4 uh = __builtin_shufflevector(wd[2], wd[3], 1, 5, 3, 7);
    const ts__v4 lx = __builtin_shufflevector(dl, el, 0, 1, 4, 5);
    const ts__v4 ly = __builtin_shufflevector(dh, eh, 0, 1, 4, 5);
    const ts__v4 lz = __builtin_shufflevector(dl, el, 2, 3, 6, 7);
    const ts__v4 vx = __builtin_shufflevector(wl, ul, 0, 1, 4, 5);
    const ts__v4 vy = __builtin_shufflevector(wh, uh, 0, 1, 4, 5);
    const ts__v4 vz = __builtin_shufflevector(wl, ul, 2, 3, 6, 7);
    const ts__v4 tiny = {1e-300, 1e-300, 1e-300, 1e-300};
    const ts__v4 l2 = lx + ly + lz + tiny, dv = vx + vy + vz;
    __builtin_memcpy(&g->len[j0], &l2, sizeof l2);
    __builtin_memcpy(&g->dvd[j0], &dv, sizeof dv);
  }
  for (uint32_t j = j0; j < m; j++) {
    const uint32_t a = ia[j], b = ib[j];
    const ts__v4 d = *(const ts__v4 *)&xv[b][0] - *(const ts__v4 *)&xv[a][0];
    const ts__v4 w = *(const ts__v4 *)&xv[b][4] - *(const ts__v4 *)&xv[a][4];
    const ts__v4 dd = d * d, wd = w * d;
    g->dr[j] = d;
    g->len[j] = dd[0] + dd[1] + dd[2] + 1e-300;
    g->dvd[j] = wd[0] + wd[1] + wd[2];
  }
  for (uint32_t j = m; j < TS__BLK; j++) { /* harmless padding: at rest */
    const double r = L0[j] > 0 ? L0[j] : 1.0;
    g->len[j] = r * r + 1e-300, g->dvd[j] = 0;
  }
}

/* The spring law over one block of TS__BLK springs from hot record h0 on,
 * lane by lane (a loop the compiler vectorises; one spring alone is a long
 * dependent chain: division, the polynomials): from the lengths len and the
 * dampers' dot products dvd, the tension over length fs, the strains eps and
 * (terms > 0) the largest b eps xx. small: by ts_exp_spring_small; returns
 * 1 when some b eps is past its range (the results are then not to be
 * used), 0 otherwise. */
static inline __attribute__((always_inline)) int
law(const ts__soa *restrict sp, uint32_t h0, const double *restrict len,
    const double *restrict dvd, double *restrict fs, double *restrict eps, double *restrict xx,
    const int terms, const int small) {
  /* the constants straight from their arrays (padded by TS__BLK records
   * at the end, so that a last short block reads within them) */
  const double *restrict L0 = sp->L0 + h0, *restrict iL0 = sp->iL0 + h0;
  const double *restrict k1 = sp->k1 + h0, *restrict b1 = sp->b1 + h0;
  const double *restrict k2 = sp->k2 + h0, *restrict b2 = sp->b2 + h0;
  const double *restrict c = sp->c + h0;
  for (uint32_t j = 0; j < TS__BLK; j++) {
    /* max and min as compares: GCC 12 vectorises them into masked blends
     * (fewer operations than the (a + b +- |a - b|) / 2 forms of before,
     * which gave the same results except past the cap, where
     * y - (y - 700) may round off 700) */
    const double l = len[j], il = 1.0 / l;
    const double e = l - L0[j], ep0 = e * iL0[j];
    const double ep = ep0 > 0 ? ep0 : 0.0; /* max(eps, 0) */
    eps[j] = ep0;
    double kk = k1[j];
    if (terms > 0) {
      const double y1 = b1[j] * ep, y2 = terms > 1 ? b2[j] * ep : 0.0;
      xx[j] = y1 > y2 ? y1 : y2;
      if (small) {
        kk = k1[j] * ts_exp_spring_small(y1);
        if (terms > 1) kk += k2[j] * ts_exp_spring_small(y2);
      } else {
        kk = k1[j] * ts_exp_spring(y1 < 700.0 ? y1 : 700.0);
        if (terms > 1) kk += k2[j] * ts_exp_spring(y2 < 700.0 ? y2 : 700.0);
      }
    }
    /* tension over length: k'(eps) (L - L0) plus the damper's c dL/dt */
    fs[j] = (kk * e + c[j] * dvd[j] * il) * il;
  }
  if (!small || terms == 0) return 0;
  int64_t past = 0; /* an integer reduction: vectorised, where a max would not be */
  for (uint32_t j = 0; j < TS__BLK; j++) past |= xx[j] > 0.125;
  return past != 0;
}

/* Spring and damper forces of one class of springs (terms = its number of
 * exponential terms), added into f4. Springs go in blocks of TS__BLK: the
 * gathers and the scatter work on whole node rows (xv: (x, 0, v, 0) per
 * node, f4: (f, 0)), everything in between (length, strain, the
 * exponentials, the tension) runs over the whole block as loops of
 * independent lanes that the compiler vectorises (one spring alone is a
 * long dependent chain: square root, division, a degree-12 polynomial).
 * The gather runs one block ahead (two buffers): the vector loops then
 * load lengths whose scalar stores were made a block earlier, instead of
 * stalling on the store-to-load forward that a wide load of just-stored
 * scalars cannot take (perf put 8 % of the loop's samples on those two
 * loads). The gather reads xv only and the scatter writes f4 only, so the
 * order changes no result. */
static inline __attribute__((always_inline)) void
spring_class(const ts__soa *restrict sp, uint32_t first, uint32_t n,
             const double (*restrict xv)[8], double (*restrict f4)[4], const int terms,
             double *restrict bmax, double *restrict bmin, double *restrict bxm, ts__strain *st) {
  double xm = st->x_max, em = st->eps_max, en = st->eps_min;
  const uint32_t *restrict ia = sp->a + first, *restrict ib = sp->b + first;
  /* node a's force, kept in registers over the run of springs from a (the
   * springs are sorted by a; none of them has a as its b, so f[a] does not
   * change meanwhile and the sums are the same, in the same order) */
  uint32_t ca = n > 0 ? ia[0] : 0;
  ts__v4 fa = {0, 0, 0, 0};
  if (n > 0) fa = *(const ts__v4 *)f4[ca];
  ts__gath gb[2];
  if (n > 0) gather(ia, ib, n < TS__BLK ? n : TS__BLK, sp->L0 + first, xv, &gb[0]);
  for (uint32_t s0 = 0, q = 0; s0 < n; s0 += TS__BLK, q ^= 1) {
    const uint32_t m = n - s0 < TS__BLK ? n - s0 : TS__BLK;
    if (s0 + TS__BLK < n) { /* the next block's gather, into the other buffer */
      const uint32_t s1 = s0 + TS__BLK, m1 = n - s1 < TS__BLK ? n - s1 : TS__BLK;
      gather(ia + s1, ib + s1, m1, sp->L0 + first + s1, xv, &gb[q ^ 1]);
    }
    ts__gath *restrict g = &gb[q];
    double *restrict len = g->len;
    double fs[TS__BLK], eps[TS__BLK], xx[TS__BLK];
    /* square roots on their own (the file is compiled without errno for
     * math functions, server/core/CMakeLists.txt, or sqrt() would stay
     * scalar) */
    for (uint32_t j = 0; j < TS__BLK; j++) len[j] = sqrt(len[j]);
    /* the short exponential where the block's largest b eps at the last
     * pass (bxm, INFINITY before the first) was half its range or less;
     * the block again with the full one when some lane is found past it */
    const uint32_t h0 = first + s0;
    if (terms == 0 || !(bxm[s0 / TS__BLK] <= 0.0625) ||
        law(sp, h0, len, g->dvd, fs, eps, xx, terms, 1))
      law(sp, h0, len, g->dvd, fs, eps, xx, terms, 0);
    double bx = -INFINITY, bn = INFINITY, bxx = 0; /* the block's (strain limiting's, bxm's) */
    for (uint32_t j = 0; j < m; j++) { /* scatter, and the strain extremes */
      const uint32_t a = ia[s0 + j], b = ib[s0 + j];
      const ts__v4 fv = g->dr[j] * fs[j];
      if (a != ca) { /* a new run of springs from node a */
        *(ts__v4 *)f4[ca] = fa;
        ca = a, fa = *(const ts__v4 *)f4[a];
      }
      fa += fv;
      *(ts__v4 *)f4[b] -= fv;
      bx = TS__MAX(bx, eps[j]);
      bn = TS__MIN(bn, eps[j]);
      if (terms > 0) bxx = TS__MAX(bxx, xx[j]);
    }
    xm = TS__MAX(xm, bxx);
    bmax[s0 / TS__BLK] = bx, bmin[s0 / TS__BLK] = bn;
    if (terms > 0) bxm[s0 / TS__BLK] = bxx;
    em = TS__MAX(em, bx), en = TS__MIN(en, bn);
  }
  if (n > 0) *(ts__v4 *)f4[ca] = fa;
  st->x_max = xm, st->eps_max = em, st->eps_min = en;
}

/* The pass over every node and spring: the rows the gathers read, then the
 * three classes, then (f not NULL) the forces out to f. Compiled into each
 * path below. */
static inline __attribute__((always_inline)) void
forces_all(const ts__soa *sp, uint32_t n_lin, uint32_t n_one, uint32_t n_two, uint32_t n_nodes,
           const double (*x)[3], const double (*v)[3], double (*restrict xv)[8],
           double (*restrict f4)[4], double (*f)[3], double *bmax, double *bmin, ts__strain *st,
           int zero, const uint32_t *fresh, uint32_t n_fresh, double *bxm) {
  if (!fresh) {
    for (uint32_t i = 0; i < n_nodes; i++) { /* the rows the gathers read */
      xv[i][0] = x[i][0], xv[i][1] = x[i][1], xv[i][2] = x[i][2], xv[i][3] = 0;
      xv[i][4] = v[i][0], xv[i][5] = v[i][1], xv[i][6] = v[i][2], xv[i][7] = 0;
    }
  } else { /* the rows are kept (ms->xv_ok) but for those of the nodes contact moved */
    for (uint32_t q = 0; q < n_fresh; q++) {
      const uint32_t i = fresh[q];
      xv[i][0] = x[i][0], xv[i][1] = x[i][1], xv[i][2] = x[i][2];
      xv[i][4] = v[i][0], xv[i][5] = v[i][1], xv[i][6] = v[i][2];
    }
  }
  if (zero)
    for (uint32_t i = 0; i < n_nodes; i++) f4[i][0] = f4[i][1] = f4[i][2] = f4[i][3] = 0;
  const uint32_t b1 = (n_lin + TS__BLK - 1) / TS__BLK, b2 = b1 + (n_one + TS__BLK - 1) / TS__BLK;
  spring_class(sp, 0, n_lin, (const double (*)[8])xv, f4, 0, bmax, bmin, bxm, st);
  spring_class(sp, n_lin, n_one, (const double (*)[8])xv, f4, 1, bmax + b1, bmin + b1, bxm + b1,
               st);
  spring_class(sp, n_lin + n_one, n_two, (const double (*)[8])xv, f4, 2, bmax + b2, bmin + b2,
               bxm + b2, st);
  if (f)
    for (uint32_t i = 0; i < n_nodes; i++) f[i][0] = f4[i][0], f[i][1] = f4[i][1], f[i][2] = f4[i][2];
}

#define TS__FORCES_ARGS                                                                    \
  const ts__soa *sp, uint32_t n_lin, uint32_t n_one, uint32_t n_two, uint32_t n_nodes,     \
      const double(*x)[3], const double(*v)[3], double(*restrict xv)[8],                   \
      double(*restrict f4)[4], double(*f)[3], double *bmax, double *bmin, ts__strain *st, \
      int zero, const uint32_t *fresh, uint32_t n_fresh, double *bxm
#define TS__FORCES_PASS                                                                    \
  sp, n_lin, n_one, n_two, n_nodes, x, v, xv, f4, f, bmax, bmin, st, zero, fresh, n_fresh, bxm

/* The paths (TS__MS_PATH_*, ts_ms_internal.h): the loop built for AVX-512
 * (AVX512F, 8 lanes), for AVX2 (4 lanes) and for the baseline (SSE2's 2)
 * where the compiler can (GCC and clang on x86-64), the one to run chosen
 * at every pass from what the CPU and the OS support (__builtin_cpu_supports:
 * a load and a bit test, no state of our own). The ThreadSanitizer build
 * keeps the baseline alone, as before. All are compiled without contracting
 * into FMA (server/core/CMakeLists.txt) and do the same IEEE operations in
 * the same order lane by lane, so that they give the same forces bit for bit
 * (test_ms_forces's test_paths_agree runs each path this CPU has). */
static void forces_base(TS__FORCES_ARGS) { forces_all(TS__FORCES_PASS); }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define TS__X86_PATHS 1
__attribute__((target("avx2"))) static void forces_avx2(TS__FORCES_ARGS) {
  forces_all(TS__FORCES_PASS);
}
__attribute__((target("avx512f"))) static void forces_avx512(TS__FORCES_ARGS) {
  forces_all(TS__FORCES_PASS);
}
#endif

int ts__ms_forces_path_ok(int path) {
  switch (path) {
  case TS__MS_PATH_BEST:
  case TS__MS_PATH_BASE: return 1;
#ifdef TS__X86_PATHS
  case TS__MS_PATH_AVX2: return __builtin_cpu_supports("avx2") != 0;
  case TS__MS_PATH_AVX512: return __builtin_cpu_supports("avx512f") != 0;
#endif
  default: return 0;
  }
}

/* The path to take for `path` (an unsupported one: the baseline). */
static int path_of(int path) {
  if (path == TS__MS_PATH_BEST) {
#ifdef TS__X86_PATHS
    if (__builtin_cpu_supports("avx512f")) return TS__MS_PATH_AVX512;
    if (__builtin_cpu_supports("avx2")) return TS__MS_PATH_AVX2;
#endif
    return TS__MS_PATH_BASE;
  }
  return ts__ms_forces_path_ok(path) ? path : TS__MS_PATH_BASE;
}

/* f: where the forces go besides f4 (NULL: f4 alone); keep: the rows may
 * be kept where ms->xv_ok says they hold (the step's passes). */
static void spring_forces(ts_tissue *t, struct ts__ms *ms, double (*f)[3], int path, int keep) {
  ts__strain sv = {0.0, 0.0, 0.0}, *st = &sv;
  const ts__soa *sp = &ms->soa;
  const uint32_t n_lin = ms->n_lin, n_one = ms->n_one, n_two = ms->n_two, n_nodes = t->n_nodes;
  const double (*x)[3] = (const double (*)[3])t->x, (*v)[3] = (const double (*)[3])t->v;
  double (*xv)[8] = ms->xv, (*f4)[4] = ms->f4, *bmax = ms->blk_eps_max, *bmin = ms->blk_eps_min;
  const int zero = !ms->f4_zero;
  const uint32_t *fresh = keep && ms->xv_ok ? ms->clist : NULL, n_fresh = ms->n_clist;
  double *bxm = ms->blk_x_max;
  switch (path_of(path)) {
#ifdef TS__X86_PATHS
  case TS__MS_PATH_AVX512: forces_avx512(TS__FORCES_PASS); break;
  case TS__MS_PATH_AVX2: forces_avx2(TS__FORCES_PASS); break;
#endif
  default: forces_base(TS__FORCES_PASS); break;
  }
  ms->f4_zero = 0;
  ms->xv_ok = keep; /* the rows hold x and v now; the integrators keep them */
  ms->x_seen = sv.x_max;
  ms->eps_max = sv.eps_max;
  ms->eps_min = sv.eps_min;
}

void ts__ms_spring_forces(ts_tissue *t, struct ts__ms *ms) {
  spring_forces(t, ms, t->f, TS__MS_PATH_BEST, 0);
}

void ts__ms_spring_forces_path(ts_tissue *t, struct ts__ms *ms, int path) {
  spring_forces(t, ms, t->f, path, 0);
}

void ts__ms_spring_rows(ts_tissue *t, struct ts__ms *ms) {
  spring_forces(t, ms, NULL, TS__MS_PATH_BEST, 1);
}
