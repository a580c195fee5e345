/*
 * ts_ms_bounds.c: stability control: the bounds on the tissue's fastest
 * mode and damping rate, the largest stable substep they allow, and the
 * substep count of each step.
 *
 * Stability and the substep count. For x'' = -w^2 x - g x' the central
 * difference (and Beeman, whose positions are Verlet's) is stable for
 * h < 4 / (g + sqrt(g^2 + 4 w^2)). The dampers see the velocities the
 * branches give: Verlet's central difference, one substep old (for pure
 * damping x_(k+1) = 2 x_k - x_(k-1) - (g h / 2)(x_k - x_(k-2)), stable for
 * g h < 2), and Beeman's predicted one (predictor v_k + h (3 a_k -
 * a_(k-1)) / 2, corrector h (a_(k+1) - 2 a_k + a_(k-1)) / 3: the spectral
 * radius of that map for v' = -g v reaches 1 at g h = 0.6); so also
 * h < 0.5 / g. The tissue's largest w^2 and largest g are bounded
 * separately (the modes of K and C differ, so pairing the two maxima is the usual
 * conservative estimate rather than a proof) with Gershgorin's theorem on
 * the symmetric M^-1/2 K M^-1/2 and M^-1/2 C M^-1/2 over the free degrees of
 * freedom, linearised at rest and sharpened by a diagonal similarity
 * (Collatz-Wielandt, power iterations). The exponential law stiffens a
 * stretched spring: the tangent of T = k e^(b eps) (L - L0) is
 * k e^(b eps)(1 + b eps), and its transverse stiffness T/L adds up to
 * eps/(1+eps) of that; so each step takes the largest b eps of the last
 * step's force evaluations (plus a margin of 1 % strain), phi = e^x (1 + x)
 * (1 + 2 eps), and w^2 phi in the bound. That pairs the most stretched
 * spring's stiffening with the fastest mode wherever each is: on the liver
 * pressed 2 mm by the default sphere and sagging onto its anchored base,
 * the springs stretched most (20-30 %, x = 1.0-1.5) are at the base while
 * its fastest modes are slivers elsewhere, and phi went from 7.8 to 19 as
 * it crept (298 to 560 substeps a step against 118 at rest, the same with
 * or without a refinement blending). So an uncapped step with lumped
 * masses takes, where it is tighter, the same Collatz-Wielandt bound with
 * each spring's own phi at the current strains (stiffened_bound, one pass
 * over the springs a step, with the weights the rest bound's iteration
 * reached): there 1.24-1.28 times the rest bound, 126-127 substeps. The
 * capped (inertia-scaled) and the selectively scaled steps keep w^2 phi
 * (their bounds are not Gershgorin rows). The substep is
 * TS_MASSSPRING_SAFETY of it; the count only falls again when the bound
 * allows 25 % more, so that it does not flap (each change restarts the run).
 * The strains are the largest over all the last step's substeps, not its
 * last one's: a node left ringing at 1-3 m/s after random tool abuse of
 * the default patch (the column springs through it at +-30 % strain within
 * a step, near rest at the steps' ends) got the count of the ends'
 * strains, 6-15 substeps, and the too-long substeps fed it for as long as
 * it was watched (1 of 18 abuse runs still moving at 0.7 m/s 1 s after the
 * tool had gone, 6 at 0.8-1.7 m/s with the inversion guard, ts_ms_guard.c,
 * whose unfolding sets more nodes moving; twice the count from there let
 * it die out, 1.5 times did not). With the step's largest, all 18 were at
 * rest (under 0.23 mm/s) within 1 s, with the guard and without.
 * With selective mass scaling (below) the mass matrix is no longer diagonal
 * and Gershgorin does not apply: w^2 is then the largest eigenvalue of
 * M~^-1 K estimated by 80 power iterations (Rayleigh quotients, from a
 * pseudo-random start), times 1.3 because the estimate approaches from
 * below, and g likewise from M~^-1 C (the dampers of the stiff
 * through-thickness springs slow down with them). Should a step still go
 * unstable, the divergence tests catch it: a non-finite state, a node
 * faster than 100 m/s, or the kinetic energy
 * growing by over 20 % per step for 20 steps (an unstable mode grows
 * geometrically; a tissue set moving from rest, by a tool or by gravity,
 * grows like t^2, over 20 % per step only in its first ten steps).
 *
 * How tight the count is. On patch-S (DESIGN.md's scenario: 10,000 nodes,
 * dt = 1 ms) at rest the bound gives 13-14 substeps: the mass-scaled
 * stiffness (80 power iterations reach within 0.3 % of the converged
 * Rayleigh quotient, 2.204e8 against 2.211e8 1/s^2 after 2,560), its 1.3
 * margin, the dampers' 0.5 / g and the 1 % strain allowance (phi = 1.10)
 * leave h = 0.8 x 9.9e-5 s. Run with the sphere pressed 10 mm in and
 * dragged (phi up to 4.7, up to 25 substeps), substeps 1.1 and 1.25 times
 * longer than the count's still gave the same peak kinetic energy
 * (1.2e-5 J), while 1.5 times longer let it grow 5,000-fold (6.6e-2 J,
 * held only by strain limiting). So the count is within a factor of 1.25
 * to 1.5 of the measured limit under load, which is what the 0.8 safety
 * factor and the margins on the estimates are for; neither is loosened.
 *
 * Inertia scaling (t->max_substeps > 0). The conventional mass scaling of
 * explicit codes for quasi-static work (e.g. LS-DYNA's DT2MS; Olovsson et
 * al. 2005 above discuss it beside the selective kind): a haptic session at
 * 1 kHz cannot afford the 13-14 substeps patch-S needs, so the step takes
 * at most max_substeps and scales the inertia by a factor s >= 1 so that
 * h = dt / max_substeps is within the bound: s M~ a = F, every mode's w^2
 * and every damping rate (the dampers' and the drag's) divided by s, so
 * the smallest s is closed-form (inertia_needed). Gravity, drag and the
 * external forces keep the physical masses, so every static equilibrium
 * (sag, Hooke elongation, the force a resting tool holds) is unchanged and
 * only the dynamics slow down: frequencies by 1/sqrt(s), damping rates by
 * 1/s. The choices:
 *   - uniform rather than added mass per node (DT2MS adds mass only where
 *     an element's own step is too short): the bound here is global (a
 *     Gershgorin bound over the whole tissue, or with selective scaling a
 *     power iteration that gives no per-node figure), the built tissues are
 *     close to uniform in spacing and layer thickness (so added mass per
 *     node would land on most nodes anyway), and a uniform factor keeps
 *     every mode shape and the
 *     selective scaling's column matrices as they are (s M~ is factored by
 *     the same L D L^T, a = M~^-1 F / s), on top of the selective scaling.
 *     A refined region is the exception, a few nodes far faster than the
 *     rest: there inertia is added per node (ts_ms_local.c), and the
 *     uniform scale multiplies that too;
 *   - the scale follows the stiffening under load: each step takes the
 *     smallest s that keeps h = dt / max_substeps within the bound at that
 *     step's phi, at once when phi grows (so stability is guaranteed as
 *     without the cap, and the divergence checks stay); it falls only when
 *     1.25 times the need is below it, and then to 1.25 times the need (as
 *     the substep count does), so that it does not change every step. The
 *     count stays at the cap while s > 1, so h never changes and the run
 *     never restarts; past TS_MASSSPRING_MAX_INERTIA the scale stops and
 *     the count grows instead;
 *   - the integrator's history when s changes (ts__ms_inertia_set):
 *     Verlet's is positions (x_(k-1) holds the velocity), which stay; the
 *     remembered accelerations a_(k-1), a_(k-2) are force history over the
 *     inertia, so they are rescaled by s_old / s_new: Beeman's multistep
 *     formulas and the branch test then see the forces they saw, under the
 *     new inertia. A Taylor restart instead would be wrong here: with one
 *     substep per step every step would be Taylor, whose update
 *     (v1 = v0 + a0 h) grows an undamped oscillation by 1 + (w h)^2 / 2 of
 *     energy a step;
 *   - tool contact: the normal reaction is the part of the physical force
 *     pushing into the tool (with selective scaling the constraint force
 *     lambda = -(a.n) / (M~^-1)_cc, where s cancels), so a tool resting on
 *     the tissue feels the physical force; friction's stick force
 *     -(a_t + w_t / h) / g (g = (M~^-1)_cc / s) is the physical tangential
 *     force plus s times the inertial part that brings the node to the
 *     tool's velocity. What changes is the dynamic part: a heavier tissue
 *     lags a moving tool, is dented deeper under it and pushes back harder,
 *     then overshoots when the tool stops. tests/bench/bench_mechanics.c
 *     measures it on the standard tool path (patch-S, the drag with the
 *     tool 8 mm in, against the physical run's 18-19 substeps): at 4
 *     substeps the scale is 25 and the tool force within 10 % RMS (22 % at
 *     most) of the physical one; at 2, scale 97 to 296 and 51 % RMS (the
 *     inversion guard's stiffness counts here too, ts_ms_guard.c: the same
 *     with it off); at 1 the
 *     scale runs away to 1,000-4,800 (the lagging tissue is stretched
 *     more, which stiffens it, which needs more inertia) and the tool all
 *     but loses the tissue (79-94 % RMS). A fixed scale with an allowance
 *     (more substeps past it) would break that loop at the price of the
 *     cap; the cap is kept here because a haptic session needs a bounded
 *     step time;
 *   - the energies and the divergence test's kinetic energy stay physical
 *     (1/2 m v^2, the growth test is on ratios).
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

/* B = |M^-1/2 A M^-1/2| (entrywise absolute value) over the free degrees
 * of freedom, A the small-strain stiffness or the damping matrix of the
 * springs linearised at rest: a spring with unit direction n adds
 * kc n n^T to the diagonal blocks of its ends and -kc n n^T off the
 * diagonal. A spring's part as the products read it: its ends, |n|, its
 * ends' inverse masses (0 when anchored) and sqrt(ia ib), and kc for the
 * stiffness (k1 + k2) and the dampers (c). */
