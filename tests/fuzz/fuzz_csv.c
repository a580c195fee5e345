/*
 * fuzz_csv.c: fuzz target for the strain,stress sample reader and the record
 * reader (server/core/ts_csv.c), and for the exponential fit
 * (server/core/ts_fit.c) on whatever the reader accepts. Seeds:
 * tests/fuzz/corpus/csv/.
 *
 * Besides "no crash, no out-of-bounds access, no leak" (ASan + UBSan), every
 * input checks invariants that would expose wrong results:
 *   - every failure is one of the documented codes, with a message;
 *   - accepted samples are finite, at most the row limit, with strictly
 *     increasing line numbers;
 *   - every record field lies inside the input, is non-empty, trimmed, and
 *     holds no ',' or '#';
 *   - a fit that succeeds passes its own optimality check and is never worse
 *     (in summed squared error) than the log-linear estimate it reports: the
 *     least-squares optimum must beat every other (a, b).
 *
 * The reader and the fit have no dependencies, and the fuzz targets link
 * only ts_proto (tests/fuzz/CMakeLists.txt), so their sources are compiled
 * into this target directly.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/core/ts_csv.c"
#include "../../server/core/ts_fit.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_records(const char *buf, size_t size) {
  ts_csv_reader r;
  ts_csv_reader_init(&r, buf, size, 256);
  ts_csv_field f[4];
  char err[256];
  uint32_t last = 0;
  for (;;) {
    int k = ts_csv_next(&r, f, 4, err, sizeof err);
    if (k == 0) break;
    if (k < 0) {
      if ((k != TS_EINVAL && k != TS_ETOOBIG) || !err[0]) abort();
      break;
    }
    if (r.line <= last) abort();
    last = r.line;
    for (int i = 0; i < k && i < 4; i++) {
      if (f[i].p < buf || f[i].p + f[i].len > buf + size || f[i].len == 0) abort();
      if (memchr(f[i].p, ',', f[i].len) || memchr(f[i].p, '#', f[i].len)) abort();
      if (f[i].p[0] == ' ' || f[i].p[0] == '\t' || f[i].p[f[i].len - 1] == ' ') abort();
      double v;
      int rc = ts_csv_parse_double(&f[i], &v);
      if (rc == 0 && !isfinite(v)) abort();
      if (rc != 0 && rc != TS_EINVAL && rc != TS_ENAN) abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *buf = (const char *)data;
  check_records(buf, size);

  ts_csv_limits lim = {1 << 16, 256, 64};
  ts_samples s;
  char err[256] = "";
  int rc = ts_csv_read_samples(buf, size, &lim, &s, err, sizeof err);
  if (rc) {
    if (rc != TS_EINVAL && rc != TS_ENAN && rc != TS_ETOOBIG && rc != TS_ENOMEM) abort();
    if (!err[0] || s.n || s.strain) abort();
    return 0;
  }
  if (s.n == 0 || s.n > 64) abort();
  for (uint32_t i = 0; i < s.n; i++) {
    if (!isfinite(s.strain[i]) || !isfinite(s.stress[i])) abort();
    if (i && s.line[i] <= s.line[i - 1]) abort();
  }

  ts_expfit fit;
  rc = ts_fit_exp(s.strain, s.stress, s.line, s.n, &fit, err, sizeof err);
  if (rc == 0) {
    if (!(fit.a > 0) || !isfinite(fit.a) || !isfinite(fit.b)) abort();
    if (!(fit.rmse >= 0) || !isfinite(fit.rmse) || !(fit.r2 <= 1.0 + 1e-12)) abort();
    if (!(fit.optimality <= 1e-6) || fit.minima == 0 || fit.n != s.n) abort();
    double S = ts_fit_exp_sse(s.strain, s.stress, s.n, fit.a, fit.b);
    double S_ll = ts_fit_exp_sse(s.strain, s.stress, s.n, fit.a_loglinear, fit.b_loglinear);
    double sum_sq = 0.0;
    for (uint32_t i = 0; i < s.n; i++) sum_sq += s.stress[i] * s.stress[i];
    /* rounding: both S are recomputed in the original variables, where an
     * exact fit still leaves residuals of a few ulps of each stress */
    if (S > S_ll * (1 + 1e-9) + 1e-26 * sum_sq) abort();
  } else if (rc == TS_EINTERNAL || !err[0] ||
             (rc != TS_EINVAL && rc != TS_ENAN && rc != TS_ERANGE)) {
    abort();
  }
  ts_samples_free(&s);
  return 0;
}
