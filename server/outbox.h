/*
 * outbox.h: the one-way channel from physics threads to the loop thread.
 * Physics threads push events under a mutex and call uv_async_send (which
 * coalesces wake-ups); the loop drains the whole queue each time it wakes.
 */
#ifndef TS_OUTBOX_H
#define TS_OUTBOX_H

#include <uv.h>

#include "frame.h"

typedef struct ts_session ts_session;

enum {
  TS_EV_FRAME = 1,
  TS_EV_REMOVED = 2,
  TS_EV_DIVERGED = 3,
  TS_EV_FORCE = 4,
  TS_EV_SAMPLES = 5,      /* payload: a ts_learn_set copy to train on (learn.c) */
  TS_EV_SAMPLES_FULL = 6, /* recording stopped: arg 1 the sample set reached
                             max-training-samples, 2 it could not grow (out of memory) */
  TS_EV_REFINED = 7,      /* payload: a refinement's result and topology (refine.c) */
  TS_EV_LANE = 8,         /* arg: the lane the session's steps ask for, 1 slow (physics.c) */
  TS_EV_DETACHED = 9      /* the session left its thread to move to another (physics.c) */
};

typedef struct ts_force_batch ts_force_batch;

typedef struct ts_event {
  int kind;
  ts_session *session;
  ts_frame_ref *frame; /* TS_EV_FRAME */
  ts_force_batch *forces; /* TS_EV_FORCE: a copy in the event's own allocation */
  void *payload;       /* TS_EV_SAMPLES: owned by the event until taken */
  int arg;             /* TS_EV_SAMPLES: 1 when the physics started training itself */
  struct ts_event *next;
} ts_event;

typedef struct ts_outbox {
  uv_mutex_t lock;
  uv_async_t async;
  ts_event *head, *tail;
  uint64_t depth;      /* events queued now */
  uint64_t max_depth;  /* largest queue seen */
} ts_outbox;

int ts_outbox_init(ts_outbox *o, uv_loop_t *loop, uv_async_cb cb, void *data);
/* Queues an event (any thread); returns 0 or TS_ENOMEM. Does not wake. */
int ts_outbox_push(ts_outbox *o, int kind, ts_session *se, ts_frame_ref *f);
/* Queues a TS_EV_FORCE event carrying a copy of b, made in the same
 * allocation as the event (any thread); 0 or TS_ENOMEM. */
int ts_outbox_push_forces(ts_outbox *o, ts_session *se, const ts_force_batch *b);
/* Queues an event carrying an owned pointer and a small argument (any
 * thread); 0 or TS_ENOMEM (the payload stays the caller's). */
int ts_outbox_push_payload(ts_outbox *o, int kind, ts_session *se, void *payload, int arg);
void ts_outbox_wake(ts_outbox *o);
/* Takes the whole queue (loop thread). */
ts_event *ts_outbox_take(ts_outbox *o);
void ts_outbox_close(ts_outbox *o, uv_close_cb cb);

#endif
