/*
 * test_codec.c: Check suite for the "q1" frame codec (proto/ts_codec.h):
 * quantization, bit-exact keyframe and delta round trips on seeded random
 * data with the int32 extremes, the one-byte empty delta, rejection of every
 * truncation and of malformed varints, garbage that must never crash or
 * write (run it under ASan: buffers are allocated to their exact sizes), and
 * rejected deltas that must leave the positions untouched.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ts_codec.h"
#include "ts_error.h"

/* xorshift64*: a fixed-seed generator independent of the C library */
static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s ? s : 0x9e3779b97f4a7c15ull; }
static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}
static uint32_t rng_below(uint32_t n) { return (uint32_t)(rng() % n); }

/* A coordinate from a mix of regimes: tiny steps, full-range values and the
 * extremes, so that differences wrap around int32. */
static int32_t rnd_coord(void) {
  switch (rng_below(6)) {
  case 0: return INT32_MIN;
  case 1: return INT32_MAX;
  case 2: return (int32_t)(rng() >> 32);
  case 3: return (int32_t)rng_below(2001) - 1000;
  case 4: return INT32_MIN + (int32_t)rng_below(3);
  default: return INT32_MAX - (int32_t)rng_below(3);
  }
}

static int32_t (*alloc_q(uint32_t n))[3] {
  int32_t (*q)[3] = malloc(sizeof *q * (n ? n : 1));
  ck_assert_ptr_nonnull(q);
  return q;
}

/* copies p into a buffer of exactly len bytes, so ASan sees over-reads */
static uint8_t *exact(const uint8_t *p, size_t len) {
  uint8_t *b = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(b);
  if (len) memcpy(b, p, len);
  return b;
}

static const uint32_t sizes[] = {1, 2, 3, 7, 64, 1000, 2304};

START_TEST(test_keyframe_roundtrip_random) {
  rng_seed(12345);
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    for (int trial = 0; trial < 20; trial++) {
      uint32_t n = sizes[si];
      int32_t (*q)[3] = alloc_q(n), (*r)[3] = alloc_q(n);
      for (uint32_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) q[i][a] = rnd_coord();
      size_t bound = ts_codec_bound(n);
      uint8_t *buf = malloc(bound);
      size_t len = ts_encode_keyframe((const int32_t (*)[3])q, n, buf);
      ck_assert_uint_le(len, bound);
      ck_assert_uint_ge(len, 3 * (size_t)n); /* at least a byte per coordinate */
      uint8_t *p = exact(buf, len);
      memset(r, 0xA5, sizeof *r * n);
      ck_assert_int_eq(ts_decode_keyframe(p, len, n, r), 0);
      ck_assert_int_eq(memcmp(q, r, sizeof *q * n), 0);
      free(p);
      free(buf);
      free(q);
      free(r);
    }
  }
}
END_TEST

START_TEST(test_keyframe_extremes_exact_bytes) {
  /* INT32_MIN, then INT32_MAX (difference -1 after wrapping), then back:
   * zigzag(INT32_MIN) = 0xFFFFFFFF takes the full five bytes */
  int32_t q[3][3] = {{INT32_MIN, 0, 1}, {INT32_MAX, 0, -1}, {INT32_MIN, 1, 0}};
  uint8_t buf[64];
  size_t len = ts_encode_keyframe((const int32_t (*)[3])q, 3, buf);
  const uint8_t want[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00, 0x02, /* v0 */
                          0x01, 0x00, 0x03,                         /* v1: -1, 0, -2 */
                          0x02, 0x02, 0x02};                        /* v2: +1, +1, +1 */
  ck_assert_uint_eq(len, sizeof want);
  ck_assert_int_eq(memcmp(buf, want, len), 0);
  int32_t r[3][3];
  ck_assert_int_eq(ts_decode_keyframe(buf, len, 3, r), 0);
  ck_assert_int_eq(memcmp(q, r, sizeof q), 0);
}
END_TEST

