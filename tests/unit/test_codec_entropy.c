/*
 * test_codec_entropy.c: Check suite for the "q2" frame codec (proto/ts_codec.h:
 * planar second differences through zstd) and the codec-id entry points.
 *
 * The recorded stream tests/fixtures/stream_patch.frames.zst holds 150 Frame
 * Envelopes exactly as a daemon sent them (q1 payloads; zstd-compressed as
 * a file): 50 frames of the 3-layer patch at resolution 25, 2,500 vertices,
 * while a 5 mm sphere presses into it along the standard path, then a
 * keyframe of a 4-layer session, 3,125 vertices (a topology change), and 99
 * of its deltas as its tool comes down and presses; made with
 * `tissueload --record`, see tests/fixtures/README.md. Its q1 decode gives
 * the server's quantized positions. tests/fixtures/stream_patch.q2
 * holds the same stream re-encoded in q2 by this codec, with a checksum of
 * the positions after every frame; tests/integration/codec_entropy.test.mjs decodes
 * the same file with client-web/src/codec.js, so both languages are held to
 * the same integers. Set TS_WRITE_Q2_FIXTURE=1 to rewrite that file (after a
 * deliberate format change only).
 *
 * Also: q2 round trips with int32 extremes, sizes against q1 and raw
 * float32 on the recorded stream, and malformed payloads (every truncation,
 * trailing bytes, lying content sizes, skippable frames, random corruption)
 * that must be refused without touching the positions (run under ASan:
 * payload buffers are allocated to their exact sizes).
 */
#include "ts_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "test_util.h"
#include "tissue.pb-c.h"
#include "ts_codec.h"
#include "ts_codec_frame.h"
#include "ts_error.h"
#include "ts_framing.h"

#define FIXTURE_FRAMES TS_SOURCE_DIR "/tests/fixtures/stream_patch.frames.zst"
#define FIXTURE_Q2 TS_SOURCE_DIR "/tests/fixtures/stream_patch.q2"
#define Q2_MAGIC "TSQ2STRM"

/* ---- helpers ---------------------------------------------------------------- */

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s ? s : 0x9e3779b97f4a7c15ull; }
static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}
static uint32_t rng_below(uint32_t n) { return (uint32_t)(rng() % n); }

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

/* FNV-1a (32 bit) over the positions as little-endian int32, x y z per
 * vertex: the checksum stored in the q2 fixture (codec.test.mjs computes the
 * same). */
static uint32_t fnv1a(const int32_t (*q)[3], uint32_t n) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) {
      uint32_t v = (uint32_t)q[i][a];
      for (int b = 0; b < 4; b++) {
        h ^= (v >> (8 * b)) & 0xFFu;
        h *= 16777619u;
      }
    }
  return h;
}

static uint8_t *exact(const uint8_t *p, size_t len) {
  uint8_t *b = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(b);
  if (len) memcpy(b, p, len);
  return b;
}

/* The fixture's frames file, decompressed. */
static uint8_t *read_zst(const char *path, size_t *len) {
  size_t zl;
  uint8_t *z = tu_read_file(path, &zl);
  unsigned long long cs = ZSTD_getFrameContentSize(z, zl);
  ck_assert(cs != ZSTD_CONTENTSIZE_UNKNOWN && cs != ZSTD_CONTENTSIZE_ERROR);
  ck_assert_uint_lt(cs, 64u << 20);
  uint8_t *b = malloc(cs ? (size_t)cs : 1);
  ck_assert_ptr_nonnull(b);
  size_t r = ZSTD_decompress(b, (size_t)cs, z, zl);
  ck_assert(!ZSTD_isError(r));
  ck_assert_uint_eq(r, cs);
  free(z);
  *len = r;
  return b;
}

/* ---- the recorded stream ------------------------------------------------------ */

#define MAX_FRAMES 400

typedef struct rec_frame {
  uint64_t seq, baseline_seq;
  int keyframe;
  uint32_t codec;
  uint32_t n;
  size_t payload_len;       /* as recorded (q1) */
  int32_t (*q)[3];          /* the server's positions after this frame */
} rec_frame;

