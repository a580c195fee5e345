/*
 * ts_codec.c: quantization and the "q1" keyframe/delta frame codec; the
 * format is specified in ts_codec.h. The "q2" codec (q1's successor with an
 * entropy stage) is in ts_codec_q2.c, and the codec-id dispatch in
 * ts_codec_dispatch.c.
 */
#include "ts_codec.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../server/core/ts_error.h"
#include "ts_codec_varint.h"

/* The grid's reach: |x / quantum| beyond it is refused (TS_ERANGE). */
#define QUANT_LIMIT 2147483000.0

/* m coordinates, one at a time. Returns 0, or TS_ERANGE at the first one
 * off the grid. */
static int quantize_scalar(const double *xs, size_t m, double inv, int32_t *qs) {
  for (size_t k = 0; k < m; k++) {
    double s = xs[k] * inv;
    if (!isfinite(s) || s > QUANT_LIMIT || s < -QUANT_LIMIT) return TS_ERANGE;
    /* lround(s), inline: the truncation toward zero, then one step away
     * from zero where the part cut off is at least a half (s - i is
     * exact: |s| < 2^31, so i and s share s's integer bits). The call to
     * lround was 9 % of a 1 kHz patch-S session's CPU with a controller
     * taking a frame every step (perf, capped at one substep). */
    int64_t r = (int64_t)s;
    const double d = s - (double)r;
    r += (d >= 0.5) - (d <= -0.5);
    qs[k] = (int32_t)r;
  }
  return 0;
}

int ts_quantize(const double (*x)[3], uint32_t n, double quantum, int32_t (*q)[3]) {
  if (!(quantum > 0) || !isfinite(quantum)) return TS_EINVAL;
  if (n == 0) return 0;
  const double inv = 1.0 / quantum;
  const double *xs = (const double *)x; /* n rows of three: 3 n in a row */
  int32_t *qs = (int32_t *)q;
  const size_t m = (size_t)n * 3;
  size_t k = 0;
#if defined(__SSE2__)
  /* Two coordinates at a time, with the same operations as the scalar
   * form (truncation, here to int32, which holds every value the grid
   * takes; the cut-off part against +-1/2), so the same
   * integers: test_codec's test_quantize_lround checks both against lround
   * at the halves and beside them. A coordinate off the grid takes 0 in
   * its lane (no conversion of NaN or of a value past int32) and fails
   * the whole call. The scalar form was 8 % of a capped patch-S session's
   * physics thread with a controller taking a frame every step (perf on
   * the daemon, 2026-12-05: about 70 us a frame); this one takes half its
   * time (30,000 coordinates: 22 us against 46 us, warm caches). GCC 12
   * does not vectorise the scalar form, even branch-free: it will not
   * if-convert compares that may trap. */
  const __m128d vinv = _mm_set1_pd(inv), lim = _mm_set1_pd(QUANT_LIMIT), half = _mm_set1_pd(0.5),
                mhalf = _mm_set1_pd(-0.5), one = _mm_set1_pd(1.0), sign = _mm_set1_pd(-0.0);
  int bad = 0;
  for (; k + 2 <= m; k += 2) {
    const __m128d s = _mm_mul_pd(_mm_loadu_pd(xs + k), vinv);
    const __m128d ok = _mm_cmple_pd(_mm_andnot_pd(sign, s), lim); /* false for NaN */
    bad |= _mm_movemask_pd(ok) ^ 3;
    const __m128d c = _mm_and_pd(ok, s);
    const __m128d t = _mm_cvtepi32_pd(_mm_cvttpd_epi32(c));
    const __m128d d = _mm_sub_pd(c, t);
    const __m128d up = _mm_and_pd(_mm_cmpge_pd(d, half), one);
    const __m128d dn = _mm_and_pd(_mm_cmple_pd(d, mhalf), one);
    _mm_storel_epi64((void *)(qs + k), _mm_cvttpd_epi32(_mm_sub_pd(_mm_add_pd(t, up), dn)));
  }
  if (bad) return TS_ERANGE;
#endif
  return quantize_scalar(xs + k, m - k, inv, qs + k);
}

