/*
 * http.c: the HTTP listener (http.h): binds the port, parses HTTP/1.1
 * requests with http-parser, routes them (/healthz, /proto/tissue.proto,
 * /vendor/... to the web client's node_modules, /ws to the WebSocket
 * transport in ws.c, anything else to a static file under web_root) and
 * writes the responses. Socket plumbing is in net_conn.c, path safety and
 * file reads in static_files.c.
 *
 * Requests are GET or HEAD with keep-alive and pipelining; responses go out
 * in order through libuv's write queue. When more than max_pending_output
 * bytes of responses are queued, parsing pauses (the unparsed input is kept)
 * and reading stops until the queue drains to half of that. Static files are
 * read whole with blocking reads (at most TS__HTTP_FILE_MAX): they are the
 * web client's own scripts and come from the page cache in microseconds.
 *
 * Timeouts: the first request must be complete within handshake_ms of the
 * connection's start, each later one within handshake_ms of its first byte
 * (a client that dribbles a request or never sends one is closed);
 * between requests a keep-alive connection may idle TS__HTTP_IDLE_MS.
 */
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../auth.h"
#include "../core/ts_error.h"
#include "../log.h"
#include "../metrics.h"
#include "http_cond.h"
#include "http_gzip.h"
#include "net_internal.h"
#include "static_files.h"
#include "ws.h"

static int on_message_begin(http_parser *p);
static int on_url(http_parser *p, const char *at, size_t len);
static int on_header_field(http_parser *p, const char *at, size_t len);
static int on_header_value(http_parser *p, const char *at, size_t len);
static int on_headers_complete(http_parser *p);
static int on_body(http_parser *p, const char *at, size_t len);
static int on_message_complete(http_parser *p);

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- responses ---------------------------------------------------------- */

/* http_parser_pause() asserts on a parser already in an error state. */
static void pause_parser(ts__net_conn *c) {
  enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
  if (e == HPE_OK || e == HPE_PAUSED) http_parser_pause(&c->parser, 1);
}

/* Queues one response. body is copied unless own_body (then it is taken
 * over and freed). keep=0 closes the connection gracefully afterwards. */
static void respond(ts__net_conn *c, int status, const char *ctype,
                    const void *body, size_t blen, int own_body, int head_only,
                    int keep, const char *extra) {
  if (c->http_done || c->close_started || c->lingering) {
    if (own_body) free((void *)body);
    return;
  }
  char *hdr = malloc(1024);
  void *b = own_body ? (void *)body : NULL;
  if (!own_body && blen > 0 && !head_only) {
    b = malloc(blen);
    if (b) memcpy(b, body, blen);
  }
  if (!hdr || (blen > 0 && !head_only && !b)) {
    free(hdr);
    free(b);
    ts__conn_close_now(c);
    return;
  }
  int n;
  if (status == 304) /* no body, so no Content-Type or Content-Length (RFC 9110 15.4.5) */
    n = snprintf(hdr, 1024,
                 "HTTP/1.1 304 Not Modified\r\n"
                 "Cache-Control: no-cache\r\n"
                 "Connection: %s\r\n"
                 "%s\r\n",
                 keep ? "keep-alive" : "close", extra ? extra : "");
  else
    n = snprintf(hdr, 1024,
                 "HTTP/1.1 %d %s\r\n"
                 "Content-Type: %s\r\n"
                 "Content-Length: %zu\r\n"
                 "Cache-Control: no-cache\r\n"
                 "X-Content-Type-Options: nosniff\r\n"
                 "Connection: %s\r\n"
                 "%s\r\n",
                 status, http_status_str((enum http_status)status), ctype, blen,
                 keep ? "keep-alive" : "close", extra ? extra : "");
  if (n < 0 || n >= 1024) n = 0; /* cannot happen with our fixed headers */
  uv_buf_t bufs[2] = {uv_buf_init(hdr, (unsigned)n), uv_buf_init(b, (unsigned)blen)};
  unsigned nb = (head_only || blen == 0) ? 1 : 2;
  if (head_only) {
    free(b);
    b = NULL;
  }
  if (ts__conn_write(c, bufs, nb, hdr, b) != 0) return;
  if (!keep) {
    c->http_done = 1;
    pause_parser(c);
    ts__conn_linger(c, TS__HTTP_LINGER_MS);
  } else if (ts__conn_write_queued(c) > c->h->cfg.max_pending_output) {
    c->backpressure = 1;
    pause_parser(c);
  }
}

