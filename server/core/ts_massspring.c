/*
 * ts_massspring.c: the mass-spring step of the first method (see
 * ts_massspring.h): nonlinear anisotropic Kelvin springs (ts_material.h),
 * gravity, external forces and drag, integrated by the method's hybrid of
 * Verlet and Beeman with a second-order Taylor start, then strain limiting
 * and tool contact.
 *
 * The integrator, per free node and substep k (h fixed within a run):
 *   Taylor (first substep): x1 = x0 + h v0 + a0 h^2/2, v1 = v0 + a0 h.
 *   Then F_k from (x_k, v_k), a_k = F_k / m, and the branch by
 *   |F_k - F_(k-1)| = m |a_k - a_(k-1)| against mu:
 *   Verlet: x_(k+1) = 2 x_k - x_(k-1) + a_k h^2,
 *           v_(k+1) = (x_(k+1) - x_(k-1)) / 2h (as the method gives it; it is
 *           the central difference, so the dampers see the velocity one
 *           substep late: see Stability);
 *   Beeman: x_(k+1) = x_k + h v_k + h^2 (4 a_k - a_(k-1)) / 6,
 *           v_(k+1) = v_k + h (2 a_(k+1) + 5 a_k - a_(k-1)) / 6.
 *   Beeman's velocity needs a_(k+1), which needs the forces at x_(k+1),
 *   whose dampers need v_(k+1): the usual predictor-corrector resolution
 *   (D. Beeman, "Some multistep methods for use in molecular dynamics
 *   calculations", J. Comput. Phys. 20(2):130-139, 1976) stores the
 *   predicted v_(k+1) = v_k + h (3 a_k - a_(k-1)) / 2 for the next force
 *   evaluation, and once a_(k+1) is known replaces it by Beeman's value,
 *   which differs by h (a_(k+1) - 2 a_k + a_(k-1)) / 3. Both branches give
 *   the same second-order positions for velocity-independent forces, so a
 *   node may switch every substep. When h changes (a new substep count) the
 *   history no longer fits and the run restarts with a Taylor substep.
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
 * Switching. A Verlet node's velocity is the central difference at t_(k-1)
 * (the method's v_(k+1) = (x_(k+1) - x_(k-1)) / 2h is centred on x_k); when
 * the node turns to Beeman, whose position update needs v at t_k, the step
 * first adds h (a_(k-1) + a_k) / 2. Without it the O(h) lag would stay in
 * the Beeman segment's positions and a run that switches would converge at
 * first order only (tests/unit/test_mechanics.c checks second order).
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
 * force evaluation (plus a margin of 1 % strain), phi = e^x (1 + x)
 * (1 + 2 eps), and w^2 phi in the bound. The substep is
 * TS_MASSSPRING_SAFETY of it; the count only falls again when the bound
 * allows 25 % more, so that it does not flap (each change restarts the run).
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
 * Selective mass scaling (L. Olovsson, K. Simonsson and M. Unosson,
 * "Selective mass scaling for explicit finite element analyses", Int. J.
 * Numer. Meth. Engng 63(10):1436-1445, 2005, and for thin walls modelled
 * with solid elements across their thickness, Olovsson and Simonsson,
 * Comput. Mech. 34(2):134-136, 2004). The layers are thin (1-2 mm) beside
 * the mesh spacing (1.6-5 mm), so the fastest modes of a built tissue are
 * the relative motions of a column of nodes across a slab: compressing or
 * shearing a layer through its thickness, some 3-5 times faster than
 * anything in the sheets and far above what a trainee can see or feel. For
 * tissues with the sheet layout (t->mass_scaling), each link (s, j)-(s+1, j)
 * gets a mass beta that acts only on the difference of the two nodes'
 * motions: M~ = M + sum beta (e_a - e_b)(e_a - e_b)^T. A column moving as a
 * whole (translation, and so gravity, momentum and every static
 * equilibrium) is unchanged; only the through-thickness modes slow down, to
 * the bound of the in-sheet springs (sms_choose). Bending adds a little
 * inertia to the relative sliding of the sheets, about (beta/m) (k t)^2 of
 * a mode's kinetic energy for wavenumber k: below 2 % for the patch's
 * first modes. M~ couples only the nodes of one column, a tridiagonal
 * matrix factored once (sms_factor), so a = M~^-1 F costs a few operations
 * per node. The integrator's formulas are unchanged; F_k - F_(k-1) in the
 * branch test is M~ (a_k - a_(k-1)), and the kinetic energy includes
 * (1/2) beta |v_a - v_b|^2.
 *
 * Contact (frictionless, inelastic). After each substep every free node
 * inside an active tool is moved along the tool's outward normal n onto its
 * surface without a velocity kick (Verlet's previous position moves along,
 * so its implied velocity is kept; a kick of the move over h would bounce
 * the node off) and loses any velocity into the tool; the node is marked
 * with n (and stays marked while within 1e-4 of the radius of the surface).
 * In the next substep the part of a marked node's total force F_k (springs,
 * dampers, gravity,
 * drag, external) that pushes into the tool, (F.n) n when F.n < 0, is
 * cancelled: that is the tool's reaction, and what the tissue pushes on the
 * tool with. At rest it is exactly what the tool holds back (the anchors
 * carry the rest of the weight). With the scaled mass matrix the reaction
 * is the constraint force that stops the node's normal acceleration, found
 * after the column's solve (integrate_sms), so that the push does not reach
 * the rest of the column through the coupling. While held, the node's
 * velocity and remembered accelerations lose their normal parts
 * (hold_history), or Beeman's history would throw it off the surface. The
 * force is averaged over the substeps of a step. A node inside two tools
 * belongs to the last.
 *
 * Speed. The step's copy of the springs is one 64-byte record per spring,
 * sorted by the number of exponential terms (0, 1, 2) and then by node, so
 * that each of the three force loops is straight-line code walking memory
 * in order, vectorised over blocks of 16 springs between the scalar gathers
 * and scatters (spring_class), and built for AVX2 too where the compiler
 * can pick it at load time. No allocation in the step.
 */
#include "ts_massspring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"

#define TS__MAX_SPEED 100.0        /* m/s: faster than any tissue moves */
#define TS__MAX_SUBSTEPS 1000000u  /* a dt that needs more is refused */
#define TS__MAX_STEP_TOOLS 64
#define TS__MAX_DT 1.0             /* s */
#define TS__GROWTH_RATIO 1.2       /* kinetic energy growth per step ... */
#define TS__GROWTH_STEPS 20        /* ... sustained this long: diverged */
#define TS__KE_FLOOR 1e-12         /* J: below this, growth is not counted */
#define TS__STRAIN_MARGIN 0.01     /* strain the substep count allows for */
#define TS__RELAX 1.25             /* fewer substeps only with this much room */
#define TS__SMS_MARGIN 1.3         /* on the power-iteration estimate of w^2 */
#define TS__DAMP_LIMIT 0.5         /* h g below this (Beeman's damping: 0.6) */
#define TS__SKIN 1e-4              /* contact skin, relative to the tool radius */
#define TS__MAX(a, b) ((a) > (b) ? (a) : (b))
#define TS__MIN(a, b) ((a) < (b) ? (a) : (b))

/* One spring as the force loop reads it. */
typedef struct ts__hs {
  uint32_t a, b;
  double L0, iL0; /* rest length and its inverse (0 for L0 = 0) */
  double k1, b1, k2, b2;
  double c;
} ts__hs;
_Static_assert(sizeof(ts__hs) == 64, "one spring per cache line");

/* A spring with a strain range, as strain limiting reads it. */
typedef struct ts__lim {
  uint32_t a, b;
  double lo, hi; /* allowed lengths, m */
} ts__lim;

