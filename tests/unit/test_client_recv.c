/*
 * test_client_recv.c: libtissueclient's receive path on bytes a server
 * might send, without a daemon: the client runs over one end of a
 * socketpair (tc__connect_fd), the test writes the server's messages to the
 * other. Cases found by tests/fuzz/fuzz_client.c live here as regression
 * tests.
 */
#include "ts_check.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "tissue.pb-c.h"
#include "tissueclient.h"
#include "tissueclient_internal.h"
#include "ts_codec.h"
#include "ts_framing.h"

typedef Tissued__V1__Envelope Envelope;

static void send_env(int fd, Envelope *e) {
  size_t n = tissued__v1__envelope__get_packed_size(e);
  uint8_t *buf = malloc(n + 4);
  ck_assert_ptr_nonnull(buf);
  ts_frame_header(buf, (uint32_t)n);
  tissued__v1__envelope__pack(e, buf + 4);
  ck_assert_int_eq(send(fd, buf, n + 4, MSG_NOSIGNAL), (ssize_t)(n + 4));
  free(buf);
}

static void send_hello_reply(int fd, uint32_t version) {
  Tissued__V1__HelloReply h = TISSUED__V1__HELLO_REPLY__INIT;
  h.protocol_version = version;
  h.client_id = 7;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.request_id = 1; /* the Hello is the client's first request */
  e.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY;
  e.hello_reply = &h;
  send_env(fd, &e);
}

static const int32_t square[4][3] = {{0, 0, 0}, {1000, 0, 0}, {1000, 0, 1000}, {0, 3, 1000}};

/* A q1 keyframe of the square with the given topology (NULL: none). */
static void send_keyframe(int fd, uint64_t seq, Tissued__V1__Topology *topo) {
  uint8_t pay[256];
  size_t len = 0;
  ck_assert_int_eq(ts_codec_encode(NULL, TS_CODEC_Q1, NULL, square, 4, pay, sizeof pay, &len,
                                   NULL),
                   0);
  Tissued__V1__Frame f = TISSUED__V1__FRAME__INIT;
  f.session_id = 1;
  f.seq = seq;
  f.keyframe = 1;
  f.quantum = 1e-5f;
  f.vertex_count = 4;
  f.payload.data = pay;
  f.payload.len = len;
  f.codec = TS_CODEC_Q1;
  f.topology = topo;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_FRAME;
  e.frame = &f;
  send_env(fd, &e);
}

typedef struct seen {
  int frames;
  uint32_t n, n_triangles, n_layers, tri5;
  double x1, y3; /* positions of vertex 1 (x) and 3 (y), m */
} seen;

static void on_frame(void *ud, const tc_frame *f) {
  seen *s = ud;
  s->frames++;
  s->n = f->vertex_count;
  s->n_triangles = f->n_triangles;
  s->n_layers = f->n_layers;
  s->tri5 = f->n_triangles == 2 ? f->triangles[5] : 99;
  s->x1 = f->positions[1][0];
  s->y3 = f->positions[3][1];
}

static tc_client *connect_pair(int *server_fd) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  send_hello_reply(sv[1], TC_PROTOCOL_VERSION);
  char err[256];
  tc_client *c = tc__connect_fd(sv[0], "test", "", 1000, err, sizeof err);
  ck_assert_msg(c != NULL, "%s", err);
  ck_assert_uint_eq(tc_client_id(c), 7);
  *server_fd = sv[1];
  return c;
}

/* A keyframe whose topology has no triangles and no layers: protobuf-c gives
 * NULL arrays, which the client handed to memcpy (undefined behaviour; the
 * ASan+UBSan build stops there). It is a consistent frame and is taken. */
