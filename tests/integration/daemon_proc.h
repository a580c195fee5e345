/*
 * daemon_proc.h: starts and stops a real tissued for the C integration tests
 * (itest_*.c). The binary comes from $TISSUED_BIN; each daemon gets a fresh
 * temporary data directory and ephemeral ports, read back from its ports
 * file. The daemon dies with the test process (PR_SET_PDEATHSIG), so a failed
 * test never leaves one behind. daemon_proc.mjs is the JavaScript twin.
 */
#ifndef TS_DAEMON_PROC_H
#define TS_DAEMON_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* The server key every daemon started here gets (--server-key), so that
 * clients can create sessions: tc_connect_key(..., TS_DPROC_KEY, ...). A test
 * that wants the daemon's own key handling passes "--server-key", "" in its
 * extra arguments (the later flag wins). */
#define TS_DPROC_KEY "itest-server-key-5f0c2a9e41d7"

typedef struct ts_dproc {
  pid_t pid;         /* 0 when not running */
  char dir[256];     /* temporary data directory (removed by stop) */
  char log[300];     /* the daemon's stdout+stderr, inside dir */
  int tcp_port;
  int http_port;
  int reaped;        /* waitpid collected it (status below) */
  int status;        /* waitpid status once reaped */
} ts_dproc;

/* Optional, in main() around the suite run: daemons' directories are then
 * made inside one scratch directory, and ts_dproc_scratch_end() removes it
 * with everything in it, also what a test process that died (a failed
 * assertion in a forked test exits at once) could not clean up itself. */
int ts_dproc_scratch_begin(void);
void ts_dproc_scratch_end(void);

/* Starts $TISSUED_BIN with --host 127.0.0.1 --tcp-port 0 --http-port 0
 * --data-dir <dir> --ports-file <dir>/ports.json --server-key TS_DPROC_KEY
 * plus extra_args (NULL-ended,
 * may be NULL) and waits up to 60 s for the ports file. Returns 0, or -1 with
 * a message in err (the daemon's log is printed to stderr). */
int ts_dproc_start(ts_dproc *d, const char *const *extra_args, char *err, size_t errcap);

/* main() of a Check suite that starts daemons: runs it inside a scratch
 * directory (ts_dproc_scratch_begin/_end) and frees it; EXIT_SUCCESS when no
 * test failed, else EXIT_FAILURE. */
typedef struct Suite Suite;
int ts_dproc_run_suite(Suite *s);

/* Is the daemon still running (not exited)? */
int ts_dproc_alive(ts_dproc *d);

/* Sends SIGTERM and waits up to timeout_ms. Returns the exit status (0..255)
 * if it exited by itself; -1 if it died from a signal or had to be killed
 * (message in why). Prints the daemon's log to stderr unless it exited 0.
 * Removes the data directory. */
int ts_dproc_stop(ts_dproc *d, int timeout_ms, char *why, size_t whycap);

/* Prints the daemon's log to stderr (for a failing test): its first 20
 * and last 40 lines. */
void ts_dproc_dump_log(const ts_dproc *d);

/* The lines of the daemon's log that contain needle (-1: the log cannot
 * be read; it is gone once ts_dproc_stop returns). */
int ts_dproc_log_count(const ts_dproc *d, const char *needle);

/* The path of one of the shared meshes (../shared/data/meshes/NAME beside
 * the repository, or $TS_SHARED_DIR/data/meshes/NAME). */
void ts_dproc_shared_mesh(const char *name, char *out, size_t cap);

/* GET path from 127.0.0.1:port over plain HTTP/1.0: the malloc'd response
 * (headers and body, at most 256 KiB), or NULL when the connection fails. */
char *ts_dproc_http_get(int port, const char *path);

/* The value of the line "name value" in a Prometheus text page, or -1. */
double ts_dproc_metric_in(const char *page, const char *name);

/* GET /metrics and the value of one metric, or -1 (also when the page could
 * not be read). */
double ts_dproc_metric(int port, const char *name);

#endif
