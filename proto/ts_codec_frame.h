/*
 * ts_codec_frame.h: the codec id of a received Frame message (see
 * ts_codec.h). Frame.codec (field 12) is read through protobuf-c's
 * reflection, so this works with generated code that has the field and with
 * code generated before it was added (then from the unknown fields); a
 * Frame without it is q1.
 */
#ifndef TS_CODEC_FRAME_H
#define TS_CODEC_FRAME_H

#include <stdint.h>

#include "tissue.pb-c.h"

#define TS_FRAME_CODEC_FIELD 12

/* TS_CODEC_Q1 for a Frame without the field, else its value. */
uint32_t ts_frame_codec(const Tissued__V1__Frame *f);

#endif
