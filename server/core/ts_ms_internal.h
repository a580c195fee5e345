/*
 * ts_ms_internal.h: what the files of the mass-spring step share (not a
 * public interface): the step's private data (struct ts__ms: the compact
 * copy of the springs, the stability bounds, the mass scaling's factors, the
 * contact marks), a tool as one step sees it, and the functions each file
 * gives the others. The step is split by concept:
 *   ts_massspring.c    prepare, the public step and its health checks;
 *   ts_ms_springs.c    the step's copy of the springs (validation, sorting);
 *   ts_ms_forces.c     the spring law's evaluation (the force loop);
 *   ts_ms_integrate.c  the hybrid Taylor / Verlet / Beeman update;
 *   ts_ms_limit.c      strain limiting;
 *   ts_ms_bounds.c     the stability bounds and the substep count;
 *   ts_ms_sms.c        selective mass scaling;
 *   ts_ms_local.c      local mass scaling of a refined region;
 *   ts_ms_contact.c    tool contact;
 *   ts_ms_grasp.c      grasper jaws holding nodes;
 *   ts_ms_energy.c     the energies;
 *   ts_ms_guard.c      the inversion guard (layers kept the right way up).
 */
#ifndef TS_MS_INTERNAL_H
#define TS_MS_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "ts_aabb_tree.h"
#include "ts_massspring.h"
#include "ts_tissue.h"
#include "ts_tool.h"

#define TS__MAX_SPEED 100.0        /* m/s: faster than any tissue moves */
#define TS__MAX_SUBSTEPS 1000000u  /* a dt that needs more is refused */
#define TS__MAX_STEP_TOOLS 64
#define TS__MAX_DT 1.0             /* s */
#define TS__GROWTH_RATIO 1.2       /* kinetic energy growth per step ... */
#define TS__GROWTH_STEPS 20        /* ... sustained this long: diverged */
#define TS__KE_FLOOR 1e-12         /* J: below this, growth is not counted */
#define TS__STRAIN_MARGIN 0.01     /* strain the substep count allows for */
#define TS__RELAX 1.25             /* fewer substeps only with this much room */
#define TS__SMS_MARGIN 1.3         /* on the power-iteration estimate of w^2 */
#define TS__DAMP_LIMIT 0.5         /* h g below this (Beeman's damping: 0.6) */
#define TS__SKIN 1e-4              /* contact skin, relative to the tool radius */
#define TS__MAX(a, b) ((a) > (b) ? (a) : (b))
#define TS__MIN(a, b) ((a) < (b) ? (a) : (b))
#define TS__BLK 16                 /* springs per block of the force loop */
#define TS__STUCK 0x80             /* ctool flag: held by static friction */
#define TS__CTOOL 0x7f             /* ctool mask: 1 + the tool's index */

/* One spring as the force loop reads it. */
typedef struct ts__hs {
  uint32_t a, b;
  double L0, iL0; /* rest length and its inverse (0 for L0 = 0) */
  double k1, b1, k2, b2;
  double c;
} ts__hs;
_Static_assert(sizeof(ts__hs) == 64, "one spring per cache line");

/* Scratch memory that grows and is borrowed by one pass at a time
 * (ts_ms_scratch.c): ts__scratch_get gives at least bytes of it (contents
 * undefined; what an earlier borrower left is gone) or NULL when out of
 * memory. Start from {0}; ts__scratch_free ends it. */
typedef struct ts__scratch {
  void *p;
  size_t cap;
} ts__scratch;
void *ts__scratch_get(ts__scratch *s, size_t bytes);
void ts__scratch_free(ts__scratch *s);

/* A spring with a strain range, as strain limiting reads it. */
typedef struct ts__lim {
  uint32_t a, b;
  double lo, hi; /* allowed lengths, m */
} ts__lim;

/* The springs as the force loop reads them: the hot records' fields in
 * arrays of their own (structure of arrays), so that the loop's vector
 * lanes load consecutive springs' constants directly. Each array has
 * TS__BLK records of padding (rest length 1, constants 0) after the last. */
typedef struct ts__soa {
  uint32_t *a, *b;
  double *L0, *iL0, *k1, *b1, *k2, *b2, *c;
} ts__soa;

