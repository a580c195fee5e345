/*
 * test_auth.c: Check suite for the comma-separated lists of server/auth.c:
 * server keys (blanks around an entry and empty entries skipped, each key
 * checked), the WebSocket Origin test against allowed-origins, and the
 * check of an allowed-origins list at the start (an entry no browser's
 * Origin can equal is refused there, not silently never matched).
 */
#include "ts_check.h"
#include <string.h>

#include "auth.h"

START_TEST(test_keys) {
  ts_keyring k;
  char err[256] = "";
  ck_assert_int_eq(ts_auth_parse_keys(" ,key-one-1234567890 ,, key-two-1234567890,  ", &k, err,
                                      sizeof err),
                   0);
  ck_assert_int_eq(k.n, 2);
  ck_assert_str_eq(k.key[0], "key-one-1234567890");
  ck_assert_str_eq(k.key[1], "key-two-1234567890");
  ck_assert_int_eq(ts_auth_key_index(&k, "key-two-1234567890"), 1);
  ck_assert_int_eq(ts_auth_parse_keys("key-one-1234567890, short", &k, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "server key 2 is 5 characters"), "%s", err);
  ck_assert_int_eq(ts_auth_parse_keys(" , ,", &k, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "no server key given"), "%s", err);
}
END_TEST

START_TEST(test_origin_allowed) {
  const char *list = " https://sim.example.org ,, http://room2:8080 ";
  /* no Origin (not a browser), and the daemon's own page */
  ck_assert(ts_auth_origin_allowed(NULL, "127.0.0.1:8080", list));
  ck_assert(ts_auth_origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080", NULL));
  /* listed: exactly, case aside */
  ck_assert(ts_auth_origin_allowed("https://sim.example.org", "h:1", list));
  ck_assert(ts_auth_origin_allowed("HTTPS://SIM.example.org", "h:1", list));
  ck_assert(ts_auth_origin_allowed("http://room2:8080", "h:1", list));
  /* not listed */
  ck_assert(!ts_auth_origin_allowed("http://sim.example.org", "h:1", list));
  ck_assert(!ts_auth_origin_allowed("https://sim.example.org:444", "h:1", list));
  ck_assert(!ts_auth_origin_allowed("http://room2", "h:1", list));
  ck_assert(!ts_auth_origin_allowed("https://evil.example", "h:1", NULL));
  ck_assert(ts_auth_origin_allowed("https://evil.example", "h:1", "https://a.org, *"));
}
END_TEST

START_TEST(test_origins_check) {
  char err[256];
  static const char *const good[] = {"",
                                     "*",
                                     "https://sim.example.org",
                                     " https://a.org , http://room2:8080 ,",
                                     "http://[::1]:8080",
                                     "chrome-extension://abcdef"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    ck_assert_msg(ts_auth_origins_check(good[i], err, sizeof err) == 0, "'%s': %s", good[i], err);
  static const struct {
    const char *list, *needle;
  } bad[] = {
      {"sim.example.org", "'sim.example.org' is not an origin"},
      {"https://a.org, https://b.org/", "'https://b.org/' has a path"},
      {"https://a.org/app", "'https://a.org/app' is not an origin"},
      {"https://", "is not an origin"},
      {"https:///", "is not an origin"},
      {"1http://a.org", "is not an origin"},
      {"https://a.org?x", "is not an origin"},
      {"null", "'null' is not an origin"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    ck_assert_int_eq(ts_auth_origins_check(bad[i].list, err, sizeof err), -1);
    ck_assert_msg(strstr(err, bad[i].needle), "'%s': '%s' lacks '%s'", bad[i].list, err,
                  bad[i].needle);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("auth");
  TCase *tc = tcase_create("lists");
  tcase_add_test(tc, test_keys);
  tcase_add_test(tc, test_origin_allowed);
  tcase_add_test(tc, test_origins_check);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
