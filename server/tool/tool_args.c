/*
 * tool_args.c: tissuetool's command table and its top-level command line
 * (tool_args.h). A command's function is declared in commands.h and lives
 * in a cmd_<topic>.c beside this file; to add one, add its line here.
 */
#include "tool_args.h"

#include <string.h>

static const ts_tool_command commands[] = {
    {"fit", "fit sigma = a*e^(b*strain) to strain,stress samples and store it", ts_cmd_fit},
    {"materials", "list the stored material fits as JSON", ts_cmd_materials},
    {"learn", "train the learned shortcut of the quasi-static solve and store it", ts_cmd_learn},
    {"models", "list, export, import or delete stored learned models", ts_cmd_models},
    {"tissues", "list the stored tissues, or delete a stored upload", ts_cmd_tissues},
    {"mesh", "info, extrude, subdivide (Loop) or refine (LEB) a surface mesh", ts_cmd_mesh},
};

#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

const ts_tool_command *ts_tool_commands(int *n) {
  *n = N_COMMANDS;
  return commands;
}

void ts_tool_usage(FILE *f) {
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

int ts_tool_args_parse(int argc, char **argv, ts_tool_args *out) {
  memset(out, 0, sizeof *out);
  if (argc < 2) return TS_TOOL_USAGE;
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return TS_TOOL_HELP;
  if (strcmp(cmd, "--version") == 0) return TS_TOOL_VERSION;
  for (int i = 0; i < N_COMMANDS; i++)
    if (strcmp(cmd, commands[i].name) == 0) {
      out->command = &commands[i];
      out->argc = argc - 1;
      out->argv = argv + 1;
      return TS_TOOL_RUN;
    }
  snprintf(out->err, sizeof out->err, "tissuetool: unknown command '%s' (see tissuetool --help)",
           cmd);
  return TS_TOOL_ERROR;
}
