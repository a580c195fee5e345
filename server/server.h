/*
 * server.h: the daemon object. It owns the libuv loop's handles (listeners,
 * signals, the cron timer, the outbox wake-up), the session registry, the
 * physics pool and the storage handle. Everything here runs on the loop
 * thread except what physics.h and outbox.h say otherwise.
 */
#ifndef TS_SERVER_H
#define TS_SERVER_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "auth.h"
#include "config.h"
#include "conn.h"
#include "net/http.h"
#include "outbox.h"
#include "ts_codec.h"
#include "session.h"
#include "tool_meshes.h"
#include "worker.h"

/* The built-in tissue: the stored row the daemon writes at start (kind
 * "builtin"), CreateSession's default, and every session of the patch's
 * tissue name. */
#define TS_BUILTIN_TISSUE "stomach-patch"

typedef struct ts_http ts_http;
typedef struct ts_tcp ts_tcp;
typedef struct ts_physics ts_physics;
typedef struct ts_storage ts_storage;

struct ts_server {
  ts_config cfg;
  uv_loop_t *loop;
  ts_storage *storage;
  ts_http *http;
  ts_tcp *tcp;
  int tcp_port;   /* bound */
  int http_port;  /* bound */
  ts_physics *physics;
  ts_outbox outbox;
  ts_codec_ctx *codec;  /* frame encoding scratch and zstd context (loop thread) */
  uv_timer_t cron;
  uv_signal_t sigint, sigterm;

  ts_worker worker;          /* SQLite, off the loop */
  ts_worker builder;         /* new sessions' tissues, off the loop and SQLite (create.c) */
  ts_worker refiner;         /* live refinements, off the physics threads (refine.c) */
  ts_conn *conns;            /* every open connection */
  uint32_t pending_creates;  /* sessions being created (create.c) */
  struct ts_create_track *creating; /* the same, in the order taken (create_progress.h) */
  uv_timer_t create_timer;   /* their progress reports, while there are any */
  ts_session *sessions;
  uint32_t n_sessions;
  uint32_t next_session_id;
  uint64_t next_conn_id;
  uint64_t n_conns;
  int shutting_down;
  atomic_int stopping;       /* the same, for the builder's jobs to read (create.c: a build
                                under way stops at its next stage, a queued one at once) */
  int exit_code;
  uint64_t start_ms;

  ts_tool_meshes tool_meshes; /* rigid tool meshes (tool_meshes.h), read at start */
  ts_keyring keys;           /* who may create sessions (auth.h) */
  int key_generated;         /* the key file was created at this start */
  char key_source[600];      /* where the keys came from (never the key) */
  uint32_t pending_per_key[TS_MAX_KEYS]; /* creates in flight per key */

  /* counters */
  uint64_t messages_in, bad_messages, errors_sent, frames_out, bytes_out;
  uint64_t auth_refused;     /* requests refused for a missing or wrong key or token */
  uint64_t origin_refused;   /* WebSocket upgrades from an Origin not allowed */
  uint64_t poses_dropped;    /* over max-pose-rate */
  uint64_t refinements, refinements_refused; /* RefineRegion done / refused (refine.c) */
  uint64_t limit_refused[16]; /* TS_LIMIT_* (fewer than 16): requests refused by a configured limit */
  uint64_t closes[5];       /* closed connections by enum ts_close_reason (metrics.h) */
  uint64_t clients_dropped; /* closed for output over the hard limit (ts_conn_drop_full) */
  uint64_t balance_moves;   /* sessions moved between real-time threads (ts_physics_balance) */
  uint64_t slow_starts;     /* sessions started on a slow thread (session_trial.h) */
  uint64_t lane_moves[2];   /* sessions moved back to a real-time thread [0], to the slow one [1] */
  ts_http_file_counts http_files; /* the page's files sent (net/http.h) */

  /* main.c: called once when an orderly shutdown begins (may be NULL) */
  void (*on_shutdown_begin)(ts_server *s);
};

/* Configured limits, counted per kind in /metrics
 * (tissued_limit_refused_total{limit="..."}). */