static void respond_error(ts__net_conn *c, int status, const char *reason, int head_only,
                          int keep) {
  char body[256];
  int n = snprintf(body, sizeof body, "%d %s%s%s\n", status,
                   http_status_str((enum http_status)status), reason ? ": " : "",
                   reason ? reason : "");
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof body) n = sizeof body - 1;
  const char *extra = status == 405 ? "Allow: GET, HEAD\r\n" : NULL;
  respond(c, status, "text/plain; charset=utf-8", body, (size_t)n, 0, head_only, keep,
          extra);
}

static const char *header(const ts__http_req *r, const char *name, char *buf, size_t cap);

/* A file's bytes, or its gzip encoding when the client accepts it and the
 * cache holds it (http_gzip.h), each with its entity tag; 304 when the
 * client's If-None-Match names the version on disk (either encoding's tag:
 * both decode to the same bytes). Cache-Control stays no-cache: browsers
 * ask again each time, and a page reloaded costs a 304 per file. */
static void serve_static(ts__net_conn *c, const char *path, const char *ctype, int head_only,
                         int keep) {
  const ts__http_req *r = c->req;
  char ae[512], inm[1024], extra[256], etag[TS_HTTP_ETAG_MAX], etag_gz[TS_HTTP_ETAG_MAX];
  const char *accept = header(r, "Accept-Encoding", ae, sizeof ae);
  const char *none_match = header(r, "If-None-Match", inm, sizeof inm);
  ts_http_file_counts *files = c->h->cfg.files;
  int compressible = ts_http_gz_type_ok(ctype);
  int want_gz = compressible && ts_http_accepts_gzip(accept);
  const char *vary = compressible ? "Vary: Accept-Encoding\r\n" : "";
  /* the version on disk: answers If-None-Match, and finds a compressed copy
   * without reading the file (the copy was made from this very version) */
  ts_file_tag tag;
  int have_tag = ts_static_tag(path, &tag) == 0;
  if (have_tag && none_match) {
    ts_http_etag(&tag, 0, etag);
    ts_http_etag(&tag, 1, etag_gz);
    int plain = ts_http_etag_listed(none_match, etag);
    int gz = ts_http_etag_listed(none_match, etag_gz);
    if (plain || gz) {
      snprintf(extra, sizeof extra, "ETag: %s\r\n%s", gz && (want_gz || !plain) ? etag_gz : etag,
               vary);
      if (files) files->not_modified++;
      respond(c, 304, NULL, NULL, 0, 0, 1, keep, extra);
      return;
    }
  }
  const uint8_t *gz = NULL;
  size_t gz_len = 0;
  if (have_tag && want_gz && tag.size >= TS_HTTP_GZ_MIN_BYTES && tag.size <= TS__HTTP_FILE_MAX &&
      ts_http_gz_get(c->h->gz, path, &tag, &gz, &gz_len)) {
    ts_http_etag(&tag, 1, etag);
    snprintf(extra, sizeof extra, "ETag: %s\r\n%sContent-Encoding: gzip\r\n", etag, vary);
    if (files) {
      files->gzip++;
      files->gzip_bytes += head_only ? 0 : gz_len;
    }
    respond(c, 200, ctype, gz, gz_len, 0, head_only, keep, extra); /* copied */
    return;
  }
  uint8_t *data = NULL;
  size_t len = 0;
  int rc = ts_static_read_tag(path, TS__HTTP_FILE_MAX, &data, &len, &tag);
  if (rc == TS_ETOOBIG || rc == TS_ENOMEM) {
    respond_error(c, 500, rc == TS_ETOOBIG ? "file too large" : "out of memory", head_only,
                  keep);
    return;
  }
  if (rc != 0) {
    respond_error(c, 404, NULL, head_only, keep);
    return;
  }
  ts_http_etag(&tag, 0, etag); /* of the bytes read, should the file have changed since */
  snprintf(extra, sizeof extra, "ETag: %s\r\n%s", etag, vary);
  if (files) {
    files->identity++;
    files->identity_bytes += head_only ? 0 : len;
  }
  respond(c, 200, ctype, data, len, 1, head_only, keep, extra);
}

static void serve_file(ts__net_conn *c, const char *root, const char *rel, int head_only,
                       int keep) {
  char real[PATH_MAX];
  if (!root || ts_static_resolve(root, rel, real, sizeof real) != 0) {
    respond_error(c, 404, NULL, head_only, keep);
    return;
  }
  serve_static(c, real, ts_static_content_type(real), head_only, keep);
}