typedef struct stream {
  rec_frame f[MAX_FRAMES];
  int nf;
  int32_t (*cur)[3];
  uint32_t cur_n;
} stream;

static int on_recorded(void *ud, const uint8_t *msg, size_t len) {
  stream *s = ud;
  Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, len, msg);
  ck_assert_ptr_nonnull(e);
  ck_assert_int_eq(e->body_case, TISSUED__V1__ENVELOPE__BODY_FRAME);
  ck_assert_int_lt(s->nf, MAX_FRAMES);
  const Tissued__V1__Frame *fr = e->frame;
  rec_frame *f = &s->f[s->nf];
  f->seq = fr->seq;
  f->baseline_seq = fr->baseline_seq;
  f->keyframe = fr->keyframe;
  f->codec = ts_frame_codec(fr);
  f->n = fr->vertex_count;
  f->payload_len = fr->payload.len;
  if (f->keyframe) {
    ck_assert_int_eq(ts_codec_check_keyframe(f->codec, fr->payload.data, fr->payload.len, f->n), 0);
    free(s->cur);
    s->cur = malloc(sizeof *s->cur * f->n);
    ck_assert_ptr_nonnull(s->cur);
    s->cur_n = f->n;
  } else {
    ck_assert_int_gt(s->nf, 0);
    ck_assert_uint_eq(f->baseline_seq, s->f[s->nf - 1].seq); /* every frame was written */
    ck_assert_uint_eq(f->n, s->cur_n);
  }
  uint32_t changed = 0;
  ck_assert_int_eq(ts_codec_decode(NULL, f->codec, f->keyframe, fr->payload.data,
                                   fr->payload.len, f->n, s->cur, &changed), 0);
  f->q = malloc(sizeof *f->q * f->n);
  ck_assert_ptr_nonnull(f->q);
  memcpy(f->q, s->cur, sizeof *f->q * f->n);
  s->nf++;
  tissued__v1__envelope__free_unpacked(e, NULL);
  return 0;
}

static stream *load_stream(void) {
  stream *s = calloc(1, sizeof *s);
  ck_assert_ptr_nonnull(s);
  size_t len;
  uint8_t *b = read_zst(FIXTURE_FRAMES, &len);
  ts_framer fr;
  ts_framer_init(&fr, 64u << 20);
  ck_assert_int_eq(ts_framer_feed(&fr, b, len, on_recorded, s), 0);
  ck_assert_uint_eq(ts_framer_pending(&fr), 0);
  ts_framer_free(&fr);
  free(b);
  return s;
}

static void free_stream(stream *s) {
  for (int i = 0; i < s->nf; i++) free(s->f[i].q);
  free(s->cur);
  free(s);
}

/* The q2 encoding of frame i of the recorded stream (keyframes as keyframes,
 * deltas against the previous frame, as the daemon would send them). */
static uint8_t *encode_q2(ts_codec_ctx *cx, const stream *s, int i, size_t *len) {
  const rec_frame *f = &s->f[i];
  size_t cap = ts_codec_payload_bound(TS_CODEC_Q2, f->n);
  uint8_t *out = malloc(cap);
  ck_assert_ptr_nonnull(out);
  const int32_t (*base)[3] = f->keyframe ? NULL : (const int32_t (*)[3])s->f[i - 1].q;
  uint32_t changed;
  ck_assert_int_eq(ts_codec_encode(cx, TS_CODEC_Q2, base, (const int32_t (*)[3])f->q, f->n, out,
                                   cap, len, &changed),
                   0);
  return out;
}

