/*
 * shortcut.h: the physics of a quasi-static session (issue 6, the second
 * method): tool movements become intervals of the quasi-static solve
 * (ts_qstatic.h) on the region around the tool, recorded as samples, until a
 * learned model (ts_learn.h) is installed and switched on; then the model
 * gives the final positions instead of the solve. Owned by the physics
 * thread that steps the session; the loop thread reaches it only through the
 * session's mailbox and the events of physics.c.
 *
 * A tool acts while it moves: at the end of every interval (`interval`
 * seconds of simulated time) a tool that moved since the last one pushes
 * the outer-surface nodes inside its sphere (a capsule: the sphere at its
 * tip) out onto its surface; those are the method's control points, and the
 * rest of the region around the tool goes to equilibrium (or to the model's
 * prediction). A tool that leaves the tissue gives one more interval with no
 * control point, in which the region relaxes back. The reaction on the tool
 * is the sum of the internal and gravity forces on the nodes it holds.
 */
#ifndef TS_SHORTCUT_H
#define TS_SHORTCUT_H

#include <stdint.h>

#include "core/ts_learn.h"
#include "core/ts_qstatic.h"
#include "core/ts_tissue.h"
#include "core/ts_tool.h"
#include "frame.h" /* TS_MAX_TOOLS */

#define TS_SHORTCUT_RANGE 0.015   /* m: region search range around the tool */
#define TS_SHORTCUT_MIN_MOVE 1e-6 /* m: slower tools make no press */
#define TS_SHORTCUT_GUARD 2.0     /* a model answer moving a node over this x the press depth */
#define TS_SHORTCUT_GUARD_MIN 5e-4 /* m (or this) is replaced by the solve */

typedef struct ts_shortcut_stats {
  uint32_t presses;     /* presses this step */
  uint32_t iterations;  /* relaxation sweeps of them */
  int recorded_full;    /* recording stopped this step: 1 the sample set is full
                         * (max-training-samples), 2 it could not grow (out of memory) */
} ts_shortcut_stats;

typedef struct ts_shortcut {
  ts_qstatic *q;
  ts_learner *l;
  double interval;             /* s */
  double acc;                  /* s since the last interval */
  double last[TS_MAX_TOOLS][3]; /* tool centres at the last interval */
  int have_last[TS_MAX_TOOLS];
  int touching[TS_MAX_TOOLS];  /* the tool held nodes at its last interval */
  uint32_t *ctrl;              /* scratch: control nodes (outer sheet) */
  double (*ctrl_pos)[3];       /* and their positions */
  int use_learned;             /* the model answers when one is installed */
  int has_model;
  int full;                    /* the sample set is full: nothing more is recorded */
  uint64_t learned_presses;    /* presses the model answered */
  uint64_t fallbacks;          /* presses whose model answer was replaced by the solve */
  uint64_t solves;             /* presses the quasi-static solve answered */
  uint64_t unconverged;        /* of them, stopped by the iteration cap (q->p.max_iter)
                                  before max |R| < tol */
  double worst_residual;       /* the largest final max |R| of a solve, N */
  char material[512];          /* ts_learn_material_id: what models are kept under */
  ts_learn_solve solve;        /* the solve presses run (plain or refined, with its edge);
                                  set with the refinement, before physics owns the
                                  session: models record it and must match it */
} ts_shortcut;

/* For tissue t at rest: builds the solver (default parameters) and a learner
 * recording up to sample_cap samples, and relaxes t under gravity once
 * (the session starts at equilibrium). interval: s (> 0). Returns 0,
 * TS_EINVAL, TS_ENOMEM or TS_EDIVERGED. */
int ts_shortcut_create(ts_tissue *t, double interval, uint32_t sample_cap, ts_shortcut **out);
void ts_shortcut_destroy(ts_shortcut *sc);

/* Solves later presses on their region copied and refined to edges of at
 * most refine_edge metres (ts_learner_set_refine); below 0: the tissue's
 * mean outer-surface edge (ts_qsrefine_mean_edge; a tissue without an outer
 * surface then stays unrefined); 0 turns it off. t is the session's tissue.
 * Returns 0, TS_EINVAL or TS_ENOMEM. */
int ts_shortcut_set_refine(ts_shortcut *sc, const ts_tissue *t, double refine_edge);

/* Installs a trained model (later presses use it while use_learned). 0 or
 * TS_EINVAL (kind or sheet count not this tissue's). */
int ts_shortcut_install(ts_shortcut *sc, const ts_learn_model *m);

/* The tissue went back to rest: relax it under gravity again, forget the
 * tools' last positions. */
int ts_shortcut_reset(ts_shortcut *sc, ts_tissue *t);

/* One physics step of dt seconds with n tools (at most TS_MAX_TOOLS): time advances;
 * at an interval's end every active tool that moved makes a press, with its
 * reaction written to its force (torque zero). Returns 0, TS_EDIVERGED
 * (the state is then the last good one) or TS_ESHUTDOWN (the tissue's stop
 * flag, ts_tissue.stop: a solve under way was left, the daemon stopping). */
int ts_shortcut_step(ts_shortcut *sc, ts_tissue *t, ts_tool *tools, int n, double dt,
                     ts_shortcut_stats *st);

/* Samples recorded so far. */
static inline uint32_t ts_shortcut_samples(const ts_shortcut *sc) { return sc->l->set->n; }

/* Is the learned model answering? */
static inline int ts_shortcut_learned(const ts_shortcut *sc) {
  return sc->has_model && sc->use_learned;
}

#endif
