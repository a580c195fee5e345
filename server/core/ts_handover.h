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
 * Under a tool XPBD's force state is not the law's. With 4 Gauss-Seidel
 * sweeps a substep and the contacts projected last in each sweep, the
 * quasi-static state of XPBD under a pressed tool is a fixed point of its
 * unconverged iteration, not an equilibrium of the spring law: on the
 * default patch a free node 0.75 mm from the tool has a law force of
 * 8e3 m/s^2 times its mass while the unrefined tissue moves 0.3 um per
 * step. So rest lengths chosen to reproduce the law's forces (force
 * matching: the least change of the tensions that gives every node around
 * the refinement its unrefined force, solved by conjugate gradients) made
 * the first step worse, not better (0.76 mm with Loop, 0.13 mm with LEB,
 * measured), and so does a node force f_res (up to 3e4 m/s^2 where the
 * refined network drops an old diagonal under the tool; 2 mm in the first
 * step). With an active tool XPBD therefore takes the rest lengths alone
 * (f_res zeroed; 0.11-0.13 mm off in the first step), and
 * ts_handover_fit_xpbd fits them to the solver itself: a trial step of
 * the unrefined tissue gives each node's wanted displacement (a new node:
 * its parents' mean), a trial step of the refined one what it does, and
 * the difference e is taken out by moving the refined network's
 * equilibrium by e: each spring's rest length becomes the one that keeps
 * its tension when it is stretched by e's elongation of it (exact for a
 * network that settles within the step, which these light, stiff nodes
 * do). A correction that makes the trial worse is halved from the best
 * rest lengths so far. Measured on the default patch (test_refine.c), the
 * first step after the refinement then differs from the unrefined tissue's
 * by 0.7-1.4 um (2-2.3 um after a second refinement during the blend), and
 * no step of the blend by more than 5.5 um beyond the unrefined tissue's
 * own motion: within the bound (10 um) in all cases.
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
 * as part of the unrefined state (its a_i and depths include it, each
 * solver's as that solver sees it: the mass-spring step's node force, or
 * XPBD's blended rest lengths and f_res) and starts a new blend from
 * there, so it stays continuous too. A session stepped by XPBD calls
 * ts_handover_fit_xpbd after the refinement (server/refine.c).
 *
 * The dampers are left out of F (the velocity-dependent part changes with
 * the state within the step; at the carried-over state it is the same
 * relative motion in both networks up to the new springs', which damp;
 * measured on the default patch refined 15 ms after its release, while it
 * falls by 66 um a step: the first step differs from the unrefined
 * tissue's by 1.1-1.2 um with the mass-spring step, 0.5 um with XPBD, well
 * within the bound, so they stay out). The contact allowance is applied in the solvers' sphere/capsule contact
 * (ts_ms_contact.c, ts_xpbd.c) and in the tree-based contact of
 * ts_xpbd_step_posed (ts_contact.h, allow), which is how a daemon's XPBD
 * session meets its tools: without it, the new nodes inside the sphere
 * were thrown out in the first step, 0.12 mm on the wire
 * (tests/integration/itest_refine.c; one 10 um quantum with it). The
 * depths come from the sphere and capsule tools only (mesh tools and jaws
 * get none), and the fit's trial steps take those tools only.
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

struct ts_xpbd_def;

/* XPBD's fit of nt's hand-over rest lengths (ts_handover.h): nt is the
 * refinement of `old` with the hand-over ts_handover_create made (same
 * parents and tools). Trial steps of length dt (s) of copies of old and of
 * nt, each with an XPBD solver built from def and the tools at their
 * current poses (n_tools, NULL for none; inactive ones ignored; at most
 * 64), at most 12 of nt: nt's hand-over rest lengths are corrected until
 * its step moves every node as old's does (a new node: as its
 * interpolated position) within 0.5 um, and are left at the best found.
 * Neither tissue's state changes. *err (may be NULL) gets the largest
 * difference of the best trial, m. Returns 0; TS_EINVAL (NULL, nt without
 * a hand-over, fewer nodes than old, parents missing or not below their
 * node, dt not in (0, 1] s, n_tools < 0); TS_ENOMEM; or an error of
 * ts_xpbd_build/ts_xpbd_step for old's or nt's first trial (the rest
 * lengths are then as they were). */
int ts_handover_fit_xpbd(ts_tissue *nt, const ts_tissue *old, const uint32_t (*parents)[2],
                         const struct ts_xpbd_def *def, const ts_tool *tools, int n_tools, double dt,
                         double *err);

#endif