START_TEST(test_recorded_stream_shape) {
  /* what the fixture is: if it is re-recorded, these numbers say what the
   * other tests rely on (a topology change midway) */
  stream *s = load_stream();
  ck_assert_int_eq(s->nf, 150);
  int keys = 0, key2 = -1;
  for (int i = 0; i < s->nf; i++) {
    ck_assert_uint_eq(s->f[i].codec, TS_CODEC_Q1);
    if (s->f[i].keyframe) {
      keys++;
      if (i) key2 = i;
    }
  }
  ck_assert_int_eq(keys, 2);
  ck_assert(s->f[0].keyframe);
  ck_assert_int_eq(key2, 50);
  ck_assert_uint_eq(s->f[0].n, 2500);
  ck_assert_uint_eq(s->f[key2].n, 3125);
  /* the tissue moves: most deltas change vertices */
  int moving = 0;
  for (int i = 1; i < s->nf; i++)
    if (!s->f[i].keyframe && memcmp(s->f[i].q, s->f[i - 1].q, sizeof *s->f[i].q * s->f[i].n))
      moving++;
  ck_assert_int_gt(moving, 100);
  free_stream(s);
}
END_TEST

START_TEST(test_q2_recorded_roundtrip_and_sizes) {
  stream *s = load_stream();
  ts_codec_ctx *enc = ts_codec_ctx_new(), *dec = ts_codec_ctx_new();
  ck_assert_ptr_nonnull(enc);
  ck_assert_ptr_nonnull(dec);
  int32_t (*q)[3] = NULL;
  double q1_bytes = 0, q2_bytes = 0, raw_bytes = 0;
  for (int i = 0; i < s->nf; i++) {
    const rec_frame *f = &s->f[i];
    size_t len;
    uint8_t *out = encode_q2(enc, s, i, &len);
    uint8_t *p = exact(out, len);
    if (f->keyframe) {
      free(q);
      q = malloc(sizeof *q * f->n);
      ck_assert_ptr_nonnull(q);
      memset(q, 0x5A, sizeof *q * f->n);
    }
    uint32_t changed = 0;
    ck_assert_int_eq(ts_codec_decode(dec, TS_CODEC_Q2, f->keyframe, p, len, f->n, q, &changed), 0);
    ck_assert_msg(memcmp(q, f->q, sizeof *q * f->n) == 0, "frame %d differs after q2", i);
    q1_bytes += (double)f->payload_len;
    q2_bytes += (double)len;
    raw_bytes += 12.0 * f->n;
    free(p);
    free(out);
  }
  /* Sizes on this stream (measured when it was recorded: q1 15.2 % of raw
   * float32, q2 3.86 %; a coarse patch pressed hard, so most vertices move
   * in most frames). The bounds leave room for encoder changes but fail if
   * the entropy stage stops working: q2 under 5 % of raw float32 (issue 7's
   * target) and under half of q1. */
  ck_assert_msg(q2_bytes < 0.05 * raw_bytes, "q2 is %.2f %% of raw float32",
                100 * q2_bytes / raw_bytes);
  ck_assert_msg(q2_bytes < 0.5 * q1_bytes, "q2 %.0f bytes vs q1 %.0f", q2_bytes, q1_bytes);
  free(q);
  ts_codec_ctx_free(enc);
  ts_codec_ctx_free(dec);
  free_stream(s);
}
END_TEST

/* The committed q2 stream: its format is in the header comment of
 * tests/fixtures/README.md; little-endian integers. */
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put32(FILE *f, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  ck_assert_uint_eq(fwrite(b, 1, 4, f), 4);
}

