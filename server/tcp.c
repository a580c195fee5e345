/*
 * tcp.c: the TCP transport. Each connection is a ts_conn whose byte stream is
 * cut into Envelopes by a ts_framer (4-byte big-endian length prefix).
 * Output is written at once when the socket takes it (uv_try_write of the
 * 4-byte header and the message, one writev, nothing copied or allocated);
 * only what the socket did not take goes into a write request: copied, or
 * for a shared frame (sbuf.h) referenced. The queued byte count is tracked
 * so the dispatcher can skip frames (soft limit) or drop the client (hard
 * limit) instead of letting a slow reader grow memory.
 *
 * Timeouts: a connection must send its Hello within handshake-timeout, or it
 * gets Error TS_ENOHELLO and is closed. After that the protocol has no idle
 * limit on TCP: an observer may only read for hours. Dead peers are found by
 * the kernel instead: keepalive probes after tcp-keepalive seconds of silence
 * (3 probes 10 s apart), and TCP_USER_TIMEOUT (client-timeout) for output the
 * peer never acknowledges.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/ts_error.h"
#include "log.h"
#include "metrics.h"
#include "sbuf.h"
#include "server.h"
#include "sockq.h"
#include "ts_framing.h"

#define TS_TCP_READ_BUF 65536

typedef struct tcp_conn {
  ts_conn base; /* first: a ts_conn* is a tcp_conn* */
  uv_tcp_t handle;
  uv_timer_t linger;  /* the Hello deadline; once closing, bounds the flush */
  uv_shutdown_t shutdown_req;
  int handle_closing;
  ts_framer framer;
  size_t queued;    /* bytes handed to uv_write and not yet written */
  ts_sockq kq;      /* the kernel's send queue, last reading (sockq.h) */
  struct tcp_conn *next, *prev;
  struct ts_tcp *owner;
  int opened;
  int close_reason; /* enum ts_close_reason, -1 until decided */
  char rbuf[TS_TCP_READ_BUF];
} tcp_conn;

struct ts_tcp {
  ts_server *server;
  uv_tcp_t listener;
  tcp_conn *conns;
  int stopping;
  int listener_closed;
};

/* The transport struct goes once its listener and every connection are gone. */
static void maybe_free_tcp(struct ts_tcp *t) {
  if (t->listener_closed && !t->conns) free(t);
}

typedef struct tcp_write {
  uv_write_t req;
  tcp_conn *conn;
  size_t len;        /* bytes this request writes */
  ts_sbuf *shared;   /* the message's shared buffer when referenced, else NULL */
  uint8_t data[];    /* the bytes copied: the rest of the header, and the rest of
                        the message when it is not shared */
} tcp_write;

static void on_linger_closed(uv_handle_t *h) {
  tcp_conn *c = h->data;
  struct ts_tcp *t = c->owner;
  if (c->prev)
    c->prev->next = c->next;
  else if (t->conns == c)
    t->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  ts_framer_free(&c->framer);
  free(c);
  maybe_free_tcp(t);
}

static void on_listener_closed(uv_handle_t *h) {
  struct ts_tcp *t = h->data;
  t->listener_closed = 1;
  maybe_free_tcp(t);
}

static void on_conn_closed(uv_handle_t *h) {
  tcp_conn *c = h->data;
  if (c->opened) {
    ts_metrics_count_close(c->owner->server, c->close_reason < 0 ? TS_CLOSE_PEER : c->close_reason);
    ts_conn_closed(&c->base);
  }
  c->opened = 0;
  uv_close((uv_handle_t *)&c->linger, on_linger_closed);
}

static void force_close(tcp_conn *c) {
  if (c->handle_closing) return;
  c->handle_closing = 1;
  uv_timer_stop(&c->linger);
  uv_close((uv_handle_t *)&c->handle, on_conn_closed);
}

static void on_linger(uv_timer_t *t) { force_close(t->data); }

static void on_shutdown(uv_shutdown_t *req, int status) { force_close(req->data); }

/* Closing lets queued output (an Error, a goodbye) flush for up to a second. */
static void tcp_close(ts_conn *bc, const char *reason) {
  tcp_conn *c = (tcp_conn *)bc;
  if (bc->closing) return;
  if (c->close_reason < 0) c->close_reason = TS_CLOSE_SERVER;
  bc->closing = 1;
  ts_log_debug("tcp: closing %s: %s", bc->peer, reason ? reason : "");
  uv_read_stop((uv_stream_t *)&c->handle);
  uv_timer_start(&c->linger, on_linger, 1000, 0);
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->handle, on_shutdown)) force_close(c);
}

static void on_write(uv_write_t *req, int status) {
  tcp_write *w = (tcp_write *)req;
  w->conn->queued -= w->len;
  if (status < 0 && status != UV_ECANCELED && !w->conn->base.closing) {
    if (w->conn->close_reason < 0) w->conn->close_reason = TS_CLOSE_PEER;
    tcp_close(&w->conn->base, uv_strerror(status));
  }
  ts_sbuf_release(w->shared);
  free(w);
}

