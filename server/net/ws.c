/*
 * ws.c: the WebSocket transport that follows a successful /ws handshake.
 * wslay's event API does the framing (unmasking, fragments, control frames,
 * UTF-8 checks, the close handshake, the 1009 limit); its recv/send
 * callbacks work on memory only: input is whatever libuv just read, and the
 * frames it produces are gathered and handed to uv_write in one piece.
 *
 * Exposed to the dispatcher as a ts_conn (server/conn.h): each complete
 * binary message goes to ts_dispatch_message(); a text message closes with
 * 1003. ops->send queues one binary message (copied), refused with TS_EFULL
 * once the connection's queued output passes max_pending_output;
 * ops->send_shared sends a frame's shared Envelope (sbuf.h) past wslay: a
 * server's frames are not masked (RFC 6455 5.1), so the header is the only
 * per-connection byte and the Envelope is written by reference, after
 * whatever wslay holds (pongs, pings) has been flushed; ops->close
 * sends a close frame and closes the socket after it is flushed (bounded by
 * TS__CLOSE_WAIT_MS). Sends made while a message is being dispatched are
 * flushed together when wslay_event_recv returns. Reading pauses while the
 * queued output is over max_pending_output (a peer that pings without
 * reading), and resumes when it has drained to half.
 *
 * Liveness: the connection's timer ticks (at a fraction of the shortest
 * timeout) from the upgrade on. A connection whose dispatcher has not seen
 * Hello within handshake_ms is closed (1008); otherwise a ping goes out
 * every ping_ms, and a peer from which nothing at all (message, pong) has
 * arrived for client_timeout_ms is closed (1001): a browser answers pings by
 * itself, so a healthy page that only watches frames stays open, while a
 * vanished peer or a client that never reads goes. Each close is counted by
 * reason (metrics.h).
 */
#include <stdlib.h>
#include <string.h>

#include "../core/ts_error.h"
#include "../metrics.h"
#include "../sbuf.h"
#include "../server.h"
#include "../sockq.h"
#include "net_internal.h"

static void ws_flush(ts__net_conn *c);

static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                          void *ud) {
  ts__net_conn *c = ud;
  (void)flags;
  if (c->rin_len == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t n = len < c->rin_len ? len : c->rin_len;
  memcpy(buf, c->rin, n);
  c->rin += n;
  c->rin_len -= n;
  return (ssize_t)n;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
                          int flags, void *ud) {
  ts__net_conn *c = ud;
  (void)flags;
  if (c->olen + len > c->ocap) {
    size_t cap = c->ocap ? c->ocap * 2 : 4096;
    while (cap < c->olen + len) cap *= 2;
    uint8_t *p = realloc(c->obuf, cap);
    if (!p) {
      wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
      return -1;
    }
    c->obuf = p;
    c->ocap = cap;
  }
  memcpy(c->obuf + c->olen, data, len);
  c->olen += len;
  return (ssize_t)len;
}

static void ws_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                      void *ud) {
  ts__net_conn *c = ud;
  (void)ctx;
  if (c->base.closing) return; /* close requested: nothing more is dispatched */
  if (arg->opcode == WSLAY_BINARY_FRAME) {
    const uint8_t *msg = arg->msg ? arg->msg : (const uint8_t *)"";
    ts_http *h = c->h;
    if (h->cfg.on_message)
      h->cfg.on_message(&c->base, msg, arg->msg_length, h->cfg.hook_ud);
    else
      ts_dispatch_message(&c->base, msg, arg->msg_length);
  } else if (arg->opcode == WSLAY_TEXT_FRAME) {
    ts__ws_close(c, 1003, "binary messages only");
  }
  /* ping, pong and close are answered by wslay itself */
}

static const struct wslay_event_callbacks ws_callbacks = {
    .recv_callback = ws_recv_cb,
    .send_callback = ws_send_cb,
    .on_msg_recv_callback = ws_msg_cb,
};

/* Turns every message wslay has queued into frame bytes in c->obuf.
 * Returns 0, or -1 when the connection had to be closed. */
static int ws_frame_queued(ts__net_conn *c) {
  if (wslay_event_want_write(c->ws) && wslay_event_send(c->ws) != 0) {
    ts__conn_close_now(c);
    return -1;
  }
  if (!c->too_big_counted &&
      wslay_event_get_status_code_sent(c->ws) == WSLAY_CODE_MESSAGE_TOO_BIG) {
    c->too_big_counted = 1; /* a message over max_message: wslay answered 1009 */
    if (c->h->cfg.message_too_big) (*c->h->cfg.message_too_big)++;
  }
  return 0;
}

/* Moves everything wslay has queued into one uv_write; once the close
 * frame is out, the connection lingers until the peer's EOF. */
static void ws_flush(ts__net_conn *c) {
  if (c->close_started || c->shutdown_sent || !c->ws) return;
  if (ws_frame_queued(c) != 0) return;
  if (c->olen > 0) {
    uint8_t *out = c->obuf;
    uv_buf_t b = uv_buf_init((char *)out, (unsigned)c->olen);
    c->obuf = NULL;
    c->olen = c->ocap = 0;
    if (ts__conn_write(c, &b, 1, out, NULL) != 0) return;
  }
  if (wslay_event_get_close_sent(c->ws)) ts__conn_linger(c, TS__CLOSE_WAIT_MS);
}