struct ts__ms {
  uint32_t n_nodes, n_springs;
  uint32_t n_lin, n_one, n_two; /* hs: the linear springs, then one term, two */
  uint32_t n_lim;
  ts__hs *hs;
  ts__lim *lim;
  double w2, g;   /* bounds at rest: largest w^2 (1/s^2), damping rate (1/s) */
  double b_max;   /* largest exponent */
  double x_seen;  /* largest b eps (tension) at the last force evaluation */
  double eps_max, eps_min;
  double ke_prev; /* kinetic energy after the last step */
  uint32_t growth;
  uint32_t n_last; /* substeps of the last step */
  /* selective mass scaling (see the top of the file) */
  int sms;
  uint32_t nv, S; /* the sheet layout */
  double *beta;   /* per node (s, j): the mass on its link to (s+1, j), kg */
  double *sl;     /* per node: the column's L D L^T factors: multiplier */
  double *sip;    /* and inverse pivot */
  double (*an)[3]; /* per node scratch: accelerations of the substep */
  double (*cn)[3]; /* per node: the tool's outward normal at its contact */
  uint8_t *ctool;  /* per node: 1 + the caller's index of the tool it touched
                      at the end of the last substep, 0 for none */
  uint32_t *clist; /* the nodes with ctool set */
  uint32_t n_clist;
};

/* ---- the step's copy of the springs ---- */

static int spring_ok(const ts_spring *s, uint32_t n) {
  if (s->a >= n || s->b >= n || s->a == s->b) return 0;
  double v[6] = {s->rest, s->k, s->k1, s->k2, s->c, 0};
  for (int i = 0; i < 5; i++)
    if (!isfinite(v[i]) || v[i] < 0) return 0;
  if (!isfinite(s->b1) || !isfinite(s->b2) || s->b1 < 0 || s->b2 < 0 || s->b1 > 100 ||
      s->b2 > 100)
    return 0;
  if ((s->b1 > 0 || s->b2 > 0) && !(s->rest > 0)) return 0; /* the law needs a strain */
  if (!isfinite(s->strain_min) || !isfinite(s->strain_max)) return 0;
  if (s->strain_min != 0 || s->strain_max != 0)
    if (!(s->strain_min > -1 && s->strain_min <= 0 && s->strain_max >= 0 &&
          s->strain_min < s->strain_max))
      return 0;
  return 1;
}

/* The hot record of spring s; its class (number of exponential terms). */
static int hot_spring(const ts_spring *s, ts__hs *o) {
  o->a = s->a;
  o->b = s->b;
  o->L0 = s->rest;
  o->iL0 = s->rest > 0 ? 1.0 / s->rest : 0.0;
  o->c = s->c;
  double k1 = s->k1, b1 = s->b1, k2 = s->k2, b2 = s->b2;
  if (k1 == 0 && k2 == 0) k1 = s->k, b1 = 0; /* hand-made linear spring */
  if (k1 == 0) k1 = k2, b1 = b2, k2 = 0, b2 = 0;
  if (k2 > 0 && b2 == b1) k1 += k2, k2 = 0, b2 = 0;
  if (k2 == 0) b2 = 0;
  if (b1 == 0 && k2 > 0) { /* keep the linear part second: it costs nothing */
    double tk = k1, tb = b1;
    k1 = k2, b1 = b2, k2 = tk, b2 = tb;
  }
  o->k1 = k1, o->b1 = b1, o->k2 = k2, o->b2 = b2;
  return k2 > 0 ? 2 : b1 > 0 ? 1 : 0;
}

typedef struct ts__order {
  uint32_t key; /* class << 30 | a, for sorting */
  uint32_t idx;
} ts__order;

static int cmp_order(const void *x, const void *y) {
  const ts__order *p = x, *q = y;
  if (p->key != q->key) return p->key < q->key ? -1 : 1;
  return p->idx < q->idx ? -1 : p->idx > q->idx;
}

/* ---- stability bounds ---- */

/* y = B d, where B = |M^-1/2 A M^-1/2| (entrywise absolute value) over the
 * free degrees of freedom, A the small-strain stiffness (damping = 0) or the
 * damping matrix of the springs linearised at rest: a spring with unit
 * direction n adds kc n n^T to the diagonal blocks of its ends and -kc n n^T
 * off the diagonal. d == NULL means d = 1 on every free DOF. */
static void abs_product(const ts_tissue *t, const ts__hs *hs, uint32_t ns, int damping,
                        const double (*d)[3], double (*y)[3]) {
  const double *im = t->inv_mass;
  memset(y, 0, sizeof *y * t->n_nodes);
  for (uint32_t s = 0; s < ns; s++) {
    const ts__hs *sp = &hs[s];
    double ia = im[sp->a] > 0 ? im[sp->a] : 0, ib = im[sp->b] > 0 ? im[sp->b] : 0;
    if (ia == 0 && ib == 0) continue;
    double kc = damping ? sp->c : sp->k1 + sp->k2;
    double n[3], l2 = 0;
    for (int r = 0; r < 3; r++) {
      n[r] = t->rest[sp->b][r] - t->rest[sp->a][r];
      l2 += n[r] * n[r];
    }
    if (l2 > 0) {
      double il = 1.0 / sqrt(l2);
      for (int r = 0; r < 3; r++) n[r] = fabs(n[r]) * il;
    } else {
      n[0] = n[1] = n[2] = 1.0; /* no direction: an entrywise upper bound */
    }
    double cross = sqrt(ia * ib);
    double da[3] = {1, 1, 1}, db[3] = {1, 1, 1};
    if (d)
      for (int c = 0; c < 3; c++) da[c] = d[sp->a][c], db[c] = d[sp->b][c];
    double pa = 0, pb = 0; /* n . (own d), n . (other end's d) */
    for (int c = 0; c < 3; c++) {
      pa += n[c] * (ia * da[c] + cross * db[c]);
      pb += n[c] * (ib * db[c] + cross * da[c]);
    }
    for (int r = 0; r < 3; r++) {
      if (ia > 0) y[sp->a][r] += kc * n[r] * pa;
      if (ib > 0) y[sp->b][r] += kc * n[r] * pb;
    }
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
 * valid bound; the smallest is kept. */
static double scaled_bound(const ts_tissue *t, const ts__hs *hs, uint32_t ns, int damping,
                           double (*d)[3], double (*y)[3]) {
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int r = 0; r < 3; r++) d[i][r] = t->inv_mass[i] > 0 ? 1.0 : 0.0;
  double best = INFINITY;
  for (int it = 0; it < 20; it++) {
    abs_product(t, hs, ns, damping, (const double (*)[3])d, y);
    double b = max_ratio(t, (const double (*)[3])d, (const double (*)[3])y);
    if (b < best) best = b;
    double ymax = 0;
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int r = 0; r < 3; r++)
        if (y[i][r] > ymax) ymax = y[i][r];
    if (!(ymax > 0)) break;
    /* the small shift keeps every free d_i positive */
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int r = 0; r < 3; r++)
        d[i][r] = t->inv_mass[i] > 0 ? y[i][r] / ymax + 1e-9 : 0.0;
  }
  return best;
}

/* Largest stable substep for the bounds w2 (on w^2), g (damping rate) and
 * the stiffening factor phi. */
static double step_bound(double w2, double g, double phi) {
  double den = g + sqrt(g * g + 4.0 * w2 * phi);
  double h = den > 0 ? 4.0 / den : INFINITY;
  if (g > 0 && TS__DAMP_LIMIT / g < h) h = TS__DAMP_LIMIT / g;
  return h;
}

/* Builds the hot springs of t into hs (n_springs records, sorted) and the
 * class counts. Returns -1 for a malformed spring or node. */
static int build_hot(const ts_tissue *t, ts__hs *hs, uint32_t cnt[3]) {
  uint32_t ns = t->n_springs;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (!isfinite(t->inv_mass[i]) || t->inv_mass[i] < 0) return -1;
  ts__order *ord = malloc(sizeof *ord * (ns ? ns : 1));
  if (!ord) return -2;
  cnt[0] = cnt[1] = cnt[2] = 0;
  for (uint32_t s = 0; s < ns; s++) {
    if (!spring_ok(&t->springs[s], t->n_nodes)) {
      free(ord);
      return -1;
    }
    ts__hs h;
    int cls = hot_spring(&t->springs[s], &h);
    cnt[cls]++;
    ord[s].key = (uint32_t)cls << 30 | (h.a & 0x3fffffffu);
    ord[s].idx = s;
  }
  qsort(ord, ns, sizeof *ord, cmp_order);
  for (uint32_t s = 0; s < ns; s++) hot_spring(&t->springs[ord[s].idx], &hs[s]);
  free(ord);
  return 0;
}

