/*
 * ts_qstatic_refine.h: the local quasi-static solve of the second method on
 * a refined copy of the contact region (issue 6: "it runs on the local region
 * found by breadth-first search from the contact point and refined by
 * longest-edge bisection, with the rest of the tissue fixed"; issue 4: the
 * region "is copied, refined and solved").
 *
 * The copy is a sub-extrusion: the region's outer-surface triangles
 * (ts_qstatic_select_region, sheet 0) with the nodes under them on every
 * sheet. A sub-extrusion rather than a list of the tissue's springs because
 * longest-edge bisection works on the surface (ts_leb.h) and every sheet must
 * follow the same bisections: the springs of the copy are then rebuilt from
 * its prisms with the tissue builder's topology (ts_tissue_build.c: EDGE
 * springs along every sheet's edges, INTERLAYER springs between corresponding
 * nodes, both SHEAR diagonals of every prism side face).
 *
 * Refinement: ts_leb_refine on the copy's surface at the current positions,
 * with a size function that is max_edge where an edge's midpoint lies within
 * range of the contact point and unbounded elsewhere, and the copy's rim
 * frozen (ts_leb_def.frozen: the out-of-range vertices; an edge between two
 * of them is never bisected, so the rim nodes and rim edges are the tissue's
 * own and the copy stays conforming with the rest of the tissue; a triangle
 * on a rim edge is split only when its neighbour's edge is, so its edges
 * may stay above max_edge). The second
 * search: a new vertex that lies out of range of the contact (refinement
 * outside the modelled region) is not solved; it stays at the midpoint of
 * its parents, with the rest of the tissue.
 *
 * Springs: the same K(L) law with the same E, b, d as the whole tissue
 * (ts_qstatic.h) gives the unrefined springs; a refined spring's constant
 * follows the link-element scaling k = E A / L = E V / L^2 (the tissue
 * builder's finite-element equivalence), so that the refined network carries
 * the same material. Each spring's constant is split over the surface
 * triangles it belongs to in proportion to their areas (an EDGE or SHEAR
 * spring over the two triangles of its edge, an INTERLAYER spring over the
 * fan of its vertex; node masses likewise), giving per triangle a stiffness
 * volume sum_s K_s L_s^2 (N m: what a uniform stretch eps stores, as
 * eps^2/2 times it). A triangle that refinement splits spreads its stiffness
 * volume of each kind (per sheet for EDGE and mass, per slab for SHEAR and
 * INTERLAYER) evenly over its children by area and, within a child, evenly
 * over its springs of that kind: a child of area A_c gets, per spring of
 * rest length L, K = c A_c / L^2 with c = (the parent's stiffness volume of
 * that kind) / (springs of that kind per triangle * A_parent). A bisected
 * spring's halves so get about twice its constant (two springs in series
 * keep a chain's stiffness), the new interior ones the parent's density, and
 * sum K L^2 over the copy is unchanged: a uniform stretch gives the same
 * reaction (tests/unit/test_qstatic_refine.c checks it within 1 %). Triangles
 * that are not split keep their original shares exactly, so with no
 * refinement (max_edge = INFINITY) the copy has the tissue's springs, masses
 * and free nodes and the solve equals ts_qstatic_solve_region.
 *
 * Control points: the given (tool-held) nodes, and every new node whose two
 * parents are held, at the midpoint of their held positions (the held patch
 * under the tool, interpolated). Anchored nodes stay; a new node between two
 * anchored ones is anchored.
 *
 * Solve: the method's relaxation x_i <- x_i + alpha_i R_i over the copy's
 * free nodes (Jacobi sweeps as in ts_qstatic.c: every R from the same
 * positions) until max |R| < tol or the tissue solver's iteration cap (both
 * reported), with the tissue solver's tol and cap. Only the original nodes'
 * positions are written back; the new nodes are internal to the solve, and
 * the refined copy stays in the object for inspection until the next solve.
 *
 * External force: the residual is springs plus gravity plus the caller's
 * per-node force f_ext (N per tissue node, may be NULL), as in the plain
 * solve (ts_qstatic.h). An original node of the copy gets its tissue node's
 * force and a new node none, so the total external force on the copy's free
 * nodes is the tissue region's: a load stays on the node it was put on (a
 * force is not a density to spread by area, as the masses are: the tissue's
 * f_ext already says on which node it acts, and refinement only adds nodes
 * between them). Non-finite f_ext on any tissue node is TS_ENAN, as in the
 * plain solve. The daemon's quasi-static session passes the tissue's
 * t->f_ext (shortcut.c); the learned models' features (initial position,
 * internal force, gravity) have no external term, so a trained model
 * answers as if f_ext were zero (tests/unit/test_qstatic_refine.c checks the
 * term: force balance and the loaded node's response against the plain
 * solve).
 *
 * Step: the equilibrium R = 0 and the stopping test do not depend on the
 * step, only the number of sweeps does, so each node takes its own:
 *
 *   alpha_i = omega B_i^-1,  B_i = sum_j K_ij [e e^T + |1 - L0/L| (I - e e^T)]
 *                                  + eps D_i I,  D_i = sum_j K_ij,
 *
 * over node i's springs at the current positions (e their unit direction,
 * L their length), omega = TS_QSREFINE_OMEGA, eps = TS_QSREFINE_BLOCK_EPS:
 * a 3 x 3 block-Jacobi preconditioned step (the spread2 model's scaling,
 * ts_learn.h). B_i bounds the spring network's tangent stiffness on node i
 * (its diagonal block, with the tension term and the magnitude of the
 * compression term), and for springs the whole tangent is at most twice its
 * block diagonal (((u_i - u_j).e)^2 <= 2 (u_i.e)^2 + 2 (u_j.e)^2), so
 * omega < 1 keeps the sweeps stable as omega / D_i does in the Jacobi
 * (Gershgorin) argument of the global step. Why: the old step, one alpha =
 * 0.9 / max_i D_i for every node (TS_QSREFINE_STEP_GLOBAL, kept), is held
 * back by the stiffest node, and refinement makes that node stiffer (a
 * bisected spring's halves get twice its constant), so the refined copy took
 * twice the sweeps of the tissue's own region on twice the nodes (bench_learn
 * on patch-S: 14,000 sweeps against 7,133; 3.4 x the time); each node's own
 * step moves the soft nodes, and the soft directions of every node, as far as
 * their springs allow (2,624 sweeps). The blocks follow the positions: they
 * are taken again whenever the nodes may have moved by TS_QSREFINE_DRIFT
 * times the copy's shortest spring since they were last taken (the springs'
 * directions then changed by about that angle; blocks taken once at the
 * start let a press of 1.5 mm on springs of 0.5 mm grow without bound). If
 * max |R| ever leaves TS_QSREFINE_BLOWUP times its start value (not seen in
 * the tests or benchmarks), the solve starts again from the start positions
 * with the old step.
 *
 * Memory: the copy's arrays are allocated when a region first needs them and
 * grow only when a larger region comes (bounded by max_verts surface
 * vertices: TS_EFULL above); ts_leb_refine allocates its own working set per
 * solve. The relaxation sweeps do not allocate.
 */
