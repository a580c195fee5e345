/*
 * test_csv.c: Check suite for the strain,stress sample reader and the record
 * reader (server/core/ts_csv.h): a table of good inputs with the exact
 * samples and line numbers they must give, a table of bad inputs with the
 * error code and the message each must produce, the number syntax, the size
 * limits, files (missing, a directory, over the limit), and the shipped
 * default material table read as records.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_csv.h"
#include "ts_error.h"

#define MAXS 8

typedef struct good_case {
  const char *name;
  const char *text;
  uint32_t n;
  double strain[MAXS], stress[MAXS];
  uint32_t line[MAXS];
} good_case;

static const good_case good[] = {
    {"plain", "0.1,100\n0.2,200\n", 2, {0.1, 0.2}, {100, 200}, {1, 2}},
    {"header", "strain,stress\n0.05,12.5\n", 1, {0.05}, {12.5}, {2}},
    {"header with units, CRLF",
     "Strain [-] , Stress (Pa)\r\n0.1,1\r\n0.3,2\r\n",
     2,
     {0.1, 0.3},
     {1, 2},
     {2, 3}},
    {"BOM, comments, blanks",
     "\xEF\xBB\xBF# sample file\n\n  # indented comment\n0.1, 5 # note\n\t\n",
     1,
     {0.1},
     {5},
     {4}},
    {"CR-only and mixed line ends",
     "0.1,1\r0.2,2\r\n0.3,3\n0.4,4",
     4,
     {0.1, 0.2, 0.3, 0.4},
     {1, 2, 3, 4},
     {1, 2, 3, 4}},
    {"number forms",
     "+.5,5.\n1e-3,2E+2\n-0.01,3e0\n 7 , 8 \n",
     4,
     {0.5, 1e-3, -0.01, 7},
     {5, 200, 3, 8},
     {1, 2, 3, 4}},
    {"underflow is zero", "1e-400,1\n", 1, {0.0}, {1}, {1}},
    {"comment right after value", "0.25,4#x\n", 1, {0.25}, {4}, {1}},
};

typedef struct bad_case {
  const char *name;
  const char *text;
  size_t len; /* 0: strlen(text) */
  int code;
  const char *msg;
} bad_case;

static const bad_case bad[] = {
    {"empty", "", 0, TS_EINVAL, "no samples"},
    {"only comments", "# nothing\n\n   \n", 0, TS_EINVAL, "no samples"},
    {"header only", "strain,stress\n", 0, TS_EINVAL, "no samples"},
    {"one field", "0.1\n", 0, TS_EINVAL, "line 1: expected 2 fields (strain,stress), found 1"},
    {"three fields", "0.1,1\n0.2,2,3\n", 0, TS_EINVAL, "line 2: expected 2 fields"},
    {"decimal comma", "0,1\n0,5,1\n", 0, TS_EINVAL, "decimal commas are not supported"},
    {"stress not a number", "0.1,abc\n", 0, TS_EINVAL, "line 1: stress 'abc' is not a number"},
    {"later bad stress", "0.1,1\n# c\n0.2,x\n", 0, TS_EINVAL, "line 3: stress 'x' is not a number"},
    {"nan", "0.1,nan\n", 0, TS_ENAN, "line 1: stress 'nan' is not a finite number"},
    {"-inf strain", "-Inf,1\n", 0, TS_ENAN, "line 1: strain '-Inf' is not a finite number"},
    {"overflow", "0.1,1e999\n", 0, TS_ENAN, "line 1: stress '1e999' is not a finite number"},
    {"hex float", "0x1p3,1\n", 0, TS_EINVAL, "line 1: strain '0x1p3' is not a number"},
    {"two dots", "0.1,1\n1.2.3,1\n", 0, TS_EINVAL, "line 2: strain '1.2.3' is not a number"},
    {"bare exponent", "0.1,1e\n", 0, TS_EINVAL, "line 1: stress '1e' is not a number"},
    {"unicode minus",
     "\xe2\x88\x92"
     "1,2\n",
     0, TS_EINVAL, "is not a number"},
    {"empty first field", " ,1\n", 0, TS_EINVAL, "line 1: field 1 is empty"},
    {"trailing comma", "0.1,1,\n", 0, TS_EINVAL, "line 1: field 3 is empty"},
    {"swapped header", "stress,strain\n1,0.1\n", 0, TS_EINVAL,
     "line 1: the columns are stress,strain; samples must be strain,stress"},
    {"unnamed header", "foo,bar\n0.1,1\n", 0, TS_EINVAL,
     "line 1: a header must name the columns strain,stress (found 'foo','bar')"},
    {"header twice", "strain,stress\nstrain,stress\n", 0, TS_EINVAL,
     "line 2: strain 'strain' is not a number"},
    {"text strain, numeric stress", "abc,1\n", 0, TS_EINVAL,
     "line 1: strain 'abc' is not a number"},
    {"NUL byte", "0.1,1\n0.2,\0 2\n", 12, TS_EINVAL, "line 2: contains a NUL byte"},
};

