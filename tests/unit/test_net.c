/*
 * test_net.c: unit tests of the HTTP listener and WebSocket transport
 * (server/net/): the Sec-WebSocket-Accept computation, upgrade validation,
 * request path cleaning and root-confined resolution, and loopback tests
 * that run ts_http on its own libuv loop in a thread and talk to it with
 * plain POSIX sockets (HTTP requests, a real WebSocket upgrade, masked and
 * fragmented frames, close codes, back-pressure, shutdown).
 *
 * The daemon's dispatcher is replaced by the config's on_open / on_message /
 * on_closed hooks, which record what arrives and can echo it back.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include "ts_check.h"

#include "net/net_internal.h"
#include "sockq.h"
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

#include "core/ts_error.h"
#include "net/http.h"
#include "net/http_cond.h"
#include "net/http_gzip.h"
#include "net/static_files.h"
#include "net/ws.h"
#include "sbuf.h"

/* ---- a scratch web root ------------------------------------------------- */

static char g_dir[256]; /* made once per test case, before the forks */
static char g_www[300];

static void write_file(const char *rel, const char *text) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", g_dir, rel);
  FILE *f = fopen(p, "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static void mkdir_rel(const char *rel) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", g_dir, rel);
  ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void make_tree(void) {
  strcpy(g_dir, "/tmp/ts_net_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
  snprintf(g_www, sizeof g_www, "%s/www", g_dir);
  mkdir_rel("www");
  mkdir_rel("www/sub");
  mkdir_rel("www/node_modules");
  mkdir_rel("www/node_modules/pkg");
  write_file("www/index.html", "<!doctype html><title>tissued</title>\n");
  write_file("www/app.js", "export const answer = 42;\n");
  write_file("www/sub/index.html", "<p>sub</p>\n");
  write_file("www/node_modules/pkg/mod.mjs", "export default 7;\n");
  write_file("www/.hidden", "hidden\n");
  write_file("secret.txt", "top secret\n");
  write_file("tissue.proto", "syntax = \"proto3\";\n");
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/www/evil.txt", g_dir);
  ck_assert_int_eq(symlink("../secret.txt", p), 0);
  snprintf(p, sizeof p, "%s/www/alias.js", g_dir);
  ck_assert_int_eq(symlink("app.js", p), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void remove_tree(void) {
  if (g_dir[0]) nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  g_dir[0] = '\0';
}

/* ---- pure functions ----------------------------------------------------- */

START_TEST(test_accept_key_rfc6455) {
  char out[TS_WS_ACCEPT_LEN + 1];
  ck_assert_int_eq(ts_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
  ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  ck_assert_int_eq(ts_ws_accept_key("x3JJHMbDL1EzLkh9GBhXDw==", out), 0);
  ck_assert_str_eq(out, "HSmrc0sMlYUkAGmm5OPpG2HaGWk=");
  ck_assert_int_eq(ts_ws_accept_key(NULL, out), TS_EINVAL);
  ck_assert_int_eq(ts_ws_accept_key("", out), TS_EINVAL);
}
END_TEST

START_TEST(test_key_and_upgrade_checks) {
  ck_assert_int_eq(ts_ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=="), 1);
  ck_assert_int_eq(ts_ws_key_valid("dGhlIHNhbXBsZSBub25jZQ"), 0);     /* no padding */
  ck_assert_int_eq(ts_ws_key_valid("dGhlIHNhbXBsZSBub25jZSE="), 0);   /* 17 bytes */
  ck_assert_int_eq(ts_ws_key_valid("dGhlIHNhbXBsZSBub25j"), 0);       /* 15 bytes */
  ck_assert_int_eq(ts_ws_key_valid("dGhlIHNhbXBsZSBub25j*Q=="), 0);   /* bad char */
  ck_assert_int_eq(ts_ws_key_valid(NULL), 0);

  ck_assert_int_eq(ts_ws_list_has_token("keep-alive, Upgrade", "upgrade"), 1);
  ck_assert_int_eq(ts_ws_list_has_token("Upgrade", "upgrade"), 1);
  ck_assert_int_eq(ts_ws_list_has_token("  upgrade  ,x", "upgrade"), 1);
  ck_assert_int_eq(ts_ws_list_has_token("upgraded", "upgrade"), 0);
  ck_assert_int_eq(ts_ws_list_has_token("keep-alive", "upgrade"), 0);
  ck_assert_int_eq(ts_ws_list_has_token(NULL, "upgrade"), 0);

  const char *k = "dGhlIHNhbXBsZSBub25jZQ==";
  ck_assert_ptr_null(ts_ws_check_upgrade(1, 1, "websocket", "Upgrade", "13", k));
  ck_assert_ptr_null(ts_ws_check_upgrade(1, 1, "WebSocket", "keep-alive, Upgrade", "13", k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(0, 1, "websocket", "Upgrade", "13", k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 0, "websocket", "Upgrade", "13", k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 1, NULL, "Upgrade", "13", k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 1, "h2c", "Upgrade", "13", k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 1, "websocket", "keep-alive", "13", k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 1, "websocket", "Upgrade", "8", k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 1, "websocket", "Upgrade", NULL, k));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 1, "websocket", "Upgrade", "13", NULL));
  ck_assert_ptr_nonnull(ts_ws_check_upgrade(1, 1, "websocket", "Upgrade", "13", "abc"));
}
END_TEST

START_TEST(test_clean_path_table) {
  static const struct {
    const char *in;
    const char *out;
  } good[] = {
      {"/", ""},
      {"/index.html", "index.html"},
      {"/a/b.js", "a/b.js"},
      {"/a//b/", "a/b"},
      {"//", ""},
      {"/%61pp.js", "app.js"},
      {"/with%20space.txt", "with space.txt"},
      {"/vendor/three/build/three.module.js", "vendor/three/build/three.module.js"},
      {"/a%2Fb", "a/b"},
      {"/a..b/c", "a..b/c"},
      {"/ws", "ws"},
  };
  static const char *evil[] = {
      "/../etc/passwd", "/..",           "/a/../../b",   "/%2e%2e/etc/passwd",
      "/%2E%2E%2Fetc",  "/a%2f..%2fb",   "/a\\b",        "/a%5c..%5cb",
      "/a%00b",         "/%",            "/%4",          "/%zz",
      "/.git/config",   "/./x",          "relative",     "/a%0ab",
      "/a\x01",         "/x/.hidden",    "/%2e",         "/a%7f",
  };
  char out[256];
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    int rc = ts_static_clean_path(good[i].in, strlen(good[i].in), out, sizeof out);
    ck_assert_msg(rc == 0, "%s rejected (%d)", good[i].in, rc);
    ck_assert_str_eq(out, good[i].out);
  }
  for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
    int rc = ts_static_clean_path(evil[i], strlen(evil[i]), out, sizeof out);
    ck_assert_msg(rc == TS_EINVAL, "%s accepted (%d -> '%s')", evil[i], rc, out);
  }
  /* the NUL inside a length-delimited path is caught too */
  ck_assert_int_eq(ts_static_clean_path("/a\0b", 4, out, sizeof out), TS_EINVAL);
  ck_assert_int_eq(ts_static_clean_path("", 0, out, sizeof out), TS_EINVAL);
  ck_assert_int_eq(ts_static_clean_path("/abcdefgh", 9, out, 4), TS_ETOOBIG);
}
END_TEST

START_TEST(test_resolve_and_read) {
  char real[PATH_MAX], want[PATH_MAX + 64], www_real[PATH_MAX];
  ck_assert_ptr_nonnull(realpath(g_www, www_real));

  ck_assert_int_eq(ts_static_resolve(g_www, "index.html", real, sizeof real), 0);
  snprintf(want, sizeof want, "%s/index.html", www_real);
  ck_assert_str_eq(real, want);
  ck_assert_int_eq(ts_static_resolve(g_www, "", real, sizeof real), 0);
  ck_assert_str_eq(real, want);
  ck_assert_int_eq(ts_static_resolve(g_www, "sub", real, sizeof real), 0);
  snprintf(want, sizeof want, "%s/sub/index.html", www_real);
  ck_assert_str_eq(real, want);
  /* a symlink inside the root resolves to its target */
  ck_assert_int_eq(ts_static_resolve(g_www, "alias.js", real, sizeof real), 0);
  snprintf(want, sizeof want, "%s/app.js", www_real);
  ck_assert_str_eq(real, want);
  /* a symlink out of the root is refused even though the text is clean */
  ck_assert_int_eq(ts_static_resolve(g_www, "evil.txt", real, sizeof real), TS_EINVAL);
  ck_assert_int_eq(ts_static_resolve(g_www, "missing.js", real, sizeof real), TS_EIO);
  ck_assert_int_eq(ts_static_resolve(g_www, "node_modules", real, sizeof real), TS_EIO);
  ck_assert_int_eq(ts_static_resolve("/nonexistent/root", "x", real, sizeof real), TS_EIO);
  ck_assert_int_eq(ts_static_resolve(g_www, "index.html", real, 8), TS_ETOOBIG);

  uint8_t *data = NULL;
  size_t len = 0;
  snprintf(want, sizeof want, "%s/app.js", g_www);
  ck_assert_int_eq(ts_static_read(want, 1 << 20, &data, &len), 0);
  ck_assert_uint_eq(len, strlen("export const answer = 42;\n"));
  ck_assert_int_eq(memcmp(data, "export const answer = 42;\n", len), 0);
  free(data);
  ck_assert_int_eq(ts_static_read(want, 10, &data, &len), TS_ETOOBIG);
  ck_assert_ptr_null(data);
  ck_assert_int_eq(ts_static_read(g_www, 1 << 20, &data, &len), TS_EIO); /* a directory */
}
END_TEST

START_TEST(test_accept_encoding_table) {
  static const struct {
    const char *value;
    int gzip;
  } cases[] = {
      {"gzip", 1},
      {"GZIP", 1},
      {"x-gzip", 1},
      {"gzip, deflate, br, zstd", 1}, /* what Chromium sends */
      {"deflate, br", 0},
      {"", 0},
      {"identity", 0},
      {"*", 1},
      {"*;q=0", 0},
      {"gzip;q=0", 0},
      {"gzip; q=0.000", 0},
      {"gzip;q=0.001", 1},
      {"gzip;Q=1.0", 1},
      {"gzip;q=1.000", 1},
      {"gzip;q=1.5", 0},   /* malformed: over 1 */
      {"gzip;q=0.0001", 0}, /* malformed: four decimals */
      {"gzip;q=", 0},
      {"gzip;q", 0},
      {"gzip;level=9", 1}, /* other parameters do not count */
      {"*, gzip;q=0", 0},  /* the explicit element wins over * */
      {"gzip;q=0, *", 0},
      {"br;q=1, *;q=0.5", 1},
      {"gzip;q=0, x-gzip", 1},
      {" , ,gzip ,", 1},
      {"gzipx", 0},
      {"gzip x", 0},
      {"\"gzip\"", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ck_assert_msg(ts_http_accepts_gzip(cases[i].value) == cases[i].gzip, "Accept-Encoding: %s",
                  cases[i].value);
  ck_assert_int_eq(ts_http_accepts_gzip(NULL), 0);
}
END_TEST

START_TEST(test_etags) {
  ts_file_tag t = {.dev = 0xfe00, .ino = 42, .size = 1000, .mtime_ns = 1234567890123456789ull};
  char e[TS_HTTP_ETAG_MAX], g[TS_HTTP_ETAG_MAX];
  ts_http_etag(&t, 0, e);
  ts_http_etag(&t, 1, g);
  ck_assert_str_eq(e, "\"fe00-2a-3e8-112210f47de98115\"");
  ck_assert_str_eq(g, "\"fe00-2a-3e8-112210f47de98115-gz\"");
  ts_file_tag big = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
  ts_http_etag(&big, 1, g);
  ck_assert_uint_lt(strlen(g), TS_HTTP_ETAG_MAX);
  ck_assert_uint_eq(g[strlen(g) - 1], '"');
  const char *tag = "\"a-1\"";
  static const struct {
    const char *value;
    int listed;
  } cases[] = {
      {"\"a-1\"", 1},
      {"W/\"a-1\"", 1},
      {"\"b\", \"a-1\"", 1},
      {"\"b\",W/\"a-1\" ,\"c\"", 1},
      {"*", 1},
      {" * ", 1},
      {"\"a-1-gz\"", 0},
      {"\"a-\"", 0},
      {"a-1", 0},          /* unquoted: malformed */
      {"\"a-1", 0},        /* unterminated */
      {"\"a-1\"x", 0},     /* junk after the tag */
      {"w/\"a-1\"", 0},    /* the weak prefix is case-sensitive */
      {"\"x\" \"a-1\"", 0}, /* no comma: one malformed element */
      {"", 0},
      {",,", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ck_assert_msg(ts_http_etag_listed(cases[i].value, tag) == cases[i].listed,
                  "If-None-Match: %s", cases[i].value);
  ck_assert_int_eq(ts_http_etag_listed(NULL, tag), 0);
  ck_assert_int_eq(ts_http_gz_type_ok("text/javascript; charset=utf-8"), 1);
  ck_assert_int_eq(ts_http_gz_type_ok("application/json"), 1);
  ck_assert_int_eq(ts_http_gz_type_ok("image/svg+xml"), 1);
  ck_assert_int_eq(ts_http_gz_type_ok("image/png"), 0);
  ck_assert_int_eq(ts_http_gz_type_ok("application/octet-stream"), 0);
}
END_TEST

START_TEST(test_content_types) {
  ck_assert_str_eq(ts_static_content_type("/x/index.html"), "text/html; charset=utf-8");
  ck_assert_str_eq(ts_static_content_type("a.js"), "text/javascript; charset=utf-8");
  ck_assert_str_eq(ts_static_content_type("a.mjs"), "text/javascript; charset=utf-8");
  ck_assert_str_eq(ts_static_content_type("a.CSS"), "text/css; charset=utf-8");
  ck_assert_str_eq(ts_static_content_type("a.json"), "application/json");
  ck_assert_str_eq(ts_static_content_type("a.js.map"), "application/json");
  ck_assert_str_eq(ts_static_content_type("tissue.proto"), "text/plain; charset=utf-8");
  ck_assert_str_eq(ts_static_content_type("a.png"), "image/png");
  ck_assert_str_eq(ts_static_content_type("a.svg"), "image/svg+xml");
  ck_assert_str_eq(ts_static_content_type("a.wasm"), "application/wasm");
  ck_assert_str_eq(ts_static_content_type("a.txt"), "text/plain; charset=utf-8");
  ck_assert_str_eq(ts_static_content_type("a.bin"), "application/octet-stream");
  ck_assert_str_eq(ts_static_content_type("dir.d/noext"), "application/octet-stream");
}
END_TEST

/* ---- a server on its own loop thread ------------------------------------ */

enum { CMD_NONE, CMD_SEND, CMD_CLOSE, CMD_FILL, CMD_FILL_SHARED, CMD_PENDING, CMD_STOP };

typedef struct harness {
  uv_loop_t loop;
  uv_async_t async;
  uv_thread_t thread;
  ts_http *http;
  int port;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* what the hooks saw */
  int opened, closed, nmsgs;
  ts_conn *conn;
  char peer[64];
  int transport;
  uint64_t conn_id;
  uint8_t msg[4096];
  size_t msg_len;
  int echo;
  int echo_rc;
  /* a command for the loop thread */
  int cmd, cmd_done, cmd_rc, fill_count;
  uint8_t cmd_data[256];
  size_t cmd_len;
  size_t pending;
} harness;

static size_t healthz_cb(ts_server *s, char *buf, size_t cap) {
  (void)s;
  return (size_t)snprintf(buf, cap, "{\"ok\":true,\"sessions\":3}");
}

static void hook_open(ts_conn *c, void *ud) {
  harness *H = ud;
  pthread_mutex_lock(&H->mu);
  H->opened++;
  H->conn = c;
  H->transport = c->transport;
  H->conn_id = c->id;
  snprintf(H->peer, sizeof H->peer, "%s", c->peer);
  pthread_cond_broadcast(&H->cv);
  pthread_mutex_unlock(&H->mu);
}

static void hook_message(ts_conn *c, const uint8_t *msg, size_t len, void *ud) {
  harness *H = ud;
  pthread_mutex_lock(&H->mu);
  H->nmsgs++;
  H->msg_len = len < sizeof H->msg ? len : sizeof H->msg;
  memcpy(H->msg, msg, H->msg_len);
  int echo = H->echo;
  pthread_mutex_unlock(&H->mu);
  if (echo) {
    uint8_t reply[4200];
    memcpy(reply, "echo:", 5);
    size_t n = len < 4096 ? len : 4096;
    memcpy(reply + 5, msg, n);
    int rc = c->ops->send(c, reply, n + 5);
    if (echo == 2) c->ops->close(c, "after reply"); /* as for a bad Hello */
    pthread_mutex_lock(&H->mu);
    H->echo_rc = rc;
    pthread_mutex_unlock(&H->mu);
  }
  pthread_mutex_lock(&H->mu);
  pthread_cond_broadcast(&H->cv);
  pthread_mutex_unlock(&H->mu);
}

static void hook_closed(ts_conn *c, void *ud) {
  harness *H = ud;
  pthread_mutex_lock(&H->mu);
  H->closed++;
  if (H->conn == c) H->conn = NULL;
  pthread_cond_broadcast(&H->cv);
  pthread_mutex_unlock(&H->mu);
}

#define SHARED_LEN 70000
static uint8_t shared_byte(size_t i) { return (uint8_t)(i * 31 + (i >> 9) + 7); }

static void on_async(uv_async_t *a) {
  harness *H = a->data;
  pthread_mutex_lock(&H->mu);
  int cmd = H->cmd;
  ts_conn *c = H->conn;
  pthread_mutex_unlock(&H->mu);
  int rc = 0, count = 0;
  size_t pending = 0;
  if (cmd == CMD_SEND) {
    rc = c ? c->ops->send(c, H->cmd_data, H->cmd_len) : -999;
    /* the daemon's own queues: ops->pending also counts the kernel's unsent
     * bytes (bounded by the socket buffer), which these tests do not bound */
    pending = c ? c->ops->pending(c) : 0;
    size_t kernel = c ? ((ts__net_conn *)c)->kq.unsent : 0; /* what pending counted */
    pending = pending > kernel ? pending - kernel : 0;
  } else if (cmd == CMD_CLOSE) {
    rc = -999;
    if (c) {
      c->ops->close(c, "bye");
      c->ops->close(c, "twice"); /* idempotent */
      rc = c->ops->send(c, (const uint8_t *)"late", 4); /* refused once closing */
    }
  } else if (cmd == CMD_FILL) {
    static const uint8_t zeros[64 * 1024];
    rc = -999;
    while (c && count < 5000) {
      rc = c->ops->send(c, zeros, sizeof zeros);
      if (rc != 0) break;
      count++;
    }
    /* the daemon's own queues: ops->pending also counts the kernel's unsent
     * bytes (bounded by the socket buffer), which these tests do not bound */
    pending = c ? c->ops->pending(c) : 0;
    size_t kernel = c ? ((ts__net_conn *)c)->kq.unsent : 0; /* what pending counted */
    pending = pending > kernel ? pending - kernel : 0;
  } else if (cmd == CMD_FILL_SHARED) {
    /* one shared buffer (over 64 KiB: the 8-byte length form) sent until
     * refused, with a copied message after the third; once this returns the
     * unfinished writes hold the only references to it */
    ts_sbuf *b = ts_sbuf_new(SHARED_LEN);
    for (size_t i = 0; b && i < SHARED_LEN; i++) b->data[i] = shared_byte(i);
    rc = b ? -999 : TS_ENOMEM;
    while (b && c && count < 5000) {
      rc = c->ops->send_shared(c, b);
      if (rc != 0) break;
      count++;
      if (count == 3 && (rc = c->ops->send(c, (const uint8_t *)"between", 7)) != 0) break;
    }
    ts_sbuf_release(b);
    pending = c ? c->ops->pending(c) : 0;
    size_t kernel = c ? ((ts__net_conn *)c)->kq.unsent : 0; /* what pending counted */
    pending = pending > kernel ? pending - kernel : 0;
  } else if (cmd == CMD_PENDING) {
    rc = c ? 0 : -999;
    /* the daemon's own queues: ops->pending also counts the kernel's unsent
     * bytes (bounded by the socket buffer), which these tests do not bound */
    pending = c ? c->ops->pending(c) : 0;
    size_t kernel = c ? ((ts__net_conn *)c)->kq.unsent : 0; /* what pending counted */
    pending = pending > kernel ? pending - kernel : 0;
  } else if (cmd == CMD_STOP) {
    ts_http_stop(H->http);
    uv_close((uv_handle_t *)&H->async, NULL);
  }
  pthread_mutex_lock(&H->mu);
  H->cmd_rc = rc;
  H->fill_count = count;
  H->pending = pending;
  H->cmd_done = 1;
  pthread_cond_broadcast(&H->cv);
  pthread_mutex_unlock(&H->mu);
}

static void loop_thread(void *arg) {
  harness *H = arg;
  uv_run(&H->loop, UV_RUN_DEFAULT);
}

static void harness_start(harness *H, size_t max_message, size_t max_pending) {
  memset(H, 0, sizeof *H);
  pthread_mutex_init(&H->mu, NULL);
  pthread_cond_init(&H->cv, NULL);
  ck_assert_int_eq(uv_loop_init(&H->loop), 0);
  ck_assert_int_eq(uv_async_init(&H->loop, &H->async, on_async), 0);
  H->async.data = H;
  char proto[PATH_MAX];
  snprintf(proto, sizeof proto, "%s/tissue.proto", g_dir);
  ts_http_config cfg = {
      .host = "127.0.0.1",
      .port = 0,
      .web_root = g_www,
      .proto_file = proto,
      .max_message = max_message,
      .max_pending_output = max_pending,
      .on_open = hook_open,
      .on_message = hook_message,
      .on_closed = hook_closed,
      .hook_ud = H,
  };
  ck_assert_int_eq(ts_http_start(&H->loop, NULL, &cfg, healthz_cb, &H->http, &H->port), 0);
  ck_assert_ptr_nonnull(H->http);
  ck_assert_int_gt(H->port, 0);
  ck_assert_int_eq(uv_thread_create(&H->thread, loop_thread, H), 0);
}

/* Waits until *field >= value (under the mutex), at most 5 s. */
static int wait_for(harness *H, const int *field, int value) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += 5;
  pthread_mutex_lock(&H->mu);
  while (*field < value) {
    if (pthread_cond_timedwait(&H->cv, &H->mu, &dl) == ETIMEDOUT) break;
  }
  int ok = *field >= value;
  pthread_mutex_unlock(&H->mu);
  return ok;
}

static void run_cmd(harness *H, int cmd, const void *data, size_t len) {
  pthread_mutex_lock(&H->mu);
  H->cmd = cmd;
  H->cmd_done = 0;
  if (data) memcpy(H->cmd_data, data, len);
  H->cmd_len = len;
  pthread_mutex_unlock(&H->mu);
  uv_async_send(&H->async);
  ck_assert_msg(wait_for(H, &H->cmd_done, 1), "loop thread did not run command %d", cmd);
}

static void set_echo(harness *H, int on) {
  pthread_mutex_lock(&H->mu);
  H->echo = on;
  pthread_mutex_unlock(&H->mu);
}

/* Stops the listener, lets the loop end and checks nothing is left open. */
static void harness_stop(harness *H) {
  run_cmd(H, CMD_STOP, NULL, 0);
  ck_assert_int_eq(uv_thread_join(&H->thread), 0);
  ck_assert_int_eq(uv_loop_close(&H->loop), 0);
  pthread_mutex_destroy(&H->mu);
  pthread_cond_destroy(&H->cv);
}

/* ---- a tiny blocking client --------------------------------------------- */

static int client_connect(int port, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct timeval tv = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  return fd;
}

static void send_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n > 0) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    ck_assert_int_gt(w, 0);
    s += w;
    n -= (size_t)w;
  }
}

/* Reads exactly n bytes; returns 0, or -1 on EOF / error / timeout. */
static int recv_exact(int fd, void *p, size_t n) {
  char *d = p;
  while (n > 0) {
    ssize_t r = recv(fd, d, n, 0);
    if (r <= 0) return -1;
    d += r;
    n -= (size_t)r;
  }
  return 0;
}

typedef struct response {
  int status;
  char head[4096];
  char body[70000];
  size_t body_len;
} response;

/* Reads one response (head byte by byte, then Content-Length bytes unless
 * the request was HEAD). Returns 0 or -1. */
static int read_response(int fd, response *r, int head_request) {
  size_t n = 0;
  memset(r, 0, sizeof *r);
  while (n + 1 < sizeof r->head) {
    if (recv_exact(fd, r->head + n, 1) != 0) return -1;
    n++;
    if (n >= 4 && memcmp(r->head + n - 4, "\r\n\r\n", 4) == 0) break;
  }
  r->head[n] = '\0';
  if (sscanf(r->head, "HTTP/1.1 %d", &r->status) != 1) return -1;
  const char *cl = strcasestr(r->head, "\r\nContent-Length:");
  size_t len = cl ? strtoul(cl + 17, NULL, 10) : 0;
  if (head_request) return 0;
  if (len >= sizeof r->body) return -1;
  if (recv_exact(fd, r->body, len) != 0) return -1;
  r->body[len] = '\0';
  r->body_len = len;
  return 0;
}

static int http_get(int port, const char *request, response *r) {
  int fd = client_connect(port, 0);
  send_all(fd, request, strlen(request));
  int rc = read_response(fd, r, strncmp(request, "HEAD ", 5) == 0);
  close(fd);
  return rc;
}

/* 1 when the server closes the connection (EOF) within the timeout. */
static int sees_eof(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r == 0) return 1;
    if (r < 0) return errno == ECONNRESET;
  }
}