typedef struct ts__asp {
  uint32_t a, b;
  double n[3];
  double ia, ib, cross;
  double kc[2];
} ts__asp;

/* Fills o from spring sp over the inverse masses im; returns 0 when both
 * ends are anchored (no part in B). */
static inline int abs_spring(const ts_tissue *t, const double *im, const ts__hs *sp, ts__asp *o) {
  const double ia = im[sp->a] > 0 ? im[sp->a] : 0, ib = im[sp->b] > 0 ? im[sp->b] : 0;
  if (ia == 0 && ib == 0) return 0;
  double l2 = 0;
  for (int r = 0; r < 3; r++) {
    o->n[r] = t->rest[sp->b][r] - t->rest[sp->a][r];
    l2 += o->n[r] * o->n[r];
  }
  if (l2 > 0) {
    double il = 1.0 / sqrt(l2);
    for (int r = 0; r < 3; r++) o->n[r] = fabs(o->n[r]) * il;
  } else {
    o->n[0] = o->n[1] = o->n[2] = 1.0; /* no direction: an entrywise upper bound */
  }
  o->a = sp->a, o->b = sp->b;
  o->ia = ia, o->ib = ib, o->cross = sqrt(ia * ib);
  o->kc[0] = sp->k1 + sp->k2, o->kc[1] = sp->c;
  return 1;
}

/* Adds spring o's part of y = B d (m = 0: the stiffness, 1: the dampers). */
static inline void abs_add(const ts__asp *o, int m, const double (*d)[3], double (*y)[3]) {
  const uint32_t a = o->a, b = o->b;
  double pa = 0, pb = 0; /* n . (own d), n . (other end's d) */
  for (int c = 0; c < 3; c++) {
    pa += o->n[c] * (o->ia * d[a][c] + o->cross * d[b][c]);
    pb += o->n[c] * (o->ib * d[b][c] + o->cross * d[a][c]);
  }
  for (int r = 0; r < 3; r++) {
    if (o->ia > 0) y[a][r] += o->kc[m] * o->n[r] * pa;
    if (o->ib > 0) y[b][r] += o->kc[m] * o->n[r] * pb;
  }
}

