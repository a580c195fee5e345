/*
 * itest_shutdown.c: a daemon with live clients stops cleanly. Two clients
 * (a controller pressing the patch and an observer) are receiving frames when
 * the daemon gets SIGTERM; it must exit with status 0 within 5 s, and both
 * clients must see their connection end rather than hang.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "tissueclient.h"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct counter {
  long frames;
  int shutdown_errors; /* Error TS_ESHUTDOWN received (allowed, not required) */
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
  ck_assert_int_eq(ca.other_errors, 0);
  ck_assert_int_eq(cb.other_errors, 0);
  tc_close(a);
  tc_close(b);
}
END_TEST

int main(void) {
  Suite *su = suite_create("shutdown");
  TCase *tc = tcase_create("sigterm");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_sigterm_with_clients);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  ts_dproc_scratch_begin();
  srunner_run_all(sr, CK_NORMAL);
  ts_dproc_scratch_end();
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
