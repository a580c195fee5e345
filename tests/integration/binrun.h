/*
 * binrun.h: runs one of the project's command-line binaries (tissuectl,
 * tissueload) as a user would, for the integration tests: its arguments,
 * its exit status, its stdout and stderr, bounded in time. The JSON helpers
 * read the flat objects these binaries print one per line.
 */
#ifndef TS_BINRUN_H
#define TS_BINRUN_H

#include <stddef.h>

#define TS_BINRUN_MAX_ARGS 40

typedef struct ts_binrun {
  int status;       /* exit status; -1 when killed or not run */
  char out[65536];  /* stdout */
  char err[16384];  /* stderr (the usage text, progress lines) */
  size_t n_out, n_err;
  int truncated;    /* output longer than the buffers (the tests assert it is not) */
} ts_binrun;

/* Runs bin with args (NULL-ended, at most TS_BINRUN_MAX_ARGS) and
 * TISSUED_SERVER_KEY unset, collects its output and waits for it; a run
 * longer than limit_ms is killed and fails the current Check test, as does
 * output longer than the buffers. */
void ts_binrun_v(ts_binrun *o, const char *bin, long limit_ms, const char *const *args);

/* The number after "key": in a flat JSON line, or NAN when absent. */
double ts_binrun_jnum(const char *line, const char *key);

/* The string after "key": in a flat JSON line, copied to out (empty when absent). */
void ts_binrun_jstr(const char *line, const char *key, char *out, size_t cap);

/* Splits o->out into lines, each checked to be one JSON object (a failed
 * check fails the test); returns how many, at most cap. */
int ts_binrun_lines(ts_binrun *o, char **v, int cap);

#endif
