/*
 * rawclient.c: the fault tests' protocol client (see rawclient.h). The
 * WebSocket side writes client frames by RFC 6455 section 5.2 (always
 * masked, payload lengths 7/16/64-bit) and reads the server's unmasked
 * frames, answering pings with pongs unless told not to.
 */
#define _GNU_SOURCE
#include "rawclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RC_TIMEOUT_ERR (-1000)

static long long mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void init(rc_conn *c, int fd, int ws) {
  memset(c, 0, sizeof *c);
  c->fd = fd;
  c->ws = ws;
  c->auto_pong = 1;
  c->next_rid = 1;
}

int rc_tcp(rc_conn *c, int port) {
  int fd = connect_port(port);
  init(c, fd, 0);
  return fd < 0 ? -1 : 0;
}

/* Reads into c->in; 1 read, 0 timeout, -1 EOF/error (c->eof set). */
static int fill(rc_conn *c, int timeout_ms) {
  if (c->fd < 0 || c->eof) return -1;
  struct pollfd p = {c->fd, POLLIN, 0};
  int r = poll(&p, 1, timeout_ms < 0 ? 0 : timeout_ms);
  if (r <= 0) return 0;
  if (c->in_off > 0) { /* compact what was consumed: one move per read, not per message */
    memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
    c->in_len -= c->in_off;
    c->in_off = 0;
  }
  if (c->in_cap - c->in_len < 65536) {
    size_t cap = c->in_cap ? c->in_cap * 2 : 131072;
    uint8_t *n = realloc(c->in, cap);
    if (!n) return -1;
    c->in = n;
    c->in_cap = cap;
  }
  ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
  if (n <= 0) {
    c->eof = 1;
    return -1;
  }
  c->in_len += (size_t)n;
  return 1;
}

/* Drops n bytes from the front of the unread input. Only the offset moves:
 * moving the rest down for every message made a backlog quadratic (a test
 * reading 250 frames/s took 90 s instead of 3); fill() compacts once per read. */
static void consume(rc_conn *c, size_t n) {
  c->in_off += n;
  if (c->in_off == c->in_len) c->in_off = c->in_len = 0;
}

/* The unread input and its length. */
static const uint8_t *unread(const rc_conn *c, size_t *len) {
  *len = c->in_len - c->in_off;
  return c->in + c->in_off;
}

int rc_ws(rc_conn *c, int port) {
  int fd = connect_port(port);
  init(c, fd, 1);
  if (fd < 0) return -1;
  const char *req =
      "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  if (rc_send_raw(c, req, strlen(req))) return -1;
  long long end = mono_ms() + 10000;
  while (mono_ms() < end) {
    size_t avail;
    const uint8_t *in = unread(c, &avail);
    if (avail >= 4) {
      for (size_t i = 0; i + 4 <= avail; i++) {
        if (memcmp(in + i, "\r\n\r\n", 4) == 0) {
          int ok = avail >= 12 && memcmp(in, "HTTP/1.1 101", 12) == 0;
          consume(c, i + 4);
          return ok ? 0 : -1;
        }
      }
    }
    if (fill(c, 100) < 0) return -1;
  }
  return -1;
}

void rc_close(rc_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  free(c->in);
  c->in = NULL;
  c->in_len = c->in_off = c->in_cap = 0;
}

