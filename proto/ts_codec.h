/*
 * ts_codec.h: the frame codecs, shared by the daemon and the C client;
 * client-web/src/codec.js (with codec_q2.js) is their JavaScript twin and
 * must decode the same bytes to the same integers.
 *
 * Positions are quantized to a grid: q = lround(x / quantum) as int32 per axis
 * (quantum default 1e-5 m = 10 um). Decoded positions are q * quantum. All
 * differences below are taken in wrapping int32 arithmetic (uint32 in C).
 * A Frame names its payload format in Frame.codec: 0 (absent) or 1 = "q1",
 * 2 = "q2". Encoders default to q2 (TS_CODEC_DEFAULT).
 *
 * --- q1: varints, no entropy stage --------------------------------------------
 * Keyframe payload: for vertex i = 0..n-1, axis a = 0..2:
 *     zigzag-varint(q[i][a] - q[i-1][a])   with q[-1] = (0,0,0)
 * Delta payload (against the client's baseline frame):
 *     varint m                             number of changed vertices
 *     m times: varint gap                  index - previous index - 1 (previous = -1)
 *              3 x zigzag-varint(q_new[a] - q_base[a])
 * Varints are LEB128 (7 bits a byte, low first), at most 5 bytes, values that
 * fit in 32 bits; zigzag maps v to (v << 1) ^ (v >> 31). A payload must be
 * consumed exactly.
 *
 * --- q2: planar second differences, then zstd -----------------------------------
 * The payload is exactly one Zstandard frame (RFC 8878) whose header declares
 * its content size (no dictionary; a content checksum is allowed, the encoder
 * writes none). The content C, at most ts_codec_bound(n) bytes, uses q1's
 * varints and zigzag and must be consumed exactly:
 *   keyframe: three planes, x then y then z; plane a holds for i = 0..n-1
 *       zigzag-varint(d[i] - d[i-1])  where d[i] = q[i][a] - q[i-1][a],
 *                                      q[-1][a] = 0, d[-1] = 0
 *     (second differences: vertices come in grid rows, so consecutive
 *     spacings nearly repeat and the values are mostly 0 or +-1);
 *   delta: varint m; m varint gaps as in q1 (strictly increasing indices
 *       below n); then three planes, x, y, z; plane a holds for j = 0..m-1
 *       zigzag-varint(r[j] - r[j-1])  where r[j] = q_new[idx_j][a] -
 *                                      q_base[idx_j][a], r[-1] = 0
 *     (neighbouring changed vertices move alike).
 *
 * Why zstd and this layout. Both entropy stages that issue 7 names were
 * measured on a real daemon stream (the built-in patch at resolution 50,
 * 10,000 vertices, 60 Hz frames, a 5 mm sphere driven along the standard
 * path: approach, press 8 mm, drag 20 mm, lift; 241 frames over 4.4 s of
 * simulated time), as mean bytes per frame against raw float32 (12 n):
 *     q1 varints                              8.4 %
 *     meshoptimizer vertex codec              3.6 %  (residuals as 12-byte
 *       vertices, zigzagged; the index gaps as a 4-byte stream; keyframes
 *       as the int32 positions)
 *     zstd -3 of the q1 bytes                 2.1 %
 *     zstd -3 of the planar layout above      1.8 %  (q2)
 *     zstd -3 of the raw int32 frame         43   %  (reference)
 * and keyframes (10,000 vertices): meshoptimizer 32.6 kB, q2 7.8 kB. The
 * vertex codec predicts each byte from the same byte of the previous vertex,
 * which suits attribute streams but not small signed residuals (their high
 * bytes flip between 00 and FF), and it has no entropy coder beyond 2/4/8-bit
 * groups; zstd's Huffman and FSE stages get to about 1 byte per changed
 * vertex. meshoptimizer decodes faster, but q2 decodes a whole keyframe in
 * about a tenth of a millisecond, far inside a frame interval; the JavaScript
 * side decodes zstd with the pure-JS, synchronous fzstd package.
 * tests/bench/bench_codec.c repeats the comparison in every run; in the
 * press of the standard path on patch-S (simulated, 0.4 s, every vertex near
 * the tool moving) it measured q2 4.1 %, meshoptimizer 9.0 %, q1 21.7 % of
 * raw float32; decoding 1.2 GB/s of output (keyframes 1.7 GB/s) against
 * meshoptimizer's 2.3 GB/s; encoding 0.23 ms a frame against q1's 0.09 ms.
 */
#ifndef TS_CODEC_H
#define TS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define TS_DEFAULT_QUANTUM 1e-5

