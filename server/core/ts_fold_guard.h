/*
 * ts_fold_guard.h: the prisms an inversion guard watches, for both solvers
 * (the mass-spring step's forces, ts_ms_guard.c; the position-based
 * solver's one-sided constraints, ts_xpbd_guard.c).
 *
 * A layered tissue's springs and distance constraints have reflected
 * equilibria: a tool pressed through a layer can leave a column folded
 * through it, every spring at its rest length, until a reset. What tells
 * the two states apart is the sign of the prisms' corner tetrahedra
 * (ts_corner_tet.h). A guard holds r = V / V0 of each corner tetrahedron
 * above TS_FOLD_MIN of its rest volume, with the energy
 *   E = 1/2 kappa |V0| (r - TS_FOLD_MIN)^2  for r < TS_FOLD_MIN, else 0,
 * kappa = TS_FOLD_STIFF times the layer's small-strain modulus (Pa).
 *
 * Which prisms (the list, ts_fold_guard_watch, once a step): those of every
 * column a tool touched in the last step (the caller's list of nodes: the
 * mass-spring step's contacts; the position-based solver gives none, and
 * leaves the prisms near its tools alone, ts_xpbd_guard.c), and
 * the ones listed in the last step, while one of their tetrahedra is under
 * TS_FOLD_WATCH of its rest volume; and a sweep that looks at
 * 1/TS_FOLD_SWEEP of all the prisms each step, in turn, and lists those
 * inside out (a tetrahedron under TS_FOLD_INSIDE_OUT): folds no tool
 * touches any more (a sheet pulled through, a grasp let go). It looks only
 * at prisms a tool has been near (ts_fold_guard_near: the columns of nodes
 * a tool touched, or had as contact candidates, since the guard was made),
 * so that what the tissue's own weight turns inside out is left as its
 * shape, like what was inside out when the guard was made: the liver of
 * test_refine_smooth_liver sags a thin prism by its anchored base inside
 * out (r -0.05 to -0.09, 0.2 s into the test), and pushed back it moved a
 * node 12 um more in the refined tissue than in its unrefined twin. A
 * prism's
 * turn is its first column's index modulo TS_FOLD_SWEEP, at the steps of
 * that count modulo TS_FOLD_SWEEP, so that a tissue refined elsewhere
 * (whose columns keep their indices, new ones appended) looks at it at the
 * same steps as its unrefined twin (taken in turn by their index, that
 * liver's sagging prism was found 15 steps apart in the two). The sweep
 * lists only what is inside out, not the squeezed: the liver sagging onto
 * its anchored base squeezes corner tetrahedra far from any tool to a few
 * per cent of their volume (test_refine_smooth_liver), which a guard there
 * would push at other times in a refined tissue than in its twin. A prism
 * already inside out when the guard is made is the tissue's own shape
 * (test_self_contact's folded flap, whose crease springs have their folded
 * lengths), never guarded.
 */
#ifndef TS_FOLD_GUARD_H
#define TS_FOLD_GUARD_H

#include <stdint.h>

#include "ts_tissue.h"

#define TS_FOLD_WATCH 0.5      /* a tetrahedron under this of its rest volume: listed */
#define TS_FOLD_MIN 0.25       /* under this: pushed back (r_min) */
#define TS_FOLD_STIFF 1.0      /* kappa over the layer's young */
#define TS_FOLD_SWEEP 32       /* steps to look at every prism once */
#define TS_FOLD_INSIDE_OUT 0.0 /* the sweep lists a prism with a tetrahedron under this */

typedef struct ts_fold_guard {
  uint32_t n_prism;
  uint32_t (*prism)[6]; /* sheet triangle, then the next sheet's */
  double *kappa;        /* per prism: Pa (0: no guard there) */
  double (*v0)[6];      /* per prism: its corner tetrahedra's rest volumes, m^3 */
  uint32_t *colof;      /* per node: its column (UINT32_MAX: none) */
  uint32_t *cstart;     /* per column + 1: its prisms in cprism[cstart[j]..] */
  uint32_t *cprism;
  uint8_t *on_mark;     /* per prism: in the list */
  uint8_t *by_tool;     /* per prism: a tool has been near it (the sweep's) */
  uint32_t n_on;
  uint32_t *on;         /* the listed prisms */
  uint32_t *bstart;     /* TS_FOLD_SWEEP + 1: the sweep's share of step k (mod
                           TS_FOLD_SWEEP) in bprism[bstart[k]..bstart[k + 1]) */
  uint32_t *bprism;
  uint32_t n_nodes;
} ts_fold_guard;

/* The prisms of t's layers (one per outer-sheet contact triangle and
 * layer) into *out, nothing listed. *out is NULL (and 0 returned) for a
 * tissue without layers; TS_ENOMEM. */
int ts_fold_guard_create(const ts_tissue *t, ts_fold_guard **out);
void ts_fold_guard_free(ts_fold_guard *g);

/* The smallest of prism q's six volume ratios at x (a NaN ratio counts as
 * the smallest). */
double ts_fold_guard_min_ratio(const ts_fold_guard *g, uint32_t q, const double (*x)[3]);

/* Marks the prisms of the columns of nodes[0..n) (out-of-range ones are
 * skipped) as ones a tool has been near, for the sweep. */
void ts_fold_guard_near(ts_fold_guard *g, const uint32_t *nodes, uint32_t n);

/* The list of step `step` (the tissue's step count) at x (see the top):
 * touched[0..n_touched) the nodes the tools touched (out-of-range ones are
 * skipped), sweep nonzero to run the sweep's share. Returns the number
 * listed (g->n_on). */
uint32_t ts_fold_guard_watch(ts_fold_guard *g, const double (*x)[3], const uint32_t *touched,
                             uint32_t n_touched, int sweep, uint64_t step);

/* Corner tetrahedron k of prism q at x: its ratio r = V / V0 (V0 =
 * g->v0[q][k]), its nodes and (grad non-NULL) dV/dx of each, m^2. */
double ts_fold_guard_tet(const ts_fold_guard *g, uint32_t q, int k, const double (*x)[3],
                         uint32_t idx[4], double grad[4][3]);

/* The guard's energy at x over the listed prisms, J. */
double ts_fold_guard_energy(const ts_fold_guard *g, const double (*x)[3]);

#endif
