/*
 * bench_lanes.c: what a session that cannot keep real time costs the
 * sessions sharing the daemon with it (server/lane.h: such a session moves
 * to the slow physics thread, at --slow-lane-nice). A real tissued on
 * loopback steps N sessions of its built-in patch at 1 kHz (--sleep-speed
 * 0, so that none sleeps); the benchmark reads their steps
 * (/metrics tissued_session_steps_total) over a window with nothing else
 * going on (the reference, same daemon, same run), then creates a session
 * from an uploaded mesh whose steps take tens of times their dt (a gently
 * curved grid made here, GRID x GRID vertices, in the default three
 * layers), lets it run for 2 s and reads the N sessions' steps over a
 * second window while it runs. Each line gives the N sessions' share of
 * their 1 kHz steps beside the heavy session, the share in the quiet window,
 * and the heavy session's own steps per second and step load; once with the
 * slow lane (--slow-lane-load 1, the default) and once without (0: it stays
 * on the real-time thread it was placed on), each in a daemon of its own.
 *
 * Scenario rebalance: the real-time threads evened out (--rebalance): two
 * sessions that others' ends left on one thread, their share of their
 * steps with the daemon moving one over and without (measure_rebalance).
 *
 *   bench_lanes [--quick | --full] [sessions-N ...] [rebalance]
 *   (default: sessions-2 sessions-4 rebalance)
 *
 * --quick: sessions-4 only, 3 s windows; default 5 s; --full: also
 * sessions-6, 10 s. The grid is 130 x 130 (33,000 triangles) throughout.
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
#define GRID 130

typedef struct result {
  double quiet_share;  /* the N sessions' steps over N x 1 kHz, nothing else going on */
  double heavy_share;  /* the same while the heavy session runs */
  double heavy_rate;   /* the heavy session's steps per second meanwhile */
  double heavy_load;   /* its tissued_session_step_load at the window's end */
  double heavy_slow;   /* its tissued_session_slow_lane there */
} result;

/* The N sessions' steps: all sessions' less the heavy one's (*heavy). */
static double light_steps(const ts_bench_sessions *b, const char *heavy_steps, double *heavy) {
  const double all = ts_bench_sessions_metric(b, "tissued_session_steps_total");
  *heavy = ts_bench_sessions_metric(b, heavy_steps);
  return all - (*heavy > 0 ? *heavy : 0);
}

/* One daemon at --slow-lane-load lane: n sessions, a quiet window, the
 * heavy one, a window beside it. 0 or -1. */
static int measure(int n, const char *lane, const char *obj, size_t len, double window,
                   result *r) {
  const char *extra[] = {"--sleep-speed", "0", "--slow-lane-load", lane, NULL};
  ts_bench_sessions b;
  if (ts_bench_sessions_start(&b, "bench-lanes", BENCH_KEY, extra, n)) return -1;
  int rc = -1;
  r->quiet_share = ts_bench_sessions_share(&b, window);
  uint32_t big;
  if (tc_create_session_mesh(b.c, TC_MESH_OBJ, obj, len, 1.0, NULL, 0, NULL, &big, NULL, NULL)) {
    fprintf(stderr, "lanes: the upload failed: %s\n", tc_last_error(b.c));
    goto out;
  }
  char hs[96], hl[96], hsl[96];
  snprintf(hs, sizeof hs, "tissued_session_steps_total{session=\"%u\"}", big);
  snprintf(hl, sizeof hl, "tissued_session_step_load{session=\"%u\"}", big);
  snprintf(hsl, sizeof hsl, "tissued_session_slow_lane{session=\"%u\"}", big);
  ts_bench_sleep_ms(2000); /* measured, and moved where it goes */
  double h0, h1;
  const double s0 = light_steps(&b, hs, &h0), t0 = ts_bench_wall_s();
  ts_bench_sleep_ms((int)(window * 1000));
  const double s1 = light_steps(&b, hs, &h1), t1 = ts_bench_wall_s();
  r->heavy_share = (s1 - s0) / ((t1 - t0) * 1000.0 * n);
  r->heavy_rate = (h1 - h0) / (t1 - t0);
  r->heavy_load = ts_bench_sessions_metric(&b, hl);
  r->heavy_slow = ts_bench_sessions_metric(&b, hsl);
  rc = isfinite(r->quiet_share) && isfinite(r->heavy_share) ? 0 : -1;
out:
  ts_bench_sessions_stop(&b);
  return rc;
}

/* The rebalance scenario in one daemon at --rebalance on (1 or 0): four
 * sessions of a patch of 24 nodes an edge (about 0.7 of a core each, so
 * that two are more than one thread can step in real time) on
 * two real-time threads, two each by their placement; the second and fourth
 * end, which leaves the first and third on one thread; 3 s later (the
 * cron's look once a second), their share of their 1 kHz steps over the
 * window, beside their share with all four running. No slow threads
 * (--slow-lane-load 0): four such sessions on two cores can read over 1
 * and move there, which would part the two as well. 0 or -1. */
