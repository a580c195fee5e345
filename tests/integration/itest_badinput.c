/*
 * itest_badinput.c: hostile and broken clients against one real tissued, with
 * raw sockets (not libtissueclient) so that the bytes are exactly what the
 * test says: undecodable messages, absurd lengths, wrong versions, messages
 * before Hello, NaN and unnormalised poses, tool friction coefficients out
 * of range, observers posing, missing sessions, peers that vanish
 * mid-message. Every case must get its Error (or
 * a close where that is the documented answer); afterwards a well-behaved
 * client must still get its frames and the daemon must exit 0 on SIGTERM.
 *
 * The cases share one daemon and run in order in one process (CK_NOFORK);
 * the last one checks the survivor and stops the daemon.
 */
#include "ts_check.h"
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "tissue.pb-c.h"
#include "tissueclient.h"
#include "ts_framing.h"

typedef Tissued__V1__Envelope Envelope;

#define REPLY_TIMEOUT_MS 5000

static ts_dproc daemon_;
static int daemon_ok;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- raw socket helpers --------------------------------------------------------- */

static int raw_connect(void) {
  ck_assert_msg(daemon_ok, "the daemon did not start");
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)daemon_.tcp_port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s",
                strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void raw_send(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    ck_assert_msg(w > 0, "send: %s", w < 0 ? strerror(errno) : "0");
    b += w;
    n -= (size_t)w;
  }
}

static void raw_send_framed(int fd, const void *p, size_t n) {
  uint8_t h[4];
  ts_frame_header(h, (uint32_t)n);
  raw_send(fd, h, 4);
  if (n) raw_send(fd, p, n);
}

static void send_env(int fd, uint64_t rid, Envelope *env) {
  env->request_id = rid;
  size_t len = tissued__v1__envelope__get_packed_size(env);
  uint8_t *buf = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(buf);
  tissued__v1__envelope__pack(env, buf);
  raw_send_framed(fd, buf, len);
  free(buf);
}