struct ts__ms {
  uint32_t n_nodes, n_springs;
  uint32_t n_lin, n_one, n_two; /* hs: the linear springs, then one term, two */
  uint32_t n_lim;
  ts__hs *hs;     /* for the bounds and the energy */
  ts__soa soa;    /* the same, for the force loop */
  ts__lim *lim;
  /* what strain limiting can skip on (ts__ms_limit_needed): the smallest
   * upper and largest lower strain bound of the limited springs, and their
   * largest 1 / L0 (INFINITY when one has L0 = 0) */
  double lim_hi_min, lim_lo_max, lim_il_max;
  /* the same per block of the force loop (ts_ms_limit.c, ts__ms_limit_first):
   * the blocks are TS__BLK consecutive hot springs of one class, n_blk of
   * them; for each, its first hot spring and count, its limited springs'
   * bounds as above (INFINITY, -INFINITY, 0 when it has none), and the
   * strain extremes of its springs at the last force evaluation */
  uint32_t n_blk;
  uint32_t *blk_first, *blk_n;
  double *blk_hi_min, *blk_lo_max, *blk_il_max;
  double *blk_eps_max, *blk_eps_min;
  /* and the largest b eps of its springs at the last force evaluation
   * (INFINITY before the first), from which the force loop chooses the
   * block's exponential (ts_ms_forces.c) */
  double *blk_x_max;
  uint32_t *hlim;  /* per hot spring: its index in lim, UINT32_MAX for none */
  uint32_t *cand;  /* scratch of n_springs entries */
  /* strain limiting's sparse passes (ts_ms_limit.c): per node i the limited
   * springs at it, lim_at[lim_off[i] .. lim_off[i + 1]) in ascending order,
   * and two bitmaps of n_lim bits (the springs due in the pass, the springs
   * at a node a correction moved); one block, made by the first pass that
   * needs it (NULL until then; lim_index_failed when memory ran out, and
   * the passes then walk every limited spring) */
  uint32_t *lim_off, *lim_at;
  uint64_t *lim_due, *lim_moved;
  int lim_index_failed;
  double move2;   /* the largest |x_(k+1) - x_k|^2 of the last update, m^2 */
  double edge_bound; /* m: the longest the contact surface's edges can be while
                        strain limiting holds (ts_massspring.c, contact_edge_bound);
                        -1 when some spring is not limited (the step then
                        measures the edges: ts__ms_longest_edge) */
  double w2, g;   /* bounds at rest: largest w^2 (1/s^2), damping rate (1/s) */
  double b_max;   /* largest exponent */
  double x_seen;  /* largest b eps (tension) at the last force evaluation */
  double eps_max, eps_min;
  double ke_prev; /* kinetic energy after the last step */
  uint32_t growth;
  double ke_run0; /* kinetic energy before the current run of growth */
  double e_run1[2]; /* kinetic and potential energy (ts_massspring_energy)
                       halfway through the run (ts_ms_diverge.c) */
  uint32_t n_last; /* substeps of the last step */
  double inertia;  /* the inertia scale the history (acc, acc_prev) is in,
                      >= 1 (ts_ms_bounds.c); 1: physical masses */
  /* selective mass scaling (ts_ms_sms.c) */
  int sms;
  uint32_t nv, S; /* columns, sheets */
  uint32_t *col;  /* per slot k = s * nv + j: the node (s, j) (the tissue's
                     column map; the per-slot arrays below are in this order) */
  int col_identity; /* 1 when col[k] == k (a built tissue) */
  double *beta;   /* per slot (s, j): the mass on its link to (s+1, j), kg */
  double *sl;     /* per slot: the column's L D L^T factors: multiplier */
  double *sip;    /* and inverse pivot */
  double *ob;     /* per slot: -beta to the free node below, 0 for none */
  double *mass;   /* per node: 1 / inv_mass, 0 for anchored nodes (the
                     physical mass: gravity, drag) */
  /* local mass scaling (ts_ms_local.c) */
  double *dm;     /* per node: inertia added, kg (0 for most) */
  double *iw;     /* per node: 1 / (mass + dm), the inverse of the inertia
                     (inv_mass itself, bit for bit, where dm = 0; 0 for
                     anchored nodes) */
  uint32_t dm_nodes; /* nodes with dm > 0 */
  double dm_total;   /* kg */
  double dm_region;  /* kg: those nodes' physical mass */
  double dm_target;  /* the stable substep the scaling aimed at, s (0: none) */
  /* the lumped masses' stiffness bound (ts_ms_bounds.c): per node, the
   * Collatz-Wielandt weights its last iteration reached at preparation, and
   * the step's scratch for the bound at the current strains */
  double (*wd)[3], (*wy)[3];
  double (*an)[3]; /* per node scratch: accelerations of the substep */
  /* per node scratch of the force loop (ts_ms_forces.c), 64-byte aligned:
   * x and v packed as (x, 0, v, 0), so that a spring end is one cache
   * line, and the forces as (f, 0), one vector each; f4_zero: 1 when the
   * integrator left f4 all zero (it reads each row once and clears it);
   * xv_ok: 1 when the rows hold every node's x and v but for the nodes
   * in clist (the integrators write the rows of the nodes they update,
   * strain limiting those it moves; contact marks every node it moves, and
   * the force loop refreshes the marked ones' rows), 0 when the force loop
   * must fill them all (the step clears it at its start and when the jaws
   * place nodes) */
  double (*xv)[8];
  double (*f4)[4];
  int f4_zero;
  int xv_ok;
  double (*cn)[3]; /* per node: the tool's outward normal at its contact */
  uint8_t *ctool;  /* per node: 1 + the caller's index of the tool it touched
                      at the end of the last substep, 0 for none; during a
                      substep's integration TS__STUCK is or-ed in for a node
                      that static friction holds */
  uint32_t *clist; /* the nodes with ctool set */
  uint32_t n_clist;
  /* a refinement's hand-over this step (ts_handover.h): forces fh times wh
   * added to the external ones (fh = the tissue's f_ext and wh = 0 when
   * there is none), contact allowances depth times wh (depth NULL: none) */
  const double (*fh)[3];
  double wh;
  const double *depth;
  /* a hand-over in rest lengths (ts_ms_handover.c): per spring of t, its
   * hot record's index and its index in lim (UINT32_MAX: none); hr_on: the
   * hot records and limits hold blended rest lengths (not the springs'
   * own; strain limiting's screening bounds then follow them) */
  uint32_t *hot_of, *lim_of;
  int hr_on;
  /* the tools' poses at the last step, by the caller's index (their
   * velocities for friction: ts_ms_contact.c) */
  double tl_pos[TS__MAX_STEP_TOOLS][3];
  double tl_quat[TS__MAX_STEP_TOOLS][4];
  uint8_t tl_seen[TS__MAX_STEP_TOOLS];
  /* the thin mesh tools' triangle pass (ts_ms_contact.c): the surface's AABB
   * tree, made at the first pass (NULL until then, or when it could not be
   * made: the pass then scans every triangle) and refitted for each pass,
   * and the query's scratch of one entry per triangle */
  ts_aabb_tree *tree;
  uint32_t *tri_buf;
  /* the jaws tools' grasps (ts_ms_grasp.c), by the caller's index; NULL
   * until a step sees jaws there */
  struct ts__msgrasp *grasp[TS__MAX_STEP_TOOLS];
  /* the inversion guard (ts_ms_guard.c; NULL: a tissue without layers) and
   * its share of the largest squared frequency this step (1/s^2; 0 when it
   * watches nothing) */
  struct ts__msguard *guard;
  double w2_guard;
};

