/*
 * ts_learn.h: the learned shortcut of the second method (issue 6): samples
 * recorded from the quasi-static solve (ts_qstatic.h), a linear model of
 * the final positions, trained by batch gradient descent and checked against
 * the closed-form normal equations, and prediction.
 *
 * Samples: for every interval delta (one force application, a tool press)
 * and every non-control node the solve moved: the initial position x0 (the
 * state at the start of the interval, the control points already at their
 * prescribed positions), the internal force f at x0 (the springs of
 * ts_qstatic.h, N), gravity g = m_i * gravity (N), the final position x1
 * (the solve's equilibrium), for the rich model the mean internal force f1
 * of the node's spring neighbours and its sheet, and for the spread models
 * the spread displacements u_j and u2_j (m). Recording computes every kind's
 * features; a learned step only its model's.
 *
 * The method's model (TS_LEARN_METHOD, the default):
 *   h_theta(eta) = theta0 * x0 + theta1 * f + theta2 * g,
 * three scalars applied alike to each of the three components (the issue
 * writes theta0..theta2 as scalars multiplying vectors; this is that
 * reading: one sample gives three rows, one per axis, sharing theta).
 * J(theta) = 1/(2N) sum over rows (h_theta - x1)^2, N rows.
 *
 * The richer model (TS_LEARN_RICH, beyond the method): per sheet s its own
 * four scalars on (x0, f, g, f1): the sheets of different layers respond
 * differently, and f1 carries the pull of a neighbour held by the tool to
 * nodes one spring further. 4 * n_sheets parameters. It sees no further
 * than one spring, so the displacement that spreads through the region is
 * mostly missed (test_learn: hardly better than the method's).
 *
 * The spread model (TS_LEARN_SPREAD, beyond the method): 1 + TS_LEARN_HOPS
 * scalars on (x0, u_0 .. u_{H-1}), shared by every sheet, where the u_j
 * carry the start residual spread through the region. The quasi-static
 * solve is a Richardson iteration x <- x + alpha R(x); about the start state
 * R is nearly linear in the displacement, so the solve's first steps are
 * polynomials in the network's stiffness operator applied to the start
 * residual r = f + g. The features run a few such steps, cheaply: from
 * y = x0 (control points and fixed nodes where the solve keeps them),
 *   m <- mu m + omega D^-1 R(y),  y <- y + m,   m = 0 at the start,
 * D_i = sum_j K_ij over node i's springs (the Jacobi scale: every node
 * takes its own step), omega = TS_LEARN_SPREAD_OMEGA and the momentum
 * mu = TS_LEARN_SPREAD_MU (heavy ball: the smooth modes, which plain
 * Jacobi settles in about (region width in springs)^2 sweeps, settle in
 * about the width). The displacement v^(k) = y - x0 after k sweeps is kept
 * at k = 1, 2, 4, ..., 2^(H-1) as increments u_0 = v^(1) (= omega D^-1 r:
 * the method's f and g terms), u_j = v^(2^j) - v^(2^(j-1)) (the same span
 * as the v's, better conditioned). The model stays linear in theta: it
 * learns how to weigh the unfinished relaxation's stages.
 *
 * Measured on patch-S (test_learn.c: held-out RMS / max error, % of the
 * displacement; closed form): the method's 87 / 102, rich 81 / 105; spread
 * with scales 1..64 (H = 7): mu = 0 47 / 269 (per-sheet theta: 43 / 151),
 * mu = 0.8 10 / 32, mu = 0.9 6.9 / 6.2 (this), mu = 0.95 9.0 / 19; without
 * momentum scales up to 256 sweeps were needed for 8.3 / 31 (per-sheet
 * theta, 4 x the parameters: 8.1 / 28, hence shared); with f and g as
 * extra features the same 6.9 / 6.2. The sweeps cost about 1 % of the
 * solve's iterations (bench_learn.c).
 *
 * On the liver (bench_learn --quick) the spread model's worst case was 1.14
 * mm, 81 % of the largest displacement (RMS 17 %): the nodes that lag are
 * those whose motion is tangential to the thinned layers (thinned to about
 * a quarter depth in places), which the stiff short springs across a layer
 * barely resist, and above all the band of nodes at the region's rim that
 * are free for the first time in the interval while their inner neighbours
 * moved in earlier ones (the worst: 14.5 mm from the press, four fixed
 * neighbours, outer sheet, 1.36 mm of mostly sideways motion). D_i is set
 * by the stiff springs, so the scalar Jacobi step moves such nodes by a
 * small fraction of what their soft directions allow: after 64 sweeps the
 * worst node had gone 0.36 mm of its 1.36 (0.53 after 128, 1.34 after 256).
 * The solve itself had converged there (residual 7e-10 N, tol 2e-8 N;
 * against a solve 1,000 x tighter the held-out figures keep all four
 * digits). Measured with the
 * bench's presses (liver max / RMS, % of the displacement): 128 sweeps 58 /
 * 9.3, 256 sweeps 8.5 / 2.5, 512 sweeps 31 / 6.0 (the later stages nearly
 * proportional, the fit overshoots); mu = 0.8 84 / 22, mu = 0.95 76 / 18;
 * per-sheet theta 81 / 17.5; a uniform scale (the solve's alpha) 85 / 23;
 * f and g as extra features 81 / 17.5.
 *
 * The spread2 model (TS_LEARN_SPREAD2, beyond the method; the spread
 * model's successor, "spread" models stay as they were): 1 +
 * TS_LEARN_HOPS2 scalars on (x0, u2_0 .. u2_{H-1}), as the spread model but
 * each node's step scaled by its own 3 x 3 stiffness block instead of the
 * scalar D_i (block Jacobi):
 *   m <- mu m + omega B_i^-1 R_i(y),
 *   B_i = sum_j K_ij e_ij e_ij^T + TS_LEARN_SPREAD2_EPS D_i I,
 * e_ij the unit spring directions at the start state: a node moves along
 * its soft directions by what they allow. The linear stiffness is at most
 * twice its block diagonal (((u_i - u_j).e)^2 <= 2 (u_i.e)^2 + 2 (u_j.e)^2
 * for every spring), as it is at most twice D, so the sweeps stay stable
 * at the same omega and mu. Kept at 1 .. 128 sweeps (H = 8). Measured with
 * the bench's presses (max / RMS, % of the displacement): liver 5.6 / 3.3
 * (eps 0.01: 7.5 / 3.3; eps 0.1: 10.7 / 3.0; 64 sweeps: 51 / 7.9; the
 * scalar D_i with 256 sweeps: 8.5 / 2.5 at twice the cost); patch-S 0.05 /
 * 0.05 (test_learn: 0.07 / 0.06). The sweeps and the blocks cost about 2 x
 * the spread model's: 38 x faster than the solve on patch-S, 69 x on the
 * liver (bench_learn.c).
 *
 * On the refined solve (ts_qstatic_refine.h: the daemon's default), trained
 * on its own samples, every kind's features still come from the tissue's
 * own mesh (the copy's new nodes are internal to the solve), whose
 * equilibrium is not the refined copy's. Measured (RMS / max, % of the
 * displacement): patch-S (test_learn) method 86 / 98, rich 81 / 99,
 * spread 22 / 35, spread2 16 / 33; liver (bench_learn --quick) spread2
 * 31 / 94. The worst errors come from the second 1 mm interval on, when
 * the press is deeper than the 1 mm mucosa and the solve lets the prisms
 * under it fold (the nodes below the tool move up by 0.3 to 0.5 mm while
 * the tool goes down; test_qstatic_refine.c): the copy folds otherwise than
 * the tissue's mesh would, and the sweeps on that mesh do not see it.
 * Sweeps on the refined copy itself are the spread2r kind below.
 *
 * The spread2r model (TS_LEARN_SPREAD2R, beyond the method): spread2's
 * features and parameters (1 + TS_LEARN_HOPS2R scalars on x0 and the
 * increments u2r_j) with the sweeps run on the refined copy of the region
 * that the solve uses (ts_qstatic_refine.h: the same copy, built once per
 * interval for both), over the copy's free nodes and springs, each node's
 * step omega B_i^-1 from the copy's springs at the start state; the
 * increments are read back at the tissue's own free nodes, which are nodes
 * of the copy. The copy's new nodes so take part in the relaxation as they
 * do in the solve. On the plain solve (no refined copy) the copy would be
 * the tissue's own region, whose sweeps are spread2's: spread2r's features
 * are then spread2's first TS_LEARN_HOPS2R increments. Measured against the
 * refined solve (RMS / max, % of the displacement): patch-S 1.7 / 3.6
 * (test_learn_refined), liver 19 / 85 (bench_learn --quick), 27 to 29 x and
 * 44 x faster than the refined solve (ts_learn_refined.c).
 *
 * Training: the moments A = (1/N) sum phi phi^T and c = (1/N) sum phi y are
 * accumulated once (phi the feature row, y the target), so the batch
 * gradient grad J = A theta - c is exact over every sample at O(p^2) per
 * iteration. The features are scaled to unit RMS (theta~ = D theta, D the
 * column RMS) so that one step suits all parameters; gradient descent
 *   theta~ <- theta~ - beta (A~ theta~ - c~)
 * runs with step beta (default: 1 / lambda_max(A~), by power iteration)
 * until the relative change |d theta~| / |theta~| is below rel_tol or the
 * iteration cap; both are reported. The closed form solves A~ theta~ = c~ by
 * Cholesky.
 *
 * Threads: a learner belongs to one thread at a time. Training reads only a
 * sample set and writes a ts_learn_model, so a session can copy its samples
 * (ts_learn_set_copy), train the copy on another thread and hand the model
 * back to be installed between two steps (ts_learner_set_model).
 */
