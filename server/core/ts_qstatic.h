/*
 * ts_qstatic.h: the quasi-static solve of the second method (the supervised
 * shortcut, issue 6): the tissue's mesh as a mass-spring network whose
 * spring constants depend on the spring's length, relaxed to equilibrium at
 * each time t = k*delta while the tool holds some nodes in place. It is the
 * teacher of the learned model (ts_learn.h) and what answers before a model
 * is trained.
 *
 * Springs: the tissue's springs (their ends and rest lengths L0 at the rest
 * positions), each a linear spring with constant
 *
 *   K_ij = E * (1 + d) / (s_ij^b + d),  s_ij = (L0_ij - L_min) / (L_max - L_min)
 *
 * where L_min and L_max are the shortest and longest rest lengths of the
 * mesh. The issue states the method's parameters only in words: "b controls
 * how fast K_ij changes with length between the mesh's shortest and longest
 * edges, d keeps edges near the shortest from growing too stiff, E the
 * spring's modulus"; the formula above is this project's reading of it: the
 * longest edge gets K = E, shorter edges are stiffer (as a rod's EA/L),
 * rising along s^b, and the shortest gets E (1 + d) / d, finite for d > 0.
 * A mesh whose edges all have one length (L_max - L_min below 1e-12 L_max)
 * takes s = 1, K = E everywhere.
 *
 * Solve: control points are the nodes the tool holds (given with their
 * prescribed positions); anchored nodes (inv_mass 0) and, for the local form,
 * every node outside the region stay where they are; the rest are the
 * non-control points. For each of them the residual force
 *
 *   R_i = sum_j K_ij (|x_j - x_i| - L0_ij) (x_j - x_i) / |x_j - x_i| + m_i g + f_ext_i
 *
 * is computed and x_i <- x_i + alpha R_i applied (a Jacobi sweep: all R from
 * the same positions), repeated until max_i |R_i| < tol or an iteration cap;
 * both and the iteration count are reported.
 * f_ext is the caller's (N per node, may be NULL); the daemon's quasi-static
 * session passes the tissue's t->f_ext through the learner (ts_learn.h:
 * ts_learner.f_ext), and the refined solve (ts_qstatic_refine.h) has the
 * same term.
 *
 * Local form: the region is found by breadth-first search over the outer
 * surface (sheet 0) from the contact point (ts_region.h); the region's
 * surface nodes that are in range, on every sheet, are free, everything else
 * is fixed.
 *
 * Memory: ts_qstatic_create allocates everything (springs, per-node spring
 * lists, the outer surface and its region workspace, the solve's scratch);
 * the solves do not allocate.
 */
#ifndef TS_QSTATIC_H
#define TS_QSTATIC_H

#include <stdint.h>

#include "ts_tissue.h"

typedef struct ts_qstatic_params {
  double E;          /* N/m, > 0: constant of the longest edge */
  double b;          /* > 0: how fast K changes with length */
  double d;          /* > 0: bound on the shortest edges' stiffness */
  double alpha;      /* m/N, > 0: relaxation step; 0 = automatic,
                        0.9 / max_i sum_j K_ij (stable: Gershgorin) */
  double tol;        /* N, > 0: stop when max |R_i| < tol */
  uint32_t max_iter; /* >= 1: iteration cap per solve */
} ts_qstatic_params;

/* Parameters for a tissue: E = the median small-strain constant k of its
 * springs (N/m), b = 1, d = 0.5, alpha automatic, tol = 1e-4 times the
 * heaviest free node's weight (at least 1e-12 N), max_iter = 200000.
 * Returns them zeroed for a NULL or empty tissue. */
ts_qstatic_params ts_qstatic_default_params(const ts_tissue *t);

/* Node roles in a solve. */
enum { TS_QS_FIXED = 0, TS_QS_FREE = 1, TS_QS_CONTROL = 2 };

typedef struct ts_qstatic {
  ts_qstatic_params p;
  double alpha;              /* the step in use, m/N */
  uint32_t n_nodes, n_springs;
  uint32_t (*ends)[2];       /* spring ends */
  double *L0;                /* rest lengths, m */
  double *K;                 /* constants, N/m */
  double L_min, L_max;       /* m */
  double *mass;              /* kg (0 for anchored nodes) */
  double gravity[3];         /* m/s^2 */
  uint32_t *adj_off;         /* n_nodes + 1 offsets into adj */
  uint32_t *adj;             /* per node: its springs */
  /* outer surface (sheet 0) for the region search */
  uint32_t n_surf;           /* nodes per sheet (all nodes for a single sheet) */
  uint32_t n_sheets;
  struct ts_mesh *surf;
  struct ts_meshtopo *topo;
  struct ts_region *region;
  /* scratch of the solve (one solve at a time per object) */
  uint32_t *region_nodes;    /* nodes of the selected region, every sheet */
  uint32_t n_region;
  int has_region;            /* a region was selected */
  uint8_t *role;             /* TS_QS_* per node */
  uint32_t *free_nodes;
  uint32_t n_free;
  uint32_t *active;          /* springs with a free end */
  uint32_t n_active;
  double (*R)[3];            /* residuals, N */
  double (*x_start)[3];      /* free nodes' start, restored on divergence */
  const atomic_int *stop;    /* the tissue's (ts_tissue.stop) when created: when set
                                and nonzero, a relaxation under way stops within 64
                                sweeps with TS_ESHUTDOWN, x back at its start */
} ts_qstatic;

