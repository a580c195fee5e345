/*
 * physics.h: the physics threads. Each owns a disjoint set of sessions and
 * steps each at its own fixed dt on an earliest-deadline schedule, in real
 * time. Frames and notices go to the server's outbox (uv_async_send wakes the
 * loop, which drains it whole). Falling behind is counted and flagged in
 * frames, never silent; so is a stall (one step over stall-threshold).
 */
#ifndef TS_PHYSICS_H
#define TS_PHYSICS_H

#include "session.h"

typedef struct ts_physics ts_physics;

int ts_physics_start(ts_server *s, int n_threads, ts_physics **out);

/* Hands a session to the least loaded real-time thread, or to the least
 * loaded slow one when its creation's trial load (trial_load, < 0: none;
 * session_trial.h) is over --slow-lane-load (loop thread). Returns 1 when
 * it went to a slow thread, 0 otherwise. */
int ts_physics_add(ts_physics *p, ts_session *se, double trial_load);

/* Asks the owning thread to drop a session; an outbox event
 * TS_EV_REMOVED follows, after which the loop may free it. */
void ts_physics_remove(ts_physics *p, ts_session *se);

/* Stops and joins every thread; sessions stay allocated (caller frees). */
void ts_physics_stop(ts_physics *p);

/* Real-time threads (as many slow ones besides, unless --slow-lane-load is 0). */
int ts_physics_threads(const ts_physics *p);

/* 1 when the slow threads run (--slow-lane-load above 0; lane.h). */
int ts_physics_slow_lane(const ts_physics *p);

/* Loop thread: 1 when a slow thread steps se, or it is on its way to one. */
int ts_physics_on_slow(const ts_physics *p, const ts_session *se);

/* Loop thread, on TS_EV_LANE: moves se to the least loaded slow thread
 * (to_slow 1) or real-time one (0). Detaches it from its thread; the
 * thread's TS_EV_DETACHED then goes to ts_physics_detached, which adds it
 * to the other. Returns 1 when a move began, 0 when there is none to make
 * (already there or on its way, ending, no slow threads). */
int ts_physics_move(ts_physics *p, ts_session *se, int to_slow);

/* Evening out the real-time threads (loop thread, once a second): each
 * session's load as its newest frame says (step load; 0 asleep; not yet
 * measured: left out) summed per real-time thread. When the busiest sum is
 * over TS_BALANCE_BUSY, the session of that thread whose move to the least
 * busy one leaves the larger of the two sums smallest moves there, if that
 * is at least TS_BALANCE_GAIN under the busiest sum now; one move per call,
 * a session at most once per TS_BALANCE_GAP_MS. Sessions ending elsewhere
 * leave the survivors where they were placed, two on one thread while
 * another idles: this moves one over. Returns 1 when a move began (what it
 * is in *out), else 0. */
#define TS_BALANCE_BUSY 0.8       /* of a core: a thread this busy misses deadlines on jitter */
#define TS_BALANCE_GAIN 0.1       /* of a core: less is not worth a move */
#define TS_BALANCE_GAP_MS 10000
#define TS_BALANCE_MAX_THREADS 256 /* --physics-threads at most */
typedef struct ts_physics_balance_move {
  uint32_t session_id;
  int from, to;            /* the threads' indices */
  double load;             /* the session's */
  double from_sum, to_sum; /* the threads' before the move */
} ts_physics_balance_move;
int ts_physics_balance(ts_physics *p, uint64_t now_ms, ts_physics_balance_move *out);

/* Loop thread, on TS_EV_DETACHED: adds se where ts_physics_move sends it,
 * unless it was removed meanwhile. */
void ts_physics_detached(ts_physics *p, ts_session *se);

/* Frame flag bits (Frame.flags) set by the physics threads. */
#define TS_FRAME_BEHIND 1u  /* fell behind real time since the last frame */
#define TS_FRAME_STALLED 2u /* a step took longer than stall-threshold since the last frame */
#define TS_FRAME_LEARNED 4u /* quasi-static session: the learned model made this state */

/* Stall episodes so far, all sessions (any thread). An episode starts with a
 * step of a session that took longer than the server's stall-threshold and
 * lasts until one of its steps is back under it; it is logged once. */
uint64_t ts_physics_stalls(const ts_physics *p);

#endif
