/*
 * test_materials.c: Check suite for server/materials.h and the material
 * commands of tissuetool (server/tool/cmd_material.c), on real SQLite files
 * in a fresh temporary directory per test.
 *
 * - The default table loads into a fresh database exactly once: six rows
 *   with the file's numbers, a second load (also after reopening) inserts
 *   nothing, and a fit stored under a default key is never overwritten.
 * - The table's numbers follow the derivation its header documents.
 * - A malformed table is refused as a whole.
 * - `tissuetool fit` (called as a function with an argv) stores exactly the
 *   numbers an independent ts_fit_exp gives, ts_storage_list_fits returns
 *   them bit for bit, and its JSON says the same; usage errors exit 2 and
 *   failures 1 with a clear message; `tissuetool materials` lists them.
 * - `tissuetool models export|delete` says "no model" only for an id the
 *   database does not hold, and any other storage failure as storage says it.
 * - Resolving by tissue, layer, direction and name, with the per-layer
 *   fallback to "default" that sessions use.
 */
#include "ts_check.h"
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/tool/commands.h"
#include "materials.h"
#include "test_util.h"
#include "ts_error.h"
#include "ts_fit.h"
#include "ts_storage.h"

static char tmpdir[256];
static char dbpath[300];

static void setup(void) {
  tu_tmpdir_make(tmpdir, sizeof tmpdir, "ts_materials_test");
  snprintf(dbpath, sizeof dbpath, "%s/tissued.sqlite", tmpdir);
}

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

static ts_storage *open_db(void) {
  ts_storage *s = NULL;
  char err[256];
  int rc = ts_storage_open(dbpath, &s, err, sizeof err);
  ck_assert_msg(rc == 0, "open: %s", err);
  return s;
}

typedef struct collected {
  int n;
  ts_material m[32];
} collected;

static int collect(void *ud, const ts_material *m) {
  collected *c = ud;
  if (c->n < 32) c->m[c->n] = *m;
  c->n++;
  return 0;
}

static collected list_all(ts_storage *s, const char *tissue) {
  collected c;
  memset(&c, 0, sizeof c);
  char err[256];
  int rc = ts_materials_list(s, tissue, collect, &c, err, sizeof err);
  ck_assert_msg(rc == 0, "list: %d %s", rc, err);
  return c;
}

static const ts_material *find(const collected *c, const char *layer, const char *dir,
                               const char *name) {
  for (int i = 0; i < c->n && i < 32; i++)
    if (!strcmp(c->m[i].layer, layer) && !strcmp(c->m[i].direction, dir) &&
        !strcmp(c->m[i].name, name))
      return &c->m[i];
  return NULL;
}

/* Within 0.1 %: the table rounds a and b to four significant digits. */
static int rel_ok(double x, double ref) { return fabs(x - ref) <= 1e-3 * fabs(ref); }

/* ---- the default table ------------------------------------------------------ */