START_TEST(test_empty_topology) {
  int fd;
  tc_client *c = connect_pair(&fd);
  seen s = {0};
  tc_set_frame_cb(c, on_frame, &s);
  Tissued__V1__Topology empty = TISSUED__V1__TOPOLOGY__INIT;
  empty.vertex_count = 4;
  send_keyframe(fd, 1, &empty);
  ck_assert_int_eq(tc_poll(c, 1000), 1);
  ck_assert_int_eq(s.frames, 1);
  ck_assert_uint_eq(s.n, 4);
  ck_assert_uint_eq(s.n_triangles, 0);
  ck_assert_uint_eq(s.n_layers, 0);
  /* q * quantum with the float quantum 1e-5f: 1000 steps is 10 mm to 1e-9 m
   * (float rounding of 1e-5 is 2.5e-13 relative) */
  ck_assert_double_eq_tol(s.x1, 0.01, 1e-9);
  ck_assert_double_eq_tol(s.y3, 3e-5, 1e-12);

  /* then a topology with triangles replaces it */
  uint32_t tris[] = {0, 1, 2, 0, 2, 3};
  uint32_t counts[] = {2};
  Tissued__V1__Topology t = TISSUED__V1__TOPOLOGY__INIT;
  t.vertex_count = 4;
  t.n_triangles = 6;
  t.triangles = tris;
  t.n_layer_triangle_counts = 1;
  t.layer_triangle_counts = counts;
  send_keyframe(fd, 2, &t);
  ck_assert_int_eq(tc_poll(c, 1000), 1);
  ck_assert_int_eq(s.frames, 2);
  ck_assert_uint_eq(s.n_triangles, 2);
  ck_assert_uint_eq(s.n_layers, 1);
  ck_assert_uint_eq(s.tri5, 3);
  tc_close(c);
  close(fd);
}
END_TEST

/* A topology for another vertex count is refused with TS_EDECODE and the
 * frame is not shown; the stream stays usable. */
START_TEST(test_topology_mismatch) {
  int fd;
  tc_client *c = connect_pair(&fd);
  seen s = {0};
  tc_set_frame_cb(c, on_frame, &s);
  Tissued__V1__Topology t = TISSUED__V1__TOPOLOGY__INIT;
  t.vertex_count = 5;
  send_keyframe(fd, 1, &t);
  ck_assert_int_eq(tc_poll(c, 1000), TS_EDECODE);
  ck_assert_int_eq(s.frames, 0);
  ck_assert_ptr_null(tc_last_frame(c));
  ck_assert_msg(strstr(tc_last_error(c), "5 vertices"), "%s", tc_last_error(c));
  send_keyframe(fd, 2, NULL);
  ck_assert_int_eq(tc_poll(c, 1000), 1);
  ck_assert_int_eq(s.frames, 1);
  ck_assert_ptr_nonnull(tc_last_frame(c));
  tc_close(c);
  close(fd);
}
END_TEST

/* ImportModel answered with two models: TS_EPROTOCOL saying so. The message
 * read the count from the reply after freeing it (use after free; the
 * ASan build stops there). */
START_TEST(test_import_two_models) {
  int fd;
  tc_client *c = connect_pair(&fd);
  Tissued__V1__ModelInfo mi = TISSUED__V1__MODEL_INFO__INIT;
  mi.model_id = 1;
  mi.tissue = "stomach-patch";
  Tissued__V1__ModelInfo *two[2] = {&mi, &mi};
  Tissued__V1__ModelList l = TISSUED__V1__MODEL_LIST__INIT;
  l.n_models = 2;
  l.models = two;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.request_id = 2; /* the request after the Hello */
  e.body_case = TISSUED__V1__ENVELOPE__BODY_MODEL_LIST;
  e.model_list = &l;
  send_env(fd, &e);
  tc_model_info info;
  ck_assert_int_eq(tc_import_model(c, "{}", &info), TS_EPROTOCOL);
  ck_assert_msg(strstr(tc_last_error(c), "answered with 2 models"), "%s", tc_last_error(c));
  tc_close(c);
  close(fd);
}
END_TEST

START_TEST(test_hello_version) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  send_hello_reply(sv[1], 2);
  char err[256];
  ck_assert_ptr_null(tc__connect_fd(sv[0], "test", "", 1000, err, sizeof err));
  ck_assert_msg(strstr(err, "protocol version 2"), "%s", err);
  close(sv[1]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("client_recv");
  TCase *tc = tcase_create("client_recv");
  tcase_add_test(tc, test_empty_topology);
  tcase_add_test(tc, test_topology_mismatch);
  tcase_add_test(tc, test_import_two_models);
  tcase_add_test(tc, test_hello_version);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
