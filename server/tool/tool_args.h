/*
 * tool_args.h: tissuetool's own command line (tool_args.c): the table of its
 * commands and the parse of what comes before a command's arguments
 * (--help, --version, the command's name), apart from main() so that it can
 * be tested and fuzzed (tests/fuzz/fuzz_toolargs.c). A command's own
 * options are parsed by the command with ts_tool_parse (tool_util.h).
 */
#ifndef TS_TOOL_ARGS_H
#define TS_TOOL_ARGS_H

#include <stddef.h>
#include <stdio.h>

#include "commands.h"

/* What ts_tool_args_parse found. */
enum {
  TS_TOOL_RUN = 0,     /* run args.command with args.argc, args.argv */
  TS_TOOL_HELP = 1,    /* --help or -h: the usage on stdout, exit 0 */
  TS_TOOL_VERSION = 2, /* --version: exit 0 */
  TS_TOOL_USAGE = 3,   /* no command: the usage on stderr, exit 2 */
  TS_TOOL_ERROR = 4    /* an unknown command, said in err: exit 2 */
};

typedef struct ts_tool_args {
  const ts_tool_command *command; /* TS_TOOL_RUN: an entry of the table */
  int argc;                       /* the command's own vector: argv[0] is its name */
  char **argv;
  char err[1024];                 /* TS_TOOL_ERROR's message, "tissuetool: ..." */
} ts_tool_args;

/* The commands, one entry each, and their count. */
const ts_tool_command *ts_tool_commands(int *n);

/* tissuetool's usage text with the command list. */
void ts_tool_usage(FILE *f);

/* Parses argv[0..argc) (argv[0] the program). Returns one of the values
 * above; *out is filled in for TS_TOOL_RUN and TS_TOOL_ERROR. */
int ts_tool_args_parse(int argc, char **argv, ts_tool_args *out);

#endif
