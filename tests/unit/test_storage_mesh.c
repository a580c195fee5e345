/*
 * test_storage_mesh.c: Check suite for the mesh part of storage/: uploaded
 * mesh files stored once by their SHA-256 (ts_storage_put_mesh,
 * ts_storage_put_mesh_tissue), exact round trips of the bytes, the tissue
 * record that points at them, the refusal of names held by built-in
 * tissues, the deletion of a mesh tissue, the migration that adds the table to an existing version-1
 * database, and the layer-spec text (ts_layer_spec.h) in both directions.
 * Real SQLite files in a fresh temporary directory per test.
 */
#include "ts_check.h"
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "test_util.h"
#include "ts_layer_spec.h"
#include "ts_storage.h"

static char tmpdir[256];
static char dbpath[300];

static void setup(void) {
  tu_tmpdir_make(tmpdir, sizeof tmpdir, "ts_storage_mesh_test");
  snprintf(dbpath, sizeof dbpath, "%s/tissued.sqlite", tmpdir);
}

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

static ts_storage *open_ok(void) {
  ts_storage *s = NULL;
  char err[256];
  int rc = ts_storage_open(dbpath, &s, err, sizeof err);
  ck_assert_msg(rc == 0, "open failed: %d %s", rc, err);
  return s;
}

/* Two different hashes (any 64 hex digits do for storage; the daemon
 * computes real SHA-256 digests). */
#define HASH_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define HASH_B "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

static ts_mesh_rec mesh(const char *hash, const uint8_t *bytes, size_t n) {
  ts_mesh_rec m;
  memset(&m, 0, sizeof m);
  m.hash = hash;
  m.format = "stl";
  m.bytes = bytes;
  m.n_bytes = n;
  m.vertex_count = 139;
  m.triangle_count = 274;
  return m;
}

START_TEST(test_mesh_stored_once) {
  ts_storage *s = open_ok();
  /* binary content with NUL bytes, to show the blob is not treated as text */
  uint8_t bytes[1000];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 7 % 256);
  ts_mesh_rec m = mesh(HASH_A, bytes, sizeof bytes);
  ck_assert_int_eq(ts_storage_put_mesh(s, &m), 1);
  ck_assert_int_eq(ts_storage_put_mesh(s, &m), 0);
  ck_assert_int_eq(ts_storage_count_meshes(s), 1);
  int ins = -1;
  int64_t id = ts_storage_put_mesh_tissue(s, &m, "liver-a", "{}", &ins);
  ck_assert_int_gt(id, 0);
  ck_assert_int_eq(ins, 0);
  int64_t id2 = ts_storage_put_mesh_tissue(s, &m, "liver-b", "{}", &ins);
  ck_assert_int_gt(id2, id);
  ck_assert_int_eq(ins, 0);
  ck_assert_int_eq(ts_storage_count_meshes(s), 1);

  ts_mesh_rec g;
  ck_assert_int_eq(ts_storage_get_mesh(s, HASH_A, &g), 0);
  ck_assert_str_eq(g.hash, HASH_A);
  ck_assert_str_eq(g.format, "stl");
  ck_assert_uint_eq(g.n_bytes, sizeof bytes);
  ck_assert_int_eq(memcmp(g.bytes, bytes, sizeof bytes), 0);
  ck_assert_int_eq(g.vertex_count, 139);
  ck_assert_int_eq(g.triangle_count, 274);
  ck_assert_int_gt(g.created, 1700000000);
  ts_storage_mesh_free(&g);

  ck_assert_int_eq(ts_storage_get_mesh(s, HASH_B, &g), TS_ENOTISSUE);
  ts_storage_close(s);
}
END_TEST

