/*
 * outbox.c: physics-to-loop event queue (see outbox.h).
 */
#include "outbox.h"

#include <stdlib.h>

#include "core/ts_error.h"
#include "force.h"

typedef struct ts_event_with_forces {
  ts_event ev; /* first: the queue sees a ts_event */
  ts_force_batch batch;
} ts_event_with_forces;

int ts_outbox_init(ts_outbox *o, uv_loop_t *loop, uv_async_cb cb, void *data) {
  o->head = o->tail = NULL;
  o->depth = o->max_depth = 0;
  if (uv_mutex_init(&o->lock)) return TS_EINTERNAL;
  if (uv_async_init(loop, &o->async, cb)) {
    uv_mutex_destroy(&o->lock);
    return TS_EINTERNAL;
  }
  o->async.data = data;
  return 0;
}

static int push(ts_outbox *o, int kind, ts_session *se, ts_frame_ref *f,
                const ts_force_batch *b, void *payload, int arg) {
  /* a force batch travels in the event's own allocation, right after it */
  ts_event *e = malloc(b ? sizeof(ts_event_with_forces) : sizeof *e);
  if (!e) return TS_ENOMEM;
  e->kind = kind;
  e->session = se;
  e->frame = f;
  e->forces = NULL;
  e->payload = payload;
  e->arg = arg;
  if (b) {
    ts_event_with_forces *ef = (ts_event_with_forces *)e;
    ef->batch = *b;
    e->forces = &ef->batch;
  }
  e->next = NULL;
  uv_mutex_lock(&o->lock);
  if (o->tail)
    o->tail->next = e;
  else
    o->head = e;
  o->tail = e;
  o->depth++;
  if (o->depth > o->max_depth) o->max_depth = o->depth;
  uv_mutex_unlock(&o->lock);
  return 0;
}

int ts_outbox_push(ts_outbox *o, int kind, ts_session *se, ts_frame_ref *f) {
  return push(o, kind, se, f, NULL, NULL, 0);
}

int ts_outbox_push_payload(ts_outbox *o, int kind, ts_session *se, void *payload, int arg) {
  return push(o, kind, se, NULL, NULL, payload, arg);
}

int ts_outbox_push_forces(ts_outbox *o, ts_session *se, const ts_force_batch *b) {
  return push(o, TS_EV_FORCE, se, NULL, b, NULL, 0);
}

void ts_outbox_wake(ts_outbox *o) { uv_async_send(&o->async); }

ts_event *ts_outbox_take(ts_outbox *o) {
  uv_mutex_lock(&o->lock);
  ts_event *h = o->head;
  o->head = o->tail = NULL;
  o->depth = 0;
  uv_mutex_unlock(&o->lock);
  return h;
}

void ts_outbox_close(ts_outbox *o, uv_close_cb cb) {
  uv_close((uv_handle_t *)&o->async, cb);
}