static void write_q2_fixture(const stream *s) {
  FILE *f = fopen(FIXTURE_Q2, "wb");
  ck_assert_ptr_nonnull(f);
  ts_codec_ctx *cx = ts_codec_ctx_new();
  ck_assert_uint_eq(fwrite(Q2_MAGIC, 1, 8, f), 8);
  put32(f, (uint32_t)s->nf);
  for (int i = 0; i < s->nf; i++) {
    size_t len;
    uint8_t *out = encode_q2(cx, s, i, &len);
    uint8_t h[4] = {(uint8_t)s->f[i].keyframe, TS_CODEC_Q2, 0, 0};
    ck_assert_uint_eq(fwrite(h, 1, 4, f), 4);
    put32(f, s->f[i].n);
    put32(f, (uint32_t)s->f[i].seq);
    put32(f, fnv1a((const int32_t (*)[3])s->f[i].q, s->f[i].n));
    put32(f, (uint32_t)len);
    ck_assert_uint_eq(fwrite(out, 1, len, f), len);
    free(out);
  }
  ts_codec_ctx_free(cx);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_q2_fixture_decodes_bit_exact) {
  stream *s = load_stream();
  if (getenv("TS_WRITE_Q2_FIXTURE")) write_q2_fixture(s);
  size_t len;
  uint8_t *b = tu_read_file(FIXTURE_Q2, &len);
  ck_assert_uint_ge(len, 12);
  ck_assert_int_eq(memcmp(b, Q2_MAGIC, 8), 0);
  ck_assert_uint_eq(le32(b + 8), (uint32_t)s->nf);
  size_t o = 12;
  ts_codec_ctx *cx = ts_codec_ctx_new();
  int32_t (*q)[3] = NULL;
  for (int i = 0; i < s->nf; i++) {
    ck_assert_uint_le(o + 20, len);
    const uint8_t *h = b + o;
    int key = h[0];
    uint32_t codec = h[1], n = le32(h + 4), seq = le32(h + 8), sum = le32(h + 12);
    uint32_t plen = le32(h + 16);
    o += 20;
    ck_assert_uint_le(o + plen, len);
    ck_assert_int_eq(key, s->f[i].keyframe);
    ck_assert_uint_eq(codec, TS_CODEC_Q2);
    ck_assert_uint_eq(n, s->f[i].n);
    ck_assert_uint_eq(seq, (uint32_t)s->f[i].seq);
    /* the stored checksum is the server's positions' */
    ck_assert_uint_eq(sum, fnv1a((const int32_t (*)[3])s->f[i].q, n));
    if (key) {
      free(q);
      q = malloc(sizeof *q * n);
      ck_assert_ptr_nonnull(q);
    }
    uint8_t *p = exact(b + o, plen);
    ck_assert_int_eq(ts_codec_decode(cx, codec, key, p, plen, n, q, NULL), 0);
    free(p);
    ck_assert_msg(memcmp(q, s->f[i].q, sizeof *q * n) == 0, "fixture frame %d differs", i);
    ck_assert_uint_eq(fnv1a((const int32_t (*)[3])q, n), sum);
    o += plen;
  }
  ck_assert_uint_eq(o, len);
  free(q);
  free(b);
  ts_codec_ctx_free(cx);
  free_stream(s);
}
END_TEST

/* ---- synthetic round trips ---------------------------------------------------- */

static const uint32_t sizes[] = {0, 1, 2, 3, 7, 64, 1000, 2304};

START_TEST(test_q2_random_roundtrip_extremes) {
  rng_seed(4242);
  ts_codec_ctx *cx = ts_codec_ctx_new();
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    for (int trial = 0; trial < 10; trial++) {
      uint32_t n = sizes[si];
      size_t cap = ts_codec_payload_bound(TS_CODEC_Q2, n);
      int32_t (*a)[3] = malloc(sizeof *a * (n ? n : 1)), (*b)[3] = malloc(sizeof *b * (n ? n : 1));
      int32_t (*r)[3] = malloc(sizeof *r * (n ? n : 1));
      uint8_t *out = malloc(cap);
      for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
          a[i][k] = rnd_coord();
          b[i][k] = rng_below(3) ? a[i][k] : rnd_coord();
        }
      size_t len;
      uint32_t changed;
      ck_assert_int_eq(ts_codec_encode(cx, TS_CODEC_Q2, NULL, (const int32_t (*)[3])a, n, out,
                                       cap, &len, &changed), 0);
      ck_assert_uint_eq(changed, n);
      uint8_t *p = exact(out, len);
      memset(r, 0xA5, sizeof *r * (n ? n : 1));
      ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 1, p, len, n, r, &changed), 0);
      ck_assert_int_eq(memcmp(a, r, sizeof *a * n), 0);
      free(p);
      uint32_t want = 0;
      for (uint32_t i = 0; i < n; i++) want += memcmp(a[i], b[i], sizeof a[i]) != 0;
      ck_assert_int_eq(ts_codec_encode(cx, TS_CODEC_Q2, (const int32_t (*)[3])a,
                                       (const int32_t (*)[3])b, n, out, cap, &len, &changed), 0);
      ck_assert_uint_eq(changed, want);
      p = exact(out, len);
      ck_assert_int_eq(ts_codec_decode(cx, TS_CODEC_Q2, 0, p, len, n, r, &changed), 0);
      ck_assert_uint_eq(changed, want);
      ck_assert_int_eq(memcmp(b, r, sizeof *b * n), 0);
      free(p);
      free(a);
      free(b);
      free(r);
      free(out);
    }
  }
  ts_codec_ctx_free(cx);
}
END_TEST

