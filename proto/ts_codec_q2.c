/*
 * ts_codec_q2.c: the "q2" frame codec (format and the measurements behind it
 * in ts_codec.h): quantized positions as planar second differences in
 * zigzag varints, through Zstandard (RFC 8878, libzstd). Also the codec
 * context, which keeps the zstd contexts and scratch buffers between frames
 * so that a steady stream allocates nothing.
 *
 * Decoding trusts nothing: the zstd frame must be exactly one frame whose
 * header declares a content size no larger than the biggest legal content
 * for n vertices (checked before anything is allocated or decompressed),
 * and the content must parse and be consumed exactly. Deltas are parsed into
 * scratch arrays and applied only once the whole payload is known good.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "../server/core/ts_error.h"
#include "ts_codec.h"
#include "ts_codec_varint.h"

/* Largest window a q2 frame may ask for: content is at most
 * ts_codec_bound(TS_CODEC_MAX_VERTICES) = 320 MiB, but frames are decoded in
 * one shot into a buffer of the declared size, so the window is only a
 * sanity bound on the header. */
#define TS__Q2_WINDOW_LOG_MAX 29

struct ts_codec_ctx {
  ZSTD_CCtx *cc;       /* made on first encode */
  ZSTD_DCtx *dc;       /* made on first decode */
  int level;           /* zstd level for encoding */
  uint8_t *buf;        /* q2 content being built or parsed */
  size_t buf_cap;
  uint32_t *idx;       /* changed vertex indices of a delta */
  size_t idx_cap;
  int32_t *res;        /* decoded residuals of a delta, 3 per changed vertex */
  size_t res_cap;
};

ts_codec_ctx *ts_codec_ctx_new(void) {
  ts_codec_ctx *cx = calloc(1, sizeof *cx);
  if (cx) cx->level = TS_CODEC_Q2_LEVEL;
  return cx;
}

void ts_codec_ctx_free(ts_codec_ctx *cx) {
  if (!cx) return;
  ZSTD_freeCCtx(cx->cc);
  ZSTD_freeDCtx(cx->dc);
  free(cx->buf);
  free(cx->idx);
  free(cx->res);
  free(cx);
}

int ts_codec_ctx_set_level(ts_codec_ctx *cx, int level) {
  if (!cx || level < 1 || level > 19) return TS_ERANGE;
  cx->level = level;
  return 0;
}

/* Grows *p to hold at least need elements of size sz (contents not kept). */
static int reserve(void **p, size_t *cap, size_t need, size_t sz) {
  if (need <= *cap && *p) return 0;
  size_t c = *cap ? *cap : 1024;
  while (c < need) c *= 2;
  void *q = malloc(c * sz);
  if (!q) return TS_ENOMEM;
  free(*p);
  *p = q;
  *cap = c;
  return 0;
}

size_t ts_q2_bound(uint32_t n) { return ZSTD_compressBound(ts_codec_bound(n)); }

/* ---- encoding ---------------------------------------------------------------- */

static size_t build_keyframe(const int32_t (*q)[3], uint32_t n, uint8_t *out) {
  size_t o = 0;
  for (int a = 0; a < 3; a++) {
    int32_t prev = 0, d = 0;
    for (uint32_t i = 0; i < n; i++) {
      int32_t di = ts__wrap_sub(q[i][a], prev);
      o += ts__put_varint(out + o, ts__zz_enc(ts__wrap_sub(di, d)));
      d = di;
      prev = q[i][a];
    }
  }
  return o;
}

static size_t build_delta(const int32_t (*base)[3], const int32_t (*q)[3], uint32_t n,
                          uint32_t *idx, uint8_t *out, uint32_t *m_out) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (q[i][0] != base[i][0] || q[i][1] != base[i][1] || q[i][2] != base[i][2]) idx[m++] = i;
  size_t o = ts__put_varint(out, m);
  int64_t prev = -1;
  for (uint32_t j = 0; j < m; j++) {
    o += ts__put_varint(out + o, (uint32_t)((int64_t)idx[j] - prev - 1));
    prev = idx[j];
  }
  for (int a = 0; a < 3; a++) {
    int32_t r = 0;
    for (uint32_t j = 0; j < m; j++) {
      uint32_t i = idx[j];
      int32_t rj = ts__wrap_sub(q[i][a], base[i][a]);
      o += ts__put_varint(out + o, ts__zz_enc(ts__wrap_sub(rj, r)));
      r = rj;
    }
  }
  *m_out = m;
  return o;
}

int ts_q2_encode(ts_codec_ctx *cx, const int32_t (*base)[3], const int32_t (*q)[3], uint32_t n,
                 uint8_t *out, size_t cap, size_t *len, uint32_t *changed) {
  if (n > TS_CODEC_MAX_VERTICES) return TS_ETOOBIG;
  if (reserve((void **)&cx->buf, &cx->buf_cap, ts_codec_bound(n), 1)) return TS_ENOMEM;
  size_t clen;
  uint32_t m = n;
  if (base) {
    if (reserve((void **)&cx->idx, &cx->idx_cap, n ? n : 1, sizeof *cx->idx)) return TS_ENOMEM;
    clen = build_delta(base, q, n, cx->idx, cx->buf, &m);
  } else {
    clen = build_keyframe(q, n, cx->buf);
  }
  if (!cx->cc && !(cx->cc = ZSTD_createCCtx())) return TS_ENOMEM;
  size_t r = ZSTD_compressCCtx(cx->cc, out, cap, cx->buf, clen, cx->level);
  if (ZSTD_isError(r))
    return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? TS_ETOOBIG : TS_EINTERNAL;
  *len = r;
  if (changed) *changed = m;
  return 0;
}

