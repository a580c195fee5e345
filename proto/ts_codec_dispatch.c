/*
 * ts_codec_dispatch.c: the frame codecs by id (Frame.codec; see ts_codec.h):
 * names, bounds, and encode/decode entry points that pick q1 or q2, with a
 * temporary codec context when the caller has none.
 */
#include <string.h>

#include "../server/core/ts_error.h"
#include "ts_codec.h"

const char *ts_codec_name(uint32_t codec) {
  switch (codec) {
  case TS_CODEC_UNSET:
  case TS_CODEC_Q1: return "q1";
  case TS_CODEC_Q2: return "q2";
  default: return NULL;
  }
}

uint32_t ts_codec_by_name(const char *name) {
  if (!name) return 0;
  if (strcmp(name, "q1") == 0) return TS_CODEC_Q1;
  if (strcmp(name, "q2") == 0) return TS_CODEC_Q2;
  return 0;
}

size_t ts_codec_payload_bound(uint32_t codec, uint32_t n) {
  switch (codec) {
  case TS_CODEC_UNSET:
  case TS_CODEC_Q1: return ts_codec_bound(n);
  case TS_CODEC_Q2: return ts_q2_bound(n);
  default: return 0;
  }
}

int ts_codec_encode(ts_codec_ctx *cx, uint32_t codec, const int32_t (*base)[3],
                    const int32_t (*q)[3], uint32_t n, uint8_t *out, size_t cap, size_t *len,
                    uint32_t *changed) {
  switch (codec) {
  case TS_CODEC_UNSET:
  case TS_CODEC_Q1: {
    if (cap < ts_codec_bound(n)) return TS_ETOOBIG; /* q1 writes without checking */
    uint32_t m = n;
    *len = base ? ts_encode_delta(base, q, n, out, &m) : ts_encode_keyframe(q, n, out);
    if (changed) *changed = m;
    return 0;
  }
  case TS_CODEC_Q2: {
    if (cx) return ts_q2_encode(cx, base, q, n, out, cap, len, changed);
    ts_codec_ctx *tmp = ts_codec_ctx_new();
    if (!tmp) return TS_ENOMEM;
    int rc = ts_q2_encode(tmp, base, q, n, out, cap, len, changed);
    ts_codec_ctx_free(tmp);
    return rc;
  }
  default: return TS_EINVAL;
  }
}

int ts_codec_decode(ts_codec_ctx *cx, uint32_t codec, int keyframe, const uint8_t *p, size_t len,
                    uint32_t n, int32_t (*q)[3], uint32_t *changed) {
  switch (codec) {
  case TS_CODEC_UNSET:
  case TS_CODEC_Q1:
    if (keyframe) {
      int rc = ts_decode_keyframe(p, len, n, q);
      if (rc == 0 && changed) *changed = n;
      return rc;
    }
    return ts_decode_delta(p, len, n, q, changed);
  case TS_CODEC_Q2: {
    if (cx) return ts_q2_decode(cx, keyframe, p, len, n, q, changed);
    ts_codec_ctx *tmp = ts_codec_ctx_new();
    if (!tmp) return TS_ENOMEM;
    int rc = ts_q2_decode(tmp, keyframe, p, len, n, q, changed);
    ts_codec_ctx_free(tmp);
    return rc;
  }
  default: return TS_EUNSUPPORTED;
  }
}

int ts_codec_check_keyframe(uint32_t codec, const uint8_t *p, size_t len, uint32_t n) {
  if (n > TS_CODEC_MAX_VERTICES) return TS_EDECODE;
  switch (codec) {
  case TS_CODEC_UNSET:
  case TS_CODEC_Q1: return (uint64_t)n * 3 <= len ? 0 : TS_EDECODE;
  case TS_CODEC_Q2: {
    int64_t cs = ts_q2_content_size(p, len);
    if (cs < 0 || (uint64_t)cs < (uint64_t)n * 3 || (uint64_t)cs > ts_codec_bound(n))
      return TS_EDECODE;
    return 0;
  }
  default: return TS_EUNSUPPORTED;
  }
}
