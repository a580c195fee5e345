/*
 * ts_ms_integrate.c: the method's hybrid integrator (ts_massspring.h), one
 * substep for every free node, with lumped masses or with the scaled mass
 * matrix of ts_ms_sms.c, and the tools' reactions on the nodes they hold.
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
 * Switching. A Verlet node's velocity is the central difference at t_(k-1)
 * (the method's v_(k+1) = (x_(k+1) - x_(k-1)) / 2h is centred on x_k); when
 * the node turns to Beeman, whose position update needs v at t_k, the step
 * first adds h (a_(k-1) + a_k) / 2. Without it the O(h) lag would stay in
 * the Beeman segment's positions and a run that switches would converge at
 * first order only (tests/unit/test_mechanics.c checks second order).
 *
 * Tool reactions. A node marked by the last substep's contact
 * (ts_ms_contact.c) has the part of its total force F_k (springs, dampers,
 * gravity, drag, external) that pushes into the tool, (F.n) n when
 * F.n < 0, cancelled: that is the tool's reaction, and what the tissue
 * pushes on the tool with. With the scaled mass matrix the reaction is the
 * constraint force that stops the node's normal acceleration, found after
 * the column's solve (integrate_sms), so that the push does not reach the
 * rest of the column through the coupling. While held, the node's velocity
 * and remembered accelerations lose their normal parts (hold_history), or
 * Beeman's history would throw it off the surface. A tool with friction
 * then adds its tangential force on the held node (ts__ms_friction,
 * ts_ms_contact.c says the method), whose opposite is part of the tool's
 * reaction; a node static friction holds takes the Verlet update that its
 * stick force is computed for.
 *
 * Inertia scaling (ts_ms_bounds.c): the accelerations are the forces over
 * s times the (lumped or selectively scaled) mass, the forces themselves,
 * gravity's and drag's m included, physical; the branch test and the
 * contact reactions work on forces, so they see s M~ (a_k - a_(k-1)) and
 * (s M~)^-1 e_c. s = 1 multiplies by exactly 1: the results of before.
 * The local mass scaling of a refined region (ts_ms_local.c) adds to the
 * inertia of a few nodes: ms->iw is 1 / (m + dm), in M~'s diagonal too,
 * while gravity and drag take the physical m (ms->mass). A tissue without
 * added mass reads inv_mass itself, as before (bit for bit, and a change of
 * inv_mass behind the step's back, which test_core makes to drive a chain
 * unstable, still acts on the inertia).
 *
 * Speed. Both integrators take the forces from the force loop's rows
 * (ms->f4, ts_ms_forces.c) and copy each to t->f and clear it as they read
 * it, which the force loop did in two passes of its own before; and they
 * write each updated node's x and v into the loop's row (ms->xv), which
 * the loop then need not fill from t->x and t->v (ms->xv_ok). The step
 * is memory work: patch-S's 10,000 nodes walk some 15 per-node arrays
 * (positions, velocities, the two accelerations, x_prev, the forces, the
 * masses and the column factors, the scratch an) in three passes, about
 * 500 bytes a node, from the third-level cache. Measured with both the old
 * and this integrator in one process, stepping two copies of the settled
 * patch-S alternately (1 substep, medians of 400-600 calls, a shared 2-core
 * box at load 9-17): the integrator 186-206 us before, 196-210 us after
 * on Verlet nodes, 239-268 against 240-260 us on Beeman ones, the force
 * loop 15-85 us cheaper, the two together 1-11 % cheaper (3-4 % in most
 * runs). Tried and dropped, all bit for bit the same
 * results: the columns a block at a time (32 to 1,024 columns, the solve,
 * the reactions and the updates of a block with its accelerations in a
 * first-level-cache scratch): 20-50 % slower, the S sheets times a dozen
 * arrays being more streams at once than the prefetchers follow; the
 * slot's constants (mass, factors, link masses) in one 64-byte row: no
 * change; both branches computed and the verdict's chosen (no jump):
 * 10-16 % slower on uniform branches, 4 % at 45 % Verlet; t->f written
 * with non-temporal stores: no change. Multiplying by 1/6 and 1/3 instead
 * of Beeman's divisions gave 6 % of the integrator, but rounds differently.
 * The update without reloads (same results bit for bit): the node's new x
 * and v kept in locals (the row was filled by 16-byte loads straddling two
 * 8-byte stores just made, which cannot be forwarded: perf put 19 % of the
 * integrator's samples on one such load), the arrays of t read once a pass
 * (the store of the branch byte may alias t, so every pointer was reloaded
 * at each node), the branch counts and the move in registers. A capped
 * patch-S step (a profiling driver: settled, one substep, the sphere on the
 * standard path; main's build and this one alternated, best of 4 to 6
 * runs, load under 1): 521 to 481 us resting, 559 to 503 us with the path
 * run at four times its speed (5 % of the nodes on Beeman's branch); the
 * integrator 29 % of the step before, 24 % after. Tried and dropped: the
 * branch test's diagonal (1 / iw + beta above + beta below) precomputed
 * per slot (no change: the division is off the critical path), software
 * prefetches 24 nodes ahead in the update (1 % slower).
 * Tried and dropped, all with the same results bit for bit (a profiling
 * driver stepping capped patch-S along the standard path with the sphere,
 * the same hash of x and v; perf's share of the step, two runs each): the
 * branch test apart from the update (each node's a_k - a_(k-1) formed in
 * the back substitution, the verdicts a sheet behind it, the columns the
 * reactions touch done again; the update then reads one byte a node
 * instead of six streams): the integrator 28.4-28.8 % of the step against
 * 28.4-29.0 %; with it, the update eight nodes at a time with AVX-512
 * (eight nodes' x are 24 consecutive doubles: three vectors, each node's
 * branch a mask of its three lanes, both branches computed and blended):
 * the update alone 15 % of the step, the integrator with it 32 % against
 * 29 %; this file compiled for x86-64-v4: no change. The update moves
 * about 300 bytes a node; fewer instructions do not make it faster.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"


/* Adds a reaction f on the tool at point `at` to its force and to its
 * torque about the tool's tip (ToolForce.torque, ts_tool.torque). The
 * contact was taken with the tool at p->at_pos (a swept sphere or capsule
 * at its pose of the sweep, ts__ms_tool_at; pos otherwise), and the lever
 * arm is from the tip at that pose: the tip is a point of the rigid tool,
 * and the moment about it is what the tool feels, the same point at the
 * step's final pose (`at` carried with the tool to the final pose, minus
 * the final tip, is the same arm in translation; the step's turn is at
 * most a few degrees, and the force is in world axes anyway). The final
 * tip as origin would add (at_pos - pos) x f, a moment of the tool's own
 * travel: a sphere's normals all pass through its centre, so its
 * frictionless torque about it is zero at every pose, and measured from
 * the final centre a 0.8 mm sphere swept sideways at 0.5 m/s through the
 * pressed patch felt up to 0.54 |F| r (4.8e-6 N m on 0.025 N;
 * test_ms_thin's test_swept_torque, now 2.5e-16 |F| r). */