/* A tool as one step sees it (prepared once per step). */
typedef struct ts__ptool {
  ts_tool *tool;
  double a[3], ab[3]; /* core segment a + u*ab, u in [0,1] */
  double inv_len2;    /* 1/|ab|^2, 0 for a sphere */
  double r;
  double bc[3], br2;  /* bounding sphere of the tool: centre, radius^2 */
  const struct ts_obb_tree *mesh; /* TS_TOOL_MESH: its tree (signed distance), else NULL */
  double R[3][3];     /* mesh: the pose's rotation (tool frame to world) */
  double skin;        /* contact skin, m (TS__SKIN of the radius or the mesh's reach) */
  int index;          /* in the caller's tools[] */
  double force[3];    /* sum over substeps */
  double torque[3];   /* sum over substeps, about the tool's tip */
  uint32_t contacts;  /* most in one substep of this step */
  double mus, muk;    /* Coulomb coefficients (0, 0: frictionless) */
  double vel[3];      /* the tool's velocity over the step (at pos), m/s */
  double omega[3];    /* and its angular velocity, rad/s */
  double from_pos[3]; /* the tool's pose at the last step (its pose now when none) */
  double from_q[4];   /* unit quaternion */
  double travel;      /* bound of the distance any tool point moved since, m */
  int swept;          /* sphere/capsule moving its core along its path over the
                         substeps (ts__ms_tool_at), 0: standing at its pose */
  double at_pos[3];   /* the tool's origin (tip) at the pose its contacts are taken
                         at: the pose of the sweep for a swept tool, pos otherwise */
  double at_R[3][3];  /* and its rotation there (R when standing) */
  double at_s0, at_s; /* a swept tool: the fractions of the step's way of its last
                         pose and of this one (the triangle pass sweeps between) */
  int thin;           /* sphere/capsule: the triangle pass on (ts_tool.thin_off 0) */
  struct ts__msgrasp *grasp; /* jaws: their grasp, else NULL */
  const struct ts_posed_tool *jaws; /* jaws: placed at this step's pose (their
                                       contact's signed distance), else NULL */
  const uint8_t *held; /* jaws: per node, 1 while they hold it (no contact) */
} ts__ptool;