static int ws_send(ts_conn *bc, const uint8_t *msg, size_t len);
static int ws_send_shared(ts_conn *bc, ts_sbuf *b);
static void ws_close_op(ts_conn *bc, const char *reason);
static size_t ws_pending(ts_conn *bc);
static size_t ws_pending_total(ts_conn *bc);

static const ts_conn_ops ws_ops = {
    .send = ws_send,
    .close = ws_close_op,
    .pending = ws_pending_total,
    .send_shared = ws_send_shared,
};

static size_t ws_pending(ts_conn *bc) {
  ts__net_conn *c = (ts__net_conn *)bc;
  if (!c->ws || c->close_started) return 0;
  return wslay_event_get_queued_msg_length(c->ws) + c->olen + ts__conn_write_queued(c);
}

/* ops->pending: our queues plus the kernel's unsent bytes, so that the
 * session sees a reader that stopped reading as soon as the kernel holds
 * what it did not take (sockq.h). The read back-pressure above counts only
 * our own queues: the kernel's drains without telling us. */
static size_t ws_pending_total(ts_conn *bc) {
  ts__net_conn *c = (ts__net_conn *)bc;
  size_t own = ws_pending(bc);
  if (!c->ws || c->close_started) return own;
  return own + ts_sockq_unsent(&c->kq, (const uv_stream_t *)&c->tcp);
}

static int ws_send(ts_conn *bc, const uint8_t *msg, size_t len) {
  ts__net_conn *c = (ts__net_conn *)bc;
  if (!c->ws || c->close_started || c->base.closing) return TS_EIO;
  if (!msg && len > 0) return TS_EINVAL;
  size_t pending = ws_pending(bc);
  /* A message larger than the limit still goes when nothing is queued, so
   * one big keyframe cannot wedge a connection forever. */
  if (pending > 0 && pending + len > c->h->cfg.max_pending_output) return TS_EFULL;
  struct wslay_event_msg m = {.opcode = WSLAY_BINARY_FRAME, .msg = msg, .msg_length = len};
  int r = wslay_event_queue_msg(c->ws, &m);
  if (r == WSLAY_ERR_NOMEM) return TS_ENOMEM;
  if (r != 0) return TS_EIO;
  if (!c->in_recv) ws_flush(c);
  return 0;
}

/* The header of an unmasked, unfragmented binary frame of len bytes
 * (RFC 6455 5.2) in out; returns its length (2, 4 or 10). */
static size_t ws_binary_header(uint8_t out[10], size_t len) {
  out[0] = 0x80 | WSLAY_BINARY_FRAME; /* FIN */
  if (len < 126) {
    out[1] = (uint8_t)len;
    return 2;
  }
  if (len <= 0xFFFF) {
    out[1] = 126;
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
    return 4;
  }
  out[1] = 127;
  for (int i = 0; i < 8; i++) out[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
  return 10;
}

static int ws_send_shared(ts_conn *bc, ts_sbuf *b) {
  ts__net_conn *c = (ts__net_conn *)bc;
  if (!c->ws || c->close_started || c->base.closing) return TS_EIO;
  /* inside wslay_event_recv, what is sent is framed after it returns:
   * queue behind it */
  if (c->in_recv) return ws_send(bc, b->data, b->len);
  size_t pending = ws_pending(bc);
  if (pending > 0 && pending + b->len > c->h->cfg.max_pending_output) return TS_EFULL;
  /* wslay's frames first, whole (its send callback takes everything), so
   * the stream is at a frame boundary */
  ws_flush(c);
  if (c->close_started || c->lingering || c->base.closing) return TS_EIO;
  uint8_t hdr[10];
  size_t hl = ws_binary_header(hdr, b->len);
  return ts__conn_write_shared(c, hdr, hl, b);
}

void ts__ws_close(ts__net_conn *c, uint16_t code, const char *reason) {
  if (!c->ws || c->close_started || c->lingering) return;
  c->base.closing = 1;
  if (c->close_reason < 0) c->close_reason = TS_CLOSE_SERVER;
  size_t rl = reason ? strlen(reason) : 0;
  if (rl > 123) { /* the close frame's limit; cut on a UTF-8 boundary */
    rl = 123;
    while (rl > 0 && ((unsigned char)reason[rl] & 0xC0) == 0x80) rl--;
  }
  /* wslay sends control frames ahead of queued data and nothing after a
   * close, so what the dispatcher sent before closing is framed first. */
  if (ws_frame_queued(c) != 0) return;
  int r = wslay_event_queue_close(c->ws, code, (const uint8_t *)reason, rl);
  if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) {
    ts__conn_close_now(c);
    return;
  }
  if (!c->in_recv) ws_flush(c);
}

