/*
 * lane.h: which physics thread a session belongs on. The daemon's real-time
 * threads step sessions that keep up with real time; a session whose steps
 * take more CPU time than they simulate (a large upload, a tiny dt) cannot,
 * and on a real-time thread every step of it holds back the sessions that
 * share the thread (one 0.7 s step of a 187,000-node tissue is 700 missed
 * steps of each). Such a session moves to a slow thread (physics.c), which
 * runs at a lower priority (--slow-lane-nice) and steps it as fast as the
 * cores left over allow; it comes back once it is cheap again (a refinement
 * undone, contact gone).
 *
 * The meter counts CPU time (the stepping thread's, CLOCK_THREAD_CPUTIME_ID),
 * not wall time, so a busy machine does not make a session look heavy; and
 * only computed steps (a sleeping tissue's steps cost nothing and say nothing
 * of what its next computed step costs). Its load is CPU time over simulated
 * time: 1 means one core keeps it at real time exactly.
 */
#ifndef TS_LANE_H
#define TS_LANE_H

#include <stdint.h>

/* A window closes once its CPU time or its simulated time reaches this:
 * 200 steps of a 1 kHz session, or one step of a heavy one */
#define TS_LANE_WINDOW_NS 200000000ull
/* Windows in a row over the threshold before a move to a slow thread (a
 * single slow step, e.g. a refinement's first, is not a heavy session), and
 * under TS_LANE_BACK times it before the move back (no moving to and fro
 * around the threshold) */
#define TS_LANE_WINDOWS 2
#define TS_LANE_BACK 0.5
/* Windows after a move in which no move is asked for: a session whose load
 * swings across the threshold (a quasi-static session's presses) moves at
 * most once per this many windows (2 s or more) */
#define TS_LANE_SETTLE 10

typedef struct ts_lane_meter {
  uint64_t cpu_ns;  /* this window's CPU time */
  uint64_t sim_ns;  /* and the simulated time its steps advanced */
  double load;      /* the last closed window's cpu / sim; -1 before the first */
  int run;          /* windows in a row that asked for the other lane */
  int settle;       /* windows still to close before a move may be asked for */
} ts_lane_meter;

void ts_lane_meter_init(ts_lane_meter *m);

/* After a move: the window measured on the old thread is dropped, and the
 * next TS_LANE_SETTLE windows ask for no move. */
void ts_lane_meter_moved(ts_lane_meter *m);

/* Adds one computed step. Returns the lane the session should be on after
 * it: 1 a slow thread, 0 a real-time one, given slow_now (where it is)
 * and threshold (--slow-lane-load; 0 or less: always 0). The answer differs
 * from slow_now only when a window closes and ends a run of TS_LANE_WINDOWS. */
int ts_lane_meter_add(ts_lane_meter *m, uint64_t cpu_ns, uint64_t sim_ns, int slow_now,
                      double threshold);

#endif
