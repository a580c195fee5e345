/*
 * physics.c: the physics threads (see physics.h). A thread keeps its
 * sessions in an array, steps every session whose deadline has come (several
 * steps to catch up after a short stall, at most TS_MAX_CATCHUP), then sleeps
 * on its condition variable until the earliest deadline or a new command. A
 * session slower than real time is always due: the thread then never sleeps.
 * The loop is woken for a session's forces and frames once its due steps
 * are done, and while it catches up also after a step, once TS_WAKE_GAP_NS
 * have passed since the last wake: a pose's force does not wait for the
 * rest of the run of steps.
 *
 * Stalls: every step is timed (wall clock, uv_hrtime). A step over the
 * server's stall-threshold starts a stall episode for its session: the
 * first such step logs one warning and counts one episode
 * (tissued_physics_stalls_total); every frame published during the episode
 * carries TS_FRAME_STALLED, so the session's clients see it in the stream.
 * The episode ends at the first step back under the threshold (logged too).
 * A step that never returns is not caught here; the frames then stop, which
 * clients see as silence.
 *
 * The slow lane (lane.h): besides the real-time threads there are as many
 * slow ones, tissued-slow0, ..., at --slow-lane-nice, unless
 * --slow-lane-load is 0 (one per core, as the real-time ones: two heavy
 * sessions alone on two cores take a core each). Every
 * computed step's CPU time goes to its session's meter; when the meter says
 * the session belongs on the other kind of thread, the thread asks the loop
 * (TS_EV_LANE), the loop detaches the session from it (a remove that ends in
 * TS_EV_DETACHED instead of TS_EV_REMOVED) and adds it to the other
 * (ts_physics_move). Between the two it is stepped by neither. A removal
 * asked for meanwhile goes to the thread it was detached from, which finds
 * nothing and answers TS_EV_REMOVED as for any removal (commands are taken
 * in order, so after TS_EV_DETACHED).
 */
#include "physics.h"


#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "force.h"
#include "log.h"
#include "server.h"
#include "thread_self.h"

#define TS_MAX_CATCHUP 20
#define TS_CATCHUP_BUDGET 5 /* wall time for catching up, in the session's dt */
/* Catching up, the loop is woken after a step once this long has passed
 * since the last wake (below, thread_main) */
#define TS_WAKE_GAP_NS 500000ull

typedef struct pthread_ctx {
  ts_physics *pool;
  int index;
  uv_thread_t thread;
  uv_mutex_t lock;
  uv_cond_t cond;
  int stop;
  /* commands from the loop, under lock */
  ts_session **adds;
  uint32_t n_adds, cap_adds;
  ts_session **removes;     /* removals and detachments, in the order asked */
  uint32_t n_removes, cap_removes;
  uint8_t *detach;          /* per removes[i]: 1 detach (a move), 0 remove */
  uint32_t cap_detach;
  /* owned by the thread */
  ts_session **sessions;
  uint32_t n_sessions, cap_sessions;
  uint32_t load; /* sessions assigned (loop's view) */
  uint64_t woken_ns; /* when the thread last woke the loop (uv_hrtime) */
} pthread_ctx;

struct ts_physics {
  ts_server *server;
  int n;                         /* threads started, the slow one included */
  int n_rt;                      /* real-time threads: threads[0 .. n_rt-1] */
  int n_slow;                    /* slow threads: threads[n_rt .. n_rt+n_slow-1]; 0 none */
  double slow_load;              /* --slow-lane-load */
  int slow_nice;                 /* --slow-lane-nice */
  pthread_ctx *threads;
  uint64_t stall_ns;             /* stall-threshold */
  atomic_uint_fast64_t stalls;   /* episodes, all threads */
};

/* Times one step of se against the stall threshold (physics thread; see
 * the top of this file). */
static void check_stall(ts_physics *p, ts_session *se, uint64_t took_ns) {
  ts_session_sim *sim = &se->sim;
  if (took_ns > p->stall_ns) {
    sim->stall_flag = 1;
    if (!sim->stalling) {
      sim->stalling = 1;
      atomic_fetch_add(&p->stalls, 1);
      ts_log_warn("physics: session %u stalled: one step took %.1f ms (stall-threshold %.3g ms)",
                  se->id, (double)took_ns * 1e-6, (double)p->stall_ns * 1e-6);
    }
  } else if (sim->stalling) {
    sim->stalling = 0;
    ts_log_info("physics: session %u steps within stall-threshold again", se->id);
  }
}