#ifndef TS_QSTATIC_REFINE_H
#define TS_QSTATIC_REFINE_H

#include <stdint.h>

#include "ts_qstatic.h"
#include "ts_tissue.h"

#define TS_QSREFINE_DEFAULT_MAX_VERTS 20000u

/* The relaxation's step (see "Step" above). */
typedef enum ts_qsrefine_step {
  TS_QSREFINE_STEP_BLOCK = 0,  /* omega B_i^-1: the node's 3 x 3 stiffness block (default) */
  TS_QSREFINE_STEP_DIAG = 1,   /* omega / D_i: the node's summed spring constants */
  TS_QSREFINE_STEP_GLOBAL = 2  /* one alpha for every node, limited by the stiffest */
} ts_qsrefine_step;

#define TS_QSREFINE_OMEGA 0.9      /* relaxation factor of the per-node steps */
#define TS_QSREFINE_BLOCK_EPS 0.03 /* share of D_i added to the block's diagonal (keeps it
                                      invertible where a node's springs lie in a plane) */
#define TS_QSREFINE_DRIFT 0.1      /* blocks taken again after moves of this times the
                                      shortest spring (0.02 .. 0.3 gave the same sweeps
                                      within 1 % in test_qstatic_refine) */
#define TS_QSREFINE_BLOWUP 1e3     /* max |R| above this times the start's: the old step */

