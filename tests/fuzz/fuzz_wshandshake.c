/*
 * fuzz_wshandshake.c: fuzz target for the HTTP/1.1 request parsing in front
 * of the WebSocket upgrade and the upgrade check itself: server/net/http.c
 * (http-parser callbacks, header collection and limits, routing, keep-alive
 * and pipelining, pausing under output backpressure and resuming) and
 * server/net/ws_handshake.c (ts_ws_check_upgrade, the key check and the
 * Sec-WebSocket-Accept computation), and the static files' conditional
 * and encoding headers (server/net/http_cond.c: If-None-Match against the
 * file's tag, Accept-Encoding), fed raw bytes as a socket would. The
 * listener has no gzip cache here (its compression runs on libuv's thread
 * pool; tests/unit/test_net.c covers it), so files go uncompressed.
 *
 * http.c is compiled into this target (tests/fuzz/CMakeLists.txt) with a
 * fake of the socket plumbing it calls (net_conn.c: ts__conn_write and
 * friends) and of the WebSocket phase (ws.c: ts__ws_begin), so no socket
 * is involved: a ts__net_conn is set up as ts__conn_accept would (a libuv
 * timer on a private loop, ts__http_conn_init) and the input goes to
 * ts__http_on_read. Not covered here: net_conn.c itself (accept, libuv
 * reads and writes, lingering close) and the WebSocket frames after a 101
 * (fuzz_framing covers the frame decoder; the itests cover ws.c).
 *
 * Input: byte 0 = flags: bit 0 simulates a slow reader (responses stay
 * "queued" until a drain after each chunk, so parsing pauses and resumes on
 * held input); bits 1..7 choose the chunk size the rest is delivered in
 * (1 + 8 * (flags >> 1) bytes). Static files come from a temp directory
 * holding index.html.
 *
 * Checks: every response written starts "HTTP/1.1 NNN " and ends its head
 * with an empty line; a 101 is written exactly when the WebSocket phase
 * begins, at most once, and carries a Sec-WebSocket-Accept line of 28
 * characters (the key's SHA-1 in base64); nothing is written after the connection was
 * closed or handed to the WebSocket phase; whatever the input, the
 * connection's memory is freed by ts__http_conn_free (leak check).
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_internal.h"
#include "ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static ts_http http;
static char root[256];
static int ready;

/* ---- what the fake socket saw, per input ---------------------------------- */

static struct {
  int responses, upgrades, ws_begun, closed, lingering, reading_stopped;
  size_t queued; /* bytes "not yet written" (slow-reader mode) */
  int slow;
} seen;

static void check_response(const uv_buf_t *bufs, unsigned nbufs) {
  if (nbufs < 1 || bufs[0].len < 13) abort();
  const char *h = bufs[0].base;
  if (memcmp(h, "HTTP/1.1 ", 9) != 0 || h[12] != ' ') abort();
  for (int i = 9; i < 12; i++)
    if (h[i] < '0' || h[i] > '9') abort();
  /* the head ends with an empty line (the body, if any, is the second buf) */
  if (bufs[0].len < 4 || memcmp(h + bufs[0].len - 4, "\r\n\r\n", 4) != 0) abort();
  if (memcmp(h + 9, "101", 3) == 0) {
    const char *a = strstr(h, "Sec-WebSocket-Accept: ");
    if (!a || strlen(a) < 22 + TS_WS_ACCEPT_LEN + 2) abort();
    a += 22;
    if (memcmp(a + TS_WS_ACCEPT_LEN, "\r\n", 2) != 0) abort();
    seen.upgrades++;
  }
}

/* ---- fakes of net_conn.c and ws.c ------------------------------------------ */

int ts__conn_write(ts__net_conn *c, const uv_buf_t *bufs, unsigned nbufs, void *own1,
                   void *own2) {
  if (c->close_started || seen.ws_begun) abort(); /* written after the end */
  check_response(bufs, nbufs);
  seen.responses++;
  if (seen.slow)
    for (unsigned i = 0; i < nbufs; i++) seen.queued += bufs[i].len;
  free(own1);
  free(own2);
  return 0;
}