#if defined(__SSE2__)
/* Both of abs_add's products of spring o at once, the stiffness's in the
 * low lane and the dampers' in the high one: each lane the same operations
 * in the same order as abs_add's (IEEE products and sums, no contraction:
 * -ffp-contract=off), so the same bits, for about half the arithmetic
 * instructions, which bound this loop: the 20 iterations of both bounds
 * on patch-S refined by Loop 16.4-16.9 ms of CPU against 20.9-22.6 ms (a
 * driver timing them alone, min of 7, old and new alternated). */
static inline void abs_add_pair(const ts__asp *o, const double (*d0)[3], double (*y0)[3], const double (*d1)[3],
                                double (*y1)[3]) {
  const uint32_t a = o->a, b = o->b;
  const __m128d ia = _mm_set1_pd(o->ia), ib = _mm_set1_pd(o->ib), cr = _mm_set1_pd(o->cross);
  __m128d pa = _mm_setzero_pd(), pb = _mm_setzero_pd();
  for (int c = 0; c < 3; c++) {
    const __m128d da = _mm_loadh_pd(_mm_load_sd(&d0[a][c]), &d1[a][c]);
    const __m128d db = _mm_loadh_pd(_mm_load_sd(&d0[b][c]), &d1[b][c]);
    const __m128d nc = _mm_set1_pd(o->n[c]);
    pa = _mm_add_pd(pa, _mm_mul_pd(nc, _mm_add_pd(_mm_mul_pd(ia, da), _mm_mul_pd(cr, db))));
    pb = _mm_add_pd(pb, _mm_mul_pd(nc, _mm_add_pd(_mm_mul_pd(ib, db), _mm_mul_pd(cr, da))));
  }
  const __m128d kc = _mm_loadu_pd(o->kc);
  for (int r = 0; r < 3; r++) {
    const __m128d kn = _mm_mul_pd(kc, _mm_set1_pd(o->n[r]));
    if (o->ia > 0) {
      __m128d v = _mm_loadh_pd(_mm_load_sd(&y0[a][r]), &y1[a][r]);
      v = _mm_add_pd(v, _mm_mul_pd(kn, pa));
      _mm_store_sd(&y0[a][r], v);
      _mm_storeh_pd(&y1[a][r], v);
    }
    if (o->ib > 0) {
      __m128d v = _mm_loadh_pd(_mm_load_sd(&y0[b][r]), &y1[b][r]);
      v = _mm_add_pd(v, _mm_mul_pd(kn, pb));
      _mm_store_sd(&y0[b][r], v);
      _mm_storeh_pd(&y1[b][r], v);
    }
  }
}
#endif

/* y0 = B_K d0 (the stiffness) and y1 = B_C d1 (the dampers) in one pass
 * over the springs as[0..na) (a pair with y NULL is skipped), or (as NULL)
 * the same over hs[0..ns) made on the fly. Each product's sums are the same,
 * in the same order, whichever way and whether alone or with the other. */
static void abs_products(const ts_tissue *t, const ts__asp *as, uint32_t na, const double *im,
                         const ts__hs *hs, uint32_t ns, const double (*d0)[3], double (*y0)[3],
                         const double (*d1)[3], double (*y1)[3]) {
  if (y0) memset(y0, 0, sizeof *y0 * t->n_nodes);
  if (y1) memset(y1, 0, sizeof *y1 * t->n_nodes);
  if (as) {
#if defined(__SSE2__)
    if (y0 && y1) {
      for (uint32_t s = 0; s < na; s++) abs_add_pair(&as[s], d0, y0, d1, y1);
      return;
    }
#endif
    for (uint32_t s = 0; s < na; s++) {
      if (y0) abs_add(&as[s], 0, d0, y0);
      if (y1) abs_add(&as[s], 1, d1, y1);
    }
    return;
  }
  for (uint32_t s = 0; s < ns; s++) {
    ts__asp o;
    if (!abs_spring(t, im, &hs[s], &o)) continue;
    if (y0) abs_add(&o, 0, d0, y0);
    if (y1) abs_add(&o, 1, d1, y1);
  }
}

/* max_i y_i / d_i over free DOFs (d == NULL: d = 1). */
static double max_ratio(const ts_tissue *t, const double (*d)[3], const double (*y)[3]) {
  double m = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (!(t->inv_mass[i] > 0)) continue;
    for (int r = 0; r < 3; r++) {
      double q = d ? (d[i][r] > 0 ? y[i][r] / d[i][r] : INFINITY) : y[i][r];
      if (q > m) m = q;
    }
  }
  return m;
}

/* Gershgorin's theorem on D^-1 B D for a positive diagonal D = diag(d) bounds
 * the spectral radius of B by max_i (B d)_i / d_i (Collatz-Wielandt), and
 * rho(B) bounds the eigenvalues of M^-1 A. d = 1 gives the row sums; a few
 * power iterations on B tighten the bound towards rho(B). Every iterate is a
 * valid bound; the smallest is kept. The stiffness's (d0, best[0]) and the
 * dampers' (d1, best[1]) at once, or one of them (the other's d NULL):
 * each iteration's products are one pass over the springs (abs_products:
 * over as when given, else hs), each iterate the same as alone.
 * reach (both bounds at once only; else NULL): {h, drag}: the iterations
 * stop as soon as the bounds so far give a stable substep of h or more
 * (ts__ms_step_bound(best[0], best[1] + drag, 1) >= h), and 1 is returned.
 * The bounds only fall from one iteration to the next and the substep
 * only grows as they fall (ts__ms_step_bound is non-increasing in w^2 and
 * g, its rounded operations too), so the iterations left would give a
 * substep of h or more as well: a caller asking only whether h is reached
 * gets the same answer as from all of them. And they stop as soon as h is
 * certainly out of reach, returning 2: B (over the free degrees of
 * freedom) is symmetric with entries >= 0 (abs_add's blocks kc ia n n^T,
 * kc ib n n^T and kc cross n n^T both ways, n's components >= 0), so
 * every iterate's bound max_i (B d)_i / d_i is at least rho(B), and
 * rho(B) is at least the Rayleigh quotient d.(B d) / d.d of every iterate
 * d. The largest quotient so far, lo, is thus below every bound still to
 * come, and once ts__ms_step_bound(lo[0], lo[1] + drag, 1) < h so is the
 * substep of the final bounds. Rounding: every term of the products and
 * of the quotient's sums is >= 0, so each computed sum is within a
 * relative k u (1 + k u) of its exact value (k its terms: at most 3 n
 * for the quotient's, a node's springs' for a product's); lo is taken
 * 1e-8 under the computed quotient, which covers it below 2^22 nodes (3 n
 * u = 1.5e-9) and is 0 from there on. Otherwise 0. */
