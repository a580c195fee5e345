/*
 * itest_shutdown.c: a daemon with live clients stops cleanly. Two clients
 * (a controller pressing the patch and an observer) are receiving frames when
 * the daemon gets SIGTERM; it must exit with status 0 within 5 s, and both
 * clients must be told (Error TS_ESHUTDOWN) and see their connection end
 * rather than hang, their last error naming it. A second case checks every kind of client with raw
 * sockets (rawclient.h): joined and not joined, TCP and WebSocket, each told
 * exactly once before the end (WebSocket: then close 1001). A third shows
 * the bound: with shutdown-timeout far below the time a WebSocket peer that
 * never answers the close frame is waited for (1 s), the daemon gives up and
 * exits 3.
 */
#include "ts_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "rawclient.h"
#include "tissueclient.h"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct counter {
  long frames;
  int shutdown_errors; /* Error TS_ESHUTDOWN received */
  int other_errors;
} counter;

static void on_frame(void *ud, const tc_frame *f) {
  counter *c = ud;
  ck_assert_uint_gt(f->vertex_count, 0);
  c->frames++;
}

static void on_error(void *ud, int code, const char *name, const char *message, uint64_t rid) {
  counter *c = ud;
  if (code == TS_ESHUTDOWN) {
    c->shutdown_errors++;
  } else {
    c->other_errors++;
    fprintf(stderr, "shutdown: unexpected error %s: %s\n", name, message);
  }
}