START_TEST(test_mesh_tissue_record) {
  ts_storage *s = open_ok();
  uint8_t a[] = "solid a\nendsolid a\n", b[] = "v 0 0 0\n";
  ts_mesh_rec ma = mesh(HASH_A, a, sizeof a - 1), mb = mesh(HASH_B, b, sizeof b - 1);
  int ins = -1;
  int64_t id = ts_storage_put_mesh_tissue(s, &ma, "organ", "spec-1", &ins);
  ck_assert_int_gt(id, 0);
  ck_assert_int_eq(ins, 1);
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(s, "organ", &t), 0);
  ck_assert_str_eq(t.kind, "mesh");
  ck_assert_str_eq(t.mesh_hash, HASH_A);
  ck_assert_str_eq(t.layer_spec, "spec-1");
  ts_storage_tissue_free(&t);
  /* the same name again with other bytes: the tissue now points at them, its
   * id stays, both files are kept */
  ck_assert_int_eq(ts_storage_put_mesh_tissue(s, &mb, "organ", "spec-2", &ins), id);
  ck_assert_int_eq(ins, 1);
  ck_assert_int_eq(ts_storage_get_tissue(s, "organ", &t), 0);
  ck_assert_str_eq(t.mesh_hash, HASH_B);
  ck_assert_str_eq(t.layer_spec, "spec-2");
  ts_storage_tissue_free(&t);
  ck_assert_int_eq(ts_storage_count_meshes(s), 2);

  /* a built-in tissue's name is refused and nothing is written */
  ts_tissue_rec bt = {.name = "stomach", .kind = "builtin"};
  ck_assert_int_gt(ts_storage_put_tissue(s, &bt), 0);
  uint8_t c[] = "ply\n";
  ts_mesh_rec mc = mesh("0000000000000000000000000000000000000000000000000000000000000000", c, 4);
  ck_assert_int_eq(ts_storage_put_mesh_tissue(s, &mc, "stomach", "x", &ins), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "built-in"));
  ck_assert_int_eq(ts_storage_count_meshes(s), 2);
  ck_assert_int_eq(ts_storage_get_tissue(s, "stomach", &t), 0);
  ck_assert_str_eq(t.kind, "builtin");
  ts_storage_tissue_free(&t);
  ts_storage_close(s);

  /* and all of it survives a reopen */
  s = open_ok();
  ck_assert_int_eq(ts_storage_count_meshes(s), 2);
  ts_mesh_rec g;
  ck_assert_int_eq(ts_storage_get_mesh(s, HASH_B, &g), 0);
  ck_assert_uint_eq(g.n_bytes, sizeof b - 1);
  ck_assert_int_eq(memcmp(g.bytes, b, g.n_bytes), 0);
  ts_storage_mesh_free(&g);
  ts_storage_close(s);
}
END_TEST

/* ts_storage_delete_mesh_tissue: a tissue with models or fits only when
 * asked (else TS_EBUSY and nothing changes), the mesh bytes while another
 * tissue names them kept, the orphan of a re-upload removed, built-in and
 * unknown names refused. */