START_TEST(test_quantize_roundtrip) {
  rng_seed(777);
  const uint32_t n = 2304;
  double (*x)[3] = malloc(sizeof *x * n);
  int32_t (*q)[3] = alloc_q(n), (*r)[3] = alloc_q(n);
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) x[i][a] = ((double)(rng() >> 11) / 9007199254740992.0 - 0.5);
  ck_assert_int_eq(ts_quantize((const double (*)[3])x, n, TS_DEFAULT_QUANTUM, q), 0);
  uint8_t *buf = malloc(ts_codec_bound(n));
  size_t len = ts_encode_keyframe((const int32_t (*)[3])q, n, buf);
  ck_assert_int_eq(ts_decode_keyframe(buf, len, n, r), 0);
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) {
      ck_assert_int_eq(r[i][a], q[i][a]);
      ck_assert(fabs(r[i][a] * TS_DEFAULT_QUANTUM - x[i][a]) <= 0.5 * TS_DEFAULT_QUANTUM + 1e-15);
    }
  /* rounding to the nearest grid point, halves away from zero */
  const double pts[1][3] = {{0.0000149, -0.0000151, 0.123456789}};
  int32_t one[1][3];
  ck_assert_int_eq(ts_quantize(pts, 1, 1e-5, one), 0);
  ck_assert_int_eq(one[0][0], 1);
  ck_assert_int_eq(one[0][1], -2);
  ck_assert_int_eq(one[0][2], 12346);
  free(x);
  free(q);
  free(r);
  free(buf);
}
END_TEST

/* The quantizer rounds exactly as lround (halves away from zero) at the
 * halves, just beside them, at -0, and across the grid's whole range,
 * with a quantum of 1 so that the scaled value is the given one. */
START_TEST(test_quantize_lround) {
  const double special[] = {0.5,
                            -0.5,
                            1.5,
                            -1.5,
                            2.5,
                            -2.5,
                            0.49999999999999994,
                            -0.49999999999999994,
                            nextafter(0.5, 1),
                            nextafter(-0.5, -1),
                            nextafter(1.5, 0),
                            nextafter(-1.5, 0),
                            -0.0,
                            0.0,
                            1e-300,
                            -1e-300,
                            2147482999.5,
                            -2147482999.5,
                            2147482999.4999998,
                            1073741823.5};
  const size_t ns = sizeof special / sizeof *special;
  rng_seed(4242);
  const uint32_t n = 30000;
  double (*x)[3] = malloc(sizeof *x * n);
  int32_t (*q)[3] = alloc_q(n);
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) {
      const size_t k = (size_t)i * 3 + (size_t)a;
      if (k < ns) {
        x[i][a] = special[k];
      } else { /* halves and random values over the range, both signs */
        const double u = (double)(rng() >> 11) / 9007199254740992.0;
        const double mag = ldexp(u, (int)(rng() % 31));
        const double v = (rng() & 1) ? floor(mag) + 0.5 : mag;
        x[i][a] = (rng() & 1) ? -v : v;
      }
    }
  ck_assert_int_eq(ts_quantize((const double (*)[3])x, n, 1.0, q), 0);
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++)
      ck_assert_msg(q[i][a] == (int32_t)lround(x[i][a]), "%.17g -> %d, lround %ld", x[i][a],
                    q[i][a], lround(x[i][a]));
  free(x);
  free(q);
}
END_TEST

START_TEST(test_quantize_rejects) {
  const double bad[] = {NAN, INFINITY, -INFINITY, 1e10, -1e10, 21474.84, -21474.84};
  int32_t q[2][3];
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    double x[2][3] = {{0, 0, 0}, {0.01, 0.02, 0.03}};
    x[1][i % 3] = bad[i];
    ck_assert_int_eq(ts_quantize((const double (*)[3])x, 2, 1e-5, q), TS_ERANGE);
    /* one point: its x and y go two at a time, its z alone (ts_codec.c) */
    for (int a = 0; a < 3; a++) {
      double one[1][3] = {{0.01, 0.02, 0.03}};
      one[0][a] = bad[i];
      ck_assert_int_eq(ts_quantize((const double (*)[3])one, 1, 1e-5, q), TS_ERANGE);
    }
  }
  /* just inside the grid */
  const double edge[1][3] = {{21474.8, -21474.8, 0}};
  ck_assert_int_eq(ts_quantize(edge, 1, 1e-5, q), 0);
  ck_assert_int_eq(q[0][0], 2147480000);
  ck_assert_int_eq(q[0][1], -2147480000);
  /* a quantum that is no grid at all */
  ck_assert_int_eq(ts_quantize(edge, 1, 0.0, q), TS_EINVAL);
  ck_assert_int_eq(ts_quantize(edge, 1, -1e-5, q), TS_EINVAL);
  ck_assert_int_eq(ts_quantize(edge, 1, NAN, q), TS_EINVAL);
  ck_assert_int_eq(ts_quantize(edge, 1, INFINITY, q), TS_EINVAL);
}
END_TEST

