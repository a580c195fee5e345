/*
 * fuzz_theta.c: fuzz target for the decode of a stored learned model's
 * theta blob (server/core/ts_learn.c, ts_learn_theta_decode): the bytes a
 * database holds (storage/: models.theta), read back when a session starts
 * with a stored model (server/requests.c) or switches to one
 * (server/models.c), for the kind named in the row and the tissue's sheet
 * count. A damaged or hand-edited database must give an error, never a
 * model that reads past its parameters. Links ts_core.
 *
 * Input: byte 0 the kind (0..7: the five kinds and three unknown values),
 * byte 1 the sheet count (0..255, over TS_MAX_LAYERS + 1 included), the
 * rest the blob. Seeds: tests/fuzz/corpus/theta/.
 *
 * Checks, besides ASan/UBSan: the result is 0, TS_EINVAL or TS_ENAN, and
 * it is the one the format says: TS_EINVAL exactly when the kind or sheet
 * count has no parameter count or the blob is not 8 bytes per parameter,
 * else TS_ENAN exactly when one of the little-endian doubles is NaN or
 * infinite; a decoded model has that kind, sheet count and parameter count
 * (at most TS_LEARN_MAX_PARAMS), and encodes back to the same bytes, bit
 * for bit; its prediction for a sample of every sheet (features from the
 * blob) reads only its own parameters and is finite when the features are
 * small.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/core/ts_error.h"
#include "../../server/core/ts_learn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double le_double(const uint8_t *b) {
  uint64_t u = 0;
  for (int k = 0; k < 8; k++) u |= (uint64_t)b[k] << (8 * k);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

/* n features in [-1, 1) from the blob's bytes, cycling */
static void fill(double *v, int n, const uint8_t *b, size_t bytes, size_t *k) {
  for (int i = 0; i < n; i++, (*k)++) v[i] = (double)b[*k % bytes] / 128.0 - 1.0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > 4096) return 0;
  ts_learn_kind kind = (ts_learn_kind)(data[0] & 7);
  uint32_t n_sheets = data[1];
  const uint8_t *blob = data + 2;
  size_t bytes = size - 2;
  /* the blob in its own allocation, so that ASan sees a read past its end */
  uint8_t *buf = malloc(bytes ? bytes : 1);
  if (!buf) abort();
  memcpy(buf, blob, bytes);

  ts_learn_model m;
  int rc = ts_learn_theta_decode(kind, n_sheets, buf, bytes, &m);
  uint32_t p = ts_learn_n_params(kind, n_sheets);
  if (p > TS_LEARN_MAX_PARAMS) abort();
  int finite = 1;
  for (size_t a = 0; a + 8 <= bytes; a += 8)
    if (!isfinite(le_double(buf + a))) finite = 0;
  int want = p == 0 || bytes != 8u * (size_t)p ? TS_EINVAL : finite ? 0 : TS_ENAN;
  if (rc != want) abort();
  if (rc == 0) {
    if (m.kind != kind || m.n_sheets != n_sheets || m.n_params != p) abort();
    uint8_t back[8 * TS_LEARN_MAX_PARAMS];
    if (ts_learn_theta_encode(&m, back, sizeof back) != bytes || memcmp(back, buf, bytes) != 0)
      abort();
    /* features in [-1, 1) from the blob (not empty: p > 0); theta finite: the prediction is a
     * finite sum of at most TS_LEARN_MAX_PARAMS products, unless the
     * products overflow (|theta| near DBL_MAX) */
    ts_learn_sample s;
    memset(&s, 0, sizeof s);
    size_t k = 0;
    fill(s.x0, 3, buf, bytes, &k);
    fill(s.f, 3, buf, bytes, &k);
    fill(s.g, 3, buf, bytes, &k);
    fill(s.f1, 3, buf, bytes, &k);
    for (int h = 0; h < TS_LEARN_HOPS; h++) fill(s.u[h], 3, buf, bytes, &k);
    for (int h = 0; h < TS_LEARN_HOPS2; h++) fill(s.u2[h], 3, buf, bytes, &k);
    for (int h = 0; h < TS_LEARN_HOPS2R; h++) fill(s.u2r[h], 3, buf, bytes, &k);
    double big = 0;
    for (uint32_t a = 0; a < p; a++) big = fmax(big, fabs(m.theta[a]));
    for (uint32_t sh = 0; sh <= n_sheets; sh++) { /* n_sheets itself: clamped to the last */
      s.sheet = sh;
      double x1[3];
      ts_learn_predict_sample(&m, &s, x1);
      for (int c = 0; c < 3; c++)
        if (big < 1e300 && !isfinite(x1[c])) abort();
    }
  }
  free(buf);
  return 0;
}
