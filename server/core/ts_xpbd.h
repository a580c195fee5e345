/*
 * ts_xpbd.h: the position-based solver (XPBD) over a ts_tissue, selectable
 * per session as the alternative to the mass-spring step (ts_massspring.h).
 *
 * Method: extended position-based dynamics, M. Macklin, M. Mueller,
 * N. Chentanez, "XPBD: Position-Based Simulation of Compliant Constrained
 * Dynamics", Motion in Games 2016, with the substepping of M. Macklin et al.,
 * "Small Steps in Physics Simulation", SCA 2019. Each substep of length h:
 * gravity updates the velocities and the positions are predicted; Gauss-Seidel
 * sweeps over the constraints correct the predictions, each constraint
 * carrying its Lagrange multiplier lambda and compliance alpha (alpha~ =
 * alpha / h^2); velocities follow from the corrected positions; a
 * mass-proportional damping is applied. Anchored nodes have inv_mass 0.
 *
 * Constraints (see ts_xpbd.c for the formulas and the mapping from E):
 *   distance  one per tissue spring: the edges of every sheet and the links
 *             between corresponding nodes of adjacent sheets (the layer
 *             coupling), plus the side diagonals the builder adds;
 *             compliance alpha = L / (E A) = 1 / k, the inverse of the
 *             spring's link-element constant k = E A / L (A = V / L from the
 *             volume V of material the builder attributed to the spring,
 *             ts_tissue_build.c), made strain-dependent to follow the
 *             exponential law of ts_material.h;
 *   bending   (optional) the dihedral angle at every interior edge of every
 *             sheet, with the discrete-shells stiffness of the sheet's share
 *             of the thickness;
 *   volume    (optional) the volume of every prism (sheet triangle swept to
 *             the next sheet), with compliance V0 / K, K the bulk modulus
 *             from E and Poisson's ratio;
 *   contact   the nodes against the sphere/capsule tools (ts_tool.h), as
 *             rigid inequality constraints; the reaction on a tool is
 *             F = -sum(lambda * grad C) / h^2. Tools given as placed OBB
 *             trees (ts_xpbd_step_posed) use the tree-based response
 *             instead: ts_contact.h (candidates from the tissue's AABB
 *             tree, a swept first projection against tunnelling, Coulomb
 *             friction) and ts_grasp.h (vertices held by closed jaws), both
 *             as rigid position constraints in every sweep.
 * Since every compliance is a material property, the converged response does
 * not depend on the iteration count, the substep count or the time step,
 * and it is the mass-spring step's static equilibrium (the same springs).
 * Unconverged, XPBD is softer than the material: stiff constraints need
 * small substeps (h^2 k / m of order 1 or less) to converge in a few sweeps.
 *
 * Outputs for haptics, after every step and averaged over its substeps: the
 * tension of every distance constraint, the constraint force on every node
 * (on an anchored node, what the anchor holds), the force on every tool and
 * the per-contact forces of the last substep.
 */
#ifndef TS_XPBD_H
#define TS_XPBD_H

#include <stddef.h>
#include <stdint.h>

#include "ts_aabb_tree.h"
#include "ts_contact.h"
#include "ts_diverged.h"
#include "ts_grasp.h"
#include "ts_obb_tree.h"
#include "ts_self_contact.h"
#include "ts_tissue.h"
#include "ts_tool.h"

typedef struct ts_xpbd ts_xpbd;

