/*
 * ts_contact.h: the response half of tool-tissue collision (issue 5): tissue
 * vertices inside a tool are moved out along the contact normal, with
 * Coulomb friction, without letting a fast tool pass through a sheet. The
 * detection half (trees, exact tests) is ts_collide.h; grasping is
 * ts_grasp.h; the position-based solver uses this as its contact constraint
 * (ts_xpbd.h), the mass-spring step as a projection after its integration.
 *
 * Which vertices move. Two passes, each a rigid position constraint:
 *  1. the vertices found inside the tool, each projected to the tool's
 *     surface at its closest point (C = sdf(x) >= 0, sdf the signed
 *     distance from the tool; Mueller et al., "Position Based Dynamics",
 *     2007, section 3.5). This is exact for a vertex and its multiplier is
 *     the vertex's contact force;
 *  2. then every nearby triangle the tool still meets more than a quarter
 *     of its thickness deep (exact tests of ts_tritri.h: sphere, capsule,
 *     box against triangle; contact point q, normal n, depth d) although
 *     its vertices are outside: the triangle's vertices are moved along n,
 *     weighted by the barycentric coordinates b_i of q, by the
 *     point-triangle constraint C = d - thickness / 4 along n:
 *     dx_i = w_i b_i C n / sum_j w_j b_j^2 (w the inverse masses). This
 *     keeps a tool thinner than the triangles (a 1 mm capsule on 1.6 mm
 *     triangles) from slipping between the vertices: the tool's core
 *     stays a quarter thickness away from every triangle. The allowance
 *     lets a surface wrapped around the tool rest on it by its vertices:
 *     the triangles between two vertices on a convex tool dip into it by
 *     their sagitta (0.3 mm for 3.3 mm triangles on a 5 mm sphere), which
 *     would otherwise hold the vertices off the surface.
 * The vertex pass comes first because the tools are primitives with an
 * exact signed distance and mostly larger than the triangles (a 5 mm
 * sphere on 1.6..3.5 mm triangles): there it leaves no vertex inside in one
 * pass, while a barycentric split shares one correction among three
 * vertices and needs repeated passes; the triangle pass covers what the
 * vertex pass cannot see. Triangle-mesh tools (TS_SHAPE_MESH) take the
 * vertex pass with the mesh's signed distance (ts_obb_tree_mesh_sdf:
 * closest point by the tree, sign by the angle-weighted pseudonormal), and
 * (thin_pass of the tree, on by default) a triangle pass of their own for a
 * mesh part thinner than the tissue's triangles, which slips between the
 * vertices (the dental instrument's spatula, 2.6 x 0.4 mm, on the patch's
 * 3.5 mm triangles): every nearby
 * triangle none of whose corners the vertex pass holds (touching == 1) and
 * that the tool pierced from its outer side (ts_collide_mesh_pierce: of the
 * tool triangles that cross it, the part over it lying deepest behind its
 * plane, at most the tool's thickness deep; a face-triangle contact alone
 * gives the crossing of two surfaces, not how deep the tool is through the
 * triangle) is moved along its inward normal by the same point-triangle
 * constraint, weighted at the crossing point, until the tool's deepest
 * point over it is a quarter of the thickness behind it (the primitives'
 * allowance). A push moves the crossing point by the depth, but the
 * triangle turns when its corners move unequally: up to 4 rounds per
 * triangle and pass settle it within 1 % of the thickness. The corners'
 * corrections are vertex-contact corrections (multipliers, impulses, the
 * reaction on the tool) like any other.
 *
 * Candidates. By the method's descent (ts_collide_tissue_tris): the tool
 * at the middle of its two poses, every box of its OBB tree grown by half
 * the step's travel bound (no tool point is farther than that from its
 * mid-pose place at any pose between) and by a margin, descends with the
 * tissue's AABB tree (ts_aabb_tree.h, refitted for the positions; OBB x
 * AABB by the separating axes) down to pairs of leaves; the triangles of
 * those pairs, in the order the tree lists them, are the step's, and their
 * free vertices its candidates. No other vertex can touch the tool within
 * the step unless it moves more than the margin: a vertex inside a
 * primitive or the jaws is inside a leaf box; a vertex inside a mesh tool
 * is near one of its triangles' boxes unless it is deeper than the margin
 * and half the travel (0.5 mm at rest) behind the mesh's surface, which
 * the sweep (below) keeps the tissue from reaching; a mesh tool that could
 * hold such a point (its root box's smallest half extent over that) may be
 * put down on the tissue rather than swept in, so it takes the swept root
 * box's candidates (test_contact_buried). On the standard tool
 * path this gives the same vertices, pushes and forces to the bit as the
 * former candidates, the triangles whose fat leaf boxes met the tool's
 * swept root box grown by the margin (box_candidates, kept as the
 * reference), from fewer triangles for the jaws and the dental instrument
 * (test_contact_descent, patch-S: 78 against 123 triangles a step for the
 * jaws, 22 against 30 for the instrument). A sphere's or capsule's tree is
 * one box: its descent is the tissue tree's walk with that box's bounds,
 * so it takes the swept box's query, the same walk over the step and 1.1
 * times faster than the descent's form (tests/bench collide).
 *
 * No tunnelling. The tool moves from `from` to `to` in m substeps, m the
 * smallest count for which no tool point moves more than travel_fraction
 * (default 1/4) of the tool's thinnest part (ts_obb_tree.thickness) per
 * substep, the travel bound of ts_collide_sweep (|dp| + rotation angle *
 * reach + the jaws' own motion). Each candidate follows its own straight
 * path from x0 to x over the same substeps and is projected out of the tool
 * wherever it is inside; a vertex that is outside at one substep is then at
 * most a quarter thickness deep at the next, so it is pushed back out on the
 * side it came from and never past the tool's core. The corrections made on
 * the way are carried to the end of the path. A 1 mm thick tool at 0.5 m/s
 * and 1 ms steps takes 2 substeps; a 10 mm sphere 1. The triangle passes
 * run with the tool at `to` only, except a mesh tool's (thin_sweep of its
 * tree, on by default): a triangle the tool moved through by more than its
 * thickness within one projection would not be seen (the mesh pass's depth
 * bound), so the projections of a step also sweep that pass, pushing the
 * triangles ahead of the tool, over poses no more than travel_fraction of
 * the thickness apart in the tool's travel plus the candidates' own motion
 * since x0 (a dented surface springing back onto a resting tool crosses it
 * as a moving tool would), and the step's later passes take those
 * triangles however deep the tool is behind them (the side it came from
 * remembered). The solver sweeps in every projection of its substep
 * (TS_CONTACT_SWEEP_THIN after the first): its other constraints move the
 * surface between projections, and at 1 or 2 XPBD substeps of 1 ms (the
 * tool 0.5 or 0.25 mm a substep, the dental instrument 0.11 mm thick) a
 * sweep in the first projection alone left the surface lifted back over
 * the tool, 0.28 mm behind it (test_mesh_tool, test_thin_fast).
 *
 * Friction (Coulomb, position level; ts_contact_friction.c). A vertex in
 * contact has an anchor: the tool's material point it was at when the
 * contact started or when it last slid, carried with the tool as a rigid
 * body. Its offset from the anchor's place at `to` is split into normal and
 * tangential parts; the tangential part d_t is removed entirely while
 * |d_t| <= mu_s * lambda_n (static friction: the vertex sticks), otherwise
 * reduced by mu_k * lambda_n (kinetic) and the vertex re-anchored at its
 * next step, lambda_n the normal correction of the vertex accumulated since
 * ts_contact_begin and d_t counted with the friction's corrections made
 * since then, summed as a vector (the cone of Mueller et al., "Detailed
 * Rigid Body Simulation with Extended Position Based Dynamics", 2020,
 * section 3.5, on the accumulated correction as in E. Catto's accumulated
 * impulses). A sticking vertex keeps its anchor into the next
 * ts_contact_begin, so what a momentarily small cone let it slide is
 * pulled back later (no creep under a resting tool); one that slid, or lost
 * its normal correction, starts afresh where it stands. The jaws' opening
 * motion is not part of the tool's rigid motion for friction.
 *
 * Force. Every correction dx of a vertex of mass m is an impulse-like
 * quantity m dx; the reaction on the tool over a (sub)step of length h is
 * F = -sum(m dx) / h^2 (XPBD: M (x - x~) = grad C^T lambda), and its torque
 * about the tool's origin sum((x - p) x F_i).
 *
 * All memory belongs to a workspace created once; the step allocates
 * nothing.
 */