/* w^2 and g bounds of t over its hot springs (scratch allocated here). */
static int rest_bounds(const ts_tissue *t, const ts__hs *hs, double *w2, double *g) {
  double (*d)[3] = malloc(sizeof *d * t->n_nodes);
  double (*y)[3] = malloc(sizeof *y * t->n_nodes);
  int rc = -1;
  if (d && y) {
    *w2 = scaled_bound(t, hs, t->n_springs, 0, d, y);
    *g = scaled_bound(t, hs, t->n_springs, 1, d, y);
    rc = 0;
  }
  free(d);
  free(y);
  return rc;
}

/* ---- selective mass scaling ---- */

/* 1 when t has the sheet layout the scaling works on. */
static int sheet_layout(const ts_tissue *t) {
  return t->n_sheets >= 2 && t->n_sheets <= TS_MAX_LAYERS + 1 && t->nodes_per_sheet > 0 &&
         (uint64_t)t->n_sheets * t->nodes_per_sheet == t->n_nodes;
}

/* Column j's tridiagonal mass matrix: diagonal m_s + beta_(s-1) + beta_s,
 * off-diagonal -beta_s between free neighbours. Factors it (L D L^T, a free
 * run at a time) into ms->sl, ms->sip. */
static void sms_factor(const ts_tissue *t, struct ts__ms *ms) {
  const uint32_t nv = ms->nv, S = ms->S;
  for (uint32_t j = 0; j < nv; j++) {
    double piv_prev = 0, o_prev = 0;
    for (uint32_t s = 0; s < S; s++) {
      uint32_t i = s * nv + j;
      ms->sl[i] = 0;
      ms->sip[i] = 0;
      if (!(t->inv_mass[i] > 0)) {
        o_prev = 0;
        continue;
      }
      double d = 1.0 / t->inv_mass[i] + ms->beta[i] + (s > 0 ? ms->beta[i - nv] : 0.0);
      double l = o_prev != 0 ? o_prev / piv_prev : 0.0;
      double piv = d - l * o_prev;
      ms->sl[i] = l;
      ms->sip[i] = 1.0 / piv;
      piv_prev = piv;
      /* coupling to the node below, when both are free */
      o_prev = (s + 1 < S && t->inv_mass[i + nv] > 0) ? -ms->beta[i] : 0.0;
    }
  }
}

/* y <- M~^-1 y over the free nodes (anchored rows are left at zero). */
static void sms_solve(const ts_tissue *t, const struct ts__ms *ms, double (*y)[3]) {
  const uint32_t nv = ms->nv, S = ms->S;
  for (uint32_t j = 0; j < nv; j++) {
    for (uint32_t s = 0; s < S; s++) { /* forward: y_s -= l_s y_(s-1) */
      uint32_t i = s * nv + j;
      if (!(t->inv_mass[i] > 0)) {
        y[i][0] = y[i][1] = y[i][2] = 0;
        continue;
      }
      if (ms->sl[i] != 0)
        for (int c = 0; c < 3; c++) y[i][c] -= ms->sl[i] * y[i - nv][c];
    }
    for (uint32_t s = S; s-- > 0;) { /* back: a_s = (y_s - o_s a_(s+1)) / piv_s */
      uint32_t i = s * nv + j;
      if (!(t->inv_mass[i] > 0)) continue;
      double o = (s + 1 < S && t->inv_mass[i + nv] > 0) ? -ms->beta[i] : 0.0;
      for (int c = 0; c < 3; c++) {
        double below = o != 0 ? y[i + nv][c] : 0.0;
        y[i][c] = (y[i][c] - o * below) * ms->sip[i];
      }
    }
  }
}

/* x . M~ x over the free nodes. */
static double sms_mass_dot(const ts_tissue *t, const struct ts__ms *ms, const double (*x)[3]) {
  double sum = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (t->inv_mass[i] > 0) sum += (x[i][0] * x[i][0] + x[i][1] * x[i][1] + x[i][2] * x[i][2]) / t->inv_mass[i];
  if (ms->sms)
    for (uint32_t i = 0; i + ms->nv < t->n_nodes; i++) {
      uint32_t k = i + ms->nv;
      double wa = t->inv_mass[i] > 0, wb = t->inv_mass[k] > 0;
      double d0 = wb * x[k][0] - wa * x[i][0], d1 = wb * x[k][1] - wa * x[i][1],
             d2 = wb * x[k][2] - wa * x[i][2];
      sum += ms->beta[i] * (d0 * d0 + d1 * d1 + d2 * d2);
    }
  return sum;
}

/* y = K x (damping = 0: the small-strain stiffness at rest) or C x (the
 * dampers), free rows only. */
static void spring_product(const ts_tissue *t, const struct ts__ms *ms, int damping,
                           const double (*x)[3], double (*y)[3]) {
  memset(y, 0, sizeof *y * t->n_nodes);
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *h = &ms->hs[s];
    double n[3], l2 = 0;
    for (int c = 0; c < 3; c++) {
      n[c] = t->rest[h->b][c] - t->rest[h->a][c];
      l2 += n[c] * n[c];
    }
    if (!(l2 > 0)) continue;
    double q = 0;
    for (int c = 0; c < 3; c++) q += n[c] * (x[h->b][c] - x[h->a][c]);
    q *= (damping ? h->c : h->k1 + h->k2) / l2;
    for (int c = 0; c < 3; c++) {
      y[h->a][c] -= q * n[c];
      y[h->b][c] += q * n[c];
    }
  }
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (!(t->inv_mass[i] > 0)) y[i][0] = y[i][1] = y[i][2] = 0;
}

/* Largest eigenvalue of M~^-1 K (or of M~^-1 C) by power iteration
 * (Rayleigh quotients of the iterates; the largest seen is kept). It
 * approaches from below, so the caller adds a margin. x, y: scratch. */
static double power_bound(const ts_tissue *t, const struct ts__ms *ms, int damping,
                          double (*x)[3], double (*y)[3]) {
  uint32_t h = 2463534242u;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int c = 0; c < 3; c++) {
      h ^= h << 13, h ^= h >> 17, h ^= h << 5; /* xorshift: a start with every mode in it */
      x[i][c] = t->inv_mass[i] > 0 ? (double)(h >> 8) / 16777216.0 - 0.5 : 0.0;
    }
  double best = 0;
  for (int it = 0; it < 80; it++) {
    spring_product(t, ms, damping, (const double (*)[3])x, y);
    double num = 0;
    for (uint32_t i = 0; i < t->n_nodes; i++)
      num += x[i][0] * y[i][0] + x[i][1] * y[i][1] + x[i][2] * y[i][2];
    double den = sms_mass_dot(t, ms, (const double (*)[3])x);
    if (!(den > 0)) break;
    if (num / den > best) best = num / den;
    sms_solve(t, ms, y);
    double nrm = sms_mass_dot(t, ms, (const double (*)[3])y);
    if (!(nrm > 0)) break;
    nrm = 1.0 / sqrt(nrm);
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int c = 0; c < 3; c++) x[i][c] = y[i][c] * nrm;
  }
  return best;
}

/* Chooses the links' masses beta: for the link (s, j)-(s+1, j), k_t the
 * small-strain constants of every spring across slab s at either end, mu
 * the reduced mass of the two ends; beta = max(0, k_t / w_t^2 - mu) brings
 * the relative motion's frequency sqrt(k_t / (mu + beta)) down to w_t, the
 * bound on the in-sheet springs alone (so the scaling never reaches below
 * what the sheets' own resolution limits the step to). scratch: 3 n_nodes
 * doubles. Returns 0, or -1 when there is nothing to scale. */
