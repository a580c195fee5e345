/*
 * ts_massspring.h: the mass-spring step of the first method.
 *
 * Forces: every spring is a Kelvin element (the exponential, anisotropic
 * spring of ts_material.h with a damper in parallel), plus gravity, the
 * external forces t->f_ext and a mass-proportional drag (t->drag).
 *
 * Integration, per substep of length h, per free node:
 *   - first substep after a start or reset (or a change of h): second-order
 *     Taylor, x1 = x0 + h v0 + a0 h^2/2, v1 = v0 + a0 h;
 *   - later: the force F_k is compared with the node's force of the previous
 *     substep; where |F_k - F_(k-1)| > mu (t->beeman_threshold), Beeman:
 *     x_(k+1) = x_k + h v_k + h^2 (4 a_k - a_(k-1)) / 6 and
 *     v_(k+1) = v_k + h (2 a_(k+1) + 5 a_k - a_(k-1)) / 6; otherwise Verlet:
 *     x_(k+1) = 2 x_k - x_(k-1) + a_k h^2, v_(k+1) = (x_(k+1) - x_(k-1)) / 2h;
 *   - then strain limiting: every spring outside its strain range is brought
 *     back to it (t->strain_iterations Gauss-Seidel passes), and the
 *     velocities follow the corrected positions;
 *   - then tool contact: nodes inside a tool are moved to its surface.
 * Tissues built from extrusions, and their refinements, use selective mass
 * scaling across their thin layers (t->mass_scaling, through the tissue's
 * column map): a mass matrix that slows only the
 * through-thickness modes, so that the substep is set by the sheets'
 * resolution. A refined tissue adds inertia to the few nodes the
 * refinement made faster than the unrefined tissue (t->local_mass_scaling,
 * ts_ms_local.c), so that its substep count stays about the unrefined one;
 * gravity, drag and external forces keep the physical masses. The files of the step give the details (ts_ms_internal.h
 * lists them: Beeman's a_(k+1) is known only after the next force
 * evaluation, and switching, in ts_ms_integrate.c; the substep count and
 * stability in ts_ms_bounds.c; mass scaling in ts_ms_sms.c).
 *
 * Tools (spheres, capsules, triangle meshes by their signed distance;
 * inelastic, with Coulomb friction by the tool's mu_static, mu_kinetic):
 * nodes that end a substep inside a tool are projected to its surface and
 * take no velocity into it; while they stay on it, the part of their force
 * pushing into the tool is cancelled, and friction holds them to the tool's
 * moving surface up to mu_s times that normal reaction or lets them slide
 * against mu_k times it (ts_ms_contact.c): these reactions, averaged over
 * the substeps, are the force on the tool. A sphere or capsule that moved
 * more than half its radius since the last step is swept: its core moves
 * along its path over the substeps, so that a fast thin tool pushes the
 * nodes ahead of it instead of jumping past them; slower ones stand at
 * their pose through the step. A tool thinner than the node spacing (a
 * thin mesh part, a sphere or capsule of 0.5 or 1 mm on 1.6 mm nodes) also
 * pushes the surface triangles it pierces between their nodes (the
 * triangle pass; ts_tool.thin_off turns it off for a sphere or capsule).
 * The tools' velocities for
 * friction come from their poses at consecutive steps (a tool's pose is
 * remembered by its index in `tools`; an inactive tool forgets it; a
 * tissue that replaces another takes them: ts_massspring_carry_tools).
 *
 * Grasper jaws (TS_TOOL_JAWS; ts_ms_grasp.c) push the tissue as the other
 * tools (by the nearer jaw box's signed distance), and hold the nodes that
 * ts_grasp.h's rule picks as they close (within reach of a jaw), placing
 * them in the jaws' frame after every substep, moving with the tool, until
 * they open; the force those nodes hold back (springs, dampers, gravity,
 * drag, external) is part of the tool's force. Their grasp is
 * kept by the tool's index in `tools` (made at the first step that sees
 * the jaws there, so that step allocates), let go when the tool is
 * inactive, not jaws, or the tissue restarts (a reset), and lost with a
 * replaced tissue (a live refinement's install), as XPBD's.
 */
