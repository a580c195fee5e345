/*
 * test_ctl_args.c: Check suite for tissuectl's command line (client-c/
 * ctl_args.c, compiled in): how long a request waits for its reply. A
 * create waits 120 s unless --timeout says otherwise (the daemon builds a
 * large uploaded mesh for tens of seconds, and a client that gave up at 10 s
 * had its session built for nothing); every other command 10 s.
 */
#include "ts_check.h"

#include "ctl_args.h"

static double timeout_of(int argc, char **argv) {
  ctl_args o;
  ck_assert_int_eq(ctl_parse_args(argc, argv, "k", &o), CTL_RUN);
  return o.timeout;
}

START_TEST(test_timeouts) {
  char *create[] = {"tissuectl", "create", NULL};
  ck_assert_double_eq(timeout_of(2, create), 120000);
  char *upload[] = {"tissuectl", "create", "--mesh", "organ.obj", NULL};
  ck_assert_double_eq(timeout_of(4, upload), 120000);
  char *given[] = {"tissuectl", "--timeout", "5000", "create", NULL};
  ck_assert_double_eq(timeout_of(4, given), 5000);
  char *longer[] = {"tissuectl", "--timeout", "300000", "create", NULL};
  ck_assert_double_eq(timeout_of(4, longer), 300000);
  char *sessions[] = {"tissuectl", "sessions", NULL};
  ck_assert_double_eq(timeout_of(2, sessions), 10000);
  char *sessions_given[] = {"tissuectl", "--timeout", "2500", "sessions", NULL};
  ck_assert_double_eq(timeout_of(4, sessions_given), 2500);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ctl_args");
  TCase *tc = tcase_create("timeout");
  tcase_add_test(tc, test_timeouts);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
