/*
 * test_util.c: the shared test helpers of test_util.h.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "test_util.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint8_t *tu_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  ck_assert_msg(fseek(f, 0, SEEK_END) == 0, "cannot seek in %s", path);
  long n = ftell(f);
  ck_assert_msg(n > 0, "%s is empty or unreadable", path);
  rewind(f);
  uint8_t *b = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(b);
  ck_assert_msg(fread(b, 1, (size_t)n, f) == (size_t)n, "short read of %s", path);
  fclose(f);
  b[n] = 0;
  *len = (size_t)n;
  return b;
}

void tu_tmpdir_make(char *dir, size_t cap, const char *prefix) {
  /* $TMPDIR when set (a per-job scratch area, a tmpfs other than /tmp),
   * without a trailing slash doubled; /tmp otherwise */
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  size_t bl = strlen(base);
  while (bl > 1 && base[bl - 1] == '/') bl--;
  int w = snprintf(dir, cap, "%.*s/%s.XXXXXX", (int)bl, base, prefix);
  ck_assert_msg(w > 0 && (size_t)w < cap, "temporary directory name too long for %s", prefix);
  ck_assert_msg(mkdtemp(dir) != NULL, "cannot make %s", dir);
}

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb, (void)type, (void)ftw;
  return remove(path) ? -1 : 0;
}

void tu_tmpdir_remove(const char *dir) {
  /* depth first, not following symbolic links */
  ck_assert_msg(nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "cannot remove %s", dir);
}

tu_captured tu_run_cmd(tu_cmd_fn fn, int argc, const char **argv) {
  tu_captured c;
  memset(&c, 0, sizeof c);
  FILE *out = open_memstream(&c.out, &c.out_len);
  FILE *err = open_memstream(&c.err, &c.err_len);
  ck_assert_ptr_nonnull(out);
  ck_assert_ptr_nonnull(err);
  c.status = fn(argc, (char **)argv, out, err);
  fclose(out);
  fclose(err);
  return c;
}

void tu_captured_free(tu_captured *c) {
  free(c->out);
  free(c->err);
  c->out = c->err = NULL;
}

Suite *tu_suite_of_cases(const char *name, const tu_case *cases, size_t n, double timeout) {
  Suite *s = suite_create(name);
  for (size_t i = 0; i < n; i++) {
    TCase *c = tcase_create(cases[i].name);
    tcase_set_timeout(c, timeout);
    tcase_add_test(c, cases[i].test);
    suite_add_tcase(s, c);
  }
  return s;
}

int tu_run_suite(Suite *s) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
