/*
 * fuzz_envelope.c: fuzz target for Envelope decoding (protobuf-c generated
 * code for proto/tissue.proto): whatever decodes must re-encode and decode
 * again to the same size, and free cleanly. Messages carrying unknown fields
 * are only decoded and freed: protobuf-c keeps an unknown field even with the
 * invalid field number 0 (written non-minimally, e.g. 80 00 00) and then
 * refuses its own minimal re-encoding of it, which is its business, not a
 * fault of the daemon (which never re-encodes what it receives).
 */
#include <stdint.h>
#include <stdlib.h>

#include "tissue.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, size, data);
  if (!e) return 0;
  if (e->base.n_unknown_fields > 0) {
    tissued__v1__envelope__free_unpacked(e, NULL);
    return 0;
  }
  size_t len = tissued__v1__envelope__get_packed_size(e);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) abort();
  if (tissued__v1__envelope__pack(e, buf) != len) abort();
  Tissued__V1__Envelope *e2 = tissued__v1__envelope__unpack(NULL, len, buf);
  if (!e2) abort();
  if (tissued__v1__envelope__get_packed_size(e2) != len) abort();
  tissued__v1__envelope__free_unpacked(e2, NULL);
  tissued__v1__envelope__free_unpacked(e, NULL);
  free(buf);
  return 0;
}
