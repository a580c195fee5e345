/*
 * server.c: start-up, the session registry, the outbox drain, the cron timer
 * and the orderly shutdown of tissued (see server.h).
 */
#include "server.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/ts_error.h"
#include "create.h"
#include "create_progress.h"
#include "force.h"
#include "log.h"
#include "materials.h"
#include "metrics.h"
#include "net/http.h"
#include "physics.h"
#include "refine.h"
#include "training.h"
#include "tissue.pb-c.h"
#include "ts_storage.h"

uint64_t ts_now_ms(const ts_server *s) { return uv_now(s->loop); }

ts_session *ts_server_find_session(ts_server *s, uint32_t id) {
  for (ts_session *se = s->sessions; se; se = se->next)
    if (se->id == id && !se->ending) return se;
  return NULL;
}

ts_conn *ts_server_find_conn(ts_server *s, uint64_t id) {
  for (ts_conn *c = s->conns; c; c = c->next_conn)
    if (c->id == id) return c->closing ? NULL : c;
  return NULL;
}

void ts_server_add_session(ts_server *s, ts_session *se, double trial_load) {
  se->id = s->next_session_id++;
  se->idle_since_ms = ts_now_ms(s);
  se->next = s->sessions;
  s->sessions = se;
  s->n_sessions++;
  if (ts_physics_add(s->physics, se, trial_load)) s->slow_starts++;
}

void ts_conn_drop_full(ts_conn *c) {
  if (c->closing) return;
  c->server->clients_dropped++;
  if (c->session) {
    c->session->clients_dropped++;
    ts_log_warn("session %u: dropping %s: its output is over the hard limit (%zu bytes queued)",
                c->session->id, c->peer, c->ops->pending(c));
  } else {
    ts_log_warn("dropping %s: its output is over the hard limit (%zu bytes queued)", c->peer,
                c->ops->pending(c));
  }
  c->ops->close(c, "output over the hard limit");
}

int ts_conn_send(ts_conn *c, const uint8_t *msg, size_t len) {
  int rc = c->ops->send(c, msg, len);
  if (rc == TS_EFULL) ts_conn_drop_full(c);
  return rc;
}

void ts_send_envelope(ts_conn *c, const Tissued__V1__Envelope *env) {
  size_t len = tissued__v1__envelope__get_packed_size(env);
  uint8_t stackbuf[1024];
  uint8_t *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
  if (!buf) return;
  tissued__v1__envelope__pack(env, buf);
  ts_conn_send(c, buf, len);
  if (buf != stackbuf) free(buf);
}

void ts_send_ack(ts_conn *c, uint64_t request_id, const char *what) {
  Tissued__V1__Ack r = TISSUED__V1__ACK__INIT;
  r.what = (char *)what;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = request_id;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_ACK;
  env.ack = &r;
  ts_send_envelope(c, &env);
}

void ts_send_error(ts_conn *c, uint64_t request_id, int code, const char *fmt, ...) {
  char msg[512]; /* a divergence's reason and what follows it: up to ~300 characters */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Tissued__V1__Error err = TISSUED__V1__ERROR__INIT;
  err.code = -code;
  err.name = (char *)ts_err_name(code);
  err.message = msg;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = request_id;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_ERROR;
  env.error = &err;
  uint8_t buf[768]; /* the message, the name, the code and the id: under 560 bytes */
  size_t len = tissued__v1__envelope__get_packed_size(&env);
  if (len > sizeof buf) return;
  tissued__v1__envelope__pack(&env, buf);
  c->server->errors_sent++;
  ts_log_debug("error to %s: %s %s", c->peer, ts_err_name(code), msg);
  ts_conn_send(c, buf, len);
}

static void unlink_session(ts_server *s, ts_session *se) {
  for (ts_session **pp = &s->sessions; *pp; pp = &(*pp)->next) {
    if (*pp == se) {
      *pp = se->next;
      s->n_sessions--;
      return;
    }
  }
}

void ts_server_end_session(ts_server *s, ts_session *se, const char *why) {
  if (se->ending) return;
  se->ending = 1;
  ts_log_info("session %u ends: %s", se->id, why);
  while (se->clients) {
    ts_conn *c = se->clients;
    ts_send_error(c, 0, TS_ENOSESSION, "session %u ended: %s", se->id, why);
    ts_session_detach(se, c);
  }
  ts_physics_remove(s->physics, se);
}

/* Divergence reports of one session: at most one per this many ms. */
#define TS_DIVERGED_REPORT_MS 1000