/* Meters one computed step of se (physics thread; lane.h) and asks the loop
 * to move it when its meter says so; once, until it has moved. */
static void lane_meter(ts_physics *p, ts_session *se, uint64_t cpu_ns, int *woke) {
  ts_session_sim *sim = &se->sim;
  const int want = ts_lane_meter_add(&sim->lane, cpu_ns, sim->dt_ns, sim->slow_lane,
                                     p->n_slow ? p->slow_load : 0);
  if (want == sim->slow_lane || sim->lane_asked) return;
  double *load = malloc(sizeof *load); /* for the loop's log line */
  if (!load) return;                   /* asked again at the next window's end */
  *load = sim->lane.load;
  if (ts_outbox_push_payload(&p->server->outbox, TS_EV_LANE, se, load, want) == 0) {
    sim->lane_asked = 1;
    *woke = 1;
  } else {
    free(load);
  }
}

static int push_ptr(ts_session ***arr, uint32_t *n, uint32_t *cap, ts_session *se) {
  if (*n == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 8;
    ts_session **a = realloc(*arr, sizeof *a * nc);
    if (!a) return TS_ENOMEM;
    *arr = a;
    *cap = nc;
  }
  (*arr)[(*n)++] = se;
  return 0;
}

static void publish(ts_physics *p, int kind, ts_session *se, ts_frame_ref *f, int *woke) {
  while (ts_outbox_push(&p->server->outbox, kind, se, f)) {
    /* out of memory: frames may be lost, removals may not */
    if (kind == TS_EV_FRAME) {
      ts_frame_release(f);
      return;
    }
    uv_sleep(1);
  }
  *woke = 1;
}

/* Queues a removal (detach 0) or a detachment (1) on t (loop thread, t's
 * lock held). */
static int push_remove(pthread_ctx *t, ts_session *se, int detach) {
  if (t->cap_detach < t->n_removes + 1) {
    uint32_t nc = t->cap_detach ? t->cap_detach * 2 : 8;
    uint8_t *d = realloc(t->detach, nc);
    if (!d) return TS_ENOMEM;
    t->detach = d;
    t->cap_detach = nc;
  }
  if (push_ptr(&t->removes, &t->n_removes, &t->cap_removes, se)) return TS_ENOMEM;
  t->detach[t->n_removes - 1] = (uint8_t)(detach != 0);
  return 0;
}

static void apply_commands(pthread_ctx *t, int *woke) {
  uv_mutex_lock(&t->lock);
  for (uint32_t i = 0; i < t->n_adds; i++) {
    ts_session *se = t->adds[i];
    ts_session_sim *sim = &se->sim;
    sim->next_step_ns = uv_hrtime();
    sim->slow_lane = t->index >= t->pool->n_rt;
    sim->lane_asked = 0;
    if (sim->lane.load >= 0) ts_lane_meter_moved(&sim->lane); /* measured before: a move */
    if (push_ptr(&t->sessions, &t->n_sessions, &t->cap_sessions, se)) {
      ts_log_error("physics: out of memory adding session %u", se->id);
      publish(t->pool, TS_EV_REMOVED, se, NULL, woke);
    }
  }
  t->n_adds = 0;
  for (uint32_t i = 0; i < t->n_removes; i++) {
    ts_session *se = t->removes[i];
    for (uint32_t j = 0; j < t->n_sessions; j++) {
      if (t->sessions[j] == se) {
        t->sessions[j] = t->sessions[--t->n_sessions];
        break;
      }
    }
    publish(t->pool, t->detach[i] ? TS_EV_DETACHED : TS_EV_REMOVED, se, NULL, woke);
  }
  t->n_removes = 0;
  uv_mutex_unlock(&t->lock);
}