static void serve_proto(ts__net_conn *c, int head_only, int keep) {
  if (!c->h->proto_file) {
    respond_error(c, 404, NULL, head_only, keep);
    return;
  }
  serve_static(c, c->h->proto_file, "text/plain; charset=utf-8", head_only, keep);
}

static void serve_healthz(ts__net_conn *c, int head_only, int keep) {
  char buf[4096];
  size_t n;
  if (c->h->healthz) {
    n = c->h->healthz(c->h->server, buf, sizeof buf);
    if (n > sizeof buf) n = sizeof buf;
  } else {
    n = (size_t)snprintf(buf, sizeof buf, "{\"ok\":true}");
  }
  respond(c, 200, "application/json", buf, n, 0, head_only, keep, NULL);
}

static void serve_metrics(ts__net_conn *c, int head_only, int keep) {
  if (!c->h->cfg.metrics) {
    respond_error(c, 404, NULL, head_only, keep);
    return;
  }
  size_t n = 0;
  char *text = c->h->cfg.metrics(c->h->server, &n);
  if (!text) {
    respond_error(c, 503, "metrics unavailable", head_only, keep);
    return;
  }
  respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, n, 1, head_only, keep, NULL);
}

/* ---- request headers ---------------------------------------------------- */

/* All values of header `name` joined by ", " into buf; NULL when absent. */
static const char *header(const ts__http_req *r, const char *name, char *buf, size_t cap) {
  size_t o = 0;
  int found = 0;
  buf[0] = '\0';
  for (int i = 0; i < r->nhdr; i++) {
    if (strcasecmp(r->head + r->hdr[i].name, name) != 0) continue;
    const char *v = r->hdr[i].value ? r->head + r->hdr[i].value : "";
    int n = snprintf(buf + o, cap - o, "%s%s", found ? ", " : "", v);
    found = 1;
    if (n < 0 || (size_t)n >= cap - o) break; /* truncated: fails validation */
    o += (size_t)n;
  }
  return found ? buf : NULL;
}

static void handle_ws(ts__net_conn *c) {
  const ts__http_req *r = c->req;
  char up[256], conn[256], ver[64], key[128];
  const char *why = ts_ws_check_upgrade(
      c->parser.method == HTTP_GET,
      c->parser.http_major > 1 || (c->parser.http_major == 1 && c->parser.http_minor >= 1),
      header(r, "Upgrade", up, sizeof up), header(r, "Connection", conn, sizeof conn),
      header(r, "Sec-WebSocket-Version", ver, sizeof ver),
      header(r, "Sec-WebSocket-Key", key, sizeof key));
  if (!why && !c->parser.upgrade) why = "not an upgrade request";
  char origin[512], host[512];
  if (!why && !ts_auth_origin_allowed(header(r, "Origin", origin, sizeof origin),
                                      header(r, "Host", host, sizeof host),
                                      c->h->cfg.allowed_origins)) {
    if (c->h->cfg.origin_refused) (*c->h->cfg.origin_refused)++;
    ts_log_warn("WebSocket upgrade from %s refused: Origin '%.200s' is not allowed", c->base.peer,
                origin);
    respond_error(c, 403, "this Origin may not open a WebSocket here (see allowed-origins)", 0, 0);
    return;
  }
  char accept[TS_WS_ACCEPT_LEN + 1];
  if (!why && ts_ws_accept_key(key, accept) != 0) why = "cannot compute Sec-WebSocket-Accept";
  if (why) {
    respond_error(c, 400, why, 0, 0);
    return;
  }
  char *resp = malloc(256);
  if (!resp) {
    ts__conn_close_now(c);
    return;
  }
  int n = snprintf(resp, 256,
                   "HTTP/1.1 101 Switching Protocols\r\n"
                   "Upgrade: websocket\r\n"
                   "Connection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: %s\r\n\r\n",
                   accept);
  uv_buf_t b = uv_buf_init(resp, (unsigned)n);
  if (ts__conn_write(c, &b, 1, resp, NULL) != 0) return;
  c->upgrade_ok = 1;
  pause_parser(c); /* what follows is WebSocket frames */
}