/* Frame.codec values. 0 is what a Frame without the field carries: q1. */
enum { TS_CODEC_UNSET = 0, TS_CODEC_Q1 = 1, TS_CODEC_Q2 = 2 };
#define TS_CODEC_DEFAULT TS_CODEC_Q2
/* zstd level the q2 encoder uses unless told otherwise */
#define TS_CODEC_Q2_LEVEL 3
/* Largest vertex count a decoder accepts (a client allocates for n before
 * decoding: a bound on what a server can make it allocate). */
#define TS_CODEC_MAX_VERTICES (1u << 24)

/* Quantizes n positions (xyz doubles) into q (int32 xyz). Returns 0, or
 * TS_ERANGE if a coordinate is non-finite or off the int32 grid. */
int ts_quantize(const double (*x)[3], uint32_t n, double quantum, int32_t (*q)[3]);

/* Worst-case encoded size of a q1 keyframe or delta of n vertices (also the
 * largest q2 content). */
size_t ts_codec_bound(uint32_t n);

/* ---- q1 -------------------------------------------------------------------- */

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

/* ---- any codec, by id ---------------------------------------------------------- */

/* Scratch space and zstd contexts for encoding and decoding; reused across
 * frames so that steady-state coding allocates nothing. One per thread (it is
 * not shared). Functions below take NULL too and then make a temporary one. */
typedef struct ts_codec_ctx ts_codec_ctx;

/* NULL when out of memory. */
ts_codec_ctx *ts_codec_ctx_new(void);
void ts_codec_ctx_free(ts_codec_ctx *cx);
/* Sets the zstd level of q2 encoding (1..19; default TS_CODEC_Q2_LEVEL).
 * Returns 0 or TS_ERANGE. */
int ts_codec_ctx_set_level(ts_codec_ctx *cx, int level);

/* "q1", "q2", or NULL for an unknown id. 0 is q1. */
const char *ts_codec_name(uint32_t codec);
/* The id for a name ("q1", "q2"), or 0 for an unknown name. */
uint32_t ts_codec_by_name(const char *name);

/* Worst-case payload size of a frame of n vertices in this codec; 0 for an
 * unknown codec. */
size_t ts_codec_payload_bound(uint32_t codec, uint32_t n);

/* Encodes a keyframe (base == NULL) or a delta against base into out (cap
 * bytes; ts_codec_payload_bound(codec, n) is always enough). Sets *len and,
 * if changed is not NULL, the number of vertices the frame changes (n for a
 * keyframe). Returns 0, TS_EINVAL (unknown codec), TS_ETOOBIG (cap too
 * small), TS_ENOMEM, or TS_EINTERNAL (the zstd library failed). */
int ts_codec_encode(ts_codec_ctx *cx, uint32_t codec, const int32_t (*base)[3],
                    const int32_t (*q)[3], uint32_t n, uint8_t *out, size_t cap, size_t *len,
                    uint32_t *changed);

/* Decodes a keyframe (keyframe != 0: overwrites q[0..n)) or applies a delta
 * to q (the client's baseline, n vertices). Never reads past len or writes
 * past n; a rejected delta changes nothing (a rejected keyframe may have
 * overwritten q). Returns 0, TS_EDECODE for any malformed payload,
 * TS_EUNSUPPORTED for an unknown codec, or TS_ENOMEM. */
int ts_codec_decode(ts_codec_ctx *cx, uint32_t codec, int keyframe, const uint8_t *p, size_t len,
                    uint32_t n, int32_t (*q)[3], uint32_t *changed);

/* A cheap check, before allocating for n vertices, that a keyframe payload
 * can hold them: n <= TS_CODEC_MAX_VERTICES and, for q1, len >= 3 n; for q2,
 * the zstd header declares between 3 n and ts_codec_bound(n) content bytes.
 * Returns 0, TS_EDECODE or TS_EUNSUPPORTED. */
int ts_codec_check_keyframe(uint32_t codec, const uint8_t *p, size_t len, uint32_t n);

/* ---- q2 (what ts_codec_encode/decode call for TS_CODEC_Q2) --------------------- */

int ts_q2_encode(ts_codec_ctx *cx, const int32_t (*base)[3], const int32_t (*q)[3], uint32_t n,
                 uint8_t *out, size_t cap, size_t *len, uint32_t *changed);
int ts_q2_decode(ts_codec_ctx *cx, int keyframe, const uint8_t *p, size_t len, uint32_t n,
                 int32_t (*q)[3], uint32_t *changed);
size_t ts_q2_bound(uint32_t n);
/* The content size a q2 payload declares, or -1 when it is not a single
 * zstd frame with a declared size. */
int64_t ts_q2_content_size(const uint8_t *p, size_t len);

#endif