static void ws_close_op(ts_conn *bc, const char *reason) {
  ts__net_conn *c = (ts__net_conn *)bc;
  if (c->close_reason < 0) c->close_reason = TS_CLOSE_SERVER;
  ts__ws_close(c, 1000, reason);
}

/* The liveness tick (see the top of this file). */
static void ws_tick(uv_timer_t *t) {
  ts__net_conn *c = t->data;
  if (!c->ws || c->close_started || c->lingering || c->base.closing) return;
  const ts_http_config *cfg = &c->h->cfg;
  uint64_t now = uv_now(c->h->loop);
  if (cfg->handshake_ms && !c->base.hello_done && now - c->ws_open_ms >= cfg->handshake_ms) {
    c->close_reason = TS_CLOSE_HANDSHAKE_TIMEOUT;
    ts__ws_close(c, 1008, "no Hello in time");
    return;
  }
  if (cfg->client_timeout_ms && now - c->last_rx_ms >= cfg->client_timeout_ms) {
    c->close_reason = TS_CLOSE_CLIENT_TIMEOUT;
    ts__ws_close(c, 1001, "no reply to pings");
    /* a vanished peer never acknowledges the close: do not wait for it */
    if (!c->close_started) ts__conn_close_now(c);
    return;
  }
  if (cfg->ping_ms && now - c->last_ping_ms >= cfg->ping_ms) {
    c->last_ping_ms = now;
    struct wslay_event_msg m = {.opcode = WSLAY_PING, .msg = NULL, .msg_length = 0};
    if (wslay_event_queue_msg(c->ws, &m) == 0) ws_flush(c);
  }
}

/* Tick period: a quarter of the shortest timeout in use (0: none). */
static uint64_t ws_tick_ms(const ts_http_config *cfg) {
  unsigned v[3] = {cfg->handshake_ms, cfg->ping_ms, cfg->client_timeout_ms};
  uint64_t m = 0;
  for (int i = 0; i < 3; i++)
    if (v[i] && (!m || v[i] < m)) m = v[i];
  if (!m) return 0;
  m /= 4;
  return m < TS__WS_TICK_MIN_MS ? TS__WS_TICK_MIN_MS : m;
}

void ts__ws_on_read(ts__net_conn *c, const uint8_t *data, size_t len) {
  if (!c->ws || c->close_started || c->lingering) return;
  c->last_rx_ms = uv_now(c->h->loop);
  c->rin = data;
  c->rin_len = len;
  c->in_recv = 1;
  int r = wslay_event_recv(c->ws);
  c->in_recv = 0;
  c->rin = NULL;
  c->rin_len = 0;
  if (r != 0) {
    if (c->close_reason < 0) c->close_reason = TS_CLOSE_SERVER;
    ts__conn_close_now(c);
    return;
  }
  ws_flush(c);
  /* Replies wslay makes by itself (pongs) bypass the EFULL check of
   * ws_send, so a peer that sends without reading is not read either. */
  if (!c->close_started && !c->lingering &&
      ws_pending(&c->base) > c->h->cfg.max_pending_output) {
    c->backpressure = 1;
    ts__conn_read_stop(c);
  }
}

void ts__ws_on_drain(ts__net_conn *c) {
  if (!c->backpressure || c->close_started || c->lingering) return;
  if (ws_pending(&c->base) > c->h->cfg.max_pending_output / 2) return;
  c->backpressure = 0;
  ts__conn_read_start(c);
}

int ts__ws_begin(ts__net_conn *c, const uint8_t *rest, size_t len) {
  ts_http *h = c->h;
  if (c->close_started) return TS_EIO;
  c->backpressure = 0; /* the HTTP phase's, if any */
  if (wslay_event_context_server_init(&c->ws, &ws_callbacks, c) != 0) {
    c->ws = NULL;
    ts__conn_close_now(c);
    return TS_ENOMEM;
  }
  wslay_event_config_set_max_recv_msg_length(c->ws, h->cfg.max_message);
  c->is_ws = 1;
  c->base.ops = &ws_ops;
  c->base.server = h->server;
  /* ids are unique across transports: replies find their connection by id */
  c->base.id = h->server ? ++h->server->next_conn_id : ++h->next_id;
  c->base.transport = TS_TRANSPORT_WS;
  uv_timer_stop(&c->timer); /* the HTTP phase's */
  c->ws_open_ms = c->last_rx_ms = c->last_ping_ms = uv_now(h->loop);
  uint64_t tick = ws_tick_ms(&h->cfg);
  if (tick) uv_timer_start(&c->timer, ws_tick, tick, tick);
  c->opened = 1;
  if (h->cfg.on_open)
    h->cfg.on_open(&c->base, h->cfg.hook_ud);
  else
    ts_conn_opened(&c->base);
  ts__conn_read_start(c);
  if (len > 0) ts__ws_on_read(c, rest, len);
  return 0;
}

void ts__ws_conn_free(ts__net_conn *c) {
  if (c->ws) wslay_event_context_free(c->ws);
  c->ws = NULL;
  free(c->obuf);
  c->obuf = NULL;
  c->olen = c->ocap = 0;
}