static void drain_events(ts_server *s, ts_event *e) {
  uint64_t now = ts_now_ms(s);
  /* Forces first: a controller's ToolForce is the latency-bound message
   * (pose to force: 2 physics steps + 1 ms, issue 7), and a frame before
   * it in the queue costs an encoding (q2's zstd, about 0.1 ms for a
   * patch-S delta) per client due. Every session's removal comes after its
   * last force (the physics thread pushes it once the session no longer
   * steps), so the order per session is kept where it matters. */
  for (ts_event *f = e; f; f = f->next)
    if (f->kind == TS_EV_FORCE && !f->session->ending && !s->shutting_down)
      ts_force_deliver(f->session, f->forces);
  while (e) {
    ts_event *next = e->next;
    ts_session *se = e->session;
    switch (e->kind) {
    case TS_EV_FRAME:
      if (se->ending || s->shutting_down)
        ts_frame_release(e->frame);
      else
        ts_session_on_frame(se, e->frame, now);
      break;
    case TS_EV_FORCE: /* delivered above */
      break;
    case TS_EV_DIVERGED: {
      /* the physics thread's reason (session.c, ts_session_step) */
      const char *why = e->payload ? (const char *)e->payload : "reason not recorded (out of memory)";
      se->diverged_count++;
      /* A tool held where it throws the tissue again (with no speed bound
       * on its approach) makes a session diverge every step, hundreds of
       * times a second: reported one by one, that flooded the log and every
       * client (600 Errors a second each, itest_faults). One report a
       * second at most; the rest are counted and said in the next. */
      if (se->diverged_report_due_ms && now < se->diverged_report_due_ms) {
        se->diverged_unreported++;
        free(e->payload);
        e->payload = NULL;
        break;
      }
      char more[96] = "";
      if (se->diverged_unreported)
        snprintf(more, sizeof more, "; %llu more times since the last report, not reported one by one",
                 (unsigned long long)se->diverged_unreported);
      se->diverged_unreported = 0;
      se->diverged_report_due_ms = now + TS_DIVERGED_REPORT_MS;
      ts_log_warn("session %u diverged: %s; the tissue was put back at rest and goes on%s", se->id,
                  why, more);
      for (ts_conn *c = se->clients; c; c = c->next_in_session)
        ts_send_error(c, 0, TS_EDIVERGED,
                      "session %u diverged: %s (the tools pressed it beyond what it can "
                      "take%s); the tissue was put back at rest, the tools re-approach their "
                      "poses, and the session goes on",
                      se->id, why, more);
      free(e->payload);
      e->payload = NULL;
      break;
    }
    case TS_EV_SAMPLES:
      if (!se->ending && !s->shutting_down)
        ts_training_start(se, e->payload, e->arg); /* takes the samples */
      else
        ts_learn_set_free(e->payload);
      break;
    case TS_EV_SAMPLES_FULL:
      if (e->arg == 2) { /* the set could not grow (core/ts_learn.h) */
        ts_log_error("session %u: out of memory for more training samples; recording stops "
                     "(the samples so far are kept)",
                     se->id);
        for (ts_conn *c = se->clients; c; c = c->next_in_session)
          if (c->role == TISSUED__V1__ROLE__ROLE_CONTROLLER)
            ts_send_error(c, 0, TS_ENOMEM,
                          "session %u: the daemon is out of memory for more training "
                          "samples; recording stops; train (TrainShortcut) on those it has",
                          se->id);
        break;
      }
      s->limit_refused[TS_LIMIT_TRAINING_SAMPLES]++;
      ts_log_info("session %u: max-training-samples reached; recording stops", se->id);
      for (ts_conn *c = se->clients; c; c = c->next_in_session)
        if (c->role == TISSUED__V1__ROLE__ROLE_CONTROLLER)
          ts_send_error(c, 0, TS_EFULL,
                        "session %u has recorded its maximum of %d training samples; "
                        "train (TrainShortcut) or reset",
                        se->id, s->cfg.max_training_samples);
      break;
    case TS_EV_REFINED:
      ts_refine_on_event(s, se, e->payload); /* frees it */
      break;
    case TS_EV_LANE: { /* its steps ask for the other kind of thread (lane.h) */
      const double load = *(const double *)e->payload;
      if (!s->shutting_down && ts_physics_move(s->physics, se, e->arg)) {
        s->lane_moves[e->arg ? 1 : 0]++;
        if (e->arg)
          ts_log_warn("session %u: its steps take %.3g times the CPU time they simulate "
                      "(dt %.3g ms): it cannot keep real time, and moves to a slow thread, "
                      "where it runs slower than real time without holding back other "
                      "sessions (--slow-lane-load %.3g)",
                      se->id, load, se->sim.dt * 1e3, s->cfg.slow_lane_load);
        else
          ts_log_info("session %u: its steps take %.3g times the CPU time they simulate: "
                      "back to a real-time thread",
                      se->id, load);
      }
      free(e->payload);
      e->payload = NULL;
      break;
    }
    case TS_EV_DETACHED:
      if (!s->shutting_down) ts_physics_detached(s->physics, se);
      break;
    case TS_EV_REMOVED:
      ts_refine_session_ended(s, se); /* a refinement it had not installed yet */
      unlink_session(s, se);
      ts_session_free(se);
      break;
    }
    free(e);
    e = next;
  }
}