typedef struct ts_qsrefine_def {
  double max_edge;    /* m, > 0: the longest edge allowed inside the range;
                         INFINITY: no refinement */
  uint32_t max_verts; /* copy surface vertices allowed after refinement
                         (TS_EFULL above); 0 = TS_QSREFINE_DEFAULT_MAX_VERTS */
  ts_qsrefine_step step; /* the relaxation's step; 0 = TS_QSREFINE_STEP_BLOCK */
} ts_qsrefine_def;

typedef struct ts_qsrefine_spring {
  uint64_t key; /* a << 32 | b, a < b, copy node indices */
  double K;     /* N/m */
  double L0;    /* m */
} ts_qsrefine_spring;

typedef struct ts_qsrefine {
  ts_qstatic *q;          /* the tissue's solver (not owned; its region search is used) */
  ts_qsrefine_def def;
  uint32_t n_sheets, n_surf;
  double (*rest)[3];      /* the tissue's rest positions (n_sheets * n_surf) */
  double *tri_area;       /* per tissue surface triangle, m^2 at rest */
  double *edge_area;      /* per tissue surface edge (q->topo): its triangles' area */
  double *fan_area;       /* per tissue surface vertex: its triangles' area */
  uint32_t *lmap;         /* per tissue surface vertex: copy vertex, or UINT32_MAX */
  /* the copy after the last solve: surface vertices 0..nv0-1 are the
   * tissue's (vmap), nv0..nv-1 new (parents); node (s, v) at s * nv + v */
  uint32_t nv0, nv, nt, n_nodes;
  uint32_t cap_v, cap_t, cap_s;
  uint32_t *vmap;         /* copy vertex -> tissue surface vertex (first nv0) */
  uint32_t (*parents)[2]; /* new vertex nv0 + i: midpoint of these copy vertices */
  uint32_t (*tris)[3];    /* refined surface triangles (copy vertices) */
  uint32_t *tri_parent;   /* per refined triangle: its region triangle (an index
                             into q->region->tris) */
  uint32_t *n_children;   /* per region triangle: refined pieces */
  uint8_t *cmark;         /* per tissue node: a control in this solve */
  uint8_t *in_range;      /* per copy vertex: within range of the contact */
  double (*X)[3];         /* rest positions of the copy's nodes, m */
  double (*x)[3];         /* positions, m */
  double *mass;           /* kg */
  uint8_t *role;          /* TS_QS_* per copy node */
  uint8_t *anchored;      /* per copy node */
  ts_qsrefine_spring *spr;/* springs (merged), n_springs of them */
  uint32_t n_springs;
  ts_qsrefine_spring *spr_tmp; /* the sort's second buffer (cap_s) */
  uint32_t *bucket;       /* the sort's per copy node counts (cap_v * n_sheets + 1) */
  struct ts_qsrefine_densities *dens; /* per region triangle that refinement split:
                                         its densities (ts_qstatic_refine.c; cap_t) */
  uint32_t *free_nodes, n_free;
  uint32_t *active, n_active; /* springs with a free end */
  double (*R)[3];
  double (*step)[9];      /* per free copy node: its step matrix, m/N (row-major) */
  double *kdiag;          /* per free copy node: D_i = its summed spring constants, N/m */
  double (*x_start)[3];   /* free nodes' start (per index into free_nodes), m */
  double (*fext)[3];      /* per copy node: its external force, N (a new node: 0) */
  double alpha;           /* m/N in use (the global step) */
  uint32_t n_refresh;     /* times the last relaxation took the per-node steps */
  uint32_t n_outside;     /* new vertices left out by the second search */
  uint32_t n_forced;      /* propagated bisections (ts_leb_result) */
} ts_qsrefine;

/* A refined solver over q (built from t: q's tissue, for its rest positions;
 * neither is copied, q must outlive the object). Returns 0, TS_EINVAL (NULL,
 * max_edge not > 0 or NaN, t not q's tissue, q without an outer surface) or
 * TS_ENOMEM. */
int ts_qsrefine_create(ts_qstatic *q, const ts_tissue *t, const ts_qsrefine_def *def,
                       ts_qsrefine **out);
void ts_qsrefine_destroy(ts_qsrefine *r);

/* Selects the region around point (m) within range (m) at positions x
 * (ts_qstatic_select_region) and solves it refined: see
 * ts_qsrefine_solve_selected. */
