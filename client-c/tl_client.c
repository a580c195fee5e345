/*
 * tl_client.c: tissueload's clients: sending and bounded requests on a
 * tl_link (WebSocket, or the recorder's raw TCP), Hello, join and the
 * sessions it creates, the controllers' poses along the standard path, and
 * opening and closing a client of either transport.
 */
#include "tl_run.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"

int tl_send_env(client *c, Envelope *e) {
  size_t n = tissued__v1__envelope__get_packed_size(e);
  uint8_t stackbuf[512];
  uint8_t *b = n <= sizeof stackbuf ? stackbuf : malloc(n);
  if (!b) return TS_ENOMEM;
  tissued__v1__envelope__pack(e, b);
  int rc = tl_link_send(c->ln, b, n);
  if (b != stackbuf) free(b);
  return rc;
}

/* Sends a request on a tl_link and waits (bounded) for its reply; frames
 * arriving meanwhile go through the normal path. The reply is the caller's
 * to free. */
int tl_request(client *c, Envelope *e, int expect, Envelope **reply, char *err,
                        size_t errcap) {
  *reply = NULL;
  e->request_id = ++c->next_rid;
  int rc = tl_send_env(c, e);
  if (rc) {
    snprintf(err, errcap, "sending: %s", ts_strerror(rc));
    return rc;
  }
  c->wait_rid = e->request_id;
  c->reply = NULL;
  uint64_t deadline = tl_now_us() + (uint64_t)TL_SETUP_TIMEOUT_MS * 1000;
  while (!c->reply) {
    uint64_t t = tl_now_us();
    if (t >= deadline) {
      snprintf(err, errcap, "no reply within %d ms", TL_SETUP_TIMEOUT_MS);
      rc = TS_EIO;
      break;
    }
    struct pollfd pf = {.fd = tl_link_fd(c->ln), .events = POLLIN};
    if (tl_link_pending(c->ln)) pf.events |= POLLOUT;
    int left = (int)((deadline - t) / 1000) + 1;
    if (poll(&pf, 1, left > 100 ? 100 : left) <= 0) continue;
    if (pf.revents & POLLOUT) tl_link_flush(c->ln);
    int k = tl_link_read(c->ln, 0, tl_on_link_msg, c);
    if (k < 0) {
      snprintf(err, errcap, "connection: %s", ts_strerror(k));
      rc = k;
      break;
    }
  }
  c->wait_rid = 0;
  Envelope *rep = c->reply;
  c->reply = NULL;
  if (!rep) return rc ? rc : TS_EIO;
  if (rep->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
    snprintf(err, errcap, "%s: %s", rep->error->name ? rep->error->name : "error",
             rep->error->message ? rep->error->message : "");
    rc = rep->error->code > 0 ? -rep->error->code : TS_EPROTOCOL;
    c->refused_code = rep->error->code > 0 ? rep->error->code : 0;
    tissued__v1__envelope__free_unpacked(rep, NULL);
    return rc;
  }
  if ((int)rep->body_case != expect) {
    snprintf(err, errcap, "unexpected reply (body %d)", (int)rep->body_case);
    tissued__v1__envelope__free_unpacked(rep, NULL);
    return TS_EPROTOCOL;
  }
  *reply = rep;
  return 0;
}

int tl_hello(client *c, const char *key, char *err, size_t errcap) {
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = TC_PROTOCOL_VERSION;
  h.client_name = "tissueload";
  h.credentials = (char *)(key ? key : "");
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  e.hello = &h;
  Envelope *rep;
  int rc = tl_request(c, &e, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY, &rep, err, errcap);
  if (!rc) tissued__v1__envelope__free_unpacked(rep, NULL);
  return rc;
}

int tl_join(client *c, uint32_t session_id, int role, uint32_t frame_rate, char *err,
                     size_t errcap) {
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.radius = (float)TL_RADIUS;
  Tissued__V1__JoinSession j = TISSUED__V1__JOIN_SESSION__INIT;
  j.session_id = session_id;
  j.role = role == TC_ROLE_CONTROLLER ? TISSUED__V1__ROLE__ROLE_CONTROLLER
                                      : TISSUED__V1__ROLE__ROLE_OBSERVER;
  j.tool = role == TC_ROLE_CONTROLLER ? &shape : NULL;
  j.frame_rate = frame_rate;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  e.join_session = &j;
  Envelope *rep;
  int rc = tl_request(c, &e, TISSUED__V1__ENVELOPE__BODY_JOINED, &rep, err, errcap);
  if (!rc) {
    c->tool_id = rep->joined->tool_id;
    tissued__v1__envelope__free_unpacked(rep, NULL);
  }
  return rc;
}