static void on_outbox(uv_async_t *a) {
  ts_server *s = a->data;
  drain_events(s, ts_outbox_take(&s->outbox));
}

static void on_cron(uv_timer_t *t) {
  ts_server *s = t->data;
  uint64_t now = ts_now_ms(s);
  ts_session *next;
  for (ts_session *se = s->sessions; se; se = next) {
    next = se->next;
    if (!se->ending && se->n_clients == 0 && se->idle_since_ms &&
        now - se->idle_since_ms > (uint64_t)(s->cfg.session_idle_timeout * 1000))
      ts_server_end_session(s, se, "idle with no clients");
  }
  ts_physics_balance_move m;
  if (s->cfg.rebalance && s->physics && !s->shutting_down &&
      ts_physics_balance(s->physics, now, &m)) {
    s->balance_moves++;
    ts_log_info("physics: session %u (%.2f of a core) moves from thread %d to thread %d, "
                "which step %.2f and %.2f of a core",
                m.session_id, m.load, m.from, m.to, m.from_sum, m.to_sum);
  }
}

static void on_signal(uv_signal_t *h, int signum) {
  ts_server *s = h->data;
  ts_server_shutdown(s, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static size_t healthz(ts_server *s, char *buf, size_t cap) {
  uint64_t clients = 0;
  for (ts_session *se = s->sessions; se; se = se->next) clients += se->n_clients;
  int n = snprintf(buf, cap,
                   "{\"status\":\"%s\",\"sessions\":%u,\"session_clients\":%llu,"
                   "\"connections\":%llu,\"uptime_s\":%.1f,\"frames_out\":%llu}",
                   s->shutting_down ? "stopping" : "ok", s->n_sessions,
                   (unsigned long long)clients, (unsigned long long)s->n_conns,
                   (double)(ts_now_ms(s) - s->start_ms) / 1000.0,
                   (unsigned long long)s->frames_out);
  return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

static int make_dir(const char *path) {
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0750) && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0750) && errno != EEXIST) return -1;
  return 0;
}

static int write_ports_file(ts_server *s) {
  if (!s->cfg.ports_file[0]) return 0;
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", s->cfg.ports_file);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "{\"tcp\":%d,\"http\":%d}\n", s->tcp_port, s->http_port);
  if (fclose(f)) return -1;
  return rename(tmp, s->cfg.ports_file); /* readers never see half a file */
}

const char *const ts_limit_names[TS_LIMIT_COUNT] = {
    "max-message", "max-mesh", "max-sessions", "max-sessions-per-key",
    "max-clients-per-session", "max-pose-rate", "max-tools", "max-training-samples",
    "self-contact-max-nodes", "max-step-load"};

uint32_t ts_server_sessions_of_key(const ts_server *s, int k) {
  if (k < 0 || k >= TS_MAX_KEYS) return 0;
  uint32_t n = s->pending_per_key[k];
  for (const ts_session *se = s->sessions; se; se = se->next)
    if (!se->ending && se->creator_key == k) n++;
  return n;
}

