/*
 * itest_tissueload.c: the load generator (client-c/tissueload.c, issue 7),
 * run as its users run it, against a real daemon (daemon_proc.h):
 *   - --help (and -h) names the options the benchmark and the README use,
 *     and usage errors exit 2 before connecting, each with a message (a
 *     --daemon-pid that is no process among them: it used to leave the CPU
 *     figures out without a word; a count, port or pid with a fraction:
 *     they used to be cut to a whole number, --controllers 0.5 to none;
 *     --controllers 0; a --record-* option without --record, once ignored);
 *   - failures leave no session on the daemon: a --record FILE that cannot
 *     be written is refused (status 2) before anything connects (it used to
 *     fail after the sessions were made and leave them), a refused
 *     CreateSession (status 3, one {"refused":..} line, also for a wrong
 *     key) and a client that cannot join end the sessions made before them;
 *   - a short bounded run, one session with WebSocket observers and a TCP
 *     controller: one JSON object whose counts hold together (every client
 *     alive, frames at every client, no drops, errors or decode errors,
 *     pose-to-frame and pose-to-force latencies measured with p50 <= p99 <=
 *     max) and the daemon's CPU split over the measured time.
 * Every run of the binary is bounded in time (killed after RUN_LIMIT_MS).
 */
#include "ts_check.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binrun.h"
#include "daemon_proc.h"

#define RUN_LIMIT_MS 60000

static void run_load(ts_binrun *o, const char *const *args) {
  const char *bin = getenv("TISSUELOAD_BIN");
  ck_assert_msg(bin && *bin, "TISSUELOAD_BIN is not set");
  ts_binrun_v(o, bin, RUN_LIMIT_MS, args);
}

#define run_tl(o, ...)                            \
  do {                                            \
    const char *const a_[] = {__VA_ARGS__, NULL}; \
    run_load((o), a_);                            \
  } while (0)

/* the number after "key": inside the object named obj ("obj":{...}) */
static double jsub(const char *line, const char *obj, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":{", obj);
  const char *p = strstr(line, pat);
  ck_assert_msg(p != NULL, "no %s in %s", obj, line);
  const char *end = strchr(p, '}');
  double v = ts_binrun_jnum(p, key);
  const char *at = strstr(p, key);
  ck_assert_msg(at && end && at < end, "no %s.%s in %s", obj, key, line);
  return v;
}

static void expect_usage_error(ts_binrun *o, const char *what) {
  ck_assert_msg(o->status != 0 && o->status != -1, "exit %d; stderr: %s", o->status, o->err);
  ck_assert_msg(strstr(o->err, what) != NULL, "stderr lacks '%s': %s", what, o->err);
  ck_assert_msg(strncmp(o->err, "tissueload: ", 12) == 0, "message not prefixed: %s", o->err);
  ck_assert_msg(o->n_out == 0, "usage error printed on stdout: %s", o->out);
}

