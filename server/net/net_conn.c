/*
 * net_conn.c: the socket life of one HTTP-port connection, whatever it
 * speaks: accept, reads (routed to the HTTP or the WebSocket phase), writes
 * with owned buffers, graceful and immediate close, and teardown in the
 * close callback (libuv style: nothing is freed anywhere else).
 *
 * Graceful close ("linger"): queued writes finish, uv_shutdown sends FIN,
 * input is discarded until the peer's EOF, and a timer bounds the whole
 * thing. Closing a socket with unread input would make the kernel send RST,
 * which can destroy a response or close frame the peer has not read yet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ts_error.h"
#include "../metrics.h"
#include "../sbuf.h"
#include "../server.h"
#include "net_internal.h"

typedef struct write_req {
  uv_write_t req;
  ts__net_conn *c;
  void *own[2];
  ts_sbuf *shared;                  /* referenced until written (write_shared) */
  uint8_t hdr[TS__WRITE_HDR_MAX];   /* the part of a header not yet written */
} write_req;

static void on_handle_closed(uv_handle_t *handle) {
  ts__net_conn *c = handle->data;
  if (--c->handles_open > 0) return;
  ts_http *h = c->h;
  if (c->opened) {
    ts_metrics_count_close(h->server, c->close_reason < 0 ? TS_CLOSE_PEER : c->close_reason);
    if (h->cfg.on_closed)
      h->cfg.on_closed(&c->base, h->cfg.hook_ud);
    else
      ts_conn_closed(&c->base);
  }
  ts__ws_conn_free(c);
  ts__http_conn_free(c);
  if (c->prev)
    c->prev->next = c->next;
  else
    h->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  h->nconns--;
  free(c);
  ts__http_conn_gone(h);
}

void ts__conn_close_now(ts__net_conn *c) {
  if (c->close_started) return;
  c->close_started = 1;
  c->base.closing = 1;
  c->reading = 0;
  uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
  uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_close_timeout(uv_timer_t *t) { ts__conn_close_now(t->data); }

static void on_shutdown(uv_shutdown_t *req, int status) {
  ts__net_conn *c = req->data;
  if (c->close_started) return;
  if (status < 0) {
    ts__conn_close_now(c);
    return;
  }
  /* Everything was written and FIN sent: give the peer a moment for EOF. */
  uv_timer_start(&c->timer, on_close_timeout, TS__CLOSE_WAIT_MS, 0);
}

void ts__conn_linger(ts__net_conn *c, uint64_t timeout_ms) {
  if (c->close_started || c->lingering) return;
  c->lingering = 1;
  c->base.closing = 1;
  uv_timer_start(&c->timer, on_close_timeout, timeout_ms, 0);
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
    ts__conn_close_now(c);
    return;
  }
  c->shutdown_sent = 1;
  ts__conn_read_start(c); /* to see the EOF, discarding what comes before */
}

static void on_write(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  ts__net_conn *c = w->c;
  free(w->own[0]);
  free(w->own[1]);
  ts_sbuf_release(w->shared);
  free(w);
  if (c->close_started) return;
  if (status < 0) {
    if (c->close_reason < 0) c->close_reason = TS_CLOSE_PEER;
    ts__conn_close_now(c);
    return;
  }
  if (c->lingering) return;
  if (c->is_ws)
    ts__ws_on_drain(c);
  else
    ts__http_on_drain(c);
}

int ts__conn_write(ts__net_conn *c, const uv_buf_t *bufs, unsigned nbufs,
                   void *own1, void *own2) {
  if (c->close_started || c->shutdown_sent) {
    free(own1);
    free(own2);
    return TS_EIO;
  }
  write_req *w = malloc(sizeof *w);
  if (!w) {
    free(own1);
    free(own2);
    ts__conn_close_now(c);
    return TS_ENOMEM;
  }
  w->c = c;
  w->own[0] = own1;
  w->own[1] = own2;
  w->shared = NULL;
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, nbufs, on_write) != 0) {
    free(own1);
    free(own2);
    free(w);
    ts__conn_close_now(c);
    return TS_EIO;
  }
  return 0;
}