size_t ts_codec_bound(uint32_t n) { return 5 + (size_t)n * (5 + 3 * 5); }

size_t ts_encode_keyframe(const int32_t (*q)[3], uint32_t n, uint8_t *out) {
  size_t o = 0;
  int32_t prev[3] = {0, 0, 0};
  for (uint32_t i = 0; i < n; i++) {
    for (int a = 0; a < 3; a++) {
      o += ts__put_varint(out + o, ts__zz_enc(ts__wrap_sub(q[i][a], prev[a])));
      prev[a] = q[i][a];
    }
  }
  return o;
}

size_t ts_encode_delta(const int32_t (*base)[3], const int32_t (*q)[3], uint32_t n,
                       uint8_t *out, uint32_t *changed_out) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (q[i][0] != base[i][0] || q[i][1] != base[i][1] || q[i][2] != base[i][2]) m++;
  size_t o = ts__put_varint(out, m);
  int64_t prev = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (q[i][0] == base[i][0] && q[i][1] == base[i][1] && q[i][2] == base[i][2]) continue;
    o += ts__put_varint(out + o, (uint32_t)((int64_t)i - prev - 1));
    prev = i;
    for (int a = 0; a < 3; a++)
      o += ts__put_varint(out + o, ts__zz_enc(ts__wrap_sub(q[i][a], base[i][a])));
  }
  if (changed_out) *changed_out = m;
  return o;
}

int ts_decode_keyframe(const uint8_t *p, size_t len, uint32_t n, int32_t (*q)[3]) {
  size_t o = 0;
  int32_t prev[3] = {0, 0, 0};
  for (uint32_t i = 0; i < n; i++) {
    for (int a = 0; a < 3; a++) {
      uint32_t u;
      size_t k = ts__get_varint(p + o, len - o, &u);
      if (!k) return TS_EDECODE;
      o += k;
      prev[a] = ts__wrap_add(prev[a], ts__zz_dec(u));
      q[i][a] = prev[a];
    }
  }
  return o == len ? 0 : TS_EDECODE;
}

/* One pass over a delta payload; writes into q only when apply is set, so a
 * malformed payload is rejected before anything changes. */
static int delta_pass(const uint8_t *p, size_t len, uint32_t n, int32_t (*q)[3],
                      uint32_t *m_out, int apply) {
  size_t o = 0;
  uint32_t m;
  size_t k = ts__get_varint(p, len, &m);
  if (!k || m > n) return TS_EDECODE;
  o += k;
  int64_t prev = -1;
  for (uint32_t j = 0; j < m; j++) {
    uint32_t gap;
    k = ts__get_varint(p + o, len - o, &gap);
    if (!k) return TS_EDECODE;
    o += k;
    int64_t idx = prev + 1 + (int64_t)gap;
    if (idx >= (int64_t)n) return TS_EDECODE;
    int32_t r[3];
    for (int a = 0; a < 3; a++) {
      uint32_t u;
      k = ts__get_varint(p + o, len - o, &u);
      if (!k) return TS_EDECODE;
      o += k;
      r[a] = ts__zz_dec(u);
    }
    if (apply)
      for (int a = 0; a < 3; a++) q[idx][a] = ts__wrap_add(q[idx][a], r[a]);
    prev = idx;
  }
  if (o != len) return TS_EDECODE;
  *m_out = m;
  return 0;
}

int ts_decode_delta(const uint8_t *p, size_t len, uint32_t n, int32_t (*q)[3],
                    uint32_t *changed_out) {
  uint32_t m = 0;
  int rc = delta_pass(p, len, n, q, &m, 0);
  if (rc) return rc;
  delta_pass(p, len, n, q, &m, 1);
  if (changed_out) *changed_out = m;
  return 0;
}
