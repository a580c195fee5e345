/*
 * tissueclient.c: libtissueclient (see tissueclient.h). One TCP socket per
 * client, length-prefixed Envelopes (proto/ts_framing.h), protobuf-c messages
 * and the q1 frame codec (proto/ts_codec.h). Requests block on poll() until
 * the Envelope with their request_id arrives; everything else that arrives
 * meanwhile goes through the same dispatcher as tc_poll().
 */
#include "tissueclient.h"
#include "tissueclient_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../server/core/ts_error.h"
#include "tissue.pb-c.h"
#include "ts_codec.h"
#include "ts_codec_frame.h"
#include "ts_framing.h"

typedef Tissued__V1__Envelope Envelope;

#define TC_MAX_MESSAGE (64u << 20)  /* largest message accepted from a server */
#define TC_READ_CHUNK 65536
#define TC_MAX_READS_PER_POLL 64    /* bounds one tc_poll under a flood */
#define TC_DEFAULT_TIMEOUT_MS 10000

struct tc_client {
  int fd;
  char tool_meshes[TC_MAX_TOOL_MESHES][32]; /* HelloReply.tool_meshes */
  uint32_t n_tool_meshes;
  ts_framer framer;
  int broken;                 /* closed by the peer or unusable */
  int in_dispatch;            /* inside a callback: no re-entry */
  int timeout_ms;
  uint64_t next_rid;
  uint64_t pose_seq;
  uint64_t client_id;
  char err[512];
  tc_tokens tokens;           /* of the last session created */
  int have_tokens;

  tc_force_cb force_cb;
  void *force_ud;
  tc_force force;             /* the newest force message */
  int have_force;
  tc_frame_cb frame_cb;
  void *frame_ud;
  tc_error_cb error_cb;
  void *error_ud;

  uint64_t wait_rid;          /* request awaiting its reply, 0 = none */
  Envelope *reply;            /* its reply once arrived */
  int pending_err;            /* decode/protocol problem seen while dispatching */

  /* the decoded tissue */
  int have_state;
  int desync;                 /* a frame could not be applied; wait for a keyframe */
  uint64_t last_seq;
  uint32_t n;
  size_t cap;                 /* vertices allocated */
  int32_t (*q)[3];
  int32_t (*scratch)[3];      /* keyframes decode here, then swap */
  double (*pos)[3];
  double quantum;
  uint32_t topo_vertices;     /* vertex count the topology is for */
  uint32_t *tris;
  uint32_t n_tris;
  uint32_t *layer_counts;
  uint32_t n_layers;
  char **layer_names;
  tc_tool *tools;
  uint32_t tools_cap;
  tc_frame frame;
  ts_codec_ctx *codec;        /* decoding scratch and zstd context, made on first use */
};

/* ---- small helpers ----------------------------------------------------------- */