static int scaled_iterate(const ts_tissue *t, const ts__asp *as, uint32_t na, const double *iw,
                          const ts__hs *hs, uint32_t ns, double (*d0)[3], double (*y0)[3],
                          double (*d1)[3], double (*y1)[3], const double *reach, double best[2]) {
  double (*d[2])[3] = {d0, d1}, (*y[2])[3] = {y0, y1};
  double lo[2] = {0, 0}; /* below every iterate's bound (reach; see above) */
  const double keep = t->n_nodes < (1u << 22) ? 1.0 - 1e-8 : 0.0;
  for (int m = 0; m < 2; m++) {
    best[m] = INFINITY;
    if (!d[m]) continue;
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int r = 0; r < 3; r++) d[m][i][r] = t->inv_mass[i] > 0 ? 1.0 : 0.0;
  }
  for (int it = 0; it < 20 && (d[0] || d[1]); it++) {
    /* the daemon stopping (ts_tissue.stop): the bounds so far hold (every
     * iterate's does), and a build that asked for them is abandoned */
    if (it > 0 && ts_tissue_stop_asked(t)) break;
    abs_products(t, as, na, iw, hs, ns, (const double (*)[3])d[0], d[0] ? y[0] : NULL,
                 (const double (*)[3])d[1], d[1] ? y[1] : NULL);
    for (int m = 0; m < 2; m++) {
      if (!d[m]) continue;
      double b = max_ratio(t, (const double (*)[3])d[m], (const double (*)[3])y[m]);
      if (b < best[m]) best[m] = b;
      double ymax = 0;
      for (uint32_t i = 0; i < t->n_nodes; i++)
        for (int r = 0; r < 3; r++)
          if (y[m][i][r] > ymax) ymax = y[m][i][r];
      if (reach) {
        double num = 0, den = 0;
        for (uint32_t i = 0; i < t->n_nodes; i++)
          if (t->inv_mass[i] > 0)
            for (int r = 0; r < 3; r++) {
              num += d[m][i][r] * y[m][i][r];
              den += d[m][i][r] * d[m][i][r];
            }
        const double q = num / den * keep;
        if (q > lo[m]) lo[m] = q;
      }
      if (!(ymax > 0)) { /* this one is done; d[m] stays as it is */
        d[m] = NULL;
        continue;
      }
      /* the small shift keeps every free d_i positive */
      for (uint32_t i = 0; i < t->n_nodes; i++)
        for (int r = 0; r < 3; r++)
          d[m][i][r] = t->inv_mass[i] > 0 ? y[m][i][r] / ymax + 1e-9 : 0.0;
    }
    if (reach && ts__ms_step_bound(best[0], best[1] + reach[1], 1.0) >= reach[0]) return 1;
    if (reach && ts__ms_step_bound(lo[0], lo[1] + reach[1], 1.0) < reach[0]) return 2;
  }
  return 0;
}

/* The springs' parts for abs_products, made once for the 20 iterations
 * (the rest positions, the masses, the square roots and the division were
 * most of an iteration's work); *na gets their count. NULL when out of
 * memory. */
static ts__asp *abs_springs(const ts_tissue *t, const double *iw, const ts__hs *hs, uint32_t ns, uint32_t *na) {
  ts__asp *as = malloc(ts__ms_abs_bytes(ns));
  *na = as ? ts__ms_abs_fill(t, iw, hs, ns, as) : 0;
  return as;
}

size_t ts__ms_abs_bytes(uint32_t ns) { return sizeof(ts__asp) * (size_t)(ns ? ns : 1); }

uint32_t ts__ms_abs_fill(const ts_tissue *t, const double *iw, const ts__hs *hs, uint32_t ns, ts__asp *as) {
  uint32_t na = 0;
  for (uint32_t s = 0; s < ns; s++) na += (uint32_t)abs_spring(t, iw, &hs[s], &as[na]);
  return na;
}

uint32_t ts__ms_abs_fill_sheet(const ts_tissue *t, const double *iw, ts__asp *as) {
  uint32_t na = 0;
  for (uint32_t s = 0; s < t->n_springs; s++) {
    if (t->springs[s].kind != TS_SPRING_EDGE) continue;
    ts__hs h;
    ts__ms_hot_spring(&t->springs[s], &h);
    na += (uint32_t)abs_spring(t, iw, &h, &as[na]);
  }
  return na;
}

uint32_t ts__ms_abs_touching(const ts__asp *as, uint32_t na, const unsigned char *mark, uint32_t *idx) {
  uint32_t k = 0;
  for (uint32_t s = 0; s < na; s++)
    if (mark[as[s].a] || mark[as[s].b]) idx[k++] = s;
  return k;
}

/* abs_spring's inverse masses, square root and all, for the records
 * listed: the same bits as filling them afresh over iw */
void ts__ms_abs_reweigh(ts__asp *as, const uint32_t *idx, uint32_t ni, const double *iw) {
  for (uint32_t k = 0; k < ni; k++) {
    ts__asp *o = &as[idx[k]];
    o->ia = iw[o->a] > 0 ? iw[o->a] : 0;
    o->ib = iw[o->b] > 0 ? iw[o->b] : 0;
    o->cross = sqrt(o->ia * o->ib);
  }
}

