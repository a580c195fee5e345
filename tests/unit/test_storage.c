/*
 * test_storage.c: Check suite for storage/ (ts_storage.h) on real SQLite
 * files in a fresh temporary directory per test: migrations and versions,
 * WAL mode, exact round trips of tissues, fits and models, constraint
 * behaviour, and clear errors for databases it must refuse.
 */
#include "ts_check.h"
#include <dirent.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "ts_storage.h"
#include "ts_storage_int.h" /* ts__migrations: a database of an older schema */

static char tmpdir[256];
static char dbpath[300];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_storage_test.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  snprintf(dbpath, sizeof dbpath, "%s/tissued.sqlite", tmpdir);
}

static void teardown(void) {
  DIR *d = opendir(tmpdir);
  if (d) {
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(tmpdir);
}

static ts_storage *open_ok(void) {
  ts_storage *s = NULL;
  char err[256];
  int rc = ts_storage_open(dbpath, &s, err, sizeof err);
  ck_assert_msg(rc == 0, "open failed: %d %s", rc, err);
  ck_assert_ptr_nonnull(s);
  return s;
}

/* Runs one query on a separate raw connection and returns its first column
 * as text (static buffer). */
static const char *raw_query(const char *sql) {
  static char out[256];
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                sqlite3_errmsg(db));
  out[0] = '\0';
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    snprintf(out, sizeof out, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

static void raw_exec(const char *sql) {
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
  char *msg = NULL;
  ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql,
                msg ? msg : "?");
  sqlite3_close(db);
}

static int64_t put_tissue(ts_storage *s, const char *name, const char *kind, const char *hash,
                          const char *layers) {
  ts_tissue_rec t = {.name = name, .kind = kind, .mesh_hash = hash, .layer_spec = layers};
  return ts_storage_put_tissue(s, &t);
}

/* ---- schema -------------------------------------------------------------- */

START_TEST(test_migrations_create_schema) {
  ts_storage *s = open_ok();
  ck_assert_int_ge(ts_storage_code_version(), 1);
  ck_assert_int_eq(ts_storage_schema_version(s), ts_storage_code_version());
  char v[32];
  snprintf(v, sizeof v, "%d", ts_storage_code_version());
  ck_assert_str_eq(raw_query("PRAGMA user_version"), v);
  ck_assert_str_eq(raw_query("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                             "name IN ('tissues', 'material_fits', 'learned_models')"),
                   "3");
  /* the columns the API relies on */
  ck_assert_str_eq(raw_query("SELECT group_concat(name, ',') FROM pragma_table_info('tissues')"),
                   "id,name,kind,mesh_hash,layer_spec,created");
  ck_assert_str_eq(
      raw_query("SELECT group_concat(name, ',') FROM pragma_table_info('material_fits')"),
      "id,tissue,layer,direction,a,b,rmse,r2,samples,name,created");
  ck_assert_str_eq(
      raw_query("SELECT group_concat(name, ',') FROM pragma_table_info('learned_models')"),
      "id,tissue,material,kind,version,theta,loss,samples,heldout_rmse,heldout_max,created,"
      "solve,refine_edge");
  ck_assert_str_eq(raw_query("SELECT type FROM pragma_table_info('learned_models') "
                             "WHERE name = 'theta'"),
                   "BLOB");
  ts_storage_close(s);
}
END_TEST

START_TEST(test_journal_mode_is_wal) {
  ts_storage *s = open_ok();
  /* WAL is persistent: a second connection sees it in the file */
  ck_assert_str_eq(raw_query("PRAGMA journal_mode"), "wal");
  ck_assert_int_gt(put_tissue(s, "stomach-patch", "builtin", "", ""), 0);
  char wal[320];
  snprintf(wal, sizeof wal, "%s-wal", dbpath);
  ck_assert_int_eq(access(wal, F_OK), 0);
  ts_storage_close(s);
}
END_TEST

START_TEST(test_reopen_keeps_data_and_version) {
  ts_storage *s = open_ok();
  int64_t id = put_tissue(s, "liver", "mesh", "ab12cd", "[{\"name\":\"capsule\"}]");
  ck_assert_int_gt(id, 0);
  ts_storage_close(s);

  s = open_ok();
  ck_assert_int_eq(ts_storage_schema_version(s), ts_storage_code_version());
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(s, "liver", &t), 0);
  ck_assert_int_eq(t.id, id);
  ck_assert_str_eq(t.kind, "mesh");
  ck_assert_str_eq(t.mesh_hash, "ab12cd");
  ck_assert_str_eq(t.layer_spec, "[{\"name\":\"capsule\"}]");
  ts_storage_tissue_free(&t);
  ts_storage_close(s);
}
END_TEST

/* ---- tissues -------------------------------------------------------------- */

typedef struct collected {
  int n;
  int64_t ids[16];
  char names[16][32];
  int stop_after; /* 0 = never */
} collected;

static int collect_tissue(void *ud, const ts_tissue_rec *t) {
  collected *c = ud;
  if (c->n < 16) {
    c->ids[c->n] = t->id;
    snprintf(c->names[c->n], sizeof c->names[0], "%s", t->name);
  }
  c->n++;
  return c->stop_after && c->n >= c->stop_after ? 42 : 0;
}

START_TEST(test_tissue_roundtrip_and_upsert) {
  ts_storage *s = open_ok();
  time_t now = time(NULL);
  int64_t a = put_tissue(s, "stomach-patch", "builtin", NULL, "3 layers");
  int64_t b = put_tissue(s, "liver", "mesh", "0123abcd", "");
  ck_assert_int_gt(a, 0);
  ck_assert_int_gt(b, a);

  /* same name: an update of the same row */
  ck_assert_int_eq(put_tissue(s, "stomach-patch", "builtin", "", "mucosa,submucosa"), a);
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(s, "stomach-patch", &t), 0);
  ck_assert_int_eq(t.id, a);
  ck_assert_str_eq(t.name, "stomach-patch");
  ck_assert_str_eq(t.kind, "builtin");
  ck_assert_str_eq(t.mesh_hash, "");
  ck_assert_str_eq(t.layer_spec, "mucosa,submucosa");
  ck_assert_int_ge(t.created, (int64_t)now - 5);
  ck_assert_int_le(t.created, (int64_t)now + 5);
  ts_storage_tissue_free(&t);
  ck_assert_ptr_null(t.name);

  collected c = {0};
  ck_assert_int_eq(ts_storage_list_tissues(s, collect_tissue, &c), 0);
  ck_assert_int_eq(c.n, 2);
  ck_assert_int_eq(c.ids[0], a);
  ck_assert_str_eq(c.names[0], "stomach-patch");
  ck_assert_int_eq(c.ids[1], b);
  ck_assert_str_eq(c.names[1], "liver");

  /* a callback's non-zero return stops the walk and is returned */
  collected stop = {.stop_after = 1};
  ck_assert_int_eq(ts_storage_list_tissues(s, collect_tissue, &stop), 42);
  ck_assert_int_eq(stop.n, 1);

  ck_assert_int_eq(ts_storage_get_tissue(s, "kidney", &t), TS_ENOTISSUE);
  ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "kidney"));
  ck_assert_int_eq(put_tissue(s, "", "mesh", "", ""), TS_EINVAL);
  ck_assert_int_eq(put_tissue(s, NULL, "mesh", "", ""), TS_EINVAL);
  ck_assert_int_eq(put_tissue(s, "heart", "voxels", "", ""), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "voxels"));
  ck_assert_int_eq(put_tissue(s, "heart", NULL, "", ""), TS_EINVAL);
  /* the refused puts wrote nothing */
  ck_assert_str_eq(raw_query("SELECT count(*) FROM tissues"), "2");
  ts_storage_close(s);
}
END_TEST