int ts_server_start(ts_server *s, uv_loop_t *loop, const ts_config *cfg) {
  memset(s, 0, sizeof *s);
  s->cfg = *cfg;
  s->loop = loop;
  s->next_session_id = 1;
  s->start_ms = uv_now(loop);

  if (make_dir(cfg->data_dir)) {
    ts_log_error("cannot create data directory '%s': %s", cfg->data_dir, strerror(errno));
    return TS_EIO;
  }
  char dbpath[600], err[256];
  /* libcrypto set up here, on the loop thread: a worker thread that hashed
   * first would leave OpenSSL's per-thread state behind when it ends */
  OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, NULL);
  if (ts_auth_load_keys(cfg->server_key, getenv("TISSUED_SERVER_KEY"), cfg->data_dir, &s->keys,
                        &s->key_generated, s->key_source, sizeof s->key_source, err,
                        sizeof err)) {
    ts_log_error("server key: %s", err);
    return TS_EINVAL;
  }
  ts_log_info("server key%s from %s", s->keys.n > 1 ? "s" : "", s->key_source);
  if (ts_tool_meshes_load(&s->tool_meshes, cfg->tool_mesh, (uint32_t)cfg->max_mesh_triangles, err,
                          sizeof err)) {
    ts_log_error("%s", err);
    return TS_EINVAL;
  }
  for (uint32_t i = 0; i < s->tool_meshes.n; i++)
    ts_log_info("tool mesh '%s': %u triangles", s->tool_meshes.name[i], s->tool_meshes.n_tris[i]);
  snprintf(dbpath, sizeof dbpath, "%s/tissued.sqlite", cfg->data_dir);
  if (ts_storage_open(dbpath, &s->storage, err, sizeof err)) {
    ts_log_error("storage: %s", err);
    return TS_ESTORAGE;
  }
  ts_tissue_rec builtin;
  memset(&builtin, 0, sizeof builtin);
  builtin.name = TS_BUILTIN_TISSUE;
  builtin.kind = "builtin";
  builtin.mesh_hash = "";
  builtin.layer_spec =
      "{\"layers\":[\"mucosa\",\"submucosa\",\"muscularis\"]}";
  if (ts_storage_put_tissue(s->storage, &builtin) <= 0)
    ts_log_warn("storage: cannot register the built-in tissue");
  ts_log_info("storage: %s (schema version %d)", dbpath, ts_storage_schema_version(s->storage));

  int loaded = ts_materials_load_defaults(s->storage, NULL, err, sizeof err);
  if (loaded < 0)
    ts_log_warn("materials: default table not loaded: %s", err);
  else if (loaded > 0)
    ts_log_info("materials: %d default fits stored from %s", loaded, ts_materials_default_table());
  if (ts_worker_start(&s->worker, loop, s->storage, 0, "tissued-store")) {
    ts_log_error("cannot start the storage worker thread");
    return TS_EINTERNAL;
  }
  if (ts_worker_start(&s->refiner, loop, NULL, 0, "tissued-refine")) {
    ts_log_error("cannot start the refinement thread");
    return TS_EINTERNAL;
  }
  /* a build takes a core for seconds; the physics threads come first. Six
   * sessions of the built-in patch at 1 kHz on two cores (95 % of their
   * steps on time alone) kept 65 % of their steps while a 94,000-triangle
   * upload built at the normal priority (14 s), 84 % with the builder at
   * nice 10 (the build 45 s); four sessions 81-89 % against 85-100 % (the
   * build 11 s against 18-19 s); old and new daemons alternated, 2026-12-06.
   * --builder-nice sets it (10 by default; tests/bench/bench_build.c) */
  if (ts_worker_start(&s->builder, loop, NULL, cfg->builder_nice, "tissued-build")) {
    ts_log_error("cannot start the session builder thread");
    return TS_EINTERNAL;
  }
  if (ts_outbox_init(&s->outbox, loop, on_outbox, s)) return TS_EINTERNAL;
  s->codec = ts_codec_ctx_new();
  if (!s->codec) return TS_ENOMEM;
  int rc = ts_physics_start(s, cfg->physics_threads, &s->physics);
  if (rc) return rc;

  rc = ts_tcp_start(s, cfg->host, cfg->tcp_port, &s->tcp_port, &s->tcp);
  if (rc) return rc;
  ts_http_config hc;
  memset(&hc, 0, sizeof hc);
  hc.host = s->cfg.host;
  hc.port = cfg->http_port;
  hc.web_root = s->cfg.web_root;
  hc.proto_file = s->cfg.proto_file;
  hc.max_message = cfg->max_message;
  hc.max_pending_output = cfg->hard_output_limit;
  hc.metrics = ts_metrics_text;
  hc.allowed_origins = s->cfg.allowed_origins;
  hc.origin_refused = &s->origin_refused;
  hc.message_too_big = &s->limit_refused[TS_LIMIT_MESSAGE];
  hc.files = &s->http_files;
  hc.handshake_ms = (unsigned)(cfg->handshake_timeout * 1000);
  hc.ping_ms = (unsigned)(cfg->ws_ping_interval * 1000);
  hc.client_timeout_ms = (unsigned)(cfg->client_timeout * 1000);
  hc.keepalive_s = cfg->tcp_keepalive;
  rc = ts_http_start(loop, s, &hc, healthz, &s->http, &s->http_port);
  if (rc) {
    ts_log_error("http: cannot listen on %s:%d", cfg->host, cfg->http_port);
    return rc;
  }

  if (ts_create_progress_init(s)) return TS_EINTERNAL;
  uv_timer_init(loop, &s->cron);
  s->cron.data = s;
  uv_timer_start(&s->cron, on_cron, 1000, 1000);
  uv_signal_init(loop, &s->sigint);
  uv_signal_init(loop, &s->sigterm);
  s->sigint.data = s->sigterm.data = s;
  uv_signal_start(&s->sigint, on_signal, SIGINT);
  uv_signal_start(&s->sigterm, on_signal, SIGTERM);

  if (write_ports_file(s)) {
    ts_log_error("cannot write ports file '%s': %s", cfg->ports_file, strerror(errno));
    return TS_EIO;
  }
  ts_log_info("tcp: listening on %s:%d; http on %s:%d; %d physics thread(s)%s; dt %g s",
              cfg->host, s->tcp_port, cfg->host, s->http_port, ts_physics_threads(s->physics),
              ts_physics_slow_lane(s->physics) ? " and as many slow ones" : "", cfg->dt);
  return 0;
}

