/*
 * metrics.c: builds the /metrics page (see metrics.h): server counters, the
 * outbox queue depth, and per-session step time, substeps, contacts, frames
 * sent/skipped, bytes per frame and dropped clients.
 */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physics.h"
#include "server.h"

typedef struct buf {
  char *p;
  size_t len, cap;
  int failed;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = 1;
      return;
    }
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap * 2 + (size_t)n;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

static void family(buf *b, const char *name, const char *type, const char *help) {
  put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

_Static_assert(TS_CLOSE_N == sizeof(((ts_server *)0)->closes) / sizeof(uint64_t),
               "one counter per close reason");

void ts_metrics_count_close(ts_server *s, int reason) {
  if (!s || reason < 0 || reason >= TS_CLOSE_N) return;
  s->closes[reason]++;
}

char *ts_metrics_text(ts_server *s, size_t *len) {
  buf b = {malloc(4096), 0, 4096, 0};
  if (!b.p) return NULL;
  family(&b, "tissued_uptime_seconds", "gauge", "Seconds since the daemon started.");
  put(&b, "tissued_uptime_seconds %.3f\n", (double)(ts_now_ms(s) - s->start_ms) / 1000.0);
  family(&b, "tissued_connections", "gauge", "Open client connections.");
  put(&b, "tissued_connections %llu\n", (unsigned long long)s->n_conns);
  family(&b, "tissued_sessions", "gauge", "Live sessions.");
  put(&b, "tissued_sessions %u\n", s->n_sessions);
  family(&b, "tissued_sessions_creating", "gauge",
         "Sessions being created: queued or built (server/create.c).");
  put(&b, "tissued_sessions_creating %u\n", s->pending_creates);
  family(&b, "tissued_messages_in_total", "counter", "Messages received.");
  put(&b, "tissued_messages_in_total %llu\n", (unsigned long long)s->messages_in);
  family(&b, "tissued_bad_messages_total", "counter", "Messages refused as malformed or invalid.");
  put(&b, "tissued_bad_messages_total %llu\n", (unsigned long long)s->bad_messages);
  family(&b, "tissued_clients_dropped_total", "counter",
         "Clients closed because their output was over the hard-output-limit.");
  put(&b, "tissued_clients_dropped_total %llu\n", (unsigned long long)s->clients_dropped);
  family(&b, "tissued_errors_sent_total", "counter", "Error replies sent.");
  put(&b, "tissued_errors_sent_total %llu\n", (unsigned long long)s->errors_sent);
  family(&b, "tissued_auth_refused_total", "counter",
         "Requests refused for a missing or wrong server key or session token.");
  put(&b, "tissued_auth_refused_total %llu\n", (unsigned long long)s->auth_refused);
  family(&b, "tissued_refinements_total", "counter", "Live refinements done (RefineRegion).");
  put(&b, "tissued_refinements_total %llu\n", (unsigned long long)s->refinements);
  family(&b, "tissued_refinements_refused_total", "counter", "RefineRegion requests refused.");
  put(&b, "tissued_refinements_refused_total %llu\n", (unsigned long long)s->refinements_refused);
  family(&b, "tissued_origin_refused_total", "counter",
         "WebSocket upgrades refused for their Origin.");
  put(&b, "tissued_origin_refused_total %llu\n", (unsigned long long)s->origin_refused);
  const ts_http_file_counts *hf = &s->http_files;
  const struct {
    const char *line;
    uint64_t n;
  } files[] = {
      {"tissued_http_files_total{response=\"identity\"}", hf->identity},
      {"tissued_http_files_total{response=\"gzip\"}", hf->gzip},
      {"tissued_http_files_total{response=\"not_modified\"}", hf->not_modified},
      {"tissued_http_file_bytes_total{encoding=\"identity\"}", hf->identity_bytes},
      {"tissued_http_file_bytes_total{encoding=\"gzip\"}", hf->gzip_bytes},
  };
  family(&b, "tissued_http_files_total", "counter",
         "Static files (the web page) answered, by how: identity or gzip body, or 304 Not "
         "Modified.");
  for (int i = 0; i < 3; i++) put(&b, "%s %llu\n", files[i].line, (unsigned long long)files[i].n);
  family(&b, "tissued_http_file_bytes_total", "counter",
         "Body bytes of the static files sent, by encoding.");
  for (int i = 3; i < 5; i++) put(&b, "%s %llu\n", files[i].line, (unsigned long long)files[i].n);
  family(&b, "tissued_poses_dropped_total", "counter", "Tool poses dropped over max-pose-rate.");
  put(&b, "tissued_poses_dropped_total %llu\n", (unsigned long long)s->poses_dropped);
  family(&b, "tissued_limit_refused_total", "counter",
         "Requests refused by a configured limit, by setting.");
  for (int i = 0; i < TS_LIMIT_COUNT; i++)
    put(&b, "tissued_limit_refused_total{limit=\"%s\"} %llu\n", ts_limit_names[i],
        (unsigned long long)s->limit_refused[i]);
  family(&b, "tissued_frames_out_total", "counter", "Frames written to clients.");
  put(&b, "tissued_frames_out_total %llu\n", (unsigned long long)s->frames_out);
  family(&b, "tissued_frame_bytes_out_total", "counter", "Bytes of frames written to clients.");
  put(&b, "tissued_frame_bytes_out_total %llu\n", (unsigned long long)s->bytes_out);
  static const char *const reasons[TS_CLOSE_N] = {"peer", "server", "handshake_timeout",
                                                   "client_timeout", "shutdown"};
  family(&b, "tissued_connections_closed_total", "counter",
         "Client connections closed, by reason (peer, server, handshake_timeout, "
         "client_timeout, shutdown).");
  for (int r = 0; r < TS_CLOSE_N; r++)
    put(&b, "tissued_connections_closed_total{reason=\"%s\"} %llu\n", reasons[r],
        (unsigned long long)s->closes[r]);
  family(&b, "tissued_physics_stalls_total", "counter",
         "Stall episodes: a session's physics step took longer than stall-threshold.");
  put(&b, "tissued_physics_stalls_total %llu\n",
      (unsigned long long)(s->physics ? ts_physics_stalls(s->physics) : 0));
  family(&b, "tissued_slow_lane_moves_total", "counter",
         "Sessions moved to the slow physics thread (to=\"slow\") and back to a real-time "
         "one (to=\"realtime\"), by their step load (--slow-lane-load).");
  put(&b, "tissued_slow_lane_moves_total{to=\"slow\"} %llu\n",
      (unsigned long long)s->lane_moves[1]);
  put(&b, "tissued_slow_lane_moves_total{to=\"realtime\"} %llu\n",
      (unsigned long long)s->lane_moves[0]);
  family(&b, "tissued_slow_lane_starts_total", "counter",
         "Sessions that started on a slow physics thread: the trial steps of their creation "
         "took more CPU time than they simulate, over --slow-lane-load.");
  put(&b, "tissued_slow_lane_starts_total %llu\n", (unsigned long long)s->slow_starts);
  family(&b, "tissued_physics_rebalances_total", "counter",
         "Sessions moved from the busiest real-time physics thread to the least busy one "
         "(measured loads; once a second at most).");
  put(&b, "tissued_physics_rebalances_total %llu\n", (unsigned long long)s->balance_moves);
  uv_mutex_lock(&s->outbox.lock);
  unsigned long long depth = s->outbox.depth, max_depth = s->outbox.max_depth;
  uv_mutex_unlock(&s->outbox.lock);
  family(&b, "tissued_outbox_depth", "gauge", "Physics-to-loop events queued now.");
  put(&b, "tissued_outbox_depth %llu\n", depth);
  family(&b, "tissued_outbox_max_depth", "gauge", "Largest physics-to-loop queue seen.");
  put(&b, "tissued_outbox_max_depth %llu\n", max_depth);

  static const struct {
    const char *name, *type, *help;
  } per[] = {
      {"tissued_session_clients", "gauge", "Clients joined to the session."},
      {"tissued_session_step_seconds", "gauge", "Smoothed wall time of one physics step."},
      {"tissued_session_steps_total", "counter", "Physics steps taken."},
      {"tissued_session_late_total", "counter", "Times the session fell behind real time."},
      {"tissued_session_substeps", "gauge", "Spring passes in the last step."},
      {"tissued_session_contacts", "gauge", "Tissue nodes in contact with a tool."},
      {"tissued_session_tool_contacts", "gauge",
       "Contacts between two of the session's tools in the last step (OBB tree x OBB tree)."},
      {"tissued_session_tool_contact_steps_total", "counter",
       "Physics steps in which two of the session's tools touched."},
      {"tissued_session_frames_sent_total", "counter", "Frames written to the session's clients."},
      {"tissued_session_frames_skipped_total", "counter",
       "Frames skipped for clients over the soft output limit."},
      {"tissued_session_clients_dropped_total", "counter",
       "Clients dropped over the hard output limit."},
      {"tissued_session_diverged_total", "counter", "Times the simulation diverged (each time the session put its tissue back at rest and went on)."},
      {"tissued_session_clients_resynced_total", "counter",
       "Clients given a fresh keyframe after staying over the soft output limit."},
      {"tissued_session_forces_sent_total", "counter",
       "ToolForce messages sent to the session's controllers."},
      {"tissued_session_forces_skipped_total", "counter",
       "ToolForce messages skipped for controllers over the soft output limit."},
      {"tissued_session_keyframe_bytes", "gauge", "Encoded size of the newest keyframe."},
      {"tissued_session_verlet_fraction", "gauge",
       "Fraction of nodes the mass-spring integrator stepped by Verlet in the last step."},
      {"tissued_session_beeman_fraction", "gauge",
       "Fraction of nodes the mass-spring integrator stepped by Beeman in the last step."},
      {"tissued_session_inertia_scale", "gauge",
       "Factor on the mass-spring tissue's inertia in the last step (1: physical masses; "
       "above 1 when CreateSession.substeps caps the substeps)."},
      {"tissued_session_added_mass_fraction", "gauge",
       "Inertia the local mass scaling of a refined region adds to the mass-spring tissue, as "
       "a fraction of its mass (0: none; --local-mass-scaling)."},
      {"tissued_session_qs_solves_total", "counter",
       "Presses a quasi-static session's solve answered."},
      {"tissued_session_qs_unconverged_total", "counter",
       "Of them, solves stopped by the iteration cap before max |R| fell below the tolerance."},
      {"tissued_session_qs_worst_residual_newtons", "gauge",
       "The largest final max |R| of a quasi-static session's solves, N."},
      {"tissued_session_self_contacts", "gauge",
       "Tissue self-contact pairs (node against triangle) in the last step; 0 when off "
       "(CreateSession.self_contact)."},
      {"tissued_session_self_contact_steps_over_limit_total", "counter",
       "Physics steps taken without tissue self-contact because a refinement took the tissue "
       "over --self-contact-max-nodes (SessionInfo.self_contact_off OVER_LIMIT)."},
      {"tissued_session_self_contact_failures_total", "counter",
       "Refined tissues tissue self-contact could not be set up for (out of memory; off for "
       "that tissue, SessionInfo.self_contact_off FAILED)."},
      {"tissued_session_asleep", "gauge",
       "1 while the session's tissue sleeps: at rest, no tool near, its steps not computed "
       "(--sleep-speed)."},
      {"tissued_session_steps_slept_total", "counter",
       "Of the physics steps, those not computed because the tissue slept."},
      {"tissued_session_step_load", "gauge",
       "CPU time of the session's computed steps over the simulated time they advanced, over "
       "the last 0.2 s of either (1: one whole core keeps it at real time; -1 not measured "
       "yet)."},
      {"tissued_session_slow_lane", "gauge",
       "1 while a slow physics thread steps the session: its step load (or its creation's trial "
       "steps) went over --slow-lane-load, "
       "and it runs slower than real time without holding back other sessions."},
  };
  for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
    family(&b, per[k].name, per[k].type, per[k].help);
    for (ts_session *se = s->sessions; se; se = se->next) {
      if (se->ending) continue;
      const ts_frame_ref *f = se->latest;
      double v = 0;
      switch (k) {
      case 0: v = se->n_clients; break;
      case 1: v = f ? f->step_seconds : 0; break;
      case 2: v = f ? (double)f->steps : 0; break;
      case 3: v = f ? (double)f->late_events : 0; break;
      case 4: v = f ? f->substeps : 0; break;
      case 5: v = f ? f->contacts : 0; break;
      case 6: v = f ? f->tool_contacts : 0; break;
      case 7: v = f ? (double)f->tool_contact_steps : 0; break;
      case 8: v = (double)se->frames_sent; break;
      case 9: v = (double)se->frames_skipped; break;
      case 10: v = (double)se->clients_dropped; break;
      case 11: v = (double)se->diverged_count; break;
      case 12: v = (double)se->clients_resynced; break;
      case 13: v = (double)se->forces_sent; break;
      case 14: v = (double)se->forces_skipped; break;
      case 15: v = f && f->key.bytes ? (double)f->key.len : 0; break;
      case 16: v = f ? f->verlet_fraction : 0; break;
      case 17: v = f ? f->beeman_fraction : 0; break;
      case 18: v = f ? f->inertia_scale : 0; break;
      case 19: v = f ? f->added_mass : 0; break;
      case 20:
      case 21:
      case 22:
        if (!se->sim.shortcut) break;
        uv_mutex_lock(&se->mbox.lock);
        v = k == 20 ? (double)se->mbox.qs_solves
            : k == 21 ? (double)se->mbox.qs_unconverged
                      : se->mbox.qs_worst_residual;
        uv_mutex_unlock(&se->mbox.lock);
        break;
      case 23: v = f ? f->self_contacts : 0; break;
      case 24: v = se->sim.self ? (double)se->self_steps_over_limit : 0; break;
      case 25: v = se->sim.self ? (double)se->self_failures : 0; break;
      case 26: v = f ? f->asleep : 0; break;
      case 27: v = f ? (double)f->slept_steps : 0; break;
      case 28: v = f ? f->step_load : -1; break;
      case 29: v = s->physics ? ts_physics_on_slow(s->physics, se) : 0; break;
      }
      put(&b, "%s{session=\"%u\"} %.9g\n", per[k].name, se->id, v);
    }
  }
  if (b.failed) {
    free(b.p);
    return NULL;
  }
  *len = b.len;
  return b.p;
}