/* ---- material fits --------------------------------------------------------- */

typedef struct fits {
  int n;
  ts_fit_rec f[8];
  char text[8][3][32];
} fits;

static int collect_fit(void *ud, const ts_fit_rec *f) {
  fits *c = ud;
  if (c->n < 8) {
    c->f[c->n] = *f;
    snprintf(c->text[c->n][0], 32, "%s", f->layer);
    snprintf(c->text[c->n][1], 32, "%s", f->direction);
    snprintf(c->text[c->n][2], 32, "%s", f->name);
  }
  c->n++;
  return 0;
}

START_TEST(test_fit_roundtrip_exact_and_unique) {
  ts_storage *s = open_ok();
  int64_t patch = put_tissue(s, "stomach-patch", "builtin", "", "");
  int64_t liver = put_tissue(s, "liver", "mesh", "ff", "");
  ts_fit_rec f = {.tissue = patch, .layer = "mucosa", .direction = "fibre", .name = "default",
                  .a = 1234.5678901234567, .b = 0.1 + 0.2, .rmse = 1.0 / 3.0,
                  .r2 = 0.99871234, .samples = 412};
  int64_t id1 = ts_storage_put_fit(s, &f);
  ck_assert_int_gt(id1, 0);
  ts_fit_rec g = f;
  g.direction = "cross";
  g.a = 987.25;
  int64_t id2 = ts_storage_put_fit(s, &g);
  ck_assert_int_gt(id2, id1);
  ts_fit_rec h = f;
  h.tissue = liver;
  h.layer = "capsule";
  int64_t id3 = ts_storage_put_fit(s, &h);
  ck_assert_int_gt(id3, id2);

  fits c = {0};
  ck_assert_int_eq(ts_storage_list_fits(s, patch, collect_fit, &c), 0);
  ck_assert_int_eq(c.n, 2);
  ck_assert_int_eq(c.f[0].id, id1);
  ck_assert_int_eq(c.f[0].tissue, patch);
  ck_assert_str_eq(c.text[0][0], "mucosa");
  ck_assert_str_eq(c.text[0][1], "fibre");
  ck_assert_str_eq(c.text[0][2], "default");
  /* doubles come back bit for bit */
  ck_assert(c.f[0].a == 1234.5678901234567);
  ck_assert(c.f[0].b == 0.1 + 0.2);
  ck_assert(c.f[0].rmse == 1.0 / 3.0);
  ck_assert(c.f[0].r2 == 0.99871234);
  ck_assert_int_eq(c.f[0].samples, 412);
  ck_assert_str_eq(c.text[1][1], "cross");
  ck_assert(c.f[1].a == 987.25);

  fits all = {0};
  ck_assert_int_eq(ts_storage_list_fits(s, 0, collect_fit, &all), 0);
  ck_assert_int_eq(all.n, 3);
  ck_assert_int_eq(all.f[2].tissue, liver);

  /* unique (tissue, layer, direction, name): a second put replaces the values */
  ts_fit_rec f2 = f;
  f2.a = 2000.0;
  f2.b = 7.5;
  f2.samples = 500;
  ck_assert_int_eq(ts_storage_put_fit(s, &f2), id1);
  fits again = {0};
  ck_assert_int_eq(ts_storage_list_fits(s, patch, collect_fit, &again), 0);
  ck_assert_int_eq(again.n, 2);
  ck_assert_int_eq(again.f[0].id, id1);
  ck_assert(again.f[0].a == 2000.0);
  ck_assert(again.f[0].b == 7.5);
  ck_assert_int_eq(again.f[0].samples, 500);
  ck_assert_str_eq(raw_query("SELECT count(*) FROM material_fits"), "3");

  /* refused: missing tissue, NaN, empty text, negative samples */
  ts_fit_rec bad = f;
  bad.tissue = 999;
  ck_assert_int_eq(ts_storage_put_fit(s, &bad), TS_ENOTISSUE);
  bad = f;
  bad.a = NAN;
  ck_assert_int_eq(ts_storage_put_fit(s, &bad), TS_ENAN);
  bad = f;
  bad.r2 = INFINITY;
  ck_assert_int_eq(ts_storage_put_fit(s, &bad), TS_ENAN);
  bad = f;
  bad.layer = "";
  ck_assert_int_eq(ts_storage_put_fit(s, &bad), TS_EINVAL);
  bad = f;
  bad.samples = -1;
  ck_assert_int_eq(ts_storage_put_fit(s, &bad), TS_EINVAL);
  ck_assert_int_eq(ts_storage_list_fits(s, -1, collect_fit, &c), TS_EINVAL);
  ck_assert_str_eq(raw_query("SELECT count(*) FROM material_fits"), "3");
  ts_storage_close(s);
}
END_TEST