double ts__ms_abs_bound(const ts_tissue *t, const ts__asp *as, uint32_t na, int damping, double (*d)[3],
                        double (*y)[3]) {
  double best[2];
  if (damping)
    scaled_iterate(t, as, na, NULL, NULL, 0, NULL, NULL, d, y, NULL, best);
  else
    scaled_iterate(t, as, na, NULL, NULL, 0, d, y, NULL, NULL, NULL, best);
  return best[damping != 0];
}

int ts__ms_abs_bounds(const ts_tissue *t, const ts__asp *as, uint32_t na, double (*d0)[3], double (*y0)[3],
                      double (*d1)[3], double (*y1)[3], const double *reach, double *w2, double *g) {
  double best[2];
  const int reached = scaled_iterate(t, as, na, NULL, NULL, 0, d0, y0, d1, y1, reach, best);
  *w2 = best[0], *g = best[1];
  return reached;
}

double ts__ms_scaled_bound(const ts_tissue *t, const double *iw, const ts__hs *hs, uint32_t ns,
                           int damping, double (*d)[3], double (*y)[3]) {
  double best[2];
  uint32_t na = 0;
  ts__asp *as = abs_springs(t, iw, hs, ns, &na); /* without the memory: made on the fly */
  if (damping)
    scaled_iterate(t, as, na, iw, hs, ns, NULL, NULL, d, y, NULL, best);
  else
    scaled_iterate(t, as, na, iw, hs, ns, d, y, NULL, NULL, NULL, best);
  free(as);
  return best[damping != 0];
}

int ts__ms_scaled_bounds(const ts_tissue *t, const double *iw, const ts__hs *hs, uint32_t ns,
                         double (*d0)[3], double (*y0)[3], double (*d1)[3], double (*y1)[3],
                         const double *reach, double *w2, double *g) {
  uint32_t na = 0;
  ts__asp *as = abs_springs(t, iw, hs, ns, &na);
  if (!as) return -1;
  double best[2];
  const int reached = scaled_iterate(t, as, na, iw, hs, ns, d0, y0, d1, y1, reach, best);
  free(as);
  *w2 = best[0], *g = best[1];
  return reached;
}

/* Largest stable substep for the bounds w2 (on w^2), g (damping rate) and
 * the stiffening factor phi. */
double ts__ms_step_bound(double w2, double g, double phi) {
  double den = g + sqrt(g * g + 4.0 * w2 * phi);
  double h = den > 0 ? 4.0 / den : INFINITY;
  if (g > 0 && TS__DAMP_LIMIT / g < h) h = TS__DAMP_LIMIT / g;
  return h;
}


/* w^2 and g bounds of t over its hot springs (scratch allocated here). */
int ts__ms_rest_bounds(const ts_tissue *t, const ts__hs *hs, double *w2, double *g) {
  double (*d)[3] = malloc(sizeof *d * t->n_nodes);
  double (*y)[3] = malloc(sizeof *y * t->n_nodes);
  int rc = -1;
  if (d && y) {
    *w2 = ts__ms_scaled_bound(t, t->inv_mass, hs, t->n_springs, 0, d, y);
    *g = ts__ms_scaled_bound(t, t->inv_mass, hs, t->n_springs, 1, d, y);
    rc = 0;
  }
  free(d);
  free(y);
  return rc;
}


/* A spring as the power iterations read it: its ends, its rest vector
 * n = rest[b] - rest[a] and the stiffness's and the damper's constants over
 * |n|^2, made once for the 80 iterations (the rest positions and the
 * divisions were most of an iteration's work). */
typedef struct ts__bsp {
  uint32_t a, b;
  double n[3];
  double w[2]; /* (k1 + k2) / |n|^2, c / |n|^2 */
} ts__bsp;

/* One spring's product for a pair (w the spring's constant over |n|^2):
 * its end a's part into ra (row a held by the caller), its end b's into
 * y. */
static inline void spring_add_run(const ts__bsp *h, double w, const double (*x)[3], const double xa[3],
                                  double ra[3], double (*y)[3]) {
  double q = 0;
  for (int c = 0; c < 3; c++) q += h->n[c] * (x[h->b][c] - xa[c]);
  q *= w;
  for (int c = 0; c < 3; c++) {
    ra[c] -= q * h->n[c];
    y[h->b][c] += q * h->n[c];
  }
}

/* spring_products' loop for the pairs use0, use1 (constants where it is
 * called, so each form is its own loop). The springs come in runs of one
 * end a (sorted by it, ts_ms_springs.c; any order gives the same result,
 * only slower): a run's additions to row a are made in registers and
 * stored once at its end. No spring of the run adds to row a from its
 * other end (a spring's ends differ), so the row gets the same sums in the
 * same order as adding into memory spring by spring: the same bits.
 * Before, each spring's row a was loaded right after the last one stored
 * it: the 80 iterations on patch-S refined by Loop (10,528 nodes, 84,866
 * springs) took 59-65 ms of CPU; 50-52 ms by runs, 45-48 ms by runs with
 * both pairs in one vector (spring_runs_pair; a driver timing them alone,
 * min of 7, old and new alternated). Runs gained nothing measurable on
 * the Collatz-Wielandt products (abs_products). */
static inline void spring_runs(const ts__bsp *bs, uint32_t nb, const double (*x0)[3], double (*y0)[3],
                               const double (*x1)[3], double (*y1)[3], const int use0, const int use1) {
  for (uint32_t s = 0; s < nb;) {
    const uint32_t a = bs[s].a;
    double r0[3] = {0, 0, 0}, r1[3] = {0, 0, 0}, xa0[3] = {0, 0, 0}, xa1[3] = {0, 0, 0};
    if (use0) {
      memcpy(r0, y0[a], sizeof r0);
      memcpy(xa0, x0[a], sizeof xa0);
    }
    if (use1) {
      memcpy(r1, y1[a], sizeof r1);
      memcpy(xa1, x1[a], sizeof xa1);
    }
    do {
      if (use0) spring_add_run(&bs[s], bs[s].w[0], x0, xa0, r0, y0);
      if (use1) spring_add_run(&bs[s], bs[s].w[1], x1, xa1, r1, y1);
      s++;
    } while (s < nb && bs[s].a == a);
    if (use0) memcpy(y0[a], r0, sizeof r0);
    if (use1) memcpy(y1[a], r1, sizeof r1);
  }
}

