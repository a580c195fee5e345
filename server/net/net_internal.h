/*
 * net_internal.h: what the HTTP listener's files share inside server/net/:
 * the ts_http listener struct and the per-socket connection struct that
 * starts as an HTTP/1.1 connection and may become a WebSocket (ts_conn).
 *
 * Ownership: ts_http owns every ts__net_conn (a doubly linked list). A
 * connection is freed only from the close callback of its last libuv handle
 * (net_conn.c), which is also where ts_conn_closed() is called, exactly once
 * and only for connections that reached ts_conn_opened(). Loop thread only.
 */
#ifndef TS_NET_INTERNAL_H
#define TS_NET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>
#include <uv.h>
#include <wslay/wslay.h>

#include "http.h"
#include "../sockq.h"

/* Limits of one HTTP request (the daemon serves static files only). */
#define TS__HTTP_URL_MAX 4096          /* longer request targets get 414 */
#define TS__HTTP_HEAD_MAX (16 * 1024)  /* header names + values; over: 431 */
#define TS__HTTP_MAX_HEADERS 100       /* more header lines: 431 */
#define TS__HTTP_BODY_MAX (16 * 1024)  /* request bodies are discarded; over: 413 */
#define TS__HTTP_FILE_MAX (64u << 20)  /* largest static file served */
#define TS__HTTP_GZ_ENTRIES 256        /* files the gzip cache holds (http_gzip.h) */
#define TS__HTTP_GZ_BYTES (32u << 20)  /* and their compressed bytes */
#define TS__HTTP_IDLE_MS 60000         /* keep-alive connection idle timeout */
#define TS__HTTP_LINGER_MS 10000       /* time to finish writing before a close */
#define TS__CLOSE_WAIT_MS 1000         /* wait for the peer's EOF / a WS flush */
#define TS__READ_BUF (64 * 1024)       /* one read from a socket */
#define TS__WS_TICK_MIN_MS 20          /* finest WebSocket timeout check */
#define TS__WRITE_HDR_MAX 16           /* a framing header written before a shared buffer */

#define TS__WS_DEFAULT_MAX_MESSAGE (1u << 20)
#define TS__WS_DEFAULT_MAX_PENDING (8u << 20)

typedef struct ts__net_conn ts__net_conn;
typedef struct ts_sbuf ts_sbuf;

/* One request being parsed. Header names and values live in `head`, each
 * NUL-terminated, so lookups can use ordinary string functions. */
typedef struct ts__http_req {
  char url[TS__HTTP_URL_MAX + 1];
  size_t url_len;
  char head[TS__HTTP_HEAD_MAX + 2 * TS__HTTP_MAX_HEADERS + 2];
  size_t head_len;
  struct {
    uint32_t name;   /* offset of the name in head */
    uint32_t value;  /* offset of the value in head (0 = none yet) */
  } hdr[TS__HTTP_MAX_HEADERS];
  int nhdr;
  int in_value;      /* last header callback was a value */
  size_t head_bytes; /* names + values seen, against TS__HTTP_HEAD_MAX */
  size_t body_len;
  int err_status;    /* 413/414/431 decided inside a parser callback */
} ts__http_req;

struct ts__net_conn {
  ts_conn base;       /* FIRST: the dispatcher's view once upgraded */
  ts_http *h;
  ts__net_conn *prev, *next;
  uv_tcp_t tcp;
  uv_timer_t timer;   /* HTTP idle timeout, then the close timeout */
  uv_shutdown_t shutdown_req;
  int handles_open;   /* tcp and timer; freed when it reaches 0 */
  int close_started;  /* uv_close() called on the handles */
  int lingering;      /* writes finishing, then FIN, input discarded */
  int shutdown_sent;
  int reading;        /* uv_read_start active */
  int close_reason;   /* enum ts_close_reason (metrics.h), -1 until decided */
  int too_big_counted; /* a message over max_message was counted (WebSocket) */
  int requests_done;  /* HTTP requests completed on this connection */
  ts_sockq kq;        /* the kernel's send queue, last reading (sockq.h) */