#ifndef TS_LEARN_H
#define TS_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "ts_qstatic.h"
#include "ts_qstatic_refine.h"

typedef enum ts_learn_kind {
  TS_LEARN_METHOD = 0,
  TS_LEARN_RICH = 1,
  TS_LEARN_SPREAD = 2,
  TS_LEARN_SPREAD2 = 3,
  TS_LEARN_SPREAD2R = 4
} ts_learn_kind;

#define TS_LEARN_KIND_LAST TS_LEARN_SPREAD2R

/* The spread model's sweeps: kept at 1, 2, 4, ..., 2^(TS_LEARN_HOPS-1). */
#define TS_LEARN_HOPS 7
#define TS_LEARN_SPREAD_OMEGA 0.9 /* relaxation factor of the Jacobi step */
#define TS_LEARN_SPREAD_MU 0.9    /* momentum */
/* The spread2 model's sweeps: kept at 1, 2, 4, ..., 2^(TS_LEARN_HOPS2-1);
 * omega and mu as the spread model's. */
#define TS_LEARN_HOPS2 8
/* spread2: the share of D_i added to the diagonal of each node's 3 x 3
 * stiffness block (keeps the block invertible where a node's springs lie
 * nearly in one plane or along one line) */
#define TS_LEARN_SPREAD2_EPS 0.03
/* The spread2r model's sweeps (on the refined copy): kept at 1, 2, 4, ...,
 * 2^(TS_LEARN_HOPS2R-1); omega, mu and eps as spread2's. */
