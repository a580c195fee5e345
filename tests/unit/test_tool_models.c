/*
 * test_tool_models.c: `tissuetool models import` (server/tool/cmd_learn.c)
 * refuses a model that belongs to another tissue or another material with
 * a clear error and stores nothing (issue 6: "a model trained for another
 * tissue or material is refused with a clear error"), on a real SQLite file
 * in a fresh temporary directory per test. The command is called as a
 * function with an argv, as test_materials.c calls the other commands.
 *
 * The offline tool builds the built-in stomach patch ("stomach-patch") and
 * every mesh tissue catalogued in its database (its stored mesh and layers,
 * as a daemon session of it: server/tissue_catalog.h), so a model of a
 * tissue the database does not hold is refused by name; a model whose
 * material is not its tissue's own is refused naming both materials. The
 * same document with the tissue's own material is stored (version 1), with
 * the solve the document names: the refusals come from the tissue and
 * material, not from a malformed file. The liver case catalogues the shared
 * liver.obj (10 mm per unit, the default stomach-wall layers, as
 * itest_models uploads it) straight into the database.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/config.h"
#include "../../server/tool/commands.h"
#include "test_util.h"
#include "ts_layer_spec.h"
#include "ts_learn.h"
#include "ts_material.h"
#include "ts_mesh_tissue.h"
#include "ts_qstatic.h"
#include "ts_storage.h"
#include "ts_tissue.h"

static char tmpdir[256];
static char dbpath[300];
static char docpath[300];

static void setup(void) {
  tu_tmpdir_make(tmpdir, sizeof tmpdir, "ts_tool_models_test");
  snprintf(dbpath, sizeof dbpath, "%s/tissued.db", tmpdir);
  snprintf(docpath, sizeof docpath, "%s/model.json", tmpdir);
}

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

static tu_captured run_models(int argc, const char **argv) {
  return tu_run_cmd(ts_cmd_models, argc, argv);
}

/* An exported method model document of tissue and material (JSON-escaped),
 * with theta (a JSON array) learned of the refined solve at refine_edge. */
static void write_doc_of(const char *tissue, const char *material, const char *theta,
                         double refine_edge) {
  FILE *f = fopen(docpath, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "{\"format\":\"tissued-learned-model\",\"tissue\":\"%s\",\"material\":\"", tissue);
  for (const char *p = material; *p; p++) {
    if (*p == '"' || *p == '\\') fputc('\\', f);
    fputc(*p, f);
  }
  fprintf(f,
          "\",\"kind\":\"method\",\"theta\":%s,\"loss\":1e-9,\"samples\":100,"
          "\"heldout_rmse\":1e-4,\"heldout_max\":3e-4,\"solve\":\"refined\","
          "\"refine_edge\":%.17g}\n",
          theta, refine_edge);
  fclose(f);
}

static void write_doc(const char *tissue, const char *material) {
  write_doc_of(tissue, material, "[1.0,0.5,1e-4]", 0.002);
}

static tu_captured import_doc(void) {
  const char *argv[] = {"models", "--db", dbpath, "import", docpath};
  return run_models(5, argv);
}

/* Models stored, by `tissuetool models list` (one JSON object per model). */
static int n_models(void) {
  const char *argv[] = {"models", "--db", dbpath, "list"};
  tu_captured c = run_models(4, argv);
  ck_assert_msg(c.status == 0, "models list: %s", c.err);
  int n = 0;
  for (const char *p = c.out; (p = strstr(p, "\"material\"")) != NULL; p++) n++;
  tu_captured_free(&c);
  return n;
}

/* The material identity of the built-in patch the tool builds. */
static void patch_material(char *buf, size_t cap) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = TS_DEFAULT_PATCH_RESOLUTION; /* as a default daemon's, and the tool's */
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  ck_assert_uint_gt(ts_learn_material_id(t, &p, buf, cap), 0);
  ts_tissue_destroy(t);
}

/* The shared liver.obj's bytes (*len of them; free them). */
static uint8_t *liver_bytes(size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/data/meshes/liver.obj", TS_SHARED_DIR);
  return tu_read_file(path, len);
}

/* Catalogues the liver as tissue "liver" in the tool's database (a mesh
 * tissue: the bytes stored under a key of 64 hex digits, which the daemon
 * takes from their SHA-256 and the catalog only looks up; the default
 * layers with their built-in laws and fibres, as the daemon stores an
 * upload without a LayerSpec, 0.01 m per unit) and returns its
 * material identity, computed here from a tissue built by the function the
 * daemon builds mesh tissues with (core/ts_mesh_tissue.h). */