static void thread_main(void *arg) {
  pthread_ctx *t = arg;
  ts_physics *p = t->pool;
  char name[16]; /* what top -H shows: tissued-phys0, ..., tissued-slow0, ... */
  const int slow = t->index >= p->n_rt;
  if (slow)
    snprintf(name, sizeof name, "tissued-slow%d", (t->index - p->n_rt) % 100);
  else
    snprintf(name, sizeof name, "tissued-phys%d", t->index % 100);
  ts_thread_self_setup(name, slow ? p->slow_nice : 0); /* the slow ones yield */
  for (;;) {
    int woke = 0;
    apply_commands(t, &woke);
    uint64_t now = uv_hrtime();
    uint64_t earliest = now + 50 * 1000000ull;
    for (uint32_t i = 0; i < t->n_sessions; i++) {
      ts_session *se = t->sessions[i];
      ts_session_sim *sim = &se->sim;
      int done = 0;
      /* catching up is bounded in wall time too: a session whose steps are
       * slower than real time takes one step per pass, so the thread's other
       * sessions and its stop request wait one step, not TS_MAX_CATCHUP */
      uint64_t budget_end = uv_hrtime() + TS_CATCHUP_BUDGET * sim->dt_ns;
      while (sim->next_step_ns <= now && done < TS_MAX_CATCHUP) {
        int diverged = 0;
        const uint64_t slept = sim->sleep.slept_steps;
        const uint64_t c0 = ts_thread_self_cpu_ns();
        uint64_t t0 = uv_hrtime();
        ts_frame_ref *f = ts_session_step(se, &diverged);
        check_stall(p, se, uv_hrtime() - t0);
        if (sim->sleep.slept_steps == slept) /* computed, not slept (lane.h) */
          lane_meter(p, se, ts_thread_self_cpu_ns() - c0, &woke);
        if (f && sim->stall_flag) {
          f->flags |= TS_FRAME_STALLED;
          sim->stall_flag = 0;
        }
        if (diverged) { /* with the reason, a copy (NULL when out of memory: the event still goes) */
          const size_t len = strlen(sim->diverged_why) + 1;
          char *why = malloc(len);
          if (why) memcpy(why, sim->diverged_why, len);
          while (ts_outbox_push_payload(&p->server->outbox, TS_EV_DIVERGED, se, why, 0)) uv_sleep(1);
          woke = 1;
        }
        ts_force_batch fb;
        /* out of memory: a lost sample is replaced by the next step's */
        if (!diverged && ts_force_collect(se, &fb) &&
            ts_outbox_push_forces(&p->server->outbox, se, &fb) == 0)
          woke = 1;
        if (f) publish(p, TS_EV_FRAME, se, f, &woke);
        if (sim->samples_out) { /* quasi-static sessions: samples to train on */
          if (ts_outbox_push_payload(&p->server->outbox, TS_EV_SAMPLES, se, sim->samples_out,
                                     sim->samples_out_auto) == 0)
            woke = 1;
          else
            ts_learn_set_free(sim->samples_out);
          sim->samples_out = NULL;
        }
        if (sim->samples_full_out) {
          while (ts_outbox_push_payload(&p->server->outbox, TS_EV_SAMPLES_FULL, se, NULL,
                                        sim->samples_full_out))
            uv_sleep(1); /* out of memory: as publish() */
          woke = 1;
          sim->samples_full_out = 0;
        }
        sim->next_step_ns += sim->dt_ns;
        done++;
        const uint64_t end = uv_hrtime();
        /* a session catching up: its forces leave as they are made, not
         * after the whole run of steps (up to TS_CATCHUP_BUDGET dt of wall
         * time, which a pose arriving meanwhile waited on top of its own
         * step), at most one wake per TS_WAKE_GAP_NS (see below) */
        if (woke && end - t->woken_ns >= TS_WAKE_GAP_NS) {
          ts_outbox_wake(&p->server->outbox);
          t->woken_ns = end;
          woke = 0;
        }
        if (end >= budget_end) break;
      }
      /* the loop now, not after the thread's other sessions: a force
       * waited for every later session's step (0.9 ms each on patch-S)
       * before it left. Not after every step of a catch-up (above): a wake
       * per step cost a session at dt 20 us under TSan most of its frames
       * (itest_faults); at most one per TS_WAKE_GAP_NS is 2,000 a second */
      uint64_t after = uv_hrtime();
      if (woke) {
        ts_outbox_wake(&p->server->outbox);
        t->woken_ns = after;
        woke = 0;
      }
      if (sim->next_step_ns + 5 * sim->dt_ns < after) {
        /* too far behind real time: drop the backlog, say so in frames. Due
         * at once, not a dt from now: a session slower than real time keeps
         * the thread busy (one step per pass, the thread's other sessions
         * between). A sleep of one dt (20 us) was a trip through the
         * scheduler, which on a loaded machine gave the thread back after a
         * time slice: 1000 steps of a dt-20-us session took 18-80 s instead
         * of under 1 s (itest_faults, load average 10 on 2 cores) */
        sim->behind = 1;
        sim->late_events++;
        sim->next_step_ns = after;
      }
      if (sim->next_step_ns < earliest) earliest = sim->next_step_ns;
    }
    if (woke) ts_outbox_wake(&p->server->outbox);

    uv_mutex_lock(&t->lock);
    if (t->stop) {
      uv_mutex_unlock(&t->lock);
      break;
    }
    now = uv_hrtime();
    if (!t->n_adds && !t->n_removes && earliest > now)
      uv_cond_timedwait(&t->cond, &t->lock, earliest - now);
    uv_mutex_unlock(&t->lock);
  }
}