typedef struct ts_xpbd_def {
  uint32_t iterations;      /* Gauss-Seidel sweeps per substep, 1..1000 */
  uint32_t substeps;        /* substeps per step, 1..10000; 0 = automatic:
                               h omega <= 0.8, omega the mean over the
                               distance constraints of sqrt(k (w_a + w_b)),
                               so that the sweeps converge (ts_xpbd.c) */
  double damping;           /* mass-proportional damping rate, 1/s (0..1e6) */
  double stiffness_damping; /* beta, s (0..1000): a damper c = beta * k in
                               parallel with every compliant distance,
                               bending and volume constraint (XPBD's eq. 26) */
  int spring_dampers;       /* nonzero: also the tissue springs' own Kelvin
                               dampers (ts_spring.c) beside their constraints */
  int nonlinear;            /* nonzero: follow the springs' exponential law
                               (linearised once per substep); zero: the
                               small-strain compliance 1 / (k1 + k2) */
  int bending;              /* nonzero: add dihedral bending constraints */
  int volume;               /* nonzero: add prism volume constraints */
  double poisson;           /* Poisson's ratio nu for the bending and volume
                               stiffness, 0 <= nu < 0.5 */
  const double *compliance; /* optional: n_springs compliances (m/N, >= 0,
                               0 = rigid), one per tissue spring, replacing
                               the springs' constants (constant: nonlinear
                               is then ignored); read at creation only */
  double tree_slack;        /* m (0..1): the posed tools' surface tree
                               (ts_xpbd_step_posed) is refitted in full at
                               a step's first substep only, the later ones
                               checking the points within this of their
                               escape (ts_aabb_tree_refit_watch), while a
                               bound on every node's move since (from the
                               largest speed of the substeps) stays within
                               it, capped at half the tree's margin; the
                               tree, candidates and results are those of a
                               full refit every substep, which 0 gives */
  int fold_guard;           /* nonzero: the inversion guard on a layered
                               tissue (ts_xpbd_guard.c: prisms found inside
                               out away from the tools pushed back until
                               their corner tetrahedra have a quarter of
                               their rest volume), so that a tool driven
                               through a layer leaves no fold */
} ts_xpbd_def;

/* The default tree_slack: a quarter of the default tree margin (0.2 mm,
 * ts_aabb_tree.h). */
#define TS_XPBD_TREE_SLACK_DEFAULT 5e-5

typedef struct ts_xpbd_stats {
  uint32_t substeps;         /* substeps taken this step */
  uint32_t iterations;       /* Gauss-Seidel sweeps per substep */
  uint32_t contacts;         /* (node, tool) pairs pushing in the last substep */
  uint32_t contacts_dropped; /* candidate contacts over the buffer's capacity */
  double max_speed;          /* m/s */
  double kinetic_energy;     /* J */
  double residual;           /* largest |C + alpha~ * lambda| of a distance
                                constraint met in the last sweep of the last
                                substep, m: how far Gauss-Seidel is from
                                converged */
  int diverged;              /* NaN/Inf or runaway speed: state was reset */
  /* why (diverged set; the first node found, ts_xpbd_diverged_text): */
  int diverged_why;          /* TS_DIVERGED_POSITION, _VELOCITY or _SPEED (ts_diverged.h) */
  uint32_t diverged_node;    /* the node */
  double diverged_value;     /* its speed, m/s (TS_DIVERGED_SPEED) */
  uint32_t diverged_substep; /* in which substep (1-based; substeps the step's count) */
  uint32_t self_contacts;    /* self-contact pairs of the last substep (ts_xpbd_set_self_contact) */
  uint32_t guard_pushes;     /* the inversion guard's corner tetrahedra under a quarter
                                of their rest volume that it pushed, summed over the
                                substeps (at each substep's first sweep) */
} ts_xpbd_stats;

/* One tool contact of the last substep: the force node `node` exerts on
 * tools[tool] (N). */
typedef struct ts_xpbd_contact {
  uint32_t node;
  uint32_t tool;
  double force[3];
} ts_xpbd_contact;

/* Defaults: 4 iterations, automatic substeps (4 at the 1 ms physics step on
 * the default patch: its sag and a pressing sphere's force then come within
 * 0.3 % of the converged values), damping 150 1/s (about critical
 * for the default patch's first bending mode, the patch's drag), no
 * stiffness damping, no spring dampers (the implicit update already damps
 * the fast modes), the nonlinear law, no bending or volume constraints,
 * nu = 0.45 (soft tissue), compliances from the springs, the inversion
 * guard on. */
ts_xpbd_def ts_xpbd_default_def(void);

