/*
 * tissueclient.c: libtissueclient's messages (see tissueclient.h): sending
 * Envelopes on the client's TCP socket, length-prefixed (proto/ts_framing.h),
 * receiving and dispatching them (frames to tc_frames.c, forces, Errors),
 * tc_poll, and the request/reply wait every request goes through. Requests
 * block on poll() until the Envelope with their request_id arrives;
 * everything else that arrives meanwhile goes through the same dispatcher as
 * tc_poll(). The connection is made in tc_connect.c, the requests themselves
 * are in tc_sessions.c and tc_models.c.
 */
#include "tc_priv.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../server/core/ts_error.h"

/* ---- small helpers ----------------------------------------------------------- */

int tc__fail(tc_client *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  return code;
}

uint64_t tc_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t tc__now_ms(void) { return (int64_t)(tc_now_us() / 1000u); }

void tc__report(tc_client *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  if (!c->pending_err) c->pending_err = code;
  if (c->error_cb) c->error_cb(c->error_ud, code, ts_err_name(code), c->err, 0);
}

/* ---- sending ------------------------------------------------------------------ */

static int write_all(tc_client *c, const uint8_t *p, size_t n) {
  int64_t deadline = tc__now_ms() + c->timeout_ms;
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int64_t left = deadline - tc__now_ms();
      if (left <= 0) return tc__fail(c, TS_EIO, "sending timed out after %d ms", c->timeout_ms);
      struct pollfd pf = {.fd = c->fd, .events = POLLOUT};
      if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
        return tc__fail(c, TS_EIO, "poll: %s", strerror(errno));
      continue;
    }
    c->broken = 1;
    return tc__fail(c, TS_EIO, "send: %s", w < 0 ? strerror(errno) : "connection closed");
  }
  return 0;
}

int tc__send_env(tc_client *c, const Envelope *env) {
  if (c->broken) return tc__fail(c, TS_EIO, "the connection is closed");
  size_t len = tissued__v1__envelope__get_packed_size(env);
  if (len > TC_MAX_MESSAGE) return tc__fail(c, TS_ETOOBIG, "message of %zu bytes is too big", len);
  uint8_t stackbuf[512];
  uint8_t *buf = len + 4 <= sizeof stackbuf ? stackbuf : malloc(len + 4);
  if (!buf) return tc__fail(c, TS_ENOMEM, "out of memory");
  ts_frame_header(buf, (uint32_t)len);
  tissued__v1__envelope__pack(env, buf + 4);
  int rc = write_all(c, buf, len + 4);
  if (buf != stackbuf) free(buf);
  return rc;
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
  f->tool_contacts = m->tool_contacts;
  c->have_force = 1;
  if (c->force_cb) c->force_cb(c->force_ud, f);
}

static void handle_progress(tc_client *c, uint64_t rid, const Tissued__V1__TrainingProgress *m) {
  if (!c->progress_cb) return;
  tc_training_progress p;
  memset(&p, 0, sizeof p);
  p.request_id = rid;
  p.mine = c->train_acked && rid == c->train_rid;
  p.session_id = m->session_id;
  p.fraction = m->fraction;
  p.loss = m->loss;
  p.done = m->done;
  snprintf(p.error, sizeof p.error, "%s", m->error ? m->error : "");
  snprintf(p.model, sizeof p.model, "%s", m->model ? m->model : "");
  p.samples = m->samples;
  p.iterations = m->iterations;
  p.heldout_rmse = m->heldout_rmse;
  p.heldout_rel = m->heldout_rel;
  p.model_id = m->model_id;
  p.intervals = m->intervals;
  p.unconverged_intervals = m->unconverged_intervals;
  p.worst_residual = m->worst_residual;
  c->progress_cb(c->progress_ud, &p);
}

static void handle_create_progress(tc_client *c, const Tissued__V1__CreateProgress *m) {
  static const char *const names[] = {"queued", "reading", "layers", "springs", "solver",
                                      "storing"};
  if (!c->create_cb || !c->wait_rid || m->request_id != c->wait_rid) return;
  c->wait_deadline_ms = tc__now_ms() + c->timeout_ms; /* the daemon is at work */
  tc_create_progress p;
  memset(&p, 0, sizeof p);
  p.request_id = m->request_id;
  p.stage = (int)m->stage;
  p.stage_name = p.stage >= 0 && p.stage < (int)(sizeof names / sizeof names[0]) ? names[p.stage]
                                                                                  : "unknown";
  p.elapsed = m->elapsed;
  p.ahead = m->ahead;
  c->create_cb(c->create_ud, &p);
}