START_TEST(test_codec_ids) {
  ck_assert_str_eq(ts_codec_name(TS_CODEC_UNSET), "q1");
  ck_assert_str_eq(ts_codec_name(TS_CODEC_Q1), "q1");
  ck_assert_str_eq(ts_codec_name(TS_CODEC_Q2), "q2");
  ck_assert_ptr_null(ts_codec_name(3));
  ck_assert_uint_eq(ts_codec_by_name("q2"), TS_CODEC_Q2);
  ck_assert_uint_eq(ts_codec_by_name("q1"), TS_CODEC_Q1);
  ck_assert_uint_eq(ts_codec_by_name("zstd"), 0);
  ck_assert_uint_eq(ts_codec_payload_bound(7, 10), 0);
  int32_t q[2][3] = {{1, 2, 3}, {4, 5, 6}};
  uint8_t out[256];
  size_t len;
  ck_assert_int_eq(ts_codec_encode(NULL, 7, NULL, (const int32_t (*)[3])q, 2, out, sizeof out,
                                   &len, NULL), TS_EINVAL);
  ck_assert_int_eq(ts_codec_decode(NULL, 7, 1, out, 4, 2, q, NULL), TS_EUNSUPPORTED);
  /* codec 0 (a Frame without the field) is q1: the same bytes */
  ck_assert_int_eq(ts_codec_encode(NULL, TS_CODEC_UNSET, NULL, (const int32_t (*)[3])q, 2, out,
                                   sizeof out, &len, NULL), 0);
  ck_assert_uint_eq(len, ts_encode_keyframe((const int32_t (*)[3])q, 2, out + 128));
  ck_assert_int_eq(memcmp(out, out + 128, len), 0);
  /* a capacity below the bound is refused, never overrun */
  ck_assert_int_eq(ts_codec_encode(NULL, TS_CODEC_Q1, NULL, (const int32_t (*)[3])q, 2, out, 8,
                                   &len, NULL), TS_ETOOBIG);
  ck_assert_int_eq(ts_codec_encode(NULL, TS_CODEC_Q2, NULL, (const int32_t (*)[3])q, 2, out, 8,
                                   &len, NULL), TS_ETOOBIG);
  ts_codec_ctx *cx = ts_codec_ctx_new();
  ck_assert_int_eq(ts_codec_ctx_set_level(cx, 0), TS_ERANGE);
  ck_assert_int_eq(ts_codec_ctx_set_level(cx, 20), TS_ERANGE);
  ck_assert_int_eq(ts_codec_ctx_set_level(cx, 19), 0);
  ck_assert_int_eq(ts_codec_encode(cx, TS_CODEC_Q2, NULL, (const int32_t (*)[3])q, 2, out,
                                   sizeof out, &len, NULL), 0);
  int32_t r[2][3];
  ck_assert_int_eq(ts_codec_decode(cx, TS_CODEC_Q2, 1, out, len, 2, r, NULL), 0);
  ck_assert_int_eq(memcmp(q, r, sizeof q), 0);
  ts_codec_ctx_free(cx);
}
END_TEST

