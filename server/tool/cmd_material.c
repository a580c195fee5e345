/*
 * cmd_material.c: the material commands of tissuetool.
 *
 *   tissuetool fit FILE --tissue T --layer L --direction axial|radial
 *                  [--name NAME] [--db PATH]
 *     reads strain,stress samples (server/core/ts_csv.h), fits
 *     sigma = a * e^(b * strain) by least squares (server/core/ts_fit.h),
 *     stores the fit (server/materials.h) and prints it as one JSON object.
 *   tissuetool materials [--tissue T] [--db PATH]
 *     prints the stored fits as a JSON array, one fit per line.
 *
 * Both open the database as the daemon does (migrations; the default
 * material table loaded where absent).
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "materials.h"
#include "tool_util.h"
#include "ts_storage.h"

static void fit_help(FILE *f) {
  fprintf(
      f,
      "usage: tissuetool fit FILE --tissue T --layer L --direction axial|radial\n"
      "                      [--name NAME] [--db PATH]\n"
      "\n"
      "Fits sigma = a * e^(b * strain) to the samples in FILE by least squares\n"
      "(the true minimum of the summed squared stress errors, not the log-linear\n"
      "approximation), stores the fit in the database under (T, L, direction, NAME),\n"
      "replacing a fit stored under the same key, and prints it as JSON:\n"
      "  {\"id\",\"tissue\",\"layer\",\"direction\",\"name\",\"a\",\"b\",\"rmse\",\"r2\",\n"
      "   \"samples\",\"created\",\"n\",\"a_loglinear\",\"b_loglinear\",\"db\"}\n"
      "with a and rmse in Pa, b per unit strain, n the number of samples.\n"
      "\n"
      "FILE: one sample per line, strain,stress (engineering strain as a fraction,\n"
      "stress in Pa and positive); '#' starts a comment; an optional first line\n"
      "strain,stress names the columns. At least 3 samples at 2 or more different\n"
      "strains.\n"
      "\n"
      "  --tissue T       a tissue in the database's catalog (e.g. stomach)\n"
      "  --layer L        one of the tissue's layers (e.g. mucosa)\n"
      "  --direction D    axial (along the layer's fibre direction) or radial\n"
      "  --name NAME      the fit's name (default: FILE's name without directory\n"
      "                   and extension); sessions choose fits by name, and\n"
      "                   \"default\" is the one used when none is chosen\n"
      "  --db PATH        the database (default %s; its directory must exist)\n"
      "\n"
      "Exit status: 0 stored, 1 failed (message on stderr), 2 usage error.\n",
      TS_TOOL_DEFAULT_DB);
}

static void materials_help(FILE *f) {
  fprintf(f,
          "usage: tissuetool materials [--tissue T] [--db PATH]\n"
          "\n"
          "Prints the stored material fits (all tissues, or tissue T) as a JSON array\n"
          "with one object per line:\n"
          "  {\"id\",\"tissue\",\"layer\",\"direction\",\"name\",\"a\",\"b\",\"rmse\",\"r2\",\n"
          "   \"samples\",\"created\"}\n"
          "a and rmse in Pa, b per unit strain, created in unix seconds. samples is 0\n"
          "for fits derived from published values (the default table), whose rmse\n"
          "and r2 do not apply.\n"
          "\n"
          "  --tissue T       only this tissue's fits\n"
          "  --db PATH        the database (default %s; it must exist: tissued makes\n"
          "                   it at its first start, tissuetool fit too)\n"
          "\n"
          "Exit status: 0 listed, 1 failed (message on stderr), 2 usage error.\n",
          TS_TOOL_DEFAULT_DB);
}

/* FILE's name without directory and last extension, for the default fit
 * name. */
static void stem(const char *path, char *out, size_t cap) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  snprintf(out, cap, "%.*s", (int)len, base);
}

/* A stored fit's fields as JSON members, without braces: "id", "tissue",
 * "layer", "direction", "name", "a", "b", "rmse", "r2", "samples", "created"
 * (what `materials` lists; `fit` adds to them). */
static void print_fields(FILE *out, const ts_material *m) {
  fprintf(out, "\"id\":%lld,\"tissue\":", (long long)m->id);
  ts_tool_json_string(out, m->tissue);
  fputs(",\"layer\":", out);
  ts_tool_json_string(out, m->layer);
  fputs(",\"direction\":", out);
  ts_tool_json_string(out, m->direction);
  fputs(",\"name\":", out);
  ts_tool_json_string(out, m->name);
  const struct {
    const char *key;
    double v;
  } nums[] = {{"a", m->a}, {"b", m->b}, {"rmse", m->rmse}, {"r2", m->r2}};
  for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
    fprintf(out, ",\"%s\":", nums[k].key);
    ts_tool_json_number(out, nums[k].v);
  }
  fprintf(out, ",\"samples\":%lld,\"created\":%lld", (long long)m->samples,
          (long long)m->created);
}

