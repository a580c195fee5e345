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
 */
#include "physics.h"


#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "core/ts_error.h"
#include "force.h"
#include "log.h"
#include "server.h"

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
  ts_session **removes;
  uint32_t n_removes, cap_removes;
  /* owned by the thread */
  ts_session **sessions;
  uint32_t n_sessions, cap_sessions;
  uint32_t load; /* sessions assigned (loop's view) */
  uint64_t woken_ns; /* when the thread last woke the loop (uv_hrtime) */
} pthread_ctx;

struct ts_physics {
  ts_server *server;
  int n;
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

static void apply_commands(pthread_ctx *t, int *woke) {
  uv_mutex_lock(&t->lock);
  for (uint32_t i = 0; i < t->n_adds; i++) {
    ts_session *se = t->adds[i];
    se->sim.next_step_ns = uv_hrtime();
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
    publish(t->pool, TS_EV_REMOVED, se, NULL, woke);
  }
  t->n_removes = 0;
  uv_mutex_unlock(&t->lock);
}

static void thread_main(void *arg) {
  pthread_ctx *t = arg;
  ts_physics *p = t->pool;
  char name[16]; /* what top -H shows: tissued-phys0, ... */
  snprintf(name, sizeof name, "tissued-phys%d", t->index % 100);
  prctl(PR_SET_NAME, name, 0, 0, 0);
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
        uint64_t t0 = uv_hrtime();
        ts_frame_ref *f = ts_session_step(se, &diverged);
        check_stall(p, se, uv_hrtime() - t0);
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
          publish(p, TS_EV_SAMPLES_FULL, se, NULL, &woke);
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

void ts_physics_add(ts_physics *p, ts_session *se) {
  pthread_ctx *best = &p->threads[0];
  for (int i = 1; i < p->n; i++)
    if (p->threads[i].load < best->load) best = &p->threads[i];
  best->load++;
  se->physics_thread = best->index;
  uv_mutex_lock(&best->lock);
  if (push_ptr(&best->adds, &best->n_adds, &best->cap_adds, se))
    ts_log_error("physics: out of memory queueing session %u", se->id);
  uv_cond_signal(&best->cond);
  uv_mutex_unlock(&best->lock);
}

void ts_physics_remove(ts_physics *p, ts_session *se) {
  pthread_ctx *t = &p->threads[se->physics_thread];
  t->load--;
  uv_mutex_lock(&t->lock);
  while (push_ptr(&t->removes, &t->n_removes, &t->cap_removes, se)) {
    uv_mutex_unlock(&t->lock);
    uv_sleep(1);
    uv_mutex_lock(&t->lock);
  }
  uv_cond_signal(&t->cond);
  uv_mutex_unlock(&t->lock);
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
    free(t->sessions);
  }
  free(p->threads);
  free(p);
}

int ts_physics_threads(const ts_physics *p) { return p->n; }

uint64_t ts_physics_stalls(const ts_physics *p) {
  return atomic_load(&((ts_physics *)p)->stalls);
}