static const char *ws_upgrade_req =
    "GET /ws HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\n"
    "Upgrade: websocket\r\n"
    "Connection: keep-alive, Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n"
    "\r\n";

static int ws_connect(harness *H, int rcvbuf) {
  int fd = client_connect(H->port, rcvbuf);
  send_all(fd, ws_upgrade_req, strlen(ws_upgrade_req));
  response r;
  ck_assert_int_eq(read_response(fd, &r, 1), 0);
  ck_assert_int_eq(r.status, 101);
  ck_assert_ptr_nonnull(strstr(r.head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
  ck_assert_ptr_nonnull(strcasestr(r.head, "Upgrade: websocket\r\n"));
  return fd;
}

/* Builds one masked client frame. */
static size_t ws_frame(uint8_t *out, int fin, int opcode, const void *payload, size_t len) {
  static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
  size_t o = 0;
  out[o++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
  if (len < 126) {
    out[o++] = (uint8_t)(0x80 | len);
  } else if (len < 65536) {
    out[o++] = 0x80 | 126;
    out[o++] = (uint8_t)(len >> 8);
    out[o++] = (uint8_t)len;
  } else {
    out[o++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--) out[o++] = (uint8_t)((uint64_t)len >> (8 * i));
  }
  memcpy(out + o, mask, 4);
  o += 4;
  for (size_t i = 0; i < len; i++) out[o + i] = ((const uint8_t *)payload)[i] ^ mask[i % 4];
  return o + len;
}

static void ws_send(int fd, int fin, int opcode, const void *payload, size_t len) {
  uint8_t *buf = malloc(len + 16);
  size_t n = ws_frame(buf, fin, opcode, payload, len);
  send_all(fd, buf, n);
  free(buf);
}

/* Reads one server frame (must be unmasked). Returns the payload length or
 * -1; the payload is truncated to cap. */
static long ws_recv(int fd, int *fin, int *opcode, uint8_t *payload, size_t cap) {
  uint8_t h[2];
  if (recv_exact(fd, h, 2) != 0) return -1;
  *fin = h[0] >> 7;
  *opcode = h[0] & 0x0f;
  ck_assert_int_eq(h[1] & 0x80, 0); /* servers never mask */
  uint64_t len = h[1] & 0x7f;
  if (len == 126) {
    uint8_t e[2];
    if (recv_exact(fd, e, 2) != 0) return -1;
    len = ((uint64_t)e[0] << 8) | e[1];
  } else if (len == 127) {
    uint8_t e[8];
    if (recv_exact(fd, e, 8) != 0) return -1;
    len = 0;
    for (int i = 0; i < 8; i++) len = (len << 8) | e[i];
  }
  uint8_t scratch[4096];
  for (uint64_t got = 0; got < len;) {
    size_t chunk = (size_t)(len - got < sizeof scratch ? len - got : sizeof scratch);
    if (recv_exact(fd, scratch, chunk) != 0) return -1;
    if (got < cap) memcpy(payload + got, scratch, got + chunk <= cap ? chunk : cap - got);
    got += chunk;
  }
  return (long)len;
}

static int close_code(const uint8_t *p, long len) {
  return len >= 2 ? (p[0] << 8) | p[1] : 0;
}

/* ---- HTTP over loopback ------------------------------------------------- */

START_TEST(test_http_routes) {
  harness H;
  harness_start(&H, 0, 0);
  response r;

  ck_assert_int_eq(http_get(H.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "{\"ok\":true,\"sessions\":3}");
  ck_assert_ptr_nonnull(strstr(r.head, "Content-Type: application/json\r\n"));
  ck_assert_ptr_nonnull(strstr(r.head, "Cache-Control: no-cache\r\n"));

  ck_assert_int_eq(http_get(H.port, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_nonnull(strstr(r.head, "Content-Length: 24\r\n"));

  ck_assert_int_eq(http_get(H.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "<!doctype html><title>tissued</title>\n");
  ck_assert_ptr_nonnull(strstr(r.head, "Content-Type: text/html; charset=utf-8\r\n"));

  ck_assert_int_eq(http_get(H.port, "GET /app.js?v=3 HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "export const answer = 42;\n");
  ck_assert_ptr_nonnull(strstr(r.head, "Content-Type: text/javascript; charset=utf-8\r\n"));

  ck_assert_int_eq(http_get(H.port, "GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "<p>sub</p>\n");

  ck_assert_int_eq(http_get(H.port, "GET /vendor/pkg/mod.mjs HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "export default 7;\n");

  ck_assert_int_eq(http_get(H.port, "GET /proto/tissue.proto HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "syntax = \"proto3\";\n");
  ck_assert_ptr_nonnull(strstr(r.head, "Content-Type: text/plain; charset=utf-8\r\n"));

  ck_assert_int_eq(http_get(H.port, "GET /missing.js HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 404);

  /* escapes: textual, encoded, through a symlink, dot files */
  ck_assert_int_eq(http_get(H.port, "GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_ne(r.status, 200);
  ck_assert_int_eq(r.status, 400);
  ck_assert_int_eq(http_get(H.port, "GET /%2e%2e/secret.txt HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 400);
  ck_assert_int_eq(http_get(H.port, "GET /vendor/../../secret.txt HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 400);
  ck_assert_int_eq(http_get(H.port, "GET /evil.txt HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 404);
  ck_assert_ptr_null(strstr(r.body, "secret"));
  ck_assert_int_eq(http_get(H.port, "GET /.hidden HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 400);
  ck_assert_int_eq(http_get(H.port, "GET /a%5c..%5csecret.txt HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 400);

  /* methods and malformed requests */
  ck_assert_int_eq(http_get(H.port, "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", &r), 0);
  ck_assert_int_eq(r.status, 405);
  ck_assert_ptr_nonnull(strstr(r.head, "Allow: GET, HEAD\r\n"));
  ck_assert_int_eq(http_get(H.port, "GET /x%zz HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 400);
  ck_assert_int_eq(http_get(H.port, "GARBAGE\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 400);
  ck_assert_int_eq(http_get(H.port, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 400);

  harness_stop(&H);
  ck_assert_int_eq(H.opened, 0);
}
END_TEST

/* The value of header `name` in a response head ("" when absent). */
static const char *head_value(const response *r, const char *name, char *out, size_t cap) {
  char key[64];
  snprintf(key, sizeof key, "\r\n%s: ", name);
  const char *p = strcasestr(r->head, key);
  out[0] = '\0';
  if (!p) return out;
  p += strlen(key);
  size_t n = strcspn(p, "\r");
  if (n >= cap) n = cap - 1;
  memcpy(out, p, n);
  out[n] = '\0';
  return out;
}

/* gunzips a gzip body into out; its length, or -1. */
static long gunzip(const char *in, size_t len, char *out, size_t cap) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return -1;
  zs.next_in = (Bytef *)in;
  zs.avail_in = (uInt)len;
  zs.next_out = (Bytef *)out;
  zs.avail_out = (uInt)cap;
  int rc = inflate(&zs, Z_FINISH);
  long n = rc == Z_STREAM_END && zs.avail_in == 0 ? (long)zs.total_out : -1;
  inflateEnd(&zs);
  return n;
}

/* A 40 kB script (compresses well) whose lines carry the word `mark`. */
static void write_script(const char *rel, const char *mark, char *text, size_t cap) {
  size_t o = 0;
  for (int i = 0; o + 64 < cap && o < 40000; i++)
    o += (size_t)snprintf(text + o, cap - o, "export const %s%d = %d;\n", mark, i, i * 7);
  write_file(rel, text);
}

/* GETs path with the given extra header lines until a response comes back
 * gzip-encoded (its compression runs on the thread pool), at most 5 s. */
static void get_until_gzip(harness *H, const char *path, response *r) {
  char req[512];
  snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", path);
  for (int i = 0; i < 500; i++) {
    ck_assert_int_eq(http_get(H->port, req, r), 0);
    ck_assert_int_eq(r->status, 200);
    if (strcasestr(r->head, "\r\nContent-Encoding: gzip\r\n")) return;
    usleep(10000);
  }
  ck_abort_msg("%s was not sent gzip-compressed within 5 s", path);
}

START_TEST(test_http_gzip_and_etags) {
  static char text[48000], text2[48000], plain[70000];
  write_script("www/big.js", "alpha", text, sizeof text);
  harness H;
  harness_start(&H, 0, 0);
  response r;
  char etag[128], etag_gz[128], v[128], req[512];

  /* the first request is answered at once with the file's own bytes */
  ck_assert_int_eq(http_get(H.port, "GET /big.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(r.body_len, strlen(text));
  ck_assert_str_eq(head_value(&r, "Vary", v, sizeof v), "Accept-Encoding");
  head_value(&r, "ETag", etag, sizeof etag);
  ck_assert_uint_gt(strlen(etag), 2);
  ck_assert_int_eq(etag[0], '"');
  ck_assert_ptr_null(strstr(etag, "-gz"));

  /* then with its compressed copy, which decodes to the same bytes */
  get_until_gzip(&H, "/big.js", &r);
  ck_assert_uint_lt(r.body_len * 5, strlen(text)); /* repetitive: over 5x smaller */
  long n = gunzip(r.body, r.body_len, plain, sizeof plain);
  ck_assert_int_eq(n, (long)strlen(text));
  ck_assert_int_eq(memcmp(plain, text, (size_t)n), 0);
  head_value(&r, "ETag", etag_gz, sizeof etag_gz);
  ck_assert_uint_eq(strlen(etag_gz), strlen(etag) + 3);
  ck_assert_int_eq(strncmp(etag_gz, etag, strlen(etag) - 1), 0);
  ck_assert_str_eq(etag_gz + strlen(etag) - 1, "-gz\"");
  size_t gz_len = r.body_len;

  /* HEAD says what GET would send */
  ck_assert_int_eq(http_get(H.port, "HEAD /big.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(strtoul(head_value(&r, "Content-Length", v, sizeof v), NULL, 10), gz_len);
  ck_assert_str_eq(head_value(&r, "Content-Encoding", v, sizeof v), "gzip");

  /* clients that do not accept gzip get the bytes themselves */
  static const char *refusing[] = {"", "Accept-Encoding: identity\r\n", "Accept-Encoding: gzip;q=0\r\n",
                                   "Accept-Encoding: br, deflate\r\n"};
  for (size_t i = 0; i < sizeof refusing / sizeof refusing[0]; i++) {
    snprintf(req, sizeof req, "GET /big.js HTTP/1.1\r\nHost: x\r\n%s\r\n", refusing[i]);
    ck_assert_int_eq(http_get(H.port, req, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(!strcasestr(r.head, "Content-Encoding"), "%s", refusing[i]);
    ck_assert_uint_eq(r.body_len, strlen(text));
    ck_assert_str_eq(head_value(&r, "ETag", v, sizeof v), etag);
  }

  /* a browser holding this version gets 304, with no body and no length */
  snprintf(req, sizeof req, "GET /big.js HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n\r\n", etag);
  ck_assert_int_eq(http_get(H.port, req, &r), 0);
  ck_assert_int_eq(r.status, 304);
  ck_assert_ptr_null(strcasestr(r.head, "Content-Length"));
  ck_assert_str_eq(head_value(&r, "ETag", v, sizeof v), etag);
  snprintf(req, sizeof req,
           "GET /big.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nIf-None-Match: \"zz\", W/%s\r\n\r\n",
           etag_gz);
  ck_assert_int_eq(http_get(H.port, req, &r), 0);
  ck_assert_int_eq(r.status, 304);
  ck_assert_str_eq(head_value(&r, "ETag", v, sizeof v), etag_gz);
  /* pipelined behind a 304, the next response still parses */
  snprintf(req, sizeof req,
           "HEAD /big.js HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n"
           "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n");
  int fd = client_connect(H.port, 0);
  send_all(fd, req, strlen(req));
  ck_assert_int_eq(read_response(fd, &r, 1), 0);
  ck_assert_int_eq(r.status, 304);
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "export const answer = 42;\n");
  close(fd);
  ck_assert_int_eq(http_get(H.port, "GET /big.js HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"other\"\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);

  /* a new version on disk: a new tag, the old one no longer matches, and the
   * compressed copy of the old version is never sent for it */
  write_script("www/big.js", "omegas", text2, sizeof text2); /* another size, too */
  snprintf(req, sizeof req,
           "GET /big.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nIf-None-Match: %s, %s\r\n\r\n",
           etag, etag_gz);
  ck_assert_int_eq(http_get(H.port, req, &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_ne(head_value(&r, "ETag", v, sizeof v), etag);
  ck_assert_str_ne(v, etag_gz);
  if (strcasestr(r.head, "\r\nContent-Encoding: gzip\r\n"))
    ck_abort_msg("a compressed copy of big.js came back before its new version was compressed");
  ck_assert_uint_eq(r.body_len, strlen(text2));
  ck_assert_int_eq(memcmp(r.body, text2, r.body_len), 0);
  get_until_gzip(&H, "/big.js", &r);
  n = gunzip(r.body, r.body_len, plain, sizeof plain);
  ck_assert_int_eq(n, (long)strlen(text2));
  ck_assert_int_eq(memcmp(plain, text2, (size_t)n), 0);

  /* small files and types not worth compressing go as they are */
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(http_get(H.port, "GET /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", &r), 0);
    ck_assert_ptr_null(strcasestr(r.head, "Content-Encoding"));
    ck_assert_str_eq(r.body, "export const answer = 42;\n");
    usleep(20000);
  }
  ck_assert_ptr_nonnull(strcasestr(r.head, "\r\nETag: \""));
  write_file("www/pic.png", text2);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(http_get(H.port, "GET /pic.png HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_null(strcasestr(r.head, "Content-Encoding"));
    ck_assert_ptr_null(strcasestr(r.head, "Vary"));
    usleep(20000);
  }
  /* the proto file is served the same way */
  ck_assert_int_eq(http_get(H.port, "GET /proto/tissue.proto HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  head_value(&r, "ETag", etag, sizeof etag);
  snprintf(req, sizeof req, "GET /proto/tissue.proto HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n\r\n", etag);
  ck_assert_int_eq(http_get(H.port, req, &r), 0);
  ck_assert_int_eq(r.status, 304);

  harness_stop(&H);
}
END_TEST

/* The listener stops while a compression is under way: the loop ends once
 * it has (no handle or request left behind, harness_stop checks), and the
 * cache is freed by its callback (the sanitizer builds' leak check). */
START_TEST(test_http_gzip_stop_midway) {
  static char text[48000];
  write_script("www/stop.js", "beta", text, sizeof text);
  harness H;
  harness_start(&H, 0, 0);
  response r;
  ck_assert_int_eq(http_get(H.port, "GET /stop.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", &r), 0);
  ck_assert_int_eq(r.status, 200);
  harness_stop(&H);
}
END_TEST

START_TEST(test_http_keepalive_and_limits) {
  harness H;
  harness_start(&H, 0, 0);
  response r;

  /* three pipelined requests on one connection, answered in order */
  int fd = client_connect(H.port, 0);
  const char *three = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                      "HEAD /app.js HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n";
  send_all(fd, three, strlen(three));
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "{\"ok\":true,\"sessions\":3}");
  ck_assert_ptr_nonnull(strstr(r.head, "Connection: keep-alive\r\n"));
  ck_assert_int_eq(read_response(fd, &r, 1), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_nonnull(strstr(r.head, "Content-Length: 26\r\n"));
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 404);
  /* the connection is still usable, one byte at a time */
  const char *slow = "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t i = 0; i < strlen(slow); i++) send_all(fd, slow + i, 1);
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "export const answer = 42;\n");
  /* Connection: close is honoured */
  const char *last = "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n";
  send_all(fd, last, strlen(last));
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_nonnull(strstr(r.head, "Connection: close\r\n"));
  ck_assert_int_eq(sees_eof(fd), 1);
  close(fd);

  /* a 20 KiB header: 431, then the server closes */
  size_t big = 20 * 1024;
  char *req = malloc(big + 128);
  int n = snprintf(req, 128, "GET / HTTP/1.1\r\nX-Big: ");
  memset(req + n, 'a', big);
  memcpy(req + n + big, "\r\n\r\n", 5);
  fd = client_connect(H.port, 0);
  send_all(fd, req, strlen(req));
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 431);
  ck_assert_int_eq(sees_eof(fd), 1);
  close(fd);
  free(req);

  /* a 32 KiB body: 413 */
  size_t blen = 32 * 1024;
  req = malloc(blen + 128);
  n = snprintf(req, 128, "GET / HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", blen);
  memset(req + n, 'b', blen);
  fd = client_connect(H.port, 0);
  send_all(fd, req, (size_t)n + blen);
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 413);
  close(fd);
  free(req);

  /* a long URL: 414 */
  req = malloc(8192);
  n = snprintf(req, 64, "GET /");
  memset(req + n, 'u', 6000);
  memcpy(req + n + 6000, " HTTP/1.1\r\n\r\n", 14);
  ck_assert_int_eq(http_get(H.port, req, &r), 0);
  ck_assert_int_eq(r.status, 414);
  free(req);

  /* a peer that disconnects mid-request leaves nothing behind (ASan) */
  fd = client_connect(H.port, 0);
  send_all(fd, "GET /app.js HTTP/1.1\r\nHos", 25);
  close(fd);

  harness_stop(&H);
}
END_TEST

/* ---- WebSocket over loopback -------------------------------------------- */

START_TEST(test_ws_roundtrip) {
  harness H;
  harness_start(&H, 0, 0);
  set_echo(&H, 1);
  int fd = ws_connect(&H, 0);
  ck_assert(wait_for(&H, &H.opened, 1));
  ck_assert_int_eq(H.transport, TS_TRANSPORT_WS);
  ck_assert_uint_gt(H.conn_id, 0);
  ck_assert_ptr_nonnull(strstr(H.peer, "127.0.0.1:"));

  /* one masked binary frame reaches the dispatcher byte for byte */
  const uint8_t hello[] = {0x0a, 0x05, 0x08, 0x01, 0x12, 0x01, 'x', 0x00, 0xff};
  ws_send(fd, 1, 0x2, hello, sizeof hello);
  ck_assert(wait_for(&H, &H.nmsgs, 1));
  ck_assert_uint_eq(H.msg_len, sizeof hello);
  ck_assert_int_eq(memcmp(H.msg, hello, sizeof hello), 0);
  ck_assert_int_eq(H.echo_rc, 0);
  /* and the reply sent from inside the dispatch comes back as binary */
  uint8_t buf[70000];
  int fin, op;
  long len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(len, 5 + (long)sizeof hello);
  ck_assert_int_eq(fin, 1);
  ck_assert_int_eq(op, 0x2);
  ck_assert_int_eq(memcmp(buf, "echo:", 5), 0);
  ck_assert_int_eq(memcmp(buf + 5, hello, sizeof hello), 0);

  /* a fragmented message with a ping in between: one message, one pong */
  uint8_t part[3000];
  for (size_t i = 0; i < sizeof part; i++) part[i] = (uint8_t)(i * 7 + 1);
  ws_send(fd, 0, 0x2, part, 1000);
  ws_send(fd, 1, 0x9, "pingdata", 8);
  ws_send(fd, 0, 0x0, part + 1000, 1500);
  ws_send(fd, 1, 0x0, part + 2500, 500);
  len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0xA);
  ck_assert_int_eq(len, 8);
  ck_assert_int_eq(memcmp(buf, "pingdata", 8), 0);
  ck_assert(wait_for(&H, &H.nmsgs, 2));
  ck_assert_uint_eq(H.msg_len, sizeof part);
  ck_assert_int_eq(memcmp(H.msg, part, sizeof part), 0);
  len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x2);
  ck_assert_int_eq(len, 5 + 3000);
  ck_assert_int_eq(memcmp(buf + 5, part, sizeof part), 0);

  /* a send from outside any dispatch (the physics outbox path) */
  set_echo(&H, 0);
  const char frame[] = "frame-bytes-from-the-server";
  run_cmd(&H, CMD_SEND, frame, sizeof frame - 1);
  ck_assert_int_eq(H.cmd_rc, 0);
  len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x2);
  ck_assert_int_eq(len, (long)sizeof frame - 1);
  ck_assert_int_eq(memcmp(buf, frame, sizeof frame - 1), 0);

  /* a larger message (16-bit length) in both directions */
  static uint8_t large[60000];
  for (size_t i = 0; i < sizeof large; i++) large[i] = (uint8_t)(i ^ (i >> 8));
  ws_send(fd, 1, 0x2, large, sizeof large);
  ck_assert(wait_for(&H, &H.nmsgs, 3));
  ck_assert_uint_eq(H.msg_len, sizeof H.msg); /* the hook keeps the first 4 KiB */
  ck_assert_int_eq(memcmp(H.msg, large, sizeof H.msg), 0);

  /* the peer closes: the server answers 1000 and closes the socket */
  const uint8_t bye[] = {0x03, 0xe8, 'o', 'k'};
  ws_send(fd, 1, 0x8, bye, sizeof bye);
  len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(close_code(buf, len), 1000);
  ck_assert_int_eq(sees_eof(fd), 1);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));

  harness_stop(&H);
  ck_assert_int_eq(H.opened, 1);
  ck_assert_int_eq(H.closed, 1);
  ck_assert_int_eq(H.nmsgs, 3);
}
END_TEST

START_TEST(test_ws_reply_then_close) {
  /* a reply queued just before a close (an Error, then goodbye) must reach
   * the peer ahead of the close frame */
  harness H;
  harness_start(&H, 0, 0);
  set_echo(&H, 2);
  int fd = ws_connect(&H, 0);
  ws_send(fd, 1, 0x2, "bad hello", 9);
  uint8_t buf[256];
  int fin, op;
  long len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x2);
  ck_assert_int_eq(len, 14);
  ck_assert_int_eq(memcmp(buf, "echo:bad hello", 14), 0);
  len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(close_code(buf, len), 1000);
  ck_assert_int_eq(len, 2 + 11);
  ck_assert_int_eq(memcmp(buf + 2, "after reply", 11), 0);
  ws_send(fd, 1, 0x8, "\x03\xe8", 2);
  ck_assert_int_eq(sees_eof(fd), 1);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));
  ck_assert_int_eq(H.echo_rc, 0);
  harness_stop(&H);
}
END_TEST

START_TEST(test_ws_upgrade_with_early_frame) {
  /* the first frame arrives in the same segment as the handshake */
  harness H;
  harness_start(&H, 0, 0);
  uint8_t buf[1024];
  size_t n = strlen(ws_upgrade_req);
  memcpy(buf, ws_upgrade_req, n);
  n += ws_frame(buf + n, 1, 0x2, "early", 5);
  int fd = client_connect(H.port, 0);
  send_all(fd, buf, n);
  response r;
  ck_assert_int_eq(read_response(fd, &r, 1), 0);
  ck_assert_int_eq(r.status, 101);
  ck_assert(wait_for(&H, &H.nmsgs, 1));
  ck_assert_uint_eq(H.msg_len, 5);
  ck_assert_int_eq(memcmp(H.msg, "early", 5), 0);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));
  harness_stop(&H);
}
END_TEST

START_TEST(test_ws_bad_upgrades) {
  harness H;
  harness_start(&H, 0, 0);
  static const char *bad[] = {
      /* no key */
      "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n",
      /* wrong version */
      "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
      /* key of 15 bytes */
      "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j\r\nSec-WebSocket-Version: 13\r\n\r\n",
      /* two keys */
      "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      /* Connection without upgrade */
      "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      /* HTTP/1.0 */
      "GET /ws HTTP/1.0\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
  };
  response r;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(http_get(H.port, bad[i], &r), 0);
    ck_assert_msg(r.status == 400, "case %zu gave %d", i, r.status);
  }
  /* an upgrade on another method is refused too */
  ck_assert_int_eq(http_get(H.port,
                            "POST /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                            "Sec-WebSocket-Version: 13\r\n\r\n",
                            &r),
                   0);
  ck_assert_int_ne(r.status, 101);
  /* an Upgrade we do not speak, elsewhere: served as plain HTTP, and the
   * connection goes on */
  int fd = client_connect(H.port, 0);
  const char *h2c = "GET /app.js HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"
                    "GET /healthz HTTP/1.1\r\n\r\n";
  send_all(fd, h2c, strlen(h2c));
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "export const answer = 42;\n");
  ck_assert_int_eq(read_response(fd, &r, 0), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "{\"ok\":true,\"sessions\":3}");
  close(fd);
  harness_stop(&H);
  ck_assert_int_eq(H.opened, 0);
  ck_assert_int_eq(H.closed, 0);
}
END_TEST

START_TEST(test_ws_text_and_oversize_close) {
  harness H;
  harness_start(&H, 1024, 0);
  uint8_t buf[256];
  int fin, op;

  /* text: close 1003, nothing dispatched */
  int fd = ws_connect(&H, 0);
  ws_send(fd, 1, 0x1, "hello", 5);
  long len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(close_code(buf, len), 1003);
  ws_send(fd, 1, 0x8, "\x03\xe8", 2);
  ck_assert_int_eq(sees_eof(fd), 1);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));
  ck_assert_int_eq(H.nmsgs, 0);

  /* over max_message (fragmented so no single frame is too big): 1009 */
  fd = ws_connect(&H, 0);
  static uint8_t big[1024];
  ws_send(fd, 1, 0x2, big, 1024); /* exactly the limit: accepted */
  ck_assert(wait_for(&H, &H.nmsgs, 1));
  ck_assert_uint_eq(H.msg_len, 1024);
  ws_send(fd, 0, 0x2, big, 800);
  ws_send(fd, 1, 0x0, big, 800);
  len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(close_code(buf, len), 1009);
  ck_assert_int_eq(sees_eof(fd), 1); /* no close reply: the server times out */
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 2));
  ck_assert_int_eq(H.nmsgs, 1);

  /* an unmasked frame is a protocol error: 1002 */
  fd = ws_connect(&H, 0);
  const uint8_t unmasked[] = {0x82, 0x02, 'h', 'i'};
  send_all(fd, unmasked, sizeof unmasked);
  len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(close_code(buf, len), 1002);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 3));
  ck_assert_int_eq(H.nmsgs, 1);

  harness_stop(&H);
}
END_TEST

START_TEST(test_ws_server_close_and_disconnects) {
  harness H;
  harness_start(&H, 0, 0);
  uint8_t buf[256];
  int fin, op;

  /* ops->close: close frame 1000 with the reason, then the socket closes
   * even though this peer never answers */
  int fd = ws_connect(&H, 0);
  ck_assert(wait_for(&H, &H.opened, 1));
  run_cmd(&H, CMD_CLOSE, NULL, 0);
  ck_assert_int_eq(H.cmd_rc, TS_EIO);
  long len = ws_recv(fd, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(len, 5);
  ck_assert_int_eq(close_code(buf, len), 1000);
  ck_assert_int_eq(memcmp(buf + 2, "bye", 3), 0);
  ck_assert_int_eq(sees_eof(fd), 1);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));

  /* disconnect in the middle of a frame header, then of a payload */
  fd = ws_connect(&H, 0);
  ck_assert(wait_for(&H, &H.opened, 2));
  send_all(fd, "\x82", 1);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 2));
  fd = ws_connect(&H, 0);
  ck_assert(wait_for(&H, &H.opened, 3));
  uint8_t frame[2100];
  static uint8_t payload[2000];
  size_t n = ws_frame(frame, 1, 0x2, payload, sizeof payload);
  send_all(fd, frame, n / 2);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 3));
  ck_assert_int_eq(H.nmsgs, 0);

  harness_stop(&H);
  ck_assert_int_eq(H.opened, 3);
  ck_assert_int_eq(H.closed, 3);
}
END_TEST

START_TEST(test_ws_backpressure_efull) {
  harness H;
  size_t limit = 256 * 1024;
  harness_start(&H, 0, limit);
  int fd = ws_connect(&H, 4096); /* a small receive buffer, never read */
  ck_assert(wait_for(&H, &H.opened, 1));
  run_cmd(&H, CMD_FILL, NULL, 0);
  ck_assert_int_eq(H.cmd_rc, TS_EFULL);
  ck_assert_int_gt(H.fill_count, 0);
  ck_assert_uint_gt(H.pending, limit - 64 * 1024);
  ck_assert_uint_le(H.pending, limit + 64 * 1024);
  /* once the peer reads everything, sending works again */
  uint8_t *buf = malloc(70000);
  int fin, op;
  for (int i = 0; i < H.fill_count; i++) {
    long len = ws_recv(fd, &fin, &op, buf, 70000);
    ck_assert_int_eq(len, 64 * 1024);
    ck_assert_int_eq(op, 0x2);
  }
  free(buf);
  run_cmd(&H, CMD_SEND, "after", 5);
  ck_assert_int_eq(H.cmd_rc, 0);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));
  harness_stop(&H);
}
END_TEST

/* ops->send_shared writes the one buffer to a reader that does not read:
 * at first whole, then in part (the rest referenced by a write request),
 * then refused at the limit; the reader then gets every frame intact and in
 * order with the copied message sent among them, and the buffer lives
 * exactly as long as the writes (ASan checks the release). */
START_TEST(test_ws_shared_frames) {
  harness H;
  size_t limit = 512 * 1024;
  harness_start(&H, 0, limit);
  int fd = ws_connect(&H, 4096);
  ck_assert(wait_for(&H, &H.opened, 1));
  run_cmd(&H, CMD_FILL_SHARED, NULL, 0);
  ck_assert_int_eq(H.cmd_rc, TS_EFULL);
  ck_assert_int_gt(H.fill_count, 3);
  /* our queue reached the limit, to within one frame */
  ck_assert_uint_gt(H.pending, limit - SHARED_LEN);
  ck_assert_uint_le(H.pending, limit + SHARED_LEN);
  uint8_t *buf = malloc(SHARED_LEN + 16);
  int fin, op;
  for (int i = 0; i < H.fill_count; i++) {
    long len = ws_recv(fd, &fin, &op, buf, SHARED_LEN + 16);
    ck_assert_int_eq(len, SHARED_LEN);
    ck_assert_int_eq(fin, 1);
    ck_assert_int_eq(op, 0x2);
    size_t bad = SHARED_LEN;
    for (size_t k = 0; k < SHARED_LEN && bad == SHARED_LEN; k++)
      if (buf[k] != shared_byte(k)) bad = k;
    ck_assert_msg(bad == SHARED_LEN, "frame %d differs at byte %zu", i, bad);
    if (i == 2) {
      len = ws_recv(fd, &fin, &op, buf, SHARED_LEN);
      ck_assert_int_eq(len, 7);
      ck_assert_int_eq(memcmp(buf, "between", 7), 0);
    }
  }
  free(buf);
  run_cmd(&H, CMD_SEND, "after", 5);
  ck_assert_int_eq(H.cmd_rc, 0);
  uint8_t tail[16];
  ck_assert_int_eq(ws_recv(fd, &fin, &op, tail, sizeof tail), 5);
  ck_assert_int_eq(memcmp(tail, "after", 5), 0);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));
  harness_stop(&H);
}
END_TEST

START_TEST(test_stop_closes_everything) {
  harness H;
  harness_start(&H, 0, 0);
  int ws1 = ws_connect(&H, 0);
  int ws2 = ws_connect(&H, 0);
  int plain = client_connect(H.port, 0); /* an idle keep-alive connection */
  ck_assert(wait_for(&H, &H.opened, 2));
  /* stop from the loop thread: the loop must end by itself */
  run_cmd(&H, CMD_STOP, NULL, 0);
  uint8_t buf[256];
  int fin, op;
  long len = ws_recv(ws1, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(close_code(buf, len), 1001);
  ws_send(ws1, 1, 0x8, "\x03\xe9", 2); /* this one answers, the other does not */
  ck_assert_int_eq(sees_eof(ws1), 1);
  len = ws_recv(ws2, &fin, &op, buf, sizeof buf);
  ck_assert_int_eq(op, 0x8);
  ck_assert_int_eq(close_code(buf, len), 1001);
  ck_assert_int_eq(sees_eof(ws2), 1);
  ck_assert_int_eq(sees_eof(plain), 1);
  ck_assert_int_eq(uv_thread_join(&H.thread), 0);
  ck_assert_int_eq(uv_loop_close(&H.loop), 0);
  ck_assert_int_eq(H.closed, 2);
  /* nothing listens any more */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)H.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_ne(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  close(fd);
  close(ws1);
  close(ws2);
  close(plain);
}
END_TEST

START_TEST(test_start_errors) {
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  ts_http *h = NULL, *h2 = NULL;
  int port = 0;
  ts_http_config cfg = {.host = "127.0.0.1", .port = 0};
  ck_assert_int_eq(ts_http_start(&loop, NULL, &cfg, NULL, &h, &port), 0);
  ck_assert_int_gt(port, 0);
  /* the same port again cannot be bound */
  ts_http_config again = {.host = "127.0.0.1", .port = port};
  ck_assert_int_lt(ts_http_start(&loop, NULL, &again, NULL, &h2, NULL), 0);
  ck_assert_ptr_null(h2);
  ts_http_config badhost = {.host = "not an address", .port = 0};
  ck_assert_int_lt(ts_http_start(&loop, NULL, &badhost, NULL, &h2, NULL), 0);
  ts_http_config badport = {.host = "127.0.0.1", .port = 70000};
  ck_assert_int_eq(ts_http_start(&loop, NULL, &badport, NULL, &h2, NULL), TS_EINVAL);
  ck_assert_int_eq(ts_http_start(&loop, NULL, NULL, NULL, &h2, NULL), TS_EINVAL);
  ts_http_stop(h);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_http_backpressure) {
  /* 200 pipelined requests whose responses (6.5 MB) far exceed the output
   * limit: parsing pauses and resumes, and every response arrives in order */
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/big.bin", g_www);
  FILE *f = fopen(p, "wb");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 65536; i++) fputc((i * 31 + 7) & 0xff, f);
  fclose(f);
  harness H;
  harness_start(&H, 0, 128 * 1024);
  int fd = client_connect(H.port, 8192);
  enum { NREQ = 200 };
  char *reqs = malloc(NREQ * 64);
  size_t n = 0;
  for (int i = 0; i < NREQ; i++)
    n += (size_t)sprintf(reqs + n, "GET /%s HTTP/1.1\r\n\r\n", i % 2 ? "app.js" : "big.bin");
  send_all(fd, reqs, n);
  free(reqs);
  static response r;
  for (int i = 0; i < NREQ; i++) {
    ck_assert_int_eq(read_response(fd, &r, 0), 0);
    ck_assert_int_eq(r.status, 200);
    if (i % 2) {
      ck_assert_str_eq(r.body, "export const answer = 42;\n");
    } else {
      ck_assert_uint_eq(r.body_len, 65536);
      for (int k = 0; k < 65536; k += 4099)
        ck_assert_int_eq((unsigned char)r.body[k], (k * 31 + 7) & 0xff);
    }
  }
  close(fd);
  harness_stop(&H);
}
END_TEST

START_TEST(test_ws_ping_flood_is_bounded) {
  /* a peer that pings without reading: the pongs it is owed stay bounded
   * because the server stops reading it */
  harness H;
  size_t limit = 256 * 1024;
  harness_start(&H, 0, limit);
  int fd = ws_connect(&H, 4096);
  ck_assert(wait_for(&H, &H.opened, 1));
  uint8_t ping[256], payload[125];
  memset(payload, 'p', sizeof payload);
  size_t flen = ws_frame(ping, 1, 0x9, payload, sizeof payload);
  size_t sent = 0, off = 0;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) { /* send until the server has not read anything for 300 ms */
    ssize_t w = send(fd, ping + off, flen - off, MSG_DONTWAIT | MSG_NOSIGNAL);
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (w > 0) {
      off = (off + (size_t)w) % flen; /* frames go back to back */
      sent += (size_t)w;
      t0 = t;
      if (sent > (64u << 20)) break;
      continue;
    }
    ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 300) break;
    usleep(1000);
  }
  ck_assert_uint_lt(sent, 64u << 20); /* the server did stop reading */
  run_cmd(&H, CMD_PENDING, NULL, 0);
  ck_assert_int_eq(H.cmd_rc, 0);
  /* at most one read's worth (64 KiB of pings) over the limit */
  ck_assert_uint_le(H.pending, limit + 70 * 1024);
  close(fd);
  ck_assert(wait_for(&H, &H.closed, 1));
  harness_stop(&H);
}
END_TEST

/* sockq.h's policy: the kernel queue is read again at once while it last held
 * something, and after an empty reading only once TS_SOCKQ_QUIET_MS passed */
START_TEST(test_sockq_policy) {
  ts_sockq q = {0};
  ck_assert(ts_sockq_due(&q, 0)); /* never read */
  q = (ts_sockq){.read_ms = 1000, .unsent = 0, .valid = 1};
  ck_assert(!ts_sockq_due(&q, 1000));
  ck_assert(!ts_sockq_due(&q, 1000 + TS_SOCKQ_QUIET_MS - 1));
  ck_assert(ts_sockq_due(&q, 1000 + TS_SOCKQ_QUIET_MS));
  ck_assert(ts_sockq_due(&q, 999)); /* the clock went back */
  q.unsent = 1;                     /* a reader falling behind: every time */
  ck_assert(ts_sockq_due(&q, 1000));
  ck_assert(ts_sockq_due(&q, 1001));
}
END_TEST

static Suite *net_suite(void) {
  Suite *s = suite_create("net");
  TCase *pure = tcase_create("pure");
  tcase_add_test(pure, test_accept_key_rfc6455);
  tcase_add_test(pure, test_key_and_upgrade_checks);
  tcase_add_test(pure, test_clean_path_table);
  tcase_add_test(pure, test_resolve_and_read);
  tcase_add_test(pure, test_content_types);
  tcase_add_test(pure, test_accept_encoding_table);
  tcase_add_test(pure, test_etags);
  tcase_add_test(pure, test_sockq_policy);
  tcase_add_unchecked_fixture(pure, make_tree, remove_tree);
  suite_add_tcase(s, pure);
  TCase *loop = tcase_create("loopback");
  tcase_set_timeout(loop, 60);
  tcase_add_unchecked_fixture(loop, make_tree, remove_tree);
  tcase_add_test(loop, test_http_routes);
  tcase_add_test(loop, test_http_keepalive_and_limits);
  tcase_add_test(loop, test_http_gzip_and_etags);
  tcase_add_test(loop, test_http_gzip_stop_midway);
  tcase_add_test(loop, test_ws_roundtrip);
  tcase_add_test(loop, test_ws_reply_then_close);
  tcase_add_test(loop, test_ws_upgrade_with_early_frame);
  tcase_add_test(loop, test_ws_bad_upgrades);
  tcase_add_test(loop, test_ws_text_and_oversize_close);
  tcase_add_test(loop, test_ws_server_close_and_disconnects);
  tcase_add_test(loop, test_ws_backpressure_efull);
  tcase_add_test(loop, test_ws_shared_frames);
  tcase_add_test(loop, test_http_backpressure);
  tcase_add_test(loop, test_ws_ping_flood_is_bounded);
  tcase_add_test(loop, test_stop_closes_everything);
  tcase_add_test(loop, test_start_errors);
  suite_add_tcase(s, loop);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(net_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