static void catalogue_liver(char *material, size_t cap) {
  size_t len = 0;
  uint8_t *obj = liver_bytes(&len);
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t nl = ts_material_default_layers(layers);
  ts_layer_spec ls;
  memset(&ls, 0, sizeof ls);
  ls.scale = 0.01;
  ls.n_layers = nl;
  for (uint32_t i = 0; i < nl; i++) {
    snprintf(ls.layers[i].name, sizeof ls.layers[i].name, "%.*s", TS_LAYER_SPEC_NAME - 1,
             layers[i].name);
    ls.layers[i].thickness = layers[i].thickness;
    memcpy(ls.layers[i].fibre, layers[i].fibre, sizeof ls.layers[i].fibre); /* as spec_text */
  }
  char spec[2048];
  ck_assert_int_gt(ts_layer_spec_format(&ls, spec, sizeof spec), 0);
  ts_storage *st = NULL;
  char err[256];
  ck_assert_msg(ts_storage_open(dbpath, &st, err, sizeof err) == 0, "%s", err);
  ts_mesh_rec rec = {.hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                     .format = "obj", .bytes = obj, .n_bytes = len, .vertex_count = 0,
                     .triangle_count = 0};
  ck_assert_int_gt(ts_storage_put_mesh_tissue(st, &rec, "liver", spec, NULL), 0);
  ts_storage_close(st);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 0.01;
  ts_mesh_tissue mt;
  char msg[600];
  ck_assert_msg(ts_mesh_tissue_build(obj, len, TS_MESH_OBJ, &o, layers, nl, &mt, msg,
                                     sizeof msg) == 0,
                "%s", msg);
  ts_qstatic_params p = ts_qstatic_default_params(mt.t);
  ck_assert_uint_gt(ts_learn_material_id(mt.t, &p, material, cap), 0);
  ts_mesh_tissue_free(&mt);
  free(obj);
}

START_TEST(import_other_tissue_refused) {
  char mat[1024];
  patch_material(mat, sizeof mat);
  write_doc("liver", mat); /* even with the patch's material */
  tu_captured c = import_doc();
  ck_assert_int_eq(c.status, 1);
  ck_assert_str_eq(c.out, "");
  ck_assert_msg(strstr(c.err, "unknown tissue 'liver'") && strstr(c.err, "stomach-patch"), "%s",
                c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 0);
}
END_TEST

START_TEST(import_other_material_refused) {
  char mat[1024];
  patch_material(mat, sizeof mat);
  write_doc("stomach-patch", "liver parenchyma; E=12 b=1 d=0.5");
  tu_captured c = import_doc();
  ck_assert_int_eq(c.status, 1);
  ck_assert_str_eq(c.out, "");
  ck_assert_msg(strstr(c.err, "trained for another material of stomach-patch") &&
                    strstr(c.err, "liver parenchyma; E=12 b=1 d=0.5") && strstr(c.err, mat),
                "%s", c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 0);

  /* the same document with the patch's own material is stored */
  write_doc("stomach-patch", mat);
  c = import_doc();
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_ptr_nonnull(strstr(c.out, "\"version\":1"));
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 1);
}
END_TEST

START_TEST(import_liver_model) {
  char liver[1024], patch[1024];
  catalogue_liver(liver, sizeof liver);
  patch_material(patch, sizeof patch);
  /* the liver's springs give it another E, so its identity is its own */
  ck_assert_str_ne(liver, patch);

  /* a liver model of the patch's material: refused, naming both */
  write_doc("liver", patch);
  tu_captured c = import_doc();
  ck_assert_int_eq(c.status, 1);
  ck_assert_str_eq(c.out, "");
  printf("liver model of the patch's material: %s", c.err);
  ck_assert_msg(strstr(c.err, "trained for another material of liver") && strstr(c.err, patch) &&
                    strstr(c.err, liver),
                "%s", c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 0);

  /* the liver's own: stored, with the solve its document names */
  write_doc("liver", liver);
  c = import_doc();
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_ptr_nonnull(strstr(c.out, "\"version\":1"));
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 1);
  ts_storage *st = NULL;
  char err[256];
  ck_assert_msg(ts_storage_open(dbpath, &st, err, sizeof err) == 0, "%s", err);
  ts_model_rec m;
  ck_assert_int_eq(ts_storage_get_model(st, 1, &m), 0);
  ck_assert_str_eq(m.material, liver);
  ck_assert_str_eq(m.solve, "refined");
  ck_assert(m.refine_edge == 0.002);
  ts_storage_model_free(&m);
  ts_storage_close(st);
}
END_TEST