static int sms_choose(const ts_tissue *t, struct ts__ms *ms, double (*d)[3], double (*y)[3]) {
  const uint32_t nv = ms->nv, n = t->n_nodes;
  uint32_t ne = 0;
  for (uint32_t s = 0; s < t->n_springs; s++) ne += t->springs[s].kind == TS_SPRING_EDGE;
  if (ne == 0) return -1;
  ts__hs *edges = malloc(sizeof *edges * ne);
  if (!edges) return -2;
  ne = 0;
  for (uint32_t s = 0; s < t->n_springs; s++)
    if (t->springs[s].kind == TS_SPRING_EDGE) hot_spring(&t->springs[s], &edges[ne++]);
  double wt2 = scaled_bound(t, edges, ne, 0, d, y);
  free(edges);
  if (!(wt2 > 0) || !isfinite(wt2)) return -1;
  /* k_t per link: d[i][0] the springs from node i down across its slab,
   * d[i][1] those from node i up across the slab above */
  for (uint32_t i = 0; i < n; i++) d[i][0] = d[i][1] = 0;
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *h = &ms->hs[s];
    uint32_t sa = h->a / nv, sb = h->b / nv;
    if (sa == sb) continue;
    uint32_t up = sa < sb ? h->a : h->b, dn = sa < sb ? h->b : h->a;
    d[up][0] += h->k1 + h->k2;
    d[dn][1] += h->k1 + h->k2;
  }
  for (uint32_t i = 0; i < n; i++) {
    ms->beta[i] = 0;
    if (i + nv >= n) continue;
    double wa = t->inv_mass[i], wb = t->inv_mass[i + nv];
    if (!(wa > 0) && !(wb > 0)) continue;
    double mu = wa > 0 && wb > 0 ? 1.0 / (wa + wb) : wa > 0 ? 1.0 / wa : 1.0 / wb;
    double kt = d[i][0] + d[i + nv][1];
    double beta = kt / wt2 - mu;
    ms->beta[i] = beta > 0 ? beta : 0.0;
  }
  return 0;
}

int ts_massspring_prepare(ts_tissue *t) {
  if (!t || t->n_nodes == 0 || !t->x || !t->inv_mass || !t->rest) return TS_EINVAL;
  if (t->n_springs > 0 && !t->springs) return TS_EINVAL;
  uint32_t ns = t->n_springs, nl = 0, n = t->n_nodes;
  for (uint32_t s = 0; s < ns; s++) {
    const ts_spring *sp = &t->springs[s];
    if (sp->strain_min != 0 || sp->strain_max != 0) nl++;
  }
  int sms = t->mass_scaling && sheet_layout(t);
  /* one block: the header, the hot springs (64-byte aligned), the limits,
   * the scaling's per-node arrays and the step's scratch */
  size_t off_hs = (sizeof(struct ts__ms) + 63) & ~(size_t)63;
  size_t off_lim = off_hs + sizeof(ts__hs) * ns;
  size_t off_node = (off_lim + sizeof(ts__lim) * nl + 63) & ~(size_t)63;
  size_t off_u32 = off_node + sizeof(double) * n * 9;
  size_t total = off_u32 + (sizeof(uint32_t) + 1) * n;
  unsigned char *blk = aligned_alloc(64, (total + 63) & ~(size_t)63);
  if (!blk) return TS_ENOMEM;
  struct ts__ms *ms = (struct ts__ms *)blk;
  memset(ms, 0, sizeof *ms);
  ms->hs = (ts__hs *)(blk + off_hs);
  ms->lim = (ts__lim *)(blk + off_lim);
  double *node = (double *)(blk + off_node);
  ms->beta = node;
  ms->sl = node + n;
  ms->sip = node + 2 * (size_t)n;
  ms->an = (double (*)[3])(node + 3 * (size_t)n);
  ms->cn = (double (*)[3])(node + 6 * (size_t)n);
  ms->clist = (uint32_t *)(blk + off_u32);
  ms->ctool = (uint8_t *)(ms->clist + n);
  memset(node, 0, sizeof(double) * n * 9 + (sizeof(uint32_t) + 1) * n);
  ms->n_nodes = n;
  ms->n_springs = ns;
  uint32_t cnt[3];
  int rc = build_hot(t, ms->hs, cnt);
  if (rc) {
    free(blk);
    return rc == -2 ? TS_ENOMEM : TS_EINVAL;
  }
  ms->n_lin = cnt[0], ms->n_one = cnt[1], ms->n_two = cnt[2];
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

  double (*d)[3] = malloc(sizeof *d * n);
  double (*y)[3] = malloc(sizeof *y * n);
  if (!d || !y) {
    free(d);
    free(y);
    free(blk);
    return TS_ENOMEM;
  }
  if (sms) {
    ms->nv = t->nodes_per_sheet;
    ms->S = t->n_sheets;
    rc = sms_choose(t, ms, d, y);
    if (rc == -2) {
      free(d);
      free(y);
      free(blk);
      return TS_ENOMEM;
    }
    ms->sms = rc == 0;
  }
  if (ms->sms) {
    sms_factor(t, ms);
    ms->w2 = TS__SMS_MARGIN * power_bound(t, ms, 0, d, y);
    ms->g = TS__SMS_MARGIN * power_bound(t, ms, 1, d, y);
  } else {
    ms->w2 = scaled_bound(t, ms->hs, ns, 0, d, y);
    ms->g = scaled_bound(t, ms->hs, ns, 1, d, y);
  }
  free(d);
  free(y);
  free(t->ms);
  t->ms = ms;
  t->stable_dt = step_bound(ms->w2, ms->g + TS__MAX(t->drag, 0.0), 1.0);
  return 0;
}

double ts_massspring_stable_dt(const ts_tissue *t) {
  if (!t || t->n_nodes == 0 || !t->rest || !t->inv_mass) return 0.0;
  if (t->n_springs > 0 && !t->springs) return 0.0;
  double drag = isfinite(t->drag) && t->drag > 0 ? t->drag : 0.0;
  if (t->ms) return step_bound(t->ms->w2, t->ms->g + drag, 1.0);
  ts__hs *hs = malloc(sizeof *hs * (t->n_springs ? t->n_springs : 1));
  double w2 = 0, g = 0, h = 0;
  uint32_t cnt[3];
  if (hs && build_hot(t, hs, cnt) == 0 && rest_bounds(t, hs, &w2, &g) == 0)
    h = step_bound(w2, g + drag, 1.0);
  free(hs);
  return h > 0 && isfinite(h) ? h : 0.0;
}

/* ---- energy ---- */

/* k L0^2 times the integral of e^(b s) s ds from 0 to eps (eps > 0), the
 * stored energy of one term; the series near 0 avoids cancellation. */
static double term_energy(double k, double b, double L0, double eps) {
  if (eps <= 0 || b == 0) return 0.5 * k * L0 * L0 * eps * eps;
  double y = b * eps, psi;
  if (y < 1e-3)
    psi = eps * eps * (0.5 + y / 3.0 + y * y / 8.0);
  else
    psi = (exp(y) * (y - 1.0) + 1.0) / (b * b);
  return k * L0 * L0 * psi;
}