/* Strain extremes seen by a force evaluation. */
typedef struct ts__strain {
  double x_max; /* largest b eps in tension */
  double eps_max, eps_min;
} ts__strain;

/* ts_ms_springs.c */

/* The hot record of spring s in o; returns its class (number of
 * exponential terms, 0 to 2). */
int ts__ms_hot_spring(const ts_spring *s, ts__hs *o);

/* Builds the hot springs of t into hs (n_springs records, sorted by class,
 * then node) and the class counts; orig (NULL: not wanted) gets each hot
 * record's index in t->springs. Returns 0, -1 for a malformed spring or
 * node, -2 when out of memory, -3 when t->stop asked to stop
 * (ts_tissue.stop). */
int ts__ms_build_hot(const ts_tissue *t, ts__hs *hs, uint32_t cnt[3], uint32_t *orig);

/* ts_ms_handover.c */

/* Fills ms->hot_of and ms->lim_of (allocated here, freed by ts__ms_free)
 * from orig (each hot record's index in t->springs). Returns 0 or -1 when
 * out of memory. */
int ts__ms_handover_index(const ts_tissue *t, struct ts__ms *ms, const uint32_t *orig);
/* The step's divergence tests (ts_ms_diverge.c): the kinetic energy into
 * *ke, the largest squared speed into *vmax2, the growth run updated; a
 * TS_DIVERGED_* (0: healthy), recorded in stats (may be NULL). */
int ts__ms_health(const ts_tissue *t, struct ts__ms *ms, double *ke, double *vmax2, ts_step_stats *stats);

/* Sets the step's rest lengths for a hand-over in rest lengths at weight w
 * (t->hand with ms_rest; the springs' own for none or w = 0). */
void ts__ms_handover_rest(const ts_tissue *t, struct ts__ms *ms, double w);

/* ts_ms_forces.c */

/* t->f = the spring and damper forces at (t->x, t->v); records the strain
 * extremes in ms (x_seen, eps_max, eps_min, and per block blk_eps_max,
 * blk_eps_min, blk_x_max; the last also chooses each block's exponential
 * at the next evaluation). */
void ts__ms_spring_forces(ts_tissue *t, struct ts__ms *ms);

/* The force loop's builds (ts_ms_forces.c): the best this CPU has (what
 * the step runs), the baseline, AVX2, AVX-512. */
enum { TS__MS_PATH_BEST, TS__MS_PATH_BASE, TS__MS_PATH_AVX2, TS__MS_PATH_AVX512 };