START_TEST(test_q2_empty_delta_and_check_keyframe) {
  enum { N = 500 };
  static int32_t q[N][3], r[N][3];
  for (int i = 0; i < N; i++)
    for (int a = 0; a < 3; a++) q[i][a] = i * 100 + a;
  uint8_t out[8192];
  size_t len;
  uint32_t changed = 99;
  ck_assert_int_eq(ts_codec_encode(NULL, TS_CODEC_Q2, (const int32_t (*)[3])q,
                                   (const int32_t (*)[3])q, N, out, sizeof out, &len, &changed),
                   0);
  ck_assert_uint_eq(changed, 0);
  ck_assert_uint_eq(ts_q2_content_size(out, len), 1); /* varint m = 0 */
  memcpy(r, q, sizeof q);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, out, len, N, r, &changed), 0);
  ck_assert_uint_eq(changed, 0);
  ck_assert_int_eq(memcmp(q, r, sizeof q), 0);
  /* a regular grid row compresses to almost nothing: second differences
   * are all zero but at the start */
  ck_assert_int_eq(ts_codec_encode(NULL, TS_CODEC_Q2, NULL, (const int32_t (*)[3])q, N, out,
                                   sizeof out, &len, NULL), 0);
  ck_assert_uint_lt(len, 40);
  ck_assert_int_eq(ts_q2_content_size(out, len), 3 * N + 3); /* the jump to vertex 1 takes 2 bytes a plane */
  ck_assert_int_eq(ts_codec_check_keyframe(TS_CODEC_Q2, out, len, N), 0);
  /* a payload far too small for what the frame claims */
  ck_assert_int_eq(ts_codec_check_keyframe(TS_CODEC_Q2, out, len, 10 * N), TS_EDECODE);
  ck_assert_int_eq(ts_codec_check_keyframe(TS_CODEC_Q1, out, len, N), TS_EDECODE);
  ck_assert_int_eq(ts_codec_check_keyframe(TS_CODEC_Q2, out, len, TS_CODEC_MAX_VERTICES + 1),
                   TS_EDECODE);
  ck_assert_int_eq(ts_codec_check_keyframe(9, out, len, N), TS_EUNSUPPORTED);
}
END_TEST

/* ---- malformed input ------------------------------------------------------------ */

/* A real delta and its baseline from the recorded stream. */
typedef struct sample {
  uint32_t n;
  int32_t (*base)[3];
  uint8_t *payload;
  size_t len;
} sample;

static sample take_sample(void) {
  stream *s = load_stream();
  int i = 120; /* mid-press: many vertices change */
  ck_assert(!s->f[i].keyframe);
  sample sm;
  sm.n = s->f[i].n;
  sm.base = malloc(sizeof *sm.base * sm.n);
  memcpy(sm.base, s->f[i - 1].q, sizeof *sm.base * sm.n);
  sm.payload = encode_q2(NULL, s, i, &sm.len);
  ck_assert_uint_gt(sm.len, 100);
  free_stream(s);
  return sm;
}

static void free_sample(sample *sm) {
  free(sm->base);
  free(sm->payload);
}

START_TEST(test_q2_every_truncation_and_trailing_byte_rejected) {
  sample sm = take_sample();
  int32_t (*q)[3] = malloc(sizeof *q * sm.n);
  for (size_t cut = 0; cut < sm.len; cut++) {
    memcpy(q, sm.base, sizeof *q * sm.n);
    uint8_t *p = exact(sm.payload, cut);
    ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, p, cut, sm.n, q, NULL), TS_EDECODE);
    ck_assert_int_eq(memcmp(q, sm.base, sizeof *q * sm.n), 0);
    free(p);
  }
  uint8_t *p = malloc(sm.len + 1);
  memcpy(p, sm.payload, sm.len);
  p[sm.len] = 0;
  memcpy(q, sm.base, sizeof *q * sm.n);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, p, sm.len + 1, sm.n, q, NULL),
                   TS_EDECODE);
  ck_assert_int_eq(memcmp(q, sm.base, sizeof *q * sm.n), 0);
  /* and the untouched payload applies */
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, p, sm.len, sm.n, q, NULL), 0);
  free(p);
  free(q);
  free_sample(&sm);
}
END_TEST

/* Wraps content bytes in a zstd frame the way the encoder does, so that the
 * content itself can be made malformed. */