int ts_massspring_energy(const ts_tissue *t, double *kinetic, double *potential) {
  if (!t || !t->ms || t->ms->n_nodes != t->n_nodes) return TS_EINVAL;
  double ke = 0, pe = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double w = t->inv_mass[i];
    if (!(w > 0)) continue;
    const double *v = t->v[i], *x = t->x[i], *r = t->rest[i], *fe = t->f_ext[i];
    ke += 0.5 * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) / w;
    for (int c = 0; c < 3; c++) pe -= (t->gravity[c] / w + fe[c]) * (x[c] - r[c]);
  }
  const struct ts__ms *ms = t->ms;
  if (ms->sms) /* the scaled mass's share: (1/2) beta |v_below - v_above|^2 */
    ke = 0.5 * sms_mass_dot(t, ms, (const double (*)[3])t->v);
  for (uint32_t s = 0; s < ms->n_springs; s++) {
    const ts__hs *h = &ms->hs[s];
    double d[3] = {t->x[h->b][0] - t->x[h->a][0], t->x[h->b][1] - t->x[h->a][1],
                   t->x[h->b][2] - t->x[h->a][2]};
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (h->b1 == 0 && h->b2 == 0) {
      pe += 0.5 * (h->k1 + h->k2) * (l - h->L0) * (l - h->L0);
    } else {
      double eps = (l - h->L0) * h->iL0;
      pe += term_energy(h->k1, h->b1, h->L0, eps) + term_energy(h->k2, h->b2, h->L0, eps);
    }
  }
  if (kinetic) *kinetic = ke;
  if (potential) *potential = pe;
  return 0;
}

/* ---- forces ---- */

typedef struct ts__strain {
  double x_max;   /* largest b eps in tension */
  double eps_max, eps_min;
} ts__strain;

/* Spring and damper forces of one class of springs (terms = its number of
 * exponential terms), added into f. Springs go in blocks of TS__BLK: the
 * gathers and the scatter are scalar, everything in between (length, strain,
 * the exponentials, the tension) runs over the whole block as loops of
 * independent lanes that the compiler vectorises (one spring alone is a
 * long dependent chain: square root, division, a degree-12 polynomial). */
#define TS__BLK 16
static inline __attribute__((always_inline)) void
spring_class(const ts__hs *restrict hs, uint32_t n, const double (*restrict x)[3],
             const double (*restrict v)[3], double (*restrict f)[3], const int terms,
             ts__strain *st) {
  double xm = st->x_max, em = st->eps_max, en = st->eps_min;
  for (uint32_t s0 = 0; s0 < n; s0 += TS__BLK) {
    const uint32_t m = n - s0 < TS__BLK ? n - s0 : TS__BLK;
    const ts__hs *blk = hs + s0;
    double dx[TS__BLK], dy[TS__BLK], dz[TS__BLK], wx[TS__BLK], wy[TS__BLK], wz[TS__BLK];
    double L0[TS__BLK], iL0[TS__BLK], k1[TS__BLK], b1[TS__BLK], k2[TS__BLK], b2[TS__BLK];
    double c[TS__BLK], fs[TS__BLK], eps[TS__BLK], xx[TS__BLK];
    for (uint32_t j = 0; j < m; j++) { /* gather */
      const ts__hs *p = &blk[j];
      const uint32_t a = p->a, b = p->b;
      dx[j] = x[b][0] - x[a][0], dy[j] = x[b][1] - x[a][1], dz[j] = x[b][2] - x[a][2];
      wx[j] = v[b][0] - v[a][0], wy[j] = v[b][1] - v[a][1], wz[j] = v[b][2] - v[a][2];
      L0[j] = p->L0, iL0[j] = p->iL0, c[j] = p->c;
      k1[j] = p->k1, b1[j] = p->b1, k2[j] = p->k2, b2[j] = p->b2;
    }
    for (uint32_t j = m; j < TS__BLK; j++) { /* harmless padding */
      dx[j] = 1, dy[j] = dz[j] = wx[j] = wy[j] = wz[j] = 0;
      L0[j] = iL0[j] = 1, c[j] = k1[j] = b1[j] = k2[j] = b2[j] = 0;
    }
    /* square roots on their own: sqrt() may set errno, which keeps the
     * compiler from vectorising a loop that contains it */
    double len[TS__BLK];
    for (uint32_t j = 0; j < TS__BLK; j++)
      len[j] = dx[j] * dx[j] + dy[j] * dy[j] + dz[j] * dz[j] + 1e-300;
    for (uint32_t j = 0; j < TS__BLK; j++) len[j] = sqrt(len[j]);
    for (uint32_t j = 0; j < TS__BLK; j++) {
      /* max and min as (a + b +- |a - b|) / 2, exact here, so that the loop
       * has no compare to stop the vectoriser */
      const double l = len[j], il = 1.0 / l;
      const double e = l - L0[j], ep0 = e * iL0[j];
      const double ep = 0.5 * (ep0 + fabs(ep0)); /* max(eps, 0) */
      eps[j] = ep0;
      double kk = k1[j];
      if (terms > 0) {
        const double y1 = b1[j] * ep, y2 = b2[j] * ep;
        const double o1 = y1 - 700.0, o2 = y2 - 700.0; /* min(y, 700) = y - max(y - 700, 0) */
        xx[j] = 0.5 * (y1 + y2 + fabs(y1 - y2));
        kk = k1[j] * ts_exp_unclamped(y1 - 0.5 * (o1 + fabs(o1)));
        if (terms > 1) kk += k2[j] * ts_exp_unclamped(y2 - 0.5 * (o2 + fabs(o2)));
      }
      const double dvd = wx[j] * dx[j] + wy[j] * dy[j] + wz[j] * dz[j];
      /* tension over length: k'(eps) (L - L0) plus the damper's c dL/dt */
      fs[j] = (kk * e + c[j] * dvd * il) * il;
    }
    for (uint32_t j = 0; j < m; j++) { /* scatter, and the strain extremes */
      const ts__hs *p = &blk[j];
      const uint32_t a = p->a, b = p->b;
      const double fx = fs[j] * dx[j], fy = fs[j] * dy[j], fz = fs[j] * dz[j];
      f[a][0] += fx;
      f[a][1] += fy;
      f[a][2] += fz;
      f[b][0] -= fx;
      f[b][1] -= fy;
      f[b][2] -= fz;
      em = TS__MAX(em, eps[j]);
      en = TS__MIN(en, eps[j]);
      if (terms > 0) xm = TS__MAX(xm, xx[j]);
    }
  }
  st->x_max = xm, st->eps_max = em, st->eps_min = en;
}

/* Built twice where the compiler can (GCC and clang on x86-64 with ifunc
 * support): for AVX2, chosen at load time on machines that have it (4
 * lanes instead of SSE2's 2), and for the baseline. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define TS__CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TS__CLONES
#endif

TS__CLONES static void spring_forces_all(const ts__hs *hs, uint32_t n_lin, uint32_t n_one,
                                         uint32_t n_two, const double (*x)[3],
                                         const double (*v)[3], double (*f)[3],
                                         ts__strain *st) {
  spring_class(hs, n_lin, x, v, f, 0, st);
  spring_class(hs + n_lin, n_one, x, v, f, 1, st);
  spring_class(hs + n_lin + n_one, n_two, x, v, f, 2, st);
}

static void spring_forces(ts_tissue *t, struct ts__ms *ms) {
  memset(t->f, 0, sizeof *t->f * t->n_nodes);
  ts__strain st = {0.0, 0.0, 0.0};
  spring_forces_all(ms->hs, ms->n_lin, ms->n_one, ms->n_two, (const double (*)[3])t->x,
                    (const double (*)[3])t->v, t->f, &st);
  ms->x_seen = st.x_max;
  ms->eps_max = st.eps_max;
  ms->eps_min = st.eps_min;
}

/* ---- tools (prepared once per step) ---- */

typedef struct ts__ptool {
  ts_tool *tool;
  double a[3], ab[3]; /* core segment a + u*ab, u in [0,1] */
  double inv_len2;    /* 1/|ab|^2, 0 for a sphere */
  double r;
  double bc[3], br2;  /* bounding sphere of the tool: centre, radius^2 */
  int index;          /* in the caller's tools[] */
  double force[3];    /* sum over substeps */
  double torque[3];   /* sum over substeps, about the tool's tip */
  uint32_t contacts;  /* in the last substep */
} ts__ptool;

/* Adds a reaction f on the tool at point p to its force and to its torque
 * about the tool's tip. */