int rc_send_raw(rc_conn *c, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

/* A masked client frame of `opcode` around payload. */
static uint8_t *ws_frame(int opcode, const uint8_t *payload, size_t n, size_t *len) {
  uint8_t *f = malloc(n + 14);
  if (!f) return NULL;
  size_t h = 0;
  f[h++] = (uint8_t)(0x80 | opcode);
  if (n < 126) {
    f[h++] = (uint8_t)(0x80 | n);
  } else if (n < 65536) {
    f[h++] = 0x80 | 126;
    f[h++] = (uint8_t)(n >> 8);
    f[h++] = (uint8_t)n;
  } else {
    f[h++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--) f[h++] = (uint8_t)((uint64_t)n >> (8 * i));
  }
  const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
  memcpy(f + h, mask, 4);
  h += 4;
  for (size_t i = 0; i < n; i++) f[h + i] = payload[i] ^ mask[i & 3];
  *len = h + n;
  return f;
}

uint8_t *rc_encode(rc_conn *c, Tissued__V1__Envelope *env, size_t *len) {
  size_t n = tissued__v1__envelope__get_packed_size(env);
  uint8_t *body = malloc(n + 4);
  if (!body) return NULL;
  tissued__v1__envelope__pack(env, body + 4);
  if (!c->ws) {
    body[0] = (uint8_t)(n >> 24);
    body[1] = (uint8_t)(n >> 16);
    body[2] = (uint8_t)(n >> 8);
    body[3] = (uint8_t)n;
    *len = n + 4;
    return body;
  }
  uint8_t *f = ws_frame(2, body + 4, n, len);
  free(body);
  return f;
}

int rc_send(rc_conn *c, Tissued__V1__Envelope *env) {
  size_t len;
  uint8_t *b = rc_encode(c, env, &len);
  if (!b) return -1;
  int rc = rc_send_raw(c, b, len);
  free(b);
  return rc;
}

/* One complete message in c->in: TCP body, or a WebSocket data frame's
 * payload (control frames handled here and skipped). Returns the unpacked
 * Envelope, NULL when more input is needed (*need = 1) or on a close. */
static Tissued__V1__Envelope *take(rc_conn *c, int *need) {
  *need = 1;
  size_t avail;
  const uint8_t *in = unread(c, &avail);
  if (!c->ws) {
    if (avail < 4) return NULL;
    size_t n = (size_t)in[0] << 24 | (size_t)in[1] << 16 | (size_t)in[2] << 8 | in[3];
    if (avail < 4 + n) return NULL;
    Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, n, in + 4);
    consume(c, 4 + n);
    *need = 0;
    return e;
  }
  for (;;) {
    in = unread(c, &avail);
    if (avail < 2) return NULL;
    int op = in[0] & 0x0f;
    size_t n = in[1] & 0x7f, h = 2;
    if (n == 126) {
      if (avail < 4) return NULL;
      n = (size_t)in[2] << 8 | in[3];
      h = 4;
    } else if (n == 127) {
      if (avail < 10) return NULL;
      n = 0;
      for (int i = 0; i < 8; i++) n = n << 8 | in[2 + i];
      h = 10;
    }
    if (avail < h + n) return NULL;
    const uint8_t *p = in + h;
    if (op == 0x9) { /* ping */
      c->pings++;
      if (c->auto_pong) {
        size_t fl;
        uint8_t *f = ws_frame(0xA, p, n, &fl);
        if (f) rc_send_raw(c, f, fl);
        free(f);
      }
      consume(c, h + n);
      continue;
    }
    if (op == 0x8) { /* close */
      c->close_code = n >= 2 ? (p[0] << 8 | p[1]) : 1005;
      consume(c, h + n);
      *need = 0;
      return NULL;
    }
    if (op == 0xA) { /* pong */
      consume(c, h + n);
      continue;
    }
    Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, n, p);
    consume(c, h + n);
    *need = 0;
    return e;
  }
}

Tissued__V1__Envelope *rc_recv(rc_conn *c, int timeout_ms) {
  long long end = mono_ms() + timeout_ms;
  for (;;) {
    if (c->close_code) return NULL;
    int need;
    Tissued__V1__Envelope *e = take(c, &need);
    if (e) return e;
    if (!need) {
      if (c->close_code) return NULL;
      continue; /* an Envelope that did not decode: skip it */
    }
    long long left = end - mono_ms();
    if (left < 0) left = 0;
    int r = fill(c, (int)(left > 50 ? 50 : left)); /* at least one look, even with 0 */
    if (r < 0 || (r == 0 && left == 0)) return NULL;
  }
}

int rc_wait_closed(rc_conn *c, int timeout_ms, int code, int *seen) {
  long long end = mono_ms() + timeout_ms;
  while (mono_ms() < end) {
    Tissued__V1__Envelope *e = rc_recv(c, 100);
    if (e) {
      if (seen && e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR && -(int)e->error->code == code)
        (*seen)++;
      tissued__v1__envelope__free_unpacked(e, NULL);
      continue;
    }
    if (c->eof || c->close_code) {
      /* after a close frame, the EOF follows */
      long long soon = mono_ms() + 2000;
      while (!c->eof && mono_ms() < soon) {
        if (fill(c, 50) > 0) c->in_len = c->in_off = 0;
      }
      return 1;
    }
  }
  return 0;
}