static int fail(tc_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(tc_client *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  return code;
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int64_t now_ms(void) { return (int64_t)(now_us() / 1000u); }

uint64_t tc_now_us(void) { return now_us(); }

/* Reports a problem in the server's data to the error callback and keeps it
 * for tc_poll's return value. */
static void report(tc_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(tc_client *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  if (!c->pending_err) c->pending_err = code;
  if (c->error_cb) c->error_cb(c->error_ud, code, ts_err_name(code), c->err, 0);
}

/* ---- sending ------------------------------------------------------------------ */

static int write_all(tc_client *c, const uint8_t *p, size_t n) {
  int64_t deadline = now_ms() + c->timeout_ms;
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int64_t left = deadline - now_ms();
      if (left <= 0) return fail(c, TS_EIO, "sending timed out after %d ms", c->timeout_ms);
      struct pollfd pf = {.fd = c->fd, .events = POLLOUT};
      if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
        return fail(c, TS_EIO, "poll: %s", strerror(errno));
      continue;
    }
    c->broken = 1;
    return fail(c, TS_EIO, "send: %s", w < 0 ? strerror(errno) : "connection closed");
  }
  return 0;
}

static int send_env(tc_client *c, const Envelope *env) {
  if (c->broken) return fail(c, TS_EIO, "the connection is closed");
  size_t len = tissued__v1__envelope__get_packed_size(env);
  if (len > TC_MAX_MESSAGE) return fail(c, TS_ETOOBIG, "message of %zu bytes is too big", len);
  uint8_t stackbuf[512];
  uint8_t *buf = len + 4 <= sizeof stackbuf ? stackbuf : malloc(len + 4);
  if (!buf) return fail(c, TS_ENOMEM, "out of memory");
  ts_frame_header(buf, (uint32_t)len);
  tissued__v1__envelope__pack(env, buf + 4);
  int rc = write_all(c, buf, len + 4);
  if (buf != stackbuf) free(buf);
  return rc;
}

/* ---- frames ------------------------------------------------------------------- */

static int ensure_vertices(tc_client *c, uint32_t n) {
  if (n <= c->cap && c->q) return 0;
  size_t cap = n ? n : 1;
  int32_t (*q)[3] = malloc(cap * sizeof *q);
  int32_t (*s)[3] = malloc(cap * sizeof *s);
  double (*p)[3] = malloc(cap * sizeof *p);
  if (!q || !s || !p) {
    free(q);
    free(s);
    free(p);
    return TS_ENOMEM;
  }
  if (c->q && c->n) memcpy(q, c->q, (size_t)c->n * sizeof *q);
  free(c->q);
  free(c->scratch);
  free(c->pos);
  c->q = q;
  c->scratch = s;
  c->pos = p;
  c->cap = cap;
  return 0;
}

static void free_topology(tc_client *c) {
  free(c->tris);
  free(c->layer_counts);
  for (uint32_t i = 0; i < c->n_layers; i++) free(c->layer_names[i]);
  free(c->layer_names);
  c->tris = NULL;
  c->layer_counts = NULL;
  c->layer_names = NULL;
  c->n_tris = 0;
  c->n_layers = 0;
  c->topo_vertices = 0;
}

/* Validates and copies a keyframe's topology for n vertices. */
static int take_topology(tc_client *c, const Tissued__V1__Topology *t, uint32_t n) {
  if (t->vertex_count != n) {
    report(c, TS_EDECODE, "frame topology is for %u vertices, the frame has %u",
           t->vertex_count, n);
    return TS_EDECODE;
  }
  if (t->n_triangles % 3 != 0) {
    report(c, TS_EDECODE, "topology has %zu triangle indices, not a multiple of 3",
           t->n_triangles);
    return TS_EDECODE;
  }
  for (size_t i = 0; i < t->n_triangles; i++) {
    if (t->triangles[i] >= n) {
      report(c, TS_EDECODE, "triangle index %u out of range (vertices: %u)", t->triangles[i], n);
      return TS_EDECODE;
    }
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < t->n_layer_triangle_counts; i++) sum += t->layer_triangle_counts[i];
  if (t->n_layer_triangle_counts && sum != t->n_triangles / 3) {
    report(c, TS_EDECODE, "layer triangle counts add up to %llu, the topology has %zu",
           (unsigned long long)sum, t->n_triangles / 3);
    return TS_EDECODE;
  }
  free_topology(c);
  size_t nl = t->n_layer_triangle_counts;
  c->tris = malloc((t->n_triangles ? t->n_triangles : 1) * sizeof *c->tris);
  c->layer_counts = malloc((nl ? nl : 1) * sizeof *c->layer_counts);
  c->layer_names = calloc(nl ? nl : 1, sizeof *c->layer_names);
  if (!c->tris || !c->layer_counts || !c->layer_names) {
    free_topology(c);
    return fail(c, TS_ENOMEM, "out of memory for the topology");
  }
  c->n_layers = (uint32_t)nl; /* set before the names so free_topology frees them */
  /* a Topology with no triangles (or no layers) has NULL arrays, which
   * memcpy may not be given even for 0 bytes (found by fuzz_client) */
  if (t->n_triangles) memcpy(c->tris, t->triangles, t->n_triangles * sizeof *c->tris);
  if (nl) memcpy(c->layer_counts, t->layer_triangle_counts, nl * sizeof *c->layer_counts);
  for (size_t i = 0; i < nl; i++) {
    const char *name = i < t->n_layer_names && t->layer_names[i] ? t->layer_names[i] : "";
    c->layer_names[i] = strdup(name);
    if (!c->layer_names[i]) {
      free_topology(c);
      return fail(c, TS_ENOMEM, "out of memory for the topology");
    }
  }
  c->n_tris = (uint32_t)(t->n_triangles / 3);
  c->topo_vertices = n;
  return 0;
}

static void vec3(const Tissued__V1__Vec3 *v, double out[3]) {
  out[0] = v ? v->x : 0;
  out[1] = v ? v->y : 0;
  out[2] = v ? v->z : 0;
}

static int take_tools(tc_client *c, const Tissued__V1__Frame *f) {
  if (f->n_tools > c->tools_cap) {
    tc_tool *t = realloc(c->tools, f->n_tools * sizeof *t);
    if (!t) return fail(c, TS_ENOMEM, "out of memory for tools");
    c->tools = t;
    c->tools_cap = (uint32_t)f->n_tools;
  }
  for (size_t i = 0; i < f->n_tools; i++) {
    const Tissued__V1__ToolState *s = f->tools[i];
    tc_tool *t = &c->tools[i];
    memset(t, 0, sizeof *t);
    t->tool_id = s->tool_id;
    t->last_pose_seq = s->last_pose_seq;
    t->last_client_time_us = s->last_client_time_us;
    vec3(s->force, t->force);
    vec3(s->position, t->position);
    t->orientation[0] = s->orientation ? s->orientation->w : 1;
    t->orientation[1] = s->orientation ? s->orientation->x : 0;
    t->orientation[2] = s->orientation ? s->orientation->y : 0;
    t->orientation[3] = s->orientation ? s->orientation->z : 0;
    t->radius = s->radius;
  }
  return 0;
}

static int apply_keyframe(tc_client *c, const Tissued__V1__Frame *f) {
  uint32_t n = f->vertex_count;
  /* every vertex takes at least 3 payload bytes: refuse absurd counts before
   * allocating for them */
  if (ts_codec_check_keyframe(ts_frame_codec(f), f->payload.data, f->payload.len, n)) {
    report(c, TS_EDECODE, "keyframe %llu claims %u vertices in %zu payload bytes",
           (unsigned long long)f->seq, n, f->payload.len);
    return TS_EDECODE;
  }
  if (ensure_vertices(c, n)) return fail(c, TS_ENOMEM, "out of memory for %u vertices", n);
  if (!c->codec && !(c->codec = ts_codec_ctx_new())) return fail(c, TS_ENOMEM, "out of memory");
  if (ts_codec_decode(c->codec, ts_frame_codec(f), 1, f->payload.data, f->payload.len, n, c->scratch, NULL) != 0) {
    report(c, TS_EDECODE, "keyframe %llu payload does not decode", (unsigned long long)f->seq);
    return TS_EDECODE;
  }
  if (f->topology) {
    int rc = take_topology(c, f->topology, n);
    if (rc) return rc;
  } else if (c->topo_vertices != n) {
    free_topology(c); /* the old one does not fit; the server sends a new one with changes */
  }
  int32_t (*t)[3] = c->q;
  c->q = c->scratch;
  c->scratch = t;
  c->n = n;
  c->frame.changed = n;
  return 0;
}

static int apply_delta(tc_client *c, const Tissued__V1__Frame *f) {
  if (!c->have_state)
    return TS_EPROTOCOL; /* reported by the caller */
  if (f->baseline_seq != c->last_seq || f->vertex_count != c->n || f->quantum != c->quantum)
    return TS_EPROTOCOL;
  uint32_t changed = 0;
  if (!c->codec && !(c->codec = ts_codec_ctx_new())) return fail(c, TS_ENOMEM, "out of memory");
  if (ts_codec_decode(c->codec, ts_frame_codec(f), 0, f->payload.data, f->payload.len, c->n, c->q, &changed) != 0) {
    report(c, TS_EDECODE, "delta frame %llu payload does not decode",
           (unsigned long long)f->seq);
    return TS_EDECODE;
  }
  c->frame.changed = changed;
  return 0;
}

static void handle_frame(tc_client *c, const Tissued__V1__Frame *f, size_t bytes) {
  if (!(f->quantum > 0) || !isfinite(f->quantum)) {
    report(c, TS_EDECODE, "frame %llu has quantum %g", (unsigned long long)f->seq,
           (double)f->quantum);
    return;
  }
  int rc;
  if (f->keyframe) {
    rc = apply_keyframe(c, f);
    if (rc) {
      c->desync = 1; /* the deltas that follow cannot apply either */
      return;
    }
    c->have_state = 1;
    c->desync = 0;
  } else {
    if (c->desync) return; /* already reported; a keyframe repairs it */
    rc = apply_delta(c, f);
    if (rc) {
      if (rc == TS_EPROTOCOL) {
        if (!c->have_state)
          report(c, TS_EPROTOCOL, "delta frame %llu arrived before any keyframe",
                 (unsigned long long)f->seq);
        else
          report(c, TS_EPROTOCOL,
                 "delta frame %llu (baseline %llu, %u vertices, quantum %g) does not apply to "
                 "frame %llu (%u vertices, quantum %g)",
                 (unsigned long long)f->seq, (unsigned long long)f->baseline_seq,
                 f->vertex_count, (double)f->quantum, (unsigned long long)c->last_seq, c->n,
                 c->quantum);
      }
      c->desync = 1;
      return;
    }
  }
  c->last_seq = f->seq;
  c->quantum = f->quantum;
  for (uint32_t i = 0; i < c->n; i++)
    for (int a = 0; a < 3; a++) c->pos[i][a] = (double)c->q[i][a] * c->quantum;
  if (take_tools(c, f)) {
    /* out of memory: the vertex arrays may have moved under c->frame, so
     * it is not shown (tc_last_frame NULL) until the next keyframe */
    c->desync = 1;
    return;
  }

  tc_frame *o = &c->frame;
  o->session = f->session_id;
  o->seq = f->seq;
  o->baseline_seq = f->keyframe ? 0 : f->baseline_seq;
  o->sim_time = f->sim_time;
  o->keyframe = f->keyframe ? 1 : 0;
  o->vertex_count = c->n;
  o->quantum = c->quantum;
  o->q = (const int32_t(*)[3])c->q;
  o->positions = (const double(*)[3])c->pos;
  o->n_triangles = c->n_tris;
  o->triangles = c->tris;
  o->n_layers = c->n_layers;
  o->layer_triangle_counts = c->layer_counts;
  o->layer_names = (const char *const *)c->layer_names;
  o->n_tools = (uint32_t)f->n_tools;
  o->tools = c->tools;
  o->flags = f->flags;
  o->bytes = bytes;
  if (c->frame_cb) c->frame_cb(c->frame_ud, o);
}

/* ---- receiving ------------------------------------------------------------------ */

static void vec3_get(const Tissued__V1__Vec3 *v, double out[3]) {
  out[0] = v ? v->x : 0;
  out[1] = v ? v->y : 0;
  out[2] = v ? v->z : 0;
}

static void handle_force(tc_client *c, const Tissued__V1__ToolForce *m) {
  tc_force *f = &c->force;
  f->session = m->session_id;
  f->tool_id = m->tool_id;
  f->step = m->step;
  f->sim_time = m->sim_time;
  vec3_get(m->force, f->force);
  vec3_get(m->torque, f->torque);
  f->last_pose_seq = m->last_pose_seq;
  f->last_client_time_us = m->last_client_time_us;
  f->contacts = m->contacts;
  c->have_force = 1;
  if (c->force_cb) c->force_cb(c->force_ud, f);
}

static int on_message(void *ud, const uint8_t *msg, size_t len) {
  tc_client *c = ud;
  Envelope *env = tissued__v1__envelope__unpack(NULL, len, msg);
  if (!env) {
    report(c, TS_EDECODE, "a message of %zu bytes from the server does not decode", len);
    return 0;
  }
  if (c->wait_rid && env->request_id == c->wait_rid && !c->reply &&
      env->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME) {
    c->reply = env; /* the waiting request frees it */
    return 0;
  }
  switch (env->body_case) {
  case TISSUED__V1__ENVELOPE__BODY_FRAME:
    handle_frame(c, env->frame, len);
    break;
  case TISSUED__V1__ENVELOPE__BODY_TOOL_FORCE:
    handle_force(c, env->tool_force);
    break;
  case TISSUED__V1__ENVELOPE__BODY_ERROR: {
    const Tissued__V1__Error *e = env->error;
    int code = e->code > 0 ? -e->code : TS_EPROTOCOL;
    snprintf(c->err, sizeof c->err, "%s: %s", e->name && e->name[0] ? e->name : ts_err_name(code),
             e->message ? e->message : "");
    if (c->error_cb)
      c->error_cb(c->error_ud, code, e->name && e->name[0] ? e->name : ts_err_name(code),
                  e->message ? e->message : "", env->request_id);
    break;
  }
  default:
    break; /* a late reply to a request that timed out, or a newer message */
  }
  tissued__v1__envelope__free_unpacked(env, NULL);
  return 0;
}

/* Waits up to timeout_ms for data and dispatches what arrived. Returns the
 * number of reads that delivered bytes, or TS_EIO/TS_ETOOBIG when the
 * connection is gone. */
static int pump(tc_client *c, int timeout_ms) {
  if (c->broken) return fail(c, TS_EIO, "the connection is closed");
  struct pollfd pf = {.fd = c->fd, .events = POLLIN};
  int pr = poll(&pf, 1, timeout_ms);
  if (pr < 0) return errno == EINTR ? 0 : fail(c, TS_EIO, "poll: %s", strerror(errno));
  if (pr == 0) return 0;
  static const size_t chunk = TC_READ_CHUNK;
  uint8_t *buf = malloc(chunk);
  if (!buf) return fail(c, TS_ENOMEM, "out of memory");
  int reads = 0, rc = 0;
  c->in_dispatch = 1;
  for (int k = 0; k < TC_MAX_READS_PER_POLL; k++) {
    ssize_t r = recv(c->fd, buf, chunk, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (r <= 0) {
      c->broken = 1;
      rc = fail(c, TS_EIO, "%s", r == 0 ? "connection closed by the server" : strerror(errno));
      break;
    }
    reads++;
    int fr = ts_framer_feed(&c->framer, buf, (size_t)r, on_message, c);
    if (fr) {
      c->broken = 1;
      rc = fr == TS_ETOOBIG
               ? fail(c, TS_ETOOBIG, "the server announced a message over %u bytes",
                      TC_MAX_MESSAGE)
               : fail(c, fr, "reading: %s", ts_strerror(fr));
      break;
    }
    if ((size_t)r < chunk) break;
  }
  c->in_dispatch = 0;
  free(buf);
  return rc ? rc : reads;
}

int tc_poll(tc_client *c, int timeout_ms) {
  if (!c) return TS_EINVAL;
  if (c->in_dispatch) return fail(c, TS_EINVAL, "tc_poll called from a callback");
  c->pending_err = 0;
  int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  int rc;
  for (;;) {
    int left = deadline < 0 ? -1 : (int)(deadline - now_ms());
    if (left < 0 && deadline >= 0) left = 0;
    rc = pump(c, left);
    if (rc != 0 || left == 0) break;
    /* poll woke without data (EINTR): wait out the rest */
  }
  if (rc < 0) return rc;
  if (c->pending_err) return c->pending_err;
  return rc;
}

/* Sends env as a request and waits for the Envelope with its request_id.
 * Returns 0 with *reply (caller frees) of the expected case, the negated code
 * of an Error reply, or a transport error. */
static int request(tc_client *c, Envelope *env, int expect, Envelope **reply) {
  *reply = NULL;
  if (c->in_dispatch) return fail(c, TS_EINVAL, "a request was made from a callback");
  env->request_id = ++c->next_rid;
  int rc = send_env(c, env);
  if (rc) return rc;
  c->wait_rid = env->request_id;
  c->reply = NULL;
  int64_t deadline = now_ms() + c->timeout_ms;
  while (!c->reply) {
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      rc = fail(c, TS_EIO, "no reply from the server within %d ms", c->timeout_ms);
      break;
    }
    rc = pump(c, (int)left);
    if (c->reply) break;
    if (rc < 0) break;
    rc = 0;
  }
  c->wait_rid = 0;
  Envelope *r = c->reply;
  c->reply = NULL;
  if (!r) return rc ? rc : TS_EIO;
  if (r->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
    const Tissued__V1__Error *e = r->error;
    int code = e->code > 0 && e->code < 1000 ? -e->code : TS_EPROTOCOL;
    fail(c, code, "%s: %s", e->name && e->name[0] ? e->name : ts_err_name(code),
         e->message ? e->message : "");
    tissued__v1__envelope__free_unpacked(r, NULL);
    return code;
  }
  if ((int)r->body_case != expect) {
    fail(c, TS_EPROTOCOL, "unexpected reply (body %d, expected %d)", (int)r->body_case, expect);
    tissued__v1__envelope__free_unpacked(r, NULL);
    return TS_EPROTOCOL;
  }
  c->err[0] = '\0';
  *reply = r;
  return 0;
}

/* ---- connection ------------------------------------------------------------------ */

static int connect_to(tc_client *c, const char *host, int port, int timeout_ms) {
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(host, portstr, &hints, &res);
  if (gai != 0) return fail(c, TS_EIO, "%s: %s", host, gai_strerror(gai));
  int rc = fail(c, TS_EIO, "%s:%d: no address", host, port);
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
      rc = fail(c, TS_EIO, "socket: %s", strerror(errno));
      continue;
    }
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int pr;
        do pr = poll(&pf, 1, timeout_ms);
        while (pr < 0 && errno == EINTR);
        if (pr == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t l = sizeof err;
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
        }
      }
    }
    if (err == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      c->fd = fd;
      rc = 0;
      break;
    }
    close(fd);
    rc = fail(c, TS_EIO, "connecting to %s:%d: %s", host, port, strerror(err));
  }
  freeaddrinfo(res);
  return rc;
}

