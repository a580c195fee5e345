/*
 * frame.h: one published frame of a session: the quantized positions and tool
 * states of one instant, made by a physics thread and then immutable. The loop
 * thread encodes it for clients lazily, once per (frame, baseline): the
 * keyframe bytes and the delta bytes against each baseline asked for are
 * cached in the frame and shared by every client on that baseline (by
 * reference: a transport writes them without copying, sbuf.h).
 * Reference-counted; the count is touched on the loop thread only after the
 * physics thread hands the frame over.
 */
#ifndef TS_FRAME_H
#define TS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define TS_MAX_TOOLS 8
#define TS_FRAME_DELTA_CACHE 4

typedef struct ts_tool_state {
  uint32_t tool_id;     /* 1-based */
  int active;
  uint64_t last_pose_seq;
  uint64_t last_client_time_us;
  float force[3];
  float pos[3];
  float quat[4];
  float radius;
  int kind;             /* TS_TOOL_* (core/ts_tool.h), the same numbers as ToolShape.Kind */
  float length;         /* capsule or jaw length, m */
  float jaw;            /* jaws: opening 0 (closed) .. 1 (open) */
  uint32_t tool_contacts; /* other tools pushing it in the last step (ToolState.tool_contacts) */
} ts_tool_state;

typedef struct ts_topology ts_topology;

typedef struct ts_sbuf ts_sbuf;

typedef struct ts_encoded {
  uint64_t baseline_seq;  /* 0: keyframe */
  ts_sbuf *buf;           /* a whole Envelope, shared by reference (sbuf.h) */
  const uint8_t *bytes;   /* buf's bytes */
  size_t len;
  uint32_t changed;       /* vertices in a delta */
} ts_encoded;

typedef struct ts_frame_ref {
  int refs;
  uint32_t session_id;
  uint64_t seq;              /* 1, 2, ... per session */
  double sim_time;
  uint32_t flags;            /* TS_FRAME_* (physics.h): bit 0 behind real time, bit 1 stalled */
  double quantum;
  uint32_t n;                /* vertices */
  int32_t (*q)[3];           /* quantized positions */
  uint32_t n_tools;
  ts_tool_state tools[TS_MAX_TOOLS];
  /* physics statistics at this frame (they travel with frames so that the
   * loop thread never reads physics state) */
  double step_seconds;       /* smoothed wall time of one step */
  double step_load;          /* CPU time over simulated time, last window (lane.h); -1 none */
  uint64_t steps;
  uint64_t late_events;      /* times the session fell behind real time */
  uint32_t substeps;
  uint32_t contacts;
  uint32_t tool_contacts;    /* contacts between two tools in the last step */
  uint32_t self_contacts;    /* tissue self-contact pairs in the last step */
  int self_state;            /* tissue self-contact: -1 not asked for, else ts_self_state
                                (session_self.h) for the current tissue */
  uint32_t self_surface_nodes; /* its tissue's contact-surface nodes (session_self.h) */
  uint64_t self_steps_over_limit; /* steps it was off over --self-contact-max-nodes */
  uint64_t self_failures;    /* refined tissues it could not be set up for */
  uint64_t tool_contact_steps; /* steps so far in which two tools touched */
  int asleep;                /* the tissue sleeps (session_sleep.h) */
  uint64_t slept_steps;      /* steps so far not computed because it slept */
  double inertia_scale;      /* mass-spring: inertia scale of the last step (1: physical) */
  double added_mass;         /* mass-spring: local mass scaling's added inertia, fraction
                                of the tissue's mass (0: none) */
  double verlet_fraction;    /* nodes on each integrator branch, last step */
  double beeman_fraction;
  /* loop-thread cache of encodings */
  ts_encoded key;
  ts_encoded delta[TS_FRAME_DELTA_CACHE];
  uint32_t n_delta;
} ts_frame_ref;

ts_frame_ref *ts_frame_new(uint32_t n);
void ts_frame_retain(ts_frame_ref *f);
void ts_frame_release(ts_frame_ref *f);

/* Returns the Envelope bytes of this frame for a client whose baseline is
 * `base` (NULL: keyframe with topology), its payload in TS_CODEC_DEFAULT
 * (q2) coded with the loop thread's codec context cx. Encoded once and
 * cached. NULL on out of memory. */
typedef struct ts_codec_ctx ts_codec_ctx;
const ts_encoded *ts_frame_encode(ts_frame_ref *f, const ts_frame_ref *base,
                                  const ts_topology *topo, ts_codec_ctx *cx);

#endif