/* 1 when this build and CPU can run the force loop's path (TS__MS_PATH_*). */
int ts__ms_forces_path_ok(int path);

/* ts__ms_spring_forces by the given path (one it cannot run: the
 * baseline), for the tests that compare them. */
void ts__ms_spring_forces_path(ts_tissue *t, struct ts__ms *ms, int path);

/* The same into ms->f4 alone, which the step's integrators then read
 * (ts__ms_integrate, ts__ms_integrate_sms: they copy it to t->f and clear
 * it for the next pass, ms->f4_zero). */
void ts__ms_spring_rows(ts_tissue *t, struct ts__ms *ms);

/* ts_ms_bounds.c */

/* Gershgorin / Collatz-Wielandt bound on the largest eigenvalue of M^-1 K
 * (damping = 0, 1/s^2) or M^-1 C (damping = 1, 1/s) over the springs hs[0..
 * ns), lumped masses with inverses iw (t->inv_mass, or the step's inertia
 * ms->iw). d, y: scratch of n_nodes rows. */
double ts__ms_scaled_bound(const ts_tissue *t, const double *iw, const ts__hs *hs, uint32_t ns,
                           int damping, double (*d)[3], double (*y)[3]);

/* Both of ts__ms_scaled_bound's bounds at once, bit for bit the same, in
 * one pass over the springs an iteration: *w2 (damping = 0, d0 ends as its
 * weights) and *g (damping = 1). d0, y0, d1, y1: scratch of n_nodes rows.
 * reach: NULL, or {h, drag} for a caller that asks only whether the bounds
 * give a stable substep (ts__ms_step_bound(*w2, *g + drag, 1)) of h or
 * more: the iterations stop as soon as the answer is certain
 * (ts_ms_bounds.c), and *w2, *g are then the bounds so far. Returns 0 (ran
 * to the end: the answer from *w2, *g), 1 (reached, stopped early), 2 (out
 * of reach, stopped early) or -1 when out of memory. The preparation uses
 * the kept-records form below (ts__ms_abs_bounds); this one, which makes
 * its records for the one call, is what test_prepare_short holds it to. */
int ts__ms_scaled_bounds(const ts_tissue *t, const double *iw, const ts__hs *hs, uint32_t ns,
                         double (*d0)[3], double (*y0)[3], double (*d1)[3], double (*y1)[3],
                         const double *reach, double *w2, double *g);

/* The same two bounds over spring records made once and kept by the
 * caller (the bisection of ts_ms_local.c asks up to 12 questions over the
 * same springs, each with a few nodes' inertia changed): ts__ms_abs_bytes
 * is the room for ns springs' records, ts__ms_abs_fill fills them from
 * hs[0..ns) over the inverse masses iw (ts__ms_abs_fill_sheet: from t's
 * in-sheet springs, in t's order, as ts__ms_hot_spring makes them) and
 * returns their count na, ts__ms_abs_touching lists in idx (room for na)
 * the records with an end marked (mark[node] != 0) and returns how many,
 * ts__ms_abs_reweigh makes the listed records' inverse masses iw's (the
 * same bits as filling afresh, when only nodes at the listed records'
 * ends changed), and ts__ms_abs_bounds is ts__ms_scaled_bounds over the
 * records (ts__ms_abs_bound: ts__ms_scaled_bound): the same returns, the
 * same bits. */
typedef struct ts__asp ts__asp;
size_t ts__ms_abs_bytes(uint32_t ns);
uint32_t ts__ms_abs_fill(const ts_tissue *t, const double *iw, const ts__hs *hs, uint32_t ns, ts__asp *as);
uint32_t ts__ms_abs_fill_sheet(const ts_tissue *t, const double *iw, ts__asp *as);
uint32_t ts__ms_abs_touching(const ts__asp *as, uint32_t na, const unsigned char *mark, uint32_t *idx);
void ts__ms_abs_reweigh(ts__asp *as, const uint32_t *idx, uint32_t ni, const double *iw);
int ts__ms_abs_bounds(const ts_tissue *t, const ts__asp *as, uint32_t na, double (*d0)[3], double (*y0)[3],
                      double (*d1)[3], double (*y1)[3], const double *reach, double *w2, double *g);
