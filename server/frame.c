/*
 * frame.c: published frames and their shared encodings (see frame.h). The
 * Envelope of a frame is packed once per baseline and the same bytes go to
 * every client on that baseline.
 */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "sbuf.h"
#include "tissue.pb-c.h"
#include "topology.h"
#include "ts_codec.h"

ts_frame_ref *ts_frame_new(uint32_t n) {
  ts_frame_ref *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->q = malloc(sizeof(int32_t) * 3 * (n ? n : 1));
  if (!f->q) {
    free(f);
    return NULL;
  }
  f->n = n;
  f->refs = 1;
  return f;
}

void ts_frame_retain(ts_frame_ref *f) { f->refs++; }

void ts_frame_release(ts_frame_ref *f) {
  if (!f || --f->refs > 0) return;
  ts_sbuf_release(f->key.buf);
  for (uint32_t i = 0; i < f->n_delta; i++) ts_sbuf_release(f->delta[i].buf);
  free(f->q);
  free(f);
}

static int pack_frame(ts_frame_ref *f, const ts_frame_ref *base, const ts_topology *topo,
                      ts_codec_ctx *cx, ts_encoded *out) {
  size_t cap = ts_codec_payload_bound(TS_CODEC_DEFAULT, f->n);
  uint8_t *payload = malloc(cap);
  if (!payload) return TS_ENOMEM;
  size_t plen;
  uint32_t changed = f->n;
  int erc = ts_codec_encode(cx, TS_CODEC_DEFAULT, base ? (const int32_t(*)[3])base->q : NULL,
                            (const int32_t(*)[3])f->q, f->n, payload, cap, &plen, &changed);
  if (erc) {
    free(payload);
    return erc;
  }

  Tissued__V1__Frame fr = TISSUED__V1__FRAME__INIT;
  fr.session_id = f->session_id;
  fr.seq = f->seq;
  fr.sim_time = f->sim_time;
  fr.keyframe = base == NULL;
  fr.baseline_seq = base ? base->seq : 0;
  fr.quantum = (float)f->quantum;
  fr.vertex_count = f->n;
  fr.payload.data = payload;
  fr.payload.len = plen;
  fr.flags = f->flags;
  fr.codec = TS_CODEC_DEFAULT;

  Tissued__V1__Topology tp = TISSUED__V1__TOPOLOGY__INIT;
  char *names[TS_MAX_LAYERS + 1];
  if (!base && topo) {
    tp.vertex_count = topo->vertex_count;
    tp.n_triangles = (size_t)topo->n_tris * 3;
    tp.triangles = topo->tris;
    tp.n_layer_triangle_counts = topo->n_groups;
    tp.layer_triangle_counts = (uint32_t *)topo->group_tri_count;
    for (uint32_t g = 0; g < topo->n_groups; g++) names[g] = (char *)topo->group_name[g];
    tp.n_layer_names = topo->n_groups;
    tp.layer_names = names;
    fr.topology = &tp;
  }

  Tissued__V1__ToolState ts[TS_MAX_TOOLS];
  Tissued__V1__ToolState *tsp[TS_MAX_TOOLS];
  Tissued__V1__Vec3 force[TS_MAX_TOOLS], pos[TS_MAX_TOOLS];
  Tissued__V1__Quat quat[TS_MAX_TOOLS];
  size_t nt = 0;
  for (uint32_t i = 0; i < f->n_tools && i < TS_MAX_TOOLS; i++) {
    const ts_tool_state *s = &f->tools[i];
    if (!s->active) continue;
    tissued__v1__tool_state__init(&ts[nt]);
    tissued__v1__vec3__init(&force[nt]);
    tissued__v1__vec3__init(&pos[nt]);
    tissued__v1__quat__init(&quat[nt]);
    force[nt].x = s->force[0];
    force[nt].y = s->force[1];
    force[nt].z = s->force[2];
    pos[nt].x = s->pos[0];
    pos[nt].y = s->pos[1];
    pos[nt].z = s->pos[2];
    quat[nt].w = s->quat[0];
    quat[nt].x = s->quat[1];
    quat[nt].y = s->quat[2];
    quat[nt].z = s->quat[3];
    ts[nt].tool_id = s->tool_id;
    ts[nt].last_pose_seq = s->last_pose_seq;
    ts[nt].last_client_time_us = s->last_client_time_us;
    ts[nt].force = &force[nt];
    ts[nt].position = &pos[nt];
    ts[nt].orientation = &quat[nt];
    ts[nt].radius = s->radius;
    ts[nt].kind = (Tissued__V1__ToolShape__Kind)s->kind;
    ts[nt].length = s->length;
    ts[nt].jaw = s->jaw;
    ts[nt].tool_contacts = s->tool_contacts;
    tsp[nt] = &ts[nt];
    nt++;
  }
  fr.n_tools = nt;
  fr.tools = tsp;

  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_FRAME;
  env.frame = &fr;
  size_t len = tissued__v1__envelope__get_packed_size(&env);
  ts_sbuf *buf = ts_sbuf_new(len);
  if (!buf) {
    free(payload);
    return TS_ENOMEM;
  }
  tissued__v1__envelope__pack(&env, buf->data);
  free(payload);
  out->baseline_seq = base ? base->seq : 0;
  out->buf = buf;
  out->bytes = buf->data;
  out->len = len;
  out->changed = changed;
  return 0;
}

const ts_encoded *ts_frame_encode(ts_frame_ref *f, const ts_frame_ref *base,
                                  const ts_topology *topo, ts_codec_ctx *cx) {
  if (!base) {
    if (!f->key.buf && pack_frame(f, NULL, topo, cx, &f->key)) return NULL;
    return &f->key;
  }
  for (uint32_t i = 0; i < f->n_delta; i++)
    if (f->delta[i].baseline_seq == base->seq) return &f->delta[i];
  ts_encoded e;
  if (pack_frame(f, base, topo, cx, &e)) return NULL;
  uint32_t slot;
  if (f->n_delta < TS_FRAME_DELTA_CACHE) {
    slot = f->n_delta++;
  } else { /* evict the oldest baseline (writes in flight hold their own reference) */
    slot = 0;
    for (uint32_t i = 1; i < f->n_delta; i++)
      if (f->delta[i].baseline_seq < f->delta[slot].baseline_seq) slot = i;
    ts_sbuf_release(f->delta[slot].buf);
  }
  f->delta[slot] = e;
  return &f->delta[slot];
}
