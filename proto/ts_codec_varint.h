/*
 * ts_codec_varint.h: the integer primitives shared by the frame codecs
 * (ts_codec.c for "q1", ts_codec_q2.c for "q2"; format in ts_codec.h):
 * LEB128 varints of at most 32 bits, zigzag signed mapping and wrapping
 * int32 arithmetic. Internal to proto/: not a public header.
 */
#ifndef TS_CODEC_VARINT_H
#define TS_CODEC_VARINT_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t ts__zz_enc(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }
static inline int32_t ts__zz_dec(uint32_t u) { return (int32_t)((u >> 1) ^ (0u - (u & 1u))); }

/* Differences are taken in uint32 arithmetic so that they wrap instead of
 * overflowing; the decoders wrap back. */
static inline int32_t ts__wrap_sub(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a - (uint32_t)b);
}
static inline int32_t ts__wrap_add(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}

/* Writes v as a varint (1..5 bytes); returns the bytes written. */
static inline size_t ts__put_varint(uint8_t *out, uint32_t v) {
  size_t k = 0;
  while (v >= 0x80) {
    out[k++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  out[k++] = (uint8_t)v;
  return k;
}

/* Reads one varint from p[0..len); returns the bytes used, or 0 when it is
 * truncated, longer than 5 bytes or over 32 bits. */
static inline size_t ts__get_varint(const uint8_t *p, size_t len, uint32_t *v) {
  uint32_t r = 0;
  for (size_t k = 0; k < 5 && k < len; k++) {
    uint8_t b = p[k];
    if (k == 4 && (b & 0xF0)) return 0; /* more than 32 bits */
    r |= (uint32_t)(b & 0x7F) << (7 * k);
    if (!(b & 0x80)) {
      *v = r;
      return k + 1;
    }
  }
  return 0;
}

/* Reads one varint at *o of p[0..len), advancing *o. The common one-byte
 * case takes a single comparison. Returns 0 or -1 (malformed, *o unchanged). */
static inline int ts__next_varint(const uint8_t *p, size_t len, size_t *o, uint32_t *v) {
  size_t i = *o;
  if (i < len && p[i] < 0x80) {
    *v = p[i];
    *o = i + 1;
    return 0;
  }
  size_t k = ts__get_varint(p + i, i < len ? len - i : 0, v);
  if (!k) return -1;
  *o = i + k;
  return 0;
}

#endif