#define TS_LEARN_HOPS2R 7

#define TS_LEARN_MAX_PARAMS (4 * TS_MAX_LAYERS + 4)

/* "method", "rich", "spread", "spread2" or "spread2r"; NULL for an unknown kind. Stored models
 * keep the name, so each name keeps its features: a new feature set is a
 * new kind, and a model of a kind this code does not know is refused. */
const char *ts_learn_kind_name(ts_learn_kind k);
/* Parses a kind name: 0, or TS_EINVAL. */
int ts_learn_kind_parse(const char *name, ts_learn_kind *out);
/* Parameter count of a kind for n_sheets sheets (0 when unknown or
 * n_sheets is 0 or too many). */
uint32_t ts_learn_n_params(ts_learn_kind k, uint32_t n_sheets);

typedef struct ts_learn_sample {
  double x0[3], f[3], g[3], f1[3], x1[3];
  double u[TS_LEARN_HOPS][3];   /* the spread model's spread displacements, m */
  double u2[TS_LEARN_HOPS2][3]; /* the spread2 model's, m */
  double u2r[TS_LEARN_HOPS2R][3]; /* the spread2r model's (on the refined copy), m */
  uint32_t sheet;
} ts_learn_sample;

typedef struct ts_learn_set {
  uint32_t n;    /* samples held */
  uint32_t cap;  /* the most it may hold (--max-training-samples) */
  uint32_t room; /* allocated for: it grows by doubling up to cap as samples
                  * arrive (ts_learn_set_reserve), so that a session's
                  * limit is not reserved whole at its creation */
  uint32_t n_sheets;
  int grow_failed; /* recording stopped because the store could not grow
                    * (out of memory: ts_learner_step's TS_EFULL) */
  ts_learn_sample *s;
  /* the recorded intervals behind the samples: how many, how many of their
   * solves stopped at the iteration cap (q->p.max_iter) before max |R| <
   * tol, and the largest final max |R|, N (ts_learner_step, record) */
  uint64_t intervals, unconverged;
  double worst_residual;
} ts_learn_set;