START_TEST(test_mesh_tissue_delete) {
  ts_storage *s = open_ok();
  uint8_t a[] = "solid a\nendsolid a\n", b[] = "v 0 0 0\n";
  ts_mesh_rec ma = mesh(HASH_A, a, sizeof a - 1), mb = mesh(HASH_B, b, sizeof b - 1);
  int64_t organ = ts_storage_put_mesh_tissue(s, &ma, "organ", "spec", NULL);
  ck_assert_int_gt(organ, 0);
  ck_assert_int_gt(ts_storage_put_mesh_tissue(s, &ma, "twin", "spec", NULL), 0); /* same bytes */
  ck_assert_int_gt(ts_storage_put_mesh_tissue(s, &mb, "ball", "spec", NULL), 0);
  ck_assert_int_gt(ts_storage_put_mesh_tissue(s, &ma, "ball", "spec", NULL), 0); /* B orphaned */
  ck_assert_int_eq(ts_storage_count_meshes(s), 2);
  ts_tissue_rec bt = {.name = "stomach", .kind = "builtin"};
  ck_assert_int_gt(ts_storage_put_tissue(s, &bt), 0);
  /* organ holds a model and a fit */
  const uint8_t theta[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ts_model_rec m = {.tissue = organ, .material = "m", .kind = "linear-modal", .theta = theta,
                    .theta_bytes = sizeof theta, .solve = "plain"};
  ck_assert_int_gt(ts_storage_put_model(s, &m, NULL), 0);
  ts_fit_rec f = {.tissue = organ, .layer = "mucosa", .direction = "axial", .name = "soft",
                  .a = 1e3, .b = 5, .samples = 3};
  ck_assert_int_gt(ts_storage_put_fit(s, &f), 0);

  ts_tissue_deletion d;
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, "organ", 0, &d), TS_EBUSY);
  ck_assert_int_eq(d.models, 1);
  ck_assert_int_eq(d.fits, 1);
  ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "1 learned model and 1 material fit"));
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(s, "organ", &t), 0); /* still there */
  ts_storage_tissue_free(&t);
  ck_assert_int_eq(ts_storage_count_meshes(s), 2);

  /* with its records: they go too; A stays (twin and ball name it), the
   * orphaned B goes */
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, "organ", 1, &d), 0);
  ck_assert_int_eq(d.models, 1);
  ck_assert_int_eq(d.fits, 1);
  ck_assert_int_eq(d.meshes, 1);
  ck_assert_int_eq(ts_storage_get_tissue(s, "organ", &t), TS_ENOTISSUE);
  ck_assert_int_eq(ts_storage_count_meshes(s), 1);
  ts_mesh_rec g;
  ck_assert_int_eq(ts_storage_get_mesh(s, HASH_A, &g), 0);
  ts_storage_mesh_free(&g);
  ck_assert_int_eq(ts_storage_get_mesh(s, HASH_B, &g), TS_ENOTISSUE);
  ts_model_rec gm;
  ck_assert_int_eq(ts_storage_get_latest_model(s, organ, "m", "linear-modal", &gm), TS_ENOMODEL);

  /* no records: deleted without asking; the bytes stay while ball names them */
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, "twin", 0, &d), 0);
  ck_assert_int_eq(d.meshes, 0);
  ck_assert_int_eq(ts_storage_count_meshes(s), 1);
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, "ball", 0, &d), 0);
  ck_assert_int_eq(d.meshes, 1);
  ck_assert_int_eq(ts_storage_count_meshes(s), 0);

  /* refused: unknown, again, built-in, empty */
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, "ball", 1, &d), TS_ENOTISSUE);
  ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "\"ball\""));
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, "stomach", 1, NULL), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(ts_storage_errmsg(s), "built-in"));
  ck_assert_int_eq(ts_storage_get_tissue(s, "stomach", &t), 0);
  ts_storage_tissue_free(&t);
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, "", 1, NULL), TS_EINVAL);
  ck_assert_int_eq(ts_storage_delete_mesh_tissue(s, NULL, 1, NULL), TS_EINVAL);
  ts_storage_close(s);
}
END_TEST

START_TEST(test_mesh_bad_input) {
  ts_storage *s = open_ok();
  uint8_t b[4] = {1, 2, 3, 4};
  ts_mesh_rec m = mesh("9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08", b, 4);
  ck_assert_int_eq(ts_storage_put_mesh(s, &m), TS_EINVAL); /* upper case */
  m.hash = "9f86d0";
  ck_assert_int_eq(ts_storage_put_mesh(s, &m), TS_EINVAL); /* short */
  m.hash = HASH_A;
  m.format = "3ds";
  ck_assert_int_eq(ts_storage_put_mesh(s, &m), TS_EINVAL);
  m.format = "obj";
  m.n_bytes = 0;
  ck_assert_int_eq(ts_storage_put_mesh(s, &m), TS_EINVAL);
  m.n_bytes = 4;
  m.triangle_count = -1;
  ck_assert_int_eq(ts_storage_put_mesh(s, &m), TS_EINVAL);
  m.triangle_count = 1;
  ck_assert_int_eq(ts_storage_put_mesh_tissue(s, &m, "", "x", NULL), TS_EINVAL);
  ck_assert_int_eq(ts_storage_count_meshes(s), 0);
  ts_mesh_rec g;
  ck_assert_int_eq(ts_storage_get_mesh(s, "zz", &g), TS_EINVAL);
  ts_storage_close(s);
}
END_TEST