static int on_message(void *ud, const uint8_t *msg, size_t len) {
  tc_client *c = ud;
  Envelope *env = tissued__v1__envelope__unpack(NULL, len, msg);
  if (!env) {
    tc__report(c, TS_EDECODE, "a message of %zu bytes from the server does not decode", len);
    return 0;
  }
  /* an unasked Error is named at a close only if nothing came after it (a
   * samples-full notice an hour before a crash is not the close's reason) */
  if (env->body_case != TISSUED__V1__ENVELOPE__BODY_ERROR || env->request_id != 0)
    c->said[0] = '\0';
  if (c->wait_rid && env->request_id == c->wait_rid && !c->reply &&
      env->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME &&
      env->body_case != TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS) {
    c->reply = env; /* the waiting request frees it */
    /* the acknowledgement of a TrainShortcut: its reports come after it, maybe in the same read */
    if (c->train_waiting && env->body_case == TISSUED__V1__ENVELOPE__BODY_ACK) {
      c->train_rid = c->wait_rid;
      c->train_acked = 1;
    }
    return 0;
  }
  switch (env->body_case) {
  case TISSUED__V1__ENVELOPE__BODY_FRAME:
    tc__handle_frame(c, env->frame, len);
    break;
  case TISSUED__V1__ENVELOPE__BODY_TOOL_FORCE:
    handle_force(c, env->tool_force);
    break;
  case TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS:
    handle_progress(c, env->request_id, env->training_progress);
    break;
  case TISSUED__V1__ENVELOPE__BODY_CREATE_PROGRESS:
    handle_create_progress(c, env->create_progress);
    break;
  case TISSUED__V1__ENVELOPE__BODY_ERROR: {
    const Tissued__V1__Error *e = env->error;
    int code = e->code > 0 ? -e->code : TS_EPROTOCOL;
    snprintf(c->err, sizeof c->err, "%s: %s", e->name && e->name[0] ? e->name : ts_err_name(code),
             e->message ? e->message : "");
    if (env->request_id == 0) snprintf(c->said, sizeof c->said, "%s", c->err);
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
  if (c->broken) return tc__fail(c, TS_EIO, "the connection is closed");
  struct pollfd pf = {.fd = c->fd, .events = POLLIN};
  int pr = poll(&pf, 1, timeout_ms);
  if (pr < 0) return errno == EINTR ? 0 : tc__fail(c, TS_EIO, "poll: %s", strerror(errno));
  if (pr == 0) return 0;
  static const size_t chunk = TC_READ_CHUNK;
  uint8_t *buf = malloc(chunk);
  if (!buf) return tc__fail(c, TS_ENOMEM, "out of memory");
  int reads = 0, rc = 0;
  c->in_dispatch = 1;
  for (int k = 0; k < TC_MAX_READS_PER_POLL; k++) {
    ssize_t r = recv(c->fd, buf, chunk, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (r <= 0) {
      c->broken = 1;
      if (r == 0 && c->said[0]) /* why, when the server said (e.g. TS_ESHUTDOWN) */
        rc = tc__fail(c, TS_EIO, "connection closed by the server after %s", c->said);
      else
        rc = tc__fail(c, TS_EIO, "%s", r == 0 ? "connection closed by the server" : strerror(errno));
      break;
    }
    reads++;
    int fr = ts_framer_feed(&c->framer, buf, (size_t)r, on_message, c);
    if (fr) {
      c->broken = 1;
      rc = fr == TS_ETOOBIG
               ? tc__fail(c, TS_ETOOBIG, "the server announced a message over %u bytes",
                      TC_MAX_MESSAGE)
               : tc__fail(c, fr, "reading: %s", ts_strerror(fr));
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
  if (c->in_dispatch) return tc__fail(c, TS_EINVAL, "tc_poll called from a callback");
  c->pending_err = 0;
  int64_t deadline = timeout_ms < 0 ? -1 : tc__now_ms() + timeout_ms;
  int rc;
  for (;;) {
    int left = deadline < 0 ? -1 : (int)(deadline - tc__now_ms());
    if (left < 0 && deadline >= 0) left = 0;
    rc = pump(c, left);
    if (rc != 0 || left == 0) break;
    /* poll woke without data (EINTR): wait out the rest */
  }
  if (rc < 0) return rc;
  if (c->pending_err) return c->pending_err;
  return rc;
}

/* A request whose send failed on a connection that was open: the server
 * may have said why it closed before the write found out (a message over its
 * --max-message: TS_ETOOBIG, said while a large upload was still being
 * written), so what it sent is read, for up to SAID_WAIT_MS, and named. */
#define SAID_WAIT_MS 200
static int send_failed(tc_client *c, int rc) {
  char why[sizeof c->err];
  snprintf(why, sizeof why, "%s", c->err);
  c->broken = 0;
  c->said[0] = '\0';
  (void)pump(c, SAID_WAIT_MS);
  c->broken = 1;
  if (c->said[0])
    return tc__fail(c, rc, "send: connection closed by the server after %s", c->said);
  return tc__fail(c, rc, "%s", why);
}

int tc__request(tc_client *c, Envelope *env, int expect, Envelope **reply) {
  *reply = NULL;
  if (c->in_dispatch) return tc__fail(c, TS_EINVAL, "a request was made from a callback");
  env->request_id = ++c->next_rid;
  const int was_open = !c->broken;
  int rc = tc__send_env(c, env);
  if (rc == TS_EIO && was_open && c->broken) return send_failed(c, rc);
  if (rc) return rc;
  c->wait_rid = env->request_id;
  c->reply = NULL;
  c->wait_deadline_ms = tc__now_ms() + c->timeout_ms;
  while (!c->reply) {
    int64_t left = c->wait_deadline_ms - tc__now_ms();
    if (left <= 0) {
      rc = tc__fail(c, TS_EIO, "no reply from the server within %d ms", c->timeout_ms);
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
    tc__fail(c, code, "%s: %s", e->name && e->name[0] ? e->name : ts_err_name(code),
         e->message ? e->message : "");
    tissued__v1__envelope__free_unpacked(r, NULL);
    return code;
  }
  if ((int)r->body_case != expect) {
    tc__fail(c, TS_EPROTOCOL, "unexpected reply (body %d, expected %d)", (int)r->body_case, expect);
    tissued__v1__envelope__free_unpacked(r, NULL);
    return TS_EPROTOCOL;
  }
  c->err[0] = '\0';
  *reply = r;
  return 0;
}
