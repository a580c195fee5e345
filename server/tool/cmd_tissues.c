/*
 * cmd_tissues.c: `tissuetool tissues`: the stored tissues of the database
 * (list), and the deletion of a stored upload (delete NAME), as the
 * daemon's ListTissues and DeleteTissue do it (storage:
 * ts_storage_delete_mesh_tissue). Offline, the tool cannot see a running
 * daemon's sessions: a session of a deleted tissue keeps running, but its
 * training can no longer store a model (the daemon's DeleteTissue refuses
 * while a session of it runs).
 */
#include <stdio.h>
#include <string.h>

#include "../core/ts_error.h"
#include "commands.h"
#include "tool_util.h"
#include "ts_storage.h"

static void tissues_help(FILE *f) {
  fprintf(f,
          "usage: tissuetool tissues [--db PATH] [list | delete NAME [--with-records]]\n"
          "\n"
          "--db PATH: the database (default %s); it must exist.\n"
          "\n"
          "  list          the stored tissues as a JSON array, one per line: name,\n"
          "                kind (builtin, or mesh: an upload), created (unix s)\n"
          "  delete NAME   deletes the stored upload NAME, and its mesh file unless\n"
          "                another upload has the same bytes; prints what went with it\n"
          "                as one JSON object. Its learned models and material fits\n"
          "                would go with it: without --with-records a tissue that has\n"
          "                any is left alone (exit status 1, saying how many; export\n"
          "                the models you want to keep first: tissuetool models export\n"
          "                ID). Built-in tissues cannot be deleted. A daemon running on\n"
          "                the database is not asked: a session of the tissue keeps\n"
          "                running, but cannot store a trained model afterwards (the\n"
          "                daemon's own 'tissuectl tissues delete' refuses while one runs)\n"
          "\n"
          "Exit status: 0 done, 1 failed, 2 usage error.\n",
          TS_TOOL_DEFAULT_DB);
}

typedef struct list_ctx {
  FILE *out;
  int count;
} list_ctx;

static int print_tissue(void *ud, const ts_tissue_rec *t) {
  list_ctx *c = ud;
  fputs(c->count++ ? ",\n{\"name\":" : "[\n{\"name\":", c->out);
  ts_tool_json_string(c->out, t->name);
  fputs(",\"kind\":", c->out);
  ts_tool_json_string(c->out, t->kind);
  fprintf(c->out, ",\"created\":%lld}", (long long)t->created);
  return 0;
}

int ts_cmd_tissues(int argc, char **argv, FILE *out, FILE *err) {
  const char *db = TS_TOOL_DEFAULT_DB;
  const ts_tool_opt opts[] = {{"db", &db}};
  /* --with-records takes no value, which ts_tool_parse's options all do:
   * taken out here (before a "--", which ends the options) */
  char *args[64];
  int n = 0, with = 0;
  if (argc > (int)(sizeof args / sizeof args[0])) {
    fprintf(err, "tissuetool tissues: too many arguments\n");
    return 2;
  }
  for (int i = 0, opts_end = 0; i < argc; i++) {
    if (!opts_end && !strcmp(argv[i], "--")) opts_end = 1;
    if (!opts_end && i > 0 && !strcmp(argv[i], "--with-records"))
      with = 1;
    else
      args[n++] = argv[i];
  }
  const char *pos[2] = {NULL, NULL};
  int npos = 0;
  int rc = ts_tool_parse(n, args, opts, 1, pos, 2, &npos, err);
  if (rc == 1) {
    tissues_help(out);
    return 0;
  }
  if (rc) return rc;
  const char *verb = npos ? pos[0] : "list";
  const int del = !strcmp(verb, "delete");
  if ((!del && strcmp(verb, "list")) || (del && (npos != 2 || !*pos[1])) || (!del && npos > 1)) {
    fprintf(err, "tissuetool tissues: expected list or delete NAME (see tissuetool tissues "
                 "--help)\n");
    return 2;
  }
  if (with && !del) {
    fprintf(err, "tissuetool tissues: --with-records applies to delete\n");
    return 2;
  }
  ts_storage *st = NULL;
  if (ts_tool_open_db("tissues", db, 1, &st, err)) return 1;
  int status = 1;
  if (!del) {
    list_ctx c = {out, 0};
    if (ts_storage_list_tissues(st, print_tissue, &c) < 0) {
      fprintf(err, "tissuetool tissues: %s\n", ts_storage_errmsg(st));
    } else {
      fputs(c.count ? "\n]\n" : "[]\n", out);
      status = 0;
    }
  } else {
    ts_tissue_deletion d;
    rc = ts_storage_delete_mesh_tissue(st, pos[1], with, &d);
    if (rc == TS_EBUSY) {
      fprintf(err, "tissuetool tissues: %s; give --with-records to delete them too\n",
              ts_storage_errmsg(st));
    } else if (rc) {
      fprintf(err, "tissuetool tissues: %s\n", ts_storage_errmsg(st));
    } else {
      fputs("{\"deleted\":", out);
      ts_tool_json_string(out, pos[1]);
      fprintf(out, ",\"models\":%lld,\"fits\":%lld,\"meshes\":%lld}\n", (long long)d.models,
              (long long)d.fits, (long long)d.meshes);
      status = 0;
    }
  }
  ts_storage_close(st);
  return status;
}