START_TEST(test_help_and_usage) {
  static ts_binrun o, h;
  run_tl(&o, "--help");
  ck_assert_int_eq(o.status, 0);
  const char *opts[] = {"--sessions", "--observers", "--controllers", "--transport",
                        "--duration", "--substeps", "--daemon-pid", "--record", "--ports-file"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    ck_assert_msg(strstr(o.out, opts[i]) != NULL, "--help does not mention %s", opts[i]);
  ck_assert_msg(strstr(o.out, "3 the daemon refused CreateSession"), "%s", o.out);
  run_tl(&h, "-h"); /* it used to say "-h needs a value" */
  ck_assert_msg(h.status == 0, "-h: exit %d; stderr: %s", h.status, h.err);
  ck_assert_str_eq(h.out, o.out);
  /* whole numbers only, each refused with status 2 and the option named */
  const char *const frac[][2] = {{"--sessions", "1.7"},  {"--controllers", "0.5"},
                                 {"--controllers", "0"}, {"--daemon-pid", "1.5"},
                                 {"--observers", "2.5"}, {"--record-frames", "1.5"},
                                 {"--frame-rate", "29.5"}};
  for (size_t i = 0; i < sizeof frac / sizeof frac[0]; i++) {
    char want[80];
    snprintf(want, sizeof want, "bad value '%s' for %s", frac[i][1], frac[i][0]);
    run_tl(&o, "--tcp-port", "1", "--record", "/dev/null", frac[i][0], frac[i][1]);
    expect_usage_error(&o, want);
    ck_assert_msg(o.status == 2, "%s %s: exit %d", frac[i][0], frac[i][1], o.status);
  }
  /* a layer list with an empty element (strtok took ",,3,," as "3") */
  run_tl(&o, "--tcp-port", "1", "--layers", ",,3,,");
  expect_usage_error(&o, "bad value ',,3,,' for --layers");
  ck_assert_int_eq(o.status, 2);
  run_tl(&o, "--tcp-port", "1.5");
  expect_usage_error(&o, "bad value '1.5' for --tcp-port");
  ck_assert_int_eq(o.status, 2);
  /* a --record-* option without --record would be ignored */
  run_tl(&o, "--tcp-port", "1", "--record-frames", "10");
  expect_usage_error(&o, "--record-frames needs --record");
  ck_assert_int_eq(o.status, 2);
  run_tl(&o, "--tcp-port", "1", "--record-start", "0.5");
  expect_usage_error(&o, "--record-start needs --record");
  ck_assert_int_eq(o.status, 2);
  run_tl(&o, "--frobnicate", "1");
  expect_usage_error(&o, "unknown option --frobnicate");
  run_tl(&o, "--tcp-port", "1", "--sessions", "0");
  expect_usage_error(&o, "bad value '0' for --sessions");
  run_tl(&o, "--observers", "2", "--transport", "ws", "--tcp-port", "1");
  expect_usage_error(&o, "need --http-port");
  /* a pid that is no process: pid_max is at most 4194304, and the parser
   * takes up to that; the highest pids are the least likely to exist */
  char pid[32] = "";
  for (int p = 4194304; p > 4194000; p--)
    if (kill(p, 0) != 0) {
      snprintf(pid, sizeof pid, "%d", p);
      break;
    }
  ck_assert(pid[0]);
  run_tl(&o, "--tcp-port", "1", "--daemon-pid", pid);
  expect_usage_error(&o, "--daemon-pid");
  ck_assert_msg(strstr(o.err, "cannot read /proc/"), "%s", o.err);
}
END_TEST

START_TEST(test_short_run) {
  ts_dproc d;
  char err[256];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  char ports[320], pid[32];
  snprintf(ports, sizeof ports, "%s/ports.json", d.dir);
  snprintf(pid, sizeof pid, "%d", (int)d.pid);
  static ts_binrun o;
  /* poses at 200 Hz and observers at 30 Hz: light enough for a sanitizer
   * build on a loaded machine; the physics runs at the daemon's rate */
  run_tl(&o, "--ports-file", ports, "--key", TS_DPROC_KEY, "--sessions", "1", "--observers", "3",
         "--observer-transport", "ws", "--controllers", "1", "--controller-transport", "tcp",
         "--warmup", "0.5", "--duration", "2", "--pose-rate", "200", "--frame-rate", "30",
         "--decode", "all", "--daemon-pid", pid, "--quiet");
  ck_assert_msg(o.status == 0, "exit %d; stderr: %s", o.status, o.err);
  char *v[4];
  ck_assert_int_eq(ts_binrun_lines(&o, v, 4), 1);
  const char *l = v[0];
  printf("tissueload: %s\n", l);
  ck_assert_double_eq(ts_binrun_jnum(l, "clients"), 4);
  ck_assert_double_eq(ts_binrun_jnum(l, "clients_alive"), 4);
  ck_assert(ts_binrun_jnum(l, "measured_s") >= 1.5);
  ck_assert(ts_binrun_jnum(l, "min_client_frames_per_s") > 0);
  ck_assert(ts_binrun_jnum(l, "bytes_per_frame") > 0);
  ck_assert(ts_binrun_jnum(l, "poses_sent") > 0);
  const char *zero[] = {"dropped", "errors", "decode_errors", "send_failures"};
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
    ck_assert_msg(ts_binrun_jnum(l, zero[i]) == 0, "%s is %g", zero[i], ts_binrun_jnum(l, zero[i]));
  const char *hist[] = {"pose_to_frame_ms", "pose_to_force_ms"};
  for (size_t i = 0; i < 2; i++) {
    double n = jsub(l, hist[i], "n"), p50 = jsub(l, hist[i], "p50"), p99 = jsub(l, hist[i], "p99"),
           mx = jsub(l, hist[i], "max");
    ck_assert_msg(n > 0, "%s: no samples", hist[i]);
    ck_assert_msg(p50 > 0 && p50 <= p99 && p99 <= mx * 1.001 + 1e-9, "%s: p50 %g p99 %g max %g",
                  hist[i], p50, p99, mx);
  }
  /* the daemon's CPU over the measured time: its loop thread, its total */
  double total = jsub(l, "daemon_cpu_cores", "total"), loop = jsub(l, "daemon_cpu_cores", "loop");
  ck_assert_msg(total > 0 && loop >= 0 && loop <= total, "daemon cores %g, loop %g", total, loop);
  ck_assert(ts_binrun_jnum(l, "load_cpu_cores") >= 0);
  ck_assert(strstr(l, "daemon_cpu_error") == NULL);
  char why[128];
  ck_assert_int_eq(ts_dproc_stop(&d, 10000, why, sizeof why), 0);
}
END_TEST

/* The daemon's live sessions once they settle (an ended session is counted
 * until its physics thread lets it go): polled for at most 5 s. */
static double sessions_settled(const ts_dproc *d) {
  double n = -1;
  for (int i = 0; i < 100; i++) {
    n = ts_dproc_metric(d->http_port, "tissued_sessions");
    if (n == 0) break;
    usleep(50000);
  }
  return n;
}

START_TEST(test_failures_leave_no_session) {
  ts_dproc d;
  char err[256];
  const char *const extra[] = {"--max-sessions", "2", "--max-tools", "1", NULL};
  ck_assert_msg(ts_dproc_start(&d, extra, err, sizeof err) == 0, "%s", err);
  char ports[320], missing[320];
  snprintf(ports, sizeof ports, "%s/ports.json", d.dir);
  snprintf(missing, sizeof missing, "%s/no-such-dir/rec.bin", d.dir);
  static ts_binrun o;
  /* a --record FILE it cannot write: refused before anything connects */
  const double msgs = ts_dproc_metric(d.http_port, "tissued_messages_in_total");
  ck_assert(msgs >= 0);
  const char *const bad_rec[] = {d.dir, missing};
  for (int i = 0; i < 2; i++) {
    run_tl(&o, "--ports-file", ports, "--key", TS_DPROC_KEY, "--record", bad_rec[i],
           "--duration", "0.5", "--warmup", "0", "--quiet");
    expect_usage_error(&o, "--record");
    ck_assert_msg(o.status == 2, "--record %s: exit %d; stderr: %s", bad_rec[i], o.status, o.err);
    ck_assert_msg(strstr(o.err, bad_rec[i]), "stderr does not name %s: %s", bad_rec[i], o.err);
  }
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_messages_in_total"), msgs);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_sessions"), 0);
  ck_assert_msg(access(missing, F_OK) != 0, "%s was made", missing);
  /* a wrong key: CreateSession refused, status 3 and why */
  run_tl(&o, "--ports-file", ports, "--key", "not-the-server-key-0000", "--quiet");
  ck_assert_msg(o.status == 3, "exit %d; stderr: %s", o.status, o.err);
  char *v[4];
  ck_assert_int_eq(ts_binrun_lines(&o, v, 4), 1);
  ck_assert_msg(strstr(v[0], "\"refused\"") && strstr(v[0], "TS_EAUTH"), "%s", v[0]);
  /* the third session over the daemon's limit: the two made before it end */
  run_tl(&o, "--ports-file", ports, "--key", TS_DPROC_KEY, "--sessions", "3", "--quiet");
  ck_assert_msg(o.status == 3, "exit %d; stderr: %s", o.status, o.err);
  ck_assert_int_eq(ts_binrun_lines(&o, v, 4), 1);
  ck_assert_msg(strstr(v[0], "\"refused\"") && strstr(v[0], "TS_EFULL"), "%s", v[0]);
  ck_assert_msg(sessions_settled(&d) == 0, "sessions left after a refused CreateSession");
  /* a second controller finds no tool: the session its first one joined ends */
  run_tl(&o, "--ports-file", ports, "--key", TS_DPROC_KEY, "--controllers", "2", "--quiet");
  ck_assert_msg(o.status == 1, "exit %d; stderr: %s", o.status, o.err);
  ck_assert_msg(strstr(o.err, "controller 2"), "%s", o.err);
  ck_assert_msg(sessions_settled(&d) == 0, "a session left after a client failed to join");
  /* controllers that cannot connect at all (WebSocket to port 1, where
   * nothing listens on loopback): the connection that created the sessions
   * ends them */
  char tcp[16];
  snprintf(tcp, sizeof tcp, "%d", d.tcp_port);
  run_tl(&o, "--tcp-port", tcp, "--http-port", "1", "--key", TS_DPROC_KEY, "--sessions", "2",
         "--controller-transport", "ws", "--quiet");
  ck_assert_msg(o.status == 1, "exit %d; stderr: %s", o.status, o.err);
  ck_assert_msg(strstr(o.err, "controller 1 over ws"), "%s", o.err);
  ck_assert_msg(strstr(o.err, "could not end") == NULL, "%s", o.err);
  ck_assert_msg(sessions_settled(&d) == 0, "sessions left when no controller joined");
  char why[128];
  ck_assert_int_eq(ts_dproc_stop(&d, 10000, why, sizeof why), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tissueload");
  TCase *tc = tcase_create("tissueload");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_help_and_usage);
  tcase_add_test(tc, test_short_run);
  tcase_add_test(tc, test_failures_leave_no_session);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