/* Reads exactly n bytes before the deadline: 1, 0 on EOF/reset, -1 on timeout. */
static int read_exact(int fd, uint8_t *p, size_t n, long long deadline) {
  while (n > 0) {
    long long left = deadline - now_ms();
    if (left <= 0) return -1;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int pr = poll(&pf, 1, (int)left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return -1;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    p += r;
    n -= (size_t)r;
  }
  return 1;
}

/* Next Envelope: 1 with *out, 0 when the server closed, -1 on timeout. */
static int recv_env(int fd, int timeout_ms, Envelope **out) {
  long long deadline = now_ms() + timeout_ms;
  uint8_t h[4];
  int r = read_exact(fd, h, 4, deadline);
  if (r != 1) return r;
  uint32_t len = ((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) | ((uint32_t)h[2] << 8) | h[3];
  ck_assert_uint_le(len, 64u << 20);
  uint8_t *buf = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(buf);
  r = read_exact(fd, buf, len, deadline);
  if (r != 1) {
    free(buf);
    return r;
  }
  *out = tissued__v1__envelope__unpack(NULL, len, buf);
  free(buf);
  ck_assert_msg(*out != NULL, "the server sent a message that does not decode");
  return 1;
}

/* Next Envelope that is not a Frame or a ToolForce (both stream to joined
 * clients). */
static int recv_reply(int fd, int timeout_ms, Envelope **out) {
  long long deadline = now_ms() + timeout_ms;
  for (;;) {
    long long left = deadline - now_ms();
    int r = recv_env(fd, left > 0 ? (int)left : 0, out);
    if (r != 1) return r;
    if ((*out)->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME &&
        (*out)->body_case != TISSUED__V1__ENVELOPE__BODY_TOOL_FORCE)
      return 1;
    tissued__v1__envelope__free_unpacked(*out, NULL);
  }
}

/* Expects an Error with code (negative ts_errno) answering request rid. */
static void expect_error(int fd, int code, uint64_t rid, const char *what) {
  Envelope *e = NULL;
  int r = recv_reply(fd, REPLY_TIMEOUT_MS, &e);
  ck_assert_msg(r == 1, "%s: expected %s, got %s", what, ts_err_name(code),
                r == 0 ? "a closed connection" : "nothing within 5 s");
  ck_assert_msg(e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR,
                "%s: expected Error %s, got body %d", what, ts_err_name(code), (int)e->body_case);
  ck_assert_msg(e->error->code == -code, "%s: expected %s (%d), got %s (%d): %s", what,
                ts_err_name(code), -code, e->error->name, e->error->code, e->error->message);
  ck_assert_str_eq(e->error->name, ts_err_name(code));
  ck_assert_msg(e->request_id == rid, "%s: request_id %llu, expected %llu", what,
                (unsigned long long)e->request_id, (unsigned long long)rid);
  ck_assert_msg(e->error->message && e->error->message[0], "%s: Error without a message", what);
  tissued__v1__envelope__free_unpacked(e, NULL);
}

/* Expects a reply of the given body case to request rid. */
static Envelope *expect_reply(int fd, int body, uint64_t rid, const char *what) {
  Envelope *e = NULL;
  int r = recv_reply(fd, REPLY_TIMEOUT_MS, &e);
  ck_assert_msg(r == 1, "%s: no reply (%s)", what, r == 0 ? "closed" : "timeout");
  if (e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR)
    ck_abort_msg("%s: Error %s: %s", what, e->error->name, e->error->message);
  ck_assert_msg((int)e->body_case == body, "%s: body %d, expected %d", what, (int)e->body_case,
                body);
  ck_assert_uint_eq(e->request_id, rid);
  return e;
}

static void hello(int fd, uint32_t version, uint64_t rid) {
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = version;
  h.client_name = (char *)"itest-badinput";
  h.credentials = (char *)TS_DPROC_KEY;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  send_env(fd, rid, &env);
}

static int connect_hello(void) {
  int fd = raw_connect();
  hello(fd, 1, 1);
  Envelope *e = expect_reply(fd, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY, 1, "hello");
  ck_assert_uint_eq(e->hello_reply->protocol_version, 1);
  tissued__v1__envelope__free_unpacked(e, NULL);
  return fd;
}

static void ping_ok(int fd, uint64_t rid) {
  Tissued__V1__Ping p = TISSUED__V1__PING__INIT;
  p.client_time_us = 123456789;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_PING;
  env.ping = &p;
  send_env(fd, rid, &env);
  Envelope *e = expect_reply(fd, TISSUED__V1__ENVELOPE__BODY_PONG, rid, "ping");
  ck_assert_uint_eq(e->pong->client_time_us, 123456789);
  tissued__v1__envelope__free_unpacked(e, NULL);
}

static uint32_t create_session(int fd, uint64_t rid) {
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = (char *)"stomach-patch";
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  env.create_session = &m;
  send_env(fd, rid, &env);
  Envelope *e = expect_reply(fd, TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, rid, "create");
  uint32_t id = e->session_created->session_id;
  tissued__v1__envelope__free_unpacked(e, NULL);
  return id;
}

/* A controller's join of tool `tool` with friction (mu_s, mu_k) on its sphere. */
static void send_join_friction(int fd, uint64_t rid, uint32_t session, uint32_t tool, float mu_s,
                               float mu_k) {
  Tissued__V1__Friction fr = TISSUED__V1__FRICTION__INIT;
  fr.mu_static = mu_s;
  fr.mu_kinetic = mu_k;
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.radius = 0.005f;
  shape.friction = &fr;
  Tissued__V1__JoinSession m = TISSUED__V1__JOIN_SESSION__INIT;
  m.session_id = session;
  m.role = TISSUED__V1__ROLE__ROLE_CONTROLLER;
  m.tool_id = tool;
  m.tool = &shape;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  env.join_session = &m;
  send_env(fd, rid, &env);
}

static void send_join(int fd, uint64_t rid, uint32_t session, int role) {
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.radius = 0.005f;
  Tissued__V1__JoinSession m = TISSUED__V1__JOIN_SESSION__INIT;
  m.session_id = session;
  m.role = role;
  m.tool = role == TISSUED__V1__ROLE__ROLE_CONTROLLER ? &shape : NULL;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  env.join_session = &m;
  send_env(fd, rid, &env);
}

/* Joins and returns the tool id. */
static uint32_t join(int fd, uint64_t rid, uint32_t session, int role) {
  send_join(fd, rid, session, role);
  Envelope *e = expect_reply(fd, TISSUED__V1__ENVELOPE__BODY_JOINED, rid, "join");
  uint32_t tool = e->joined->tool_id;
  tissued__v1__envelope__free_unpacked(e, NULL);
  return tool;
}

static void send_pose(int fd, uint64_t rid, uint32_t tool, float x, float y, float z,
                      float qw, float qx, float qy, float qz) {
  Tissued__V1__Vec3 p = TISSUED__V1__VEC3__INIT;
  p.x = x;
  p.y = y;
  p.z = z;
  Tissued__V1__Quat q = TISSUED__V1__QUAT__INIT;
  q.w = qw;
  q.x = qx;
  q.y = qy;
  q.z = qz;
  Tissued__V1__ToolPose m = TISSUED__V1__TOOL_POSE__INIT;
  m.tool_id = tool;
  m.seq = rid;
  m.position = &p;
  m.orientation = &q;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_POSE;
  env.tool_pose = &m;
  send_env(fd, rid, &env);
}

/* ---- the cases ------------------------------------------------------------------------ */

START_TEST(test_garbage_envelope) {
  int fd = connect_hello();
  /* 0xff...: a varint tag longer than 10 bytes; does not decode */
  uint8_t junk[16];
  memset(junk, 0xff, sizeof junk);
  Envelope *check = tissued__v1__envelope__unpack(NULL, sizeof junk, junk);
  ck_assert_ptr_null(check);
  raw_send_framed(fd, junk, sizeof junk);
  expect_error(fd, TS_EDECODE, 0, "garbage");
  /* a length-delimited field claiming more bytes than the message has */
  uint8_t trunc[] = {0x52, 0x7f, 0x08, 0x01};
  ck_assert_ptr_null(tissued__v1__envelope__unpack(NULL, sizeof trunc, trunc));
  raw_send_framed(fd, trunc, sizeof trunc);
  expect_error(fd, TS_EDECODE, 0, "truncated field");
  /* the connection is still usable */
  ping_ok(fd, 7);
  close(fd);
}
END_TEST

START_TEST(test_length_over_limit) {
  int fd = connect_hello();
  uint8_t h[4] = {0x7f, 0xff, 0xff, 0xff};
  raw_send(fd, h, 4);
  /* the answer is an Error TS_ETOOBIG and/or a close; never waiting for 2 GiB */
  Envelope *e = NULL;
  int r = recv_reply(fd, REPLY_TIMEOUT_MS, &e);
  ck_assert_msg(r != -1, "no Error and no close within 5 s after a 2 GiB length");
  if (r == 1) {
    ck_assert_int_eq(e->body_case, TISSUED__V1__ENVELOPE__BODY_ERROR);
    ck_assert_int_eq(e->error->code, -TS_ETOOBIG);
    tissued__v1__envelope__free_unpacked(e, NULL);
    /* the stream cannot be resynchronised: the server must close it */
    uint8_t b;
    r = read_exact(fd, &b, 1, now_ms() + REPLY_TIMEOUT_MS);
    ck_assert_msg(r == 0, "connection still open after TS_ETOOBIG");
  }
  close(fd);
}
END_TEST

START_TEST(test_wrong_version) {
  int fd = raw_connect();
  hello(fd, 99, 3);
  expect_error(fd, TS_EVERSION, 3, "hello v99");
  close(fd);
}
END_TEST

START_TEST(test_message_before_hello) {
  int fd = raw_connect();
  Tissued__V1__ListSessions m = TISSUED__V1__LIST_SESSIONS__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_SESSIONS;
  env.list_sessions = &m;
  send_env(fd, 5, &env);
  expect_error(fd, TS_ENOHELLO, 5, "list before hello");
  /* Hello still works afterwards */
  hello(fd, 1, 6);
  Envelope *e = expect_reply(fd, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY, 6, "late hello");
  tissued__v1__envelope__free_unpacked(e, NULL);
  close(fd);
}
END_TEST

START_TEST(test_pose_nan_and_quat) {
  int fd = connect_hello();
  uint32_t sid = create_session(fd, 10);
  uint32_t tool = join(fd, 11, sid, TISSUED__V1__ROLE__ROLE_CONTROLLER);
  ck_assert_uint_ge(tool, 1);
  send_pose(fd, 12, tool, NAN, 0.01f, 0, 1, 0, 0, 0);
  expect_error(fd, TS_ENAN, 12, "NaN position");
  send_pose(fd, 13, tool, 0, 0.01f, 0, 1, INFINITY, 0, 0);
  expect_error(fd, TS_ENAN, 13, "infinite quaternion");
  send_pose(fd, 14, tool, 0, 0.01f, 0, 2, 0, 0, 0);
  expect_error(fd, TS_EQUAT, 14, "quaternion of norm 2");
  send_pose(fd, 15, tool, 0, 0.01f, 0, 1.41421356f, 1.41421356f, 0, 0);
  expect_error(fd, TS_EQUAT, 15, "quaternion of norm 2 (rotated)");
  /* a good pose afterwards is accepted (no Error; a ping gets its Pong next) */
  send_pose(fd, 16, tool, 0, 0.01f, 0, 1, 0, 0, 0);
  ping_ok(fd, 17);
  /* friction coefficients out of range (kinetic over static, negative, over
   * the cap of 2, NaN) are refused with TS_EINVAL; the connection and the
   * session go on, and a valid pair joins (the same tool again) */
  const float bad[][2] = {{0.1f, 0.2f}, {-0.1f, 0}, {0.3f, -0.1f}, {2.5f, 0.1f}, {NAN, 0}};
  for (unsigned k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    send_join_friction(fd, 18 + k, sid, tool, bad[k][0], bad[k][1]);
    expect_error(fd, TS_EINVAL, 18 + k, "bad friction");
  }
  send_join_friction(fd, 24, sid, tool, 0.4f, 0.3f);
  Envelope *e = expect_reply(fd, TISSUED__V1__ENVELOPE__BODY_JOINED, 24, "join with friction");
  ck_assert_uint_eq(e->joined->tool_id, tool);
  tissued__v1__envelope__free_unpacked(e, NULL);
  send_pose(fd, 25, tool, 0, 0.002f, 0, 1, 0, 0, 0);
  ping_ok(fd, 26);
  close(fd);
}
END_TEST

START_TEST(test_observer_pose) {
  int fd = connect_hello();
  uint32_t sid = create_session(fd, 20);
  uint32_t tool = join(fd, 21, sid, TISSUED__V1__ROLE__ROLE_OBSERVER);
  ck_assert_uint_eq(tool, 0);
  send_pose(fd, 22, 1, 0, 0.01f, 0, 1, 0, 0, 0);
  expect_error(fd, TS_EROLE, 22, "observer pose");
  close(fd);
}
END_TEST

START_TEST(test_join_missing_session) {
  int fd = connect_hello();
  send_join(fd, 30, 4000000000u, TISSUED__V1__ROLE__ROLE_OBSERVER);
  expect_error(fd, TS_ENOSESSION, 30, "join missing session");
  send_join(fd, 31, 4000000000u, TISSUED__V1__ROLE__ROLE_CONTROLLER);
  expect_error(fd, TS_ENOSESSION, 31, "join missing session as controller");
  ping_ok(fd, 32);
  close(fd);
}
END_TEST

START_TEST(test_disconnect_mid_message) {
  /* half a length prefix, then gone */
  int a = connect_hello();
  uint8_t half[2] = {0, 0};
  raw_send(a, half, 2);
  close(a);
  /* a prefix announcing 100 bytes, half a body, then gone */
  int b = connect_hello();
  uint8_t h[4];
  ts_frame_header(h, 100);
  raw_send(b, h, 4);
  uint8_t body[50];
  memset(body, 0x08, sizeof body);
  raw_send(b, body, sizeof body);
  close(b);
  /* before Hello, one byte, then gone */
  int c = raw_connect();
  raw_send(c, half, 1);
  close(c);
  /* reset instead of a clean close, mid-body */
  int d = connect_hello();
  raw_send(d, h, 4);
  raw_send(d, body, 10);
  struct linger lg = {1, 0};
  setsockopt(d, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(d);
  /* the daemon is fine */
  int e = connect_hello();
  ping_ok(e, 40);
  close(e);
  ck_assert(ts_dproc_alive(&daemon_));
}
END_TEST

START_TEST(test_repeat_offender_closed) {
  /* a peer that keeps sending garbage is answered, then closed */
  int fd = connect_hello();
  uint8_t junk[8];
  memset(junk, 0xff, sizeof junk);
  int errors = 0, closed = 0;
  for (int i = 0; i < 100 && !closed; i++) {
    uint8_t hdr[4];
    ts_frame_header(hdr, sizeof junk);
    if (send(fd, hdr, 4, MSG_NOSIGNAL) != 4 || send(fd, junk, sizeof junk, MSG_NOSIGNAL) != 8) {
      closed = 1;
      break;
    }
    Envelope *e = NULL;
    int r = recv_reply(fd, REPLY_TIMEOUT_MS, &e);
    if (r == 0) {
      closed = 1;
    } else {
      ck_assert_msg(r == 1, "no answer to garbage message %d", i + 1);
      ck_assert_int_eq(e->error->code, -TS_EDECODE);
      errors++;
      tissued__v1__envelope__free_unpacked(e, NULL);
    }
  }
  fprintf(stderr, "badinput: %d Errors before the close\n", errors);
  ck_assert_int_ge(errors, 1);
  ck_assert_msg(closed, "the daemon kept a connection open after 100 undecodable messages");
  close(fd);
}
END_TEST

/* Last: a well-behaved client still works, and the daemon exits 0. */
static long frames_seen;
static void count_frame(void *ud, const tc_frame *f) {
  (void)ud;
  if (frames_seen == 0) ck_assert_int_eq(f->keyframe, 1);
  ck_assert_uint_gt(f->vertex_count, 0);
  frames_seen++;
}

START_TEST(test_zz_survivor_and_clean_exit) {
  ck_assert_msg(ts_dproc_alive(&daemon_), "the daemon died during the bad-input cases");
  char err[256];
  tc_client *c = tc_connect_key("127.0.0.1", daemon_.tcp_port, "itest-survivor", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(c != NULL, "connect: %s", err);
  uint32_t sid, tool;
  ck_assert_int_eq(tc_create_session(c, NULL, &sid, NULL, NULL), 0);
  tc_set_frame_cb(c, count_frame, NULL);
  ck_assert_int_eq(tc_join(c, sid, TC_ROLE_CONTROLLER, 0, 0.005, &tool), 0);
  /* generous: a sanitizer build simulates far slower than real time */
  long long deadline = now_ms() + 60000;
  while (frames_seen < 5 && now_ms() < deadline) {
    int rc = tc_poll(c, 50);
    ck_assert_msg(rc >= 0, "poll: %d %s", rc, tc_last_error(c));
  }
  ck_assert_int_ge(frames_seen, 5);
  tc_close(c);

  char why[256];
  int st = ts_dproc_stop(&daemon_, 5000, why, sizeof why);
  daemon_ok = 0;
  ck_assert_msg(st == 0, "daemon exit: %d %s", st, why);
}
END_TEST

int main(void) {
  char err[256];
  ts_dproc_scratch_begin();
  daemon_ok = ts_dproc_start(&daemon_, NULL, err, sizeof err) == 0;
  if (!daemon_ok) fprintf(stderr, "itest_badinput: %s\n", err);

  Suite *su = suite_create("badinput");
  TCase *tc = tcase_create("raw-tcp");
  tcase_add_test(tc, test_garbage_envelope);
  tcase_add_test(tc, test_length_over_limit);
  tcase_add_test(tc, test_wrong_version);
  tcase_add_test(tc, test_message_before_hello);
  tcase_add_test(tc, test_pose_nan_and_quat);
  tcase_add_test(tc, test_observer_pose);
  tcase_add_test(tc, test_join_missing_session);
  tcase_add_test(tc, test_disconnect_mid_message);
  tcase_add_test(tc, test_repeat_offender_closed);
  tcase_add_test(tc, test_zz_survivor_and_clean_exit);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (daemon_ok) {
    char why[256];
    ts_dproc_stop(&daemon_, 5000, why, sizeof why);
  }
  ts_dproc_scratch_end();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