static inline void add_reaction(ts__ptool *p, const double at[3], const double f[3]) {
  double r[3];
  for (int c = 0; c < 3; c++) {
    p->force[c] += f[c];
    r[c] = at[c] - p->at_pos[c];
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
 * outward normal there) is cancelled and added to that tool's force, and so
 * is the opposite of the tool's friction on it (w = 1/m, h the substep).
 * With the scaled mass matrix this must happen before the solve, or the
 * cancelled push would still reach the rest of the node's column. Returns
 * 1 when static friction holds the node. */
static inline int reaction(ts_tissue *t, const struct ts__ms *ms, uint32_t i, double F[3],
                           ts__ptool *pt, const int8_t *tool_slot, double w, double h) {
  int k = ms->ctool[i] & TS__CTOOL;
  if (!k) return 0;
  int j = tool_slot[k - 1];
  if (j < 0) return 0;
  const double *n = ms->cn[i];
  double fn = F[0] * n[0] + F[1] * n[1] + F[2] * n[2];
  if (!(fn < 0)) return 0;
  double fr[3];
  for (int c = 0; c < 3; c++) {
    F[c] -= fn * n[c];
    fr[c] = fn * n[c];
  }
  int stuck = 0;
  if (pt[j].mus > 0) {
    double a[3] = {F[0] * w, F[1] * w, F[2] * w}, ff[3];
    stuck = ts__ms_friction(t, i, &pt[j], n, -fn, a, w, h, ff);
    for (int c = 0; c < 3; c++) {
      F[c] += ff[c];
      fr[c] -= ff[c];
    }
  }
  add_reaction(&pt[j], t->x[i], fr);
  hold_history(t, i, n);
  return stuck;
}

/* The per-node state the updates write, as local pointers: read from t
 * once a pass instead of after every store (a store of the branch byte may
 * alias t itself, so GCC reloaded every pointer of t at each node). */
typedef struct ts__nst {
  double (*restrict x)[3], (*restrict xp)[3], (*restrict v)[3];
  double (*restrict acc)[3], (*restrict accp)[3];
  uint8_t *restrict branch;
} ts__nst;

static inline ts__nst node_state(ts_tissue *t) {
  ts__nst n = {t->x, t->x_prev, t->v, t->acc, t->acc_prev, t->branch};
  return n;
}

/* The update of free node i with its acceleration an of this substep;
 * beeman: the branch test's verdict (|F_k - F_(k-1)| > mu). Returns the
 * branch taken; *m2 gets |x_(k+1) - x_k|^2, how far it moved (m^2). The
 * new x and v are kept in locals and written once: GCC paired the row's
 * reads of x and v into 16-byte loads over two 8-byte stores just made,
 * which the store buffer cannot forward (perf put 19 % of the
 * integrator's samples on one of them). */
static inline int node_update(const ts__nst *restrict ns, uint32_t i, const double an[3],
                              int taylor, int beeman, double h, double *restrict row,
                              double *restrict m2) {
  double *restrict x = ns->x[i], *restrict xp = ns->xp[i], *restrict v = ns->v[i];
  double *restrict acc = ns->acc[i], *restrict accp = ns->accp[i];
  const double h2 = h * h;
  double xn[3], vn[3];
  int br;
  if (taylor) {
    for (int c = 0; c < 3; c++) {
      xn[c] = x[c] + h * v[c] + 0.5 * h2 * an[c];
      vn[c] = v[c] + h * an[c];
      accp[c] = an[c];
    }
    br = TS_BRANCH_TAYLOR;
  } else if (beeman) {
    const int was_verlet = ns->branch[i] == TS_BRANCH_VERLET;
    for (int c = 0; c < 3; c++) {
      double vc = v[c];
      if (was_verlet) /* Verlet's v is the central difference at t_(k-1):
        bring it to t_k, second order, before Beeman's formulas use it */
        vc += 0.5 * h * (acc[c] + an[c]);
      xn[c] = x[c] + h * vc + h2 * (4.0 * an[c] - acc[c]) / 6.0;
      vn[c] = vc + 0.5 * h * (3.0 * an[c] - acc[c]); /* predicted; corrected next substep */
      accp[c] = acc[c];
    }
    br = TS_BRANCH_BEEMAN;
  } else {
    const double i2h = 0.5 / h;
    for (int c = 0; c < 3; c++) {
      xn[c] = 2.0 * x[c] - xp[c] + an[c] * h2;
      vn[c] = (xn[c] - xp[c]) * i2h;
      accp[c] = acc[c];
    }
    br = TS_BRANCH_VERLET;
  }
  double d[3];
  for (int c = 0; c < 3; c++) {
    d[c] = xn[c] - x[c];
    xp[c] = x[c];
    x[c] = xn[c];
    v[c] = vn[c];
    acc[c] = an[c];
  }
  *m2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
  /* the force loop's row of the node (x, 0, v, 0; ms->xv_ok): its lanes 3
   * and 7 stay the zeros of the loop's fill */
  row[0] = xn[0], row[1] = xn[1], row[2] = xn[2];
  row[4] = vn[0], row[5] = vn[1], row[6] = vn[2];
  ns->branch[i] = (uint8_t)br;
  return br;
}

/* Beeman's v_k for a node that took Beeman's step last substep, now that
 * a_k is known: the predicted velocity plus h (a_k - 2 a_(k-1) + a_(k-2)) / 3. */
static inline void beeman_correct(const ts__nst *restrict ns, uint32_t i, const double an[3],
                                  double h) {
  if (ns->branch[i] != TS_BRANCH_BEEMAN) return;
  for (int c = 0; c < 3; c++)
    ns->v[i][c] += h * (an[c] - 2.0 * ns->acc[i][c] + ns->accp[i][c]) / 3.0;
}

/* One substep of the hybrid integrator for every free node, with the
 * diagonal (lumped) masses; counts[branch] gets the number of nodes on each
 * branch. */
void ts__ms_integrate(ts_tissue *t, struct ts__ms *ms, double h, int taylor, ts__ptool *pt,
                      const int8_t *slot, uint64_t counts[3]) {
  double (*f4)[4] = ms->f4, (*f)[3] = t->f; /* the force loop's rows, to t->f */
  const double (*fe)[3] = (const double (*)[3])t->f_ext;
  const double (*fh)[3] = ms->fh, wh = ms->wh; /* the refinement's hand-over */
  const double *im = t->inv_mass, *iw = ms->dm_nodes ? ms->iw : im; /* see the top */
  const double g[3] = {t->gravity[0], t->gravity[1], t->gravity[2]};
  const double drag = t->drag, mu = t->beeman_threshold;
  const double is = 1.0 / ms->inertia; /* inertia scaling: exactly 1 when off */
  double move2 = 0;
  uint64_t cnt[3] = {0, 0, 0};
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    f[i][0] = f4[i][0], f[i][1] = f4[i][1], f[i][2] = f4[i][2]; /* as in integrate_sms */
    f4[i][0] = f4[i][1] = f4[i][2] = f4[i][3] = 0;
    if (im[i] == 0) continue; /* anchored */
    /* m: the physical mass (gravity, drag); w: 1 / the inertia (local
     * scaling's added mass and the uniform scale included) */
    const double m = 1.0 / im[i], w = iw[i] * is;
    double an[3];
    for (int c = 0; c < 3; c++)
      an[c] = f[i][c] + fe[i][c] + wh * fh[i][c] + m * (g[c] - drag * t->v[i][c]);
    int stuck = reaction(t, ms, i, an, pt, slot, w, h);
    for (int c = 0; c < 3; c++) an[c] *= w;
    int beeman = 0;
    const ts__nst ns = node_state(t); /* after reaction(), which writes through t */
    if (!taylor) {
      beeman_correct(&ns, i, an, h);
      double d0 = an[0] - ns.acc[i][0], d1 = an[1] - ns.acc[i][1], d2 = an[2] - ns.acc[i][2];
      double lim = mu * w; /* |dF| > mu  <=>  |da| > mu / m */
      /* a node that static friction holds takes Verlet's update */
      beeman = !stuck && d0 * d0 + d1 * d1 + d2 * d2 > lim * lim;
    }
    double m2;
    cnt[node_update(&ns, i, an, taylor, beeman, h, ms->xv[i], &m2)]++;
    move2 = TS__MAX(move2, m2);
  }
  for (int b = 0; b < 3; b++) counts[b] += cnt[b];
  ms->f4_zero = 1;
  ms->move2 = move2;
}