int ts__conn_write_shared(ts__net_conn *c, const uint8_t *hdr, size_t hlen, ts_sbuf *b) {
  if (c->close_started || c->shutdown_sent) return TS_EIO;
  if (hlen > TS__WRITE_HDR_MAX) return TS_EINVAL;
  uv_stream_t *st = (uv_stream_t *)&c->tcp;
  size_t total = hlen + b->len, done = 0;
  /* uv_try_write refuses (EAGAIN) while earlier writes are queued: the
   * order holds; any other error comes back through uv_write's callback */
  uv_buf_t now[2] = {uv_buf_init((char *)hdr, (unsigned)hlen),
                     uv_buf_init((char *)b->data, (unsigned)b->len)};
  int n = uv_try_write(st, now, 2);
  if (n > 0) done = (size_t)n;
  if (done == total) return 0;
  write_req *w = malloc(sizeof *w);
  if (!w) {
    ts__conn_close_now(c);
    return TS_ENOMEM;
  }
  w->c = c;
  w->own[0] = w->own[1] = NULL;
  size_t hdr_left = done < hlen ? hlen - done : 0;
  size_t body_off = done > hlen ? done - hlen : 0;
  memcpy(w->hdr, hdr + hlen - hdr_left, hdr_left);
  uv_buf_t bufs[2];
  unsigned nb = 0;
  if (hdr_left) bufs[nb++] = uv_buf_init((char *)w->hdr, (unsigned)hdr_left);
  bufs[nb++] = uv_buf_init((char *)b->data + body_off, (unsigned)(b->len - body_off));
  ts_sbuf_retain(b);
  w->shared = b;
  if (uv_write(&w->req, st, bufs, nb, on_write) != 0) {
    ts_sbuf_release(b);
    free(w);
    ts__conn_close_now(c);
    return TS_EIO;
  }
  return 0;
}

size_t ts__conn_write_queued(ts__net_conn *c) {
  if (c->close_started) return 0;
  return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  ts__net_conn *c = handle->data;
  (void)suggested;
  *buf = uv_buf_init(c->h->rbuf, sizeof c->h->rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  ts__net_conn *c = stream->data;
  (void)buf;
  if (c->close_started) return;
  if (nread < 0) { /* EOF or error: nothing more can be said either way */
    if (c->close_reason < 0) c->close_reason = TS_CLOSE_PEER;
    ts__conn_close_now(c);
    return;
  }
  if (nread == 0 || c->lingering) return;
  const uint8_t *data = (const uint8_t *)c->h->rbuf;
  if (c->is_ws)
    ts__ws_on_read(c, data, (size_t)nread);
  else
    ts__http_on_read(c, data, (size_t)nread);
}

void ts__conn_read_start(ts__net_conn *c) {
  if (c->close_started || c->reading) return;
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
    ts__conn_close_now(c);
    return;
  }
  c->reading = 1;
}

void ts__conn_read_stop(ts__net_conn *c) {
  if (c->close_started || !c->reading) return;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = 0;
}

static void peer_name(ts__net_conn *c) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char ip[64] = "?";
  int port = 0;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET) {
      const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
      uv_ip4_name(a, ip, sizeof ip);
      port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
      uv_ip6_name(a, ip, sizeof ip);
      port = ntohs(a->sin6_port);
    }
  }
  if (strchr(ip, ':'))
    snprintf(c->base.peer, sizeof c->base.peer, "[%.40s]:%d", ip, port);
  else
    snprintf(c->base.peer, sizeof c->base.peer, "%.40s:%d", ip, port);
}

int ts__conn_accept(ts_http *h) {
  ts__net_conn *c = calloc(1, sizeof *c);
  if (!c) return TS_ENOMEM;
  c->h = h;
  c->close_reason = -1;
  if (uv_tcp_init(h->loop, &c->tcp) != 0) {
    free(c);
    return TS_EIO;
  }
  uv_timer_init(h->loop, &c->timer); /* cannot fail */
  c->tcp.data = c;
  c->timer.data = c;
  c->handles_open = 2;
  c->next = h->conns;
  if (h->conns) h->conns->prev = c;
  h->conns = c;
  h->nconns++;
  if (uv_accept((uv_stream_t *)&h->listener, (uv_stream_t *)&c->tcp) != 0) {
    ts__conn_close_now(c);
    return TS_EIO;
  }
  uv_tcp_nodelay(&c->tcp, 1); /* frames are latency-bound, not throughput-bound */
  if (h->cfg.keepalive_s > 0) ts_tcp_tune_socket(&c->tcp, h->cfg.keepalive_s, h->cfg.client_timeout_ms);
  peer_name(c);
  ts__http_conn_init(c);
  ts__conn_read_start(c);
  return 0;
}