/* Builds a solver for tissue t (which it does not keep: the step takes the
 * tissue again). Copies the constraint topology, the springs' constants and
 * the rest state; the tissue's springs, sheets, triangles and materials are
 * read here only (build again after changing them). Returns 0 and *out, or
 * TS_EINVAL (NULL argument; a def field out of range; a spring with an end out of range, equal ends, a rest
 * length not positive and finite, constants or damper negative, NaN or
 * infinite, an exponent over 100 or no stiffness (k1 + k2 and k all 0); a
 * given compliance negative, NaN or infinite; bending or volume asked for on
 * a tissue without a consistent sheet and layer structure: columns
 * (ts_tissue_columns > 0: the column map of a built or refined tissue, or
 * n_sheets * nodes_per_sheet == n_nodes), n_layers == n_sheets - 1 or a single sheet
 * with one layer, sheet triangles in t->tris, layers of positive finite
 * thickness and E), TS_ETOOBIG (constraints or nodes over 2^31) or
 * TS_ENOMEM. */
int ts_xpbd_build(const ts_tissue *t, const ts_xpbd_def *def, ts_xpbd **out);

/* As ts_xpbd_build, NULL on any error. def NULL means the defaults. */
ts_xpbd *ts_xpbd_create(const ts_tissue *t, const ts_xpbd_def *def);

void ts_xpbd_destroy(ts_xpbd *s);

/* Advances t by dt seconds (substeps of dt / def.substeps, or as many as
 * the automatic rule asks for) with the given tools. Returns 0;
 * TS_EDIVERGED when a position or velocity became NaN or infinite or a node
 * ran away (faster than 100 m/s), the tissue then reset to rest so that no
 * NaN leaves the core; or, changing nothing, TS_EINVAL (NULL s or t, t not
 * the tissue s was built for (node or spring count differs), a negative or
 * NaN inv_mass, dt <= 0 or over 1 s, n_tools < 0 or over 64, a tool of
 * unknown kind, radius <= 0 or over 1 m, capsule length < 0 or over 10 m),
 * TS_ENAN (dt, gravity or a tool coordinate NaN or infinite) or TS_ERANGE
 * (automatic substeps over 10000); TS_ESHUTDOWN when t->stop asked it to
 * stop (ts_tissue.stop), the tissue then mid-step. Tools: inactive ones are ignored; force
 * and contacts of every one are overwritten (force: the tissue's reaction
 * on the tool, N, mean over the substeps). A tool's pose moves linearly
 * from its pose at the previous step (same array index, active then too)
 * to the given one across the substeps. No allocation. */
int ts_xpbd_step(ts_xpbd *s, ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                 ts_xpbd_stats *stats);

/* What a diverged step's stats say, in words, into buf (cap bytes, always
 * terminated when cap > 0): which test, the node, its speed, the substep.
 * Returns the length snprintf gives (ts_xpbd_diverge.c). */
int ts_xpbd_diverged_text(const ts_xpbd_stats *st, char *buf, size_t cap);

/* Gives solver `to` the previous poses of the tools of solver `from` (the
 * segments of the sphere and capsule tools at the end of from's last step;
 * NULL from: none, as a new solver has), so that to's next ts_xpbd_step
 * moves each tool from there across its substeps, as from's next step
 * would. For a solver that replaces another between two steps (a live
 * refinement's install, server/refine.c): a new solver has no previous
 * pose and places a moving tool at its new pose from the first substep, its
 * whole motion in the step arriving as one jump. Tools on the tree-based
 * path keep their previous pose with the caller (ts_xpbd_tool.prev). */
void ts_xpbd_carry_tools(ts_xpbd *to, const ts_xpbd *from);

/* A tool of the tree-based contact path: a placed OBB tree (sphere,
 * capsule or grasper jaws) with its contact workspace and, for jaws, its
 * grasp state, all owned by the caller and kept from step to step. */
typedef struct ts_xpbd_tool {
  ts_posed_tool *posed;   /* the tool's tree, placed; left at `pose` */
  ts_pose prev;           /* in: pose at the start of the step (the last step's `pose`) */
  ts_pose pose;           /* in: pose at the end of the step */
  ts_contact_ws *contact; /* workspace (ts_contact_ws_init with the tissue's node count) */
  ts_grasp *grasp;        /* NULL: never holds; else the jaws' held vertices */
  double force[3];        /* out: the tissue's reaction on the tool (contact and
                             grasp), N, mean over the substeps */
  double torque[3];       /* out: its torque about the tool's origin, N m, mean */
  uint32_t contacts;      /* out: vertices touching the tool after the last substep */
  uint32_t held;          /* out: vertices held by the jaws */
} ts_xpbd_tool;