START_TEST(test_sigterm_with_clients) {
  ts_dproc d;
  char err[256];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);

  tc_client *a = tc_connect_key("127.0.0.1", d.tcp_port, "itest-shutdown-a", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(a != NULL, "connect a: %s", err);
  tc_client *b = tc_connect_key("127.0.0.1", d.tcp_port, "itest-shutdown-b", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(b != NULL, "connect b: %s", err);
  counter ca = {0}, cb = {0};
  tc_set_frame_cb(a, on_frame, &ca);
  tc_set_frame_cb(b, on_frame, &cb);
  tc_set_error_cb(a, on_error, &ca);
  tc_set_error_cb(b, on_error, &cb);

  uint32_t sid, tool;
  ck_assert_int_eq(tc_create_session(a, "stomach-patch", &sid, NULL, NULL), 0);
  ck_assert_int_eq(tc_join(a, sid, TC_ROLE_CONTROLLER, 0, 0.005, &tool), 0);
  ck_assert_int_eq(tc_join(b, sid, TC_ROLE_OBSERVER, 0, 0, NULL), 0);

  /* both receive frames while the tool presses in */
  const double quat[4] = {1, 0, 0, 0};
  /* generous: a sanitizer build simulates far slower than real time */
  long long deadline = now_ms() + 60000;
  int i = 0;
  while ((ca.frames < 5 || cb.frames < 5) && now_ms() < deadline) {
    double pos[3] = {0, 0.006 - 0.00005 * (i < 60 ? i : 60), 0};
    ck_assert_int_eq(tc_send_pose(a, tool, pos, quat, 0), 0);
    i++;
    ck_assert_int_ge(tc_poll(a, 5), 0);
    ck_assert_int_ge(tc_poll(b, 0), 0);
  }
  ck_assert_int_ge(ca.frames, 5);
  ck_assert_int_ge(cb.frames, 5);

  /* SIGTERM while both are connected and frames are flowing */
  long long t0 = now_ms();
  char why[256];
  int st = ts_dproc_stop(&d, 5000, why, sizeof why);
  long long took = now_ms() - t0;
  fprintf(stderr, "shutdown: exit status %d after %lld ms\n", st, took);
  ck_assert_msg(st == 0, "daemon exit: %d %s", st, why);
  ck_assert_int_le(took, 5000);

  /* both clients see the end of the connection */
  int a_closed = 0, b_closed = 0;
  deadline = now_ms() + 3000;
  while ((!a_closed || !b_closed) && now_ms() < deadline) {
    if (!a_closed && tc_poll(a, 10) == TS_EIO) a_closed = 1;
    if (!b_closed && tc_poll(b, 10) == TS_EIO) b_closed = 1;
  }
  ck_assert_msg(a_closed && b_closed, "clients did not see the close (a %d, b %d)", a_closed,
                b_closed);
  /* and the client's message says why it ended (what tissuectl prints) */
  ck_assert_msg(strstr(tc_last_error(a), "closed by the server after TS_ESHUTDOWN"), "a: '%s'",
                tc_last_error(a));
  ck_assert_msg(strstr(tc_last_error(b), "closed by the server after TS_ESHUTDOWN"), "b: '%s'",
                tc_last_error(b));
  ck_assert_int_eq(ca.other_errors, 0);
  ck_assert_int_eq(cb.other_errors, 0);
  /* each was told once, before the end */
  ck_assert_int_eq(ca.shutdown_errors, 1);
  ck_assert_int_eq(cb.shutdown_errors, 1);
  tc_close(a);
  tc_close(b);
}
END_TEST

START_TEST(test_sigterm_tells_every_client) {
  ts_dproc d;
  char err[256];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  enum { TCP_JOINED, WS_JOINED, TCP_IDLE, WS_IDLE, N };
  rc_conn c[N];
  uint32_t sid = 0;
  for (int i = 0; i < N; i++) {
    int ws = i == WS_JOINED || i == WS_IDLE;
    ck_assert_int_eq(ws ? rc_ws(&c[i], d.http_port) : rc_tcp(&c[i], d.tcp_port), 0);
    ck_assert_int_eq(rc_hello(&c[i], 20000), 0);
  }
  /* (a WebSocket and a TCP connection once shared id 1: the reply went astray) */
  ck_assert_int_eq(rc_create(&c[TCP_JOINED], 0, 0, &sid, 20000), 0);
  ck_assert_int_eq(rc_join(&c[TCP_JOINED], sid, 1, 0, 0, NULL, 20000), 0);
  ck_assert_int_eq(rc_join(&c[WS_JOINED], sid, 0, 0, 0, NULL, 20000), 0);
  /* frames are flowing to both joined clients */
  for (int i = TCP_JOINED; i <= WS_JOINED; i++) {
    int frames = 0;
    long long deadline = now_ms() + 60000;
    while (frames < 2 && now_ms() < deadline) {
      Tissued__V1__Envelope *e = rc_recv(&c[i], 50);
      if (e && e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) frames++;
      if (e) tissued__v1__envelope__free_unpacked(e, NULL);
    }
    ck_assert_int_ge(frames, 2);
  }

  long long t0 = now_ms();
  char why[256];
  int st = ts_dproc_stop(&d, 10000, why, sizeof why);
  long long took = now_ms() - t0;
  fprintf(stderr, "shutdown: exit status %d after %lld ms (raw clients)\n", st, took);
  ck_assert_msg(st == 0, "daemon exit: %d %s", st, why);
  /* shutdown-timeout is 5 s by default: a clean exit comes before it */
  ck_assert_int_le(took, 5000);
  for (int i = 0; i < N; i++) {
    int told = 0;
    ck_assert_msg(rc_wait_closed(&c[i], 5000, TS_ESHUTDOWN, &told), "client %d: no close", i);
    /* the not-joined WebSocket client gets the close frame only */
    ck_assert_msg(told == (i == WS_IDLE ? 0 : 1), "client %d: told %d times", i, told);
    if (i == WS_JOINED || i == WS_IDLE) ck_assert_int_eq(c[i].close_code, 1001);
    rc_close(&c[i]);
  }
}
END_TEST

START_TEST(test_shutdown_timeout) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--shutdown-timeout", "0.1", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  /* a WebSocket peer that will not answer the close frame or close its end */
  rc_conn w;
  ck_assert_int_eq(rc_ws(&w, d.http_port), 0);
  ck_assert_int_eq(rc_hello(&w, 20000), 0);
  char why[256];
  int st = ts_dproc_stop(&d, 10000, why, sizeof why);
  /* 3: only the shutdown watchdog exits with it (main.c) */
  ck_assert_msg(st == 3, "daemon exit: %d %s", st, why);
  rc_close(&w);
}
END_TEST

int main(void) {
  Suite *su = suite_create("shutdown");
  TCase *tc = tcase_create("sigterm");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_sigterm_with_clients);
  tcase_add_test(tc, test_sigterm_tells_every_client);
  tcase_add_test(tc, test_shutdown_timeout);
  suite_add_tcase(su, tc);
  return ts_dproc_run_suite(su);
}