START_TEST(test_good_inputs) {
  for (size_t c = 0; c < sizeof good / sizeof good[0]; c++) {
    const good_case *g = &good[c];
    ts_samples s;
    char err[256] = "x";
    int rc = ts_csv_read_samples(g->text, strlen(g->text), NULL, &s, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: rc %d: %s", g->name, rc, err);
    ck_assert_msg(err[0] == '\0', "%s: message left after success: %s", g->name, err);
    ck_assert_msg(s.n == g->n, "%s: %u samples, expected %u", g->name, s.n, g->n);
    for (uint32_t i = 0; i < g->n; i++) {
      /* the reader must give exactly what strtod gives for the same text */
      ck_assert_msg(s.strain[i] == g->strain[i], "%s: strain %u = %.17g", g->name, i, s.strain[i]);
      ck_assert_msg(s.stress[i] == g->stress[i], "%s: stress %u = %.17g", g->name, i, s.stress[i]);
      ck_assert_msg(s.line[i] == g->line[i], "%s: line %u = %u", g->name, i, s.line[i]);
    }
    ts_samples_free(&s);
    ck_assert_uint_eq(s.n, 0);
    ck_assert_ptr_null(s.strain);
  }
}
END_TEST

START_TEST(test_bad_inputs) {
  for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
    const bad_case *b = &bad[c];
    ts_samples s;
    char err[256] = "";
    size_t len = b->len ? b->len : strlen(b->text);
    int rc = ts_csv_read_samples(b->text, len, NULL, &s, err, sizeof err);
    ck_assert_msg(rc == b->code, "%s: rc %d (%s), expected %d", b->name, rc, err, b->code);
    ck_assert_msg(strstr(err, b->msg) != NULL, "%s: message '%s' lacks '%s'", b->name, err, b->msg);
    /* a failed read leaves nothing to free */
    ck_assert_uint_eq(s.n, 0);
    ck_assert_ptr_null(s.strain);
    ck_assert_ptr_null(s.stress);
    ck_assert_ptr_null(s.line);
  }
}
END_TEST