static void print_fit(FILE *out, const ts_material *m, const ts_expfit *f, const char *db) {
  fputc('{', out);
  print_fields(out, m);
  fprintf(out, ",\"n\":%lld,\"a_loglinear\":", (long long)m->samples);
  ts_tool_json_number(out, f->a_loglinear);
  fputs(",\"b_loglinear\":", out);
  ts_tool_json_number(out, f->b_loglinear);
  fputs(",\"db\":", out);
  ts_tool_json_string(out, db);
  fputs("}\n", out);
}

int ts_cmd_fit(int argc, char **argv, FILE *out, FILE *err) {
  const char *tissue = NULL, *layer = NULL, *direction = NULL, *name = NULL;
  const char *db = TS_TOOL_DEFAULT_DB;
  const ts_tool_opt opts[] = {{"tissue", &tissue},
                              {"layer", &layer},
                              {"direction", &direction},
                              {"name", &name},
                              {"db", &db}};
  const char *pos[1];
  int npos = 0;
  int rc = ts_tool_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &npos, err);
  if (rc == 1) {
    fit_help(out);
    return 0;
  }
  if (rc) return rc;
  const char *missing = npos == 0    ? "FILE"
                        : !tissue    ? "--tissue"
                        : !layer     ? "--layer"
                        : !direction ? "--direction"
                                     : NULL;
  if (missing) {
    fprintf(err, "tissuetool fit: %s is required (see tissuetool fit --help)\n", missing);
    return 2;
  }
  if (strcmp(direction, "axial") && strcmp(direction, "radial")) { /* before any file is read */
    fprintf(err, "tissuetool fit: --direction '%s' must be axial or radial\n", direction);
    return 2;
  }
  if (name && !*name) { /* it would have stored over the shipped "default" fit */
    fprintf(err, "tissuetool fit: --name is empty (name the fit; \"default\" replaces the "
                 "shipped one)\n");
    return 2;
  }
  const char *file = pos[0];
  char stem_name[TS_MATERIAL_TEXT_MAX + 1];
  if (!name) {
    stem(file, stem_name, sizeof stem_name);
    name = stem_name;
  }

  char msg[512];
  ts_samples s;
  if ((rc = ts_csv_read_samples_file(file, NULL, &s, msg, sizeof msg))) {
    fprintf(err, "tissuetool fit: %s: %s\n", file, msg);
    return 1;
  }
  ts_storage *st = NULL;
  if (ts_tool_open_db("fit", db, 0, &st, err)) {
    ts_samples_free(&s);
    return 1;
  }
  ts_material m;
  ts_expfit f;
  rc = ts_materials_fit_samples(st, tissue, layer, direction, name, &s, &m, &f, msg, sizeof msg);
  ts_samples_free(&s);
  ts_storage_close(st);
  if (rc) {
    fprintf(err, "tissuetool fit: %s: %s%s\n", file, msg,
            name == stem_name && strstr(msg, "name '") ? " (give --name NAME)" : "");
    return 1;
  }
  print_fit(out, &m, &f, db);
  return 0;
}

typedef struct list_ctx {
  FILE *out;
  int count;
} list_ctx;

static int print_material(void *ud, const ts_material *m) {
  list_ctx *c = ud;
  FILE *out = c->out;
  fputs(c->count ? ",\n{" : "[\n{", out);
  print_fields(out, m);
  fputc('}', out);
  c->count++;
  return 0;
}

int ts_cmd_materials(int argc, char **argv, FILE *out, FILE *err) {
  const char *tissue = NULL, *db = TS_TOOL_DEFAULT_DB;
  const ts_tool_opt opts[] = {{"tissue", &tissue}, {"db", &db}};
  int npos = 0;
  int rc = ts_tool_parse(argc, argv, opts, 2, NULL, 0, &npos, err);
  if (rc == 1) {
    materials_help(out);
    return 0;
  }
  if (rc) return rc;
  ts_storage *st = NULL;
  if (ts_tool_open_db("materials", db, 1, &st, err)) return 1;
  char msg[512];
  list_ctx c = {out, 0};
  rc = ts_materials_list(st, tissue, print_material, &c, msg, sizeof msg);
  ts_storage_close(st);
  if (rc) {
    fprintf(err, "tissuetool materials: %s\n", msg);
    return 1;
  }
  fputs(c.count ? "\n]\n" : "[]\n", out);
  return 0;
}
