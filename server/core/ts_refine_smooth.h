/*
 * ts_refine_smooth.h: Loop's smoothing rules made fit for a live refinement
 * (ts_refine_opts.smooth_rest, ts_refine.h): the smoothed rest shape
 * limited per vertex where it would invert a prism, turn a sheet triangle
 * over or make two sheets cross, and the hand-over's blend long enough for
 * the rest change it leaves (the rule in ts_refine_smooth.c). Internal to
 * the refinement (ts_refine.c) and its tests.
 */
#ifndef TS_REFINE_SMOOTH_H
#define TS_REFINE_SMOOTH_H

#include <stddef.h>
#include <stdint.h>

#include "ts_extrude.h"
#include "ts_loop.h"

/* The rest shape's largest speed during the blend, m/s, unless
 * ts_refine_opts.smooth_rate says otherwise: the blend time is at least
 * 1.5 D / rate for a largest rest change D (the smoothstep's steepest
 * slope is 1.5 / T), so each 1 ms step moves the rest shape by at most
 * rate x 1 ms (2.5 um). Measured on the default patch (test_refine_smooth):
 * the tissue follows its rest shape's change by up to about twice that
 * beyond an unrefined twin's motion, and the midpoint refinement's own
 * blend takes up to 5.2 um of the quantum's 10 um (ts_handover.h). */
#define TS_REFINE_SMOOTH_RATE 2.5e-3
/* The longest blend a smoothed refinement takes, s: past it the smoothing
 * is scaled back, every vertex alike, to the change the cap allows. */
#define TS_REFINE_SMOOTH_MAX_BLEND 2.0
/* A vertex's share of the smoothing is halved while it makes trouble, and
 * below this share set to none (its midpoint / its old rest position). */
#define TS_REFINE_SMOOTH_MIN_SHARE (1.0 / 64)

typedef struct ts__refine_smooth_out {
  uint32_t limited;   /* surface vertices whose smoothing was scaled back (slivers,
                         turned triangles, crossings; not the global cap) */
  uint32_t rounds;    /* rounds of the check */
  double scale;       /* the global scale of the cap (1: none) */
  double rest_move;   /* m: the largest rest change left, against midpoints */
  double blend;       /* s: the blend time the change needs (1.5 rest_move / rate) */
} ts__refine_smooth_out;

/* Loop's refinement of sel (nd distinct surface triangles of e) with the
 * smoothing rules, limited as ts_refine_smooth.c says, into *out (the
 * refined extrusion, no inverted prism, no crossing) and *plan (the
 * topology's plan: its edge_ends are the new vertices' parents, as with
 * TS_LOOP_LINEAR). rate: the rest shape's speed bound (m/s, > 0); max_blend
 * the cap (s, > 0). Returns 0, or as ts_loop_extrusion with TS_LOOP_LINEAR
 * (the midpoint refinement's own refusals), TS_ENOMEM. */
int ts__refine_smooth(const ts_extrusion *e, const uint32_t *sel, uint32_t nd, double rate, double max_blend,
                      ts_extrusion **out, ts_loop_plan **plan, ts__refine_smooth_out *info, char *err,
                      size_t errcap);

#endif
