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
 * sums forces exactly; it took the node force f alone (TS_HANDOVER_MS_FORCE),
 * and now takes the same rest lengths as XPBD by default
 * (TS_HANDOVER_MS_REST: see "In rest lengths for the mass-spring step"
 * below), f then being what they leave (as f_res, but kept with a tool on
 * the tissue). Either way it marks the
 * nodes on a tool before its first substep, as the unrefined tissue's
 * contact marks were, ts_massspring.c. On a new node on a tool (shrunk
 * by its allowance), both its parents on it too, whose springs push it
 * into the tool, the part of f
 * that would stand in for the tool's reaction (up to that push) is left
 * to the reaction: the first step is the same (the node's normal
 * acceleration is about zero either way), but a node force is a
 * dead load, and right after a fast press the springs under the tool push
 * hard and relax within a few steps while the load stays (the liver
 * pressed 2 mm at 67 um a step and refined at once: 0.016 N, 6,200 times
 * a new node's weight, drove it 0.48 mm into the tissue in the third
 * step, and the refined liver ran away at up to 1.6 mm a step;
 * test_refine_liver).
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
 * rest lengths so far. Measured on the default patch (test_refine_ms.c, test_refine_xpbd.c), the
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
 * In rest lengths for the mass-spring step (TS_HANDOVER_MS_REST, the
 * default; ts_ms_handover.c says how). The node force f is a dead load:
 * right after a fast press (the liver, 2 mm at 67 um a step, refined at
 * once) new nodes just off the sphere's rim, one parent held by the tool
 * and one not, carried up to 3,700 times their weight with nothing to take
 * it over and snapped during the blend, up to 0.26 mm a step beyond the
 * unrefined twin; and with Loop's smoothing rules on the rest shape the
 * node forces balance the finer network only at the carried-over state
 * (0.1-0.41 mm off the twin in the first step). With the tensions in the
 * springs' rest lengths, blended to their own over the blend time as
 * XPBD's are, and f what they leave, each spring's force follows its
 * length. Measured against the unrefined twin (test_refine_ms.c, test_refine_xpbd.c: blend 0.1 s;
 * test_refine_liver.c; node forces alone in brackets):
 *   - the default patch, midpoints: first step 0.002 um sagging, 0.34-0.35
 *     um with the sphere pressed 3 mm in (0.01-0.5 um); no step of the
 *     blend more than 0.6-0.7 um (sagging) and 5.0-5.2 um (pressed) beyond
 *     the twin's largest move; a second refinement 40 ms into the blend
 *     2.8-3.4 um off in its first step (8.6 um), no later step more than
 *     4.1 um beyond;
 *   - the liver pressed 2 mm in 40 steps and held 20 steps: first step
 *     8.1 um (6.6 um); refined at once when a press of 2 mm in 30 steps
 *     stops: first step 15.8 um (22 um; the twin moved 80 um), and no step
 *     of a 40 ms blend more than 6.1 um beyond the twin's largest move
 *     (0.16 mm; 0.26 mm over the 0.2 s blend), of the default 0.2 s blend
 *     up to 14 um (as the refined region settles into the sphere, 40-60
 *     steps in);
 *   - Loop's smoothing rules (smooth_rest, the patch): first step 0.04 um
 *     sagging, 0.37 um pressed (0.10-0.41 mm): within the bound; but steps
 *     of the 0.1 s blend over it (up to 12.6 um sagging, 11.6 um pressed
 *     beyond the twin's: the smoothed rest shape is 0.44 mm away, and at the
 *     smoothstep's steepest the blend moves the tissue 1.5 / T of that a
 *     second), and a second refinement under the sphere 40 ms into the
 *     blend 22 um off in its first step (the twin 8.9 um), as XPBD's 21 um;
 *     a live Loop's smoothing is therefore limited and blended as long as
 *     its rest change needs (ts_refine_smooth.h), within the bound then
 *     (ts_refine.h has the figures).
 * The strain limits widen to both rest lengths' ranges during the blend
 * (ts_ms_handover.c: with the blended range alone a compressed spring
 * snapped, 0.4 mm off in a second refinement's first step).
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
 * (ts_ms_contact.c, ts_xpbd_contact.c), in the mass-spring step's mesh-tool contact
 * (ts_ms_contact.c) and in the tree-based contact of ts_xpbd_step_posed
 * (ts_contact.h, allow), which is how a daemon's XPBD session meets all its
 * tools: without it, the new nodes inside the sphere were thrown out in
 * the first step, 0.12 mm on the wire (tests/integration/itest_refine.c;
 * one 10 um quantum with it). The depths come from every tool: spheres and
 * capsules by their core segment, meshes and jaws by the signed distance
 * of their tree placed at the tool's pose (ts_contact_tool_sdf). Measured
 * with the dental instrument pressed into the default patch
 * (test_refine_ms.c, test_refine_xpbd.c): Loop's new nodes up to 0.19-0.26 mm inside it, the
 * first step within 5.5 um (mass-spring) and 0.9 um (XPBD) of the
 * unrefined twin's, against 0.2-0.26 mm without the hand-over.
 *
 * The fit's cost. Each trial is an XPBD step, so on a large tissue the fit
 * costs up to 13 of them; the step is local, so the trials step only the
 * refined region: the new nodes and FIT_RING (6) rings of springs around
 * them (of the old and the refined network both), the next ring held where
 * it is, in XPBD's own sweep order of the whole tissue (under a tool XPBD's
 * unconverged sweeps end where their order takes them: the region's own
 * colouring moved the centre by 4-6 um against the whole tissue's step,
 * the whole tissue's order by 0.2-0.4 um), with the whole tissue's substep
 * count and one solver for all trials. Measured (tests/bench/run --quick
 * mesh, fit_region_s; one CPU of a loaded machine, a sphere pressed 2 mm
 * in, Loop on the 5 mm region): on the liver 0.25 s (2,132 of 9,336 nodes
 * stepped) against 1.0 s for the whole tissue's trials with the same
 * shared solver and 1.3 s with a solver built per trial (as before), on
 * patch-L 1.3 s against 16 s. The refinement itself (ts_refine_run: the
 * whole tissue rebuilt, 0.32 s on the liver) costs as much again, so a
 * live refinement of the liver still holds the physics thread for about
 * 0.5 s, some 30 frame intervals (bench_mesh refine_xpbd_s), when done
 * between two steps. The daemon therefore refines a snapshot on another
 * thread (server/refine.c) and installs the result later at the state of
 * then: ts_handover_renew makes the hand-over again there (on the refined
 * region only, from the map ts_handover_create kept: see "Local" at
 * ts_handover_create; the mass-spring step's hand-over depends on nothing
 * else, so the install equals a refinement made there), and XPBD's fit,
 * whose corrections do not carry far to a tissue that has moved under a
 * tool, is chased to the moving state on the refinement thread (see
 * TS_HANDOVER_CARRY_DRIFT), so that the install carries its corrections
 * without a trial step. Measured (tests/bench/run --quick mesh:liver, CPU
 * time of the stepping thread, a loaded machine): the install 2-3 ms (20
 * ms when the hand-over was made over the whole tissue; 0.20-0.27 s when
 * XPBD's fit ran again there, before the chase), the chase's 4 rounds 1-2
 * ms of snapshot each on the physics thread; the step interval with the
 * install within a few ms of the refined tissue's next ones (which step
 * slower than the unrefined tissue: 9,336 nodes and the blend).
 */
#ifndef TS_HANDOVER_H
#define TS_HANDOVER_H

#include <stdint.h>

#include "ts_tissue.h"
#include "ts_tool.h"

#define TS_HANDOVER_DEFAULT_TIME 0.2 /* s: default blend time */

/* How the mass-spring step takes the hand-over (ts_handover_create's
 * ms_mode; XPBD always takes it in rest lengths, above). See
 * ts_ms_handover.c for the rest-length form and its figures. */
enum {
  TS_HANDOVER_MS_DEFAULT = 0, /* the default: TS_HANDOVER_MS_REST */
  TS_HANDOVER_MS_REST = 1,    /* the tensions in the springs' rest lengths, blended
                                 to their own; node forces for what they leave */
  TS_HANDOVER_MS_FORCE = 2    /* node forces against the springs' own rest lengths */
};

typedef struct ts_handover_map ts_handover_map; /* private to the hand-over's files (ts_handover_internal.h) */

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
  int ms_rest;     /* 1: the mass-spring step takes the hand-over in rest
                      lengths (TS_HANDOVER_MS_REST): its springs' rest
                      lengths are blended from `rest` to their own, and f is
                      what those rest lengths leave; 0: f against the
                      springs' own rest lengths (TS_HANDOVER_MS_FORCE) */
  int plain;       /* 1: every entry of an untouched node or spring (its
                      map's) holds what it is without an earlier hand-over
                      (zero forces and allowance, the spring's own rest
                      length), and nothing has changed it since (a fit, a
                      correction): a renewal on the same map then writes
                      the touched ones only (ts_handover_renew) */
  double start;    /* simulated time of the refinement, s */
  double duration; /* blend time T, s (> 0) */
  ts_handover_map *map; /* what ts_handover_create found of the two
                      networks' topologies (which springs are unchanged,
                      which nodes the refinement touched), kept for
                      ts_handover_renew; NULL in copies. Owned. */
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
 * allowances. `duration` is the blend time (s, > 0 and finite), ms_mode
 * the mass-spring step's form (TS_HANDOVER_MS_*; TS_EINVAL otherwise). Reads
 * old->hand (weighted at old->time) as part of the unrefined state; sets
 * out's start to nt->time. Returns 0 and *out, TS_EINVAL or TS_ENOMEM.
 *
 * Local. A refinement changes the network only around its region: outside
 * it every node keeps its springs (same ends, constants and rest lengths)
 * and its mass (ts_refine.h, "masses": the refinement keeps every mass
 * outside its region to the bit; a relative change of 1e-12 at most is
 * taken as none). For such a node the terms above reduce, in
 * exact arithmetic, to the earlier hand-over's at its weight (f = w f_old,
 * f_res = w f_res_old, depth = w depth_old; zeros without one), and an
 * unchanged spring keeps its blended rest length. So the forces, tool
 * distances and rest-length solves run only on the touched nodes (the new
 * ones, their parents, the ends of every added, removed or changed spring,
 * the nodes whose mass changed) and their springs, in the same order as a
 * pass over the whole tissue would take them (the same numbers there, bit
 * for bit); the rest is copied. The matching of the networks' springs and
 * the touched set depend on the topologies alone and are kept in out->map
 * for ts_handover_renew. Measured on the liver (tests/bench/run --quick
 * mesh:liver, live_refine_install_s; CPU time, a loaded machine): 1.5-3 ms
 * against 20-26 ms for the whole-tissue passes. */
