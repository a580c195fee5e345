/*
 * tl_scan.c: tissueload's frame headers read in place (tl_scan.h).
 *
 * An observer that does not decode payloads needs a frame's header fields
 * only (seq, keyframe, baseline, flags, the tools' echoed pose times): they
 * are read from the protobuf wire format in place (Protocol Buffers
 * encoding: varints, 64/32-bit fixed fields, length-delimited fields),
 * walking every field so that a malformed message is still noticed, instead
 * of unpacking the whole Envelope with a copy of its payload. The frame was
 * received whole before this runs (tl_link hands over complete messages),
 * so the lag it measures is that of the whole frame.
 */
#include "tl_scan.h"

#include <string.h>

#include "ts_codec.h"

static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int sh = 0; sh < 64 && *p < end; sh += 7) {
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7F) << sh;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

/* The next field's number, wire type and, for varints and fixed64, value;
 * for length-delimited ones *sub and *sublen. 0, 1 at the end, -1 malformed. */
static int pb_field(const uint8_t **p, const uint8_t *end, uint32_t *num, uint64_t *v,
                    const uint8_t **sub, size_t *sublen) {
  if (*p >= end) return 1;
  uint64_t key;
  if (pb_varint(p, end, &key) || (key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF) return -1;
  *num = (uint32_t)(key >> 3);
  *sub = NULL;
  *sublen = 0;
  *v = 0;
  switch (key & 7) {
  case 0: return pb_varint(p, end, v);
  case 1:
    if (end - *p < 8) return -1;
    memcpy(v, *p, 8); /* little-endian on the machines this runs on (x86-64, arm64) */
    *p += 8;
    return 0;
  case 2:
    if (pb_varint(p, end, v) || *v > (uint64_t)(end - *p)) return -1;
    *sub = *p;
    *sublen = (size_t)*v;
    *p += *v;
    return 0;
  case 5:
    if (end - *p < 4) return -1;
    *p += 4;
    return 0;
  }
  return -1;
}

/* Envelope.frame's header fields (tl_scan.h). */
int tl_scan_frame(const uint8_t *msg, size_t len, frame_head *h) {
  const uint8_t *p = msg, *end = msg + len, *fr = NULL, *sub;
  size_t frlen = 0, sublen;
  uint32_t num;
  uint64_t v;
  int rc;
  while ((rc = pb_field(&p, end, &num, &v, &sub, &sublen)) == 0)
    if (num == 18 && sub) {
      fr = sub;
      frlen = sublen;
    } else if (num >= 10) {
      return 0; /* another body */
    }
  if (rc < 0) return -1;
  if (!fr) return 0;
  memset(h, 0, sizeof *h);
  p = fr;
  end = fr + frlen;
  while ((rc = pb_field(&p, end, &num, &v, &sub, &sublen)) == 0) {
    switch (num) {
    case 1: h->session_id = (uint32_t)v; break;
    case 2: h->seq = v; break;
    case 3: memcpy(&h->sim_time, &v, sizeof h->sim_time); break;
    case 4: h->keyframe = v != 0; break;
    case 5: h->baseline_seq = v; break;
    case 7: h->vertex_count = (uint32_t)v; break;
    case 11: h->flags = (uint32_t)v; break;
    case 12: h->codec = (uint32_t)v; break;
    case 10: {
      if (!sub) return -1;
      tool_echo te = {0, 0};
      const uint8_t *tp = sub, *tend = sub + sublen, *ts;
      size_t tl;
      uint32_t tn;
      uint64_t tv;
      int trc;
      while ((trc = pb_field(&tp, tend, &tn, &tv, &ts, &tl)) == 0) {
        if (tn == 1) te.tool_id = (uint32_t)tv;
        else if (tn == 7) te.client_time_us = tv;
      }
      if (trc < 0) return -1;
      if (h->n_tools < TL_MAX_TOOLS) h->tools[h->n_tools++] = te;
      break;
    }
    default: break;
    }
  }
  if (rc < 0) return -1;
  if (!h->codec) h->codec = TS_CODEC_Q1; /* as ts_frame_codec: 0 means q1 */
  return 1;
}
