/*
 * bench_sessions.c: N sessions of the built-in patch on a real daemon for
 * the benchmarks (see bench_sessions.h).
 */
#include "bench_sessions.h"

#include <math.h>
#include <stdio.h>

#include "bench_report.h"

static char page[1 << 20];

int ts_bench_sessions_start(ts_bench_sessions *b, const char *name, const char *key,
                            const char *const *extra, int n) {
  b->c = NULL;
  b->n = n;
  if (ts_bench_daemon_start(&b->d, TS_TISSUED_BIN, key, extra)) {
    fprintf(stderr, "%s: the daemon did not start\n", name);
    return -1;
  }
  char err[256];
  b->c = tc_connect_key("127.0.0.1", b->d.tcp, name, key, 0, err, sizeof err);
  if (!b->c) {
    fprintf(stderr, "%s: connect: %s\n", name, err);
    ts_bench_sessions_stop(b);
    return -1;
  }
  tc_set_timeout(b->c, 600000);
  for (int i = 0; i < n; i++) {
    uint32_t sid;
    if (tc_create_session(b->c, "stomach-patch", &sid, NULL, NULL)) {
      fprintf(stderr, "%s: session %d not created: %s\n", name, i + 1, tc_last_error(b->c));
      ts_bench_sessions_stop(b);
      return -1;
    }
  }
  ts_bench_sleep_ms(2000); /* the sessions under way */
  return 0;
}

double ts_bench_sessions_metric(const ts_bench_sessions *b, const char *metric) {
  if (!ts_bench_daemon_get(&b->d, "/metrics", page, sizeof page)) return NAN;
  return ts_bench_metric_sum(page, metric);
}

double ts_bench_sessions_share(const ts_bench_sessions *b, double window_s) {
  const double s0 = ts_bench_sessions_metric(b, "tissued_session_steps_total");
  const double t0 = ts_bench_wall_s();
  ts_bench_sleep_ms((int)(window_s * 1000));
  const double s1 = ts_bench_sessions_metric(b, "tissued_session_steps_total");
  const double t1 = ts_bench_wall_s();
  return (s1 - s0) / ((t1 - t0) * 1000.0 * b->n);
}

void ts_bench_sessions_stop(ts_bench_sessions *b) {
  if (b->c) tc_close(b->c);
  b->c = NULL;
  ts_bench_daemon_stop(&b->d);
}
