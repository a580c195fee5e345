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
#include "bench_sessions.h"

#define BENCH_KEY "bench-server-key-5e2d9a71"
#define MAX_SESSIONS 16

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
  ts_bench_sessions b;
  if (ts_bench_sessions_start(&b, "bench-build", BENCH_KEY, extra, n)) return -1;
  int rc = -1;
  r->quiet_share = ts_bench_sessions_share(&b, window);
  uint32_t big;
  double s0 = ts_bench_sessions_metric(&b, "tissued_session_steps_total");
  double t0 = ts_bench_wall_s();
  if (tc_create_session_mesh(b.c, TC_MESH_OBJ, obj, len, 1.0, NULL, 0, NULL, &big, NULL, NULL)) {
    fprintf(stderr, "build: the upload failed: %s\n", tc_last_error(b.c));
    goto out;
  }
  double t1 = ts_bench_wall_s();
  double s1 = ts_bench_sessions_metric(&b, "tissued_session_steps_total");
  r->build_share = (s1 - s0) / ((t1 - t0) * 1000.0 * n);
  r->build_s = t1 - t0;
  rc = isfinite(r->quiet_share) && isfinite(r->build_share) ? 0 : -1;
out:
  ts_bench_sessions_stop(&b); /* the upload's session (far slower than real time) with it */
  return rc;
}

int main(int argc, char **argv) {
  int quick, full, counts[8], n_counts;
  const int args = ts_bench_sessions_args(argc, argv, "bench_build", MAX_SESSIONS, &quick,
                                          &full, counts, &n_counts);
  if (args) return args == 1 ? 0 : 2;
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
      ts_bench_line_str(l, "sessions_tissue",
                        "the built-in patch at 1 kHz, no client, never asleep");
      ts_bench_line_emit(l);
    }
  }
  free(obj);
  return status;
}
