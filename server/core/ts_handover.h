/*
 * ts_handover.h: the hand-over of a live refinement (issue 4, "the tissue
 * does not jump"): what keeps the step after a refinement continuous, and
 * fades out so that the tissue then moves to the finer network's own
 * equilibrium smoothly.
 *
 * Why. A refined tissue (ts_refine.h) carries the state over exactly, but
 * the finer network has its own equilibrium: its new springs have rest
 * lengths and cross-sections of their own, and mass moves from the old
 * nodes to the new ones, so at the carried-over state its nodes feel forces
 * the coarse network did not have. The nodes are light and stiffly held,
 * so within one 1 ms step they reach the new equilibrium: measured on the
 * default patch, 20-24 um in that step while it sags, 0.17-0.33 mm with a
 * sphere pressed in, against the 10 um quantum of the wire. Two things
 * cause it, and the hand-over answers each:
 *   - a force mismatch. At the carried-over state every free node i gets
 *     the extra force
 *       f_i = m_i a_i - (F_i + m_i g),
 *     F_i the refined network's spring forces (the elastic part of the law,
 *     ts_material.h), m_i its mass, g gravity, and a_i the acceleration the
 *     unrefined network had there: for an old node its own (F_old / m_old +
 *     g, plus the earlier hand-over's remaining force), for a new node the
 *     mean of its two parents' (the linear interpolation, as for its
 *     position and velocity; a parent held by a tool without the push into
 *     the tool that the tool's reaction cancels, or its new neighbours would
 *     inherit half of that push: 78 um in the first step, measured). So
 *     the refined tissue starts with the
 *     unrefined one's accelerations: the old nodes move in the first step as
 *     the unrefined tissue would, and the new nodes as the midpoints of
 *     their parents. Equivalently, this is an equilibrium-preserving shift
 *     of every spring's rest state, lumped on the nodes (a node-wise term
 *     needs no change to either solver's constraint set, and covers the
 *     gravity loads that moved with the mass as well as the springs);
 *   - a contact mismatch. A new node at the midpoint of an edge under a
 *     convex tool lies inside it (by the chord's sag, e^2 / (8 R): 0.28 mm
 *     for a 3.3 mm edge under a 5 mm sphere), and the contact would throw it
 *     onto the surface in one substep. Its depth at the refinement, d_i, is
 *     an allowance: the node's contact is against the tool shrunk by d_i
 *     (its radius r - w d_i), so it stays where the interpolation put it.
 * In XPBD a large node force is a poor hand-over: its Gauss-Seidel sweeps
 * (4 a substep) do not converge on a force the constraints must balance
 * (on a node under a tool, the push of the springs the tool holds: up to
 * 2 mm of error in one step, measured). XPBD therefore takes the force
 * state over as rest lengths, the constraints' own currency: every spring of
 * the refined network keeps the tension it had (a spring that was there) or
 * its parent edge's (a half of a split edge), any other new spring starts at
 * its current length; only what that leaves (gravity on the moved masses, a
 * removed diagonal's pull) goes to the node term f_res. The mass-spring step
 * sums forces exactly, so it takes the node force f alone (and marks the
 * nodes on a tool before its first substep, as the unrefined tissue's
 * contact marks were, ts_massspring.c).
 *
 * Limit (measured on the default patch, tests/unit/test_refine.c): with a
 * tool pressed in, XPBD's residual f_res is still large where the refined
 * network drops an old diagonal under the tool (up to 3e4 m/s^2 on a node)
 * and its sweeps do not converge on it, so with an active tool XPBD takes
 * the rest lengths alone (f_res is zeroed): its first step after the
 * refinement then differs by 0.11-0.13 mm from the unrefined tissue's,
 * against 0.17-0.23 mm without a hand-over; the bound (10 um) is met
 * by the mass-spring step in both cases and by XPBD without a tool.
 * All the terms are weighted by w(t) = 1 - smoothstep((t - t0) / T), t0 the
 * refinement's time and T the blend time (0.2 s by default): the refined
 * network then takes over at a rate of at most 1.5 / T per second (the
 * smoothstep's largest slope), so each 1 ms step moves the tissue by at
 * most 0.75 % of the way to the finer equilibrium (2 um of a 0.3 mm
 * difference), well below the quantum; the tool pushes the new nodes out
 * over the same time. At t0 + T the hand-over ends (the arrays are freed)
 * and the tissue is the refined network alone.
 *
 * A second refinement during a blend takes the current weighted hand-over
 * as part of the unrefined state (its a_i and depths include it) and starts
 * a new blend from there, so it stays continuous too.
 *
 * The dampers are left out of F (the velocity-dependent part changes with
 * the state within the step; at the carried-over state it is the same
 * relative motion in both networks up to the new springs', which damp). The
 * contact allowance is applied in the solvers' sphere/capsule contact
 * (ts_ms_contact.c, ts_xpbd.c); the tree-based tools of ts_xpbd_step_posed
 * do not read it.
 */
#ifndef TS_HANDOVER_H
#define TS_HANDOVER_H

#include <stdint.h>

#include "ts_tissue.h"
#include "ts_tool.h"

#define TS_HANDOVER_DEFAULT_TIME 0.2 /* s: default blend time */

typedef struct ts_handover {
  double (*f)[3];  /* per node: the extra force at full weight, N (the
                      mass-spring step's term, against the springs' own
                      rest lengths) */
  double *rest;    /* per spring of the tissue: the hand-over rest length,
                      m (XPBD's term: the constraints' rest lengths are
                      blended from these to the springs' own) */
  double (*f_res)[3]; /* per node: what the rest lengths leave, N (XPBD's
                      node term) */
  double *depth;   /* per node: the contact allowance at full weight, m */
  double start;    /* simulated time of the refinement, s */
  double duration; /* blend time T, s (> 0) */
} ts_handover;

/* The weight w of hand-over h at simulated time `at` (s): 1 before the
 * start, 1 - smoothstep((at - start) / duration) during the blend, 0 after
 * it or for h NULL. */
double ts_handover_weight(const ts_handover *h, double at);

/* Frees h; NULL is ignored. */
void ts_handover_free(ts_handover *h);

/* Ends t's hand-over (frees it, t->hand = NULL) when its weight at `at` is
 * 0. The steps call this after each step. */
void ts_handover_expire(ts_tissue *t, double at);

/* The hand-over from tissue `old` to its refinement `nt`: nt's first
 * old->n_nodes nodes are old's (same positions), node i >= old->n_nodes is
 * the midpoint of parents[i - old->n_nodes] (nt indices below i). tools
 * (n_tools, NULL for none; inactive ones ignored) give the contact
 * allowances. `duration` is the blend time (s, > 0 and finite). Reads
 * old->hand (weighted at old->time) as part of the unrefined state; sets
 * out's start to nt->time. Returns 0 and *out, TS_EINVAL or TS_ENOMEM. */
int ts_handover_create(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                       const ts_tool *tools, int n_tools, double duration, ts_handover **out);

#endif
