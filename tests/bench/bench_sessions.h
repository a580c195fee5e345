/*
 * bench_sessions.h: the start the benchmarks of sessions beside other work
 * share (bench_build, bench_lanes): a real daemon (bench_daemon.h) with
 * settings of their own, a client with the server key, N sessions of the
 * built-in patch stepping at 1 kHz, and their share of those steps over a
 * window (/metrics tissued_session_steps_total).
 */
#ifndef TS_BENCH_SESSIONS_H
#define TS_BENCH_SESSIONS_H

#include "bench_daemon.h"
#include "tissueclient.h"

typedef struct ts_bench_sessions {
  ts_bench_daemon d;
  tc_client *c; /* the key's client, 600 s timeout */
  int n;        /* the patch's sessions */
} ts_bench_sessions;

/* Starts the daemon with key and extra settings (NULL-ended), connects and
 * creates n sessions of the built-in patch, then lets them run 2 s. 0, or
 * -1 after a message on stderr prefixed with name (then all is stopped). */
int ts_bench_sessions_start(ts_bench_sessions *b, const char *name, const char *key,
                            const char *const *extra, int n);

/* Sum of metric (a family, or one sample with its labels) on the daemon's
 * /metrics page now; NAN when the page could not be read. */
double ts_bench_sessions_metric(const ts_bench_sessions *b, const char *metric);

/* The n sessions' share of their 1 kHz steps over the next window_s
 * seconds (all the daemon's sessions' steps over n x 1000 per second: call
 * it while only the n step). NAN when /metrics could not be read. */
double ts_bench_sessions_share(const ts_bench_sessions *b, double window_s);

/* Closes the client, stops the daemon. */
void ts_bench_sessions_stop(ts_bench_sessions *b);

#endif