static inline void add_reaction(ts__ptool *p, const double at[3], const double f[3]) {
  double r[3];
  for (int c = 0; c < 3; c++) {
    p->force[c] += f[c];
    r[c] = at[c] - p->tool->pos[c];
  }
  p->torque[0] += r[1] * f[2] - r[2] * f[1];
  p->torque[1] += r[2] * f[0] - r[0] * f[2];
  p->torque[2] += r[0] * f[1] - r[1] * f[0];
}

/* The tool holds node i this substep (its push into the tool is being
 * cancelled): the node has no normal motion of its own while held, so its
 * velocity (Verlet's implied one, x - x_prev, too) and the accelerations it
 * remembers (Beeman's a_(k-1), a_(k-2), whose history term would otherwise
 * throw it off the surface) lose their components along n. */
static inline void hold_history(ts_tissue *t, uint32_t i, const double n[3]) {
  double *h[3] = {t->acc[i], t->acc_prev[i], t->v[i]};
  for (int q = 0; q < 3; q++) {
    double an = h[q][0] * n[0] + h[q][1] * n[1] + h[q][2] * n[2];
    for (int c = 0; c < 3; c++) h[q][c] -= an * n[c];
  }
  double *x = t->x[i], *xp = t->x_prev[i], rel = 0;
  for (int c = 0; c < 3; c++) rel += (x[c] - xp[c]) * n[c];
  for (int c = 0; c < 3; c++) xp[c] += rel * n[c];
}

/* The reaction of the tool a node touched at the end of the last substep:
 * the part of its force F pushing into the tool (along -n, n the tool's
 * outward normal there) is cancelled and added to that tool's force. With
 * the scaled mass matrix this must happen before the solve, or the cancelled
 * push would still reach the rest of the node's column. */
static inline void reaction(ts_tissue *t, const struct ts__ms *ms, uint32_t i, double F[3],
                            ts__ptool *pt, const int8_t *tool_slot) {
  int k = ms->ctool[i];
  if (!k) return;
  int j = tool_slot[k - 1];
  if (j < 0) return;
  const double *n = ms->cn[i];
  double fn = F[0] * n[0] + F[1] * n[1] + F[2] * n[2];
  if (!(fn < 0)) return;
  double fr[3];
  for (int c = 0; c < 3; c++) {
    F[c] -= fn * n[c];
    fr[c] = fn * n[c];
  }
  add_reaction(&pt[j], t->x[i], fr);
  hold_history(t, i, n);
}

/* ---- integration ---- */

/* The update of free node i with its acceleration an of this substep;
 * beeman: the branch test's verdict (|F_k - F_(k-1)| > mu). Returns the
 * branch taken. */
static inline int node_update(ts_tissue *restrict t, uint32_t i, const double an[3], int taylor,
                              int beeman, double h) {
  double *restrict x = t->x[i], *restrict xp = t->x_prev[i], *restrict v = t->v[i];
  double *restrict acc = t->acc[i], *restrict accp = t->acc_prev[i];
  const double h2 = h * h;
  int br;
  if (taylor) {
    for (int c = 0; c < 3; c++) {
      double xn = x[c] + h * v[c] + 0.5 * h2 * an[c];
      v[c] += h * an[c];
      xp[c] = x[c];
      x[c] = xn;
      accp[c] = an[c];
    }
    br = TS_BRANCH_TAYLOR;
  } else if (beeman) {
    if (t->branch[i] == TS_BRANCH_VERLET) /* Verlet's v is the central
      difference at t_(k-1): bring it to t_k, second order, before Beeman's
      formulas use it */
      for (int c = 0; c < 3; c++) v[c] += 0.5 * h * (acc[c] + an[c]);
    for (int c = 0; c < 3; c++) {
      double xn = x[c] + h * v[c] + h2 * (4.0 * an[c] - acc[c]) / 6.0;
      v[c] += 0.5 * h * (3.0 * an[c] - acc[c]); /* predicted; corrected next substep */
      xp[c] = x[c];
      x[c] = xn;
      accp[c] = acc[c];
    }
    br = TS_BRANCH_BEEMAN;
  } else {
    const double i2h = 0.5 / h;
    for (int c = 0; c < 3; c++) {
      double xn = 2.0 * x[c] - xp[c] + an[c] * h2;
      v[c] = (xn - xp[c]) * i2h;
      xp[c] = x[c];
      x[c] = xn;
      accp[c] = acc[c];
    }
    br = TS_BRANCH_VERLET;
  }
  for (int c = 0; c < 3; c++) acc[c] = an[c];
  t->branch[i] = (uint8_t)br;
  return br;
}

/* Beeman's v_k for a node that took Beeman's step last substep, now that
 * a_k is known: the predicted velocity plus h (a_k - 2 a_(k-1) + a_(k-2)) / 3. */
static inline void beeman_correct(ts_tissue *t, uint32_t i, const double an[3], double h) {
  if (t->branch[i] != TS_BRANCH_BEEMAN) return;
  for (int c = 0; c < 3; c++)
    t->v[i][c] += h * (an[c] - 2.0 * t->acc[i][c] + t->acc_prev[i][c]) / 3.0;
}

/* One substep of the hybrid integrator for every free node, with the
 * diagonal (lumped) masses; counts[branch] gets the number of nodes on each
 * branch. */
static void integrate(ts_tissue *t, struct ts__ms *ms, double h, int taylor, ts__ptool *pt,
                      const int8_t *slot, uint64_t counts[3]) {
  const double (*f)[3] = (const double (*)[3])t->f;
  const double (*fe)[3] = (const double (*)[3])t->f_ext;
  const double *im = t->inv_mass;
  const double g[3] = {t->gravity[0], t->gravity[1], t->gravity[2]};
  const double drag = t->drag, mu = t->beeman_threshold;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const double w = im[i];
    if (w == 0) continue; /* anchored */
    double an[3], m = 1.0 / w;
    for (int c = 0; c < 3; c++) an[c] = f[i][c] + fe[i][c] + m * (g[c] - drag * t->v[i][c]);
    reaction(t, ms, i, an, pt, slot);
    for (int c = 0; c < 3; c++) an[c] *= w;
    int beeman = 0;
    if (!taylor) {
      beeman_correct(t, i, an, h);
      double d0 = an[0] - t->acc[i][0], d1 = an[1] - t->acc[i][1], d2 = an[2] - t->acc[i][2];
      double lim = mu * w; /* |dF| > mu  <=>  |da| > mu / m */
      beeman = d0 * d0 + d1 * d1 + d2 * d2 > lim * lim;
    }
    counts[node_update(t, i, an, taylor, beeman, h)]++;
  }
}

/* The same with the scaled mass matrix, a column of nodes at a time: the
 * column's forces F, its accelerations a = M~^-1 F (the factored
 * tridiagonal solve), the tool reactions, the branch test on the force
 * change M~ (a_k - a_(k-1)), then each node's update. A reaction here is
 * the constraint force lambda n on a marked node c that makes its normal
 * acceleration zero: a += lambda (M~^-1 e_c) n with lambda = -(a_c . n) /
 * (M~^-1)_cc (with lumped masses this is -F . n, as in reaction()). */
