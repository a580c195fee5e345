/*
 * bench_build.c: what a large upload's build costs the sessions already
 * running (server/create.c: tissues are built on the builder thread, at
 * --builder-nice). A real tissued on loopback steps N sessions of its
 * built-in patch at 1 kHz (--sleep-speed 0, so that none sleeps); the
 * benchmark reads their steps (/metrics tissued_session_steps_total) over a
 * window with nothing else going on (the reference, same daemon, same run),
 * then over a session's creation from an uploaded mesh (a gently curved
 * grid made here, GRID x GRID vertices, in the default three layers, built
 * while the N sessions step). Each line gives the sessions' share of their
 * 1 kHz steps during the build beside the share in the quiet window, the
 * build's wall time, and the builder's niceness. The same is run once per
 * niceness asked (default: 10, the daemon's default, and 0, the physics
 * threads' own priority), each in a daemon of its own, alternately.
 *
 *   bench_build [--quick | --full] [sessions-N ...]   (default: sessions-4 sessions-6)
 *
 * --quick: sessions-4 only, a 160 x 160 grid (51,000 triangles), 3 s
 * windows; default: a 217 x 217 grid (93,000 triangles, about the size of
 * spot.obj subdivided twice), 5 s windows; --full: also sessions-2, 10 s.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/grid_obj.h"
#include "bench_daemon.h"
#include "bench_report.h"
#include "tissueclient.h"

#define BENCH_KEY "bench-server-key-5e2d9a71"
#define MAX_SESSIONS 16

static double steps_now(const ts_bench_daemon *d) {
  static char page[1 << 20];
  if (!ts_bench_daemon_get(d, "/metrics", page, sizeof page)) return NAN;
  return ts_bench_metric_sum(page, "tissued_session_steps_total");
}

typedef struct result {
  double quiet_share;  /* the sessions' steps over n x 1 kHz, nothing else going on */
  double build_share;  /* the same during the build */
  double build_s;      /* the build's wall time (request to reply) */
} result;

/* One daemon at builder niceness nice: n sessions, a quiet window, a build.
 * 0 or -1. */
static int measure(int n, int nice, const char *obj, size_t len, double window, result *r) {
  char nice_s[16];
  snprintf(nice_s, sizeof nice_s, "%d", nice);
  const char *extra[] = {"--sleep-speed", "0", "--builder-nice", nice_s, NULL};
  ts_bench_daemon d;
  if (ts_bench_daemon_start(&d, TS_TISSUED_BIN, BENCH_KEY, extra)) {
    fprintf(stderr, "build: the daemon did not start\n");
    return -1;
  }
  int rc = -1;
  char err[256];
  tc_client *c = tc_connect_key("127.0.0.1", d.tcp, "bench-build", BENCH_KEY, 0, err, sizeof err);
  if (!c) {
    fprintf(stderr, "build: connect: %s\n", err);
    goto out;
  }
  tc_set_timeout(c, 600000);
  for (int i = 0; i < n; i++) {
    uint32_t sid;
    if (tc_create_session(c, "stomach-patch", &sid, NULL, NULL)) {
      fprintf(stderr, "build: session %d not created: %s\n", i + 1, tc_last_error(c));
      goto out;
    }
  }
  ts_bench_sleep_ms(2000); /* the sessions under way */
  double s0 = steps_now(&d), t0 = ts_bench_wall_s();
  ts_bench_sleep_ms((int)(window * 1000));
  double s1 = steps_now(&d), t1 = ts_bench_wall_s();
  r->quiet_share = (s1 - s0) / ((t1 - t0) * 1000.0 * n);
  uint32_t big;
  s0 = steps_now(&d);
  t0 = ts_bench_wall_s();
  if (tc_create_session_mesh(c, TC_MESH_OBJ, obj, len, 1.0, NULL, 0, NULL, &big, NULL, NULL)) {
    fprintf(stderr, "build: the upload failed: %s\n", tc_last_error(c));
    goto out;
  }
  t1 = ts_bench_wall_s();
  s1 = steps_now(&d);
  r->build_share = (s1 - s0) / ((t1 - t0) * 1000.0 * n);
  r->build_s = t1 - t0;
  rc = isfinite(r->quiet_share) && isfinite(r->build_share) ? 0 : -1;
out:
  if (c) tc_close(c);
  ts_bench_daemon_stop(&d); /* the upload's session (which steps far slower than real time) with it */
  return rc;
}

int main(int argc, char **argv) {
  int quick = 0, full = 0;
  int counts[8], n_counts = 0;
  for (int i = 1; i < argc; i++) {
    int k = 0;
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--full") == 0) {
      full = 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("usage: bench_build [--quick | --full] [sessions-N ...] (N: 1..%d)\n", MAX_SESSIONS);
      return 0;
    } else if (sscanf(argv[i], "sessions-%d", &k) == 1 && k >= 1 && k <= MAX_SESSIONS &&
               n_counts < 8) {
      counts[n_counts++] = k;
    } else {
      fprintf(stderr, "bench_build: unknown argument '%s' (sessions-N, N 1..%d)\n", argv[i],
              MAX_SESSIONS);
      return 2;
    }
  }
  if (!n_counts) {
    if (full) counts[n_counts++] = 2;
    counts[n_counts++] = 4;
    if (!quick) counts[n_counts++] = 6;
  }
  signal(SIGPIPE, SIG_IGN);
  const int grid = quick ? 160 : 217;
  const double window = quick ? 3 : full ? 10 : 5;
  size_t len = 0;
  char *obj = ts_grid_obj(grid, &len);
  if (!obj) return 1;
  const int nices[2] = {10, 0};
  int status = 0;
  for (int s = 0; s < n_counts; s++) {
    result r[2];
    int ok[2];
    for (int k = 0; k < 2; k++) ok[k] = measure(counts[s], nices[k], obj, len, window, &r[k]) == 0;
    char scen[32];
    snprintf(scen, sizeof scen, "sessions-%d", counts[s]);
    for (int k = 0; k < 2; k++) {
      if (!ok[k]) {
        status = 1;
        continue;
      }
      cJSON *l = ts_bench_line("build", scen, "session_step_share_during_build", r[k].build_share, "1");
      ts_bench_line_ref(l, "no_build", r[k].quiet_share);
      ts_bench_line_num(l, "builder_nice", nices[k]);
      ts_bench_line_num(l, "build_s", r[k].build_s);
      ts_bench_line_num(l, "sessions", counts[s]);
      ts_bench_line_num(l, "grid_triangles", 2.0 * (grid - 1) * (grid - 1));
      ts_bench_line_num(l, "window_s", window);
      ts_bench_line_str(l, "sessions_tissue", "the built-in patch at 1 kHz, no client, never asleep");
      ts_bench_line_emit(l);
    }
  }
  free(obj);
  return status;
}