/* Sends env with a fresh request id and waits for the reply of that id. */
static Tissued__V1__Envelope *request(rc_conn *c, Tissued__V1__Envelope *env, int timeout_ms) {
  env->request_id = c->next_rid++;
  if (rc_send(c, env)) return NULL;
  long long end = mono_ms() + timeout_ms;
  for (;;) {
    long long left = end - mono_ms();
    if (left <= 0) return NULL;
    Tissued__V1__Envelope *e = rc_recv(c, (int)left);
    if (!e) return NULL;
    if (e->request_id == env->request_id) return e;
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
}

static int reply_code(Tissued__V1__Envelope *e, int want) {
  if (!e) return RC_TIMEOUT_ERR;
  int rc = 0;
  if (e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR)
    rc = -(int)e->error->code;
  else if ((int)e->body_case != want)
    rc = RC_TIMEOUT_ERR;
  return rc;
}

int rc_hello(rc_conn *c, int timeout_ms) {
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = 1;
  h.client_name = (char *)"itest-rawclient";
  h.credentials = (char *)RC_SERVER_KEY;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  Tissued__V1__Envelope *e = request(c, &env, timeout_ms);
  int rc = reply_code(e, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY);
  if (e) tissued__v1__envelope__free_unpacked(e, NULL);
  return rc;
}

int rc_create(rc_conn *c, int solver, double dt, uint32_t *session_id, int timeout_ms) {
  Tissued__V1__CreateSession cs = TISSUED__V1__CREATE_SESSION__INIT;
  /* no name: the daemon names it session-N (names are unique) */
  cs.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  cs.builtin = (char *)"stomach-patch";
  cs.solver = (Tissued__V1__Solver)solver;
  cs.dt = (float)dt;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  env.create_session = &cs;
  Tissued__V1__Envelope *e = request(c, &env, timeout_ms);
  int rc = reply_code(e, TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED);
  if (rc == 0 && session_id) *session_id = e->session_created->session_id;
  if (e) tissued__v1__envelope__free_unpacked(e, NULL);
  return rc;
}

int rc_send_obj_upload(rc_conn *c, uint64_t rid, const char *name, const uint8_t *obj, size_t len,
                       float scale, int solver, int self_contact) {
  Tissued__V1__MeshUpload up = TISSUED__V1__MESH_UPLOAD__INIT;
  up.format = TISSUED__V1__MESH_UPLOAD__FORMAT__OBJ;
  up.data.data = (uint8_t *)obj;
  up.data.len = len;
  up.scale = scale;
  Tissued__V1__CreateSession cs = TISSUED__V1__CREATE_SESSION__INIT;
  if (name) cs.name = (char *)name;
  cs.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_MESH;
  cs.mesh = &up;
  cs.solver = (Tissued__V1__Solver)solver;
  cs.self_contact = self_contact != 0;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  env.create_session = &cs;
  return rc_send(c, &env);
}

int rc_join(rc_conn *c, uint32_t session_id, int controller, double radius,
            uint32_t frame_rate, uint32_t *tool_id, int timeout_ms) {
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.radius = (float)radius;
  Tissued__V1__JoinSession j = TISSUED__V1__JOIN_SESSION__INIT;
  j.session_id = session_id;
  j.role = controller ? TISSUED__V1__ROLE__ROLE_CONTROLLER : TISSUED__V1__ROLE__ROLE_OBSERVER;
  if (controller) j.tool = &shape;
  j.frame_rate = frame_rate;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  env.join_session = &j;
  Tissued__V1__Envelope *e = request(c, &env, timeout_ms);
  int rc = reply_code(e, TISSUED__V1__ENVELOPE__BODY_JOINED);
  if (rc == 0 && tool_id) *tool_id = e->joined->tool_id;
  if (e) tissued__v1__envelope__free_unpacked(e, NULL);
  return rc;
}

int rc_end(rc_conn *c, uint32_t session_id, int timeout_ms) {
  Tissued__V1__EndSession m = TISSUED__V1__END_SESSION__INIT;
  m.session_id = session_id;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_END_SESSION;
  env.end_session = &m;
  Tissued__V1__Envelope *e = request(c, &env, timeout_ms);
  int rc = reply_code(e, TISSUED__V1__ENVELOPE__BODY_ACK);
  if (e) tissued__v1__envelope__free_unpacked(e, NULL);
  return rc;
}

int rc_pose(rc_conn *c, uint32_t tool_id, double x, double y, double z) {
  Tissued__V1__Vec3 p = TISSUED__V1__VEC3__INIT;
  p.x = x;
  p.y = y;
  p.z = z;
  Tissued__V1__Quat q = TISSUED__V1__QUAT__INIT;
  q.w = 1;
  Tissued__V1__ToolPose tp = TISSUED__V1__TOOL_POSE__INIT;
  tp.tool_id = tool_id;
  tp.position = &p;
  tp.orientation = &q;
  tp.seq = c->next_rid;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = c->next_rid++;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_POSE;
  env.tool_pose = &tp;
  return rc_send(c, &env);
}

long rc_rss_kib(int pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}