#ifndef TS_CONTACT_H
#define TS_CONTACT_H

#include <stdint.h>

#include "ts_aabb_tree.h"
#include "ts_obb_tree.h"

typedef struct ts_contact_def {
  double mu_static;       /* Coulomb static coefficient (>= 0) */
  double mu_kinetic;      /* kinetic coefficient (0 <= mu_k <= mu_s) */
  double margin;          /* candidate margin, m (>= 0) */
  double travel_fraction; /* of the tool's thickness per substep, (0, 1] */
  uint32_t max_substeps;  /* 1 .. 4096 */
  int triangle_pass;      /* nonzero: pass 2 (triangles) after the vertices */
  int box_candidates;     /* nonzero: candidates from the swept root box (the former
                             path, a reference for tests and benchmarks); 0: by the
                             descent of the trees (see Candidates above) */
} ts_contact_def;

/* Defaults: frictionless (mu 0, 0), margin 0.5 mm, a quarter of the
 * thickness per substep, at most 256 substeps, the triangle pass on. */
ts_contact_def ts_default_contact_def(void);

/* One candidate vertex. */
typedef struct ts_contact_vertex {
  uint32_t node;
  double n[3];     /* normal of the last projection (out of the tool) */
  double lam_n;    /* normal correction since ts_contact_begin, m */
  double ft[3];    /* the friction's corrections since then, summed, m (its
                      length is what the cone bounds) */
  double imp[3];   /* sum of m dx of every correction since then, kg m */
  double sd;       /* signed distance from the tool after the last vertex pass, m */
  int touching;    /* in the last call: 1 projected or on the surface, 2 moved by a
                      mesh tool's triangle pass only, 0 neither */
  int anchored;    /* friction: its anchor (ws->anchor) is set */
  int keep;        /* friction: it stuck in its last projection (anchor kept) */
} ts_contact_vertex;