enum {
  TS_LIMIT_MESSAGE = 0,  /* max-message */
  TS_LIMIT_MESH,         /* max-mesh-bytes, -triangles, -vertices */
  TS_LIMIT_SESSIONS,     /* max-sessions */
  TS_LIMIT_SESSIONS_KEY, /* max-sessions-per-key */
  TS_LIMIT_CLIENTS,      /* max-clients-per-session */
  TS_LIMIT_POSE_RATE,    /* max-pose-rate */
  TS_LIMIT_TOOLS,        /* max-tools */
  TS_LIMIT_TRAINING_SAMPLES, /* max-training-samples */
  TS_LIMIT_SELF_CONTACT, /* self-contact-max-nodes */
  TS_LIMIT_STEP_LOAD,    /* max-step-load */
  TS_LIMIT_COUNT
};
extern const char *const ts_limit_names[TS_LIMIT_COUNT];

/* Live sessions created with server key k (plus those being built). */
uint32_t ts_server_sessions_of_key(const ts_server *s, int k);

/* Starts everything on `loop` with the given config (copied). Returns 0 or a
 * negative ts_errno (message already logged). */
int ts_server_start(ts_server *s, uv_loop_t *loop, const ts_config *cfg);

/* Begins an orderly shutdown (idempotent): stop listening, tell and close
 * clients, stop physics, free sessions, close handles; uv_run then returns. */
void ts_server_shutdown(ts_server *s, const char *why);

/* Final cleanup after uv_run returned (closes storage). */
void ts_server_finish(ts_server *s);

uint64_t ts_now_ms(const ts_server *s);

ts_session *ts_server_find_session(ts_server *s, uint32_t id);

/* The open connection with this id, or NULL (it left). */
ts_conn *ts_server_find_conn(ts_server *s, uint64_t id);

/* Registers a session built off the loop and hands it to physics, on a
 * slow thread when its creation's trial load (< 0: none; session_trial.h)
 * is over --slow-lane-load. */
void ts_server_add_session(ts_server *s, ts_session *se, double trial_load);

/* Ends a session: clients are told and detached, physics drops it, and it is
 * freed when physics confirms. */
void ts_server_end_session(ts_server *s, ts_session *se, const char *why);

/* Queues one whole Envelope to c (c->ops->send) and returns what that
 * returned. A client whose output is over the hard-output-limit (TS_EFULL)
 * is dropped: closed, logged and counted (its session's clients_dropped and
 * the server's clients_dropped). Frames over the soft limit are skipped
 * instead (session.c); a reply, an Error or a force message lost silently
 * would leave the client waiting for it, unaware. */
int ts_conn_send(ts_conn *c, const uint8_t *msg, size_t len);
/* The drop itself, for a caller that sent by other means (send_shared). */
void ts_conn_drop_full(ts_conn *c);

/* Packs an envelope and sends it to one client (frames and forces have their
 * own shared paths; this is for replies and events). */
struct Tissued__V1__Envelope;
void ts_send_envelope(ts_conn *c, const struct Tissued__V1__Envelope *env);

/* Sends an Ack envelope: the request `what` was done. */
void ts_send_ack(ts_conn *c, uint64_t request_id, const char *what);

/* Sends an Error envelope (code is a negative ts_errno). */
void ts_send_error(ts_conn *c, uint64_t request_id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* TCP transport (tcp.c). */
int ts_tcp_start(ts_server *s, const char *host, int port, int *bound_port, ts_tcp **out);
void ts_tcp_stop(ts_tcp *t);
/* Keepalive (probes after idle_s of silence, 3 probes 10 s apart) and
 * TCP_USER_TIMEOUT on an accepted socket, either port (tcp.c). */
void ts_tcp_tune_socket(uv_tcp_t *h, int idle_s, unsigned user_timeout_ms);
/* Sends an Error to every TCP client then closes it (shutdown). */
void ts_tcp_close_all(ts_tcp *t, const uint8_t *goodbye, size_t len);

#endif
