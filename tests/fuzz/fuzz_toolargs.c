/*
 * fuzz_toolargs.c: fuzz target for tissuetool's command line: the top-level
 * parse (server/tool/tool_args.c, ts_tool_args_parse: --help, --version,
 * the command's name) and the option parser every command runs on its own
 * vector (server/tool/tool_util.c, ts_tool_parse: "--name VALUE",
 * "--name=VALUE", "--", -h, positionals). The commands themselves are not
 * run: they open databases and write files. Links ts_server (the table
 * points at the commands).
 *
 * Input: byte 0 picks how many positionals the command takes (0..3); the
 * rest are the arguments, separated by NUL bytes (fuzz_argv.h). The options
 * offered are the names the commands use (cmd_*.c). Seeds:
 * tests/fuzz/corpus/toolargs/.
 *
 * Checks, besides ASan/UBSan and the leak check: the top-level result is
 * one of the documented values; a command to run is the table's entry of
 * that name with the vector after the program name; an unknown command is
 * named in a terminated message; ts_tool_parse returns 0, 1 only when -h or
 * --help was given before "--", or 2 after a message on the error
 * stream that starts "tissuetool <command>:" and ends in a newline; after
 * 0, at most the allowed positionals, each an argument after the command
 * name, and every option's value an argument or the part of one after
 * "--name=".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/tool/tool_args.h"
#include "../../server/tool/tool_util.h"
#include "fuzz_argv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

static const char *const names[] = {"db",     "direction", "layer",  "layers", "levels",
                                    "max-edge", "model",   "name",   "output", "qs-refine-edge",
                                    "region", "samples",   "scale",  "tissue", "patch-resolution"};
#define N_NAMES ((int)(sizeof names / sizeof names[0]))

/* 1 when -h or --help comes before any "--" in argv[1..argc) that ends the
 * options; an option "--NAME" without "=" takes the next argument as its
 * value, whatever it is ("--db -- -h" asks for help: "--" is the value).
 * Only called after ts_tool_parse returned 1, so every option before the
 * -h was known. */
static int asks_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) return 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    if (a[0] == '-' && a[1] == '-' && !strchr(a, '=')) i++; /* its value */
  }
  return 0;
}

static void check_options(const fuzz_argv *a, int argc, char **argv, int max_pos) {
  const char *values[N_NAMES];
  ts_tool_opt opts[N_NAMES];
  for (int i = 0; i < N_NAMES; i++) {
    values[i] = NULL;
    opts[i].name = names[i];
    opts[i].value = &values[i];
  }
  const char *pos[4] = {NULL, NULL, NULL, NULL};
  int npos = -1;
  char *msg = NULL;
  size_t msglen = 0;
  FILE *err = open_memstream(&msg, &msglen);
  if (!err) abort();
  int rc = ts_tool_parse(argc, argv, opts, N_NAMES, pos, max_pos, &npos, err);
  fclose(err);
  if (rc == 0) {
    if (npos < 0 || npos > max_pos || msglen) abort();
    for (int i = 0; i < npos; i++)
      if (!pos[i] || !fuzz_argv_owns(a, pos[i], 0) || pos[i] == argv[0]) abort();
    for (int i = 0; i < N_NAMES; i++) {
      if (!values[i]) continue;
      if (!fuzz_argv_owns(a, values[i], 1)) abort();
      /* a value inside an argument follows "--NAME=" */
      if (!fuzz_argv_owns(a, values[i], 0) && values[i][-1] != '=') abort();
      sink += strlen(values[i]);
    }
  } else if (rc == 1) {
    if (!asks_help(argc, argv) || msglen) abort();
  } else if (rc == 2) {
    char head[300];
    snprintf(head, sizeof head, "tissuetool %s:", argv[0]);
    if (!msg || strncmp(msg, head, strlen(head)) != 0) abort();
    if (msg[msglen - 1] != '\n') abort(); /* one message, ended (it may quote a newline) */
  } else {
    abort();
  }
  free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  int max_pos = data[0] & 3;
  fuzz_argv a;
  fuzz_argv_make(&a, "tissuetool", data + 1, size - 1);
  ts_tool_args t;
  int rc = ts_tool_args_parse(a.argc, a.argv, &t);
  int n;
  const ts_tool_command *table = ts_tool_commands(&n);
  switch (rc) {
  case TS_TOOL_RUN:
    if (t.command < table || t.command >= table + n || strcmp(t.command->name, a.argv[1]) != 0 ||
        t.argc != a.argc - 1 || t.argv != a.argv + 1 || !t.command->run)
      abort();
    check_options(&a, t.argc, t.argv, max_pos);
    break;
  case TS_TOOL_HELP:
  case TS_TOOL_VERSION:
    if (a.argc < 2) abort();
    break;
  case TS_TOOL_USAGE:
    if (a.argc >= 2) abort();
    break;
  case TS_TOOL_ERROR:
    if (a.argc < 2 || !t.err[0] || strnlen(t.err, sizeof t.err) >= sizeof t.err) abort();
    break;
  default: abort();
  }
  fuzz_argv_free(&a);
  return 0;
}