/* ---- learned models --------------------------------------------------------- */

typedef struct models {
  int n;
  int64_t id[8], version[8];
  size_t bytes[8];
  uint32_t sum[8];
} models;

static uint32_t byte_sum(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static int collect_model(void *ud, const ts_model_rec *m) {
  models *c = ud;
  if (c->n < 8) {
    c->id[c->n] = m->id;
    c->version[c->n] = m->version;
    c->bytes[c->n] = m->theta_bytes;
    c->sum[c->n] = byte_sum(m->theta, m->theta_bytes);
  }
  c->n++;
  return 0;
}

START_TEST(test_model_roundtrip_versions_delete) {
  ts_storage *s = open_ok();
  int64_t patch = put_tissue(s, "stomach-patch", "builtin", "", "");
  enum { N = 1500 };
  static float theta[N];
  for (int i = 0; i < N; i++) theta[i] = (i % 7 == 0) ? 0.0f : sinf((float)i) * 1e-3f * (float)i;
  theta[3] = -0.0f;
  theta[5] = 1e-38f; /* near-denormal */

  ts_model_rec m = {.tissue = patch, .material = "mucosa/default", .kind = "linear-modal",
                    .theta = (const uint8_t *)theta, .theta_bytes = sizeof theta,
                    .loss = 3.25e-7, .samples = 20000, .heldout_rmse = 1.5e-5,
                    .heldout_max = 8.75e-5};
  int64_t v = -1;
  int64_t id1 = ts_storage_put_model(s, &m, &v);
  ck_assert_int_gt(id1, 0);
  ck_assert_int_eq(v, 1);
  int64_t id2 = ts_storage_put_model(s, &m, &v);
  ck_assert_int_gt(id2, id1);
  ck_assert_int_eq(v, 2);
  /* an explicit version that exists is refused; stored models are immutable */
  ts_model_rec dup = m;
  dup.version = 1;
  ck_assert_int_eq(ts_storage_put_model(s, &dup, NULL), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "exists"));
  dup.version = 7;
  int64_t id7 = ts_storage_put_model(s, &dup, &v);
  ck_assert_int_gt(id7, id2);
  ck_assert_int_eq(v, 7);

  ts_model_rec g;
  ck_assert_int_eq(ts_storage_get_model(s, id1, &g), 0);
  ck_assert_int_eq(g.id, id1);
  ck_assert_int_eq(g.tissue, patch);
  ck_assert_str_eq(g.material, "mucosa/default");
  ck_assert_str_eq(g.kind, "linear-modal");
  ck_assert_int_eq(g.version, 1);
  ck_assert_uint_eq(g.theta_bytes, sizeof theta);
  ck_assert_int_eq(memcmp(g.theta, theta, sizeof theta), 0);
  ck_assert(g.loss == 3.25e-7);
  ck_assert_int_eq(g.samples, 20000);
  ck_assert(g.heldout_rmse == 1.5e-5);
  ck_assert(g.heldout_max == 8.75e-5);
  ts_storage_model_free(&g);

  ck_assert_int_eq(ts_storage_get_latest_model(s, patch, "mucosa/default", "linear-modal", &g),
                   0);
  ck_assert_int_eq(g.id, id7);
  ck_assert_int_eq(g.version, 7);
  ts_storage_model_free(&g);
  ck_assert_int_eq(ts_storage_get_latest_model(s, patch, "muscularis", "linear-modal", &g),
                   TS_ENOMODEL);

  models c = {0};
  ck_assert_int_eq(ts_storage_list_models(s, patch, collect_model, &c), 0);
  ck_assert_int_eq(c.n, 3);
  ck_assert_int_eq(c.version[0], 1);
  ck_assert_int_eq(c.version[1], 2);
  ck_assert_int_eq(c.version[2], 7);
  ck_assert_uint_eq(c.bytes[1], sizeof theta);
  ck_assert_uint_eq(c.sum[1], byte_sum((const uint8_t *)theta, sizeof theta));

  ck_assert_int_eq(ts_storage_delete_model(s, id2), 0);
  ck_assert_int_eq(ts_storage_get_model(s, id2, &g), TS_ENOMODEL);
  ck_assert_int_eq(ts_storage_delete_model(s, id2), TS_ENOMODEL);
  models after = {0};
  ck_assert_int_eq(ts_storage_list_models(s, 0, collect_model, &after), 0);
  ck_assert_int_eq(after.n, 2);
  ck_assert_int_eq(after.id[0], id1);
  ck_assert_int_eq(after.id[1], id7);

  /* refused inputs */
  ts_model_rec bad = m;
  bad.tissue = 12345;
  ck_assert_int_eq(ts_storage_put_model(s, &bad, NULL), TS_ENOTISSUE);
  bad = m;
  bad.theta_bytes = 0;
  ck_assert_int_eq(ts_storage_put_model(s, &bad, NULL), TS_EINVAL);
  bad = m;
  bad.loss = NAN;
  ck_assert_int_eq(ts_storage_put_model(s, &bad, NULL), TS_ENAN);
  bad = m;
  bad.kind = "";
  ck_assert_int_eq(ts_storage_put_model(s, &bad, NULL), TS_EINVAL);
  ck_assert_str_eq(raw_query("SELECT count(*) FROM learned_models"), "2");
  ts_storage_close(s);

  /* theta survives a reopen, byte for byte */
  s = open_ok();
  ck_assert_int_eq(ts_storage_get_model(s, id7, &g), 0);
  ck_assert_uint_eq(g.theta_bytes, sizeof theta);
  ck_assert_int_eq(memcmp(g.theta, theta, sizeof theta), 0);
  ts_storage_model_free(&g);
  ts_storage_close(s);
}
END_TEST