#ifndef TS_MASSSPRING_H
#define TS_MASSSPRING_H

#include "ts_diverged.h"
#include "ts_tissue.h"
#include "ts_tool.h"

/* Substeps are at most this fraction of the stability bound. */
#define TS_MASSSPRING_SAFETY 0.8
/* The largest inertia scale t->max_substeps may bring (past it the step
 * takes more substeps than the cap instead). */
#define TS_MASSSPRING_MAX_INERTIA 1e6

typedef struct ts_step_stats {
  uint32_t substeps;       /* substeps taken this step */
  uint32_t contacts;       /* nodes in contact with any tool (most in a substep) */
  double max_speed;        /* m/s */
  double kinetic_energy;   /* J */
  int diverged;            /* NaN/Inf, runaway speed or sustained energy growth
                              seen: the state was reset to rest */
  double substep;          /* h, s */
  double verlet_fraction;  /* of the free-node updates of this step: Verlet, */
  double beeman_fraction;  /* Beeman, */
  double taylor_fraction;  /* Taylor (the first substep after a (re)start) */
  double max_strain;       /* largest spring strain over the step's force
                              evaluations, */
  double min_strain;       /* smallest at the last one */
  double stiffening;       /* the factor on the small-strain stiffness that the
                              substep count allowed for (>= 1) */
  uint32_t strain_limited; /* spring corrections made by strain limiting */
  uint32_t guard_pushes;   /* the inversion guard's forces (ts_ms_guard.c):
                              corner tetrahedra of the layers' prisms pushed
                              back from inside out, summed over the substeps */
  double inertia_scale;    /* factor on the inertia this step (1: physical;
                              > 1 only with t->max_substeps, ts_ms_bounds.c) */
  double added_mass;       /* kg of inertia the local mass scaling of a
                              refined region adds (ts_ms_local.c; 0: none) */
  /* why it diverged (diverged set; ts_ms_diverge.c): */
  int diverged_why;        /* TS_DIVERGED_* */
  uint32_t diverged_node;  /* the node: non-finite, or the fastest */
  double diverged_value;   /* its speed, m/s (TS_DIVERGED_SPEED); the kinetic
                              energy at the end, J (TS_DIVERGED_GROWTH) */
  double diverged_from;    /* TS_DIVERGED_GROWTH: the kinetic energy before the
                              growth began, J */
  uint32_t diverged_steps; /* TS_DIVERGED_GROWTH: the steps it grew */
} ts_step_stats;

/* The divergence tests of a step: TS_DIVERGED_* (ts_diverged.h). */

/* What a diverged step's stats say, in words, into buf (cap bytes, always
 * terminated when cap > 0): which test, by how much, over what, and the
 * node. Returns the length snprintf gives. */
int ts_massspring_diverged_text(const ts_step_stats *st, char *buf, size_t cap);

/* The local mass scaling of a refined region (ts_ms_local.c), as prepared. */
typedef struct ts_local_mass {
  uint32_t nodes;     /* nodes given added inertia */
  double added;       /* kg, over them */
  double region_mass; /* kg: their physical mass */
  double tissue_mass; /* kg: the free nodes' physical mass */
  double target_dt;   /* the unrefined tissue's stable substep (drag
                         included) the scaling brought the tissue back to,
                         s; 0 when nothing was added */
} ts_local_mass;

/* Validates the springs and builds the step's private data (a compact copy of
 * the springs sorted for the force loop, the stability bounds). The builders
 * call it; the first step calls it when it was not; call it again after
 * changing springs or masses. Returns 0, TS_EINVAL (a spring end out of range
 * or equal ends, a negative or non-finite constant, an exponent over 100, a
 * strain range not containing 0 or reaching -1) or TS_ENOMEM. */
int ts_massspring_prepare(ts_tissue *t);