/* An empty set that may hold up to cap samples; it allocates room for
 * min(cap, TS_LEARN_SET_FIRST_ROOM) at once and the rest as samples arrive.
 * Returns 0, TS_EINVAL (cap or n_sheets 0, n_sheets over TS_MAX_LAYERS + 1)
 * or TS_ENOMEM. */
#define TS_LEARN_SET_FIRST_ROOM 256u
int ts_learn_set_create(uint32_t cap, uint32_t n_sheets, ts_learn_set **out);
/* Makes room for n samples in all: the room doubles (or grows to n, if
 * more), never past cap. Returns 0, TS_EFULL (n over cap; nothing changes)
 * or TS_ENOMEM (the set keeps its samples and room). */
int ts_learn_set_reserve(ts_learn_set *s, uint32_t n);
/* A copy holding the same samples (cap = room = count). */
int ts_learn_set_copy(const ts_learn_set *src, ts_learn_set **out);
void ts_learn_set_free(ts_learn_set *s);

typedef struct ts_learn_model {
  ts_learn_kind kind;
  uint32_t n_sheets;
  uint32_t n_params;
  double theta[TS_LEARN_MAX_PARAMS]; /* in the features' own units */
  double loss;                       /* J(theta) over the training rows, m^2 */
  uint64_t samples;                  /* training samples (nodes x intervals) */
  uint64_t iterations;               /* gradient descent iterations */
  double rel_change;                 /* last relative change of theta~ */
  int converged;                     /* rel_change < rel_tol before the cap */
} ts_learn_model;

typedef struct ts_learn_train_opts {
  double beta;          /* step on the scaled problem; 0 = 1 / lambda_max */
  double rel_tol;       /* stop when |d theta~| <= rel_tol |theta~| (> 0) */
  uint64_t max_iter;    /* iteration cap (>= 1) */
  /* progress, called about every 1/64 of the way and at the end: fraction
   * in [0, 1] (by iterations or by the decade of rel_change reached,
   * whichever is further) and the current loss, m^2; may be NULL */
  void (*progress)(void *ud, double fraction, double loss);
  void *progress_ud;
} ts_learn_train_opts;

/* beta 0, rel_tol 1e-15, max_iter 50,000,000, no progress. The error left
 * in theta~ is about the condition number of the scaled moments times
 * rel_tol: about 1e8 for the spread model's features, whose later sweeps
 * are nearly proportional, hence 1e-15 (not much slower than 1e-14: the
 * slowest mode has converged long before). */
ts_learn_train_opts ts_learn_train_defaults(void);

/* Gradient descent over the set for the given kind. Returns 0 (also when
 * the cap stopped it: see converged), TS_EINVAL (NULL, bad options, no
 * samples, unknown kind) or TS_ERANGE (a feature column is constant zero or
 * the moments are singular: the samples cannot determine theta). */
int ts_learn_train_gd(const ts_learn_set *set, ts_learn_kind kind,
                      const ts_learn_train_opts *opts, ts_learn_model *out);

/* The closed-form least-squares theta (normal equations). Returns 0,
 * TS_EINVAL or TS_ERANGE as ts_learn_train_gd. */
int ts_learn_train_closed(const ts_learn_set *set, ts_learn_kind kind, ts_learn_model *out);

/* J(theta) of a model over a set, m^2 (NaN for a mismatch). */
double ts_learn_loss(const ts_learn_model *m, const ts_learn_set *set);

/* The model's prediction of x1 for one sample's features. */
void ts_learn_predict_sample(const ts_learn_model *m, const ts_learn_sample *s, double x1[3]);

/* theta as bytes: n_params IEEE-754 doubles, little-endian. Returns the byte
 * count (8 n_params), or 0 when cap is too small. */
size_t ts_learn_theta_encode(const ts_learn_model *m, uint8_t *buf, size_t cap);
/* Reads theta for a kind and sheet count. Returns 0, or TS_EINVAL (unknown
 * kind, wrong byte count) or TS_ENAN (a non-finite value). */
int ts_learn_theta_decode(ts_learn_kind kind, uint32_t n_sheets, const uint8_t *buf,
                          size_t bytes, ts_learn_model *out);