/* Schema 3: a model records the solve it learned; a database of schema 2
 * upgrades and its models read as "unknown"; the newest model that may run
 * on a solve is that solve's, never another solve's nor an unknown one
 * (which solve it learned cannot be verified), though the unknown one is
 * still read, listed and deleted. */
START_TEST(test_model_solve_recorded_and_matched) {
  /* a schema-2 database with one model, as code before schema 3 left it */
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(sqlite3_exec(db, ts__migrations[i], NULL, NULL, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(db,
                                "PRAGMA user_version = 2;"
                                "INSERT INTO tissues (name, kind) VALUES ('patch', 'builtin');"
                                "INSERT INTO learned_models (tissue, material, kind, version, "
                                "theta, loss, samples, heldout_rmse, heldout_max) VALUES (1, "
                                "'m', 'method', 1, x'000000000000f03f', 0, 1, 0, 0);",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);
  ts_storage *s = open_ok();
  ck_assert_int_eq(ts_storage_schema_version(s), ts_storage_code_version());
  ts_model_rec r;
  ck_assert_int_eq(ts_storage_get_model(s, 1, &r), 0);
  ck_assert_str_eq(r.solve, "unknown");
  ck_assert(r.refine_edge == 0);
  ts_storage_model_free(&r);
  uint8_t th[8] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f};
  ts_model_rec m = {.tissue = 1, .material = "m", .kind = "method", .theta = th,
                    .theta_bytes = 8, .samples = 1, .solve = "refined", .refine_edge = 0.00188};
  int64_t refined = ts_storage_put_model(s, &m, NULL);
  ck_assert_int_gt(refined, 0);
  m.solve = "plain";
  m.refine_edge = 0;
  int64_t plain = ts_storage_put_model(s, &m, NULL);
  ck_assert_int_gt(plain, refined);
  ck_assert_int_eq(ts_storage_get_model(s, refined, &r), 0);
  ck_assert_str_eq(r.solve, "refined");
  ck_assert(r.refine_edge == 0.00188);
  ts_storage_model_free(&r);
  /* bad solves are refused */
  m.solve = "refined";
  m.refine_edge = 0;
  ck_assert_int_eq(ts_storage_put_model(s, &m, NULL), TS_EINVAL);
  m.solve = "plain";
  m.refine_edge = 0.001;
  ck_assert_int_eq(ts_storage_put_model(s, &m, NULL), TS_EINVAL);
  m.solve = "coarse";
  m.refine_edge = 0;
  ck_assert_int_eq(ts_storage_put_model(s, &m, NULL), TS_EINVAL);
  /* the newest that matches: the refined solve of the same edge gets the
   * refined model although the plain one is newer; another edge none (the
   * unknown one is not offered); the plain solve the plain one */
  ck_assert_int_eq(
      ts_storage_get_latest_model_solve(s, 1, "m", "method", "refined", 0.00188, &r), 0);
  ck_assert_int_eq(r.id, refined);
  ts_storage_model_free(&r);
  ck_assert_int_eq(
      ts_storage_get_latest_model_solve(s, 1, "m", "method", "refined", 0.0025, &r),
      TS_ENOMODEL);
  ck_assert_int_eq(ts_storage_get_latest_model_solve(s, 1, "m", "method", "plain", 0, &r), 0);
  ck_assert_int_eq(r.id, plain);
  ts_storage_model_free(&r);
  ck_assert_int_eq(ts_storage_delete_model(s, plain), 0);
  ck_assert_int_eq(ts_storage_delete_model(s, refined), 0);
  /* only the unknown model left: no solve is offered it; unasked, it is */
  ck_assert_int_eq(ts_storage_get_latest_model_solve(s, 1, "m", "method", "plain", 0, &r),
                   TS_ENOMODEL);
  ck_assert_int_eq(
      ts_storage_get_latest_model_solve(s, 1, "m", "method", "unknown", 0, &r), 0);
  ck_assert_int_eq(r.id, 1);
  ts_storage_model_free(&r);
  ck_assert_int_eq(ts_storage_delete_model(s, 1), 0);
  /* the schema's CHECK holds behind the API too */
  ck_assert_str_eq(raw_query("SELECT count(*) FROM learned_models WHERE solve NOT IN "
                             "('plain', 'refined', 'unknown')"),
                   "0");
  ts_storage_close(s);
}
END_TEST

START_TEST(test_two_handles_share_the_file) {
  ts_storage *a = open_ok();
  ts_storage *b = open_ok();
  int64_t id = put_tissue(a, "stomach-patch", "builtin", "", "");
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(b, "stomach-patch", &t), 0);
  ck_assert_int_eq(t.id, id);
  ts_storage_tissue_free(&t);
  ck_assert_int_eq(put_tissue(b, "stomach-patch", "builtin", "", "v2"), id);
  ck_assert_int_eq(ts_storage_get_tissue(a, "stomach-patch", &t), 0);
  ck_assert_str_eq(t.layer_spec, "v2");
  ts_storage_tissue_free(&t);
  ts_storage_close(a);
  ts_storage_close(b);
}
END_TEST

