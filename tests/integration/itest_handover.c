/*
 * itest_handover.c: an instructor hands a tool over (issue 9, HandOverTool),
 * against a real daemon:
 *   - frames tell observers each tool's shape: kind, length and jaw opening
 *     as the controller set them (ToolState fields 8-10);
 *   - HandOverTool needs the server key, an existing session and tool
 *     (TS_EAUTH, TS_ENOSESSION, TS_ETOOL);
 *   - it answers the instructor with a fresh controller token (32 hex
 *     digits, not the old one); the client that drove the tool gets a
 *     ToolHandedOver without a token and its poses are refused (TS_EROLE);
 *   - the old token no longer opens the tool, the new one does; the other
 *     controller and the observer keep their roles and frames.
 * Clients say no key in Hello except the instructor, so every join goes
 * through the tokens.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "rawclient.h"

#define REPLY_MS 10000
typedef Tissued__V1__Envelope Envelope;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends env with a fresh request id and returns the reply of that id (NULL
 * on timeout). Other envelopes are passed to `other` (may be NULL) and
 * freed. */
static Envelope *request(rc_conn *c, Envelope *env, void (*other)(void *, Envelope *), void *ud) {
  env->request_id = ++c->next_rid;
  if (rc_send(c, env)) return NULL;
  long long end = now_ms() + REPLY_MS;
  while (now_ms() < end) {
    Envelope *e = rc_recv(c, (int)(end - now_ms()));
    if (!e) return NULL;
    if (e->request_id == env->request_id) return e;
    if (other) other(ud, e);
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
  return NULL;
}

/* 0, the negative ts_errno of an Error reply, or -1000 when no reply of the
 * wanted kind came. Frees e. */
static int code_of(Envelope *e, int want) {
  int rc = -1000;
  if (e && e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) rc = -(int)e->error->code;
  else if (e && (int)e->body_case == want) rc = 0;
  if (e) tissued__v1__envelope__free_unpacked(e, NULL);
  return rc;
}

static void connect_as(rc_conn *c, const ts_dproc *d, const char *cred) {
  ck_assert_int_eq(rc_tcp(c, d->tcp_port), 0);
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = 1;
  h.client_name = (char *)"itest-handover";
  h.credentials = (char *)cred;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  ck_assert_int_eq(code_of(request(c, &env, NULL, NULL), TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY),
                   0);
}

/* JoinSession with a token; controllers get the given shape. */
static int join(rc_conn *c, uint32_t sid, int controller, uint32_t tool, const char *token,
                int kind, double radius, double length, uint32_t *got_tool) {
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.kind = (Tissued__V1__ToolShape__Kind)kind;
  shape.radius = (float)radius;
  shape.length = (float)length;
  Tissued__V1__JoinSession j = TISSUED__V1__JOIN_SESSION__INIT;
  j.session_id = sid;
  j.role = controller ? TISSUED__V1__ROLE__ROLE_CONTROLLER : TISSUED__V1__ROLE__ROLE_OBSERVER;
  j.tool_id = tool;
  if (controller) j.tool = &shape;
  j.token = (char *)token;
  j.frame_rate = 30;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  env.join_session = &j;
  Envelope *e = request(c, &env, NULL, NULL);
  if (e && e->body_case == TISSUED__V1__ENVELOPE__BODY_JOINED && got_tool)
    *got_tool = e->joined->tool_id;
  return code_of(e, TISSUED__V1__ENVELOPE__BODY_JOINED);
}

static void pose(rc_conn *c, uint32_t tool, double y, double jaw) {
  Tissued__V1__Vec3 p = TISSUED__V1__VEC3__INIT;
  p.y = y;
  Tissued__V1__Quat q = TISSUED__V1__QUAT__INIT;
  q.w = 1;
  Tissued__V1__ToolPose tp = TISSUED__V1__TOOL_POSE__INIT;
  tp.tool_id = tool;
  tp.position = &p;
  tp.orientation = &q;
  tp.jaw = (float)jaw;
  tp.seq = (uint64_t)now_ms();
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_POSE;
  env.tool_pose = &tp;
  ck_assert_int_eq(rc_send(c, &env), 0);
}

/* What a client saw besides replies. */
typedef struct seen {
  int frames;
  int role_errors;          /* Error TS_EROLE */
  int other_errors;
  int handed_over;          /* ToolHandedOver messages */
  uint32_t handed_tool;
  int handed_token_len;     /* length of the token in the last one */
  char handed_observer[40]; /* the observer token in the last one */
  int tool1_kind;           /* tool 1's state in the last frame that had it; -1 none */
  float tool1_length, tool1_radius, tool1_jaw;
} seen;

static void on_other(void *ud, Envelope *e) {
  seen *s = ud;
  switch (e->body_case) {
  case TISSUED__V1__ENVELOPE__BODY_FRAME:
    s->frames++;
    for (size_t i = 0; i < e->frame->n_tools; i++) {
      const Tissued__V1__ToolState *t = e->frame->tools[i];
      if (t->tool_id != 1) continue;
      s->tool1_kind = (int)t->kind;
      s->tool1_length = t->length;
      s->tool1_radius = t->radius;
      s->tool1_jaw = t->jaw;
    }
    break;
  case TISSUED__V1__ENVELOPE__BODY_ERROR:
    if (-(int)e->error->code == TS_EROLE) s->role_errors++;
    else s->other_errors++;
    break;
  case TISSUED__V1__ENVELOPE__BODY_TOOL_HANDED_OVER:
    s->handed_over++;
    s->handed_tool = e->tool_handed_over->tool_id;
    s->handed_token_len = (int)strlen(e->tool_handed_over->controller_token);
    snprintf(s->handed_observer, sizeof s->handed_observer, "%s",
             e->tool_handed_over->observer_token);
    break;
  default: break;
  }
}

/* A Ping round trip: everything the daemon sent c before it is handled. */
static void sync_with(rc_conn *c, seen *s) {
  Tissued__V1__Ping p = TISSUED__V1__PING__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_PING;
  env.ping = &p;
  ck_assert_int_eq(code_of(request(c, &env, on_other, s), TISSUED__V1__ENVELOPE__BODY_PONG), 0);
}

/* Reads c's messages for up to ms, or until cond holds. */
static void pump(rc_conn *c, seen *s, int ms, int (*cond)(const seen *)) {
  long long end = now_ms() + ms;
  while (now_ms() < end && !(cond && cond(s))) {
    Envelope *e = rc_recv(c, (int)(end - now_ms()));
    if (!e) break;
    on_other(s, e);
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
}

static int capsule_posed(const seen *s) {
  return s->tool1_kind == 1 && fabsf(s->tool1_jaw - 0.25f) < 1e-6f;
}
static int got_handed(const seen *s) { return s->handed_over > 0; }

static int hand_over(rc_conn *c, uint32_t sid, uint32_t tool, char token_out[64]) {
  Tissued__V1__HandOverTool m = TISSUED__V1__HAND_OVER_TOOL__INIT;
  m.session_id = sid;
  m.tool_id = tool;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_HAND_OVER_TOOL;
  env.hand_over_tool = &m;
  Envelope *e = request(c, &env, NULL, NULL);
  if (e && e->body_case == TISSUED__V1__ENVELOPE__BODY_TOOL_HANDED_OVER && token_out) {
    ck_assert_uint_eq(e->tool_handed_over->session_id, sid);
    ck_assert_uint_eq(e->tool_handed_over->tool_id, tool);
    snprintf(token_out, 64, "%s", e->tool_handed_over->controller_token);
  }
  return code_of(e, TISSUED__V1__ENVELOPE__BODY_TOOL_HANDED_OVER);
}

static int is_hex32(const char *s) {
  if (strlen(s) != 32) return 0;
  for (int i = 0; i < 32; i++)
    if (!strchr("0123456789abcdef", s[i])) return 0;
  return 1;
}

START_TEST(test_handover) {
  ts_dproc d;
  char err[512];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);

  rc_conn admin;
  connect_as(&admin, &d, TS_DPROC_KEY);
  Tissued__V1__CreateSession cs = TISSUED__V1__CREATE_SESSION__INIT;
  cs.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  cs.builtin = (char *)"stomach-patch";
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  env.create_session = &cs;
  Envelope *e = request(&admin, &env, NULL, NULL);
  ck_assert_msg(e && e->body_case == TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, "create");
  uint32_t sid = e->session_created->session_id;
  char observer[64], tool1[64], tool2[64];
  ck_assert_uint_ge(e->session_created->n_controller_tokens, 2);
  snprintf(observer, sizeof observer, "%s", e->session_created->observer_token);
  snprintf(tool1, sizeof tool1, "%s", e->session_created->controller_tokens[0]);
  snprintf(tool2, sizeof tool2, "%s", e->session_created->controller_tokens[1]);
  tissued__v1__envelope__free_unpacked(e, NULL);

  /* two controllers (tool 1 a capsule of 3 mm x 20 mm) and an observer */
  rc_conn a, b, obs;
  seen sa = {.tool1_kind = -1}, sb = {.tool1_kind = -1}, so = {.tool1_kind = -1};
  connect_as(&a, &d, NULL);
  connect_as(&b, &d, NULL);
  connect_as(&obs, &d, NULL);
  uint32_t t = 0;
  ck_assert_int_eq(join(&a, sid, 1, 0, tool1, 1, 0.003, 0.02, &t), 0);
  ck_assert_uint_eq(t, 1);
  ck_assert_int_eq(join(&b, sid, 1, 0, tool2, 0, 0.004, 0, &t), 0);
  ck_assert_uint_eq(t, 2);
  ck_assert_int_eq(join(&obs, sid, 0, 0, observer, 0, 0, 0, NULL), 0);

  /* the observer's frames carry tool 1's shape; float fields: the values
   * travel as 32-bit floats, so 1e-6 relative */
  pose(&a, 1, 0.03, 0.25);
  pump(&obs, &so, 10000, capsule_posed);
  ck_assert_msg(capsule_posed(&so), "observer never saw tool 1 as a posed capsule (kind %d)",
                so.tool1_kind);
  ck_assert_float_eq_tol(so.tool1_length, 0.02f, 0.02f * 1e-6f);
  ck_assert_float_eq_tol(so.tool1_radius, 0.003f, 0.003f * 1e-6f);

  /* refusals: no key, no session, no tool */
  ck_assert_int_eq(hand_over(&b, sid, 1, NULL), TS_EAUTH);
  ck_assert_int_eq(hand_over(&admin, sid + 100, 1, NULL), TS_ENOSESSION);
  ck_assert_int_eq(hand_over(&admin, sid, 99, NULL), TS_ETOOL);
  ck_assert_int_eq(hand_over(&admin, sid, 0, NULL), TS_ETOOL);
  sb.other_errors = 0;

  /* the hand-over */
  char fresh[64] = "";
  ck_assert_int_eq(hand_over(&admin, sid, 1, fresh), 0);
  ck_assert_msg(is_hex32(fresh), "new token '%s'", fresh);
  ck_assert_str_ne(fresh, tool1);
  ck_assert_str_ne(fresh, tool2);
  ck_assert_str_ne(fresh, observer);
  pump(&a, &sa, 5000, got_handed);
  ck_assert_int_eq(sa.handed_over, 1);
  ck_assert_uint_eq(sa.handed_tool, 1);
  ck_assert_int_eq(sa.handed_token_len, 0);
  /* ... but the session's observer token, to watch on after a reconnect */
  ck_assert_str_eq(sa.handed_observer, observer);

  /* the old controller observes: its poses are refused, frames still come */
  sa.role_errors = 0;
  pose(&a, 1, 0.02, 0);
  sync_with(&a, &sa);
  ck_assert_int_eq(sa.role_errors, 1);
  int before = sa.frames;
  pump(&a, &sa, 1000, NULL);
  ck_assert_int_gt(sa.frames, before);

  /* the other controller drives on, the observer still watches */
  pose(&b, 2, 0.03, 0);
  sync_with(&b, &sb);
  ck_assert_int_eq(sb.role_errors, 0);
  ck_assert_int_eq(sb.handed_over, 0);
  before = so.frames;
  pump(&obs, &so, 1000, NULL);
  ck_assert_int_gt(so.frames, before);
  ck_assert_int_eq(so.handed_over, 0);

  /* the old token no longer opens tool 1; the new one does */
  rc_conn c1, c2;
  connect_as(&c1, &d, NULL);
  ck_assert_int_eq(join(&c1, sid, 1, 0, tool1, 0, 0.005, 0, NULL), TS_EAUTH);
  connect_as(&c2, &d, NULL);
  t = 0;
  ck_assert_int_eq(join(&c2, sid, 1, 0, fresh, 0, 0.005, 0, &t), 0);
  ck_assert_uint_eq(t, 1);
  seen s2 = {.tool1_kind = -1};
  pose(&c2, 1, 0.03, 0);
  sync_with(&c2, &s2);
  ck_assert_int_eq(s2.role_errors + s2.other_errors, 0);
  /* tool 2's token is untouched */
  ck_assert_int_eq(join(&c1, sid, 0, 0, tool2, 0, 0, 0, NULL), 0);

  rc_close(&c1);
  rc_close(&c2);
  rc_close(&a);
  rc_close(&b);
  rc_close(&obs);
  rc_close(&admin);
  char why[256];
  ck_assert_int_eq(ts_dproc_stop(&d, 10000, why, sizeof why), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("handover");
  TCase *tc = tcase_create("tcp");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_handover);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