#if defined(__SSE2__)
/* spring_runs for both pairs at once, the stiffness's in the low lane and
 * the dampers' in the high one: each lane the same operations in the same
 * order as spring_add_run's, so the same bits (as abs_add_pair). */
static void spring_runs_pair(const ts__bsp *bs, uint32_t nb, const double (*x0)[3], double (*y0)[3],
                             const double (*x1)[3], double (*y1)[3]) {
  for (uint32_t s = 0; s < nb;) {
    const uint32_t a = bs[s].a;
    __m128d ra[3], xa[3];
    for (int c = 0; c < 3; c++) {
      ra[c] = _mm_loadh_pd(_mm_load_sd(&y0[a][c]), &y1[a][c]);
      xa[c] = _mm_loadh_pd(_mm_load_sd(&x0[a][c]), &x1[a][c]);
    }
    do {
      const ts__bsp *h = &bs[s];
      const uint32_t b = h->b;
      __m128d q = _mm_setzero_pd();
      for (int c = 0; c < 3; c++) {
        const __m128d xb = _mm_loadh_pd(_mm_load_sd(&x0[b][c]), &x1[b][c]);
        q = _mm_add_pd(q, _mm_mul_pd(_mm_set1_pd(h->n[c]), _mm_sub_pd(xb, xa[c])));
      }
      q = _mm_mul_pd(q, _mm_loadu_pd(h->w));
      for (int c = 0; c < 3; c++) {
        const __m128d p = _mm_mul_pd(q, _mm_set1_pd(h->n[c]));
        ra[c] = _mm_sub_pd(ra[c], p);
        __m128d v = _mm_loadh_pd(_mm_load_sd(&y0[b][c]), &y1[b][c]);
        v = _mm_add_pd(v, p);
        _mm_store_sd(&y0[b][c], v);
        _mm_storeh_pd(&y1[b][c], v);
      }
      s++;
    } while (s < nb && bs[s].a == a);
    for (int c = 0; c < 3; c++) {
      _mm_store_sd(&y0[a][c], ra[c]);
      _mm_storeh_pd(&y1[a][c], ra[c]);
    }
  }
}
#endif

/* y0 = K x0 (the small-strain stiffness at rest) and y1 = C x1 (the
 * dampers), free rows only, in one pass over the springs bs[0..nb); a pair
 * with y NULL is skipped. Each product the same sums in the same order as
 * alone (q = n . (x_b - x_a), then q times (k1 + k2) / |n|^2 or
 * c / |n|^2: the quotient the product formed per spring before). */
static void spring_products(const ts_tissue *t, const ts__bsp *bs, uint32_t nb,
                            const double (*x0)[3], double (*y0)[3], const double (*x1)[3],
                            double (*y1)[3]) {
  if (y0) memset(y0, 0, sizeof *y0 * t->n_nodes);
  if (y1) memset(y1, 0, sizeof *y1 * t->n_nodes);
  if (y0 && y1)
#if defined(__SSE2__)
    spring_runs_pair(bs, nb, x0, y0, x1, y1);
#else
    spring_runs(bs, nb, x0, y0, x1, y1, 1, 1);
#endif
  else if (y0)
    spring_runs(bs, nb, x0, y0, NULL, NULL, 1, 0);
  else if (y1)
    spring_runs(bs, nb, NULL, NULL, x1, y1, 0, 1);
  for (int m = 0; m < 2; m++) {
    double (*y)[3] = m ? y1 : y0;
    if (!y) continue;
    for (uint32_t i = 0; i < t->n_nodes; i++)
      if (!(t->inv_mass[i] > 0)) y[i][0] = y[i][1] = y[i][2] = 0;
  }
}

/* Largest eigenvalues of M~^-1 K (*w2, from x0) and of M~^-1 C (*g, from
 * x1) by power iteration (Rayleigh quotients of the iterates; the largest
 * seen is kept), one pass over the springs an iteration for both. Each
 * approaches from below, so the caller adds a margin. Returns 0, -1 when
 * out of memory, or -2 when t->stop asked to stop (ts_tissue.stop: checked
 * before each iteration; at 330,000 nodes an iteration is about 50 ms). */