START_TEST(test_defaults_load_exactly_once) {
  ts_storage *s = open_db();
  char err[256];
  ck_assert_ptr_nonnull(strstr(ts_materials_default_table(), "stomach-wall-materials.csv"));
  int rc = ts_materials_load_defaults(s, NULL, err, sizeof err);
  ck_assert_msg(rc == 6, "first load: %d %s", rc, err);

  collected c = list_all(s, "stomach");
  ck_assert_int_eq(c.n, 6);
  static const struct {
    const char *layer, *dir;
    double a;
  } rows[] = {{"mucosa", "axial", 658.7},    {"mucosa", "radial", 658.7},
              {"submucosa", "axial", 5583},  {"submucosa", "radial", 3576},
              {"muscularis", "axial", 7864}, {"muscularis", "radial", 6693}};
  for (int i = 0; i < 6; i++) {
    const ts_material *m = find(&c, rows[i].layer, rows[i].dir, "default");
    ck_assert_msg(m != NULL, "%s/%s missing", rows[i].layer, rows[i].dir);
    ck_assert_str_eq(m->tissue, "stomach");
    ck_assert(m->a == rows[i].a); /* exactly the file's text */
    ck_assert(m->b == 2.55);
    ck_assert_int_eq(m->samples, 0);
    ck_assert(m->rmse == 0.0 && m->r2 == 0.0);
  }
  /* the tissue was created with the table's layers in order */
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(s, "stomach", &t), 0);
  ck_assert_str_eq(t.kind, "builtin");
  ck_assert_str_eq(t.layer_spec, "{\"layers\":[\"mucosa\",\"submucosa\",\"muscularis\"]}");
  ts_storage_tissue_free(&t);

  /* again: nothing inserted, nothing duplicated */
  ck_assert_int_eq(ts_materials_load_defaults(s, NULL, err, sizeof err), 0);
  ck_assert_int_eq(list_all(s, NULL).n, 6);

  /* a fit stored under a default key survives every later load */
  const ts_material *mucosa = find(&c, "mucosa", "axial", "default");
  ts_fit_rec f = {.tissue = 0,
                  .layer = "mucosa",
                  .direction = "axial",
                  .name = "default",
                  .a = 812.5,
                  .b = 4.25,
                  .rmse = 3.5,
                  .r2 = 0.995,
                  .samples = 31};
  ck_assert_int_eq(ts_storage_get_tissue(s, "stomach", &t), 0);
  f.tissue = t.id;
  ts_storage_tissue_free(&t);
  ck_assert_int_eq(ts_storage_put_fit(s, &f), mucosa->id);
  ts_storage_close(s);

  s = open_db();
  ck_assert_int_eq(ts_materials_load_defaults(s, NULL, err, sizeof err), 0);
  c = list_all(s, "stomach");
  ck_assert_int_eq(c.n, 6);
  const ts_material *m = find(&c, "mucosa", "axial", "default");
  ck_assert(m->a == 812.5 && m->b == 4.25 && m->samples == 31);
  ts_storage_close(s);
}
END_TEST

START_TEST(test_default_table_follows_its_derivation) {
  /* The header of stomach-wall-materials.csv derives every row; check the
   * stored numbers against that derivation (tolerance 0.1 %: the file rounds
   * a and b to four significant digits). */
  ts_storage *s = open_db();
  char err[256];
  ck_assert_int_eq(ts_materials_load_defaults(s, NULL, err, sizeof err), 6);
  collected c = list_all(s, "stomach");
  const double mu0[3] = {560.0, 3040.0, 5690.0};   /* Pa, Dargar et al. 2019 */
  const double ratio[3] = {1.0, 1.5614035, 1.175}; /* axial/radial */
  const double thick[3] = {1.0, 1.5, 2.0};         /* mm */
  const char *layers[3] = {"mucosa", "submucosa", "muscularis"};
  double wall_axial = 0.0;
  for (int i = 0; i < 3; i++) {
    const ts_material *ax = find(&c, layers[i], "axial", "default");
    const ts_material *ra = find(&c, layers[i], "radial", "default");
    ck_assert_ptr_nonnull(ax);
    ck_assert_ptr_nonnull(ra);
    double e0 = 3.0 * mu0[i];
    ck_assert_msg(rel_ok(ra->a * ra->b, e0), "%s radial a*b %.6g vs %.6g", layers[i], ra->a * ra->b,
                  e0);
    ck_assert_msg(rel_ok(ax->a * ax->b, e0 * ratio[i]), "%s axial a*b %.6g", layers[i],
                  ax->a * ax->b);
    wall_axial += thick[i] * ax->a * ax->b / 4.5;
  }
  /* the mucosa-submucosa pair has the axial/radial ratio 1.5 (Jia et al.) */
  double pair = (1.0 * 1680.0 + 1.5 * 9120.0 * ratio[1]) / (1.0 * 1680.0 + 1.5 * 9120.0);
  ck_assert_msg(fabs(pair - 1.5) < 1e-6, "pair ratio %.9f", pair);
  /* and the wall reaches Egorov et al.'s 0.7 MPa axially at 190 % strain */
  double b = find(&c, "mucosa", "axial", "default")->b;
  double sigma = wall_axial / b * exp(b * 1.9);
  ck_assert_msg(fabs(sigma - 0.7e6) / 0.7e6 < 0.01, "wall stress at 190 %%: %.6g Pa", sigma);
  ts_storage_close(s);
}
END_TEST