/* A database written before the meshes table existed (schema version 1)
 * gets it on open, keeping its tissues. */
START_TEST(test_migration_from_version_1) {
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
  const char *v1 =
      "CREATE TABLE tissues (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT NOT "
      "NULL, mesh_hash TEXT NOT NULL DEFAULT '', layer_spec TEXT NOT NULL DEFAULT '', created "
      "INTEGER NOT NULL DEFAULT 0);"
      "CREATE TABLE material_fits (id INTEGER PRIMARY KEY, tissue INTEGER, layer TEXT, "
      "direction TEXT, a REAL, b REAL, rmse REAL, r2 REAL, samples INTEGER, name TEXT, created "
      "INTEGER);"
      "CREATE TABLE learned_models (id INTEGER PRIMARY KEY AUTOINCREMENT, tissue INTEGER, "
      "material TEXT, kind TEXT, version INTEGER, theta BLOB, loss REAL, samples INTEGER, "
      "heldout_rmse REAL, heldout_max REAL, created INTEGER);"
      "INSERT INTO tissues (name, kind) VALUES ('stomach', 'builtin');"
      "PRAGMA user_version = 1;";
  ck_assert_int_eq(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  ts_storage *s = open_ok();
  ck_assert_int_eq(ts_storage_schema_version(s), ts_storage_code_version());
  ck_assert_int_ge(ts_storage_code_version(), 2);
  ck_assert_int_eq(ts_storage_count_meshes(s), 0);
  ts_tissue_rec t;
  ck_assert_int_eq(ts_storage_get_tissue(s, "stomach", &t), 0);
  ts_storage_tissue_free(&t);
  ts_storage_close(s);
}
END_TEST

START_TEST(test_layer_spec_roundtrip) {
  ts_layer_spec ls;
  memset(&ls, 0, sizeof ls);
  ls.scale = 0.01;
  ls.n_layers = 3;
  snprintf(ls.layers[0].name, sizeof ls.layers[0].name, "mucosa");
  ls.layers[0].thickness = 1e-3;
  snprintf(ls.layers[1].name, sizeof ls.layers[1].name, "sub \"quoted\" \\ layer\t1");
  ls.layers[1].thickness = 0.1 + 0.2; /* not exactly representable in few digits */
  snprintf(ls.layers[1].material, sizeof ls.layers[1].material, "fit-7");
  snprintf(ls.layers[2].name, sizeof ls.layers[2].name, "muscularis");
  ls.layers[2].thickness = 2e-3;
  ls.layers[2].fibre[0] = 0.1; /* a muscle layer with its fibre along ~x */
  ls.layers[2].fibre[1] = -1e-300;
  ls.layers[2].fibre[2] = 1.0 / 3.0;
  char buf[2048];
  int n = ts_layer_spec_format(&ls, buf, sizeof buf);
  ck_assert_int_gt(n, 0);
  ck_assert_uint_eq(strlen(buf), (size_t)n);
  ts_layer_spec back;
  char err[128];
  ck_assert_msg(ts_layer_spec_parse(buf, &back, err, sizeof err) == 0, "%s: %s", buf, err);
  ck_assert(back.scale == ls.scale); /* %.17g round-trips exactly */
  ck_assert_uint_eq(back.n_layers, 3);
  for (int i = 0; i < 3; i++) {
    ck_assert_str_eq(back.layers[i].name, ls.layers[i].name);
    ck_assert(back.layers[i].thickness == ls.layers[i].thickness);
    ck_assert_str_eq(back.layers[i].material, ls.layers[i].material);
    for (int k = 0; k < 3; k++) ck_assert(back.layers[i].fibre[k] == ls.layers[i].fibre[k]);
  }
  /* only a layer with a fibre writes one: older readers' specs stay as they were */
  const char *f1 = strstr(buf, "\"fibre\"");
  ck_assert_ptr_nonnull(f1);
  ck_assert_ptr_null(strstr(f1 + 1, "\"fibre\""));
  ck_assert(f1 > strstr(buf, "muscularis"));
  /* whitespace and key order are free */
  const char *other = " { \"layers\" : [ {\"material\":\"\", \"thickness\": 5e-4,\"name\":\"a\"} ],"
                      "\n \"scale\" : 1 } ";
  ck_assert_int_eq(ts_layer_spec_parse(other, &back, err, sizeof err), 0);
  ck_assert_uint_eq(back.n_layers, 1);
  ck_assert_double_eq_tol(back.layers[0].thickness, 5e-4, 1e-18);
  ck_assert(back.scale == 1.0);
  ck_assert(back.layers[0].fibre[0] == 0 && back.layers[0].fibre[1] == 0 &&
            back.layers[0].fibre[2] == 0);
  const char *fib = "{\"scale\":1,\"layers\":[{\"name\":\"m\",\"fibre\":[ 0 , 1e-3,-2 ],"
                    "\"thickness\":1,\"material\":\"\"}]}";
  ck_assert_msg(ts_layer_spec_parse(fib, &back, err, sizeof err) == 0, "%s", err);
  ck_assert(back.layers[0].fibre[0] == 0 && back.layers[0].fibre[1] == 1e-3 &&
            back.layers[0].fibre[2] == -2);
  /* too small a buffer */
  ck_assert_int_eq(ts_layer_spec_format(&ls, buf, 20), TS_ETOOBIG);
  ls.layers[2].thickness = NAN;
  ck_assert_int_eq(ts_layer_spec_format(&ls, buf, sizeof buf), TS_EINVAL);
}
END_TEST

START_TEST(test_layer_spec_refused) {
  const char *bad[] = {
      "",
      "{}",
      "{\"scale\":1}",
      "{\"scale\":0,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\"}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"\",\"thickness\":1,\"material\":\"\"}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":-1,\"material\":\"\"}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\",\"x\":1}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\"}]} x",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\"}]",
      "{\"scale\":1e999,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\"}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\\q\",\"thickness\":1,\"material\":\"\"}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\",\"fibre\":[1,0]}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\",\"fibre\":[1,0,0,0]}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\",\"fibre\":1}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\",\"fibre\":[1,0,1e999]}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"a\",\"thickness\":1,\"material\":\"\",\"fibre\":[1,0,0],"
      "\"fibre\":[0,1,0]}]}",
      "{\"scale\":1,\"layers\":[{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
      "\"thickness\":1,\"material\":\"\"}]}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ts_layer_spec ls;
    char err[128] = "";
    ck_assert_msg(ts_layer_spec_parse(bad[i], &ls, err, sizeof err) == TS_EINVAL, "accepted: %s",
                  bad[i]);
    ck_assert_msg(strstr(err, "byte") != NULL, "no place named for %s: %s", bad[i], err);
  }
  /* nine layers: one more than the limit */
  char buf[2048] = "{\"scale\":1,\"layers\":[";
  for (int i = 0; i < 9; i++)
    strcat(buf, i ? ",{\"name\":\"a\",\"thickness\":1,\"material\":\"\"}"
                  : "{\"name\":\"a\",\"thickness\":1,\"material\":\"\"}");
  strcat(buf, "]}");
  ts_layer_spec ls;
  ck_assert_int_eq(ts_layer_spec_parse(buf, &ls, NULL, 0), TS_EINVAL);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("storage_mesh");
  TCase *tc = tcase_create("mesh");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_mesh_stored_once);
  tcase_add_test(tc, test_mesh_tissue_record);
  tcase_add_test(tc, test_mesh_tissue_delete);
  tcase_add_test(tc, test_mesh_bad_input);
  tcase_add_test(tc, test_migration_from_version_1);
  tcase_add_test(tc, test_layer_spec_roundtrip);
  tcase_add_test(tc, test_layer_spec_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
