/*
 * test_config.c: the daemon's settings: embedded defaults, INI file, flags,
 * and clear refusals of bad values (server/config.c).
 */
#include "ts_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

START_TEST(test_defaults) {
  ts_config c;
  ts_config_defaults(&c);
  ck_assert_str_eq(c.host, "127.0.0.1");
  ck_assert_int_eq(c.tcp_port, 7070);
  ck_assert_int_eq(c.http_port, 8080);
  ck_assert_str_eq(c.data_dir, "data");
  ck_assert_double_eq(c.dt, 0.001);
  ck_assert_int_eq(c.frame_rate, 60);
  ck_assert_int_eq(c.log_level, TS_LOG_INFO);
  ck_assert_uint_le(c.soft_output_limit, c.hard_output_limit);
  ck_assert_double_eq(c.qs_refine_edge, -1); /* auto: refined quasi-static solves */
  ck_assert_double_eq(c.sleep_speed, 1e-6);   /* sessions at rest sleep */
  ck_assert_int_eq(c.builder_nice, 10);        /* builds take what the physics leaves */
  ck_assert_double_eq(c.slow_lane_load, 1);    /* what cannot keep real time moves */
  ck_assert_int_eq(c.slow_lane_nice, 10);
  ck_assert_int_eq(c.rebalance, 1);
  ck_assert_int_eq(c.session_trial, 1);
  ck_assert(c.max_step_load == 0);
}
END_TEST

START_TEST(test_flags) {
  ts_config c;
  ts_config_defaults(&c);
  char err[256] = "";
  char *argv[] = {"tissued", "--tcp-port", "0", "--http-port=9090", "--dt", "0.0005",
                  "--log-level", "debug", "--data-dir", "/tmp/x", NULL};
  ck_assert_int_eq(ts_config_parse_args(&c, 10, argv, err, sizeof err), 0);
  ck_assert_int_eq(c.tcp_port, 0);
  ck_assert_int_eq(c.http_port, 9090);
  ck_assert_double_eq(c.dt, 0.0005);
  ck_assert_int_eq(c.log_level, TS_LOG_DEBUG);
  ck_assert_str_eq(c.data_dir, "/tmp/x");
  /* the refined quasi-static solve: off, a length, back to auto */
  char *a2[] = {"tissued", "--qs-refine-edge", "0", NULL};
  ck_assert_int_eq(ts_config_parse_args(&c, 3, a2, err, sizeof err), 0);
  ck_assert_double_eq(c.qs_refine_edge, 0);
  char *a3[] = {"tissued", "--qs-refine-edge=0.002", NULL};
  ck_assert_int_eq(ts_config_parse_args(&c, 2, a3, err, sizeof err), 0);
  ck_assert_double_eq(c.qs_refine_edge, 0.002);
  char *a4[] = {"tissued", "--qs-refine-edge", "auto", NULL};
  ck_assert_int_eq(ts_config_parse_args(&c, 3, a4, err, sizeof err), 0);
  ck_assert_double_eq(c.qs_refine_edge, -1);
  char *a5[] = {"tissued", "--sleep-speed", "0", NULL}; /* never sleep */
  ck_assert_int_eq(ts_config_parse_args(&c, 3, a5, err, sizeof err), 0);
  ck_assert_double_eq(c.sleep_speed, 0);
}
END_TEST