int ts_physics_start(ts_server *s, int n_threads, ts_physics **out) {
  if (n_threads <= 0) {
    n_threads = (int)uv_available_parallelism();
    if (n_threads < 1) n_threads = 1;
  }
  ts_physics *p = calloc(1, sizeof *p);
  if (!p) return TS_ENOMEM;
  p->n_rt = n_threads;
  p->slow_load = s->cfg.slow_lane_load;
  p->slow_nice = s->cfg.slow_lane_nice;
  p->n_slow = p->slow_load > 0 ? n_threads : 0;
  n_threads += p->n_slow;
  p->threads = calloc((size_t)n_threads, sizeof *p->threads);
  if (!p->threads) {
    free(p);
    return TS_ENOMEM;
  }
  p->server = s;
  p->stall_ns = (uint64_t)(s->cfg.stall_threshold * 1e9);
  atomic_init(&p->stalls, 0);
  for (int i = 0; i < n_threads; i++) {
    pthread_ctx *t = &p->threads[i];
    t->pool = p;
    t->index = i;
    uv_mutex_init(&t->lock);
    uv_cond_init(&t->cond);
    if (uv_thread_create(&t->thread, thread_main, t)) {
      ts_log_error("physics: cannot start thread %d", i);
      uv_cond_destroy(&t->cond);
      uv_mutex_destroy(&t->lock);
      p->n = i;
      ts_physics_stop(p);
      return TS_EINTERNAL;
    }
    p->n = i + 1;
  }
  *out = p;
  return 0;
}

/* Hands se to thread t (loop thread). */
static void add_to(pthread_ctx *t, ts_session *se) {
  t->load++;
  se->physics_thread = t->index;
  uv_mutex_lock(&t->lock);
  while (push_ptr(&t->adds, &t->n_adds, &t->cap_adds, se)) {
    /* out of memory: a session handed over may not be lost (as removals) */
    uv_mutex_unlock(&t->lock);
    uv_sleep(1);
    uv_mutex_lock(&t->lock);
  }
  uv_cond_signal(&t->cond);
  uv_mutex_unlock(&t->lock);
}

/* The least loaded real-time thread (slow 0) or slow one (1). */
static pthread_ctx *least_loaded(ts_physics *p, int slow) {
  const int first = slow ? p->n_rt : 0, end = slow ? p->n_rt + p->n_slow : p->n_rt;
  pthread_ctx *best = &p->threads[first];
  for (int i = first + 1; i < end; i++)
    if (p->threads[i].load < best->load) best = &p->threads[i];
  return best;
}

int ts_physics_add(ts_physics *p, ts_session *se, double trial_load) {
  ts_lane_meter_init(&se->sim.lane);
  /* a creation's trial over the threshold (session_trial.h): a slow thread
   * from the start, as if moved there (the meter's load is the trial's, and
   * it settles before it may ask to come back) */
  const int slow = p->n_slow > 0 && p->slow_load > 0 && trial_load > p->slow_load;
  if (slow) {
    se->sim.lane.load = trial_load;
    ts_log_info("session %u starts on a slow physics thread: its trial steps took %.3g times the "
                "time they simulate (--slow-lane-load %g)",
                se->id, trial_load, p->slow_load);
  }
  add_to(least_loaded(p, slow), se);
  return slow;
}

/* Queues a removal or a detachment of se on its thread (loop thread). */
static void remove_from(ts_physics *p, ts_session *se, int detach, int counted) {
  pthread_ctx *t = &p->threads[se->physics_thread];
  if (counted) t->load--;
  uv_mutex_lock(&t->lock);
  while (push_remove(t, se, detach)) {
    uv_mutex_unlock(&t->lock);
    uv_sleep(1);
    uv_mutex_lock(&t->lock);
  }
  uv_cond_signal(&t->cond);
  uv_mutex_unlock(&t->lock);
}

void ts_physics_remove(ts_physics *p, ts_session *se) {
  /* a session detached for a move is on no thread: the one it left finds
   * nothing and answers TS_EV_REMOVED (after its TS_EV_DETACHED, which
   * ts_physics_detached then ignores) */
  const int counted = !se->moving;
  se->moving = 0;
  remove_from(p, se, 0, counted);
}

