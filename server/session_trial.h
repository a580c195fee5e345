/*
 * session_trial.h: a new session's cost, measured before it runs. On the
 * builder thread, once the session is set up, a few steps of its solver
 * from rest with no tool touching it are timed in the thread's CPU time,
 * and the tissue is then put back at rest, as it was built. The result is
 * the load of lane.h (CPU time over simulated time: 1 means one core keeps
 * the session at real time exactly), so that
 *   - a session that cannot keep real time starts on a slow physics thread
 *     (physics.c), instead of holding back the sessions of a real-time
 *     thread until the meter has seen it for two windows (a 0.7 s step of a
 *     large upload is 700 missed steps of each of them);
 *   - its client hears it in SessionCreated (step_load, and a warning in
 *     words when the session will run in slow motion), at creation rather
 *     than from the first frames;
 *   - the solver's one-time preparation (sorting the springs, the stability
 *     bounds) is done here, off the physics thread.
 * The measure is a lower bound of what the session will cost: no tool
 * touches the tissue, and a tool's contact adds to each step.
 */
#ifndef TS_SESSION_TRIAL_H
#define TS_SESSION_TRIAL_H

#include <stdint.h>

#include "session.h"

/* Timed steps stop once they have taken this much CPU time or this many
 * steps were timed, whichever comes first (the built-in patch: about 20
 * steps, 10 ms), or after the untimed first step alone took
 * TS_TRIAL_HEAVY_NS (a large upload: its first step is the estimate) */
#define TS_TRIAL_CPU_NS 20000000ull
#define TS_TRIAL_STEPS 20
#define TS_TRIAL_HEAVY_NS 250000000ull

typedef struct ts_trial {
  double load;       /* CPU time over simulated time; < 0: not measured */
  uint32_t steps;    /* steps taken, the untimed first one included */
  double cpu_s;      /* CPU time they took, s */
} ts_trial;

/* Builder thread, before the session is handed to the physics: measures
 * se (a mass-spring or XPBD session; a quasi-static one's cost comes in
 * bursts, at its solves, and is not measured: load -1) and puts its tissue
 * back at rest at its start time. A step that fails ends the trial (load
 * -1); the session then meets the same failure where it is reported, on
 * its physics thread. */
void ts_session_trial(ts_session *se, ts_trial *out);

/* The warning SessionCreated carries for a load over `over` (the daemon's
 * --slow-lane-load, or 1 without slow threads), in buf; "" otherwise. */
void ts_session_trial_warning(const ts_trial *tr, double over, char *buf, size_t cap);

#endif
