/*
 * test_tool_models.c: `tissuetool models import` (server/tool/cmd_learn.c)
 * refuses a model that belongs to another tissue or another material with
 * a clear error and stores nothing (issue 6: "a model trained for another
 * tissue or material is refused with a clear error"), on a real SQLite file
 * in a fresh temporary directory per test. The command is called as a
 * function with an argv, as test_materials.c calls the other commands.
 *
 * The offline tool builds only the built-in stomach patch ("stomach-patch"),
 * so a model of any other tissue is refused by name; a stomach-patch model
 * whose material is not the patch's own is refused naming both materials.
 * The same document with the patch's own material is stored (version 1):
 * the refusals come from the tissue and material, not from a malformed file.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/tool/commands.h"
#include "ts_learn.h"
#include "ts_qstatic.h"
#include "ts_tissue.h"

static char tmpdir[256];
static char dbpath[300];
static char docpath[300];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_tool_models_test.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  snprintf(dbpath, sizeof dbpath, "%s/tissued.db", tmpdir);
  snprintf(docpath, sizeof docpath, "%s/model.json", tmpdir);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

typedef struct captured {
  char *out, *err;
  size_t out_len, err_len;
  int status;
} captured;

static captured run_models(int argc, const char **argv) {
  captured c;
  memset(&c, 0, sizeof c);
  FILE *out = open_memstream(&c.out, &c.out_len);
  FILE *err = open_memstream(&c.err, &c.err_len);
  ck_assert_ptr_nonnull(out);
  ck_assert_ptr_nonnull(err);
  c.status = ts_cmd_models(argc, (char **)argv, out, err);
  fclose(out);
  fclose(err);
  return c;
}

static void captured_free(captured *c) {
  free(c->out);
  free(c->err);
}

/* An exported method model document of tissue and material (JSON-escaped). */
static void write_doc(const char *tissue, const char *material) {
  FILE *f = fopen(docpath, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "{\"format\":\"tissued-learned-model\",\"tissue\":\"%s\",\"material\":\"", tissue);
  for (const char *p = material; *p; p++) {
    if (*p == '"' || *p == '\\') fputc('\\', f);
    fputc(*p, f);
  }
  fputs("\",\"kind\":\"method\",\"theta\":[1.0,0.5,1e-4],\"loss\":1e-9,\"samples\":100,"
        "\"heldout_rmse\":1e-4,\"heldout_max\":3e-4}\n",
        f);
  fclose(f);
}

static captured import_doc(void) {
  const char *argv[] = {"models", "--db", dbpath, "import", docpath};
  return run_models(5, argv);
}

/* Models stored, by `tissuetool models list` (one JSON object per model). */
static int n_models(void) {
  const char *argv[] = {"models", "--db", dbpath, "list"};
  captured c = run_models(4, argv);
  ck_assert_msg(c.status == 0, "models list: %s", c.err);
  int n = 0;
  for (const char *p = c.out; (p = strstr(p, "\"material\"")) != NULL; p++) n++;
  captured_free(&c);
  return n;
}

/* The material identity of the built-in patch the tool builds. */
static void patch_material(char *buf, size_t cap) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ts_qstatic_params p = ts_qstatic_default_params(t);
  ck_assert_uint_gt(ts_learn_material_id(t, &p, buf, cap), 0);
  ts_tissue_destroy(t);
}

START_TEST(import_other_tissue_refused) {
  char mat[1024];
  patch_material(mat, sizeof mat);
  write_doc("liver", mat); /* even with the patch's material */
  captured c = import_doc();
  ck_assert_int_eq(c.status, 1);
  ck_assert_str_eq(c.out, "");
  ck_assert_msg(strstr(c.err, "unknown tissue 'liver'") && strstr(c.err, "stomach-patch"), "%s",
                c.err);
  captured_free(&c);
  ck_assert_int_eq(n_models(), 0);
}
END_TEST

START_TEST(import_other_material_refused) {
  char mat[1024];
  patch_material(mat, sizeof mat);
  write_doc("stomach-patch", "liver parenchyma; E=12 b=1 d=0.5");
  captured c = import_doc();
  ck_assert_int_eq(c.status, 1);
  ck_assert_str_eq(c.out, "");
  ck_assert_msg(strstr(c.err, "trained for another material of stomach-patch") &&
                    strstr(c.err, "liver parenchyma; E=12 b=1 d=0.5") && strstr(c.err, mat),
                "%s", c.err);
  captured_free(&c);
  ck_assert_int_eq(n_models(), 0);

  /* the same document with the patch's own material is stored */
  write_doc("stomach-patch", mat);
  c = import_doc();
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_ptr_nonnull(strstr(c.out, "\"version\":1"));
  captured_free(&c);
  ck_assert_int_eq(n_models(), 1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tool_models");
  TCase *c = tcase_create("import");
  tcase_add_checked_fixture(c, setup, teardown);
  tcase_add_test(c, import_other_tissue_refused);
  tcase_add_test(c, import_other_material_refused);
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