size_t ts__conn_write_queued(ts__net_conn *c) {
  (void)c;
  return seen.queued;
}

void ts__conn_linger(ts__net_conn *c, uint64_t timeout_ms) {
  (void)timeout_ms;
  c->lingering = 1;
  seen.lingering = 1;
}

void ts__conn_close_now(ts__net_conn *c) {
  c->close_started = 1;
  seen.closed = 1;
}

void ts__conn_read_start(ts__net_conn *c) {
  c->reading = 1;
  seen.reading_stopped = 0;
}

void ts__conn_read_stop(ts__net_conn *c) {
  c->reading = 0;
  seen.reading_stopped = 1;
}

int ts__ws_begin(ts__net_conn *c, const uint8_t *rest, size_t len) {
  (void)rest;
  (void)len;
  if (!c->upgrade_ok || seen.ws_begun) abort();
  seen.ws_begun = 1;
  c->is_ws = 1;
  return 0;
}

/* The daemon's close counters (metrics.c needs the whole server): counted
 * here, checked by nothing but kept honest. */
static unsigned long closes_counted;
void ts_metrics_count_close(ts_server *s, int reason) {
  (void)s;
  if (reason < 0 || reason > 16) abort();
  closes_counted++;
}

/* Never reached from a single connection's input (listener paths). */
int ts__conn_accept(ts_http *h) {
  (void)h;
  abort();
}

void ts__ws_close(ts__net_conn *c, uint16_t code, const char *reason) {
  (void)c;
  (void)code;
  (void)reason;
  abort();
}

/* ---- set-up -------------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  uv_loop_close(&loop);
  nftw(root, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void setup(void) {
  snprintf(root, sizeof root, "%s/tissued-fuzz-ws-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(root)) abort();
  char path[300];
  snprintf(path, sizeof path, "%s/index.html", root);
  FILE *f = fopen(path, "w");
  if (!f) abort();
  fputs("<!doctype html><title>tissued</title>\n", f);
  fclose(f);
  if (uv_loop_init(&loop)) abort();
  http.loop = &loop;
  http.web_root = root;
  http.cfg.web_root = root;
  http.cfg.max_message = TS__WS_DEFAULT_MAX_MESSAGE;
  ready = 1;
  atexit(cleanup);
}

static void on_timer_closed(uv_handle_t *h) { (void)h; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ready) setup();
  if (size < 1) return 0;
  memset(&seen, 0, sizeof seen);
  seen.slow = data[0] & 1;
  http.cfg.max_pending_output = seen.slow ? 64 : TS__WS_DEFAULT_MAX_PENDING;
  size_t chunk = 1 + 8 * (size_t)(data[0] >> 1);
  data++;
  size--;

  ts__net_conn *c = calloc(1, sizeof *c);
  if (!c) abort();
  c->h = &http;
  if (uv_timer_init(&loop, &c->timer)) abort();
  c->reading = 1;
  ts__http_conn_init(c);
  for (size_t off = 0; off < size && c->req && !c->close_started && !seen.ws_begun;) {
    size_t n = size - off < chunk ? size - off : chunk;
    /* a copy of exactly n bytes, so that ASan sees any read past it */
    uint8_t *buf = malloc(n);
    if (!buf) abort();
    memcpy(buf, data + off, n);
    ts__http_on_read(c, buf, n);
    free(buf);
    off += n;
    if (seen.slow) { /* the reader catches up: everything is written */
      seen.queued = 0;
      ts__http_on_drain(c);
    }
  }
  if (seen.upgrades != seen.ws_begun) abort(); /* a 101 without the switch, or back */
  ts__http_conn_free(c);
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  uv_run(&loop, UV_RUN_NOWAIT);
  free(c);
  return 0;
}
