/*
 * bench_daemon.h: a real tissued for the benchmarks that measure the
 * daemon (bench_stream, bench_idle, bench_build): started on loopback with ephemeral
 * ports and its own data directory, its ports read from --ports-file,
 * stopped by SIGTERM (SIGKILL after 10 s) and its directory removed. It
 * dies with the benchmark (PR_SET_PDEATHSIG) and logs only warnings, to
 * /dev/null.
 */
#ifndef TS_BENCH_DAEMON_H
#define TS_BENCH_DAEMON_H

#include <stddef.h>
#include <sys/types.h>

typedef struct ts_bench_daemon {
  pid_t pid;       /* 0: not running */
  char dir[256];   /* its --data-dir */
  char ports[300]; /* its --ports-file */
  int tcp, http;   /* the ports it listens on */
} ts_bench_daemon;

/* Starts bin with the loopback, port, data and key settings and then
 * extra (NULL-ended, may be NULL), and waits (20 s at most) until it
 * listens. Returns 0, or -1 (the daemon is then stopped and its directory
 * removed). */
int ts_bench_daemon_start(ts_bench_daemon *d, const char *bin, const char *key,
                          const char *const *extra);

/* Stops it and removes its directory. */
void ts_bench_daemon_stop(ts_bench_daemon *d);

/* GET path from its HTTP port into page (at most cap - 1 bytes, headers
 * and body, NUL-ended): the bytes read, 0 when the request failed. */
size_t ts_bench_daemon_get(const ts_bench_daemon *d, const char *path, char *page, size_t cap);

/* The sum of every sample of metric `name` (with or without labels) in a
 * Prometheus text page; -1 when there is none. */
double ts_bench_metric_sum(const char *page, const char *name);

/* The command line of the benchmarks whose scenarios are sessions-N
 * (bench_build, bench_lanes): --quick, --full, -h/--help and sessions-N with
 * N in 1..max, at most 8 of them, into counts[] (*n of them). Returns 0; 1
 * after printing the usage line for --help (exit 0); 2 after a message for
 * a bad argument (exit 2). */
int ts_bench_sessions_args(int argc, char **argv, const char *name, int max, int *quick,
                           int *full, int counts[8], int *n);

/* Sleeps ms milliseconds. */
void ts_bench_sleep_ms(int ms);

#endif