/* base -> q with `want` vertices changed; checks the delta round trip */
static void delta_roundtrip(uint32_t n, uint32_t want) {
  int32_t (*base)[3] = alloc_q(n), (*q)[3] = alloc_q(n), (*r)[3] = alloc_q(n);
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) base[i][a] = rnd_coord();
  memcpy(q, base, sizeof *q * n);
  uint32_t changed = 0;
  for (uint32_t k = 0; k < want; k++) {
    uint32_t i = k == 0 ? 0 : k == 1 ? n - 1 : rng_below(n);
    int a = (int)rng_below(3);
    int32_t v = rnd_coord();
    if (v == base[i][a]) v = (int32_t)((uint32_t)v + 1);
    int was = memcmp(q[i], base[i], sizeof q[i]) != 0;
    q[i][a] = v;
    if (!was) changed++;
  }
  size_t bound = ts_codec_bound(n);
  uint8_t *buf = malloc(bound);
  uint32_t m = 0xdead;
  size_t len = ts_encode_delta((const int32_t (*)[3])base, (const int32_t (*)[3])q, n, buf, &m);
  ck_assert_uint_le(len, bound);
  ck_assert_uint_eq(m, changed);
  uint8_t *p = exact(buf, len);
  memcpy(r, base, sizeof *r * n);
  uint32_t got = 0xbeef;
  ck_assert_int_eq(ts_decode_delta(p, len, n, r, &got), 0);
  ck_assert_uint_eq(got, changed);
  ck_assert_int_eq(memcmp(q, r, sizeof *q * n), 0);
  free(p);
  free(buf);
  free(base);
  free(q);
  free(r);
}

START_TEST(test_delta_roundtrip_random) {
  rng_seed(4242);
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    uint32_t n = sizes[si];
    for (int trial = 0; trial < 10; trial++) {
      delta_roundtrip(n, 1);
      delta_roundtrip(n, 1 + rng_below(n));
      delta_roundtrip(n, 3 * n); /* about everything */
    }
  }
  /* two changes 200k vertices apart: a long gap */
  delta_roundtrip(200000, 2);
}
END_TEST

START_TEST(test_delta_no_change_is_one_byte) {
  rng_seed(99);
  const uint32_t n = 2304;
  int32_t (*q)[3] = alloc_q(n), (*r)[3] = alloc_q(n);
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) q[i][a] = rnd_coord();
  uint8_t buf[8];
  uint32_t m = 7;
  size_t len = ts_encode_delta((const int32_t (*)[3])q, (const int32_t (*)[3])q, n, buf, &m);
  ck_assert_uint_eq(len, 1);
  ck_assert_uint_eq(buf[0], 0);
  ck_assert_uint_eq(m, 0);
  memcpy(r, q, sizeof *r * n);
  uint32_t got = 7;
  ck_assert_int_eq(ts_decode_delta(buf, 1, n, r, &got), 0);
  ck_assert_uint_eq(got, 0);
  ck_assert_int_eq(memcmp(q, r, sizeof *q * n), 0);
  /* and for zero vertices too */
  ck_assert_uint_eq(ts_encode_delta(NULL, NULL, 0, buf, NULL), 1);
  ck_assert_int_eq(ts_decode_delta(buf, 1, 0, NULL, NULL), 0);
  free(q);
  free(r);
}
END_TEST

START_TEST(test_every_truncation_rejected) {
  rng_seed(2024);
  const uint32_t n = 40;
  int32_t (*base)[3] = alloc_q(n), (*q)[3] = alloc_q(n), (*r)[3] = alloc_q(n),
          (*keep)[3] = alloc_q(n);
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) base[i][a] = q[i][a] = rnd_coord();
  for (uint32_t i = 0; i < n; i += 3) q[i][i % 3] ^= 0x5555;
  uint8_t kf[1024], dl[1024];
  size_t klen = ts_encode_keyframe((const int32_t (*)[3])q, n, kf);
  size_t dlen = ts_encode_delta((const int32_t (*)[3])base, (const int32_t (*)[3])q, n, dl, NULL);
  ck_assert_uint_gt(dlen, 1);
  for (size_t len = 0; len < klen; len++) {
    uint8_t *p = exact(kf, len);
    ck_assert_int_eq(ts_decode_keyframe(p, len, n, r), TS_EDECODE);
    free(p);
  }
  for (size_t len = 0; len < dlen; len++) {
    uint8_t *p = exact(dl, len);
    memcpy(r, base, sizeof *r * n);
    memcpy(keep, r, sizeof *r * n);
    ck_assert_int_eq(ts_decode_delta(p, len, n, r, NULL), TS_EDECODE);
    ck_assert_int_eq(memcmp(r, keep, sizeof *r * n), 0);
    free(p);
  }
  /* one byte too many is as wrong as one too few */
  kf[klen] = 0;
  ck_assert_int_eq(ts_decode_keyframe(kf, klen + 1, n, r), TS_EDECODE);
  dl[dlen] = 0;
  memcpy(r, base, sizeof *r * n);
  ck_assert_int_eq(ts_decode_delta(dl, dlen + 1, n, r, NULL), TS_EDECODE);
  ck_assert_int_eq(memcmp(r, base, sizeof *r * n), 0);
  /* and a payload for more vertices than the receiver has */
  ck_assert_int_eq(ts_decode_keyframe(kf, klen, n - 1, r), TS_EDECODE);
  free(base);
  free(q);
  free(r);
  free(keep);
}
END_TEST