/* ---- refusals ------------------------------------------------------------------ */

START_TEST(test_future_version_refused) {
  ts_storage *s = open_ok();
  ck_assert_int_gt(put_tissue(s, "liver", "mesh", "aa", ""), 0);
  ts_storage_close(s);
  raw_exec("PRAGMA user_version = 99");

  char err[512] = "";
  s = (ts_storage *)1;
  int rc = ts_storage_open(dbpath, &s, err, sizeof err);
  ck_assert_int_eq(rc, TS_ESTORAGE);
  ck_assert_ptr_null(s);
  ck_assert_msg(strstr(err, "99") && strstr(err, "newer"), "message: %s", err);
  ck_assert_ptr_nonnull(strstr(err, dbpath));
  /* refusing did not touch the data or the version */
  ck_assert_str_eq(raw_query("PRAGMA user_version"), "99");
  ck_assert_str_eq(raw_query("SELECT name FROM tissues"), "liver");
}
END_TEST

START_TEST(test_not_a_database_refused) {
  FILE *f = fopen(dbpath, "wb");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 512; i++) fputs("this is not an SQLite file\n", f);
  fclose(f);
  char err[512] = "";
  ts_storage *s = (ts_storage *)1;
  ck_assert_int_eq(ts_storage_open(dbpath, &s, err, sizeof err), TS_ESTORAGE);
  ck_assert_ptr_null(s);
  ck_assert_msg(strstr(err, "not a database") != NULL, "message: %s", err);
}
END_TEST