tc_client *tc_connect_timeout(const char *host, int port, const char *client_name,
                              int timeout_ms, char *err, size_t errcap) {
  return tc_connect_key(host, port, client_name, NULL, timeout_ms, err, errcap);
}

static tc_client *client_new(int timeout_ms) {
  tc_client *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fd = -1;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : TC_DEFAULT_TIMEOUT_MS;
  ts_framer_init(&c->framer, TC_MAX_MESSAGE);
  return c;
}

/* Hello and its HelloReply on c's connected socket. Returns c, ready, or
 * NULL (c closed) with the reason in err. */
static tc_client *say_hello(tc_client *c, const char *client_name, const char *credentials,
                            char *err, size_t errcap) {
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = TC_PROTOCOL_VERSION;
  h.client_name = (char *)(client_name ? client_name : "libtissueclient");
  h.credentials = (char *)(credentials ? credentials : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  Envelope *r = NULL;
  if (request(c, &env, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY, &r) != 0) goto fail;
  uint32_t v = r->hello_reply->protocol_version;
  c->client_id = r->hello_reply->client_id;
  for (size_t i = 0; i < r->hello_reply->n_tool_meshes && c->n_tool_meshes < TC_MAX_TOOL_MESHES; i++)
    snprintf(c->tool_meshes[c->n_tool_meshes++], sizeof c->tool_meshes[0], "%s",
             r->hello_reply->tool_meshes[i]);
  tissued__v1__envelope__free_unpacked(r, NULL);
  if (v != TC_PROTOCOL_VERSION) {
    fail(c, TS_EVERSION, "the server speaks protocol version %u, this client %d", v,
         TC_PROTOCOL_VERSION);
    goto fail;
  }
  return c;
fail:
  if (errcap) snprintf(err, errcap, "%s", c->err);
  tc_close(c);
  return NULL;
}

tc_client *tc_connect_key(const char *host, int port, const char *client_name,
                          const char *credentials, int timeout_ms, char *err, size_t errcap) {
  if (errcap) err[0] = '\0';
  if (!host || port <= 0 || port > 65535) {
    if (errcap) snprintf(err, errcap, "bad address %s:%d", host ? host : "(null)", port);
    return NULL;
  }
  tc_client *c = client_new(timeout_ms);
  if (!c) {
    if (errcap) snprintf(err, errcap, "out of memory");
    return NULL;
  }
  if (connect_to(c, host, port, c->timeout_ms) != 0) {
    if (errcap) snprintf(err, errcap, "%s", c->err);
    tc_close(c);
    return NULL;
  }
  return say_hello(c, client_name, credentials, err, errcap);
}

tc_client *tc__connect_fd(int fd, const char *client_name, const char *credentials,
                          int timeout_ms, char *err, size_t errcap) {
  if (errcap) err[0] = '\0';
  tc_client *c = client_new(timeout_ms);
  if (!c) {
    close(fd);
    if (errcap) snprintf(err, errcap, "out of memory");
    return NULL;
  }
  c->fd = fd;
  return say_hello(c, client_name, credentials, err, errcap);
}

tc_client *tc_connect(const char *host, int port, const char *client_name, char *err,
                      size_t errcap) {
  return tc_connect_timeout(host, port, client_name, 0, err, errcap);
}

void tc_close(tc_client *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  ts_framer_free(&c->framer);
  if (c->reply) tissued__v1__envelope__free_unpacked(c->reply, NULL);
  free(c->q);
  free(c->scratch);
  free(c->pos);
  free_topology(c);
  free(c->tools);
  ts_codec_ctx_free(c->codec);
  free(c);
}

int tc_fd(const tc_client *c) { return c->fd; }
uint32_t tc_tool_meshes(const tc_client *c, const char **names, uint32_t cap) {
  for (uint32_t i = 0; i < c->n_tool_meshes && i < cap; i++) names[i] = c->tool_meshes[i];
  return c->n_tool_meshes;
}

uint64_t tc_client_id(const tc_client *c) { return c->client_id; }
const char *tc_last_error(const tc_client *c) { return c ? c->err : "no client"; }
void tc_set_timeout(tc_client *c, int timeout_ms) {
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : TC_DEFAULT_TIMEOUT_MS;
}
uint64_t tc_pose_seq(const tc_client *c) { return c->pose_seq; }

void tc_set_force_cb(tc_client *c, tc_force_cb cb, void *ud) {
  c->force_cb = cb;
  c->force_ud = ud;
}

int tc_latest_force(const tc_client *c, tc_force *out) {
  if (!c->have_force) return 0;
  *out = c->force;
  return 1;
}

void tc_set_frame_cb(tc_client *c, tc_frame_cb cb, void *ud) {
  c->frame_cb = cb;
  c->frame_ud = ud;
}

void tc_set_error_cb(tc_client *c, tc_error_cb cb, void *ud) {
  c->error_cb = cb;
  c->error_ud = ud;
}

const tc_frame *tc_last_frame(const tc_client *c) {
  return c->have_state && !c->desync ? &c->frame : NULL;
}

/* ---- requests --------------------------------------------------------------------- */

/* Sends a CreateSession and reads its SessionCreated (counts may be NULL). */
static int create_session(tc_client *c, Tissued__V1__CreateSession *m, uint32_t *session_id,
                          uint32_t *vertex_count, uint32_t *triangle_count) {
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  env.create_session = m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, &r);
  if (rc) return rc;
  if (session_id) *session_id = r->session_created->session_id;
  if (vertex_count) *vertex_count = r->session_created->vertex_count;
  if (triangle_count) *triangle_count = r->session_created->triangle_count;
  const Tissued__V1__SessionCreated *sc = r->session_created;
  memset(&c->tokens, 0, sizeof c->tokens);
  snprintf(c->tokens.observer, sizeof c->tokens.observer, "%s",
           sc->observer_token ? sc->observer_token : "");
  for (size_t i = 0; i < sc->n_controller_tokens && i < TC_MAX_TOOL_TOKENS; i++)
    snprintf(c->tokens.controller[i], sizeof c->tokens.controller[i], "%s",
             sc->controller_tokens[i] ? sc->controller_tokens[i] : "");
  c->tokens.n_controller = (uint32_t)(sc->n_controller_tokens < TC_MAX_TOOL_TOKENS
                                          ? sc->n_controller_tokens
                                          : TC_MAX_TOOL_TOKENS);
  c->have_tokens = 1;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_session_tokens(const tc_client *c, tc_tokens *out) {
  if (!c->have_tokens) return 0;
  *out = c->tokens;
  return 1;
}

int tc_create_session(tc_client *c, const char *builtin, uint32_t *session_id,
                      uint32_t *vertex_count, uint32_t *triangle_count) {
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = (char *)(builtin ? builtin : "stomach-patch");
  return create_session(c, &m, session_id, vertex_count, triangle_count);
}

int tc_create_session_solver(tc_client *c, const char *builtin, int solver,
                             uint32_t *session_id, uint32_t *vertex_count,
                             uint32_t *triangle_count) {
  return tc_create_session_substeps(c, builtin, solver, 0, session_id, vertex_count,
                                    triangle_count);
}

int tc_create_session_substeps(tc_client *c, const char *builtin, int solver, uint32_t substeps,
                               uint32_t *session_id, uint32_t *vertex_count,
                               uint32_t *triangle_count) {
  if (solver != TC_SOLVER_DEFAULT && solver != TC_SOLVER_MASS_SPRING && solver != TC_SOLVER_XPBD &&
      solver != TC_SOLVER_QUASI_STATIC)
    return fail(c, TS_EINVAL, "solver must be TC_SOLVER_DEFAULT, _MASS_SPRING, _XPBD or _QUASI_STATIC");
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = (char *)(builtin ? builtin : "stomach-patch");
  m.solver = (Tissued__V1__Solver)solver;
  m.substeps = substeps;
  return create_session(c, &m, session_id, vertex_count, triangle_count);
}

/* ResetSession / EndSession share one shape: a session id, answered by Ack. */
static int session_control(tc_client *c, uint32_t session_id, int end) {
  Tissued__V1__ResetSession reset = TISSUED__V1__RESET_SESSION__INIT;
  Tissued__V1__EndSession endm = TISSUED__V1__END_SESSION__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  if (end) {
    endm.session_id = session_id;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_END_SESSION;
    env.end_session = &endm;
  } else {
    reset.session_id = session_id;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_RESET_SESSION;
    env.reset_session = &reset;
  }
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_refine(tc_client *c, const tc_refine_params *p, tc_refined *out) {
  if (!p) return fail(c, TS_EINVAL, "no refinement parameters");
  Tissued__V1__RefineRegion m = TISSUED__V1__REFINE_REGION__INIT;
  Tissued__V1__Vec3 o = TISSUED__V1__VEC3__INIT, d = TISSUED__V1__VEC3__INIT;
  m.session_id = p->session_id;
  m.method = p->method == TC_REFINE_LEB ? TISSUED__V1__REFINE_REGION__METHOD__LEB
                                        : TISSUED__V1__REFINE_REGION__METHOD__LOOP;
  m.n_triangles = p->triangles ? p->n_triangles : 0;
  m.triangles = (uint32_t *)p->triangles;
  if (!m.n_triangles) {
    o.x = p->ray_origin[0], o.y = p->ray_origin[1], o.z = p->ray_origin[2];
    d.x = p->ray_direction[0], d.y = p->ray_direction[1], d.z = p->ray_direction[2];
    m.ray_origin = &o;
    m.ray_direction = &d;
  }
  m.range = (float)p->range;
  m.max_edge = (float)p->max_edge;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_REFINE_REGION;
  env.refine_region = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_REFINED, &r);
  if (rc) return rc;
  if (out) {
    const Tissued__V1__Refined *x = r->refined;
    out->vertex_count = x->vertex_count;
    out->triangle_count = x->triangle_count;
    out->selected_triangles = x->selected_triangles;
    out->new_vertices = x->new_vertices;
    out->step = x->step;
    out->millis = x->millis;
  }
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_reset_session(tc_client *c, uint32_t session_id) { return session_control(c, session_id, 0); }

int tc_end_session(tc_client *c, uint32_t session_id) { return session_control(c, session_id, 1); }

int tc_join_ex(tc_client *c, const tc_join_params *p, tc_joined *out) {
  if (!p || (p->role != TC_ROLE_OBSERVER && p->role != TC_ROLE_CONTROLLER))
    return fail(c, TS_EINVAL, "role must be TC_ROLE_OBSERVER or TC_ROLE_CONTROLLER");
  if (!isfinite(p->radius) || p->radius < 0)
    return fail(c, TS_ERANGE, "tool radius must be a finite number >= 0");
  if (p->tool_kind != TC_TOOL_SPHERE && p->tool_kind != TC_TOOL_CAPSULE &&
      p->tool_kind != TC_TOOL_JAWS && p->tool_kind != TC_TOOL_MESH)
    return fail(c, TS_EINVAL,
                "tool_kind must be TC_TOOL_SPHERE, TC_TOOL_CAPSULE, TC_TOOL_JAWS or TC_TOOL_MESH");
  if (p->tool_kind == TC_TOOL_MESH && (!p->tool_mesh || !p->tool_mesh[0]))
    return fail(c, TS_EINVAL, "a mesh tool needs tool_mesh, the name of one of the server's");
  if (!isfinite(p->length) || p->length < 0)
    return fail(c, TS_ERANGE, "capsule or jaw length must be a finite number >= 0");
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.kind = p->tool_kind == TC_TOOL_CAPSULE ? TISSUED__V1__TOOL_SHAPE__KIND__CAPSULE
               : p->tool_kind == TC_TOOL_JAWS  ? TISSUED__V1__TOOL_SHAPE__KIND__JAWS
               : p->tool_kind == TC_TOOL_MESH  ? TISSUED__V1__TOOL_SHAPE__KIND__MESH
                                               : TISSUED__V1__TOOL_SHAPE__KIND__SPHERE;
  shape.radius = (float)p->radius;
  shape.length = p->tool_kind == TC_TOOL_SPHERE ? 0 : (float)p->length;
  shape.mesh = (char *)(p->tool_kind == TC_TOOL_MESH ? p->tool_mesh : "");
  Tissued__V1__Friction fr = TISSUED__V1__FRICTION__INIT;
  if (p->friction) { /* the server validates the pair (TS_EINVAL) */
    fr.mu_static = (float)p->mu_static;
    fr.mu_kinetic = (float)p->mu_kinetic;
    shape.friction = &fr;
  }
  Tissued__V1__JoinSession m = TISSUED__V1__JOIN_SESSION__INIT;
  m.session_id = p->session_id;
  m.role = p->role == TC_ROLE_CONTROLLER ? TISSUED__V1__ROLE__ROLE_CONTROLLER
                                         : TISSUED__V1__ROLE__ROLE_OBSERVER;
  m.tool_id = p->tool_id;
  m.tool = p->role == TC_ROLE_CONTROLLER ? &shape : NULL;
  m.frame_rate = p->frame_rate;
  m.force_rate = p->force_rate;
  m.token = (char *)(p->token ? p->token : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  env.join_session = &m;
  /* a new session's frames start with a keyframe */
  c->have_state = 0;
  c->desync = 0;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_JOINED, &r);
  if (rc) return rc;
  c->have_force = 0;
  if (out) {
    const Tissued__V1__Joined *j = r->joined;
    out->session_id = j->session_id;
    out->role = j->role == TISSUED__V1__ROLE__ROLE_CONTROLLER ? TC_ROLE_CONTROLLER
                                                             : TC_ROLE_OBSERVER;
    out->tool_id = j->tool_id;
    out->dt = j->dt;
    out->frame_rate = j->frame_rate;
    out->vertex_count = j->vertex_count;
    out->force_rate = j->force_rate;
  }
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_join(tc_client *c, uint32_t session_id, int role, uint32_t tool_id, double radius,
            uint32_t *assigned_tool_id) {
  tc_join_params p = {.session_id = session_id, .role = role, .tool_id = tool_id,
                      .radius = radius};
  tc_joined j = {0};
  int rc = tc_join_ex(c, &p, &j);
  if (rc == 0 && assigned_tool_id) *assigned_tool_id = j.tool_id;
  return rc;
}

int tc_send_pose(tc_client *c, uint32_t tool_id, const double pos[3], const double quat[4],
                 double jaw) {
  Tissued__V1__Vec3 p = TISSUED__V1__VEC3__INIT;
  p.x = (float)pos[0];
  p.y = (float)pos[1];
  p.z = (float)pos[2];
  Tissued__V1__Quat q = TISSUED__V1__QUAT__INIT;
  q.w = (float)(quat ? quat[0] : 1);
  q.x = (float)(quat ? quat[1] : 0);
  q.y = (float)(quat ? quat[2] : 0);
  q.z = (float)(quat ? quat[3] : 0);
  Tissued__V1__ToolPose m = TISSUED__V1__TOOL_POSE__INIT;
  m.tool_id = tool_id;
  m.seq = c->pose_seq + 1;
  m.client_time_us = now_us();
  m.position = &p;
  m.orientation = &q;
  m.jaw = (float)jaw;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = ++c->next_rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_POSE;
  env.tool_pose = &m;
  int rc = send_env(c, &env);
  if (rc == 0) c->pose_seq = m.seq;
  return rc;
}

int tc_list_sessions(tc_client *c, tc_session_info **out, size_t *n) {
  *out = NULL;
  *n = 0;
  Tissued__V1__ListSessions m = TISSUED__V1__LIST_SESSIONS__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_SESSIONS;
  env.list_sessions = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_SESSION_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__SessionList *l = r->session_list;
  tc_session_info *v = calloc(l->n_sessions ? l->n_sessions : 1, sizeof *v);
  if (!v) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return fail(c, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < l->n_sessions; i++) {
    const Tissued__V1__SessionInfo *s = l->sessions[i];
    v[i].session_id = s->session_id;
    snprintf(v[i].name, sizeof v[i].name, "%s", s->name ? s->name : "");
    snprintf(v[i].tissue, sizeof v[i].tissue, "%s", s->tissue ? s->tissue : "");
    v[i].solver = s->solver;
    v[i].clients = s->clients;
    v[i].vertex_count = s->vertex_count;
  }
  *out = v;
  *n = l->n_sessions;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_ping(tc_client *c, uint64_t *rtt_us) {
  Tissued__V1__Ping m = TISSUED__V1__PING__INIT;
  uint64_t t0 = now_us();
  m.client_time_us = t0;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_PING;
  env.ping = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_PONG, &r);
  if (rc) return rc;
  int ok = r->pong->client_time_us == t0;
  tissued__v1__envelope__free_unpacked(r, NULL);
  if (!ok) return fail(c, TS_EPROTOCOL, "Pong does not echo the Ping's client time");
  if (rtt_us) *rtt_us = now_us() - t0;
  return 0;
}

/* ---- mesh upload ------------------------------------------------------------------ */

int tc_create_session_mesh(tc_client *c, int format, const void *bytes, size_t len, double scale,
                           const tc_layer *layers, size_t n_layers, const char *name,
                           uint32_t *session_id, uint32_t *vertex_count,
                           uint32_t *triangle_count) {
  if (format != TC_MESH_OBJ && format != TC_MESH_STL && format != TC_MESH_PLY)
    return fail(c, TS_EINVAL, "mesh format must be TC_MESH_OBJ, TC_MESH_STL or TC_MESH_PLY");
  if (!bytes && len) return fail(c, TS_EINVAL, "no mesh bytes");
  if (n_layers > 64 || (n_layers && !layers)) return fail(c, TS_EINVAL, "bad layer list");
  /* NaN and out-of-range scales and thicknesses go to the server as they
   * are: it is the one that decides, and says why */
  Tissued__V1__MeshUpload up = TISSUED__V1__MESH_UPLOAD__INIT;
  up.format = (Tissued__V1__MeshUpload__Format)format;
  up.data.data = (uint8_t *)bytes;
  up.data.len = len;
  up.scale = (float)scale;
  Tissued__V1__LayerSpec specs[64];
  Tissued__V1__LayerSpec *ptrs[64];
  Tissued__V1__Vec3 fibres[64];
  for (size_t i = 0; i < n_layers; i++) {
    tissued__v1__layer_spec__init(&specs[i]);
    specs[i].name = (char *)(layers[i].name ? layers[i].name : "");
    specs[i].thickness = (float)layers[i].thickness;
    specs[i].material = (char *)(layers[i].material ? layers[i].material : "");
    if (layers[i].fibre[0] != 0 || layers[i].fibre[1] != 0 || layers[i].fibre[2] != 0) {
      tissued__v1__vec3__init(&fibres[i]);
      fibres[i].x = (float)layers[i].fibre[0];
      fibres[i].y = (float)layers[i].fibre[1];
      fibres[i].z = (float)layers[i].fibre[2];
      specs[i].fibre_direction = &fibres[i];
    }
    ptrs[i] = &specs[i];
  }
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_MESH;
  m.mesh = &up;
  m.n_layers = n_layers;
  m.layers = n_layers ? ptrs : NULL;
  m.name = (char *)(name ? name : "");
  return create_session(c, &m, session_id, vertex_count, triangle_count);
}

/* ---- learned models --------------------------------------------------------------- */

static void take_model_info(tc_model_info *o, const Tissued__V1__ModelInfo *m) {
  memset(o, 0, sizeof *o);
  if (!m) return;
  o->model_id = m->model_id;
  snprintf(o->tissue, sizeof o->tissue, "%s", m->tissue ? m->tissue : "");
  snprintf(o->material, sizeof o->material, "%s", m->material ? m->material : "");
  snprintf(o->kind, sizeof o->kind, "%s", m->kind ? m->kind : "");
  o->version = m->version;
  o->samples = m->samples;
  o->loss = m->loss;
  o->heldout_rmse = m->heldout_rmse;
  o->heldout_max = m->heldout_max;
  o->created = m->created;
}

int tc_list_models(tc_client *c, const char *tissue, tc_model_info **out, size_t *n) {
  *out = NULL;
  *n = 0;
  Tissued__V1__ListModels m = TISSUED__V1__LIST_MODELS__INIT;
  m.tissue = (char *)(tissue ? tissue : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_MODELS;
  env.list_models = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_MODEL_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__ModelList *l = r->model_list;
  tc_model_info *v = calloc(l->n_models ? l->n_models : 1, sizeof *v);
  if (!v) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return fail(c, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < l->n_models; i++) take_model_info(&v[i], l->models[i]);
  *out = v;
  *n = l->n_models;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_export_model(tc_client *c, int64_t model_id, char **document, tc_model_info *info) {
  *document = NULL;
  Tissued__V1__ExportModel m = TISSUED__V1__EXPORT_MODEL__INIT;
  m.model_id = model_id;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_EXPORT_MODEL;
  env.export_model = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_MODEL_DOCUMENT, &r);
  if (rc) return rc;
  const Tissued__V1__ModelDocument *d = r->model_document;
  if (!d->document || !d->document[0]) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return fail(c, TS_EPROTOCOL, "ModelDocument without a document");
  }
  *document = strdup(d->document);
  if (info) take_model_info(info, d->info);
  tissued__v1__envelope__free_unpacked(r, NULL);
  return *document ? 0 : fail(c, TS_ENOMEM, "out of memory");
}

int tc_import_model(tc_client *c, const char *document, tc_model_info *info) {
  if (!document) return fail(c, TS_EINVAL, "no document");
  Tissued__V1__ImportModel m = TISSUED__V1__IMPORT_MODEL__INIT;
  m.document = (char *)document;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_IMPORT_MODEL;
  env.import_model = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_MODEL_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__ModelList *l = r->model_list;
  if (l->n_models != 1) {
    size_t n = l->n_models; /* read before the reply is freed (found by fuzz_client) */
    tissued__v1__envelope__free_unpacked(r, NULL);
    return fail(c, TS_EPROTOCOL, "ImportModel answered with %zu models, not 1", n);
  }
  if (info) take_model_info(info, l->models[0]);
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_delete_model(tc_client *c, int64_t model_id) {
  Tissued__V1__DeleteModel m = TISSUED__V1__DELETE_MODEL__INIT;
  m.model_id = model_id;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_DELETE_MODEL;
  env.delete_model = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_use_shortcut(tc_client *c, uint32_t session_id, int learned, int64_t model_id) {
  Tissued__V1__UseShortcut m = TISSUED__V1__USE_SHORTCUT__INIT;
  m.session_id = session_id;
  m.learned = learned ? 1 : 0;
  m.model_id = model_id;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_USE_SHORTCUT;
  env.use_shortcut = &m;
  Envelope *r;
  int rc = request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}