static void handle_request(ts__net_conn *c) {
  const ts__http_req *r = c->req;
  int method = c->parser.method;
  int head_only = method == HTTP_HEAD;
  /* After an upgrade exit the parser cannot go on with this connection
   * unless we restart it; CONNECT tunnels are never continued. */
  int keep = http_should_keep_alive(&c->parser) && method != HTTP_CONNECT;
  if (method != HTTP_GET && method != HTTP_HEAD) {
    respond_error(c, 405, NULL, 0, keep);
    return;
  }
  struct http_parser_url u;
  http_parser_url_init(&u);
  if (http_parser_parse_url(r->url, r->url_len, 0, &u) != 0 || !(u.field_set & (1 << UF_PATH))) {
    respond_error(c, 400, "bad request target", head_only, 0);
    return;
  }
  char rel[PATH_MAX];
  int rc = ts_static_clean_path(r->url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len,
                                rel, sizeof rel);
  if (rc == TS_ETOOBIG) {
    respond_error(c, 414, NULL, head_only, 0);
    return;
  }
  if (rc != 0) {
    respond_error(c, 400, "bad path", head_only, keep);
    return;
  }
  if (strcmp(rel, "ws") == 0) {
    handle_ws(c);
  } else if (strcmp(rel, "healthz") == 0) {
    serve_healthz(c, head_only, keep);
  } else if (strcmp(rel, "metrics") == 0) {
    serve_metrics(c, head_only, keep);
  } else if (strcmp(rel, "proto/tissue.proto") == 0) {
    serve_proto(c, head_only, keep);
  } else if (strncmp(rel, "vendor/", 7) == 0) {
    char root[PATH_MAX];
    int n = c->h->web_root ? snprintf(root, sizeof root, "%s/node_modules", c->h->web_root) : -1;
    serve_file(c, (n > 0 && (size_t)n < sizeof root) ? root : NULL, rel + 7, head_only, keep);
  } else {
    serve_file(c, c->h->web_root, rel, head_only, keep);
  }
}

/* ---- http-parser callbacks ---------------------------------------------- */

static void on_idle(uv_timer_t *t);
static void on_request_timeout(uv_timer_t *t);

static int on_message_begin(http_parser *p) {
  ts__net_conn *c = p->data;
  ts__http_req *r = c->req;
  /* a later request has handshake_ms from its first byte (the first one
   * from the connection's start) */
  if (c->requests_done > 0 && c->h->cfg.handshake_ms && !c->lingering && !c->close_started)
    uv_timer_start(&c->timer, on_request_timeout, c->h->cfg.handshake_ms, 0);
  r->url_len = 0;
  r->url[0] = '\0';
  r->head_len = 1; /* offset 0 means "no value" */
  r->head[0] = '\0';
  r->nhdr = 0;
  r->in_value = 0;
  r->head_bytes = 0;
  r->body_len = 0;
  r->err_status = 0;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  ts__http_req *r = ((ts__net_conn *)p->data)->req;
  if (r->url_len + len > TS__HTTP_URL_MAX) {
    r->err_status = 414;
    return 1;
  }
  memcpy(r->url + r->url_len, at, len);
  r->url_len += len;
  r->url[r->url_len] = '\0';
  return 0;
}

/* Ends the current value: trailing blanks dropped, NUL appended. */
static void end_value(ts__http_req *r) {
  size_t start = r->hdr[r->nhdr - 1].value;
  while (r->head_len > start && (r->head[r->head_len - 1] == ' ' || r->head[r->head_len - 1] == '\t'))
    r->head_len--;
  r->head[r->head_len++] = '\0';
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  ts__http_req *r = ((ts__net_conn *)p->data)->req;
  if (r->head_bytes + len > TS__HTTP_HEAD_MAX) {
    r->err_status = 431;
    return 1;
  }
  r->head_bytes += len;
  if (r->nhdr == 0 || r->in_value) { /* a new header line */
    if (r->nhdr == TS__HTTP_MAX_HEADERS) {
      r->err_status = 431;
      return 1;
    }
    if (r->nhdr > 0) end_value(r);
    r->hdr[r->nhdr].name = (uint32_t)r->head_len;
    r->hdr[r->nhdr].value = 0;
    r->nhdr++;
    r->in_value = 0;
  }
  memcpy(r->head + r->head_len, at, len);
  r->head_len += len;
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  ts__http_req *r = ((ts__net_conn *)p->data)->req;
  if (r->nhdr == 0) return 1; /* cannot happen: a value follows a name */
  if (r->head_bytes + len > TS__HTTP_HEAD_MAX) {
    r->err_status = 431;
    return 1;
  }
  r->head_bytes += len;
  if (!r->in_value) {
    r->head[r->head_len++] = '\0'; /* ends the name */
    r->hdr[r->nhdr - 1].value = (uint32_t)r->head_len;
    r->in_value = 1;
  }
  memcpy(r->head + r->head_len, at, len);
  r->head_len += len;
  return 0;
}