/* Detaches se for a move to thread target (-1: the least loaded of the
 * kind to_slow says, chosen once it is detached). */
static void detach_for(ts_physics *p, ts_session *se, int to_slow, int target) {
  se->moving = 1;
  se->move_to_slow = to_slow;
  se->move_target = target;
  remove_from(p, se, 1, 1);
}

int ts_physics_move(ts_physics *p, ts_session *se, int to_slow) {
  if (se->moving || se->ending || (to_slow && !p->n_slow)) return 0;
  if (to_slow == (se->physics_thread >= p->n_rt)) return 0;
  detach_for(p, se, to_slow, -1);
  return 1;
}

void ts_physics_detached(ts_physics *p, ts_session *se) {
  if (!se->moving) return; /* removed meanwhile: TS_EV_REMOVED follows */
  se->moving = 0;
  add_to(se->move_target >= 0 ? &p->threads[se->move_target] : least_loaded(p, se->move_to_slow),
         se);
}

/* A session's share of a core as the loop last heard it: its newest
 * frame's step load, 0 while it sleeps (its steps cost next to nothing
 * then), -1 when not measured yet. */
static double session_load(const ts_session *se) {
  const ts_frame_ref *f = se->latest;
  if (!f || f->step_load < 0) return -1;
  return f->asleep ? 0 : f->step_load;
}

int ts_physics_balance(ts_physics *p, uint64_t now_ms, ts_physics_balance_move *out) {
  if (p->n_rt < 2) return 0;
  double sum[TS_BALANCE_MAX_THREADS] = {0};
  const int n = p->n_rt < TS_BALANCE_MAX_THREADS ? p->n_rt : TS_BALANCE_MAX_THREADS;
  for (const ts_session *se = p->server->sessions; se; se = se->next) {
    if (se->ending || se->moving || se->physics_thread >= n) continue;
    const double l = session_load(se);
    if (l > 0) sum[se->physics_thread] += l;
  }
  int hi = 0, lo = 0;
  for (int i = 1; i < n; i++) {
    if (sum[i] > sum[hi]) hi = i;
    if (sum[i] < sum[lo]) lo = i;
  }
  if (!(sum[hi] > TS_BALANCE_BUSY)) return 0;
  /* the session whose move leaves the two threads' larger sum smallest,
   * when that is at least TS_BALANCE_GAIN under the busiest's now */
  ts_session *best = NULL;
  double best_max = sum[hi] - TS_BALANCE_GAIN, best_load = 0;
  for (ts_session *se = p->server->sessions; se; se = se->next) {
    if (se->ending || se->moving || se->physics_thread != hi) continue;
    if (se->balanced_ms && now_ms - se->balanced_ms < TS_BALANCE_GAP_MS) continue;
    const double l = session_load(se);
    if (!(l > 0)) continue;
    const double a = sum[hi] - l, b = sum[lo] + l, m = a > b ? a : b;
    if (m < best_max) {
      best = se;
      best_max = m;
      best_load = l;
    }
  }
  if (!best) return 0;
  best->balanced_ms = now_ms ? now_ms : 1;
  out->session_id = best->id;
  out->from = hi;
  out->to = lo;
  out->load = best_load;
  out->from_sum = sum[hi];
  out->to_sum = sum[lo];
  detach_for(p, best, 0, lo);
  return 1;
}

int ts_physics_slow_lane(const ts_physics *p) { return p->n_slow > 0; }

int ts_physics_on_slow(const ts_physics *p, const ts_session *se) {
  if (!p->n_slow) return 0;
  return se->moving ? se->move_to_slow : se->physics_thread >= p->n_rt;
}

void ts_physics_stop(ts_physics *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) {
    pthread_ctx *t = &p->threads[i];
    uv_mutex_lock(&t->lock);
    t->stop = 1;
    uv_cond_signal(&t->cond);
    uv_mutex_unlock(&t->lock);
  }
  for (int i = 0; i < p->n; i++) {
    pthread_ctx *t = &p->threads[i];
    uv_thread_join(&t->thread);
    uv_cond_destroy(&t->cond);
    uv_mutex_destroy(&t->lock);
    free(t->adds);
    free(t->removes);
    free(t->detach);
    free(t->sessions);
  }
  free(p->threads);
  free(p);
}

int ts_physics_threads(const ts_physics *p) { return p->n_rt; }

uint64_t ts_physics_stalls(const ts_physics *p) {
  return atomic_load(&((ts_physics *)p)->stalls);
}