static size_t wrap(const uint8_t *content, size_t clen, uint8_t *out, size_t cap) {
  size_t r = ZSTD_compress(out, cap, content, clen, 3);
  ck_assert(!ZSTD_isError(r));
  return r;
}

START_TEST(test_q2_malformed_content_rejected) {
  enum { N = 4 };
  int32_t base[N][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}}, q[N][3];
  uint8_t out[512];
  struct {
    const char *what;
    uint8_t c[32];
    size_t len;
    int keyframe;
  } cases[] = {
      {"delta: more changed vertices than n", {5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 16, 0},
      {"delta: index past n", {1, 4, 0, 0, 0}, 5, 0},
      {"delta: second index past n", {2, 0, 3, 0, 0, 0, 0, 0, 0}, 9, 0},
      {"delta: planes cut short", {2, 0, 0, 2, 2, 2, 2, 2}, 8, 0},
      {"delta: a byte left over", {1, 0, 2, 2, 2, 0}, 6, 0},
      {"delta: varint over 32 bits", {1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0, 0}, 9, 0},
      {"delta: varint longer than 5 bytes", {1, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 0}, 10, 0},
      {"delta: empty content", {0}, 0, 0},
      {"keyframe: one varint short", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 11, 1},
      {"keyframe: a byte left over", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 13, 1},
      {"keyframe: truncated varint at the end", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}, 12, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t len = wrap(cases[i].c, cases[i].len, out, sizeof out);
    uint8_t *p = exact(out, len);
    memcpy(q, base, sizeof q);
    int rc = ts_codec_decode(NULL, TS_CODEC_Q2, cases[i].keyframe, p, len, N, q, NULL);
    ck_assert_msg(rc == TS_EDECODE, "%s: got %d", cases[i].what, rc);
    if (!cases[i].keyframe) ck_assert_msg(memcmp(q, base, sizeof q) == 0, "%s changed q", cases[i].what);
    free(p);
  }
  /* the well-formed neighbours of those cases decode */
  const uint8_t good[] = {2, 0, 1, 2, 2, 1, 1, 0, 0}; /* vertices 0 and 2 */
  size_t len = wrap(good, sizeof good, out, sizeof out);
  memcpy(q, base, sizeof q);
  uint32_t changed;
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, out, len, N, q, &changed), 0);
  ck_assert_uint_eq(changed, 2);
  /* residuals x: +1 then +1+1 = +2; y: -1, -1+(-1) = -2; z: 0, 0 */
  ck_assert_int_eq(q[0][0], 2);
  ck_assert_int_eq(q[2][0], 9);
  ck_assert_int_eq(q[0][1], 1);
  ck_assert_int_eq(q[2][1], 6);
  ck_assert_int_eq(q[0][2], 3);
  ck_assert_int_eq(q[2][2], 9);
  ck_assert_int_eq(memcmp(q[1], base[1], sizeof q[1]), 0);
  ck_assert_int_eq(memcmp(q[3], base[3], sizeof q[3]), 0);
}
END_TEST