/* Whether q->stop asks the sweeps to stop, looked at every 64th sweep. */
static inline int ts__qs_stop_asked(const ts_qstatic *q, uint32_t sweep) {
  return (sweep & 63u) == 0 && q->stop && atomic_load_explicit(q->stop, memory_order_relaxed);
}

typedef struct ts_qstatic_stats {
  uint32_t iterations;  /* relaxation sweeps done */
  double residual;      /* max_i |R_i| at the end, N */
  int converged;        /* residual < tol */
  uint32_t n_free;      /* non-control points solved for */
  uint32_t n_springs;   /* springs touching them */
} ts_qstatic_stats;

/* Builds the solver for t (its springs, rest positions, masses, gravity and
 * sheets; t is not kept). Returns 0, TS_EINVAL (NULL, no springs, a spring
 * end out of range or of zero rest length, parameters out of range or not
 * finite) or TS_ENOMEM. A tissue without outer surface triangles (a
 * hand-made chain) gets no region search: only the whole-mesh solve. */
int ts_qstatic_create(const ts_tissue *t, const ts_qstatic_params *p, ts_qstatic **out);
void ts_qstatic_destroy(ts_qstatic *q);

/* The internal (spring) force on node i at positions x (n_nodes of them), N. */
void ts_qstatic_node_force(const ts_qstatic *q, const double (*x)[3], uint32_t i, double f[3]);

/* Whole-mesh solve: every node that is not anchored and not a control point
 * is free. x (n_nodes positions, m) is the start and receives the result;
 * the n_ctrl control nodes ctrl[] are set to ctrl_pos[] first. f_ext (N per
 * node) may be NULL. Returns 0 (also when the cap was reached: see
 * stats->converged), TS_EINVAL (NULL, a control index out of range or
 * repeated), TS_ENAN (non-finite input), TS_EDIVERGED (the positions
 * became non-finite: x is then restored to its start) or TS_ESHUTDOWN
 * (q->stop asked it to stop: x restored to its start as well). */
int ts_qstatic_solve(ts_qstatic *q, double (*x)[3], const uint32_t *ctrl,
                     const double (*ctrl_pos)[3], uint32_t n_ctrl, const double (*f_ext)[3],
                     ts_qstatic_stats *stats);

/* Selects the region around a contact point (m) on the outer surface within
 * range (m) at positions x: the contact triangle is the outer surface
 * triangle nearest to the point. After it, ts_qstatic_solve_region solves
 * only there. Returns 0, TS_EINVAL (NULL, negative range, no outer surface)
 * or TS_ENAN. */
int ts_qstatic_select_region(ts_qstatic *q, const double (*x)[3], const double point[3],
                             double range);

/* Local solve: as ts_qstatic_solve, but only the nodes of the last selected
 * region (in range, every sheet, not anchored, not control) are free.
 * Returns as ts_qstatic_solve, and TS_EINVAL when no region was selected. */
int ts_qstatic_solve_region(ts_qstatic *q, double (*x)[3], const uint32_t *ctrl,
                            const double (*ctrl_pos)[3], uint32_t n_ctrl,
                            const double (*f_ext)[3], ts_qstatic_stats *stats);

/* The two halves of a solve, for callers that look at the start state
 * (ts_learn.h): prepare moves the control points to their positions and
 * sets the free nodes (local: of the selected region) and the springs
 * touching them; relax relaxes them. Return as ts_qstatic_solve. */
int ts_qstatic_prepare(ts_qstatic *q, double (*x)[3], const uint32_t *ctrl,
                       const double (*ctrl_pos)[3], uint32_t n_ctrl, const double (*f_ext)[3],
                       int local);
int ts_qstatic_relax(ts_qstatic *q, double (*x)[3], const double (*f_ext)[3],
                     ts_qstatic_stats *stats);

/* The relax half by Nesterov's accelerated gradient with adaptive restart
 * (ts_qstatic.c gives the method and references) instead of the plain
 * relaxation: the same equilibrium to the same tolerance (max |R_i| < tol,
 * or the iteration cap), in about the square root of the sweeps when the
 * free nodes are many and far from it (a whole tissue settling under
 * gravity: 1,156 nodes, 615 sweeps instead of 38,093). Allocates its
 * momentum (n_free x 3 doubles) for the call: meant for one-off solves, not
 * per press. Returns 0, TS_EINVAL (NULL), TS_ENOMEM, TS_EDIVERGED or
 * TS_ESHUTDOWN (q->stop; x then restored to its start either way). */
int ts_qstatic_relax_accel(ts_qstatic *q, double (*x)[3], const double (*f_ext)[3],
                           ts_qstatic_stats *stats);

/* Nodes that were free in the last solve (valid until the next prepare). */
static inline const uint32_t *ts_qstatic_free_nodes(const ts_qstatic *q, uint32_t *n) {
  *n = q->n_free;
  return q->free_nodes;
}

#endif
