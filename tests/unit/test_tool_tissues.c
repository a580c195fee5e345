/*
 * test_tool_tissues.c: `tissuetool tissues` (server/tool/cmd_tissues.c) on
 * a real SQLite file in a fresh temporary directory per test: list prints
 * the stored tissues as JSON; delete removes a stored upload and says what
 * went with it, leaves a tissue with a material fit alone unless
 * --with-records is given (exit 1, saying how many), refuses a built-in
 * tissue and an unknown name (exit 1), and usage errors exit 2. The command
 * is called as a function with an argv, as test_tool_models.c calls its own.
 */
#include "ts_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/core/ts_error.h"
#include "../../server/tool/commands.h"
#include "test_util.h"
#include "ts_storage.h"

static char tmpdir[256];
static char dbpath[300];

static void setup(void) {
  tu_tmpdir_make(tmpdir, sizeof tmpdir, "ts_tool_tissues_test");
  snprintf(dbpath, sizeof dbpath, "%s/tissued.db", tmpdir);
}

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

#define HASH_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

/* A database holding two uploads of the same bytes, "organ" with a fit. */
static void fill(void) {
  ts_storage *s = NULL;
  char err[256];
  ck_assert_msg(ts_storage_open(dbpath, &s, err, sizeof err) == 0, "%s", err);
  static const uint8_t bytes[] = "solid a\nendsolid a\n";
  ts_mesh_rec m = {.hash = HASH_A, .format = "stl", .bytes = bytes, .n_bytes = sizeof bytes - 1,
                   .vertex_count = 3, .triangle_count = 1};
  int64_t organ = ts_storage_put_mesh_tissue(s, &m, "organ", "", NULL);
  ck_assert_int_gt(organ, 0);
  ck_assert_int_gt(ts_storage_put_mesh_tissue(s, &m, "twin", "", NULL), 0);
  ts_fit_rec f = {.tissue = organ, .layer = "mucosa", .direction = "axial", .name = "soft",
                  .a = 1e3, .b = 5, .samples = 3};
  ck_assert_int_gt(ts_storage_put_fit(s, &f), 0);
  ts_storage_close(s);
}

static tu_captured run(int argc, const char **argv) {
  return tu_run_cmd(ts_cmd_tissues, argc, argv);
}

START_TEST(list_and_delete) {
  fill();
  const char *list[] = {"tissues", "--db", dbpath};
  tu_captured c = run(3, list);
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_msg(c.out[0] == '[' && strstr(c.out, "{\"name\":\"organ\",\"kind\":\"mesh\",") &&
                    strstr(c.out, "{\"name\":\"twin\",\"kind\":\"mesh\","),
                "%s", c.out);
  tu_captured_free(&c);

  /* organ has a fit: left alone without --with-records */
  const char *del[] = {"tissues", "delete", "organ", "--db", dbpath};
  c = run(5, del);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "0 learned models and 1 material fit") &&
                    strstr(c.err, "--with-records"),
                "%s", c.err);
  tu_captured_free(&c);
  const char *delw[] = {"tissues", "--with-records", "delete", "organ", "--db", dbpath};
  c = run(6, delw);
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_str_eq(c.out, "{\"deleted\":\"organ\",\"models\":0,\"fits\":1,\"meshes\":0}\n");
  tu_captured_free(&c);
  /* the last upload of those bytes takes the mesh file with it */
  const char *del2[] = {"tissues", "delete", "twin", "--db", dbpath};
  c = run(5, del2);
  ck_assert_msg(c.status == 0, "%s", c.err);
  ck_assert_str_eq(c.out, "{\"deleted\":\"twin\",\"models\":0,\"fits\":0,\"meshes\":1}\n");
  tu_captured_free(&c);
  c = run(3, list);
  ck_assert_int_eq(c.status, 0);
  ck_assert_msg(!strstr(c.out, "\"mesh\""), "%s", c.out);
  tu_captured_free(&c);

  /* refused: gone already, built-in (the default material table's tissue) */
  c = run(5, del2);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "no stored tissue is called \"twin\""), "%s", c.err);
  tu_captured_free(&c);
  const char *builtin[] = {"tissues", "delete", "stomach", "--db", dbpath};
  c = run(5, builtin);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "built-in"), "%s", c.err);
  tu_captured_free(&c);
}
END_TEST

START_TEST(usage_errors) {
  fill();
  static const struct {
    int argc;
    const char *const argv[6];
    const char *what;
  } cases[] = {
      {3, {"tissues", "drop", "x"}, "expected list or delete NAME"},
      {2, {"tissues", "delete"}, "expected list or delete NAME"},
      {3, {"tissues", "delete", ""}, "expected list or delete NAME"},
      {3, {"tissues", "list", "--with-records"}, "--with-records applies to delete"},
      {3, {"tissues", "--bogus", "x"}, "unknown option --bogus"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *av[6];
    memcpy(av, cases[i].argv, sizeof av);
    tu_captured c = run(cases[i].argc, av);
    ck_assert_msg(c.status == 2 && strstr(c.err, cases[i].what), "case %zu: %d %s", i, c.status,
                  c.err);
    tu_captured_free(&c);
  }
  /* a database that is not there is named, not made */
  char missing[400];
  snprintf(missing, sizeof missing, "%s/nowhere/t.db", tmpdir);
  const char *none[] = {"tissues", "--db", missing};
  tu_captured c = run(3, none);
  ck_assert_int_eq(c.status, 1);
  ck_assert_msg(strstr(c.err, "nowhere"), "%s", c.err);
  tu_captured_free(&c);
  const char *help[] = {"tissues", "--help"};
  c = run(2, help);
  ck_assert_int_eq(c.status, 0);
  ck_assert_msg(strstr(c.out, "delete NAME [--with-records]"), "%s", c.out);
  tu_captured_free(&c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tool_tissues");
  TCase *c = tcase_create("tissues");
  tcase_add_checked_fixture(c, setup, teardown);
  tcase_add_test(c, list_and_delete);
  tcase_add_test(c, usage_errors);
  suite_add_tcase(s, c);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