START_TEST(test_corrupt_pages_give_errors) {
  /* a valid header with garbage pages behind it */
  ts_storage *s = open_ok();
  ck_assert_int_gt(put_tissue(s, "liver", "mesh", "aa", ""), 0);
  ts_storage_close(s);
  FILE *f = fopen(dbpath, "r+b");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  ck_assert_int_ge(size, 4096);
  fseek(f, 100, SEEK_SET); /* keep the 100-byte file header */
  for (long i = 100; i < size; i++) fputc((int)((i * 131) & 0xff), f);
  fclose(f);

  char err[512] = "";
  int rc = ts_storage_open(dbpath, &s, err, sizeof err);
  if (rc == 0) {
    /* opened: then every read must fail cleanly */
    ts_tissue_rec t;
    int g = ts_storage_get_tissue(s, "liver", &t);
    ck_assert_int_eq(g, TS_ESTORAGE);
    ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "malformed"));
    ts_storage_close(s);
  } else {
    ck_assert_int_eq(rc, TS_ESTORAGE);
    ck_assert_msg(strlen(err) > strlen(dbpath) + 2, "message: %s", err);
  }
}
END_TEST

START_TEST(test_missing_directory_refused) {
  char p[400];
  snprintf(p, sizeof p, "%s/no/such/dir/db.sqlite", tmpdir);
  char err[512] = "";
  ts_storage *s = (ts_storage *)1;
  ck_assert_int_eq(ts_storage_open(p, &s, err, sizeof err), TS_ESTORAGE);
  ck_assert_ptr_null(s);
  ck_assert_msg(strstr(err, "unable to open") != NULL, "message: %s", err);
  ck_assert_int_eq(ts_storage_open("", &s, err, sizeof err), TS_ESTORAGE);
}
END_TEST

static Suite *storage_suite(void) {
  Suite *su = suite_create("storage");
  TCase *tc = tcase_create("sqlite");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_migrations_create_schema);
  tcase_add_test(tc, test_model_solve_recorded_and_matched);
  tcase_add_test(tc, test_journal_mode_is_wal);
  tcase_add_test(tc, test_reopen_keeps_data_and_version);
  tcase_add_test(tc, test_tissue_roundtrip_and_upsert);
  tcase_add_test(tc, test_fit_roundtrip_exact_and_unique);
  tcase_add_test(tc, test_model_roundtrip_versions_delete);
  tcase_add_test(tc, test_two_handles_share_the_file);
  tcase_add_test(tc, test_future_version_refused);
  tcase_add_test(tc, test_not_a_database_refused);
  tcase_add_test(tc, test_corrupt_pages_give_errors);
  tcase_add_test(tc, test_missing_directory_refused);
  suite_add_tcase(su, tc);
  return su;
}

int main(void) {
  SRunner *sr = srunner_create(storage_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
