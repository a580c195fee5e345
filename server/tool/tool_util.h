/*
 * tool_util.h: helpers the tissuetool commands share: option parsing, opening
 * the database the way the daemon does (schema migrations, default material
 * table on first use), and JSON output.
 */
#ifndef TS_TOOL_UTIL_H
#define TS_TOOL_UTIL_H

#include <stdio.h>

typedef struct ts_storage ts_storage;

/* The database the tool opens when --db is not given: the daemon's default
 * data directory ("data") and file name, relative to the working directory. */
#define TS_TOOL_DEFAULT_DB "data/tissued.sqlite"

/* One "--name VALUE" option (also accepted as "--name=VALUE"). */
typedef struct ts_tool_opt {
  const char *name;   /* without the dashes: "tissue" */
  const char **value; /* set to the option's value when given */
} ts_tool_opt;

/* Parses argv[1..argc) into options and positional arguments ("--" ends the
 * options). Returns 0, 1 when --help or -h was given, or 2 after printing a
 * usage error (unknown option, missing value, too many positionals) to err
 * as "tissuetool CMD: ...". */
int ts_tool_parse(int argc, char **argv, const ts_tool_opt *opts, int n_opts,
                  const char **positional, int max_positional, int *n_positional, FILE *err);

/* Opens the database at path (creating it if needed, unless must_exist:
 * the commands that only read or delete, which would otherwise list an
 * empty database made at a misspelt path) and loads the default material
 * table into it where absent. Returns 0 with *out, or 1 after printing why
 * to err (a missing directory or database is named). A default table that
 * cannot be loaded is only a warning. */
int ts_tool_open_db(const char *cmd, const char *path, int must_exist, ts_storage **out,
                    FILE *err);

/* Writes s as a JSON string literal (quotes included). */
void ts_tool_json_string(FILE *f, const char *s);

/* Writes a finite double so that it reads back bit for bit (%.17g); NaN and
 * infinities, which JSON lacks, as null. */
void ts_tool_json_number(FILE *f, double v);

#endif