typedef struct ts_contact_ws {
  ts_contact_def def;
  uint32_t n_points;   /* tissue nodes */
  uint32_t cap;        /* candidate capacity */
  uint32_t n;          /* candidates of this step */
  uint32_t dropped;    /* candidates over cap (then ignored) */
  ts_contact_vertex *v;
  uint32_t *tri_buf;   /* tree query scratch */
  uint32_t tri_cap;
  uint32_t *mark;      /* per node: stamp of the step that took it */
  uint32_t stamp;
  ts_pose from, to;    /* the step's poses */
  uint32_t substeps;   /* of the sweep between them */
  uint32_t touching;   /* vertices touching after the last projection */
  uint32_t n_tris;     /* triangles of this step near the tool */
  uint32_t tri_hits;   /* triangles the last projection moved */
  /* contact allowances (a live refinement's hand-over, ts_handover.h): a
   * node i touches the tool shrunk by allow_w * allow[i] (m), so a new node
   * the refinement placed inside the tool stays where it was put while the
   * hand-over fades; NULL: none. Set by the stepping solver before each
   * projection. */
  const double *allow;
  double allow_w;
  /* private */
  const ts_aabb_tree *tree; /* of this step */
  uint32_t *slot;      /* per node: its candidate index when mark == stamp, else UINT32_MAX */
  double (*carry)[3];  /* per candidate: correction carried along the sweep */
  uint8_t *swept;      /* per triangle of tri_buf: the mesh sweep pushed it this step */
  double (*anchor)[3]; /* per node: its friction anchor, in the tool's frame */
  uint32_t *anc_stamp; /* per node: anc_now when its anchor carries into this step */
  uint32_t anc_now;
  double Rf[3][3], Rt[3][3]; /* rotations of from and to */
  /* the plan (ts_contact_plan): a superset of the candidate triangles of
   * the begins to come */
  uint32_t *plan_tris;      /* tri_cap of them, in the descent's order */
  uint32_t plan_n;
  uint64_t plan_uses;       /* begins whose candidates came from a plan (a count) */
  int planned;              /* the plan holds */
  const ts_aabb_tree *plan_tree;
  uint64_t plan_rebuilds;   /* plan_tree's rebuilds at the plan */
  const ts_obb_tree *plan_tool;
  ts_pose plan_mid;         /* the tool's pose of the superset (normalised) */
  double plan_grow;         /* its boxes' growth there, m */
  const ts_obb_tree *rho_tool; /* the tool tree rho is of */
  double rho;               /* largest |centre| + |half extents| of its boxes, m */
} ts_contact_ws;

/* Allocates a workspace for a tissue of n_points nodes with room for cap
 * candidate vertices and tri_cap triangles per query. def NULL means
 * defaults. Returns 0, TS_EINVAL (NULL, zero sizes, a def out of range) or
 * TS_ENOMEM. */