/* As ts_xpbd_step (the ts_tool array may be NULL with n_tools 0), plus
 * n_posed tools on the tree-based path: each substep refits tree (the
 * tissue's AABB tree over t->x, ts_aabb_tree_create_tissue) at the
 * predicted positions (watched after the step's first: def.tree_slack),
 * moves every posed tool linearly from prev to pose
 * across the substeps, takes its contact candidates (ts_contact_begin),
 * updates its grasp, and in every Gauss-Seidel sweep projects the held
 * vertices (ts_grasp_project) and then the contacts (ts_contact_project,
 * swept in the first sweep of the substep). Returns as ts_xpbd_step, plus
 * TS_EINVAL (a posed tool without tree or workspace, a workspace or tree
 * for another node count, n_posed < 0 or over 64), TS_ENAN / TS_EQUAT (a
 * bad pose); mesh tools are taken (ts_contact_begin). Candidates over a workspace's
 * capacity are counted in stats->contacts_dropped and ignored. No
 * allocation. */
int ts_xpbd_step_posed(ts_xpbd *s, ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                       ts_aabb_tree *tree, ts_xpbd_tool *posed, int n_posed,
                       ts_xpbd_stats *stats);

/* Self-contact (ts_self_contact.h) in every step from now on: in each
 * substep, after the prediction, the tree (built over t's contact surface)
 * is refitted and the contacts detected, and every sweep projects them as
 * rigid constraints after the tools'. sc and tree stay the caller's; NULL
 * sc turns it off. stats->self_contacts counts the last substep's pairs.
 * Returns 0, or TS_EINVAL (sc without tree). */
int ts_xpbd_set_self_contact(ts_xpbd *s, ts_self_contact *sc, ts_aabb_tree *tree);

/* Constraint counts of the solver. */
void ts_xpbd_counts(const ts_xpbd *s, uint32_t *distance, uint32_t *bending, uint32_t *volume);

/* Small-strain compliance of each distance constraint (m/N, 1 / (k1 + k2)
 * or the given one), indexed like the tissue's springs. */
const double *ts_xpbd_compliance(const ts_xpbd *s);

/* Tension of each distance constraint in the last step (N, positive when
 * stretched, mean over the substeps), indexed like the tissue's springs. */
const double *ts_xpbd_tensions(const ts_xpbd *s);

/* Force of all distance, bending and volume constraints on each node in
 * the last step (N, the mean multipliers of the substeps with the gradients
 * at t's current positions), written to f (t->n_nodes entries). On an
 * anchored node it is what the anchor holds back: the anchor's reaction on
 * the tissue is its negative. Exact once the sweeps converge; otherwise
 * off by the change of the gradients within a substep (at the default
 * settings a few tenths of a per cent of a pressing tool's force, summed
 * over the anchors). Returns 0, or TS_EINVAL for a NULL argument or a
 * tissue s was not built for. */
int ts_xpbd_node_forces(const ts_xpbd *s, const ts_tissue *t, double (*f)[3]);

/* The tool contacts of the last substep: *n gets their count. */
const ts_xpbd_contact *ts_xpbd_contacts(const ts_xpbd *s, uint32_t *n);

/* The bending constraint's angle: for the hinge edge p[0]-p[1] with the
 * wings p[2] and p[3] (on opposite sides of the edge), the signed angle
 * (rad) between the normals of triangles (p0, p1, p2) and (p0, p3, p1),
 * 0 when flat, and in grad (may be NULL) its gradient with respect to the
 * four points (1/m). Returns NAN when a triangle is degenerate. */
double ts_xpbd_dihedral(const double p[4][3], double grad[4][3]);

/* The volume constraint's measure: the signed volume (m^3) of the prism
 * with triangle p[0..2] swept to p[3..5] (p[i+3] opposite p[i]), as three
 * tetrahedra (p0 p1 p2 p3), (p1 p2 p3 p4), (p2 p3 p4 p5), and in grad (may
 * be NULL) its gradient (m^2). */
double ts_xpbd_prism_volume(const double p[6][3], double grad[6][3]);

#endif