/* Each bad argument list is refused with a message naming the problem. */
START_TEST(test_bad_flags) {
  static const struct {
    const char *argv[4];
    const char *needle;
  } cases[] = {
      {{"tissued", "--tcp-port", "70000", NULL}, "tcp-port"},
      {{"tissued", "--tcp-port", "12x", NULL}, "whole number"},
      {{"tissued", "--dt", "nan", NULL}, "dt"},
      {{"tissued", "--dt", "1", NULL}, "[1e-05, 0.01]"},
      {{"tissued", "--no-such", "1", NULL}, "unknown setting"},
      {{"tissued", "--log-level", "loud", NULL}, "error, warn, info, debug"},
      {{"tissued", "--max-message", "-5", NULL}, "max-message"},
      /* strtoull skips blanks and negates a '-' number modulo 2^64: this one
       * came out 1024 and was accepted (found by fuzz_config) */
      {{"tissued", "--max-message", " -18446744073709550592", NULL}, "not a size"},
      {{"tissued", "--hard-output-limit", "\t-18446744073709543424", NULL}, "not a size"},
      /* bounds of whole numbers and sizes as digits, not as 1.07374e+09 */
      {{"tissued", "--max-message", "0", NULL},
       "max-message: '0' is not a size in [1024, 1073741824] bytes"},
      {{"tissued", "--max-training-samples", "0", NULL},
       "max-training-samples: '0' is not a whole number in [1, 100000000]"},
      {{"tissued", "--frame-rate", NULL, NULL}, "needs a value"},
      {{"tissued", "stray", NULL, NULL}, "unexpected argument"},
      {{"tissued", "--qs-refine-edge", "-1", NULL}, "[0, 0.1] or auto"},
      /* a tissue moving 1 m/s must not be put to sleep */
      {{"tissued", "--sleep-speed", "1", NULL}, "sleep-speed: '1' is not a number in [0, 0.01]"},
      {{"tissued", "--sleep-speed", "-1e-6", NULL}, "sleep-speed"},
      {{"tissued", "--builder-nice", "20", NULL}, "builder-nice: '20' is not a whole number in [0, 19]"},
      {{"tissued", "--builder-nice", "-1", NULL}, "builder-nice"},
      {{"tissued", "--slow-lane-load", "-1", NULL}, "slow-lane-load: '-1' is not a number in [0, 1000]"},
      {{"tissued", "--slow-lane-load", "nan", NULL}, "slow-lane-load"},
      {{"tissued", "--slow-lane-nice", "20", NULL}, "slow-lane-nice: '20' is not a whole number in [0, 19]"},
      {{"tissued", "--rebalance", "2", NULL}, "rebalance: '2' is not a whole number in [0, 1]"},
      {{"tissued", "--session-trial", "-1", NULL},
       "session-trial: '-1' is not a whole number in [0, 1]"},
      {{"tissued", "--max-step-load", "-1", NULL},
       "max-step-load: '-1' is not a number in [0, 1e+06]"},
      {{"tissued", "--qs-refine-edge", "automatic", NULL}, "or auto"},
      /* an entry no browser's Origin can equal: the pages it was meant for
       * were refused at the upgrade, with nothing said at the start */
      {{"tissued", "--allowed-origins", "sim.example.org", NULL}, "'sim.example.org' is not an origin"},
      {{"tissued", "--allowed-origins", "https://a.org, https://b.org/", NULL},
       "'https://b.org/' has a path"},
      {{"tissued", "--allowed-origins", "https://a.org/app", NULL}, "is not an origin"},
      {{"tissued", "--allowed-origins", "https://", NULL}, "is not an origin"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_config c;
    ts_config_defaults(&c);
    char err[256] = "";
    int argc = 0;
    while (argc < 4 && cases[i].argv[argc]) argc++;
    ck_assert_int_eq(ts_config_parse_args(&c, argc, (char **)cases[i].argv, err, sizeof err), -1);
    ck_assert_msg(strstr(err, cases[i].needle) != NULL, "case %zu: '%s' lacks '%s'", i, err,
                  cases[i].needle);
  }
  /* a limit on the trial's load needs the trial */
  {
    ts_config c;
    ts_config_defaults(&c);
    char err[256] = "";
    char *argv[] = {"tissued", "--max-step-load", "100", "--session-trial", "0", NULL};
    ck_assert_int_eq(ts_config_parse_args(&c, 5, argv, err, sizeof err), -1);
    ck_assert_str_eq(err, "max-step-load needs session-trial 1 (the trial steps measure the load)");
    ts_config_defaults(&c);
    char *ok[] = {"tissued", "--max-step-load", "100", NULL};
    ck_assert_int_eq(ts_config_parse_args(&c, 3, ok, err, sizeof err), 0);
    ck_assert(c.max_step_load == 100);
  }
  /* and what a browser sends is taken: scheme://host[:port], or * */
  static const char *const good[] = {"https://sim.example.org, http://room2:8080", "*",
                                     " http://[::1]:8080 ,", ""};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    ts_config c;
    ts_config_defaults(&c);
    char err[256] = "";
    ck_assert_msg(ts_config_set(&c, "allowed-origins", good[i], err, sizeof err) == 0, "'%s': %s",
                  good[i], err);
    ck_assert_str_eq(c.allowed_origins, good[i]);
  }
}
END_TEST

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* A file's first error is named by its own line and reason: a line inih
 * cannot read before a setting that fails on a later one (was: the later
 * setting's reason at the earlier line), an unclosed section header, a
 * setting before any section, a line longer than inih reads whole (was:
 * its tail taken for the next line, and the error put there). */
START_TEST(test_ini_errors) {
  char long_comment[320];
  memset(long_comment, 'x', sizeof long_comment);
  memcpy(long_comment, "[server]\n; ", 11);
  memcpy(long_comment + 300, "\nframe-rate = 30\n", 18);
  long_comment[318] = '\0';
  char edge[260]; /* a 198-character comment: the longest line taken */
  memset(edge, 'y', sizeof edge);
  memcpy(edge, "[server]\n;", 10);
  memcpy(edge + 9 + 198, "\nframe-rate = 30\n", 18);
  edge[9 + 198 + 18] = '\0';
  static const struct {
    const char *text, *needle, *also;
  } cases[] = {
      {"[server]\ngarbage\ndt = -1\n", "t.ini:2: not a setting", NULL},
      {"[server]\ndt = -1\ngarbage\n", "t.ini:2: dt:", NULL},
      {"[server\nhttp_port = 8181\n", "t.ini:1: a section header without its closing ']'", NULL},
      {"[server]\n  [client\n", "t.ini:2: a section header without", NULL},
      {"http_port = 8181\n[server]\n", "t.ini:1: http_port: a setting before the [server] section", NULL},
      {"[client]\nx = 1\n", "t.ini:2: unknown section [client]", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_config c;
    ts_config_defaults(&c);
    char err[256] = "";
    ck_assert_int_eq(ts_config_load_text(&c, cases[i].text, "t.ini", err, sizeof err), -1);
    ck_assert_msg(strstr(err, cases[i].needle) != NULL, "case %zu: '%s' lacks '%s'", i, err,
                  cases[i].needle);
  }
  ts_config c;
  ts_config_defaults(&c);
  char err[256] = "";
  ck_assert_int_eq(ts_config_load_text(&c, long_comment, "t.ini", err, sizeof err), -1);
  ck_assert_msg(strstr(err, "t.ini:2: 291 characters, over the 198"), "%s", err);
  ts_config_defaults(&c);
  ck_assert_int_eq(ts_config_load_text(&c, edge, "t.ini", err, sizeof err), 0);
  ck_assert_int_eq(c.frame_rate, 30);
}
END_TEST

START_TEST(test_ini_file) {
  char dir[] = "/tmp/ts-config-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/t.ini", dir);
  write_file(path, "; comment\n[server]\nhttp_port = 8181\nframe-rate = 30\n");
  ts_config c;
  ts_config_defaults(&c);
  char err[256] = "";
  /* the file first, then a later flag overrides it */
  char *argv[] = {"tissued", "--config", path, "--frame-rate", "20", NULL};
  ck_assert_int_eq(ts_config_parse_args(&c, 5, argv, err, sizeof err), 0);
  ck_assert_int_eq(c.http_port, 8181);
  ck_assert_int_eq(c.frame_rate, 20);

  write_file(path, "[server]\nhttp_port = 8181\n\ndt = 5\n");
  ts_config_defaults(&c);
  ck_assert_int_eq(ts_config_load_file(&c, path, err, sizeof err), -1);
  ck_assert_msg(strstr(err, ":4:") && strstr(err, "dt"), "line and key named: %s", err);

  write_file(path, "[client]\nx = 1\n");
  ck_assert_int_eq(ts_config_load_file(&c, path, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "[client]"), "%s", err);

  snprintf(path, sizeof path, "%s/missing.ini", dir);
  ck_assert_int_eq(ts_config_load_file(&c, path, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "cannot open"), "%s", err);
  /* not a text file: a directory (was: the defaults, silently), a device
   * (was: read for ever), a NUL byte (was: the end of the file) */
  ck_assert_int_eq(ts_config_load_file(&c, dir, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
  ck_assert_int_eq(ts_config_load_file(&c, "/dev/zero", err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
  snprintf(path, sizeof path, "%s/t.ini", dir);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  static const char nul_text[] = "[server]\nhttp_port = 8181\n\0frame-rate = 30\n";
  fwrite(nul_text, 1, sizeof nul_text - 1, f);
  fclose(f);
  ts_config_defaults(&c);
  ck_assert_int_eq(ts_config_load_file(&c, path, err, sizeof err), -1);
  ck_assert_msg(strstr(err, ":3: a NUL byte"), "%s", err);
  snprintf(path, sizeof path, "%s/t.ini", dir);
  unlink(path);
  rmdir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("config");
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_flags);
  tcase_add_test(tc, test_bad_flags);
  tcase_add_test(tc, test_ini_file);
  tcase_add_test(tc, test_ini_errors);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