int ts_contact_ws_init(ts_contact_ws *ws, const ts_contact_def *def, uint32_t n_points,
                       uint32_t cap, uint32_t tri_cap);
void ts_contact_ws_free(ts_contact_ws *ws);

/* Drops every friction anchor (the tool left the tissue's step: it was
 * inactive, jumped, or the tissue was reset). NULL is ignored. */
void ts_contact_forget(ts_contact_ws *ws);

/* Signed distance (m, negative inside) of p from a placed tool at its
 * current pose, and in n (may be NULL) the unit direction that moves p out
 * fastest (jaws: of the nearer jaw box; a point on a sphere's or capsule's
 * core gets +y; meshes: ts_obb_tree_mesh_sdf). */
double ts_contact_tool_sdf(const ts_posed_tool *tool, const double p[3], double n[3]);

/* Starts a step: the tool goes from pose `from` to `to` (tool left at `to`);
 * tree must be refitted for the positions the candidates will be taken at.
 * Takes as candidates the free nodes (inv_mass > 0, skip[i] == 0 when skip
 * is not NULL) of the triangles near the swept tool, and clears their
 * multipliers. Returns 0, TS_EFULL (candidates or triangles over capacity:
 * the first ones are kept, ws->dropped counts the rest), TS_EINVAL (NULL,
 * node count differs from the tree's), TS_ENAN or TS_EQUAT (bad poses).
 * Every tool kind is taken, mesh tools (TS_SHAPE_MESH) too: their
 * candidates come from the same swept box, and the projection uses the
 * mesh's signed distance (ts_contact_tool_sdf) and its triangle pass. */
int ts_contact_begin(ts_contact_ws *ws, ts_posed_tool *tool, const ts_pose *from,
                     const ts_pose *to, const ts_aabb_tree *tree, const double *inv_mass,
                     const uint8_t *skip);

/* Plans the candidates of the begins to come (a solver's substeps over
 * one step): the superset, once, of the candidate triangles of every
 * ts_contact_begin whose sweep lies between the poses `from` and `to` (its
 * mid pose and growth are checked at the begin; one outside takes the
 * walk as without a plan) while every node of `tree` stays within
 * tissue_slack (m, >= 0) of where it was at this call, the tree refitted
 * but not rebuilt (checked: a rebuild drops the plan). The caller makes
 * the promise on the nodes; with it each begin's candidates are those it
 * takes without a plan, the same triangles and vertices in the same
 * order, from the superset instead of the tissue tree's walk. Mesh,
 * sphere and capsule tools with the descent's candidates (jaws and the
 * box candidates take no plan). Leaves the tool at `to`. Returns 1
 * (planned), 0 (no plan: not applicable, or the superset over tri_cap),
 * TS_EINVAL, TS_ENAN or TS_EQUAT (bad poses). */
int ts_contact_plan(ts_contact_ws *ws, ts_posed_tool *tool, const ts_pose *from,
                    const ts_pose *to, const ts_aabb_tree *tree, double tissue_slack);
/* Drops the plan (the nodes may have moved further). NULL is ignored. */
void ts_contact_unplan(ts_contact_ws *ws);

/* Projects the candidates out of the tool and applies friction. sweep
 * TS_CONTACT_SWEEP (1): each candidate walks from x0 to x while the tool
 * walks from `from` to `to` (the first projection of a step: no
 * tunnelling); TS_CONTACT_SWEEP_THIN (2): the vertices at `to` only, but a
 * mesh tool's triangle sweep as with 1 (later projections of a step, e.g.
 * the solver's further sweeps: its other constraints move the surface
 * between them); 0: the tool at `to` only. Any other value is taken as 1. x0:
 * the positions at the start of the step (friction, sweep). Moves x;
 * accumulates the candidates' multipliers. Returns the number of vertices
 * touching the tool (>= 0) or TS_EINVAL. The tool is left at `to`. */
#define TS_CONTACT_SWEEP 1
#define TS_CONTACT_SWEEP_THIN 2
int ts_contact_project(ts_contact_ws *ws, ts_posed_tool *tool, double (*x)[3],
                       const double (*x0)[3], const double *inv_mass, int sweep);

/* The reaction on the tool of the corrections since ts_contact_begin:
 * force = -scale * sum(m dx) (scale = 1 / h^2 for a step of length h: N)
 * and the torque of those forces about the tool's origin at `to` (N m),
 * with the vertices at positions x. */
void ts_contact_reaction(const ts_contact_ws *ws, const double (*x)[3], double scale,
                         double force[3], double torque[3]);

#endif