double ts__ms_abs_bound(const ts_tissue *t, const ts__asp *as, uint32_t na, int damping, double (*d)[3],
                        double (*y)[3]);

/* Largest stable substep (s) for the bounds w2 (1/s^2), g (1/s) and the
 * stiffening factor phi (>= 1). */
double ts__ms_step_bound(double w2, double g, double phi);

/* w^2 and g bounds of t over its hot springs, lumped masses (scratch
 * allocated here). Returns 0 or -1 when out of memory. */
int ts__ms_rest_bounds(const ts_tissue *t, const ts__hs *hs, double *w2, double *g);

/* Largest eigenvalues of M~^-1 K (*w2) and of M~^-1 C (*g) by power
 * iteration, from below, both in one pass over the springs an iteration.
 * x0, y0, x1, y1: scratch of n_nodes rows. beat: NULL, or {h, drag} for a
 * caller that keeps the selective scaling only when its bounds (times
 * TS__SMS_MARGIN) give a stable substep above h: the iterations stop as
 * soon as they cannot (the estimates only grow), returning 1 with the
 * estimates so far. sc: scratch for the springs' records (NULL: allocated
 * here). Returns 0, 1, -1 when out of memory, or -2 when t->stop asked to
 * stop (ts_tissue.stop). */
int ts__ms_power_bounds(const ts_tissue *t, const struct ts__ms *ms, double (*x0)[3],
                        double (*y0)[3], double (*x1)[3], double (*y1)[3], const double *beat,
                        double *w2, double *g, ts__scratch *sc);

/* The substep count for a step of dt seconds (a double so that a huge count
 * can be refused; NaN possible); *phi_out gets the stiffening factor and
 * *scale_out the inertia scale the step is to use (1 unless t->max_substeps;
 * ts__ms_inertia_set applies it). */
double ts__ms_substep_count(const ts_tissue *t, struct ts__ms *ms, double dt, double *phi_out,
                            double *scale_out);

/* Makes s (>= 1) the inertia scale of the run: the remembered
 * accelerations (Beeman's history and the branch test's last force, both
 * force history divided by the inertia) are rescaled by ms->inertia / s,
 * positions and velocities kept. */
void ts__ms_inertia_set(ts_tissue *t, struct ts__ms *ms, double s);

/* ts_ms_sms.c */

/* The number of columns selective mass scaling works on (ts_tissue_columns,
 * 2 to TS_MAX_LAYERS + 1 sheets), 0 when t has none. */
uint32_t ts__ms_columns(const ts_tissue *t);

/* Factors the columns' tridiagonal mass matrices into ms->sl, ms->sip. */
void ts__ms_sms_factor(const ts_tissue *t, struct ts__ms *ms);

/* y <- M~^-1 y over the free nodes (anchored rows become zero). */
void ts__ms_sms_solve(const ts_tissue *t, const struct ts__ms *ms, double (*y)[3]);

/* x . M~ x over the free nodes (kg m^2/s^2 for a velocity x). */
double ts__ms_sms_mass_dot(const ts_tissue *t, const struct ts__ms *ms, const double (*x)[3]);

/* Chooses the links' masses ms->beta. d, y: scratch of n_nodes rows; sc:
 * scratch for the springs' records. Returns 0, -1 when there is nothing to
 * scale, -2 when out of memory. */
int ts__ms_sms_choose(const ts_tissue *t, struct ts__ms *ms, double (*d)[3], double (*y)[3],
                      ts__scratch *sc);

/* ts_ms_local.c */

/* Chooses the local mass scaling's added inertia ms->dm and sets ms->iw
 * (the inverses of the inertia; inv_mass where nothing is added): nothing
 * unless t->local_mass_scaling and t has reference bounds (t->lms_ref).
 * n_col: the columns selective mass scaling would run on (0: none). d, y:
 * scratch of n_nodes rows; sc: scratch for the springs' records. Returns 0
 * or -2 when out of memory. */
int ts__ms_local_choose(const ts_tissue *t, struct ts__ms *ms, uint32_t n_col, double (*d)[3],
                        double (*y)[3], ts__scratch *sc);

