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
 * once the connection's queued output passes max_pending_output; ops->close
 * sends a close frame and closes the socket after it is flushed (bounded by
 * TS__CLOSE_WAIT_MS). Sends made while a message is being dispatched are
 * flushed together when wslay_event_recv returns. Reading pauses while the
 * queued output is over max_pending_output (a peer that pings without
 * reading), and resumes when it has drained to half.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/ts_error.h"
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
static void ws_close_op(ts_conn *bc, const char *reason);
static size_t ws_pending(ts_conn *bc);
static size_t ws_pending_total(ts_conn *bc);

static const ts_conn_ops ws_ops = {
    .send = ws_send,
    .close = ws_close_op,
    .pending = ws_pending_total,
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
  return own + ts_socket_unsent((const uv_stream_t *)&c->tcp);
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

void ts__ws_close(ts__net_conn *c, uint16_t code, const char *reason) {
  if (!c->ws || c->close_started || c->lingering) return;
  c->base.closing = 1;
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
  ts__ws_close((ts__net_conn *)bc, 1000, reason);
}

void ts__ws_on_read(ts__net_conn *c, const uint8_t *data, size_t len) {
  if (!c->ws || c->close_started || c->lingering) return;
  c->rin = data;
  c->rin_len = len;
  c->in_recv = 1;
  int r = wslay_event_recv(c->ws);
  c->in_recv = 0;
  c->rin = NULL;
  c->rin_len = 0;
  if (r != 0) {
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
  c->base.id = ++h->next_id;
  c->base.transport = TS_TRANSPORT_WS;
  uv_timer_stop(&c->timer); /* no idle timeout: the dispatcher decides */
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