START_TEST(test_q2_frame_level_lies_rejected) {
  enum { N = 3 };
  int32_t base[N][3] = {{0}}, q[N][3];
  uint8_t content[16] = {1, 0, 2, 2, 2};
  uint8_t out[512];
  /* a frame whose header does not declare its size (streaming API) */
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
  size_t len = ZSTD_compress2(cc, out, sizeof out, content, 5);
  ck_assert(!ZSTD_isError(len));
  ZSTD_freeCCtx(cc);
  ck_assert_int_eq(ts_q2_content_size(out, len), -1);
  memcpy(q, base, sizeof q);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, out, len, N, q, NULL), TS_EDECODE);
  /* a declared content size over the bound for n vertices */
  static uint8_t big[200];
  memset(big, 0, sizeof big);
  len = wrap(big, sizeof big, out, sizeof out); /* bound for 3 vertices is 65 */
  ck_assert_int_eq(ts_q2_content_size(out, len), 200);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 1, out, len, N, q, NULL), TS_EDECODE);
  /* two frames back to back */
  len = wrap(content, 5, out, sizeof out);
  memcpy(out + len, out, len);
  memcpy(q, base, sizeof q);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, out, 2 * len, N, q, NULL), TS_EDECODE);
  ck_assert_int_eq(memcmp(q, base, sizeof q), 0);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, out, len, N, q, NULL), 0);
  ck_assert_int_eq(q[0][0], 1);
  /* a skippable frame (magic 0x184D2A50) holding the same bytes */
  uint8_t skip[8 + 5] = {0x50, 0x2A, 0x4D, 0x18, 5, 0, 0, 0, 1, 0, 2, 2, 2};
  ck_assert_int_eq(ts_q2_content_size(skip, sizeof skip), -1);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 0, skip, sizeof skip, N, q, NULL),
                   TS_EDECODE);
  /* a header that claims a huge content for few bytes, decoded for a huge
   * vertex count: refused from the header, nothing allocated for it */
  static uint8_t zeros[1 << 16];
  len = ZSTD_compress(out, sizeof out, zeros, sizeof zeros, 19);
  ck_assert(!ZSTD_isError(len));
  ck_assert_int_eq(ts_codec_check_keyframe(TS_CODEC_Q2, out, len, 1u << 20), TS_EDECODE);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 1, out, len, TS_CODEC_MAX_VERTICES + 1, q,
                                   NULL), TS_EDECODE);
  ck_assert_int_eq(ts_codec_decode(NULL, TS_CODEC_Q2, 1, NULL, 0, 0, q, NULL), TS_EDECODE);
}
END_TEST

START_TEST(test_q2_corruption_never_crashes) {
  /* random single-byte changes and random bytes: each payload decodes or is
   * refused; a refused delta leaves q as it was; nothing reads or writes out
   * of bounds (ASan) */
  sample sm = take_sample();
  rng_seed(99);
  int32_t (*q)[3] = malloc(sizeof *q * sm.n);
  int refused = 0;
  for (int t = 0; t < 400; t++) {
    uint8_t *p = exact(sm.payload, sm.len);
    int flips = 1 + (int)rng_below(3);
    for (int k = 0; k < flips; k++) p[rng_below((uint32_t)sm.len)] ^= (uint8_t)(1u << rng_below(8));
    memcpy(q, sm.base, sizeof *q * sm.n);
    int rc = ts_codec_decode(NULL, TS_CODEC_Q2, (int)(t & 1), p, sm.len, sm.n, q, NULL);
    ck_assert(rc == 0 || rc == TS_EDECODE);
    if (rc) {
      refused++;
      if (!(t & 1)) ck_assert_int_eq(memcmp(q, sm.base, sizeof *q * sm.n), 0);
    }
    free(p);
  }
  ck_assert_int_gt(refused, 200); /* zstd's block structure catches most damage */
  for (int t = 0; t < 200; t++) {
    size_t len = 1 + rng_below(300);
    uint8_t *p = malloc(len);
    for (size_t i = 0; i < len; i++) p[i] = (uint8_t)rng();
    if (t & 1) memcpy(p, "\x28\xB5\x2F\xFD", len < 4 ? len : 4);
    int rc = ts_codec_decode(NULL, TS_CODEC_Q2, (int)(t & 2), p, len, sm.n, q, NULL);
    ck_assert(rc == 0 || rc == TS_EDECODE);
    free(p);
  }
  free(q);
  free_sample(&sm);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codec_entropy");
  TCase *tc = tcase_create("q2");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_recorded_stream_shape);
  tcase_add_test(tc, test_q2_recorded_roundtrip_and_sizes);
  tcase_add_test(tc, test_q2_fixture_decodes_bit_exact);
  tcase_add_test(tc, test_q2_random_roundtrip_extremes);
  tcase_add_test(tc, test_codec_ids);
  tcase_add_test(tc, test_q2_empty_delta_and_check_keyframe);
  tcase_add_test(tc, test_q2_every_truncation_and_trailing_byte_rejected);
  tcase_add_test(tc, test_q2_malformed_content_rejected);
  tcase_add_test(tc, test_q2_frame_level_lies_rejected);
  tcase_add_test(tc, test_q2_corruption_never_crashes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