START_TEST(test_bad_tables_refused_whole) {
  ts_storage *s = open_db();
  char err[256];
  static const struct {
    const char *text, *msg;
    int code;
  } bad[] = {
      {"", "empty", TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2\nx,y,axial,n,1,1,0,0\n", "line 1: the header",
       TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\n", "no rows", TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\nliver,capsule,axial,default,1,2,0,0,0\n"
       "liver,capsule,fibre,default,1,2,0,0,0\n",
       "line 3: direction 'fibre' must be axial or radial", TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\nliver,capsule,axial,default,nan,2,0,0,0\n",
       "line 2: a 'nan' is not a finite number", TS_ENAN},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\nliver,capsule,axial,default,-1,2,0,0,0\n",
       "line 2: a must be positive", TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\nliver,capsule,axial,default,1,2,0,0,2.5\n",
       "line 2: samples '2.5' is not a count", TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\nliver,capsule,axial,default,1,2,0,0,0\n"
       "liver,capsule,axial,default,3,2,0,0,0\n",
       "line 3: the key liver/capsule/axial/default appears twice", TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\nliver,cap sule,axial,default,1,2,0,0,0\n",
       "line 2: layer 'cap sule' may only contain", TS_EINVAL},
      {"tissue,layer,direction,name,a,b,rmse,r2,samples\nliver,capsule,axial,default,1,2,0,0\n",
       "line 2: expected 9 fields, found 8", TS_EINVAL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = ts_materials_load_table(s, bad[i].text, strlen(bad[i].text), err, sizeof err);
    ck_assert_msg(rc == bad[i].code, "table %zu: rc %d (%s)", i, rc, err);
    ck_assert_msg(strstr(err, bad[i].msg) != NULL, "table %zu: '%s' lacks '%s'", i, err,
                  bad[i].msg);
  }
  /* nothing at all was written, not even the first good rows */
  ck_assert_int_eq(list_all(s, NULL).n, 0);
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(s, "liver", &t), TS_ENOTISSUE);

  /* a table file that does not exist */
  char missing[300];
  snprintf(missing, sizeof missing, "%s/none.csv", tmpdir);
  ck_assert_int_eq(ts_materials_load_defaults(s, missing, err, sizeof err), TS_EIO);
  ck_assert_ptr_nonnull(strstr(err, "none.csv"));
  ts_storage_close(s);
}
END_TEST

/* ---- tissuetool ------------------------------------------------------------------ */

/* The number after "key": in a JSON text (strtod reads %.17g back exactly). */
static double json_number(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  ck_assert_msg(p != NULL, "no %s in %s", key, json);
  return strtod(p + strlen(pat), NULL);
}

/* Noisy samples of a known law, written with %.17g so that the file holds
 * exactly these doubles; returns their count. */
static uint32_t write_samples(const char *path, double *e, double *s) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("# submucosa, radial: synthetic samples for the test\nstrain,stress\n", f);
  uint32_t n = 25;
  for (uint32_t i = 0; i < n; i++) {
    e[i] = 0.02 * (i + 1);
    /* a deterministic +-2 % wiggle instead of random noise */
    s[i] = 3576.0 * exp(2.55 * e[i]) * (1.0 + 0.02 * sin(7.0 * i));
    fprintf(f, "%.17g,%.17g\n", e[i], s[i]);
  }
  fclose(f);
  return n;
}

typedef struct raw_fits {
  int n;
  ts_fit_rec f[16];
  char name[16][64], layer[16][64], dir[16][64];
} raw_fits;

static int collect_raw(void *ud, const ts_fit_rec *f) {
  raw_fits *r = ud;
  if (r->n < 16) {
    r->f[r->n] = *f;
    snprintf(r->name[r->n], 64, "%s", f->name);
    snprintf(r->layer[r->n], 64, "%s", f->layer);
    snprintf(r->dir[r->n], 64, "%s", f->direction);
  }
  r->n++;
  return 0;
}

/* tissuetool models export/delete: "no model" only for an id storage does not
 * hold; any other storage failure is said as storage says it (a trigger that
 * refuses deletes stands in for a database that cannot be written) */
