/*
 * commands.h: the commands of tissuetool, the offline tool that works on the
 * daemon's database and files directly, with no daemon running.
 *
 * A command is a function that takes its own argument vector (argv[0] is the
 * command's name, as typed after "tissuetool") and the streams to write its
 * result (out) and its messages (err) to, and returns the process exit
 * status: 0 success, 1 failure, 2 usage error. Taking the streams makes a
 * command callable from a unit test with an argv and a temporary database.
 *
 * To add a command: write server/tool/cmd_<topic>.c, declare its function
 * here, and add one line to the table in tool_args.c. The command sources
 * are compiled into the ts_server library (server/CMakeLists.txt), the
 * table with them, main() alone into the tissuetool executable.
 */
#ifndef TS_TOOL_COMMANDS_H
#define TS_TOOL_COMMANDS_H

#include <stdio.h>

typedef int (*ts_tool_fn)(int argc, char **argv, FILE *out, FILE *err);

typedef struct ts_tool_command {
  const char *name;    /* what the user types: "fit" */
  const char *summary; /* one line for tissuetool --help */
  ts_tool_fn run;
} ts_tool_command;

/* cmd_material.c: fit a material law to samples and store it; list fits. */
int ts_cmd_fit(int argc, char **argv, FILE *out, FILE *err);
int ts_cmd_materials(int argc, char **argv, FILE *out, FILE *err);

/* cmd_mesh.c: mesh info, extrude, subdivide --loop, refine --leb. */
int ts_cmd_mesh(int argc, char **argv, FILE *out, FILE *err);

/* cmd_learn.c: train the learned shortcut and store it; list, export,
 * import and delete stored models. */
int ts_cmd_learn(int argc, char **argv, FILE *out, FILE *err);
int ts_cmd_models(int argc, char **argv, FILE *out, FILE *err);

/* cmd_tissues.c: list the stored tissues; delete a stored upload. */
int ts_cmd_tissues(int argc, char **argv, FILE *out, FILE *err);

#endif