/* Largest stable substep for the tissue at rest (s), with its current drag:
 * for the central-difference (Verlet) and Beeman updates of x'' = -w^2 x -
 * g x', h < 4 / (g + sqrt(g^2 + 4 w^2)), and h < 0.5 / g for the velocities
 * the dampers see, with w^2 and g bounded over the tissue (see
 * ts_ms_bounds.c).
 * Uses the prepared bounds when there are some, else computes them now
 * (allocating scratch). Returns 0 for a malformed tissue or when out of
 * memory. */
double ts_massspring_stable_dt(const ts_tissue *t);

/* Energies of the current state, J: kinetic (1/2 m v^2 over free nodes) and
 * potential (the springs' stored energy, the integral of their tension over
 * their length, plus gravity's and the external forces' potential measured
 * from the rest positions). Either pointer may be NULL. Returns 0 or
 * TS_EINVAL (not prepared). */
int ts_massspring_energy(const ts_tissue *t, double *kinetic, double *potential);

/* The local mass scaling of prepared tissue t (ts_ms_local.c) into *out,
 * and per node the added inertia (kg) into per_node (n_nodes doubles; NULL:
 * not wanted). Returns 0 or TS_EINVAL (NULL out, t not prepared). */
int ts_massspring_local_mass(const ts_tissue *t, ts_local_mass *out, double *per_node);

/* Gives tissue `to` the tools' last poses that tissue `from`'s step
 * remembers (from NULL or never prepared: none, as a new tissue has), so
 * that to's next step sees each tool's motion since from's last step, as
 * from's next step would: the tools' velocities for friction and a thin
 * mesh tool's sweep from its last pose (ts_ms_contact.c). For a tissue
 * that replaces another between two steps (a live refinement's install,
 * server/refine.c; the tools keep their indices): a new tissue's step
 * knows no last pose and takes its first step's tools as standing, so a
 * moving tool's friction then holds the tissue to a standing surface.
 * Prepares `to` when it is not (the poses live in the step's data).
 * Returns 0, TS_EINVAL (to NULL) or an error of ts_massspring_prepare. */
int ts_massspring_carry_tools(ts_tissue *to, const ts_tissue *from);

/* Advances the tissue by dt seconds with the given tools, in substeps of
 * h = dt / n, n the smallest count within TS_MASSSPRING_SAFETY of the
 * stability bound at the strains of the last step (see ts_ms_bounds.c).
 * With t->max_substeps > 0, n is at most that and the inertia is scaled
 * uniformly so that the substep stays within the bound (stats'
 * inertia_scale; more substeps only past a scale of TS_MASSSPRING_MAX_INERTIA).
 * Returns 0, or TS_EDIVERGED when the state became non-finite, a node ran
 * away (faster than 100 m/s) or the kinetic energy kept growing
 * geometrically (by over 20 % a step for 20 steps): the state is then reset
 * to rest so that no NaN ever leaves the core. Bad arguments change nothing
 * and give TS_EINVAL (dt <= 0 or over 1 s, tool radius <= 0, a friction
 * pair that ts_tool_friction_valid refuses, malformed
 * springs, a negative threshold, ...), TS_ENAN (a NaN or infinite dt, tool
 * coordinate or external force) or TS_ERANGE (dt needing over a million
 * substeps); TS_ESHUTDOWN when t->stop asked it to stop (ts_tissue.stop),
 * the tissue then mid-step. Tools: up to 64; inactive ones are ignored, the force and
 * contacts of every one are overwritten (jaws: contacts = nodes held).
 * After the step t->f holds the spring and damper forces of the last
 * substep. No allocation, except the first step of a tissue that was never
 * prepared and the first step that sees jaws at an index (TS_ENOMEM). */
int ts_massspring_step(ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                       ts_step_stats *stats);

/* The nodes that the jaws of the caller's tool index `tool` hold after t's
 * last step (ts_ms_grasp.c), in *node, and their coordinates in the tool's
 * frame (m; a held node is at R(quat) local + pos) in *local; both may be
 * NULL. Returns their count, 0 for a tool that holds nothing, is no jaws
 * or is out of range. */
uint32_t ts_massspring_grasped(const ts_tissue *t, int tool, const uint32_t **node,
                               const double (**local)[3]);

#endif