static int measure_rebalance(const char *on, double window, double *share, double *ref,
                             double *moves) {
  const char *extra[] = {"--sleep-speed", "0", "--physics-threads", "2", "--patch-resolution",
                         "24", "--slow-lane-load", "0", "--rebalance", on, NULL};
  ts_bench_sessions b;
  if (ts_bench_sessions_start(&b, "bench-lanes", BENCH_KEY, extra, 4)) return -1;
  int rc = -1;
  *ref = ts_bench_sessions_share(&b, window);
  for (uint32_t id = 2; id <= 4; id += 2)
    if (tc_join(b.c, id, TC_ROLE_CONTROLLER, 0, 0, NULL) || tc_end_session(b.c, id)) {
      fprintf(stderr, "lanes: session %u not ended: %s\n", id, tc_last_error(b.c));
      goto out;
    }
  ts_bench_sleep_ms(3000);
  b.n = 2; /* the survivors */
  *share = ts_bench_sessions_share(&b, window);
  *moves = ts_bench_sessions_metric(&b, "tissued_physics_rebalances_total");
  rc = isfinite(*share) && isfinite(*ref) ? 0 : -1;
out:
  ts_bench_sessions_stop(&b);
  return rc;
}

static int run_rebalance(double window) {
  const char *on[2] = {"1", "0"};
  double share[2], ref[2], moves[2];
  int ok[2], status = 0;
  for (int k = 0; k < 2; k++)
    ok[k] = measure_rebalance(on[k], window, &share[k], &ref[k], &moves[k]) == 0;
  for (int k = 0; k < 2; k++) {
    if (!ok[k]) {
      status = 1;
      continue;
    }
    cJSON *l = ts_bench_line("lanes", "rebalance", "survivors_step_share", share[k], "1");
    ts_bench_line_ref(l, "four_running", ref[k]);
    ts_bench_line_num(l, "rebalance", atof(on[k]));
    ts_bench_line_num(l, "rebalances", moves[k]);
    ts_bench_line_num(l, "window_s", window);
    ts_bench_line_str(l, "sessions_tissue",
                      "the built-in patch at 24 nodes an edge, 1 kHz, 2 physics threads");
    ts_bench_line_emit(l);
  }
  return status;
}

int main(int argc, char **argv) {
  /* "rebalance" is a scenario too; the rest is the sessions-N command line */
  char *rest[64];
  int n_rest = 0, rebalance = 0, only_rebalance = 1;
  for (int i = 0; i < argc && n_rest < 64; i++) {
    if (i > 0 && strcmp(argv[i], "rebalance") == 0) {
      rebalance = 1;
      continue;
    }
    if (i > 0 && strncmp(argv[i], "sessions-", 9) == 0) only_rebalance = 0;
    rest[n_rest++] = argv[i];
  }
  int quick, full, counts[8], n_counts;
  const int args = ts_bench_sessions_args(n_rest, rest, "bench_lanes", MAX_SESSIONS, &quick,
                                          &full, counts, &n_counts);
  if (args) {
    if (args == 1) printf("       bench_lanes ... rebalance (also run when no scenario is named)\n");
    return args == 1 ? 0 : 2;
  }
  if (!rebalance) only_rebalance = 0;
  if (!rebalance && !n_counts) rebalance = 1;
  if (only_rebalance) n_counts = 0;
  else if (!n_counts) {
    if (!quick) counts[n_counts++] = 2;
    counts[n_counts++] = 4;
    if (full) counts[n_counts++] = 6;
  }
  signal(SIGPIPE, SIG_IGN);
  const double window = quick ? 3 : full ? 10 : 5;
  int status = rebalance ? run_rebalance(window) : 0;
  if (!n_counts) return status;
  size_t len = 0;
  char *obj = ts_grid_obj(GRID, &len);
  if (!obj) return 1;
  const char *lanes[2] = {"1", "0"};
  for (int s = 0; s < n_counts; s++) {
    result r[2];
    int ok[2];
    for (int k = 0; k < 2; k++) ok[k] = measure(counts[s], lanes[k], obj, len, window, &r[k]) == 0;
    char scen[32];
    snprintf(scen, sizeof scen, "sessions-%d", counts[s]);
    for (int k = 0; k < 2; k++) {
      if (!ok[k]) {
        status = 1;
        continue;
      }
      cJSON *l = ts_bench_line("lanes", scen, "session_step_share_beside_heavy", r[k].heavy_share,
                               "1");
      ts_bench_line_ref(l, "no_heavy", r[k].quiet_share);
      ts_bench_line_num(l, "slow_lane_load", atof(lanes[k]));
      ts_bench_line_num(l, "heavy_steps_per_s", r[k].heavy_rate);
      ts_bench_line_num(l, "heavy_step_load", r[k].heavy_load);
      ts_bench_line_num(l, "heavy_on_slow_thread", r[k].heavy_slow);
      ts_bench_line_num(l, "sessions", counts[s]);
      ts_bench_line_num(l, "grid_triangles", 2.0 * (GRID - 1) * (GRID - 1));
      ts_bench_line_num(l, "window_s", window);
      ts_bench_line_str(l, "sessions_tissue",
                        "the built-in patch at 1 kHz, no client, never asleep");
      ts_bench_line_emit(l);
    }
  }
  free(obj);
  return status;
}
