/*
 * fuzz_tlscan.c: fuzz target for tissueload's in-place frame header reader
 * (client-c/tl_scan.c, tl_scan_frame), checked against protobuf-c's decoder
 * of the same Envelope.
 *
 * Input: byte 0 picks the mode.
 *   even: the rest is an Envelope's bytes as received. tl_scan_frame must
 *     return -1, 0 or 1 and keep at most TL_MAX_TOOLS tools. Where the bytes
 *     are a canonical encoding (protobuf-c unpacks them and packs them back
 *     to the same bytes: every field once, in order; no unknown field in the
 *     Envelope, the Frame or its tool states), the two readers must
 *     agree: 1 exactly for a Frame body, with the same header fields.
 *   odd: the rest drives a Frame built with protobuf-c (header fields, tool
 *     states with ids and echoed times, a payload and a topology of the
 *     given sizes), packed in an Envelope: tl_scan_frame must return 1 with
 *     every header field equal to what was built.
 * Seeds: tests/fuzz/corpus/tlscan/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../client-c/tl_scan.h"
#include "tissue.pb-c.h"
#include "ts_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BUILT_TOOLS 12 /* more than TL_MAX_TOOLS: the reader keeps the first ones */

/* Fails the run unless h holds f's header fields. */
static void expect_same(const frame_head *h, const Tissued__V1__Frame *f) {
  uint32_t codec = f->codec ? f->codec : TS_CODEC_Q1;
  size_t nt = f->n_tools < TL_MAX_TOOLS ? f->n_tools : TL_MAX_TOOLS;
  double st = f->sim_time;
  /* the same bits, except that -0.0 is not sent (proto3 leaves a field
   * equal to its default out) and reads back as 0.0 */
  int same_time = memcmp(&h->sim_time, &st, sizeof st) == 0 || (st == 0.0 && h->sim_time == 0.0);
  if (h->session_id != f->session_id || h->seq != f->seq || !same_time ||
      h->keyframe != (f->keyframe != 0) || h->baseline_seq != f->baseline_seq ||
      h->vertex_count != f->vertex_count || h->flags != f->flags || h->codec != codec ||
      h->n_tools != nt)
    abort();
  for (size_t i = 0; i < nt; i++)
    if (h->tools[i].tool_id != f->tools[i]->tool_id ||
        h->tools[i].client_time_us != f->tools[i]->last_client_time_us)
      abort();
}

/* Reads n bytes of the input as an unsigned number (little-endian); 0 past the end. */
static uint64_t take(const uint8_t **p, size_t *left, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n && *left; i++, (*p)++, (*left)--) v |= (uint64_t)**p << (8 * i);
  return v;
}

static void raw_mode(const uint8_t *data, size_t size) {
  frame_head h;
  memset(&h, 0xA5, sizeof h);
  int rc = tl_scan_frame(data, size, &h);
  if (rc < -1 || rc > 1) abort();
  if (rc == 1 && h.n_tools > TL_MAX_TOOLS) abort();
  Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, size, data);
  if (!e) return;
  size_t n = tissued__v1__envelope__get_packed_size(e);
  uint8_t *back = n ? malloc(n) : NULL;
  if (n && !back) abort();
  /* unknown Envelope fields are kept and packed back by protobuf-c; the
   * reader takes a field numbered 10 or more it does not know for another
   * body, so such inputs are not compared */
  int canonical = n == size && e->base.n_unknown_fields == 0 && (!n || (tissued__v1__envelope__pack(e, back) == n &&
                                       memcmp(back, data, n) == 0));
  /* protobuf-c keeps unknown fields inside the Frame and its tool states
   * too, even with field numbers over 2^29 - 1 that the reader refuses as
   * malformed (as the encoding's rules say): such frames are not compared */
  if (canonical && e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) {
    if (e->frame->base.n_unknown_fields) canonical = 0;
    for (size_t i = 0; canonical && i < e->frame->n_tools; i++)
      if (e->frame->tools[i]->base.n_unknown_fields) canonical = 0;
  }
  if (canonical) {
    int is_frame = e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME;
    if (rc != is_frame) abort();
    if (is_frame) expect_same(&h, e->frame);
  }
  free(back);
  tissued__v1__envelope__free_unpacked(e, NULL);
}

static void built_mode(const uint8_t *p, size_t left) {
  Tissued__V1__Frame f = TISSUED__V1__FRAME__INIT;
  f.session_id = (uint32_t)take(&p, &left, 4);
  f.seq = take(&p, &left, 8);
  uint64_t bits = take(&p, &left, 8);
  memcpy(&f.sim_time, &bits, sizeof f.sim_time); /* any bit pattern, NaN included */
  f.keyframe = take(&p, &left, 1) & 1;
  f.baseline_seq = take(&p, &left, 8);
  f.vertex_count = (uint32_t)take(&p, &left, 4);
  f.flags = (uint32_t)take(&p, &left, 4);
  f.codec = (uint32_t)take(&p, &left, 1) % 4;
  size_t n_payload = (size_t)take(&p, &left, 2) % 4096;
  size_t n_tris = (size_t)take(&p, &left, 1);
  size_t n_tools = (size_t)take(&p, &left, 1) % (MAX_BUILT_TOOLS + 1);
  uint64_t request_id = take(&p, &left, 8);

  uint8_t *payload = calloc(n_payload ? n_payload : 1, 1);
  uint32_t *tris = calloc(n_tris ? n_tris * 3 : 1, sizeof *tris);
  Tissued__V1__ToolState ts[MAX_BUILT_TOOLS], *tp[MAX_BUILT_TOOLS];
  Tissued__V1__Vec3 pos = TISSUED__V1__VEC3__INIT;
  Tissued__V1__Topology topo = TISSUED__V1__TOPOLOGY__INIT;
  if (!payload || !tris) abort();
  for (size_t i = 0; i < n_payload; i++) payload[i] = (uint8_t)(i * 131u);
  for (size_t i = 0; i < n_tris * 3; i++) tris[i] = (uint32_t)(i * 2654435761u);
  f.payload.len = n_payload;
  f.payload.data = payload;
  if (n_tris) {
    topo.vertex_count = f.vertex_count;
    topo.n_triangles = n_tris * 3;
    topo.triangles = tris;
    f.topology = &topo;
  }
  for (size_t i = 0; i < n_tools; i++) {
    tissued__v1__tool_state__init(&ts[i]);
    ts[i].tool_id = (uint32_t)take(&p, &left, 1);
    ts[i].last_pose_seq = take(&p, &left, 2);
    ts[i].last_client_time_us = take(&p, &left, 8);
    ts[i].position = &pos;
    tp[i] = &ts[i];
  }
  f.n_tools = n_tools;
  f.tools = n_tools ? tp : NULL;

  Tissued__V1__Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.request_id = request_id;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_FRAME;
  e.frame = &f;
  size_t n = tissued__v1__envelope__get_packed_size(&e);
  uint8_t *buf = malloc(n);
  if (!buf || tissued__v1__envelope__pack(&e, buf) != n) abort();
  frame_head h;
  if (tl_scan_frame(buf, n, &h) != 1) abort();
  expect_same(&h, &f);
  free(buf);
  free(payload);
  free(tris);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  if (data[0] & 1)
    built_mode(data + 1, size - 1);
  else
    raw_mode(data + 1, size - 1);
  return 0;
}
