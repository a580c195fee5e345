/*
 * fuzz_argv.h: an argument vector made from a fuzz input, for the targets
 * of the command-line parsers (fuzz_ctlargs.c, fuzz_toolargs.c).
 *
 * The input's bytes are split at NUL bytes into arguments (at most
 * FUZZ_ARGV_MAX after argv[0], the program name given); each argument is a
 * separate allocation of exactly its length plus the terminator, so that
 * ASan sees a read past an argument's end. argv[argc] is NULL, as main()
 * gets it.
 */
#ifndef FUZZ_ARGV_H
#define FUZZ_ARGV_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ARGV_MAX 64

typedef struct fuzz_argv {
  int argc;
  char *argv[FUZZ_ARGV_MAX + 2];
} fuzz_argv;

static void fuzz_argv_free(fuzz_argv *a) {
  for (int i = 0; i < a->argc; i++) free(a->argv[i]);
  a->argc = 0;
}

static void fuzz_argv_push(fuzz_argv *a, const uint8_t *p, size_t n) {
  char *s = malloc(n + 1);
  if (!s) abort();
  if (n) memcpy(s, p, n);
  s[n] = '\0';
  a->argv[a->argc++] = s;
  a->argv[a->argc] = NULL;
}

static void fuzz_argv_make(fuzz_argv *a, const char *prog, const uint8_t *data, size_t size) {
  a->argc = 0;
  fuzz_argv_push(a, (const uint8_t *)prog, strlen(prog));
  /* "a\0b" is two arguments, a trailing NUL adds none, an empty input none */
  size_t start = 0;
  while (start < size && a->argc <= FUZZ_ARGV_MAX) {
    const uint8_t *z = memchr(data + start, 0, size - start);
    size_t end = z ? (size_t)(z - data) : size;
    fuzz_argv_push(a, data + start, end - start);
    start = end + 1;
  }
}

/* 1 when p is one of the vector's arguments (argv[1..argc)), or points into
 * one of them (after its first byte: an "--opt=VALUE" value). */
static int fuzz_argv_owns(const fuzz_argv *a, const char *p, int inside) {
  for (int i = 1; i < a->argc; i++) {
    if (p == a->argv[i]) return 1;
    if (inside && p > a->argv[i] && p <= a->argv[i] + strlen(a->argv[i])) return 1;
  }
  return 0;
}

#endif
