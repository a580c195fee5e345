/*
 * tissuetool.c: main() of tissuetool, the offline tool: it works on the
 * daemon's database and on files directly, with no daemon running.
 *
 * The table below lists the commands, one line each; a command's function
 * is declared in commands.h and lives in a cmd_<topic>.c beside this file.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#ifndef TS_VERSION
#define TS_VERSION "unknown"
#endif

static const ts_tool_command commands[] = {
    {"fit", "fit sigma = a*e^(b*strain) to strain,stress samples and store it", ts_cmd_fit},
    {"materials", "list the stored material fits as JSON", ts_cmd_materials},
    {"learn", "train the learned shortcut of the quasi-static solve and store it", ts_cmd_learn},
    {"models", "list, export, import or delete stored learned models", ts_cmd_models},
    {"mesh", "check, extrude, subdivide (Loop) or refine (LEB) a surface mesh", ts_cmd_mesh},
};

#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *f) {
  fprintf(f,
          "usage: tissuetool COMMAND [ARGUMENTS]\n"
          "       tissuetool COMMAND --help\n"
          "       tissuetool --help | --version\n"
          "\n"
          "The offline tool of tissued: works on the daemon's database and on files\n"
          "directly, with no daemon running.\n"
          "\n"
          "commands:\n");
  for (int i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("tissuetool %s\n", TS_VERSION);
    return 0;
  }
  for (int i = 0; i < N_COMMANDS; i++)
    if (strcmp(cmd, commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1, stdout, stderr);
  fprintf(stderr, "tissuetool: unknown command '%s' (see tissuetool --help)\n", cmd);
  return 2;
}