static int on_headers_complete(http_parser *p) {
  ts__http_req *r = ((ts__net_conn *)p->data)->req;
  if (r->nhdr > 0) {
    if (r->in_value) {
      end_value(r);
    } else { /* a name without a value: keep it with an empty value */
      r->head[r->head_len++] = '\0';
      r->hdr[r->nhdr - 1].value = 0;
    }
  }
  r->in_value = 0;
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  ts__http_req *r = ((ts__net_conn *)p->data)->req;
  (void)at;
  r->body_len += len;
  if (r->body_len > TS__HTTP_BODY_MAX) {
    r->err_status = 413;
    return 1;
  }
  return 0;
}

static int on_message_complete(http_parser *p) {
  ts__net_conn *c = p->data;
  c->requests_done++;
  if (c->h->cfg.handshake_ms && !c->lingering && !c->close_started)
    uv_timer_start(&c->timer, on_idle, TS__HTTP_IDLE_MS, 0);
  if (!c->http_done) handle_request(c);
  return 0;
}

/* ---- input -------------------------------------------------------------- */

static void process_input(ts__net_conn *c, const uint8_t *data, size_t len) {
  size_t off = 0;
  while (off < len && !c->close_started && !c->lingering && !c->http_done) {
    size_t n = http_parser_execute(&c->parser, &parser_settings, (const char *)data + off,
                                   len - off);
    off += n;
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (c->upgrade_ok) {
      free(c->req);
      c->req = NULL;
      ts__ws_begin(c, data + off, len - off);
      return;
    }
    if (e == HPE_PAUSED) {
      if (c->backpressure && off < len) {
        uint8_t *keep = malloc(len - off);
        if (!keep) {
          ts__conn_close_now(c);
          return;
        }
        memcpy(keep, data + off, len - off);
        c->held = keep;
        c->held_len = len - off;
      }
      if (c->backpressure) ts__conn_read_stop(c);
      return;
    }
    if (e != HPE_OK) {
      int status = c->req->err_status ? c->req->err_status
                   : e == HPE_HEADER_OVERFLOW ? 431
                                              : 400;
      respond_error(c, status, status == 400 ? http_errno_description(e) : NULL, 0, 0);
      return;
    }
    if (c->parser.upgrade) { /* an Upgrade we did not take: carry on as HTTP */
      http_parser_init(&c->parser, HTTP_REQUEST);
      c->parser.data = c;
      continue;
    }
    if (n == 0) break; /* no progress without an error: cannot happen */
  }
}

static void on_idle(uv_timer_t *t) {
  ts__net_conn *c = t->data;
  if (!c->is_ws && !c->lingering) ts__conn_close_now(c);
}

static void on_request_timeout(uv_timer_t *t) {
  ts__net_conn *c = t->data;
  if (c->is_ws || c->lingering || c->upgrade_ok) return;
  ts_metrics_count_close(c->h->server, TS_CLOSE_HANDSHAKE_TIMEOUT);
  ts__conn_close_now(c);
}

void ts__http_conn_init(ts__net_conn *c) {
  c->req = malloc(sizeof *c->req);
  if (!c->req) {
    ts__conn_close_now(c);
    return;
  }
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  on_message_begin(&c->parser);
  if (c->h->cfg.handshake_ms)
    uv_timer_start(&c->timer, on_request_timeout, c->h->cfg.handshake_ms, 0);
  else
    uv_timer_start(&c->timer, on_idle, TS__HTTP_IDLE_MS, 0);
}

void ts__http_on_read(ts__net_conn *c, const uint8_t *data, size_t len) {
  if (!c->req || c->http_done) return;
  if (!c->h->cfg.handshake_ms) uv_timer_start(&c->timer, on_idle, TS__HTTP_IDLE_MS, 0);
  if (c->backpressure) { /* reading is stopped then; keep it anyway, in order */
    uint8_t *more = realloc(c->held, c->held_len + len);
    if (!more) {
      ts__conn_close_now(c);
      return;
    }
    memcpy(more + c->held_len, data, len);
    c->held = more;
    c->held_len += len;
    return;
  }
  process_input(c, data, len);
}

