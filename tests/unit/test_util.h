/*
 * test_util.h: helpers that several test programs share, so that each is
 * written once: a whole file read into memory, a fresh temporary directory
 * per test and its removal, a tissuetool command called as a function with
 * its output captured, a suite of one-test cases with a common timeout and
 * the main() that runs it, and the iteration counts of random-input loops
 * in a sanitizer build. Compiled once (tests/CMakeLists.txt: ts_test_util)
 * and linked into every unit suite and integration test. Failures here fail
 * the calling test through Check's ck_assert, naming what went wrong.
 */
#ifndef TS_TEST_UTIL_H
#define TS_TEST_UTIL_H

#include "ts_check.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Random-input loops (brute-force comparisons over thousands of poses) run
 * their full count in the normal build, where the issues' figures are
 * checked, and fewer iterations in a sanitizer build (TS_TEST_SANITIZED,
 * defined by tests/CMakeLists.txt when TS_SANITIZE or TS_TSAN is on): a
 * memory or undefined-behaviour error in a code path shows within a few
 * hundred inputs, and the sanitized code is several times slower (each of
 * test_collision's two brute-force cases took 220 s there with its full
 * counts, at load 15 to 21). */
#ifdef TS_TEST_SANITIZED
#define TU_ITERS(normal, sanitized) (sanitized)
#else
#define TU_ITERS(normal, sanitized) (normal)
#endif

/* Asserts that expr (a call returning 0 on success) returned 0, at index i
 * of a hot loop (a step of thousands): Check records every passing
 * ck_assert with a write to its pipe (test_mechanics made 215k of them,
 * test_xpbd 241k: strace -f -c -e trace=write), so this calls into Check
 * only when the call fails, naming it, the index and the code. */
#define TU_OK_AT(expr, i)                                                                  \
  do {                                                                                     \
    const int tu_rc_ = (expr);                                                             \
    if (tu_rc_ != 0) ck_abort_msg("%s at %ld returned %d", #expr, (long)(i), tu_rc_);      \
  } while (0)

/* The whole of the file at path, NUL-terminated (the NUL not counted in
 * *len). A file that cannot be opened or read, or is empty, fails the test
 * naming the path. The caller frees it. */
uint8_t *tu_read_file(const char *path, size_t *len);

/* Makes a fresh directory $TMPDIR/<prefix>.XXXXXX ($TMPDIR when set and
 * not empty, else /tmp), its path in dir (cap bytes); fails the test when
 * it cannot. */
void tu_tmpdir_make(char *dir, size_t cap, const char *prefix);

/* Removes dir and everything in it (files, subdirectories, SQLite's -wal
 * and -shm files); fails the test if any of it stays. */
void tu_tmpdir_remove(const char *dir);

/* What a command wrote on its two streams, and its exit status. */
typedef struct tu_captured {
  char *out, *err; /* NUL-terminated */
  size_t out_len, err_len;
  int status;
} tu_captured;

/* A tissuetool command as server/tool/commands.h declares them (ts_tool_fn). */
typedef int (*tu_cmd_fn)(int argc, char **argv, FILE *out, FILE *err);

/* Calls fn(argc, argv) with its stdout and stderr captured in memory. */
tu_captured tu_run_cmd(tu_cmd_fn fn, int argc, const char **argv);
void tu_captured_free(tu_captured *c);

/* A suite of n cases of one test each (named cases[i].name), each with
 * timeout seconds (Check's per-case timeout, scaled by
 * CK_TIMEOUT_MULTIPLIER in sanitizer builds). */
typedef struct tu_case {
  const char *name;
  const TTest *test;
} tu_case;
Suite *tu_suite_of_cases(const char *name, const tu_case *cases, size_t n, double timeout);

/* Runs suite s (and frees it) with stdout line-buffered, so that the
 * figures a case printed survive a failing case's exit; returns main()'s
 * exit status (EXIT_FAILURE when any test failed). */
int tu_run_suite(Suite *s);

#endif