START_TEST(test_tool_models_errors) {
  /* no database at the path: said so, not made (an empty one made at a
   * misspelt path listed nothing and said "no model") */
  const char *exp[] = {"models", "--db", dbpath, "export", "99"};
  tu_captured c = tu_run_cmd(ts_cmd_models, 5, exp);
  ck_assert_int_eq(c.status, 1);
  ck_assert_ptr_nonnull(strstr(c.err, "no database at"));
  tu_captured_free(&c);
  const char *mat[] = {"materials", "--db", dbpath};
  c = tu_run_cmd(ts_cmd_materials, 3, mat);
  ck_assert_int_eq(c.status, 1);
  ck_assert_ptr_nonnull(strstr(c.err, "no database at"));
  tu_captured_free(&c);
  ck_assert_int_ne(access(dbpath, F_OK), 0);
  ts_storage_close(open_db()); /* the database, empty */
  c = tu_run_cmd(ts_cmd_models, 5, exp);
  ck_assert_int_eq(c.status, 1);
  ck_assert_str_eq(c.err, "tissuetool models: no model 99\n");
  tu_captured_free(&c);
  const char *del[] = {"models", "--db", dbpath, "delete", "99"};
  c = tu_run_cmd(ts_cmd_models, 5, del);
  ck_assert_int_eq(c.status, 1);
  ck_assert_str_eq(c.err, "tissuetool models: no model 99\n");
  tu_captured_free(&c);

  ts_storage *s = open_db();
  ts_tissue_rec tr = {.name = "models-errors", .kind = "builtin"};
  int64_t tissue = ts_storage_put_tissue(s, &tr);
  ck_assert_int_gt(tissue, 0);
  const float theta[3] = {1.0f, 2.0f, 3.0f};
  ts_model_rec m = {.tissue = tissue, .material = "default", .kind = "method",
                    .theta = (const uint8_t *)theta, .theta_bytes = sizeof theta,
                    .loss = 1e-6, .samples = 10, .heldout_rmse = 1e-5, .heldout_max = 2e-5};
  int64_t id = ts_storage_put_model(s, &m, NULL);
  ck_assert_int_gt(id, 0);
  ts_storage_close(s);
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(db,
                                "CREATE TRIGGER keep_models BEFORE DELETE ON learned_models "
                                "BEGIN SELECT RAISE(ABORT, 'models are kept here'); END",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  char ids[32];
  snprintf(ids, sizeof ids, "%lld", (long long)id);
  const char *del2[] = {"models", "--db", dbpath, "delete", ids};
  c = tu_run_cmd(ts_cmd_models, 5, del2);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "models are kept here") && !strstr(c.err, "no model"), "%s", c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(sqlite3_exec(db, "DROP TRIGGER keep_models", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  c = tu_run_cmd(ts_cmd_models, 5, del2); /* and deletes once it may */
  ck_assert_msg(c.status == 0, "%s", c.err);
  tu_captured_free(&c);
}
END_TEST

START_TEST(test_tool_fit_stores_exact_numbers) {
  char csv[300];
  snprintf(csv, sizeof csv, "%s/lab-2024.csv", tmpdir);
  double e[32], s[32];
  uint32_t n = write_samples(csv, e, s);
  ts_expfit ref;
  char err[256];
  ck_assert_int_eq(ts_fit_exp(e, s, NULL, n, &ref, err, sizeof err), 0);

  const char *argv[] = {"fit",       csv,           "--tissue", "stomach", "--layer",
                        "submucosa", "--direction", "radial",   "--db",    dbpath};
  tu_captured c = tu_run_cmd(ts_cmd_fit, 10, argv);
  ck_assert_msg(c.status == 0, "status %d: %s", c.status, c.err);
  ck_assert_str_eq(c.err, "");

  /* storage has it, bit for bit, under the file's stem as its name */
  ts_storage *st = open_db();
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(st, "stomach", &t), 0);
  raw_fits r;
  memset(&r, 0, sizeof r);
  ck_assert_int_eq(ts_storage_list_fits(st, t.id, collect_raw, &r), 0);
  ts_storage_tissue_free(&t);
  ck_assert_int_eq(r.n, 7); /* six defaults + this one */
  int k = 6;
  ck_assert_str_eq(r.name[k], "lab-2024");
  ck_assert_str_eq(r.layer[k], "submucosa");
  ck_assert_str_eq(r.dir[k], "radial");
  ck_assert(r.f[k].a == ref.a);
  ck_assert(r.f[k].b == ref.b);
  ck_assert(r.f[k].rmse == ref.rmse);
  ck_assert(r.f[k].r2 == ref.r2);
  ck_assert_int_eq(r.f[k].samples, n);
  /* the fit itself is sensible: the wiggle is +-2 % around a = 3576, b = 2.55 */
  ck_assert_msg(fabs(ref.a / 3576.0 - 1.0) < 0.03 && fabs(ref.b / 2.55 - 1.0) < 0.05,
                "a %.6g b %.6g", ref.a, ref.b);

  /* and the JSON printed says the same numbers */
  ck_assert_ptr_nonnull(strstr(c.out,
                               "\"tissue\":\"stomach\",\"layer\":\"submucosa\","
                               "\"direction\":\"radial\",\"name\":\"lab-2024\""));
  ck_assert(json_number(c.out, "a") == ref.a);
  ck_assert(json_number(c.out, "b") == ref.b);
  ck_assert(json_number(c.out, "rmse") == ref.rmse);
  ck_assert(json_number(c.out, "r2") == ref.r2);
  ck_assert(json_number(c.out, "n") == n);
  ck_assert(json_number(c.out, "id") == r.f[k].id);
  ck_assert(json_number(c.out, "b_loglinear") == ref.b_loglinear);
  tu_captured_free(&c);

  /* fitting again under an explicit name adds a row; the same name replaces */
  const char *argv2[] = {
      "fit",    csv,    "--tissue", "stomach", "--layer", "submucosa", "--direction=radial",
      "--name", "mine", "--db",     dbpath};
  c = tu_run_cmd(ts_cmd_fit, 11, argv2);
  ck_assert_msg(c.status == 0, "%s", c.err);
  tu_captured_free(&c);
  c = tu_run_cmd(ts_cmd_fit, 11, argv2);
  ck_assert_msg(c.status == 0, "%s", c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(list_all(st, "stomach").n, 8);

  /* listing prints every fit once, as JSON with one fit per line */
  const char *argv3[] = {"materials", "--tissue", "stomach", "--db", dbpath};
  c = tu_run_cmd(ts_cmd_materials, 5, argv3);
  ck_assert_msg(c.status == 0, "%s", c.err);
  int objects = 0;
  for (const char *p = c.out; (p = strstr(p, "{\"id\":")); p++) objects++;
  ck_assert_int_eq(objects, 8);
  ck_assert(c.out[0] == '[' && strstr(c.out, "\n]\n") != NULL);
  ck_assert_ptr_nonnull(strstr(c.out, "\"name\":\"mine\""));
  tu_captured_free(&c);
  ts_storage_close(st);
}
END_TEST

START_TEST(test_tool_errors) {
  char csv[300];
  snprintf(csv, sizeof csv, "%s/s.csv", tmpdir);
  double e[32], s[32];
  write_samples(csv, e, s);

  /* usage errors: exit 2 */
  const char *missing_dir[] = {"fit",     csv,      "--tissue", "stomach",
                               "--layer", "mucosa", "--db",     dbpath};
  tu_captured c = tu_run_cmd(ts_cmd_fit, 8, missing_dir);
  ck_assert_int_eq(c.status, 2);
  ck_assert_str_eq(c.err, "tissuetool fit: --direction is required (see tissuetool fit --help)\n");
  tu_captured_free(&c);
  const char *unknown[] = {"fit", csv, "--colour", "red"};
  c = tu_run_cmd(ts_cmd_fit, 4, unknown);
  ck_assert_int_eq(c.status, 2);
  ck_assert_ptr_nonnull(strstr(c.err, "unknown option --colour"));
  tu_captured_free(&c);
  const char *novalue[] = {"fit", csv, "--tissue"};
  c = tu_run_cmd(ts_cmd_fit, 3, novalue);
  ck_assert_int_eq(c.status, 2);
  ck_assert_ptr_nonnull(strstr(c.err, "option --tissue needs a value"));
  tu_captured_free(&c);
  /* an empty name would have stored over the shipped "default" fit */
  const char *empty_name[] = {"fit",    csv,           "--tissue", "stomach", "--layer", "mucosa",
                              "--direction", "axial", "--name", "",     "--db",    dbpath};
  c = tu_run_cmd(ts_cmd_fit, 12, empty_name);
  ck_assert_int_eq(c.status, 2);
  ck_assert_ptr_nonnull(strstr(c.err, "--name is empty"));
  tu_captured_free(&c);

  /* a direction that is neither of the two is a usage error, said before
   * the file is read (a missing file is not what is reported) */
  const char *bad_dir[] = {"fit",    "/nonexistent.csv", "--tissue", "stomach", "--layer",
                           "mucosa", "--direction",      "fibre",    "--db",    dbpath};
  c = tu_run_cmd(ts_cmd_fit, 10, bad_dir);
  ck_assert_int_eq(c.status, 2);
  ck_assert_msg(strstr(c.err, "--direction 'fibre' must be axial or radial"), "%s", c.err);
  tu_captured_free(&c);

  /* failures: exit 1 with the reason */
  const char *bad_layer[] = {"fit",    csv,           "--tissue", "stomach", "--layer",
                             "serosa", "--direction", "axial",    "--db",    dbpath};
  c = tu_run_cmd(ts_cmd_fit, 10, bad_layer);
  ck_assert_int_eq(c.status, 1);
  ck_assert_ptr_nonnull(strstr(c.err, "tissue stomach has no layer 'serosa'"));
  tu_captured_free(&c);
  const char *bad_tissue[] = {"fit",    csv,           "--tissue", "heart", "--layer",
                              "mucosa", "--direction", "axial",    "--db",  dbpath};
  c = tu_run_cmd(ts_cmd_fit, 10, bad_tissue);
  ck_assert_int_eq(c.status, 1);
  ck_assert_ptr_nonnull(strstr(c.err, "no tissue 'heart' in the catalog (known: stomach)"));
  tu_captured_free(&c);

  /* a sample file with an error names its line */
  char badcsv[300];
  snprintf(badcsv, sizeof badcsv, "%s/bad.csv", tmpdir);
  FILE *f = fopen(badcsv, "w");
  fputs("strain,stress\n0.1,10\n0.2,x\n", f);
  fclose(f);
  const char *bad_file[] = {"fit",    badcsv,        "--tissue", "stomach", "--layer",
                            "mucosa", "--direction", "axial",    "--db",    dbpath};
  c = tu_run_cmd(ts_cmd_fit, 10, bad_file);
  ck_assert_int_eq(c.status, 1);
  ck_assert_ptr_nonnull(strstr(c.err, "bad.csv: line 3: stress 'x' is not a number"));
  tu_captured_free(&c);

  /* a database in a directory that does not exist */
  char nodir[400];
  snprintf(nodir, sizeof nodir, "%s/nowhere/tissued.sqlite", tmpdir);
  const char *no_db[] = {"materials", "--db", nodir};
  c = tu_run_cmd(ts_cmd_materials, 3, no_db);
  ck_assert_int_eq(c.status, 1);
  ck_assert_ptr_nonnull(strstr(c.err, "does not exist"));
  tu_captured_free(&c);
  const char *no_tissue[] = {"materials", "--tissue", "nope", "--db", dbpath};
  c = tu_run_cmd(ts_cmd_materials, 5, no_tissue);
  ck_assert_int_eq(c.status, 1);
  ck_assert_ptr_nonnull(strstr(c.err, "no tissue 'nope'"));
  tu_captured_free(&c);

  /* help goes to stdout and exits 0 */
  const char *help[] = {"fit", "--help"};
  c = tu_run_cmd(ts_cmd_fit, 2, help);
  ck_assert_int_eq(c.status, 0);
  ck_assert_ptr_nonnull(strstr(c.out, "usage: tissuetool fit FILE --tissue T"));
  tu_captured_free(&c);
  const char *mhelp[] = {"materials", "-h"};
  c = tu_run_cmd(ts_cmd_materials, 2, mhelp);
  ck_assert_int_eq(c.status, 0);
  ck_assert_ptr_nonnull(strstr(c.out, "usage: tissuetool materials"));
  tu_captured_free(&c);
}
END_TEST

/* ---- resolving -------------------------------------------------------------------- */

START_TEST(test_resolve_and_fit_csv) {
  ts_storage *s = open_db();
  char err[256];
  ck_assert_int_eq(ts_materials_load_defaults(s, NULL, err, sizeof err), 6);

  ts_material m;
  ck_assert_int_eq(
      ts_materials_resolve(s, "stomach", "muscularis", "axial", NULL, &m, err, sizeof err), 0);
  ck_assert(m.a == 7864.0 && m.b == 2.55);
  ck_assert_str_eq(m.name, "default");

  /* the protocol path: CSV bytes in, a stored fit out */
  const char *csv = "strain,stress\n0.1,100\n0.2,160\n0.3,260\n0.4,415\n";
  ts_expfit fit;
  ck_assert_int_eq(ts_materials_fit_csv(s, "stomach", "submucosa", "radial", "lab", csv,
                                        strlen(csv), &m, &fit, err, sizeof err),
                   0);
  ck_assert(m.a == fit.a && m.b == fit.b);
  ck_assert_int_eq(m.samples, 4);
  ck_assert_msg(m.id > 6, "id %lld", (long long)m.id);
  const char *bad = "strain,stress\n0.1,100\n0.2,-5\n0.3,260\n";
  ck_assert_int_eq(ts_materials_fit_csv(s, "stomach", "submucosa", "radial", "lab", bad,
                                        strlen(bad), &m, NULL, err, sizeof err),
                   TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "line 3: stress -5 is not positive"));
  ck_assert_int_eq(ts_materials_fit_csv(s, "stomach", "submucosa", "radial", "bad name", csv,
                                        strlen(csv), &m, NULL, err, sizeof err),
                   TS_EINVAL);
  /* no name is no fit: it used to be stored as "default", over the shipped values */
  for (int q = 0; q < 2; q++) {
    ck_assert_int_eq(ts_materials_fit_csv(s, "stomach", "muscularis", "axial", q ? "" : NULL, csv,
                                          strlen(csv), &m, NULL, err, sizeof err),
                     TS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "a fit needs a name"));
  }
  ck_assert_int_eq(
      ts_materials_resolve(s, "stomach", "muscularis", "axial", NULL, &m, err, sizeof err), 0);
  ck_assert(m.a == 7864.0 && m.b == 2.55);

  ts_material lab;
  ck_assert_int_eq(
      ts_materials_resolve(s, "stomach", "submucosa", "radial", "lab", &lab, err, sizeof err), 0);
  ck_assert(lab.a == fit.a);
  ck_assert_int_eq(
      ts_materials_resolve(s, "stomach", "submucosa", "axial", "lab", &lab, err, sizeof err),
      TS_EINVAL);
  ck_assert_str_eq(err, "no material fit 'lab' for stomach/submucosa/axial (stored: default)");
  ck_assert_int_eq(
      ts_materials_resolve(s, "liver", "capsule", "axial", NULL, &lab, err, sizeof err),
      TS_ENOTISSUE);

  /* a session's layers: "lab" where it exists, "default" elsewhere */
  const char *layers[3] = {"mucosa", "submucosa", "muscularis"};
  ts_material ax[3], ra[3];
  ck_assert_int_eq(
      ts_materials_resolve_layers(s, "stomach", "lab", layers, 3, ax, ra, err, sizeof err), 0);
  ck_assert_str_eq(ra[1].name, "lab");
  ck_assert(ra[1].a == fit.a);
  ck_assert_str_eq(ax[1].name, "default");
  ck_assert(ax[1].a == 5583.0);
  ck_assert_str_eq(ra[0].name, "default");
  ck_assert(ax[2].a == 7864.0 && ra[2].a == 6693.0);
  /* a name no layer has is a mistake, not a silent fallback */
  ck_assert_int_eq(
      ts_materials_resolve_layers(s, "stomach", "lba", layers, 3, ax, ra, err, sizeof err),
      TS_EINVAL);
  ck_assert_str_eq(err, "no material fits named 'lba' for tissue stomach");
  const char *odd[1] = {"serosa"};
  ck_assert_int_eq(ts_materials_resolve_layers(s, "stomach", NULL, odd, 1, ax, ra, err, sizeof err),
                   TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "for stomach/serosa/axial"));
  ts_storage_close(s);
}
END_TEST

static Suite *materials_suite(void) {
  Suite *su = suite_create("materials");
  TCase *tc = tcase_create("sqlite");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_defaults_load_exactly_once);
  tcase_add_test(tc, test_default_table_follows_its_derivation);
  tcase_add_test(tc, test_bad_tables_refused_whole);
  tcase_add_test(tc, test_tool_fit_stores_exact_numbers);
  tcase_add_test(tc, test_tool_errors);
  tcase_add_test(tc, test_tool_models_errors);
  tcase_add_test(tc, test_resolve_and_fit_csv);
  suite_add_tcase(su, tc);
  return su;
}

int main(void) {
  SRunner *sr = srunner_create(materials_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