/* Records t's reference bounds (t->lms_ref) when it has none, from the
 * prepared ms (its selective scaling decided). d, y, sc: scratch. Returns
 * 0 or -2 when out of memory. */
int ts__ms_local_reference(ts_tissue *t, const struct ts__ms *ms, double (*d)[3], double (*y)[3],
                           ts__scratch *sc);

/* ts_ms_integrate.c */

/* One substep h (s) of the hybrid integrator for every free node, lumped
 * masses (ts__ms_integrate) or the scaled mass matrix (ts__ms_integrate_sms);
 * taylor: this is a Taylor substep; tool reactions go to pt (slot maps the
 * caller's tool index to pt, -1 for none); counts[branch] += nodes. */
void ts__ms_integrate(ts_tissue *t, struct ts__ms *ms, double h, int taylor, ts__ptool *pt,
                      const int8_t *slot, uint64_t counts[3]);
void ts__ms_integrate_sms(ts_tissue *t, struct ts__ms *ms, double h, int taylor,
                          ts__ptool *pt, const int8_t *slot, uint64_t counts[3]);

/* ts_ms_limit.c */

/* Provot's strain limiting after a substep of h seconds; returns the number
 * of corrections made. */
uint32_t ts__ms_limit_strain(ts_tissue *t, struct ts__ms *ms, double h);

/* 0 when no limited spring can be outside its range after the update that
 * just ran (so that strain limiting would find nothing), 1 otherwise. */
int ts__ms_limit_needed(const struct ts__ms *ms);

/* ts_ms_contact.c */

/* 0, TS_EINVAL or TS_ENAN for an active tool. */
int ts__ms_valid_tool(const ts_tool *tl);

/* Prepares tool tl for a step into p (index left for the caller). */
void ts__ms_prepare_tool(ts__ptool *p, ts_tool *tl);

/* The velocity (m/s) and angular velocity (rad/s) of p's tool over a step
 * of dt seconds from the pose ms remembers for caller index i (none
 * remembered: at rest), then remembers the tool's current pose. */
void ts__ms_tool_motion(struct ts__ms *ms, ts__ptool *p, int i, double dt);

/* A swept sphere or capsule (p->swept) at the pose the fraction s of the
 * way from its last step's pose to this one (ts_pose_lerp; s >= 1: this
 * step's pose exactly): its core segment and bounding centre. Others are
 * left as they are. */
void ts__ms_tool_at(ts__ptool *p, double s);

/* Coulomb friction on node i held by tool p with normal reaction N > 0 (N)
 * along the outward normal n: a is the node's acceleration after the
 * normal reaction (m/s^2; only its tangential part is read), g its
 * acceleration per newton of force on it ((M^-1)_ii, 1/kg), h the substep
 * (s). f gets the friction force on the node (N, tangential). Returns 1
 * when static friction holds the node (f is the force that makes its
 * tangential velocity the tool surface's over the next substep), 0 when it
 * slides (|f| = mu_k N against the slip). */
int ts__ms_friction(const ts_tissue *t, uint32_t i, const ts__ptool *p, const double n[3],
                    double N, const double a[3], double g, double h, double f[3]);

/* Projects the free nodes inside tool p onto its surface and marks them,
 * then takes the tool's triangle pass (thin mesh tools, spheres and
 * capsules); sweep nonzero: the pass also sweeps the tool from the pose of
 * the last pass (the last step's pose in the first substep of a step; a
 * swept sphere or capsule's last pose of the sweep in every substep). */
void ts__ms_contact(ts_tissue *t, struct ts__ms *ms, ts__ptool *p, int sweep);

/* The triangle pass of tool p (ts_ms_contact.c: a mesh, a sphere or a
 * capsule) with the tool at rotation R (tool frame to world) and origin o
 * (a capsule's core runs from o along R's second column), taking pierces up
 * to depth_cap deep (m; 0: the tool's thickness, a primitive's diameter):
 * move 0 marks only. use_tree
 * nonzero takes the triangles from ms's AABB tree of the surface (made or
 * refitted here; the scan when it cannot be made), 0 scans every triangle:
 * both give the same positions and marks (tests, benchmarks). Returns the
 * corners marked. */