  /* HTTP phase */
  http_parser parser;
  ts__http_req *req;  /* NULL once upgraded */
  uint8_t *held;      /* unparsed input kept while parsing is paused */
  size_t held_len;
  int backpressure;   /* input paused until queued output drains */
  int http_done;      /* last response queued; further requests ignored */
  int upgrade_ok;     /* a valid /ws upgrade was answered with 101 */

  /* WebSocket phase */
  int is_ws;
  int opened;         /* ts_conn_opened (or the hook) was called */
  wslay_event_context_ptr ws;
  const uint8_t *rin; /* input offered to wslay's recv callback */
  size_t rin_len;
  uint8_t *obuf;      /* frames produced by wslay, handed to uv_write */
  size_t olen, ocap;
  int in_recv;        /* inside wslay_event_recv: flush afterwards */
  uint64_t ws_open_ms;    /* loop time of the upgrade */
  uint64_t last_rx_ms;    /* loop time anything was last read */
  uint64_t last_ping_ms;  /* loop time of the last ping sent */
};

struct ts_http {
  uv_loop_t *loop;
  ts_server *server;
  ts_http_config cfg; /* string fields point at the copies below */
  char *host, *web_root, *proto_file;
  size_t (*healthz)(ts_server *s, char *buf, size_t cap);
  struct ts_http_gz *gz; /* compressed static files (http_gzip.h); may be NULL */
  uv_tcp_t listener;
  int listener_open;
  int stopping;
  uint64_t next_id;
  ts__net_conn *conns;
  size_t nconns;
  char rbuf[TS__READ_BUF]; /* shared read buffer: reads never overlap */
};

/* net_conn.c: socket plumbing shared by the HTTP and WebSocket phases. */
int ts__conn_accept(ts_http *h);
/* Queues bufs for writing. own1/own2 (may be NULL) are free()d once written
 * or on failure. Returns 0 or a negative ts_errno (the connection is then
 * being closed). */
int ts__conn_write(ts__net_conn *c, const uv_buf_t *bufs, unsigned nbufs,
                   void *own1, void *own2);
/* Queues hlen header bytes (at most TS__WRITE_HDR_MAX; copied if need be)
 * and then b's bytes, without copying b: written at once as far as the
 * socket takes them (one writev), the rest by a write request holding a
 * reference to b. Returns 0, TS_EINVAL for a longer header, or another
 * negative ts_errno (the connection is then being closed). */
int ts__conn_write_shared(ts__net_conn *c, const uint8_t *hdr, size_t hlen, ts_sbuf *b);
/* Bytes handed to libuv and not yet written. */
size_t ts__conn_write_queued(ts__net_conn *c);
/* Graceful close: finish queued writes, send FIN, discard input until the
 * peer's EOF, at most timeout_ms before the socket is closed regardless. */
void ts__conn_linger(ts__net_conn *c, uint64_t timeout_ms);
/* Closes both handles now; the connection is freed in the close callback. */
void ts__conn_close_now(ts__net_conn *c);
void ts__conn_read_start(ts__net_conn *c);
void ts__conn_read_stop(ts__net_conn *c);

/* http.c */
void ts__http_conn_init(ts__net_conn *c);
void ts__http_on_read(ts__net_conn *c, const uint8_t *data, size_t len);
void ts__http_on_drain(ts__net_conn *c);
void ts__http_conn_free(ts__net_conn *c);
void ts__http_conn_gone(ts_http *h); /* after a conn was unlinked and freed */

/* ws.c */
int ts__ws_begin(ts__net_conn *c, const uint8_t *rest, size_t len);
void ts__ws_on_read(ts__net_conn *c, const uint8_t *data, size_t len);
void ts__ws_on_drain(ts__net_conn *c);
void ts__ws_close(ts__net_conn *c, uint16_t code, const char *reason);
void ts__ws_conn_free(ts__net_conn *c);

#endif