int ts__ms_power_bounds(const ts_tissue *t, const struct ts__ms *ms, double (*x0)[3],
                        double (*y0)[3], double (*x1)[3], double (*y1)[3], const double *beat,
                        double *w2, double *g, ts__scratch *sc) {
  const size_t bytes = sizeof(ts__bsp) * (ms->n_springs ? ms->n_springs : 1);
  ts__bsp *const owned = sc ? NULL : malloc(bytes), *bs = sc ? ts__scratch_get(sc, bytes) : owned;
  if (!bs) return -1;
  uint32_t nb = 0;
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *h = &ms->hs[s];
    ts__bsp *o = &bs[nb];
    double l2 = 0;
    for (int c = 0; c < 3; c++) {
      o->n[c] = t->rest[h->b][c] - t->rest[h->a][c];
      l2 += o->n[c] * o->n[c];
    }
    if (!(l2 > 0)) continue; /* no direction: no part in K or C */
    o->a = h->a, o->b = h->b;
    o->w[0] = (h->k1 + h->k2) / l2;
    o->w[1] = h->c / l2;
    nb++;
  }
  double (*x[2])[3] = {x0, x1}, (*y[2])[3] = {y0, y1}, best[2] = {0, 0};
  for (int m = 0; m < 2; m++) {
    uint32_t h = 2463534242u;
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int c = 0; c < 3; c++) {
        h ^= h << 13, h ^= h >> 17, h ^= h << 5; /* xorshift: a start with every mode in it */
        x[m][i][c] = t->inv_mass[i] > 0 ? (double)(h >> 8) / 16777216.0 - 0.5 : 0.0;
      }
  }
  for (int it = 0; it < 80 && (x[0] || x[1]); it++) {
    if (ts_tissue_stop_asked(t)) { /* ts_tissue.stop: estimates so far are from below */
      free(owned);
      return -2;
    }
    spring_products(t, bs, nb, (const double (*)[3])x[0], x[0] ? y[0] : NULL,
                    (const double (*)[3])x[1], x[1] ? y[1] : NULL);
    for (int m = 0; m < 2; m++) {
      if (!x[m]) continue;
      double num = 0;
      for (uint32_t i = 0; i < t->n_nodes; i++)
        num += x[m][i][0] * y[m][i][0] + x[m][i][1] * y[m][i][1] + x[m][i][2] * y[m][i][2];
      double den = ts__ms_sms_mass_dot(t, ms, (const double (*)[3])x[m]);
      if (!(den > 0)) { /* this one is done */
        x[m] = NULL;
        continue;
      }
      if (num / den > best[m]) best[m] = num / den;
      ts__ms_sms_solve(t, ms, y[m]);
      double nrm = ts__ms_sms_mass_dot(t, ms, (const double (*)[3])y[m]);
      if (!(nrm > 0)) {
        x[m] = NULL;
        continue;
      }
      nrm = 1.0 / sqrt(nrm);
      for (uint32_t i = 0; i < t->n_nodes; i++)
        for (int c = 0; c < 3; c++) x[m][i][c] = y[m][i][c] * nrm;
    }
    /* the estimates only grow, so the substep they allow only shrinks
     * (ts__ms_step_bound is non-increasing in both, rounding included):
     * once it is no longer above beat's, it never will be again */
    if (beat && !(ts__ms_step_bound(TS__SMS_MARGIN * best[0], TS__SMS_MARGIN * best[1] + beat[1], 1.0) >
                  beat[0])) {
      free(owned);
      *w2 = best[0], *g = best[1];
      return 1;
    }
  }
  free(owned);
  *w2 = best[0], *g = best[1];
  return 0;
}

/* The lumped masses' bound at the current strains: max_i (B' d)_i / d_i
 * over the free degrees of freedom, B' the rest bound's matrix
 * (abs_products, over the inertia ms->iw) with each spring's stiffness
 * times its own stiffening at the current state, phi_s = e^x (1 + x)
 * (1 + 2 eps), eps = max(0, l / L0 - 1) against the rest length the step
 * integrates (a hand-over's blended one, ts_ms_handover.c), x = b (eps +
 * TS__STRAIN_MARGIN) with b its larger exponent (0 for a linear spring);
 * d = ms->wd, the weights preparation's Collatz-Wielandt iteration
 * reached. Any positive d gives a bound on the spectral radius of B'
 * (Gershgorin on D^-1 B' D), and B' <= phi B entrywise for the tissue's
 * largest phi, so this bound is never above w2 phi with the same d, and
 * far below it where the most stretched springs are not where the fastest
 * modes are. */
static double stiffened_bound(const ts_tissue *t, const struct ts__ms *ms, double *x_max, double *eps_max) {
  const double (*x)[3] = (const double (*)[3])t->x, (*d)[3] = (const double (*)[3])ms->wd;
  const double *im = ms->iw;
  double (*y)[3] = ms->wy;
  double xm = 0, em = 0;
  memset(y, 0, sizeof *y * t->n_nodes);
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *sp = &ms->hs[s];
    const double ia = im[sp->a] > 0 ? im[sp->a] : 0, ib = im[sp->b] > 0 ? im[sp->b] : 0;
    double n[3], l2 = 0, c2 = 0;
    for (int r = 0; r < 3; r++) {
      n[r] = t->rest[sp->b][r] - t->rest[sp->a][r];
      l2 += n[r] * n[r];
      const double e = x[sp->b][r] - x[sp->a][r];
      c2 += e * e;
    }
    if (l2 > 0) {
      const double il = 1.0 / sqrt(l2);
      for (int r = 0; r < 3; r++) n[r] = fabs(n[r]) * il;
    } else {
      n[0] = n[1] = n[2] = 1.0; /* no direction: an entrywise upper bound */
    }
    double eps = sp->L0 > 0 ? sqrt(c2) / sp->L0 - 1.0 : 0.0;
    if (!(eps > 0)) eps = 0.0;
    const double b = TS__MAX(sp->b1, sp->b2), xs = b * (eps + TS__STRAIN_MARGIN);
    xm = TS__MAX(xm, b * eps), em = TS__MAX(em, eps);
    if (ia == 0 && ib == 0) continue;
    const double phi = (b > 0 ? exp(xs) * (1.0 + xs) : 1.0) * (1.0 + 2.0 * eps);
    const double kc = (sp->k1 + sp->k2) * phi;
    const double cross = sqrt(ia * ib);
    double pa = 0, pb = 0;
    for (int c = 0; c < 3; c++) {
      pa += n[c] * (ia * d[sp->a][c] + cross * d[sp->b][c]);
      pb += n[c] * (ib * d[sp->b][c] + cross * d[sp->a][c]);
    }
    for (int r = 0; r < 3; r++) {
      if (ia > 0) y[sp->a][r] += kc * n[r] * pa;
      if (ib > 0) y[sp->b][r] += kc * n[r] * pb;
    }
  }
  double m = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (!(im[i] > 0)) continue;
    for (int r = 0; r < 3; r++) {
      const double q = d[i][r] > 0 ? y[i][r] / d[i][r] : INFINITY;
      if (q > m) m = q;
    }
  }
  *x_max = xm, *eps_max = em;
  return m;
}

/* The smallest inertia scale s with which a substep H (s) is within
 * TS_MASSSPRING_SAFETY of the bound for w2 / s, g / s and phi: with
 * u = 1 / s and Hs = H / TS_MASSSPRING_SAFETY, Hs (g u + sqrt(g^2 u^2 +
 * 4 w2 phi u)) <= 4 is u <= 4 / (Hs^2 w2 phi + 2 g Hs), and g u Hs <=
 * TS__DAMP_LIMIT is u <= TS__DAMP_LIMIT / (g Hs); a hair over it so that
 * rounding cannot add a substep. */