int ts_handover_create(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                       const ts_tool *tools, int n_tools, double duration, int ms_mode, ts_handover **out);

struct ts_xpbd_def;

/* ts_handover_fit_xpbd's flags */
enum {
  TS_FIT_POSED = 1, /* the tools on the tree-based contact path */
  TS_FIT_WHOLE = 2, /* trial steps of the whole tissues, not of the refined region */
  TS_FIT_QUICK = 4  /* a fit again from corrections near their answer (the
                       chase and the install, below): at most 3 trials, on
                       the new nodes and 2 rings of springs around them */
};

/* What a fit did. */
typedef struct ts_handover_fit_stats {
  double err;      /* m: the largest difference of the best trial (NaN: none ran) */
  uint32_t trials; /* trial steps of the refined tissue */
  uint32_t nodes;  /* nodes the trials stepped (the refined region and its
                      rings; all of nt's when the trials took the whole tissue) */
} ts_handover_fit_stats;

/* XPBD's fit of nt's hand-over rest lengths (ts_handover.h): nt is the
 * refinement of `old` with the hand-over ts_handover_create made (same
 * parents and tools). Trial steps of length dt (s) of the refined region
 * of old and of nt (its new nodes and FIT_RING rings of springs around
 * them, the next ring held where it is; the whole tissues when that region
 * would be over three quarters of nt, def asks for given compliances or, on a
 * tissue with the sheet layout, bending or volume constraints, or flags
 * has TS_FIT_WHOLE), each with
 * an XPBD solver built from def (the whole tissue's substep count) and the
 * tools at the given poses, standing still (the daemon gives each tool its
 * pose at the end of the next step, server/refine.c's next_poses: a tool
 * moving 30 um a step then leaves the first step after the install 4.3 um
 * off the twin's against 13.9 um at its pose of then, test_refine_async's async
 * case) (n_tools, NULL for none;
 * inactive ones ignored; at most 64): flags with TS_FIT_POSED takes every
 * tool on the tree-based contact path as an XPBD session with tool contact
 * does (ts_xpbd_step_posed: spheres, capsules, meshes and jaws, with their
 * friction and contact allowances; no grasp), without it the solver's
 * node-wise contact with the spheres and capsules only (ts_xpbd_step). At most 12
 * trials of nt (3 on the new nodes and 2 rings with TS_FIT_QUICK): the rest lengths of the springs the trials step are
 * corrected until nt's step moves every stepped node as old's does (a new
 * node: as its interpolated position) within 0.5 um, and are left at the
 * best found. Neither tissue's state changes. stats (may be NULL) gets
 * what the fit did. Returns 0; TS_EINVAL (NULL, nt without a hand-over,
 * fewer nodes than old, parents missing or not below their node, dt not in
 * (0, 1] s, n_tools < 0, a mesh tool without its tree); TS_ENOMEM; or an
 * error of ts_xpbd_build/ts_xpbd_step for old's or nt's first trial (the
 * rest lengths are then as they were). */