/* Writes the length prefix and msg: at once as far as the socket takes them
 * (nothing queued before: uv_try_write refuses otherwise, which keeps the
 * order), the rest through one write request that copies it or, when
 * shared is msg's buffer, references it. 0, TS_ENOMEM or TS_EIO. */
static int tcp_out(tcp_conn *c, const uint8_t *msg, size_t len, ts_sbuf *shared) {
  uint8_t hdr[4];
  ts_frame_header(hdr, (uint32_t)len);
  size_t total = len + 4, done = 0;
  uv_stream_t *st = (uv_stream_t *)&c->handle;
  if (c->queued == 0) {
    uv_buf_t now[2] = {uv_buf_init((char *)hdr, 4), uv_buf_init((char *)msg, (unsigned)len)};
    int n = uv_try_write(st, now, 2);
    if (n > 0) done = (size_t)n;
    /* an error other than EAGAIN comes back through uv_write's callback */
  }
  if (done == total) return 0;
  size_t hdr_left = done < 4 ? 4 - done : 0;
  size_t msg_off = done > 4 ? done - 4 : 0;
  size_t copy = hdr_left + (shared ? 0 : len - msg_off);
  tcp_write *w = malloc(sizeof *w + copy);
  if (!w) return TS_ENOMEM;
  memcpy(w->data, hdr + 4 - hdr_left, hdr_left);
  uv_buf_t bufs[2];
  unsigned nb = 0;
  if (shared) {
    if (hdr_left) bufs[nb++] = uv_buf_init((char *)w->data, (unsigned)hdr_left);
    bufs[nb++] = uv_buf_init((char *)msg + msg_off, (unsigned)(len - msg_off));
    ts_sbuf_retain(shared);
  } else {
    memcpy(w->data + hdr_left, msg + msg_off, len - msg_off);
    bufs[nb++] = uv_buf_init((char *)w->data, (unsigned)copy);
  }
  w->conn = c;
  w->len = total - done;
  w->shared = shared;
  if (uv_write(&w->req, st, bufs, nb, on_write)) {
    ts_sbuf_release(shared);
    free(w);
    return TS_EIO;
  }
  c->queued += w->len;
  return 0;
}

static int tcp_send(ts_conn *bc, const uint8_t *msg, size_t len) {
  tcp_conn *c = (tcp_conn *)bc;
  if (bc->closing) return TS_EIO;
  if (len > UINT32_MAX - 4) return TS_ETOOBIG;
  if (c->queued + len + 4 > bc->server->cfg.hard_output_limit) return TS_EFULL;
  return tcp_out(c, msg, len, NULL);
}

static int tcp_send_shared(ts_conn *bc, ts_sbuf *b) {
  tcp_conn *c = (tcp_conn *)bc;
  if (bc->closing) return TS_EIO;
  if (b->len > UINT32_MAX - 4) return TS_ETOOBIG;
  if (c->queued + b->len + 4 > bc->server->cfg.hard_output_limit) return TS_EFULL;
  return tcp_out(c, b->data, b->len, b);
}

/* Our queue plus the kernel's: a reader that stopped reading shows here as
 * soon as the kernel holds what it did not take (see sockq.h). */
static size_t tcp_pending(ts_conn *bc) {
  tcp_conn *c = (tcp_conn *)bc;
  if (bc->closing) return c->queued;
  return c->queued + ts_sockq_unsent(&c->kq, (const uv_stream_t *)&c->handle);
}

static const ts_conn_ops tcp_ops = {tcp_send, tcp_close, tcp_pending, tcp_send_shared};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  tcp_conn *c = h->data;
  *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static int on_message(void *ud, const uint8_t *msg, size_t len) {
  tcp_conn *c = ud;
  ts_dispatch_message(&c->base, msg, len);
  return c->base.closing ? 1 : 0;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  tcp_conn *c = st->data;
  if (nread < 0) {
    if (ts_framer_pending(&c->framer))
      ts_log_debug("tcp: %s left mid-message (%zu bytes dropped)", c->base.peer,
                   ts_framer_pending(&c->framer));
    if (c->close_reason < 0) c->close_reason = TS_CLOSE_PEER;
    tcp_close(&c->base, nread == UV_EOF ? "peer closed" : uv_strerror((int)nread));
    return;
  }
  if (nread == 0 || c->base.closing) return;
  int rc = ts_framer_feed(&c->framer, (const uint8_t *)buf->base, (size_t)nread, on_message, c);
  if (rc < 0 && !c->base.closing) {
    if (rc == TS_ETOOBIG) {
      c->base.server->limit_refused[TS_LIMIT_MESSAGE]++;
      ts_send_error(&c->base, 0, TS_ETOOBIG, "declared message length over the limit of %zu bytes",
                    c->framer.max_msg);
    } else
      ts_send_error(&c->base, 0, rc, "cannot read message");
    /* the stream is out of sync now: let the Error flush, then close */
    tcp_close(&c->base, ts_strerror(rc));
  }
}