void ts_server_shutdown(ts_server *s, const char *why) {
  if (s->shutting_down) return;
  s->shutting_down = 1;
  atomic_store(&s->stopping, 1);
  ts_log_info("shutting down (%s)", why);
  if (s->on_shutdown_begin) s->on_shutdown_begin(s);

  /* stop accepting; tell every client; close them (their close callbacks
   * detach them from sessions) */
  Tissued__V1__Error err = TISSUED__V1__ERROR__INIT;
  err.code = -TS_ESHUTDOWN;
  err.name = (char *)ts_err_name(TS_ESHUTDOWN);
  err.message = (char *)"server is shutting down";
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_ERROR;
  env.error = &err;
  uint8_t bye[128];
  size_t bye_len = tissued__v1__envelope__pack(&env, bye);
  for (ts_session *se = s->sessions; se; se = se->next)
    for (ts_conn *c = se->clients; c; c = c->next_in_session) c->ops->send(c, bye, bye_len);
  if (s->tcp) {
    ts_tcp_close_all(s->tcp, bye, bye_len);
    ts_tcp_stop(s->tcp);
    s->tcp = NULL;
  }
  if (s->http) {
    ts_http_stop(s->http);
    s->http = NULL;
  }

  /* the worker finishes what it was given (SQLite writes complete); the
   * replies of those jobs find the server shutting down */
  ts_worker_stop(&s->worker);
  /* a build under way stops at its next stage, the queued ones before they
   * start (create.c, s->stopping); they are dropped, as is a build that
   * finished meanwhile (nothing goes back to the stopped worker) */
  ts_worker_stop(&s->builder);

  /* physics stops; then nothing else touches sessions but this thread and
   * the refinement thread's jobs' done() below */
  ts_physics_stop(s->physics);
  s->physics = NULL;
  /* then the refinement thread, after the physics threads, which hand it
   * work (refine.c: rooms, snapshots, what an install replaced, to free):
   * a refinement under way finishes (it stops early, ts_tissue.stop); its
   * result goes to its session's mailbox (freed with the session below)
   * or is dropped */
  ts_worker_stop(&s->refiner);
  ts_event *e = ts_outbox_take(&s->outbox);
  while (e) {
    ts_event *next = e->next;
    if (e->kind == TS_EV_FRAME) ts_frame_release(e->frame);
    if (e->kind == TS_EV_SAMPLES) ts_learn_set_free(e->payload);
    if (e->kind == TS_EV_REFINED) ts_refine_event_free(e->payload);
    if (e->kind == TS_EV_DIVERGED || e->kind == TS_EV_LANE) free(e->payload);
    free(e);
    e = next;
  }
  while (s->sessions) {
    ts_session *se = s->sessions;
    while (se->clients) ts_session_detach(se, se->clients);
    s->sessions = se->next;
    ts_session_free(se);
  }
  s->n_sessions = 0;

  uv_timer_stop(&s->cron);
  uv_close((uv_handle_t *)&s->cron, NULL);
  ts_create_progress_close(s);
  uv_close((uv_handle_t *)&s->sigint, NULL);
  uv_close((uv_handle_t *)&s->sigterm, NULL);
  ts_outbox_close(&s->outbox, NULL);
}

void ts_server_finish(ts_server *s) {
  if (s->storage) ts_storage_close(s->storage);
  ts_tool_meshes_free(&s->tool_meshes); /* physics threads have stopped */
  ts_codec_ctx_free(s->codec);
  s->codec = NULL;
  s->storage = NULL;
  uv_mutex_destroy(&s->outbox.lock);
}