/* ---- which solve a model learned ----------------------------------------- */

/* A model learns the solve its samples came from: the tissue's own mesh
 * (plain, `--qs-refine-edge 0`) or the region's refined copy with a given
 * longest edge; the two settle differently (test_learn_refined.c), so a
 * model is used only on the solve it learned. Models stored before this
 * was recorded (schema 3) read as unknown: which solve they learned cannot
 * be verified, so they run on none (they are still listed, exported and
 * deleted; retraining or re-importing them with their solve named makes a
 * model that runs). */
typedef enum ts_learn_solve_kind {
  TS_LEARN_SOLVE_UNKNOWN = 0,
  TS_LEARN_SOLVE_PLAIN = 1,
  TS_LEARN_SOLVE_REFINED = 2
} ts_learn_solve_kind;

typedef struct ts_learn_solve {
  ts_learn_solve_kind kind;
  double refine_edge; /* m, > 0 for a refined solve (INFINITY: copied, not refined), else 0 */
} ts_learn_solve;

/* "unknown", "plain" or "refined"; NULL for a value out of range. */
const char *ts_learn_solve_name(ts_learn_solve_kind k);
/* Parses a solve: name as above, refine_edge (m) > 0 for "refined" and 0
 * otherwise. Returns 0 or TS_EINVAL. */
int ts_learn_solve_parse(const char *name, double refine_edge, ts_learn_solve *out);
/* 1 when a model of solve `model` may run on solve `session`: both plain,
 * or both refined with edges equal within 1e-9 relative (the automatic edge
 * is recomputed from the same rest mesh); 0 when either is unknown. */
int ts_learn_solve_matches(ts_learn_solve model, ts_learn_solve session);
/* A text for messages: "plain", "refined (edge 1.88 mm)", "unknown".
 * Returns the length (truncated to cap). */
size_t ts_learn_solve_describe(ts_learn_solve s, char *buf, size_t cap);

/* ---- force applications (ts_learn_apply.c) ------------------------------ */

/* A tool press: the outer-sheet nodes within radius of point are held and
 * moved by depth along dir (unit vector into the tissue). */
typedef struct ts_learn_press {
  double point[3];  /* m */
  double dir[3];    /* unit */
  double radius;    /* m, > 0 */
  double depth;     /* m, this interval's displacement of the held nodes */
} ts_learn_press;

/* What a learner does with one interval. */
typedef struct ts_learn_step_stats {
  ts_qstatic_stats qs;  /* of the solve (zero for a learned step) */
  uint32_t n_ctrl;      /* control points */
  uint32_t n_free;      /* non-control points moved */
} ts_learn_step_stats;

typedef struct ts_learner {
  ts_qstatic *q;        /* not owned */
  double range;         /* region search range, m */
  int local;            /* 1: region solve; 0: whole mesh */
  ts_learn_set *set;    /* recorded samples (owned) */
  ts_qsrefine *rq;      /* refined solve (ts_learner_set_refine, owned); NULL:
                           the solve frees the region on the tissue's own mesh */
  ts_learn_model model; /* valid when learned */
  int learned;          /* 1: steps use the model */
  const double (*f_ext)[3]; /* external force per node of q's tissue, N, in every
                               solve (plain and refined); NULL: none. Not owned:
                               the caller sets it (the quasi-static session: its
                               tissue's t->f_ext). The models have no external
                               term: a learned step answers as if it were zero */
  /* scratch */
  double (*x0)[3];
  uint32_t *ctrl;
  double (*ctrl_pos)[3];
  uint32_t *nodes;
  ts_learn_sample *feat;
  double (*va)[3], (*vb)[3], (*vm)[3]; /* the spread features' Jacobi iterates, per node */
  double *dinv;              /* 1 / D_i per node, 1/(N/m) */
  double (*binv)[9];         /* spread2: omega B_i^-1 per node (row-major), m/N */
  /* spread2r (ts_learn_refined.c): the same per copy node of the refined
   * copy, grown with it; cmap: tissue node -> copy node (UINT32_MAX) */
  double (*ca)[3], (*cb)[3], (*cm)[3], (*cbinv)[9], *cd;
  uint32_t ccap;
  uint32_t *cmap;
  int copy_built;            /* the copy of this interval is built (begin) */
  uint64_t n_refreshed;      /* spread2r intervals whose sweeps blew up with the start
                                blocks and ran again with blocks that follow the nodes */
} ts_learner;