static double inertia_needed(double w2, double g, double phi, double H) {
  double hs = H / TS_MASSSPRING_SAFETY;
  double s = TS__MAX(0.25 * (hs * hs * w2 * phi + 2.0 * g * hs), g * hs / TS__DAMP_LIMIT);
  return s * (1.0 + 1e-9);
}

void ts__ms_inertia_set(ts_tissue *t, struct ts__ms *ms, double s) {
  double old = ms->inertia >= 1.0 ? ms->inertia : 1.0;
  ms->inertia = s;
  if (old == s) return;
  const double r = old / s;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int c = 0; c < 3; c++) {
      t->acc[i][c] *= r;
      t->acc_prev[i][c] *= r;
    }
}

/* The largest b eps (*x_max) and strain eps (*eps_max) of the springs at
 * the current state, against the rest lengths the step integrates, as a
 * force evaluation measures them (ts_ms_forces.c). */
static void strains_now(const ts_tissue *t, const struct ts__ms *ms, double *x_max, double *eps_max) {
  const double (*x)[3] = (const double (*)[3])t->x;
  double xm = 0, em = 0;
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *sp = &ms->hs[s];
    double c2 = 0;
    for (int r = 0; r < 3; r++) {
      const double e = x[sp->b][r] - x[sp->a][r];
      c2 += e * e;
    }
    const double eps = sp->L0 > 0 ? sqrt(c2) / sp->L0 - 1.0 : 0.0;
    if (!(eps > 0)) continue;
    xm = TS__MAX(xm, TS__MAX(sp->b1, sp->b2) * eps), em = TS__MAX(em, eps);
  }
  *x_max = xm, *eps_max = em;
}

/* The substep count for this step (see the top of the file). */
double ts__ms_substep_count(const ts_tissue *t, struct ts__ms *ms, double dt, double *phi_out,
                            double *scale_out) {
  double xs = ms->x_seen, es = ms->eps_max > 0 ? ms->eps_max : 0.0;
  /* The first step after a preparation (a refinement's tissue installed
   * under a pressing tool): no force evaluation has measured the strains
   * yet (x_seen 0), so phi is taken from the strains at this state. Without
   * it the selectively scaled and the capped steps took the rest state's
   * phi (1.1) there: the patch at resolution 17 pressed 6 mm by the sphere
   * and refined by Loop under it took 5 substeps where the pressed state
   * needed 7-11 before the install and 9-31 after, and went non-finite in
   * that step in 12 of 208 install timings (test_refine_press). The
   * uncapped lumped step measures them below with its per-spring bound. */
  if (ms->n_last == 0 && (ms->sms || t->max_substeps > 0)) {
    double xm = 0, em = 0;
    strains_now(t, ms, &xm, &em);
    xs = TS__MAX(xs, xm), es = TS__MAX(es, em);
  }
  double x = xs + ms->b_max * TS__STRAIN_MARGIN;
  double e = es;
  double phi = exp(x) * (1.0 + x) * (1.0 + 2.0 * e);
  double gd = ms->g + t->drag, s = 1.0;
  uint32_t cap = t->max_substeps;
  /* the inversion guard's stiffness where it watches (ts_ms_guard.c; 0
   * elsewhere), on top of the springs' (the largest eigenvalue of a sum is
   * at most the sum of the largest) */
  const double wg = ms->w2 > 0 && ms->w2_guard > 0 ? ms->w2_guard / ms->w2 : 0.0;
  if (cap > 0) {
    double req = inertia_needed(ms->w2, gd, phi + wg, dt / cap);
    double cur = ms->inertia >= 1.0 ? ms->inertia : 1.0;
    if (req > cur)
      cur = req; /* at once: stability */
    else if (TS__RELAX * req < cur)
      cur = TS__RELAX * req; /* down only with 25 % room, keeping it */
    s = TS__MIN(TS__MAX(cur, 1.0), TS_MASSSPRING_MAX_INERTIA);
    if (!isfinite(s)) s = 1.0; /* a NaN bound: the count below refuses it */
  }
  *scale_out = s;
  /* uncapped with lumped masses: the stiffness bound at the current
   * strains where it is the tighter (stiffened_bound; never below the rest
   * bound, which the margin's strain stiffens anyway). In the first step
   * after a preparation (a refinement's tissue) no force evaluation has
   * measured the strains yet (x_seen 0: phi was the rest state's, and a
   * refined liver pressed 2 mm took 118 substeps there against the 126
   * its strains need), so phi is taken from the strains measured here */
  double w2p = ms->w2 * phi;
  if (cap == 0 && !ms->sms && ms->n_springs > 0 && ms->w2 > 0) {
    double xm = 0, em = 0;
    const double loc = stiffened_bound(t, ms, &xm, &em);
    if (ms->n_last == 0) {
      const double xn = xm + ms->b_max * TS__STRAIN_MARGIN;
      w2p = TS__MAX(w2p, ms->w2 * exp(xn) * (1.0 + xn) * (1.0 + 2.0 * em));
    }
    if (loc < w2p) w2p = TS__MAX(loc, ms->w2);
    phi = w2p / ms->w2;
  }
  if (wg > 0) w2p += ms->w2_guard, phi += wg;
  double h = TS_MASSSPRING_SAFETY * ts__ms_step_bound(w2p / s, gd / s, 1.0);
  *phi_out = phi;
  double need = ceil(dt / h);
  if (!(need <= TS__MAX_SUBSTEPS)) return need; /* also NaN */
  if (need < 1) need = 1;
  /* a scaled run takes the cap, h fixed: the scale has its own hysteresis */
  if (cap > 0 && s > 1.0 && need <= cap) return cap;
  if (ms->n_last > 0 && need < ms->n_last) {
    double relaxed = ceil(TS__RELAX * dt / h);
    need = relaxed < ms->n_last ? TS__MAX(relaxed, need) : ms->n_last;
  }
  return need;
}