int ts_qsrefine_solve(ts_qsrefine *r, double (*x)[3], const double point[3], double range,
                      const uint32_t *ctrl, const double (*ctrl_pos)[3], uint32_t n_ctrl,
                      const double (*f_ext)[3], ts_qstatic_stats *stats);

/* The refined solve on the region q selected last (with the same point and
 * range): x (the tissue's n_nodes positions, m) is the start; the n_ctrl
 * control nodes ctrl[] are set to ctrl_pos[] first (also outside the
 * region, as ts_qstatic_prepare does); f_ext (N per tissue node, may be
 * NULL) is the external force (see "External force" above); on return the
 * region's free original nodes hold the solution. stats (may be NULL) gets the iterations, the
 * final max |R| (N), convergence, and the copy's free node and active spring
 * counts. Returns 0 (also at the iteration cap: stats->converged),
 * TS_EINVAL (NULL, no region selected, a control index out of range or
 * repeated, range < 0), TS_ENAN (non-finite input), TS_EFULL (the refined
 * copy would exceed max_verts surface vertices), TS_EMESH (the region is not
 * a manifold), TS_ENOMEM, TS_EDIVERGED (the solve gave non-finite
 * positions; x is then left as it was with the controls placed) or
 * TS_ESHUTDOWN (q->stop asked the sweeps to stop: x as for TS_EDIVERGED). */
int ts_qsrefine_solve_selected(ts_qsrefine *r, double (*x)[3], const double point[3], double range,
                               const uint32_t *ctrl, const double (*ctrl_pos)[3], uint32_t n_ctrl,
                               const double (*f_ext)[3], ts_qstatic_stats *stats);

/* The copy's construction alone (refinement, nodes, roles, springs, masses,
 * external forces), as the first half of ts_qsrefine_solve_selected:
 * controls are placed in x and the copy's positions r->x set, nothing is
 * relaxed. Returns as it. */
int ts_qsrefine_build(ts_qsrefine *r, double (*x)[3], const double point[3], double range,
                      const uint32_t *ctrl, const double (*ctrl_pos)[3], uint32_t n_ctrl,
                      const double (*f_ext)[3]);

/* Relaxes the copy's free nodes from r->x (as the second half of the solve,
 * without writing back). Returns 0, TS_EDIVERGED or TS_ESHUTDOWN (q->stop). */
int ts_qsrefine_relax(ts_qsrefine *r, ts_qstatic_stats *stats);

/* The second half of ts_qsrefine_solve_selected after ts_qsrefine_build:
 * relaxes the copy and writes its free original nodes back into x (the
 * learner builds the copy once per interval for the spread2r features and
 * the solve, ts_learn.h). Returns as ts_qsrefine_relax, or TS_EINVAL. */
int ts_qsrefine_finish(ts_qsrefine *r, double (*x)[3], ts_qstatic_stats *stats);

/* The mean edge of q's outer surface at t's rest positions, m (0 without an
 * outer surface or for NULL): the daemon's automatic max_edge, which splits
 * every longer edge in range (on a grid of right triangles: the diagonals,
 * about twice the region's triangles). t must be q's tissue. */
double ts_qsrefine_mean_edge(const ts_qstatic *q, const ts_tissue *t);

/* The solve's residual at positions x instead of r->x (x and R have
 * r->n_nodes entries; the fixed and control nodes' R are summed too, not
 * meaningful): R = springs + gravity + the external force of the last
 * build (see "External force" above) on every free node; returns max |R|
 * over them (NaN propagates). The spread2r features sweep with it
 * (ts_learn_refined.c). */
double ts_qsrefine_residual_at(const ts_qsrefine *r, const double (*x)[3], double (*R)[3]);

/* The solve's block step (TS_QSREFINE_STEP_BLOCK) of every free node at
 * positions x instead of r->x: B[i] = omega B_i^-1 (row-major, m/N), D[i] the
 * sum of its springs' K (B and D have r->n_nodes entries; a node without
 * springs takes the global step alpha I, as in the solve). */
void ts_qsrefine_block_steps(const ts_qsrefine *r, const double (*x)[3], double (*B)[9],
                             double *D);

/* The spring forces on every copy node at the copy's positions r->x, N
 * (f has r->n_nodes entries; gravity not included). */
void ts_qsrefine_forces(const ts_qsrefine *r, double (*f)[3]);

#endif
