/*
 * tool_util.c: option parsing, database opening and JSON output shared by
 * the tissuetool commands (tool_util.h).
 */
#include "tool_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "materials.h"
#include "ts_storage.h"

int ts_tool_parse(int argc, char **argv, const ts_tool_opt *opts, int n_opts,
                  const char **positional, int max_positional, int *n_positional, FILE *err) {
  const char *cmd = argc > 0 && argv[0] ? argv[0] : "?";
  int npos = 0, only_pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!only_pos && strcmp(a, "--") == 0) {
      only_pos = 1;
      continue;
    }
    if (!only_pos && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) return 1;
    if (!only_pos && a[0] == '-' && a[1] != '\0') {
      if (a[1] != '-') {
        fprintf(err, "tissuetool %s: unknown option %s (see tissuetool %s --help)\n", cmd, a, cmd);
        return 2;
      }
      const char *name = a + 2, *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      int k = 0;
      while (k < n_opts && !(strlen(opts[k].name) == len && memcmp(opts[k].name, name, len) == 0))
        k++;
      if (k == n_opts) {
        fprintf(err, "tissuetool %s: unknown option --%.*s (see tissuetool %s --help)\n", cmd,
                (int)len, name, cmd);
        return 2;
      }
      const char *v = eq ? eq + 1 : NULL;
      if (!v) {
        if (i + 1 >= argc) {
          fprintf(err, "tissuetool %s: option --%s needs a value\n", cmd, opts[k].name);
          return 2;
        }
        v = argv[++i];
      }
      *opts[k].value = v;
      continue;
    }
    if (npos >= max_positional) {
      fprintf(err, "tissuetool %s: unexpected argument '%s' (see tissuetool %s --help)\n", cmd, a,
              cmd);
      return 2;
    }
    positional[npos++] = a;
  }
  *n_positional = npos;
  return 0;
}

/* The directory part of path ("." when there is none). */
static void dir_of(const char *path, char *dir, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(dir, cap, ".");
  else if (slash == path)
    snprintf(dir, cap, "/");
  else
    snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

int ts_tool_open_db(const char *cmd, const char *path, int must_exist, ts_storage **out,
                    FILE *err) {
  *out = NULL;
  char dir[1024];
  dir_of(path, dir, sizeof dir);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(err,
            "tissuetool %s: %s: directory %s does not exist (start tissued there once, create "
            "it, or give --db PATH)\n",
            cmd, path, dir);
    return 1;
  }
  if (must_exist && stat(path, &st) != 0) {
    fprintf(err,
            "tissuetool %s: no database at %s (tissued makes it at its first start; give "
            "--db PATH)\n",
            cmd, path);
    return 1;
  }
  char msg[512];
  if (ts_storage_open(path, out, msg, sizeof msg) != 0) {
    fprintf(err, "tissuetool %s: %s\n", cmd, msg);
    return 1;
  }
  if (ts_materials_load_defaults(*out, NULL, msg, sizeof msg) < 0)
    fprintf(err, "tissuetool %s: warning: default materials not loaded: %s\n", cmd, msg);
  return 0;
}

void ts_tool_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

void ts_tool_json_number(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, "%.17g", v);
  else
    fputs("null", f);
}
