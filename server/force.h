/*
 * force.h: force feedback messages. After every physics step the physics
 * thread samples the reaction force and torque on each tool whose
 * controller asked for them (every step, or every k-th step for a lower
 * rate) into a small batch that travels to the loop thread through the
 * outbox, apart from frames; the loop sends each sample to its tool's
 * controller as a ToolForce message. A controller over its soft output
 * limit misses samples rather than queueing them: for a haptic loop only
 * the newest force matters.
 */
#ifndef TS_FORCE_H
#define TS_FORCE_H

#include <stdint.h>

#include "frame.h"

typedef struct ts_session ts_session;

typedef struct ts_force_sample {
  uint32_t tool_id;  /* 1-based */
  uint32_t contacts; /* tissue nodes touching the tool */
  uint32_t tool_contacts; /* other tools pushing it (core/ts_tool_contact.h) */
  uint64_t step;     /* physics step it was computed in */
  double sim_time;   /* s */
  double force[3];   /* N, on the tool */
  double torque[3];  /* N m, about the tool's tip */
  uint64_t last_pose_seq;
  uint64_t last_client_time_us;
} ts_force_sample;

typedef struct ts_force_batch {
  uint32_t n;
  ts_force_sample s[TS_MAX_TOOLS];
} ts_force_batch;

/* Physics thread, after a step of se: writes the samples due at this step
 * into b and returns how many (0: none due). */
uint32_t ts_force_collect(ts_session *se, ts_force_batch *b);

/* Loop thread: sends each sample of b to the controller that owns its tool. */
void ts_force_deliver(ts_session *se, const ts_force_batch *b);

/* Steps between two samples for a controller asking for `rate` messages per
 * second of simulated time at step dt (0: every step). At least 1. */
uint32_t ts_force_every(uint32_t rate, double dt);

#endif