/* A learner over q recording up to sample_cap samples; range (m, > 0) is
 * the region search range, or 0 for whole-mesh solves. Returns 0,
 * TS_EINVAL or TS_ENOMEM. */
int ts_learner_create(ts_qstatic *q, double range, uint32_t sample_cap, ts_learner **out);
void ts_learner_destroy(ts_learner *l);

/* Makes the solve of later intervals the refined one (ts_qstatic_refine.h):
 * the region copied and refined to edges of at most refine_edge (m) inside
 * the range; samples are still recorded on the tissue's own free nodes (the
 * copy's new nodes are internal to the solve), so the per-node model applies
 * unchanged. t is q's tissue (for its rest positions). refine_edge 0 turns
 * refinement off again; INFINITY copies without refining. Needs a region
 * solve (range > 0). Returns 0, TS_EINVAL (NULL, refine_edge negative or
 * NaN, whole-mesh learner) or TS_ENOMEM. */
int ts_learner_set_refine(ts_learner *l, const ts_tissue *t, double refine_edge);

/* The solve this learner runs (plain or refined with its edge). */
ts_learn_solve ts_learner_solve(const ts_learner *l);

/* Installs a trained model: later steps use it. Returns 0 or TS_EINVAL
 * (kind unknown, sheet count not q's). */
int ts_learner_set_model(ts_learner *l, const ts_learn_model *m);

/* One interval: the control points of the press are moved, then the
 * non-control points (of the region when local) go to the quasi-static
 * equilibrium (record != 0: and the samples are recorded; a full set is
 * TS_EFULL, with x already advanced and the samples that fit recorded; a
 * set that could not grow is TS_EFULL too, with set->grow_failed set, x
 * advanced and none of this interval's samples recorded) or, when learned,
 * to the model's prediction. x: n_nodes positions, m, updated. Returns 0,
 * TS_EINVAL, TS_ENAN, TS_ERANGE (the press holds no node), TS_EDIVERGED,
 * TS_EFULL, TS_ENOMEM (the solve's own scratch) or TS_ESHUTDOWN (q->stop:
 * the solve was left, nothing recorded). */
int ts_learner_step(ts_learner *l, double (*x)[3], const ts_learn_press *p, int record,
                    ts_learn_step_stats *stats);

/* As ts_learner_step with the control points given: ctrl[k] (node indices,
 * no repeats) go to ctrl_pos[k] (m); the region is searched from point (m).
 * n_ctrl may be 0: the region relaxes (or the model answers) with nothing
 * held, as after a tool lets go. Returns as ts_learner_step (TS_EINVAL also
 * for an index out of range, TS_ENAN for a non-finite position). */
int ts_learner_step_controls(ts_learner *l, double (*x)[3], const uint32_t *ctrl,
                             const double (*ctrl_pos)[3], uint32_t n_ctrl, const double point[3],
                             int record, ts_learn_step_stats *stats);

/* Error accumulator of ts_learner_compare. */
typedef struct ts_learn_error {
  uint64_t n;        /* node positions compared */
  double sum_err2;   /* m^2 */
  double max_err;    /* m */
  double sum_disp2;  /* of the solve's displacement |x1 - x0|, m^2 */
  double max_disp;   /* m */
} ts_learn_error;

/* Runs one interval from x both ways: the quasi-static solve (x advances
 * along it, nothing recorded) and the model (l must be learned), adding the
 * position differences over the non-control points to err. Returns as
 * ts_learner_step. */
int ts_learner_compare(ts_learner *l, double (*x)[3], const ts_learn_press *p,
                       ts_learn_error *err);

/* As ts_learner_compare for n models at once (each of q's sheet count, l
 * need not be learned): one solve, err[k] for models[k]. Returns as
 * ts_learner_step (TS_EINVAL also for a model that does not fit). */
int ts_learner_compare_models(ts_learner *l, double (*x)[3], const ts_learn_press *p,
                              const ts_learn_model *models, uint32_t n, ts_learn_error *err);

/* A text naming the material a model belongs to: the tissue's layers
 * (name, thickness, axial and radial laws) and the solve's parameters
 * (E, b, d), "%.6g" numbers. Returns the length written (truncated to cap)
 * or 0 for bad arguments. */
size_t ts_learn_material_id(const ts_tissue *t, const ts_qstatic_params *p, char *buf, size_t cap);

#endif
