/*
 * bench_idle.c: what sessions at rest cost the daemon (server/session_sleep.h).
 * A classroom's sessions spend most of their time with nobody touching the
 * tissue: each has an observer watching at 60 Hz and its tool parked or
 * away. This starts a real tissued on loopback, creates N sessions, joins
 * an observer to each (one client per session, all polled from this
 * process), lets the tissues settle, and reads the daemon's CPU time
 * (/proc/PID/stat) over a window: the cores the daemon used, per session.
 * The reference, in the same run: the same with --sleep-speed 0 (every
 * step computed, as before sleeping existed). Scenarios:
 *
 *   default  the daemon's built-in patch at its default resolution (the
 *            tissue a classroom's sessions are created with; settles in
 *            about 1 s);
 *   patch-S  the standard patch-S (resolution 50) capped at one substep a
 *            step (CreateSession.substeps 1, the haptic-rate
 *            configuration: uncapped, its step takes longer than 1 ms);
 *            its scaled inertia settles it slowly (about 20 s), so the
 *            settle wait is longer.
 *
 * Before the window, the run waits until /metrics says every session
 * asleep (tissued_session_asleep; bounded: the line then says how many
 * were) and reports that wait as time_to_sleep_s; the reference waits as
 * long. Prints JSON lines (bench_report.h).
 *
 *   bench_idle [--quick | --full] [default | patch-S ...]   (default: both)
 *
 * --quick: 4 sessions, 3 s windows, the default tissue only unless named;
 * default: 8 sessions (patch-S: 4), 5 s; --full: the same, 10 s windows.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_daemon.h"
#include "bench_report.h"
#include "tissueclient.h"

#define BENCH_KEY "bench-server-key-5e2d9a71"
#define MAX_SESSIONS 16

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The daemon's user + system CPU seconds (/proc/PID/stat fields 14, 15). */
static double cpu_seconds(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return NAN;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the command may hold spaces */
  if (!p) return NAN;
  unsigned long long ut = 0, st = 0;
  /* after ") ": state (3), then fields 4..13, then utime (14), stime (15) */
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return NAN;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* How many sessions /metrics says asleep; -1 when it cannot be read. */
static int asleep_count(const ts_bench_daemon *d) {
  static char page[1 << 18];
  if (!ts_bench_daemon_get(d, "/metrics", page, sizeof page)) return -1;
  int n = 0;
  for (const char *p = page; (p = strstr(p, "\ntissued_session_asleep{")); p++) {
    const char *v = strchr(p, '}');
    if (v && atof(v + 1) == 1) n++;
  }
  return n;
}

static void poll_all(tc_client **c, int n) {
  for (int i = 0; i < n; i++)
    if (c[i]) (void)tc_poll(c[i], 0);
}

/* One daemon: n sessions of the scenario, an observer each; waits for them
 * to sleep (at most settle_max s; wait_s: exactly that long instead when
 * >= 0), then the daemon's cores over window s. Returns the cores, NAN on
 * failure; *waited the settle time, *asleep how many slept at the end. */
static double measure(const char *scenario, const char *sleep_speed, int n, double settle_max,
                      double wait_s, double window, double *waited, int *asleep) {
  ts_bench_daemon d;
  const int capped = strcmp(scenario, "patch-S") == 0;
  const char *extra[] = {"--sleep-speed", sleep_speed, capped ? "--patch-resolution" : NULL,
                         "50", NULL};
  if (ts_bench_daemon_start(&d, TS_TISSUED_BIN, BENCH_KEY, extra)) {
    fprintf(stderr, "idle: the daemon did not start\n");
    return NAN;
  }
  tc_client *c[MAX_SESSIONS] = {0};
  double cores = NAN;
  char err[256];
  for (int i = 0; i < n; i++) {
    c[i] = tc_connect_key("127.0.0.1", d.tcp, "bench-idle", BENCH_KEY, 0, err, sizeof err);
    if (!c[i]) {
      fprintf(stderr, "idle: connect: %s\n", err);
      goto out;
    }
    uint32_t sid;
    int rc = capped ? tc_create_session_substeps(c[i], NULL, TC_SOLVER_MASS_SPRING, 1, &sid, NULL,
                                                 NULL)
                    : tc_create_session(c[i], "stomach-patch", &sid, NULL, NULL);
    if (rc) {
      fprintf(stderr, "idle: session %d not created (%d)\n", i + 1, rc);
      goto out;
    }
    tc_join_params jp;
    memset(&jp, 0, sizeof jp);
    jp.session_id = sid;
    jp.role = TC_ROLE_OBSERVER;
    jp.frame_rate = 60;
    tc_joined joined;
    if (tc_join_ex(c[i], &jp, &joined)) {
      fprintf(stderr, "idle: join %u failed\n", sid);
      goto out;
    }
  }
  const double t0 = now_s();
  double next_look = t0;
  *asleep = 0;
  while (1) {
    poll_all(c, n);
    const double t = now_s();
    if (wait_s >= 0 ? t - t0 >= wait_s : t - t0 >= settle_max) break;
    if (wait_s < 0 && t >= next_look) {
      next_look = t + 0.25;
      if (asleep_count(&d) == n) break;
    }
    ts_bench_sleep_ms(2);
  }
  *waited = now_s() - t0;
  const double c0 = cpu_seconds(d.pid), w0 = now_s();
  while (now_s() - w0 < window) {
    poll_all(c, n);
    ts_bench_sleep_ms(2);
  }
  const double c1 = cpu_seconds(d.pid), w1 = now_s();
  *asleep = asleep_count(&d);
  cores = (c1 - c0) / (w1 - w0);
out:
  for (int i = 0; i < n; i++)
    if (c[i]) tc_close(c[i]);
  ts_bench_daemon_stop(&d);
  return cores;
}

int main(int argc, char **argv) {
  int quick = 0, full = 0;
  const char *names[4];
  int n_names = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--full") == 0) full = 1;
    else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("usage: bench_idle [--quick | --full] [default | patch-S ...]\n");
      return 0;
    } else if ((strcmp(argv[i], "default") == 0 || strcmp(argv[i], "patch-S") == 0) &&
               n_names < 4) {
      names[n_names++] = argv[i];
    } else {
      fprintf(stderr, "bench_idle: unknown argument '%s' (default, patch-S)\n", argv[i]);
      return 2;
    }
  }
  if (!n_names) {
    names[n_names++] = "default";
    if (!quick) names[n_names++] = "patch-S";
  }
  signal(SIGPIPE, SIG_IGN);
  const double window = quick ? 3 : full ? 10 : 5;
  int status = 0;
  for (int s = 0; s < n_names; s++) {
    const int capped = strcmp(names[s], "patch-S") == 0;
    /* capped patch-S takes half a core a session while awake: 4 fill
     * the 2 cores, and more would settle behind real time */
    const int n = capped || quick ? 4 : 8;
    const double settle_max = capped ? 60 : 10;
    double waited = 0, waited_ref = 0;
    int asleep = 0, asleep_ref = 0;
    const double v = measure(names[s], "1e-6", n, settle_max, -1, window, &waited, &asleep);
    const double ref =
        measure(names[s], "0", n, settle_max, waited, window, &waited_ref, &asleep_ref);
    if (!isfinite(v) || !isfinite(ref)) status = 1;
    cJSON *l = ts_bench_line("idle", names[s], "idle_daemon_cores", v, "cores");
    ts_bench_line_ref(l, "sleep_off", ref);
    ts_bench_line_num(l, "sessions", n);
    ts_bench_line_num(l, "per_session_cores", v / n);
    ts_bench_line_num(l, "per_session_cores_sleep_off", ref / n);
    ts_bench_line_num(l, "sessions_asleep", asleep);
    ts_bench_line_num(l, "time_to_sleep_s", waited);
    ts_bench_line_num(l, "window_s", window);
    ts_bench_line_num(l, "substeps", capped ? 1 : 0);
    ts_bench_line_str(l, "clients", "one 60 Hz observer per session, no tool");
    ts_bench_line_emit(l);
  }
  return status;
}
