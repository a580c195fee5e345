/*
 * fuzz_envelope.c: fuzz target for Envelope decoding (protobuf-c generated
 * code for proto/tissue.proto): whatever decodes must re-encode and decode
 * again to the same size, and free cleanly. Messages carrying unknown fields
 * are only decoded and freed: protobuf-c keeps an unknown field even with the
 * invalid field number 0 (written non-minimally, e.g. 80 00 00) and then
 * refuses its own minimal re-encoding of it, which is its business, not a
 * fault of the daemon (which never re-encodes what it receives). That holds
 * for unknown fields at any depth (a nested Pong with field 0:
 * regression-nested-unknown-field-0), so the whole message tree is walked.
 */
#include <stdint.h>
#include <stdlib.h>

#include "tissue.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Does m or any message inside it carry unknown fields? */
static int has_unknown(const ProtobufCMessage *m) {
  if (!m) return 0;
  if (m->n_unknown_fields > 0) return 1;
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
    const char *base = (const char *)m;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + f->quantifier_offset);
      ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)(base + f->offset);
      for (size_t k = 0; k < n; k++)
        if (has_unknown(v[k])) return 1;
    } else {
      /* a oneof member is only valid when it is the case that is set */
      if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
          *(const uint32_t *)(base + f->quantifier_offset) != f->id)
        continue;
      if (has_unknown(*(ProtobufCMessage *const *)(base + f->offset))) return 1;
    }
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, size, data);
  if (!e) return 0;
  if (has_unknown(&e->base)) {
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
