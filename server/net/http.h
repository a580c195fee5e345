/*
 * http.h: the daemon's HTTP listener: serves the web client's static files,
 * answers /healthz, and upgrades /ws to a WebSocket that carries one Envelope
 * per binary message (a ts_conn with transport TS_TRANSPORT_WS).
 * Loop thread only.
 */
#ifndef TS_HTTP_H
#define TS_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "../conn.h"

/* The static files the listener sent (loop thread): responses by how the
 * body went, and the body bytes of GET responses (HEAD sends none). */
typedef struct ts_http_file_counts {
  uint64_t identity, gzip, not_modified;
  uint64_t identity_bytes, gzip_bytes;
} ts_http_file_counts;

typedef struct ts_http_config {
  const char *host;           /* "127.0.0.1" */
  int port;                   /* 0 = ephemeral */
  const char *web_root;       /* client-web/ directory */
  const char *proto_file;     /* proto/tissue.proto, served at /proto/tissue.proto */
  size_t max_message;         /* largest WebSocket message accepted, bytes */
  size_t max_pending_output;  /* hard limit of queued output per connection */
  /* WebSocket upgrades: Origins allowed besides the daemon's own (see
   * ts_auth_origin_allowed; NULL = only its own), and a counter of refused
   * upgrades (may be NULL). Neither is copied: both outlive the listener. */
  const char *allowed_origins;
  uint64_t *origin_refused;
  /* counts WebSocket messages over max_message (closed with 1009); may be NULL */
  uint64_t *message_too_big;
  /* counts the static files sent (/metrics); may be NULL; not copied */
  ts_http_file_counts *files;
  /* Timeouts, milliseconds; 0 turns each off. handshake_ms bounds the
   * first HTTP request (then each request, from its first byte) and, on a
   * WebSocket, the time until the dispatcher has seen Hello (ts_conn
   * hello_done). A WebSocket is pinged every ping_ms and closed (1001) when
   * nothing at all (message, pong, ping) has arrived for client_timeout_ms. */
  unsigned handshake_ms;
  unsigned ping_ms;
  unsigned client_timeout_ms;
  int keepalive_s;            /* TCP keepalive idle time on accepted sockets; 0 = off */

  /* Optional hooks for tests: each one that is set replaces its daemon
   * counterpart (ts_conn_opened, ts_dispatch_message, ts_conn_closed) and
   * gets hook_ud. The daemon leaves them NULL. */
  void (*on_open)(ts_conn *c, void *ud);
  void (*on_message)(ts_conn *c, const uint8_t *msg, size_t len, void *ud);
  void (*on_closed)(ts_conn *c, void *ud);
  void *hook_ud;
  /* /metrics: Prometheus text exposition, malloc'd (freed by the listener),
   * or NULL when unavailable (503). NULL callback: 404. */
  char *(*metrics)(ts_server *s, size_t *len);
} ts_http_config;

typedef struct ts_http ts_http;

/* Returns 0 or a negative ts_errno; *bound_port gets the actual port. The
 * healthz callback writes a short JSON body into buf (returns its length).
 * max_message / max_pending_output of 0 pick defaults (1 MiB / 8 MiB). The
 * config's strings are copied. */
int ts_http_start(uv_loop_t *loop, ts_server *server, const ts_http_config *cfg,
                  size_t (*healthz)(ts_server *s, char *buf, size_t cap),
                  ts_http **out, int *bound_port);

/* Stops listening and closes every HTTP and WebSocket connection (WebSocket
 * peers get a close frame). Frees itself once all handles are closed. */
void ts_http_stop(ts_http *h);

#endif