static void integrate_sms(ts_tissue *t, struct ts__ms *ms, double h, int taylor,
                          ts__ptool *pt, const int8_t *slot, uint64_t counts[3]) {
  const uint32_t nv = ms->nv, S = ms->S;
  const double *im = t->inv_mass;
  const double g[3] = {t->gravity[0], t->gravity[1], t->gravity[2]};
  const double drag = t->drag, mu2 = t->beeman_threshold * t->beeman_threshold;
  double (*an)[3] = ms->an;
  for (uint32_t j = 0; j < nv; j++) {
    int marked = 0;
    /* forces, then a = M~^-1 F (as sms_solve, inlined over the column) */
    for (uint32_t s = 0; s < S; s++) {
      uint32_t i = s * nv + j;
      if (!(im[i] > 0)) {
        an[i][0] = an[i][1] = an[i][2] = 0;
        continue;
      }
      marked |= ms->ctool[i];
      double m = 1.0 / im[i];
      for (int c = 0; c < 3; c++) {
        an[i][c] = t->f[i][c] + t->f_ext[i][c] + m * (g[c] - drag * t->v[i][c]);
        if (ms->sl[i] != 0) an[i][c] -= ms->sl[i] * an[i - nv][c];
      }
    }
    for (uint32_t s = S; s-- > 0;) {
      uint32_t i = s * nv + j;
      if (!(im[i] > 0)) continue;
      double o = (s + 1 < S && im[i + nv] > 0) ? -ms->beta[i] : 0.0;
      for (int c = 0; c < 3; c++)
        an[i][c] = (an[i][c] - (o != 0 ? o * an[i + nv][c] : 0.0)) * ms->sip[i];
    }
    for (uint32_t sc = 0; marked && sc < S; sc++) { /* tool reactions */
      uint32_t ic = sc * nv + j;
      int k = ms->ctool[ic];
      if (!k || !(im[ic] > 0) || slot[k - 1] < 0) continue;
      const double *n = ms->cn[ic];
      double acn = an[ic][0] * n[0] + an[ic][1] * n[1] + an[ic][2] * n[2];
      if (!(acn < 0)) continue;
      double col[TS_MAX_LAYERS + 1]; /* M~^-1 e_c over the column */
      for (uint32_t s = 0; s < S; s++) {
        uint32_t i = s * nv + j;
        col[s] = (s == sc && im[i] > 0) ? 1.0 : 0.0;
        if (s > 0 && ms->sl[i] != 0) col[s] -= ms->sl[i] * col[s - 1];
      }
      for (uint32_t s = S; s-- > 0;) {
        uint32_t i = s * nv + j;
        if (!(im[i] > 0)) {
          col[s] = 0;
          continue;
        }
        double o = (s + 1 < S && im[i + nv] > 0) ? -ms->beta[i] : 0.0;
        col[s] = (col[s] - (o != 0 ? o * col[s + 1] : 0.0)) * ms->sip[i];
      }
      double lambda = -acn / col[sc];
      for (uint32_t s = 0; s < S; s++)
        for (int c = 0; c < 3; c++) an[s * nv + j][c] += lambda * col[s] * n[c];
      double fr[3] = {-lambda * n[0], -lambda * n[1], -lambda * n[2]};
      add_reaction(&pt[slot[k - 1]], t->x[ic], fr);
      hold_history(t, ic, n);
    }
    for (uint32_t s = 0; s < S; s++) {
      uint32_t i = s * nv + j;
      if (!(im[i] > 0)) continue;
      int beeman = 0;
      if (!taylor) {
        /* dF = M~ da, row i: (m + beta_up + beta_down) da_i - beta_up da_above
         * - beta_down da_below, da = 0 on anchored nodes */
        double bu = s > 0 ? ms->beta[i - nv] : 0.0, bd = ms->beta[i];
        double dm = 1.0 / im[i] + bu + bd, df2 = 0;
        for (int c = 0; c < 3; c++) {
          double da = an[i][c] - t->acc[i][c];
          /* the node above is updated already: its a_(k-1) is in acc_prev */
          double dup = s > 0 && im[i - nv] > 0 ? an[i - nv][c] - t->acc_prev[i - nv][c] : 0.0;
          double ddn = s + 1 < S && im[i + nv] > 0 ? an[i + nv][c] - t->acc[i + nv][c] : 0.0;
          double dfc = dm * da - bu * dup - bd * ddn;
          df2 += dfc * dfc;
        }
        beeman_correct(t, i, an[i], h);
        beeman = df2 > mu2;
      }
      counts[node_update(t, i, an[i], taylor, beeman, h)]++;
    }
  }
}

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

/* Provot's strain limiting; returns the number of corrections. */
static uint32_t limit_strain(ts_tissue *t, const struct ts__ms *ms, double h) {
  double (*x)[3] = t->x;
  const double *im = t->inv_mass;
  uint32_t total = 0;
  for (uint32_t it = 0; it < t->strain_iterations; it++) {
    uint32_t fixes = 0;
    for (uint32_t s = 0; s < ms->n_lim; s++) {
      const ts__lim *p = &ms->lim[s];
      const uint32_t a = p->a, b = p->b;
      double d[3] = {x[b][0] - x[a][0], x[b][1] - x[a][1], x[b][2] - x[a][2]};
      double l2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
      double target;
      if (l2 > p->hi * p->hi)
        target = p->hi;
      else if (l2 < p->lo * p->lo && l2 > 0)
        target = p->lo;
      else
        continue;
      double wa = im[a], wb = im[b], ws = wa + wb;
      if (!(ws > 0)) continue;
      double l = sqrt(l2), q = (l - target) / (l * ws);
      uint32_t ends[2] = {a, b};
      double w[2] = {wa, -wb};
      for (int e = 0; e < 2; e++) {
        uint32_t i = ends[e];
        if (!(im[i] > 0)) continue;
        double dx[3];
        for (int c = 0; c < 3; c++) {
          dx[c] = w[e] * q * d[c];
          x[i][c] += dx[c];
        }
        correct_velocity(t, i, dx, h);
      }
      fixes++;
    }
    total += fixes;
    if (!fixes) break;
  }
  return total;
}

/* ---- tools ---- */


static int valid_tool(const ts_tool *tl) {
  if (tl->kind != TS_TOOL_SPHERE && tl->kind != TS_TOOL_CAPSULE) return TS_EINVAL;
  for (int i = 0; i < 3; i++)
    if (!isfinite(tl->pos[i])) return TS_ENAN;
  for (int i = 0; i < 4; i++)
    if (!isfinite(tl->quat[i])) return TS_ENAN;
  if (!isfinite(tl->radius) || !isfinite(tl->length)) return TS_ENAN;
  if (!(tl->radius > 0) || tl->radius > 1.0) return TS_EINVAL;
  if (tl->kind == TS_TOOL_CAPSULE && (tl->length < 0 || tl->length > 10.0)) return TS_EINVAL;
  return 0;
}

static void prepare_tool(ts__ptool *p, ts_tool *tl) {
  double b[3];
  memset(p, 0, sizeof *p);
  p->tool = tl;
  ts_tool_segment(tl, p->a, b);
  double l2 = 0;
  for (int i = 0; i < 3; i++) {
    p->ab[i] = b[i] - p->a[i];
    l2 += p->ab[i] * p->ab[i];
    p->bc[i] = 0.5 * (p->a[i] + b[i]);
  }
  p->inv_len2 = l2 > 0 ? 1.0 / l2 : 0.0;
  p->r = tl->radius;
  double br = tl->radius * (1.0 + TS__SKIN) + 0.5 * sqrt(l2);
  p->br2 = br * br;
}

/* Projects the free nodes inside tool p onto its surface and marks them
 * (normal, tool) for the next substep's reaction. */