void ts__http_on_drain(ts__net_conn *c) {
  if (!c->backpressure || c->http_done || !c->req) return;
  if (ts__conn_write_queued(c) > c->h->cfg.max_pending_output / 2) return;
  c->backpressure = 0;
  http_parser_pause(&c->parser, 0);
  uint8_t *held = c->held;
  size_t held_len = c->held_len;
  c->held = NULL;
  c->held_len = 0;
  if (held) process_input(c, held, held_len);
  free(held);
  if (!c->backpressure && !c->close_started && !c->lingering) ts__conn_read_start(c);
}

void ts__http_conn_free(ts__net_conn *c) {
  free(c->req);
  c->req = NULL;
  free(c->held);
  c->held = NULL;
}

/* ---- listener ----------------------------------------------------------- */

static void free_http(ts_http *h) {
  ts_http_gz_release(h->gz);
  free(h->host);
  free(h->web_root);
  free(h->proto_file);
  free(h);
}

void ts__http_conn_gone(ts_http *h) {
  if (h->stopping && !h->listener_open && h->nconns == 0) free_http(h);
}

static void on_listener_closed(uv_handle_t *handle) {
  ts_http *h = handle->data;
  h->listener_open = 0;
  ts__http_conn_gone(h);
}

static void on_connection(uv_stream_t *server, int status) {
  ts_http *h = server->data;
  if (status < 0 || h->stopping) return;
  ts__conn_accept(h);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* A listening socket bound to host:port, or a negative ts_errno. Plain
 * POSIX calls so that a failure leaves no libuv handle behind. */
static int listen_socket(const char *host, int port) {
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  if (getaddrinfo(host, portstr, &hints, &res) != 0 || !res) return TS_EINVAL;
  int fd = -1;
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd >= 0 ? fd : TS_EIO;
}

int ts_http_start(uv_loop_t *loop, ts_server *server, const ts_http_config *cfg,
                  size_t (*healthz)(ts_server *s, char *buf, size_t cap), ts_http **out,
                  int *bound_port) {
  if (!loop || !cfg || !out || cfg->port < 0 || cfg->port > 65535) return TS_EINVAL;
  *out = NULL;
  ts_http *h = calloc(1, sizeof *h);
  if (!h) return TS_ENOMEM;
  h->loop = loop;
  h->server = server;
  h->healthz = healthz;
  h->cfg = *cfg;
  h->host = strdup(cfg->host ? cfg->host : "127.0.0.1");
  h->web_root = dup_or_null(cfg->web_root);
  h->proto_file = dup_or_null(cfg->proto_file);
  if (!h->host || (cfg->web_root && !h->web_root) || (cfg->proto_file && !h->proto_file)) {
    free_http(h);
    return TS_ENOMEM;
  }
  /* without it (no memory) every file is sent as it is */
  h->gz = ts_http_gz_new(loop, TS__HTTP_GZ_ENTRIES, TS__HTTP_GZ_BYTES);
  h->cfg.host = h->host;
  h->cfg.web_root = h->web_root;
  h->cfg.proto_file = h->proto_file;
  if (!h->cfg.max_message) h->cfg.max_message = TS__WS_DEFAULT_MAX_MESSAGE;
  if (!h->cfg.max_pending_output) h->cfg.max_pending_output = TS__WS_DEFAULT_MAX_PENDING;

  int fd = listen_socket(h->host, cfg->port);
  if (fd < 0) {
    free_http(h);
    return fd;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  int port = -1;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
    if (ss.ss_family == AF_INET) port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  if (port < 0 || uv_tcp_init(loop, &h->listener) != 0) {
    close(fd);
    free_http(h);
    return TS_EIO;
  }
  h->listener.data = h;
  h->listener_open = 1;
  int rc = uv_tcp_open(&h->listener, fd);
  if (rc != 0) close(fd); /* not adopted by the handle */
  if (rc != 0 || uv_listen((uv_stream_t *)&h->listener, 128, on_connection) != 0) {
    /* the handle exists now: it is freed by its close callback */
    h->stopping = 1;
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
    return TS_EIO;
  }
  if (bound_port) *bound_port = port;
  *out = h;
  return 0;
}

void ts_http_stop(ts_http *h) {
  if (!h || h->stopping) return;
  h->stopping = 1;
  uv_close((uv_handle_t *)&h->listener, on_listener_closed);
  for (ts__net_conn *c = h->conns; c; c = c->next) {
    if (c->close_started) continue;
    if (c->close_reason < 0) c->close_reason = TS_CLOSE_SHUTDOWN;
    if (c->is_ws)
      ts__ws_close(c, 1001, "server shutting down");
    else
      ts__conn_close_now(c);
  }
}
