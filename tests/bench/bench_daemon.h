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

/* Sleeps ms milliseconds. */
void ts_bench_sleep_ms(int ms);

#endif