static void contact(ts_tissue *t, struct ts__ms *ms, ts__ptool *p) {
  double (*x)[3] = t->x, (*v)[3] = t->v;
  const double *im = t->inv_mass;
  uint32_t hits = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double ex = x[i][0] - p->bc[0], ey = x[i][1] - p->bc[1], ez = x[i][2] - p->bc[2];
    if (!(ex * ex + ey * ey + ez * ez < p->br2) || im[i] == 0) continue;
    double ap[3] = {x[i][0] - p->a[0], x[i][1] - p->a[1], x[i][2] - p->a[2]};
    double u = (ap[0] * p->ab[0] + ap[1] * p->ab[1] + ap[2] * p->ab[2]) * p->inv_len2;
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double c[3], d[3];
    for (int k = 0; k < 3; k++) {
      c[k] = p->a[k] + u * p->ab[k];
      d[k] = x[i][k] - c[k];
    }
    double dl = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    /* a node left on the surface by the last projection (and held there by
     * its reaction) is still in contact: a skin of 1e-4 r (0.5 um for a
     * 5 mm tool) that rounding and the tangential sliding do not cross */
    if (!(dl < p->r * (1.0 + TS__SKIN))) continue;
    double n[3] = {0, 1, 0};
    if (dl > 0)
      for (int k = 0; k < 3; k++) n[k] = d[k] / dl;
    if (dl < p->r) {
      /* inelastic: the node moves onto the surface without a velocity
       * kick (Verlet's implied velocity x - x_prev is kept by moving
       * x_prev along), then loses its velocity into the tool */
      int verlet = t->branch[i] == TS_BRANCH_VERLET;
      double *xp = t->x_prev[i];
      for (int k = 0; k < 3; k++) {
        double target = c[k] + p->r * n[k];
        if (verlet) xp[k] += target - x[i][k];
        x[i][k] = target;
      }
      double vn = v[i][0] * n[0] + v[i][1] * n[1] + v[i][2] * n[2];
      if (vn < 0)
        for (int k = 0; k < 3; k++) v[i][k] -= vn * n[k];
      if (verlet) {
        double rel = 0;
        for (int k = 0; k < 3; k++) rel += (x[i][k] - xp[k]) * n[k];
        if (rel < 0)
          for (int k = 0; k < 3; k++) xp[k] += rel * n[k];
      }
    }
    if (!ms->ctool[i]) ms->clist[ms->n_clist++] = i;
    ms->ctool[i] = (uint8_t)(p->index + 1);
    memcpy(ms->cn[i], n, sizeof n);
    hits++;
  }
  p->contacts = hits;
}

/* Keeps only the marks of nodes still within the skin of their tool at its
 * pose for this step (a tool that moved away or went inactive lets go at
 * once), with the normals at the new pose. */
static void revalidate_contacts(const ts_tissue *t, struct ts__ms *ms, const ts__ptool *pt,
                                const int8_t *slot) {
  uint32_t kept = 0;
  for (uint32_t q = 0; q < ms->n_clist; q++) {
    uint32_t i = ms->clist[q];
    int j = slot[ms->ctool[i] - 1];
    int keep = 0;
    if (j >= 0) {
      const ts__ptool *p = &pt[j];
      double ap[3] = {t->x[i][0] - p->a[0], t->x[i][1] - p->a[1], t->x[i][2] - p->a[2]};
      double u = (ap[0] * p->ab[0] + ap[1] * p->ab[1] + ap[2] * p->ab[2]) * p->inv_len2;
      u = u < 0 ? 0 : u > 1 ? 1 : u;
      double d[3], dl = 0;
      for (int k = 0; k < 3; k++) {
        d[k] = t->x[i][k] - (p->a[k] + u * p->ab[k]);
        dl += d[k] * d[k];
      }
      dl = sqrt(dl);
      if (dl < p->r * (1.0 + TS__SKIN) && dl > 0) {
        keep = 1;
        for (int k = 0; k < 3; k++) ms->cn[i][k] = d[k] / dl;
      }
    }
    if (keep)
      ms->clist[kept++] = i;
    else
      ms->ctool[i] = 0;
  }
  ms->n_clist = kept;
}

/* Forgets the contacts of the last substep. */
static void clear_contacts(struct ts__ms *ms) {
  for (uint32_t k = 0; k < ms->n_clist; k++) ms->ctool[ms->clist[k]] = 0;
  ms->n_clist = 0;
}

/* ---- step ---- */

/* The substep count for this step (see the top of the file). */
static double substep_count(const ts_tissue *t, struct ts__ms *ms, double dt, double *phi_out) {
  double x = ms->x_seen + ms->b_max * TS__STRAIN_MARGIN;
  double e = ms->eps_max > 0 ? ms->eps_max : 0.0;
  double phi = exp(x) * (1.0 + x) * (1.0 + 2.0 * e);
  double h = TS_MASSSPRING_SAFETY * step_bound(ms->w2, ms->g + t->drag, phi);
  *phi_out = phi;
  double need = ceil(dt / h);
  if (!(need <= TS__MAX_SUBSTEPS)) return need; /* also NaN */
  if (need < 1) need = 1;
  if (ms->n_last > 0 && need < ms->n_last) {
    double relaxed = ceil(TS__RELAX * dt / h);
    need = relaxed < ms->n_last ? TS__MAX(relaxed, need) : ms->n_last;
  }
  return need;
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
    int rc = valid_tool(&tools[i]);
    if (rc) return rc;
  }
  if (!t->ms || t->ms->n_nodes != t->n_nodes || t->ms->n_springs != t->n_springs) {
    int rc = ts_massspring_prepare(t);
    if (rc) return rc;
  }
  struct ts__ms *ms = t->ms;

  double phi;
  double nsub = substep_count(t, ms, dt, &phi);
  if (!(nsub <= TS__MAX_SUBSTEPS)) return TS_ERANGE;
  uint32_t n = (uint32_t)nsub;
  double h = dt / n;

  int8_t slot[TS__MAX_STEP_TOOLS]; /* caller's index -> pt[] (-1: inactive or absent) */
  memset(slot, -1, sizeof slot);
  for (int i = 0; i < n_tools; i++) {
    tools[i].force[0] = tools[i].force[1] = tools[i].force[2] = 0;
    tools[i].torque[0] = tools[i].torque[1] = tools[i].torque[2] = 0;
    tools[i].contacts = 0;
    if (!tools[i].active) continue;
    slot[i] = (int8_t)np;
    prepare_tool(&pt[np], &tools[i]);
    pt[np++].index = i;
  }

  int taylor = 0;
  if (t->h_prev == 0) { /* a start or a reset */
    taylor = 1;
    ms->ke_prev = 0;
    ms->growth = 0;
    clear_contacts(ms);
  } else if (h != t->h_prev) {
    taylor = 1;
  }

  revalidate_contacts(t, ms, pt, slot);
  uint64_t counts[3] = {0, 0, 0};
  uint32_t fixes = 0;
  for (uint32_t k = 0; k < n; k++) {
    spring_forces(t, ms);
    if (ms->sms)
      integrate_sms(t, ms, h, taylor, pt, slot, counts);
    else
      integrate(t, ms, h, taylor, pt, slot, counts);
    taylor = 0;
    if (ms->n_lim) fixes += limit_strain(t, ms, h);
    clear_contacts(ms);
    for (int j = 0; j < np; j++) contact(t, ms, &pt[j]);
  }
  t->h_prev = h;
  ms->n_last = n;
  t->time += dt;
  t->steps++;

  /* health and statistics */
  int bad = 0;
  double vmax2 = 0, ke = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const double *x = t->x[i], *v = t->v[i];
    double v2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if (!isfinite(x[0] + x[1] + x[2]) || !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED)) {
      bad = 1;
      break;
    }
    if (v2 > vmax2) vmax2 = v2;
    if (t->inv_mass[i] > 0) ke += 0.5 * v2 / t->inv_mass[i];
  }
  if (!bad) {
    if (ke > TS__KE_FLOOR && ke > TS__GROWTH_RATIO * ms->ke_prev)
      ms->growth++;
    else
      ms->growth = 0;
    ms->ke_prev = ke;
    if (ms->growth >= TS__GROWTH_STEPS) bad = 1;
  }
  if (stats) {
    uint64_t all = counts[0] + counts[1] + counts[2];
    stats->substeps = n;
    stats->substep = h;
    stats->stiffening = phi;
    if (all) {
      stats->taylor_fraction = (double)counts[TS_BRANCH_TAYLOR] / all;
      stats->verlet_fraction = (double)counts[TS_BRANCH_VERLET] / all;
      stats->beeman_fraction = (double)counts[TS_BRANCH_BEEMAN] / all;
    }
    stats->max_strain = ms->eps_max;
    stats->min_strain = ms->eps_min;
    stats->strain_limited = fixes;
  }
  if (bad) {
    ts_tissue_reset(t);
    clear_contacts(ms);
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
    pt[j].tool->contacts = pt[j].contacts;
    contacts += pt[j].contacts;
  }
  if (stats) {
    stats->contacts = contacts;
    stats->max_speed = sqrt(vmax2);
    stats->kinetic_energy = ke;
  }
  return 0;
}