uint32_t ts__ms_thin_pass(ts_tissue *t, struct ts__ms *ms, const ts__ptool *p,
                          const double R[3][3], const double o[3], double depth_cap, int move,
                          int use_tree);

/* The longest edge of t's surface triangles (m; 0 with none). */
double ts__ms_longest_edge(const ts_tissue *t);

/* 1 when sphere or capsule p's triangle pass can move a triangle of a
 * surface whose longest edge is `edge` (m) at the step's start, 0 when p is
 * too thick for it (ts_ms_contact.c): the step then skips the pass. */
int ts__ms_thin_can_act(const ts__ptool *p, double edge);

/* The same for a bound on the surface's edges that holds through the whole
 * step (struct ts__ms's edge_bound): no allowance for growth within it. */
int ts__ms_thin_can_act_bound(const ts__ptool *p, double bound);

/* ms's AABB tree of t's surface (and the query's scratch ms->tri_buf),
 * made when missing or when t's topology is not the tree's, else refitted
 * for t->x. NULL when it cannot be made (no surface, out of memory). */
ts_aabb_tree *ts__ms_surface_tree(const ts_tissue *t, struct ts__ms *ms);

/* ts_ms_grasp.c */

/* The grasp of jaws tool p (the caller's index i) for this step: made in ms
 * when missing or when the tool's shape changed (TS_ENOMEM possible), let
 * go at a start or reset, then ts_grasp_update with the step's candidates
 * at the tool's last pose and this step's opening. Sets p->grasp. Call
 * after ts__ms_tool_motion. Returns 0 or an error. */
int ts__ms_grasp_begin(ts_tissue *t, struct ts__ms *ms, ts__ptool *p, int i);

/* After a substep of h seconds: the nodes p's jaws hold put at their places
 * for the tool's pose the fraction s of the way from its last step's pose,
 * moving with it (velocity, Verlet's previous position), and the force
 * they hold back added to p->force, p->torque. */
void ts__ms_grasp_place(ts_tissue *t, const struct ts__ms *ms, ts__ptool *p, double s, double h);

/* The held nodes' slots in the scaled mass matrix's column order (slot k =
 * sheet * nv + column; ms->col), set by ts__ms_grasp_begin when the step
 * scales masses; returns their count (0 without scaling) and the array in
 * *out. */
uint32_t ts__ms_grasp_slots(const struct ts__msgrasp *mg, const uint32_t **out);

/* Lets go (NULL: nothing); the count held (NULL: 0); frees (NULL: nothing). */
void ts__ms_grasp_release(struct ts__msgrasp *mg);
uint32_t ts__ms_grasp_held(const struct ts__msgrasp *mg);
void ts__ms_grasp_free(struct ts__msgrasp *mg);

/* ts_ms_guard.c: the inversion guard's prisms for t (ms->guard; NULL for a
 * tissue without layered columns): 0 or TS_ENOMEM. */
int ts__ms_guard_prepare(const ts_tissue *t, struct ts__ms *ms);
/* At the start of a step of dt, before the substep count: the prisms it
 * watches this step and their stiffness bound (ms->w2_guard). */
void ts__ms_guard_watch(const ts_tissue *t, struct ts__ms *ms, double dt);
/* Adds the guard's forces at t->x into ms->f4; returns how many corner
 * tetrahedra it pushed. */
uint32_t ts__ms_guard_forces(const ts_tissue *t, struct ts__ms *ms);
/* The guard's stored energy at t->x over the prisms it watches, J. */
double ts__ms_guard_energy(const ts_tissue *t, const struct ts__ms *ms);
void ts__ms_guard_free(struct ts__msguard *g);

/* Frees the step's private data (NULL: nothing). */
void ts__ms_free(struct ts__ms *ms);

/* Keeps only the contact marks still valid at the tools' poses of this step. */
void ts__ms_revalidate_contacts(const ts_tissue *t, struct ts__ms *ms, const ts__ptool *pt,
                                const int8_t *slot);

/* Forgets the contact marks. */
void ts__ms_clear_contacts(struct ts__ms *ms);

#endif
