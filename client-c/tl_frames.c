/*
 * tl_frames.c: what tissueload's clients do with what they receive: the
 * latency and lag bookkeeping of every frame and force message, the frame
 * chain of WebSocket clients (decoded or read in place by tl_scan.c), the
 * recorder's file, and the errors of the run.
 */
#include "tl_run.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"
#include "ts_codec_frame.h"

void tl_note_error(run *r, const char *fmt, ...) {
  r->errors++;
  if (r->first_error[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->first_error, sizeof r->first_error, fmt, ap);
  va_end(ap);
}

/* What every client does with a frame, whatever its transport. */
static void on_frame_common(client *c, uint64_t seq, int keyframe, double sim_time,
                            uint32_t flags, const tool_echo *tools, size_t n_tools,
                            size_t bytes) {
  run *r = c->r;
  uint64_t t = tl_now_us();
  c->frames_total++;
  c->sim_time = sim_time;
  c->sim_at_us = t;
  if (keyframe && c->frames_total > 1 && r->measuring) r->resyncs++;
  if (!r->measuring) {
    for (size_t i = 0; i < n_tools; i++)
      if (tools[i].tool_id < TL_MAX_TOOLS) c->seen_pose_us[tools[i].tool_id] = tools[i].client_time_us;
    return;
  }
  c->frames++;
  c->bytes += bytes;
  if (keyframe) c->keyframes++;
  if (flags & 1u) r->frames_behind++;
  session_run *s = &r->s[c->sidx];
  lag_slot *ls = &s->lag[seq % TL_LAG_RING];
  if (ls->seq != seq) {
    ls->seq = seq;
    ls->first_us = t;
  }
  tl_hist_add(&r->lag, t - ls->first_us);
  for (size_t i = 0; i < n_tools; i++) {
    uint32_t id = tools[i].tool_id;
    uint64_t ct = tools[i].client_time_us;
    if (id >= TL_MAX_TOOLS || ct == 0 || ct == c->seen_pose_us[id] || ct > t) continue;
    c->seen_pose_us[id] = ct;
    tl_hist_add(&r->pose_frame, t - ct);
  }
}

/* A ToolForce message at a controller (TCP or WebSocket): the first one
 * that echoes a pose gives that pose's pose-to-force latency. */
static void on_force_common(client *c, uint32_t tool_id, uint64_t ct) {
  run *r = c->r;
  uint64_t t = tl_now_us();
  if (tool_id != c->tool_id || ct == 0 || ct == c->seen_force_pose_us || ct > t) return;
  c->seen_force_pose_us = ct;
  if (r->measuring) tl_hist_add(&r->pose_force, t - ct);
}

void tl_on_tc_force(void *ud, const tc_force *f) {
  on_force_common(ud, f->tool_id, f->last_client_time_us);
}

/* libtissueclient's callback (TCP clients). */
void tl_on_tc_frame(void *ud, const tc_frame *f) {
  client *c = ud;
  tool_echo te[TL_MAX_TOOLS];
  size_t nt = 0;
  for (uint32_t i = 0; i < f->n_tools && nt < TL_MAX_TOOLS; i++)
    te[nt++] = (tool_echo){f->tools[i].tool_id, f->tools[i].last_client_time_us};
  on_frame_common(c, f->seq, f->keyframe, f->sim_time, f->flags, te, nt, f->bytes);
}

void tl_on_tc_error(void *ud, int code, const char *name, const char *message,
                        uint64_t request_id) {
  client *c = ud;
  (void)request_id;
  tl_note_error(c->r, "client of session %u: %s (%d): %s", c->r->s[c->sidx].id, name, code,
             message);
}

/* The frame chain of a WebSocket or recorder client: deltas must apply to
 * the frame held; payloads are decoded when this client decodes. */
static void apply_frame(client *c, const Tissued__V1__Frame *f) {
  run *r = c->r;
  uint32_t codec = ts_frame_codec(f);
  if (codec < 4) r->codec_seen[codec]++;
  uint32_t n = f->vertex_count;
  if (!f->keyframe && (!c->have || f->baseline_seq != c->last_seq || n != c->n)) {
    tl_note_error(r, "session %u: delta %llu against %llu, the client holds %llu", f->session_id,
               (unsigned long long)f->seq, (unsigned long long)f->baseline_seq,
               (unsigned long long)c->last_seq);
    c->have = 0;
    return;
  }
  if (c->decode) {
    if (f->keyframe) {
      if (ts_codec_check_keyframe(codec, f->payload.data, f->payload.len, n)) {
        r->decode_errors++;
        c->have = 0;
        return;
      }
      if (n > c->cap) {
        int32_t (*q)[3] = realloc(c->q, (size_t)n * sizeof *q);
        if (!q) {
          tl_note_error(r, "out of memory for %u vertices", n);
          return;
        }
        c->q = q;
        c->cap = n;
      }
    }
    if (!c->cx && !(c->cx = ts_codec_ctx_new())) {
      tl_note_error(r, "out of memory for a codec context");
      return;
    }
    int rc = ts_codec_decode(c->cx, codec, f->keyframe, f->payload.data, f->payload.len, n,
                             c->q, NULL);
    if (rc) {
      r->decode_errors++;
      tl_note_error(r, "session %u frame %llu (%s) does not decode: %s", f->session_id,
                 (unsigned long long)f->seq, ts_codec_name(codec) ? ts_codec_name(codec) : "?",
                 ts_strerror(rc));
      c->have = 0;
      return;
    }
  }
  c->have = 1;
  c->n = n;
  c->last_seq = f->seq;
}

static void record_frame(run *r, const uint8_t *msg, size_t len) {
  if (!r->rec_file || r->rec_done) return;
  uint8_t h[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
  if (fwrite(h, 1, 4, r->rec_file) != 4 || fwrite(msg, 1, len, r->rec_file) != len) {
    tl_note_error(r, "writing %s: %s", r->o.record, strerror(errno));
    r->rec_done = 1;
    return;
  }
  r->rec_frames++;
  if (r->o.record_frames && r->rec_frames >= r->o.record_frames) r->rec_done = 1;
}

static void recorder_maybe_switch(run *r, client *c, const Tissued__V1__Frame *f) {
  if (r->rec_switched || r->o.record_switch <= 0) return;
  if (r->rec_frames == 1) r->rec_sim0 = f->sim_time;
  if (f->sim_time - r->rec_sim0 < r->o.record_switch) return;
  Tissued__V1__JoinSession j = TISSUED__V1__JOIN_SESSION__INIT;
  j.session_id = r->s[1].id;
  j.role = TISSUED__V1__ROLE__ROLE_OBSERVER;
  j.frame_rate = (uint32_t)r->o.frame_rate;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  e.join_session = &j;
  if (tl_send_env(c, &e) == 0) {
    r->rec_switched = 1;
    c->sidx = 1;
  }
}

/* The frame chain of an observer that does not decode (see above). */
static void on_frame_head(client *c, const frame_head *h, size_t len) {
  run *r = c->r;
  if (h->codec < 4) r->codec_seen[h->codec]++;
  if (!h->keyframe && (!c->have || h->baseline_seq != c->last_seq || h->vertex_count != c->n)) {
    tl_note_error(r, "session %u: delta %llu against %llu, the client holds %llu", h->session_id,
               (unsigned long long)h->seq, (unsigned long long)h->baseline_seq,
               (unsigned long long)c->last_seq);
    c->have = 0;
  } else {
    c->have = 1;
    c->n = h->vertex_count;
    c->last_seq = h->seq;
  }
  on_frame_common(c, h->seq, h->keyframe, h->sim_time, h->flags, h->tools, h->n_tools, len);
}

/* Every whole message on a tl_link. */
int tl_on_link_msg(void *ud, const uint8_t *msg, size_t len) {
  client *c = ud;
  run *r = c->r;
  if (!c->decode && !c->recorder && !c->wait_rid) {
    frame_head h;
    int k = tl_scan_frame(msg, len, &h);
    if (k < 0) {
      tl_note_error(r, "a message of %zu bytes does not decode", len);
      return 0;
    }
    if (k == 1) {
      on_frame_head(c, &h, len);
      return 0;
    }
  }
  Envelope *e = tissued__v1__envelope__unpack(NULL, len, msg);
  if (!e) {
    tl_note_error(r, "a message of %zu bytes does not decode", len);
    return 0;
  }
  if (c->wait_rid && e->request_id == c->wait_rid && !c->reply &&
      e->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME) {
    c->reply = e;
    return 0;
  }
  if (e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) {
    const Tissued__V1__Frame *f = e->frame;
    if (c->recorder) {
      record_frame(r, msg, len);
      recorder_maybe_switch(r, c, f);
    }
    apply_frame(c, f);
    tool_echo te[TL_MAX_TOOLS];
    size_t nt = 0;
    for (size_t i = 0; i < f->n_tools && nt < TL_MAX_TOOLS; i++)
      te[nt++] = (tool_echo){f->tools[i]->tool_id, f->tools[i]->last_client_time_us};
    if (!c->recorder)
      on_frame_common(c, f->seq, f->keyframe, f->sim_time, f->flags, te, nt, len);
  } else if (e->body_case == TISSUED__V1__ENVELOPE__BODY_TOOL_FORCE) {
    on_force_common(c, e->tool_force->tool_id, e->tool_force->last_client_time_us);
  } else if (e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
    tl_note_error(r, "session %u: server error %s: %s", r->s[c->sidx].id,
               e->error->name ? e->error->name : "?", e->error->message ? e->error->message : "");
  }
  tissued__v1__envelope__free_unpacked(e, NULL);
  return 0;
}