int ts_handover_fit_xpbd(ts_tissue *nt, const ts_tissue *old, const uint32_t (*parents)[2],
                         const struct ts_xpbd_def *def, const ts_tool *tools, int n_tools, int flags,
                         double dt, ts_handover_fit_stats *stats);

/* A live refinement off the physics thread (server/refine.c) refines and
 * fits on a snapshot while the session steps on; at install the hand-over
 * is made again at the current state, and the fit's corrections carried.
 *
 * ts_handover_copy: a deep copy of h (n_nodes nodes, n_springs springs) into
 * *out; h NULL gives *out NULL. Returns 0, TS_EINVAL or TS_ENOMEM.
 *
 * ts_handover_alloc: a hand-over with its arrays for n_nodes nodes and
 * n_springs springs, their contents unset (ts_handover_copy_into fills
 * them). Returns 0, TS_EINVAL or TS_ENOMEM.
 *
 * ts_handover_copy_into: h's copy into dst (made for the same counts:
 * ts_handover_alloc, or an earlier copy), its arrays reused; dst's map is
 * freed (copies keep none). Returns 0 or TS_EINVAL.
 *
 * ts_handover_renew: nt, the refinement of a snapshot of `cur` with the
 * hand-over ts_refine_run made (and ts_handover_fit_xpbd fitted) there, has
 * just been given cur's current state (ts_refine_restate: cur's nodes are
 * nt's first cur->n_nodes, node i >= cur->n_nodes the midpoint of
 * parents[i - cur->n_nodes]). Makes nt's hand-over again, in its own
 * arrays, as ts_handover_create makes it from cur's current state, the current tools
 * (n_tools, NULL for none; their allowances for where the new nodes are
 * now) and the same blend time, and adds rest_fix (per spring of nt, m;
 * NULL for none) to its rest lengths: the fit's corrections, which move
 * the refined network's equilibrium and do not depend on where the tissue
 * is (a corrected length that is not positive and finite keeps the
 * uncorrected one). nt without a hand-over is left as it is. cur must have
 * the snapshot's topology (a refinement is installed on the tissue it was
 * taken from; node and spring counts are checked): nt's hand-over map is
 * then reused, so the renewal is ts_handover_create's local part alone:
 * the touched nodes' forces and tool distances, a copy for the rest; no
 * trial steps. Returns 0, TS_EINVAL or TS_ENOMEM (nt's hand-over then
 * unchanged). */