START_TEST(test_number_syntax) {
  static const struct {
    const char *text;
    int rc;
    double v;
  } cases[] = {
      {"0", 0, 0.0},         {"-0.5", 0, -0.5},     {"+3", 0, 3.0},
      {".25", 0, 0.25},      {"2.", 0, 2.0},        {"1e3", 0, 1000.0},
      {"1E-2", 0, 0.01},     {"12.5e+1", 0, 125.0}, {"1e-320", 0, 1e-320},
      {"nan", TS_ENAN, 0},   {"NaN", TS_ENAN, 0},   {"-infinity", TS_ENAN, 0},
      {"1e309", TS_ENAN, 0}, {".", TS_EINVAL, 0},   {"-", TS_EINVAL, 0},
      {"e5", TS_EINVAL, 0},  {"1e+", TS_EINVAL, 0}, {"0x10", TS_EINVAL, 0},
      {"1 2", TS_EINVAL, 0}, {"1,5", TS_EINVAL, 0}, {"--1", TS_EINVAL, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_csv_field f = {cases[i].text, strlen(cases[i].text)};
    double v = -123.0;
    int rc = ts_csv_parse_double(&f, &v);
    ck_assert_msg(rc == cases[i].rc, "'%s': rc %d, expected %d", cases[i].text, rc, cases[i].rc);
    if (rc == 0) ck_assert_msg(v == cases[i].v, "'%s' -> %.17g", cases[i].text, v);
  }
  /* a number longer than the 128-byte limit is refused, not truncated */
  char longnum[200];
  memset(longnum, '1', sizeof longnum);
  ts_csv_field f = {longnum, sizeof longnum};
  double v;
  ck_assert_int_eq(ts_csv_parse_double(&f, &v), TS_EINVAL);
}
END_TEST

START_TEST(test_limits) {
  char err[256];
  ts_samples s;
  /* rows: the 4th sample (line 5, after a header) is one too many */
  ts_csv_limits lim = {0, 0, 3};
  const char *rows = "strain,stress\n0.1,1\n0.2,2\n0.3,3\n0.4,4\n";
  ck_assert_int_eq(ts_csv_read_samples(rows, strlen(rows), &lim, &s, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "line 5: more than 3 samples");
  /* exactly at the limit is fine */
  ck_assert_int_eq(ts_csv_read_samples(rows, strlen(rows) - 6, &lim, &s, err, sizeof err), 0);
  ck_assert_uint_eq(s.n, 3);
  ts_samples_free(&s);

  /* line length: 20 bytes allowed, line 3 has 21 */
  ts_csv_limits ll = {0, 20, 0};
  const char *lines = "0.1,1\n0.2,2\n0.300000000000000,123\n";
  ck_assert_int_eq(ts_csv_read_samples(lines, strlen(lines), &ll, &s, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "line 3: longer than 20 bytes");

  /* whole input */
  ts_csv_limits lb = {10, 0, 0};
  ck_assert_int_eq(ts_csv_read_samples(lines, strlen(lines), &lb, &s, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "input is 34 bytes, over the limit of 10");

  /* the defaults */
  ts_csv_limits d = ts_csv_default_limits();
  ck_assert_uint_eq(d.max_bytes, 4u << 20);
  ck_assert_uint_eq(d.max_line, 1024);
  ck_assert_uint_eq(d.max_rows, 20000);

  /* a long comment counts towards the line limit too */
  char big[2100];
  memset(big, 'x', sizeof big);
  big[0] = '#';
  big[sizeof big - 1] = '\n';
  ck_assert_int_eq(ts_csv_read_samples(big, sizeof big, NULL, &s, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "line 1: longer than 1024 bytes");
}
END_TEST

START_TEST(test_many_samples_grow) {
  /* 5000 samples: the arrays grow past their first allocation; values and
   * line numbers must survive every reallocation */
  size_t cap = 5000 * 32, len = 0;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  len += (size_t)snprintf(text + len, cap - len, "strain,stress\n");
  for (int i = 0; i < 5000; i++)
    len += (size_t)snprintf(text + len, cap - len, "%d.5e-4,%d\n", i, i + 1);
  ts_samples s;
  char err[256];
  ck_assert_int_eq(ts_csv_read_samples(text, len, NULL, &s, err, sizeof err), 0);
  ck_assert_uint_eq(s.n, 5000);
  for (uint32_t i = 0; i < 5000; i += 499) {
    /* strtod rounds "499.5e-4" correctly; (i + 0.5) * 1e-4 may differ by an ulp */
    ck_assert(fabs(s.strain[i] - (i + 0.5) * 1e-4) <= 1e-15 * (i + 0.5) * 1e-4);
    ck_assert(s.stress[i] == (double)(i + 1));
    ck_assert_uint_eq(s.line[i], i + 2);
  }
  ts_samples_free(&s);
  free(text);
}
END_TEST

static char tmpdir[256];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_csv_test.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/a.csv", tmpdir);
  unlink(p);
  snprintf(p, sizeof p, "%s/big.csv", tmpdir);
  unlink(p);
  rmdir(tmpdir);
}

START_TEST(test_files) {
  char path[300], err[256];
  ts_samples s;
  snprintf(path, sizeof path, "%s/a.csv", tmpdir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("# lab data\nstrain,stress\n0.1,10\n0.2,22.5\n0.3,51\n", f);
  fclose(f);
  ck_assert_int_eq(ts_csv_read_samples_file(path, NULL, &s, err, sizeof err), 0);
  ck_assert_uint_eq(s.n, 3);
  ck_assert(s.stress[1] == 22.5);
  ck_assert_uint_eq(s.line[2], 5);
  ts_samples_free(&s);

  /* missing file, a directory */
  char missing[300];
  snprintf(missing, sizeof missing, "%s/nope.csv", tmpdir);
  ck_assert_int_eq(ts_csv_read_samples_file(missing, NULL, &s, err, sizeof err), TS_EIO);
  ck_assert_str_eq(err, "cannot open: No such file or directory");
  ck_assert_int_eq(ts_csv_read_samples_file(tmpdir, NULL, &s, err, sizeof err), TS_EIO);
  ck_assert_ptr_nonnull(strstr(err, "Is a directory"));
  ck_assert_int_eq(ts_csv_read_samples_file("", NULL, &s, err, sizeof err), TS_EINVAL);

  /* a file over the byte limit is refused without reading all of it */
  snprintf(path, sizeof path, "%s/big.csv", tmpdir);
  f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 1000; i++) fputs("0.1,1\n", f);
  fclose(f);
  ts_csv_limits lim = {1000, 0, 0};
  ck_assert_int_eq(ts_csv_read_samples_file(path, &lim, &s, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "more than 1000 bytes");
  lim.max_bytes = 6000; /* exactly the file's size */
  ck_assert_int_eq(ts_csv_read_samples_file(path, &lim, &s, err, sizeof err), 0);
  ck_assert_uint_eq(s.n, 1000);
  ts_samples_free(&s);
}
END_TEST

START_TEST(test_records_and_default_table) {
  /* the record reader: counts every field, stores up to max_fields */
  const char *text = "a, b ,c\n#x\n\nd\n";
  ts_csv_reader r;
  ts_csv_reader_init(&r, text, strlen(text), 0);
  ts_csv_field f[2];
  char err[256];
  ck_assert_int_eq(ts_csv_next(&r, f, 2, err, sizeof err), 3);
  ck_assert_uint_eq(r.line, 1);
  ck_assert_uint_eq(f[1].len, 1);
  ck_assert_int_eq(f[1].p[0], 'b');
  ck_assert_int_eq(ts_csv_next(&r, f, 2, err, sizeof err), 1);
  ck_assert_uint_eq(r.line, 4);
  ck_assert_int_eq(ts_csv_next(&r, f, 2, err, sizeof err), 0);
  ts_csv_reader_init(&r, NULL, 0, 0);
  ck_assert_int_eq(ts_csv_next(&r, f, 2, err, sizeof err), 0);

  /* the shipped table: a header and six rows of nine fields */
  char path[512];
  snprintf(path, sizeof path, "%s/storage/defaults/stomach-wall-materials.csv", TS_SOURCE_DIR);
  FILE *fp = fopen(path, "rb");
  ck_assert_msg(fp != NULL, "cannot open %s", path);
  static char buf[16384];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  ck_assert_uint_lt(n, sizeof buf);
  ts_csv_reader_init(&r, buf, n, 0);
  ts_csv_field g[9];
  int rows = 0, k;
  while ((k = ts_csv_next(&r, g, 9, err, sizeof err)) > 0) {
    ck_assert_int_eq(k, 9);
    rows++;
  }
  ck_assert_int_eq(k, 0);
  ck_assert_int_eq(rows, 7);
}
END_TEST

static Suite *csv_suite(void) {
  Suite *su = suite_create("csv");
  TCase *tc = tcase_create("reader");
  tcase_add_test(tc, test_good_inputs);
  tcase_add_test(tc, test_bad_inputs);
  tcase_add_test(tc, test_number_syntax);
  tcase_add_test(tc, test_limits);
  tcase_add_test(tc, test_many_samples_grow);
  tcase_add_test(tc, test_records_and_default_table);
  suite_add_tcase(su, tc);
  TCase *tf = tcase_create("files");
  tcase_add_checked_fixture(tf, setup, teardown);
  tcase_add_test(tf, test_files);
  suite_add_tcase(su, tf);
  return su;
}

int main(void) {
  SRunner *sr = srunner_create(csv_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