/* The same with the scaled mass matrix: the forces F, the accelerations
 * a = M~^-1 F (the columns' factored tridiagonal solves), the tool
 * reactions, the branch test on the force change M~ (a_k - a_(k-1)), then
 * each node's update. The columns are independent, so the solves run a
 * sheet at a time over all columns at once (consecutive slots of the
 * column map ms->col, which for a built tissue are consecutive nodes and
 * for a refined one the old nodes, then its appended ones), and the
 * updates go sheet by sheet too:
 * the node above a node is updated before it and the node below after it,
 * as a column at a time would have it. A reaction here is the constraint
 * force lambda n on a marked node c that makes its normal acceleration
 * zero: a += lambda (M~^-1 e_c) n with lambda = -(a_c . n) / (M~^-1)_cc
 * (with lumped masses this is -F . n, as in reaction()). */
static inline __attribute__((always_inline)) void
integrate_sms(ts_tissue *t, struct ts__ms *ms, double h, int taylor, ts__ptool *pt, const int8_t *slot,
              uint64_t counts[3], const int ident) {
  const uint32_t nv = ms->nv, S = ms->S;
  const uint32_t *restrict cm = ms->col; /* slot k = s * nv + j -> node (s, j) */
#define NODE(k) (ident ? (k) : cm[k]) /* the identity: the compiler drops the look-up */
  const double *restrict im = t->inv_mass, *restrict iw = ms->dm_nodes ? ms->iw : im;
  const double *restrict mass = ms->mass, *restrict sl = ms->sl, *restrict sip = ms->sip,
               *restrict ob = ms->ob;
  double (*restrict f4)[4] = ms->f4, (*restrict f)[3] = t->f; /* the force loop's rows */
  const double (*restrict fe)[3] = (const double (*)[3])t->f_ext;
  const double (*restrict fh)[3] = ms->fh, wh = ms->wh; /* the refinement's hand-over */
  const double (*restrict v)[3] = (const double (*)[3])t->v;
  const double g0 = t->gravity[0], g1 = t->gravity[1], g2 = t->gravity[2];
  const double drag = t->drag, mu2 = t->beeman_threshold * t->beeman_threshold;
  /* inertia scaling: a = (s M~)^-1 F, the forces over s (exactly 1 when off) */
  const double is = 1.0 / ms->inertia, s2 = ms->inertia * ms->inertia;
  double (*restrict an)[3] = ms->an; /* by node */
  /* every node has a slot (the map is a permutation, ts_tissue_columns): the
   * pass below reads every row of f4 (copies it to t->f, clears it) */
  const int whole = (uint64_t)nv * S == t->n_nodes;
  if (!whole)
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int c = 0; c < 3; c++) f[i][c] = f4[i][c];
  /* forces, and the forward sweep: a_s = F_s - l_s a_(s-1) (l_0 = 0; anchored
   * rows are zero) */
  for (uint32_t s = 0; s < S; s++) {
    const uint32_t k0 = s * nv;
    for (uint32_t k = k0; k < k0 + nv; k++) {
      const uint32_t i = NODE(k);
      const double m = mass[i], l = s > 0 ? sl[k] : 0.0, w = im[i];
      const double fx = f4[i][0], fy = f4[i][1], fz = f4[i][2];
      f[i][0] = fx, f[i][1] = fy, f[i][2] = fz; /* the copy the force loop made before */
      if (whole) f4[i][0] = f4[i][1] = f4[i][2] = f4[i][3] = 0;
      const double F0 = (fx + fe[i][0] + wh * fh[i][0] + m * (g0 - drag * v[i][0])) * is;
      const double F1 = (fy + fe[i][1] + wh * fh[i][1] + m * (g1 - drag * v[i][1])) * is;
      const double F2 = (fz + fe[i][2] + wh * fh[i][2] + m * (g2 - drag * v[i][2])) * is;
      double u0 = 0, u1 = 0, u2 = 0;
      if (l != 0) { /* l != 0 only below a free node (s > 0) */
        const double *up = an[NODE(k - nv)];
        u0 = l * up[0];
        u1 = l * up[1];
        u2 = l * up[2];
      }
      an[i][0] = w > 0 ? F0 - u0 : 0.0;
      an[i][1] = w > 0 ? F1 - u1 : 0.0;
      an[i][2] = w > 0 ? F2 - u2 : 0.0;
    }
  }
  /* back substitution: a_s = (y_s - o_s a_(s+1)) / piv_s, o_s the coupling
   * to the free node below (0 for none) */
  for (uint32_t s = S; s-- > 0;) {
    const uint32_t k0 = s * nv;
    const int below = s + 1 < S;
    for (uint32_t k = k0; k < k0 + nv; k++) {
      const uint32_t i = NODE(k);
      const double o = below ? ob[k] : 0.0, p = sip[k];
      double b0 = 0, b1 = 0, b2 = 0;
      if (o != 0) {
        const double *dn = an[NODE(k + nv)];
        b0 = o * dn[0];
        b1 = o * dn[1];
        b2 = o * dn[2];
      }
      const int free_node = im[i] > 0;
      an[i][0] = free_node ? (an[i][0] - b0) * p : an[i][0];
      an[i][1] = free_node ? (an[i][1] - b1) * p : an[i][1];
      an[i][2] = free_node ? (an[i][2] - b2) * p : an[i][2];
    }
  }
  for (uint32_t j = 0; ms->n_clist > 0 && j < nv; j++) { /* tool reactions */
    for (uint32_t sc = 0; sc < S; sc++) {
      uint32_t ic = NODE(sc * nv + j);
      int k = ms->ctool[ic] & TS__CTOOL;
      if (!k || !(im[ic] > 0) || slot[k - 1] < 0) continue;
      ts__ptool *tp = &pt[slot[k - 1]];
      const double *n = ms->cn[ic];
      double acn = an[ic][0] * n[0] + an[ic][1] * n[1] + an[ic][2] * n[2];
      if (!(acn < 0)) continue;
      double col[TS_MAX_LAYERS + 1]; /* M~^-1 e_c over the column */
      for (uint32_t s = 0; s < S; s++) {
        uint32_t q = s * nv + j;
        col[s] = (s == sc && im[NODE(q)] > 0) ? 1.0 : 0.0;
        if (s > 0 && sl[q] != 0) col[s] -= sl[q] * col[s - 1];
      }
      for (uint32_t s = S; s-- > 0;) {
        uint32_t q = s * nv + j;
        if (!(im[NODE(q)] > 0)) {
          col[s] = 0;
          continue;
        }
        double o = s + 1 < S ? ob[q] : 0.0;
        col[s] = (col[s] - (o != 0 ? o * col[s + 1] : 0.0)) * sip[q];
      }
      for (uint32_t s = 0; s < S; s++) col[s] *= is; /* (s M~)^-1 e_c */
      double lambda = -acn / col[sc];
      for (uint32_t s = 0; s < S; s++)
        for (int c = 0; c < 3; c++) an[NODE(s * nv + j)][c] += lambda * col[s] * n[c];
      double fr[3] = {-lambda * n[0], -lambda * n[1], -lambda * n[2]};
      if (tp->mus > 0) { /* friction: a tangential force on the node, through its column */
        double ff[3];
        if (ts__ms_friction(t, ic, tp, n, lambda, an[ic], col[sc], h, ff))
          ms->ctool[ic] |= TS__STUCK;
        for (uint32_t s = 0; s < S; s++)
          for (int c = 0; c < 3; c++) an[NODE(s * nv + j)][c] += col[s] * ff[c];
        for (int c = 0; c < 3; c++) fr[c] -= ff[c];
      }
      add_reaction(tp, t->x[ic], fr);
      hold_history(t, ic, n);
    }
  }
  /* nodes the jaws hold (ts_ms_grasp.c): the force lambda on held node c
   * that makes its acceleration zero, a += (M~^-1 e_c) lambda with lambda =
   * -a_c / (M~^-1)_cc per axis, so that its column's free nodes move as
   * next to a node the jaws carry (the placement after the substep gives
   * the held node the jaws' motion), not as next to a free one */
  for (int q = 0; q < TS__MAX_STEP_TOOLS; q++) {
    if (slot[q] < 0 || !pt[slot[q]].grasp) continue;
    const uint32_t *hk;
    const uint32_t nh = ts__ms_grasp_slots(pt[slot[q]].grasp, &hk);
    for (uint32_t m = 0; m < nh; m++) {
      const uint32_t j = hk[m] % nv, sc = hk[m] / nv, ic = NODE(hk[m]);
      if (sc >= S || !(im[ic] > 0)) continue;
      double col[TS_MAX_LAYERS + 1]; /* M~^-1 e_c over the column, as above */
      for (uint32_t s = 0; s < S; s++) {
        uint32_t r = s * nv + j;
        col[s] = (s == sc) ? 1.0 : 0.0;
        if (s > 0 && sl[r] != 0) col[s] -= sl[r] * col[s - 1];
      }
      for (uint32_t s = S; s-- > 0;) {
        uint32_t r = s * nv + j;
        if (!(im[NODE(r)] > 0)) {
          col[s] = 0;
          continue;
        }
        double o = s + 1 < S ? ob[r] : 0.0;
        col[s] = (col[s] - (o != 0 ? o * col[s + 1] : 0.0)) * sip[r];
      }
      if (!(col[sc] > 0)) continue;
      double lam[3];
      for (int c = 0; c < 3; c++) lam[c] = -an[ic][c] / col[sc];
      for (uint32_t s = 0; s < S; s++)
        for (int c = 0; c < 3; c++) an[NODE(s * nv + j)][c] += lam[c] * col[s];
    }
  }
  double move2 = 0;
  uint64_t cnt[3] = {0, 0, 0};
  const ts__nst ns = node_state(t);
  const double *restrict beta = ms->beta;
  const uint8_t *restrict ctool = ms->ctool;
  double (*restrict xv)[8] = ms->xv;
  for (uint32_t s = 0; s < S; s++) {
    for (uint32_t k = s * nv; k < (s + 1) * nv; k++) {
      const uint32_t i = NODE(k);
      if (!(im[i] > 0)) continue;
      int beeman = 0;
      if (!taylor && (ctool[i] & TS__STUCK)) { /* held by static friction: Verlet */
        beeman_correct(&ns, i, an[i], h);
      } else if (!taylor) {
        /* dF = M~ da, row i: (m + beta_up + beta_down) da_i - beta_up da_above
         * - beta_down da_below, da = 0 on anchored nodes */
        double bu = s > 0 ? beta[k - nv] : 0.0, bd = beta[k];
        const uint32_t ia = s > 0 ? NODE(k - nv) : i, ib = s + 1 < S ? NODE(k + nv) : i;
        double dm = 1.0 / iw[i] + bu + bd, df2 = 0;
        for (int c = 0; c < 3; c++) {
          double da = an[i][c] - ns.acc[i][c];
          /* the node above is updated already: its a_(k-1) is in acc_prev */
          double dup = s > 0 && im[ia] > 0 ? an[ia][c] - ns.accp[ia][c] : 0.0;
          double ddn = s + 1 < S && im[ib] > 0 ? an[ib][c] - ns.acc[ib][c] : 0.0;
          double dfc = dm * da - bu * dup - bd * ddn;
          df2 += dfc * dfc;
        }
        beeman_correct(&ns, i, an[i], h);
        beeman = df2 * s2 > mu2; /* the force change under the scaled inertia */
      }
      double m2;
      cnt[node_update(&ns, i, an[i], taylor, beeman, h, xv[i], &m2)]++;
      move2 = TS__MAX(move2, m2);
    }
  }
  for (int b = 0; b < 3; b++) counts[b] += cnt[b];
  if (whole) ms->f4_zero = 1;
  ms->move2 = move2;
}
#undef NODE

void ts__ms_integrate_sms(ts_tissue *t, struct ts__ms *ms, double h, int taylor,
                          ts__ptool *pt, const int8_t *slot, uint64_t counts[3]) {
  if (ms->col_identity) /* a built tissue: node (s, j) = s * nv + j */
    integrate_sms(t, ms, h, taylor, pt, slot, counts, 1);
  else
    integrate_sms(t, ms, h, taylor, pt, slot, counts, 0);
}