/* Importing what is stored already stores nothing (the daemon's ImportModel
 * rule, model_doc.h: same tissue, material, kind, theta bit for bit, solve
 * and refine edge) and prints the stored model's id and version; a theta
 * one bit off, or the same theta learned at another refine edge, is another
 * model and becomes the next version. Without the rule in the tool the
 * second import stores version 2 (3 rows where 2 are asserted at the end). */
START_TEST(import_twice_stores_once) {
  char mat[1024];
  patch_material(mat, sizeof mat);
  write_doc("stomach-patch", mat);
  tu_captured c = import_doc();
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_str_eq(c.out, "{\"id\":1,\"version\":1}\n");
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 1);

  /* the same document again: model 1 named, nothing stored */
  c = import_doc();
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_str_eq(c.out, "{\"id\":1,\"version\":1}\n");
  ck_assert_msg(strstr(c.err, "stored already") != NULL, "%s", c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 1);

  /* theta's last value one bit off (1e-4 and the next double up): version 2 */
  char theta[128];
  snprintf(theta, sizeof theta, "[1.0,0.5,%.17g]", nextafter(1e-4, 1));
  write_doc_of("stomach-patch", mat, theta, 0.002);
  c = import_doc();
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_str_eq(c.out, "{\"id\":2,\"version\":2}\n");
  tu_captured_free(&c);
  /* the first theta learned at another refine edge: version 3 */
  write_doc_of("stomach-patch", mat, "[1.0,0.5,1e-4]", 0.001);
  c = import_doc();
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_str_eq(c.out, "{\"id\":3,\"version\":3}\n");
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 3);
  /* and each of them again: nothing more */
  c = import_doc();
  ck_assert_str_eq(c.out, "{\"id\":3,\"version\":3}\n");
  tu_captured_free(&c);
  write_doc_of("stomach-patch", mat, theta, 0.002);
  c = import_doc();
  ck_assert_str_eq(c.out, "{\"id\":2,\"version\":2}\n");
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 3);
}
END_TEST

/* Arguments that are not what they say: ids past the range (strtoll's
 * clamp named model 9223372036854775807) or with blanks, a directory or a
 * missing file to import (said "not JSON" and "cannot open" with no
 * reason). */
START_TEST(bad_ids_and_files) {
  const char *ids[] = {"99999999999999999999", " 5", "+5", "5x", "0"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const char *argv[] = {"models", "export", ids[i], "--db", dbpath};
    tu_captured c = run_models(5, argv);
    ck_assert_msg(c.status == 2, "export '%s': status %d", ids[i], c.status);
    ck_assert_msg(strstr(c.err, "is not a model id"), "export '%s': %s", ids[i], c.err);
    tu_captured_free(&c);
  }
  const char *dir[] = {"models", "import", tmpdir, "--db", dbpath};
  tu_captured c = run_models(5, dir);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "is a directory, not a model file"), "%s", c.err);
  tu_captured_free(&c);
  char missing[400];
  snprintf(missing, sizeof missing, "%s/nowhere.json", tmpdir);
  const char *none[] = {"models", "import", missing, "--db", dbpath};
  c = run_models(5, none);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "No such file or directory"), "%s", c.err);
  tu_captured_free(&c);
}
END_TEST

/* `import -` reads the document from standard input (as tissuectl's), and
 * stores what the file would; before, '-' was opened as a file of that
 * name ("cannot open -"). */
START_TEST(import_from_stdin) {
  char mat[1024];
  patch_material(mat, sizeof mat);
  write_doc("stomach-patch", mat);
  ck_assert_ptr_nonnull(freopen(docpath, "rb", stdin)); /* this test's own process */
  const char *argv[] = {"models", "--db", dbpath, "import", "-"};
  tu_captured c = run_models(5, argv);
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_str_eq(c.out, "{\"id\":1,\"version\":1}\n");
  tu_captured_free(&c);
  /* the same document from the file: stored already */
  c = import_doc();
  ck_assert_msg(c.status == 0 && strstr(c.err, "stored already"), "%s", c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 1);
  /* an empty standard input: not a model, nothing stored */
  ck_assert_ptr_nonnull(freopen("/dev/null", "rb", stdin));
  c = run_models(5, argv);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "tissuetool models: standard input: "), "%s", c.err);
  tu_captured_free(&c);
  ck_assert_int_eq(n_models(), 1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tool_models");
  TCase *c = tcase_create("import");
  tcase_add_checked_fixture(c, setup, teardown);
  tcase_add_test(c, import_other_tissue_refused);
  tcase_add_test(c, import_other_material_refused);
  tcase_add_test(c, import_liver_model);
  tcase_add_test(c, import_twice_stores_once);
  tcase_add_test(c, bad_ids_and_files);
  tcase_add_test(c, import_from_stdin);
  tcase_set_timeout(c, 120);
  suite_add_tcase(s, c);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
