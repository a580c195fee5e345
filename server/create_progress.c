/*
 * create_progress.c: the progress reports of sessions being created (see
 * create_progress.h).
 */
#include "create_progress.h"

#include "conn.h"
#include "server.h"
#include "tissue.pb-c.h"

#define REPORT_MS 1000 /* between reports, and before the first */
#define TICK_MS 100     /* the timer's period while creations are under way */

static void on_tick(uv_timer_t *h);

int ts_create_progress_init(ts_server *s) {
  if (uv_timer_init(s->loop, &s->create_timer)) return -1;
  s->create_timer.data = s;
  return 0;
}

void ts_create_progress_close(ts_server *s) {
  uv_timer_stop(&s->create_timer);
  uv_close((uv_handle_t *)&s->create_timer, NULL);
}

void ts_create_track_begin(ts_server *s, ts_create_track *t, uint64_t conn_id, uint64_t rid,
                           int wants) {
  t->conn_id = conn_id;
  t->rid = rid;
  t->wants = wants;
  t->start_ms = ts_now_ms(s);
  t->next_ms = t->start_ms + REPORT_MS;
  atomic_store_explicit(&t->stage, TISSUED__V1__CREATE_PROGRESS__STAGE__QUEUED,
                        memory_order_relaxed);
  /* at the tail: the list is in the order the creations were taken */
  t->next = NULL;
  t->prev = NULL;
  if (!s->creating) {
    s->creating = t;
    uv_timer_start(&s->create_timer, on_tick, TICK_MS, TICK_MS);
    return;
  }
  ts_create_track *last = s->creating;
  while (last->next) last = last->next;
  last->next = t;
  t->prev = last;
}

void ts_create_track_end(ts_server *s, ts_create_track *t) {
  if (t->prev)
    t->prev->next = t->next;
  else if (s->creating == t)
    s->creating = t->next;
  if (t->next) t->next->prev = t->prev;
  t->next = t->prev = NULL;
  if (!s->creating) uv_timer_stop(&s->create_timer);
}

void ts_create_track_set(ts_create_track *t, int stage) {
  atomic_store_explicit(&t->stage, stage, memory_order_relaxed);
}

static void on_tick(uv_timer_t *h) {
  ts_server *s = h->data;
  const uint64_t now = ts_now_ms(s);
  uint32_t building = 0; /* earlier creations not yet past the builder */
  for (ts_create_track *t = s->creating; t; t = t->next) {
    const int stage = atomic_load_explicit(&t->stage, memory_order_relaxed);
    ts_conn *c = NULL;
    if (t->wants && now >= t->next_ms) {
      t->next_ms = now + REPORT_MS;
      c = ts_server_find_conn(s, t->conn_id);
    }
    if (c) {
      Tissued__V1__CreateProgress p = TISSUED__V1__CREATE_PROGRESS__INIT;
      p.request_id = t->rid;
      p.stage = (Tissued__V1__CreateProgress__Stage)stage;
      p.elapsed = (double)(now - t->start_ms) / 1000.0;
      p.ahead = stage == TISSUED__V1__CREATE_PROGRESS__STAGE__QUEUED ? building : 0;
      Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
      env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_PROGRESS;
      env.create_progress = &p;
      ts_send_envelope(c, &env);
    }
    if (stage < TISSUED__V1__CREATE_PROGRESS__STAGE__STORING) building++;
  }
}