int ts_handover_copy(const ts_handover *h, uint32_t n_nodes, uint32_t n_springs, ts_handover **out);
int ts_handover_alloc(uint32_t n_nodes, uint32_t n_springs, ts_handover **out);
int ts_handover_copy_into(const ts_handover *h, uint32_t n_nodes, uint32_t n_springs, ts_handover *dst);
int ts_handover_renew(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2], const ts_tool *tools,
                      int n_tools, const double *rest_fix);

/* XPBD's fit with its corrections kept apart, so that they can be carried
 * to a later state: nt has just been given cur's state (ts_refine_restate;
 * nt's first fit: cur is the tissue it was refined from). Makes the
 * hand-over again at cur (ts_handover_renew, no corrections), adds
 * rest_fix (per spring of nt, m: zeros for a first fit, the corrections of
 * an earlier fit otherwise, which then start the fit close to its answer),
 * fits (ts_handover_fit_xpbd, same arguments) and stores in rest_fix what
 * the fitted rest lengths differ from the unfitted ones by. Why a second
 * fit: the corrections move the refined network's equilibrium, but under a
 * pressing tool XPBD's state is set by the contacts as much as by the
 * springs, so corrections fitted with the tool 1.2 mm shallower carried to
 * the new state leave the first step 84-90 um off the twin's, against 2 um
 * for a fit there (test_refine_async.c, async case). nt's hand-over map keeps
 * what the fits of the same networks share (the sweep orders, the trials'
 * region), so a fit after the first sets up in a few ms. Returns as
 * ts_handover_fit_xpbd; TS_EINVAL without a hand-over or rest_fix. */

int ts_handover_fit_carried(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2],
                            const struct ts_xpbd_def *def, const ts_tool *tools, int n_tools, int flags,
                            double dt, double *rest_fix, ts_handover_fit_stats *stats);

