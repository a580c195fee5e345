/*
 * tissuetool.c: main() of tissuetool, the offline tool: it works on the
 * daemon's database and on files directly, with no daemon running.
 *
 * The command table and the command line before a command's own arguments
 * are in tool_args.c; a command's function is declared in commands.h and
 * lives in a cmd_<topic>.c beside this file.
 */
#include <stdio.h>

#include "tool_args.h"

#ifndef TS_VERSION
#define TS_VERSION "unknown"
#endif

int main(int argc, char **argv) {
  ts_tool_args a;
  switch (ts_tool_args_parse(argc, argv, &a)) {
  case TS_TOOL_RUN: return a.command->run(a.argc, a.argv, stdout, stderr);
  case TS_TOOL_HELP: ts_tool_usage(stdout); return 0;
  case TS_TOOL_VERSION: printf("tissuetool %s\n", TS_VERSION); return 0;
  case TS_TOOL_USAGE: ts_tool_usage(stderr); return 2;
  default: fprintf(stderr, "%s\n", a.err); return 2;
  }
}
