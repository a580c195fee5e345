/*
 * ts_codec_frame.c: Frame.codec by field number (see ts_codec_frame.h).
 */
#include "ts_codec_frame.h"

#include <stddef.h>

#include "ts_codec.h"

uint32_t ts_frame_codec(const Tissued__V1__Frame *f) {
  const ProtobufCMessageDescriptor *d = f->base.descriptor;
  const ProtobufCFieldDescriptor *fd =
      protobuf_c_message_descriptor_get_field(d, TS_FRAME_CODEC_FIELD);
  if (fd && fd->type == PROTOBUF_C_TYPE_UINT32 && fd->label != PROTOBUF_C_LABEL_REPEATED) {
    uint32_t v = *(const uint32_t *)((const char *)f + fd->offset);
    return v ? v : TS_CODEC_Q1;
  }
  for (unsigned i = 0; i < f->base.n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *u = &f->base.unknown_fields[i];
    if (u->tag != TS_FRAME_CODEC_FIELD || u->wire_type != PROTOBUF_C_WIRE_TYPE_VARINT) continue;
    uint64_t v = 0;
    for (size_t k = 0; k < u->len && k < 10; k++) v |= (uint64_t)(u->data[k] & 0x7F) << (7 * k);
    return v > UINT32_MAX ? 0xFFFFFFFFu : (v ? (uint32_t)v : TS_CODEC_Q1);
  }
  return TS_CODEC_Q1;
}