/* ---- decoding ---------------------------------------------------------------- */

int64_t ts_q2_content_size(const uint8_t *p, size_t len) {
  /* the Zstandard frame magic 0xFD2FB528, little-endian; skippable frames
   * and anything else are refused */
  if (len < 4 || p[0] != 0x28 || p[1] != 0xB5 || p[2] != 0x2F || p[3] != 0xFD) return -1;
  unsigned long long cs = ZSTD_getFrameContentSize(p, len);
  if (cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR) return -1;
  size_t fl = ZSTD_findFrameCompressedSize(p, len);
  if (ZSTD_isError(fl) || fl != len) return -1; /* truncated, or bytes after the frame */
  if (cs > (unsigned long long)INT64_MAX) return -1;
  return (int64_t)cs;
}

static int parse_keyframe(const uint8_t *c, size_t clen, uint32_t n, int32_t (*q)[3]) {
  size_t o = 0;
  for (int a = 0; a < 3; a++) {
    int32_t prev = 0, d = 0;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t u;
      if (ts__next_varint(c, clen, &o, &u)) return TS_EDECODE;
      d = ts__wrap_add(d, ts__zz_dec(u));
      prev = ts__wrap_add(prev, d);
      q[i][a] = prev;
    }
  }
  return o == clen ? 0 : TS_EDECODE;
}

/* Parses a delta into cx->idx / cx->res; *m_out changed vertices. */
static int parse_delta(ts_codec_ctx *cx, const uint8_t *c, size_t clen, uint32_t n,
                       uint32_t *m_out) {
  size_t o = 0;
  uint32_t m;
  if (ts__next_varint(c, clen, &o, &m) || m > n) return TS_EDECODE;
  /* each changed vertex takes at least 4 content bytes */
  if ((uint64_t)m * 4 > clen - o) return TS_EDECODE;
  if (reserve((void **)&cx->idx, &cx->idx_cap, m ? m : 1, sizeof *cx->idx) ||
      reserve((void **)&cx->res, &cx->res_cap, 3 * (size_t)(m ? m : 1), sizeof *cx->res))
    return TS_ENOMEM;
  int64_t prev = -1;
  for (uint32_t j = 0; j < m; j++) {
    uint32_t gap;
    if (ts__next_varint(c, clen, &o, &gap)) return TS_EDECODE;
    int64_t i = prev + 1 + (int64_t)gap;
    if (i >= (int64_t)n) return TS_EDECODE;
    cx->idx[j] = (uint32_t)i;
    prev = i;
  }
  for (int a = 0; a < 3; a++) {
    int32_t r = 0;
    for (uint32_t j = 0; j < m; j++) {
      uint32_t u;
      if (ts__next_varint(c, clen, &o, &u)) return TS_EDECODE;
      r = ts__wrap_add(r, ts__zz_dec(u));
      cx->res[3 * (size_t)j + (size_t)a] = r;
    }
  }
  if (o != clen) return TS_EDECODE;
  *m_out = m;
  return 0;
}

int ts_q2_decode(ts_codec_ctx *cx, int keyframe, const uint8_t *p, size_t len, uint32_t n,
                 int32_t (*q)[3], uint32_t *changed) {
  if (n > TS_CODEC_MAX_VERTICES) return TS_EDECODE;
  int64_t cs = ts_q2_content_size(p, len);
  if (cs < 0 || (uint64_t)cs > ts_codec_bound(n)) return TS_EDECODE;
  size_t clen = (size_t)cs;
  if (reserve((void **)&cx->buf, &cx->buf_cap, clen ? clen : 1, 1)) return TS_ENOMEM;
  if (!cx->dc) {
    if (!(cx->dc = ZSTD_createDCtx())) return TS_ENOMEM;
    ZSTD_DCtx_setParameter(cx->dc, ZSTD_d_windowLogMax, TS__Q2_WINDOW_LOG_MAX);
  }
  size_t r = ZSTD_decompressDCtx(cx->dc, cx->buf, clen, p, len);
  if (ZSTD_isError(r) || r != clen) return TS_EDECODE;
  if (keyframe) {
    int rc = parse_keyframe(cx->buf, clen, n, q);
    if (rc == 0 && changed) *changed = n;
    return rc;
  }
  uint32_t m;
  int rc = parse_delta(cx, cx->buf, clen, n, &m);
  if (rc) return rc;
  for (uint32_t j = 0; j < m; j++) {
    int32_t *v = q[cx->idx[j]];
    const int32_t *d = cx->res + 3 * (size_t)j;
    v[0] = ts__wrap_add(v[0], d[0]);
    v[1] = ts__wrap_add(v[1], d[1]);
    v[2] = ts__wrap_add(v[2], d[2]);
  }
  if (changed) *changed = m;
  return 0;
}
