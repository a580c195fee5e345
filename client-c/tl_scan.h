/*
 * tl_scan.h: a Frame Envelope's header fields read from the protobuf wire
 * format in place (tl_scan.c), for tissueload's observers that do not
 * decode payloads.
 */
#ifndef TL_SCAN_H
#define TL_SCAN_H

#include <stddef.h>
#include <stdint.h>

#define TL_MAX_TOOLS 9          /* tool ids 1..8 */

/* A tool's echoed pose in a frame. */
typedef struct tool_echo {
  uint32_t tool_id;
  uint64_t client_time_us;
} tool_echo;

typedef struct frame_head {
  uint32_t session_id, vertex_count, flags, codec;
  uint64_t seq, baseline_seq;
  int keyframe;
  double sim_time;
  size_t n_tools;
  tool_echo tools[TL_MAX_TOOLS];
} frame_head;

/* Envelope.frame's header fields (tissue.proto: Envelope.frame = 18; Frame
 * and ToolState field numbers as there): 1 when msg is a Frame (h filled in;
 * the first TL_MAX_TOOLS tools kept), 0 when it is another message, -1 when
 * malformed. */
int tl_scan_frame(const uint8_t *msg, size_t len, frame_head *h);

#endif
