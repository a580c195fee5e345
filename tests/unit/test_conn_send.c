/*
 * test_conn_send.c: a client whose output is over the hard-output-limit is
 * dropped when a reply, an Error or an event cannot be queued to it
 * (server.h: ts_conn_send), not left waiting for what it silently missed.
 * A transport of its own here (the ts_conn_ops contract of conn.h) queues
 * up to a limit and answers TS_EFULL past it, as tcp.c and net/ws.c do:
 *   - under the limit: sent, nothing closed, nothing counted;
 *   - over it: the Error is not queued, the client is closed once with the
 *     reason, counted in the server's and its session's clients_dropped,
 *     and in /metrics (tissued_clients_dropped_total);
 *   - sends to a client already closing are not counted again;
 *   - a client in no session (a lobby client) is counted by the server only.
 */
#include "ts_check.h"
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "../../server/core/ts_error.h"
#include "../../server/log.h"
#include "../../server/metrics.h"
#include "../../server/server.h"
#include "../../server/session.h"
#include "tissue.pb-c.h"

typedef struct {
  ts_conn base; /* first */
  size_t limit, queued;
  int sends, closes;
  char reason[64];
} fake_conn;

static int fake_send(ts_conn *c, const uint8_t *msg, size_t len) {
  fake_conn *f = (fake_conn *)c;
  (void)msg;
  if (f->queued + len > f->limit) return TS_EFULL;
  f->queued += len;
  f->sends++;
  return 0;
}

static void fake_close(ts_conn *c, const char *reason) {
  fake_conn *f = (fake_conn *)c;
  f->closes++;
  c->closing = 1;
  snprintf(f->reason, sizeof f->reason, "%s", reason);
}

static size_t fake_pending(ts_conn *c) { return ((fake_conn *)c)->queued; }

static const ts_conn_ops fake_ops = {fake_send, fake_close, fake_pending, NULL};

static ts_server *server_new(uv_loop_t *loop) {
  ts_server *s = calloc(1, sizeof *s);
  ck_assert_ptr_nonnull(s);
  s->loop = loop;
  uv_mutex_init(&s->outbox.lock);
  return s;
}

static void server_free(ts_server *s) {
  uv_mutex_destroy(&s->outbox.lock);
  free(s);
}

static void conn_init(fake_conn *f, ts_server *s, ts_session *se, size_t limit) {
  memset(f, 0, sizeof *f);
  f->base.ops = &fake_ops;
  f->base.server = s;
  f->base.session = se;
  f->limit = limit;
  snprintf(f->base.peer, sizeof f->base.peer, "127.0.0.1:9");
}

static double metric(ts_server *s, const char *name) {
  size_t len = 0;
  char *text = ts_metrics_text(s, &len);
  ck_assert_ptr_nonnull(text);
  char key[128];
  snprintf(key, sizeof key, "\n%s ", name);
  const char *p = strstr(text, key);
  ck_assert_msg(p != NULL, "%s not in /metrics", name);
  double v = strtod(p + strlen(key), NULL);
  free(text);
  return v;
}

START_TEST(test_error_over_the_limit_drops) {
  ts_log_set_level(ts_log_parse_level("error"));
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  ts_server *s = server_new(&loop);
  ts_session *se = calloc(1, sizeof *se);
  ck_assert_ptr_nonnull(se);
  se->id = 7;
  fake_conn f;
  conn_init(&f, s, se, 1000);

  /* under the limit: queued, nothing closed or counted */
  ts_send_error(&f.base, 1, TS_EINVAL, "a first error");
  ck_assert_int_eq(f.sends, 1);
  ck_assert_int_eq(f.closes, 0);
  ck_assert_uint_eq(s->errors_sent, 1);
  ck_assert_uint_eq(s->clients_dropped, 0);
  ck_assert_uint_eq(se->clients_dropped, 0);
  ck_assert_double_eq(metric(s, "tissued_clients_dropped_total"), 0);

  /* over it: not queued, closed once with the reason, counted */
  f.queued = f.limit - 10;
  ts_send_error(&f.base, 2, TS_EDIVERGED, "session 7 diverged");
  ck_assert_int_eq(f.sends, 1);
  ck_assert_int_eq(f.closes, 1);
  ck_assert_str_eq(f.reason, "output over the hard limit");
  ck_assert_uint_eq(s->clients_dropped, 1);
  ck_assert_uint_eq(se->clients_dropped, 1);
  ck_assert_double_eq(metric(s, "tissued_clients_dropped_total"), 1);

  /* what follows to a client already closing is not counted again */
  Tissued__V1__Pong pong = TISSUED__V1__PONG__INIT;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_PONG;
  env.pong = &pong;
  ts_send_envelope(&f.base, &env);
  ck_assert_int_eq(ts_conn_send(&f.base, (const uint8_t *)"0123456789abcdef", 16), TS_EFULL);
  ck_assert_int_eq(f.closes, 1);
  ck_assert_uint_eq(s->clients_dropped, 1);
  ck_assert_uint_eq(se->clients_dropped, 1);

  /* a client in no session: the server's count only */
  fake_conn lobby;
  conn_init(&lobby, s, NULL, 8);
  ck_assert_int_eq(ts_conn_send(&lobby.base, (const uint8_t *)"0123456789abcdef", 16), TS_EFULL);
  ck_assert_int_eq(lobby.closes, 1);
  ck_assert_uint_eq(s->clients_dropped, 2);
  ck_assert_uint_eq(se->clients_dropped, 1);
  ck_assert_double_eq(metric(s, "tissued_clients_dropped_total"), 2);

  free(se);
  server_free(s);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

int main(void) {
  Suite *su = suite_create("conn_send");
  TCase *tc = tcase_create("drop");
  tcase_add_test(tc, test_error_over_the_limit_drops);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