/* The Hello deadline (the linger timer's first use). */
static void on_handshake_timeout(uv_timer_t *t) {
  tcp_conn *c = t->data;
  if (c->base.closing || c->base.hello_done) return;
  double secs = c->owner->server->cfg.handshake_timeout;
  ts_log_info("tcp: closing %s: no Hello within %g s", c->base.peer, secs);
  ts_send_error(&c->base, 0, TS_ENOHELLO, "no Hello within %g s", secs);
  c->close_reason = TS_CLOSE_HANDSHAKE_TIMEOUT;
  tcp_close(&c->base, "handshake timeout");
}

/* Keepalive on an accepted socket: probes start after idle_s of silence,
 * then 3 probes 10 s apart; unacknowledged output gives up after
 * user_timeout_ms. Failures only cost the early detection of a dead peer. */
void ts_tcp_tune_socket(uv_tcp_t *h, int idle_s, unsigned user_timeout_ms) {
  uv_tcp_keepalive(h, 1, (unsigned)idle_s);
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)h, &fd)) return;
  int intvl = 10, cnt = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

static void on_connection(uv_stream_t *server, int status) {
  ts_tcp *t = server->data;
  if (status < 0) {
    ts_log_warn("tcp: accept failed: %s", uv_strerror(status));
    return;
  }
  tcp_conn *c = calloc(1, sizeof *c);
  if (!c) {
    ts_log_error("tcp: out of memory accepting a connection");
    return;
  }
  uv_tcp_init(server->loop, &c->handle);
  uv_timer_init(server->loop, &c->linger);
  c->handle.data = c;
  c->linger.data = c;
  c->owner = t;
  c->close_reason = -1;
  c->next = t->conns;
  if (t->conns) t->conns->prev = c;
  t->conns = c;
  if (uv_accept(server, (uv_stream_t *)&c->handle) || t->stopping) {
    force_close(c);
    return;
  }
  uv_tcp_nodelay(&c->handle, 1);
  const ts_config *cfg = &t->server->cfg;
  ts_tcp_tune_socket(&c->handle, cfg->tcp_keepalive, (unsigned)(cfg->client_timeout * 1000));
  ts_framer_init(&c->framer, t->server->cfg.max_message);
  c->base.ops = &tcp_ops;
  c->base.server = t->server;
  c->base.id = ++t->server->next_conn_id;
  c->base.transport = TS_TRANSPORT_TCP;
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  snprintf(c->base.peer, sizeof c->base.peer, "?");
  if (uv_tcp_getpeername(&c->handle, (struct sockaddr *)&ss, &sl) == 0) {
    char ip[48] = "";
    int port = 0;
    if (ss.ss_family == AF_INET) {
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
      port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
      port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    snprintf(c->base.peer, sizeof c->base.peer, "%s:%d", ip, port);
  }
  c->opened = 1;
  ts_conn_opened(&c->base);
  uv_timer_start(&c->linger, on_handshake_timeout, (uint64_t)(cfg->handshake_timeout * 1000), 0);
  uv_read_start((uv_stream_t *)&c->handle, on_alloc, on_read);
}

int ts_tcp_start(ts_server *s, const char *host, int port, int *bound_port, ts_tcp **out) {
  ts_tcp *t = calloc(1, sizeof *t);
  if (!t) return TS_ENOMEM;
  t->server = s;
  struct sockaddr_storage addr;
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr)) {
    ts_log_error("tcp: '%s' is not an IP address", host);
    free(t);
    return TS_EINVAL;
  }
  uv_tcp_init(s->loop, &t->listener);
  t->listener.data = t;
  int rc = uv_tcp_bind(&t->listener, (struct sockaddr *)&addr, 0);
  if (!rc) rc = uv_listen((uv_stream_t *)&t->listener, 128, on_connection);
  if (rc) {
    ts_log_error("tcp: cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
    t->listener.data = t;
    t->stopping = 1;
    uv_close((uv_handle_t *)&t->listener, on_listener_closed);
    return TS_EIO;
  }
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  uv_tcp_getsockname(&t->listener, (struct sockaddr *)&ss, &sl);
  *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
  *out = t;
  return 0;
}


void ts_tcp_close_all(ts_tcp *t, const uint8_t *goodbye, size_t len) {
  for (tcp_conn *c = t->conns; c; c = c->next) {
    if (c->base.closing) continue;
    /* clients joined to a session were told already (ts_server_shutdown) */
    if (goodbye && !c->base.session) tcp_send(&c->base, goodbye, len);
    c->close_reason = TS_CLOSE_SHUTDOWN;
    /* let the goodbye flush: shutdown then close */
    tcp_close(&c->base, "server shutting down");
  }
}

void ts_tcp_stop(ts_tcp *t) {
  if (!t || t->stopping) return;
  t->stopping = 1;
  uv_close((uv_handle_t *)&t->listener, on_listener_closed);
}
