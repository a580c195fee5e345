/*
 * ts_codec.h: the frame codec (format "q1"), shared by the daemon and the C
 * client; client-web/src/codec.js is its JavaScript twin and must decode the
 * same bytes to the same integers.
 *
 * Positions are quantized to a grid: q = lround(x / quantum) as int32 per axis
 * (quantum default 1e-5 m = 10 um). Decoded positions are q * quantum.
 *
 * Keyframe payload: for vertex i = 0..n-1, axis a = 0..2:
 *     zigzag-varint(q[i][a] - q[i-1][a])   with q[-1] = (0,0,0)
 * Delta payload (against the client's baseline frame):
 *     varint m                             number of changed vertices
 *     m times: varint gap                  index - previous index - 1 (previous = -1)
 *              3 x zigzag-varint(q_new[a] - q_base[a])
 * Varints are LEB128 (7 bits a byte, low first), at most 5 bytes, values that
 * fit in 32 bits; zigzag maps v to (v << 1) ^ (v >> 31). A payload must be
 * consumed exactly. Issue 7 puts an entropy stage after this.
 */
#ifndef TS_CODEC_H
#define TS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define TS_DEFAULT_QUANTUM 1e-5

/* Quantizes n positions (xyz doubles) into q (int32 xyz). Returns 0, or
 * TS_ERANGE if a coordinate is non-finite or off the int32 grid. */
int ts_quantize(const double (*x)[3], uint32_t n, double quantum, int32_t (*q)[3]);

/* Worst-case encoded size of a keyframe or delta of n vertices. */
size_t ts_codec_bound(uint32_t n);

/* Encoders write into out (at least ts_codec_bound(n) bytes) and return the
 * number of bytes written. */
size_t ts_encode_keyframe(const int32_t (*q)[3], uint32_t n, uint8_t *out);
size_t ts_encode_delta(const int32_t (*base)[3], const int32_t (*q)[3], uint32_t n,
                       uint8_t *out, uint32_t *changed_out);

/* Decoders: q holds n vertices; a keyframe overwrites all, a delta updates the
 * changed ones in place. Return 0 or TS_EDECODE on any malformed input (never
 * reading past len, never writing past n; a rejected delta changes nothing). */
int ts_decode_keyframe(const uint8_t *p, size_t len, uint32_t n, int32_t (*q)[3]);
int ts_decode_delta(const uint8_t *p, size_t len, uint32_t n, int32_t (*q)[3],
                    uint32_t *changed_out);

#endif