/* When a live refinement of an XPBD session is installed (server/refine.c),
 * and how. The corrections of a fit carry to a later state only as far as
 * the tissue has not moved much since (ts_handover_fit_carried), and a fit
 * at the install holds the physics thread: 0.20-0.27 s on the liver (12
 * trial steps of the refined region and 6 rings, each about a third of a
 * whole step, plus 28 ms of setup; tests/bench/run --quick mesh:liver). So
 * the refinement thread chases the moving tissue instead: when its fit is
 * done and the tissue has moved since that fit's snapshot, the physics
 * thread takes a fresh snapshot (1-2 ms on the liver) and the refinement
 * thread fits again there from the corrections it has (TS_FIT_QUICK: 3
 * trials on 2 rings, the setup kept from the first fit: about one step of
 * the liver), until its corrections are near their answer and the tissue
 * close enough to the last fit's state for them to be installed as they
 * are, with no trial step on the physics thread.
 *
 * How close. Measured on the default patch (test_refine_async.c's async setting:
 * Loop under a sphere pressed in; the first step after the install against
 * an unrefined twin's, the fit at the install leaving 17.7 um with the tool
 * moving 28 um a step, 1.7 um with it held), the corrections of a full fit
 * made at a state the tissue has since left by a drift D, installed without
 * a fit, leave:
 *   - the tool held, the tissue settling: 1.7 um up to D = 15 um, 3.3 um
 *     at 28 um, 5.8 at 41, 11.5 at 67, 18 at 87, 33 at 123 (about D / 4:
 *     the fit answers XPBD's unconverged state under the tool, which
 *     changes as the motion dies out);
 *   - the tool pressing on at 28 um a step: 15.6-18 um up to D = 140 um
 *     (as good as a fit at the install), 19 at 168, 24 at 197, 37 at 283,
 *     84 at 868.
 * (These with the fits' tools at their poses of then. The daemon's fits
 * now take each tool at its pose of the next step, server/refine.c's
 * next_poses: in the same setting 12.7 um after the chase's 4 rounds, 4.3
 * um fitted at the install, against 17.6 and 13.9 um; the thresholds below
 * were not measured again.)
 * And a quick round that starts from corrections far from their answer
 * ends far from it: its trials' residual (ts_handover_fit_stats' err) is
 * 28 um after a first round from corrections 0.87 mm old, then 17, then 3
 * (patch); 23, 11-16, 5-9, 2-4 um on the liver. So corrections are
 * carried without a fit when their fit's residual is within
 * TS_HANDOVER_CARRY_ERR (a quantum) and D <= TS_HANDOVER_CARRY_DRIFT (both
 * cases above within 2 um of a fit there); otherwise the chase goes on,
 * for at most TS_HANDOVER_CHASE_ROUNDS rounds. A tool that keeps moving
 * keeps D at one round's motion (on the liver after a 2 mm press, about
 * 70 um a step): after the rounds, converged corrections no more than
 * TS_HANDOVER_CHASED_DRIFT away are carried (a steadily moving tool: as
 * good as a fit at the install, above; the liver: 10-11 um off its twin's
 * first step, against 2.5 um for the fit at the install and its 0.2 s),
 * and only a tissue still further away, or corrections that did not
 * converge, are fitted at the install (the full fit), as before. */
#define TS_HANDOVER_CARRY_DRIFT 30e-6  /* m */
#define TS_HANDOVER_CHASED_DRIFT 140e-6 /* m */
#define TS_HANDOVER_CARRY_ERR 10e-6    /* m */
#define TS_HANDOVER_CHASE_ROUNDS 4

/* ts_handover_install_plan's answers */
enum {
  TS_INSTALL_CARRY = 0, /* install with the last fit's corrections as they are */
  TS_INSTALL_CHASE = 1, /* fit again off the physics thread, at a fresh snapshot */
  TS_INSTALL_REFIT = 2  /* fit again at the install (on the physics thread) */
};

/* The largest coordinate change of cur's nodes since `fitted` (the state a
 * fit was made at; the first min(n_nodes) nodes of each), m; NaN for NULL. */
double ts_handover_drift(const ts_tissue *cur, const ts_tissue *fitted);

/* What to do with a fitted refinement when the tissue has drifted `drift`
 * (m, ts_handover_drift) from the state of its last fit, which left
 * `fit_err` (m, ts_handover_fit_stats' err; NaN when it did not run), after
 * `rounds` chase rounds (see above): TS_INSTALL_CARRY, _CHASE or _REFIT. A
 * drift that is not finite (no fitted state) asks for a fit at the
 * install. */
int ts_handover_install_plan(double drift, double fit_err, int rounds);

#endif
