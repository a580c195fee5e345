/*
 * conn.h: one client connection as the daemon's dispatcher sees it,
 * independent of its transport (TCP with length prefixes, or WebSocket).
 *
 * A transport allocates its own struct with a ts_conn as its FIRST member,
 * fills `ops`, calls ts_conn_opened() once, ts_dispatch_message() for every
 * complete Envelope it receives, and ts_conn_closed() exactly once when the
 * connection is gone (from its uv close callback, before freeing). The
 * dispatcher never frees a conn; it asks the transport to close.
 * All of this runs on the loop thread only.
 */
#ifndef TS_CONN_H
#define TS_CONN_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_conn ts_conn;
typedef struct ts_server ts_server;
typedef struct ts_frame_ref ts_frame_ref;
typedef struct ts_sbuf ts_sbuf;

enum { TS_TRANSPORT_TCP = 1, TS_TRANSPORT_WS = 2 };

typedef struct ts_conn_ops {
  /* Queues one whole Envelope (the transport adds its framing). The bytes are
   * copied or referenced until written; returns 0 or a negative ts_errno. */
  int (*send)(ts_conn *c, const uint8_t *msg, size_t len);
  /* Starts closing (idempotent). For WebSocket, sends a close frame first.
   * ts_conn_closed() follows later from the close callback. */
  void (*close)(ts_conn *c, const char *reason);
  /* Bytes queued for writing and not yet written. */
  size_t (*pending)(ts_conn *c);
  /* Optional (NULL: callers use send): queues one whole Envelope held in a
   * shared buffer (sbuf.h) without copying it: the transport writes its own
   * framing header and then b's bytes, and keeps a reference to b only
   * while a write is unfinished. Same returns as send. */
  int (*send_shared)(ts_conn *c, ts_sbuf *b);
} ts_conn_ops;

typedef struct ts_session ts_session;

struct ts_conn {
  const ts_conn_ops *ops;
  ts_server *server;
  uint64_t id;          /* unique per daemon run */
  int transport;        /* TS_TRANSPORT_* */
  int closing;          /* close requested */
  char peer[64];        /* "ip:port" for logs */

  /* protocol state, owned by dispatch.c */
  int hello_done;
  int key_index;               /* which server key Hello carried; -1 none (dispatch.c) */
  char cred[136];              /* Hello.credentials when not a key: a session token */
  uint64_t pose_window_ms;     /* pose rate limit: start of the current second */
  uint32_t poses_in_window;
  uint64_t last_rate_error_ms; /* one Error per second about dropped poses */
  int strikes;                 /* bad messages; closed past a limit */
  ts_session *session;         /* joined session or NULL */
  int role;                    /* Tissued__V1__Role */
  uint32_t tool_id;
  uint32_t frame_interval_us;  /* per-client frame rate: microseconds between frames */
  uint64_t frame_due_us;       /* its schedule (session.c): when the next frame is due, us of
                                  uv_hrtime; 0 = at once */
  ts_frame_ref *baseline;      /* last frame written (a reference); NULL = needs a keyframe */
  uint64_t over_soft_since_ms; /* when its output went over the soft limit; 0 = under it */
  ts_conn *next_in_session;    /* session's client list */
  ts_conn *prev_in_session;
  ts_conn *next_conn;          /* the server's list of every open connection */
  ts_conn *prev_conn;
};

/* Implemented by the daemon (dispatch.c). */
void ts_conn_opened(ts_conn *c);
void ts_dispatch_message(ts_conn *c, const uint8_t *msg, size_t len);
void ts_conn_closed(ts_conn *c);

#endif