START_TEST(test_malformed_varints) {
  int32_t r[1][3];
  /* the largest 5-byte varint: 0xFFFFFFFF, zigzag for INT32_MIN */
  const uint8_t ok[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00, 0x00};
  ck_assert_int_eq(ts_decode_keyframe(ok, sizeof ok, 1, r), 0);
  ck_assert_int_eq(r[0][0], INT32_MIN);
  /* more than 32 bits, and a sixth byte */
  const uint8_t big[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0x00, 0x00};
  ck_assert_int_eq(ts_decode_keyframe(big, sizeof big, 1, r), TS_EDECODE);
  const uint8_t six[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00, 0x00};
  ck_assert_int_eq(ts_decode_keyframe(six, sizeof six, 1, r), TS_EDECODE);
  /* a continuation bit on the last byte */
  const uint8_t open[] = {0x00, 0x00, 0x80};
  ck_assert_int_eq(ts_decode_keyframe(open, sizeof open, 1, r), TS_EDECODE);
}
END_TEST

START_TEST(test_rejected_delta_leaves_q_unchanged) {
  const uint32_t n = 10;
  int32_t q[10][3], keep[10][3];
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) q[i][a] = (int32_t)(100 * i + a);
  memcpy(keep, q, sizeof q);
  /* each starts with a valid first entry (vertex 2 += (1, 1, 1)) and then
   * goes wrong */
  const uint8_t bad[][12] = {
      {2, 2, 2, 2, 2, 7, 2, 2, 2},       /* second index 2 + 1 + 7 = 10 >= n */
      {2, 2, 2, 2, 2, 0, 2, 2},          /* second entry truncated */
      {11, 2, 2, 2, 2},                  /* more entries than vertices */
      {2, 2, 2, 2, 2, 0, 2, 2, 2, 9},    /* trailing byte */
      {2, 2, 2, 2, 2, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0}, /* varint over 32 bits */
  };
  const size_t lens[] = {9, 8, 5, 10, 12};
  for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
    uint8_t *p = exact(bad[k], lens[k]);
    uint32_t m = 77;
    ck_assert_int_eq(ts_decode_delta(p, lens[k], n, q, &m), TS_EDECODE);
    ck_assert_uint_eq(m, 77);
    ck_assert_int_eq(memcmp(q, keep, sizeof q), 0);
    free(p);
  }
  /* the valid prefix of the first one, alone, applies */
  const uint8_t good[] = {1, 2, 2, 2, 2};
  ck_assert_int_eq(ts_decode_delta(good, sizeof good, n, q, NULL), 0);
  ck_assert_int_eq(q[2][0], 201);
  ck_assert_int_eq(q[2][1], 202);
  ck_assert_int_eq(q[2][2], 203);
}
END_TEST