/* CreateSession of the built-in patch with `layers` layers (3 = its default;
 * otherwise the daemon's default layers, repeated or cut) and `substeps`
 * (CreateSession.substeps; 0: the daemon's choice). */
int tl_create_session(client *admin, int layers, uint32_t substeps, session_run *s, char *err,
                          size_t errcap) {
  Tissued__V1__LayerSpec ls[8];
  Tissued__V1__LayerSpec *lp[8];
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = "stomach-patch";
  m.substeps = substeps;
  if (layers != 3) {
    for (int i = 0; i < layers; i++) {
      tissued__v1__layer_spec__init(&ls[i]);
      lp[i] = &ls[i];
    }
    m.n_layers = (size_t)layers;
    m.layers = lp;
  }
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  e.create_session = &m;
  Envelope *rep;
  int rc = tl_request(admin, &e, TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, &rep, err, errcap);
  if (rc) return rc;
  s->id = rep->session_created->session_id;
  s->vertex_count = rep->session_created->vertex_count;
  s->layers = layers;
  tissued__v1__envelope__free_unpacked(rep, NULL);
  return 0;
}

int tl_send_pose(client *c, uint64_t t) {
  run *r = c->r;
  double pt = c->sim_time;
  if (c->sim_at_us) { /* between frames, advance with the wall clock, by at most 50 ms */
    double ahead = (double)(t - c->sim_at_us) * 1e-6;
    pt += ahead < 0.05 ? ahead : 0.05;
  }
  double pos[3];
  tl_path_pose(pt, c->path_z, pos);
  const double quat[4] = {1, 0, 0, 0};
  int rc;
  if (c->tc) {
    rc = tc_send_pose(c->tc, c->tool_id, pos, quat, 1.0);
  } else {
    Tissued__V1__Vec3 p = TISSUED__V1__VEC3__INIT;
    p.x = (float)pos[0];
    p.y = (float)pos[1];
    p.z = (float)pos[2];
    Tissued__V1__Quat q = TISSUED__V1__QUAT__INIT;
    q.w = 1;
    Tissued__V1__ToolPose m = TISSUED__V1__TOOL_POSE__INIT;
    m.tool_id = c->tool_id;
    m.seq = ++c->pose_seq;
    m.client_time_us = tl_now_us();
    m.position = &p;
    m.orientation = &q;
    m.jaw = 1;
    Envelope e = TISSUED__V1__ENVELOPE__INIT;
    e.request_id = ++c->next_rid;
    e.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_POSE;
    e.tool_pose = &m;
    rc = tl_send_env(c, &e);
  }
  if (rc == 0) r->poses_sent++;
  else r->send_failures++;
  return rc;
}

/* ---- set-up ------------------------------------------------------------------------ */

int tl_open_client(run *r, client *c, int transport, int role, int sidx, int decode,
                       char *err, size_t errcap) {
  const opts *o = &r->o;
  c->r = r;
  c->transport = transport;
  c->role = role;
  c->sidx = sidx;
  c->decode = decode;
  c->alive = 1;
  uint32_t rate = (uint32_t)(role == TC_ROLE_CONTROLLER ? o->ctl_frame_rate : o->frame_rate);
  if (transport == TL_TCP) {
    c->tc = tc_connect_key(o->host, o->tcp_port, "tissueload", o->key, TL_SETUP_TIMEOUT_MS, err,
                           errcap);
    if (!c->tc) return -1;
    tc_set_frame_cb(c->tc, tl_on_tc_frame, c);
    tc_set_force_cb(c->tc, tl_on_tc_force, c);
    tc_set_error_cb(c->tc, tl_on_tc_error, c);
    tc_join_params p = {.session_id = r->s[sidx].id, .role = role, .radius = TL_RADIUS,
                        .frame_rate = rate};
    tc_joined j;
    if (tc_join_ex(c->tc, &p, &j)) {
      snprintf(err, errcap, "join: %s", tc_last_error(c->tc));
      return -1;
    }
    c->tool_id = j.tool_id;
    return 0;
  }
  c->ln = tl_link_open(TL_WS, o->host, o->http_port, TL_SETUP_TIMEOUT_MS, err, errcap);
  if (!c->ln) return -1;
  if (tl_hello(c, o->key, err, errcap)) return -1;
  return tl_join(c, r->s[sidx].id, role, rate, err, errcap) ? -1 : 0;
}

void tl_close_client(client *c) {
  if (c->tc) tc_close(c->tc);
  if (c->ln) tl_link_close(c->ln);
  if (c->reply) tissued__v1__envelope__free_unpacked(c->reply, NULL);
  ts_codec_ctx_free(c->cx);
  free(c->q);
  c->tc = NULL;
  c->ln = NULL;
}