START_TEST(test_garbage_never_crashes) {
  rng_seed(31337);
  const uint32_t ns[] = {0, 1, 3, 17, 200};
  int32_t (*q)[3] = alloc_q(200), (*keep)[3] = alloc_q(200);
  uint8_t src[300];
  for (int it = 0; it < 40000; it++) {
    uint32_t n = ns[rng_below(5)];
    size_t len = rng_below(it % 10 == 0 ? 300 : 24);
    for (size_t i = 0; i < len; i++) src[i] = (uint8_t)rng();
    /* bias towards plausible payloads: small counts and gaps */
    if (len && rng_below(2)) src[0] &= 0x0F;
    uint8_t *p = exact(src, len);
    int32_t (*qn)[3] = alloc_q(n); /* exactly n vertices: ASan sees overflows */
    for (uint32_t i = 0; i < n; i++)
      for (int a = 0; a < 3; a++) qn[i][a] = (int32_t)(i * 3 + a);
    memcpy(keep, qn, sizeof *qn * n);
    uint32_t m = 0;
    int rc = ts_decode_delta(p, len, n, qn, &m);
    ck_assert(rc == 0 || rc == TS_EDECODE);
    if (rc) ck_assert_int_eq(memcmp(qn, keep, sizeof *qn * n), 0);
    else ck_assert_uint_le(m, n);
    rc = ts_decode_keyframe(p, len, n, qn);
    ck_assert(rc == 0 || rc == TS_EDECODE);
    free(qn);
    free(p);
  }
  /* valid payloads with one byte flipped */
  for (int it = 0; it < 2000; it++) {
    uint32_t n = 1 + rng_below(50);
    for (uint32_t i = 0; i < n; i++)
      for (int a = 0; a < 3; a++) q[i][a] = rnd_coord();
    uint8_t buf[1200];
    size_t len = ts_encode_keyframe((const int32_t (*)[3])q, n, buf);
    buf[rng_below((uint32_t)len)] ^= (uint8_t)(1u << rng_below(8));
    uint8_t *p = exact(buf, len);
    int32_t (*qn)[3] = alloc_q(n);
    int rc = ts_decode_keyframe(p, len, n, qn);
    ck_assert(rc == 0 || rc == TS_EDECODE);
    memcpy(keep, q, sizeof *q * n);
    rc = ts_decode_delta(p, len, n, q, NULL);
    ck_assert(rc == 0 || rc == TS_EDECODE);
    if (rc) ck_assert_int_eq(memcmp(q, keep, sizeof *q * n), 0);
    free(qn);
    free(p);
  }
  free(q);
  free(keep);
}
END_TEST

/* The costliest data: every difference is 2^31 (wrapped), whose zigzag code
 * 0xFFFFFFFF needs five bytes. */
START_TEST(test_bound_holds_for_worst_case) {
  const uint32_t n = 1000;
  const int32_t lo = -0x40000000, hi = 0x40000000;
  int32_t (*a)[3] = alloc_q(n), (*b)[3] = alloc_q(n), (*r)[3] = alloc_q(n);
  for (uint32_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) {
      a[i][k] = i % 2 ? hi : lo;
      b[i][k] = i % 2 ? lo : hi;
    }
  uint8_t *buf = malloc(ts_codec_bound(n));
  size_t kl = ts_encode_keyframe((const int32_t (*)[3])a, n, buf);
  ck_assert_uint_le(kl, ts_codec_bound(n));
  ck_assert_uint_eq(kl, 15 * (size_t)n);
  ck_assert_int_eq(ts_decode_keyframe(buf, kl, n, r), 0);
  ck_assert_int_eq(memcmp(a, r, sizeof *a * n), 0);
  /* every vertex changed by 2^31: a one-byte gap and three five-byte
   * residuals each, after the two-byte count */
  uint32_t m;
  size_t dl = ts_encode_delta((const int32_t (*)[3])a, (const int32_t (*)[3])b, n, buf, &m);
  ck_assert_uint_eq(m, n);
  ck_assert_uint_le(dl, ts_codec_bound(n));
  ck_assert_uint_eq(dl, 2 + 16 * (size_t)n);
  ck_assert_int_eq(ts_decode_delta(buf, dl, n, r, NULL), 0);
  ck_assert_int_eq(memcmp(b, r, sizeof *b * n), 0);
  free(a);
  free(b);
  free(r);
  free(buf);
}
END_TEST

static Suite *codec_suite(void) {
  Suite *s = suite_create("codec");
  TCase *tc = tcase_create("q1");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_keyframe_roundtrip_random);
  tcase_add_test(tc, test_keyframe_extremes_exact_bytes);
  tcase_add_test(tc, test_quantize_roundtrip);
  tcase_add_test(tc, test_quantize_lround);
  tcase_add_test(tc, test_quantize_rejects);
  tcase_add_test(tc, test_delta_roundtrip_random);
  tcase_add_test(tc, test_delta_no_change_is_one_byte);
  tcase_add_test(tc, test_every_truncation_rejected);
  tcase_add_test(tc, test_malformed_varints);
  tcase_add_test(tc, test_rejected_delta_leaves_q_unchanged);
  tcase_add_test(tc, test_garbage_never_crashes);
  tcase_add_test(tc, test_bound_holds_for_worst_case);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(codec_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
