/*
 * tc_frames.c: libtissueclient's copy of the tissue: a Frame's keyframe or
 * delta (the q1/q2 codec, proto/ts_codec.h) applied to the client's
 * quantised positions, the keyframe's topology and layers and the frame's
 * tool states validated and copied, and the tc_frame the frame callback and
 * tc_last_frame show. A frame that cannot apply is reported and the client
 * waits for the next keyframe.
 */
#include "tc_priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"
#include "ts_codec_frame.h"

static int ensure_vertices(tc_client *c, uint32_t n) {
  if (n <= c->cap && c->q) return 0;
  size_t cap = n ? n : 1;
  int32_t (*q)[3] = malloc(cap * sizeof *q);
  int32_t (*s)[3] = malloc(cap * sizeof *s);
  double (*p)[3] = malloc(cap * sizeof *p);
  if (!q || !s || !p) {
    free(q);
    free(s);
    free(p);
    return TS_ENOMEM;
  }
  if (c->q && c->n) memcpy(q, c->q, (size_t)c->n * sizeof *q);
  free(c->q);
  free(c->scratch);
  free(c->pos);
  c->q = q;
  c->scratch = s;
  c->pos = p;
  c->cap = cap;
  return 0;
}

void tc__free_topology(tc_client *c) {
  free(c->tris);
  free(c->layer_counts);
  for (uint32_t i = 0; i < c->n_layers; i++) free(c->layer_names[i]);
  free(c->layer_names);
  c->tris = NULL;
  c->layer_counts = NULL;
  c->layer_names = NULL;
  c->n_tris = 0;
  c->n_layers = 0;
  c->topo_vertices = 0;
}

/* Validates and copies a keyframe's topology for n vertices. */
static int take_topology(tc_client *c, const Tissued__V1__Topology *t, uint32_t n) {
  if (t->vertex_count != n) {
    tc__report(c, TS_EDECODE, "frame topology is for %u vertices, the frame has %u",
           t->vertex_count, n);
    return TS_EDECODE;
  }
  if (t->n_triangles % 3 != 0) {
    tc__report(c, TS_EDECODE, "topology has %zu triangle indices, not a multiple of 3",
           t->n_triangles);
    return TS_EDECODE;
  }
  for (size_t i = 0; i < t->n_triangles; i++) {
    if (t->triangles[i] >= n) {
      tc__report(c, TS_EDECODE, "triangle index %u out of range (vertices: %u)", t->triangles[i], n);
      return TS_EDECODE;
    }
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < t->n_layer_triangle_counts; i++) sum += t->layer_triangle_counts[i];
  if (t->n_layer_triangle_counts && sum != t->n_triangles / 3) {
    tc__report(c, TS_EDECODE, "layer triangle counts add up to %llu, the topology has %zu",
           (unsigned long long)sum, t->n_triangles / 3);
    return TS_EDECODE;
  }
  tc__free_topology(c);
  size_t nl = t->n_layer_triangle_counts;
  c->tris = malloc((t->n_triangles ? t->n_triangles : 1) * sizeof *c->tris);
  c->layer_counts = malloc((nl ? nl : 1) * sizeof *c->layer_counts);
  c->layer_names = calloc(nl ? nl : 1, sizeof *c->layer_names);
  if (!c->tris || !c->layer_counts || !c->layer_names) {
    tc__free_topology(c);
    return tc__fail(c, TS_ENOMEM, "out of memory for the topology");
  }
  c->n_layers = (uint32_t)nl; /* set before the names so free_topology frees them */
  /* a Topology with no triangles (or no layers) has NULL arrays, which
   * memcpy may not be given even for 0 bytes (found by fuzz_client) */
  if (t->n_triangles) memcpy(c->tris, t->triangles, t->n_triangles * sizeof *c->tris);
  if (nl) memcpy(c->layer_counts, t->layer_triangle_counts, nl * sizeof *c->layer_counts);
  for (size_t i = 0; i < nl; i++) {
    const char *name = i < t->n_layer_names && t->layer_names[i] ? t->layer_names[i] : "";
    c->layer_names[i] = strdup(name);
    if (!c->layer_names[i]) {
      tc__free_topology(c);
      return tc__fail(c, TS_ENOMEM, "out of memory for the topology");
    }
  }
  c->n_tris = (uint32_t)(t->n_triangles / 3);
  c->topo_vertices = n;
  return 0;
}

static void vec3(const Tissued__V1__Vec3 *v, double out[3]) {
  out[0] = v ? v->x : 0;
  out[1] = v ? v->y : 0;
  out[2] = v ? v->z : 0;
}

static int take_tools(tc_client *c, const Tissued__V1__Frame *f) {
  if (f->n_tools > c->tools_cap) {
    tc_tool *t = realloc(c->tools, f->n_tools * sizeof *t);
    if (!t) return tc__fail(c, TS_ENOMEM, "out of memory for tools");
    c->tools = t;
    c->tools_cap = (uint32_t)f->n_tools;
  }
  for (size_t i = 0; i < f->n_tools; i++) {
    const Tissued__V1__ToolState *s = f->tools[i];
    tc_tool *t = &c->tools[i];
    memset(t, 0, sizeof *t);
    t->tool_id = s->tool_id;
    t->last_pose_seq = s->last_pose_seq;
    t->last_client_time_us = s->last_client_time_us;
    vec3(s->force, t->force);
    vec3(s->position, t->position);
    t->orientation[0] = s->orientation ? s->orientation->w : 1;
    t->orientation[1] = s->orientation ? s->orientation->x : 0;
    t->orientation[2] = s->orientation ? s->orientation->y : 0;
    t->orientation[3] = s->orientation ? s->orientation->z : 0;
    t->radius = s->radius;
    t->tool_contacts = s->tool_contacts;
  }
  return 0;
}

static int apply_keyframe(tc_client *c, const Tissued__V1__Frame *f) {
  uint32_t n = f->vertex_count;
  /* every vertex takes at least 3 payload bytes: refuse absurd counts before
   * allocating for them */
  if (ts_codec_check_keyframe(ts_frame_codec(f), f->payload.data, f->payload.len, n)) {
    tc__report(c, TS_EDECODE, "keyframe %llu claims %u vertices in %zu payload bytes",
           (unsigned long long)f->seq, n, f->payload.len);
    return TS_EDECODE;
  }
  if (ensure_vertices(c, n)) return tc__fail(c, TS_ENOMEM, "out of memory for %u vertices", n);
  if (!c->codec && !(c->codec = ts_codec_ctx_new())) return tc__fail(c, TS_ENOMEM, "out of memory");
  if (ts_codec_decode(c->codec, ts_frame_codec(f), 1, f->payload.data, f->payload.len, n, c->scratch, NULL) != 0) {
    tc__report(c, TS_EDECODE, "keyframe %llu payload does not decode", (unsigned long long)f->seq);
    return TS_EDECODE;
  }
  if (f->topology) {
    int rc = take_topology(c, f->topology, n);
    if (rc) return rc;
  } else if (c->topo_vertices != n) {
    tc__free_topology(c); /* the old one does not fit; the server sends a new one with changes */
  }
  int32_t (*t)[3] = c->q;
  c->q = c->scratch;
  c->scratch = t;
  c->n = n;
  c->frame.changed = n;
  return 0;
}

static int apply_delta(tc_client *c, const Tissued__V1__Frame *f) {
  if (!c->have_state)
    return TS_EPROTOCOL; /* reported by the caller */
  if (f->baseline_seq != c->last_seq || f->vertex_count != c->n || f->quantum != c->quantum)
    return TS_EPROTOCOL;
  uint32_t changed = 0;
  if (!c->codec && !(c->codec = ts_codec_ctx_new())) return tc__fail(c, TS_ENOMEM, "out of memory");
  if (ts_codec_decode(c->codec, ts_frame_codec(f), 0, f->payload.data, f->payload.len, c->n, c->q, &changed) != 0) {
    tc__report(c, TS_EDECODE, "delta frame %llu payload does not decode",
           (unsigned long long)f->seq);
    return TS_EDECODE;
  }
  c->frame.changed = changed;
  return 0;
}

void tc__handle_frame(tc_client *c, const Tissued__V1__Frame *f, size_t bytes) {
  if (!(f->quantum > 0) || !isfinite(f->quantum)) {
    tc__report(c, TS_EDECODE, "frame %llu has quantum %g", (unsigned long long)f->seq,
           (double)f->quantum);
    return;
  }
  int rc;
  if (f->keyframe) {
    rc = apply_keyframe(c, f);
    if (rc) {
      c->desync = 1; /* the deltas that follow cannot apply either */
      return;
    }
    c->have_state = 1;
    c->desync = 0;
  } else {
    if (c->desync) return; /* already reported; a keyframe repairs it */
    rc = apply_delta(c, f);
    if (rc) {
      if (rc == TS_EPROTOCOL) {
        if (!c->have_state)
          tc__report(c, TS_EPROTOCOL, "delta frame %llu arrived before any keyframe",
                 (unsigned long long)f->seq);
        else
          tc__report(c, TS_EPROTOCOL,
                 "delta frame %llu (baseline %llu, %u vertices, quantum %g) does not apply to "
                 "frame %llu (%u vertices, quantum %g)",
                 (unsigned long long)f->seq, (unsigned long long)f->baseline_seq,
                 f->vertex_count, (double)f->quantum, (unsigned long long)c->last_seq, c->n,
                 c->quantum);
      }
      c->desync = 1;
      return;
    }
  }
  c->last_seq = f->seq;
  c->quantum = f->quantum;
  for (uint32_t i = 0; i < c->n; i++)
    for (int a = 0; a < 3; a++) c->pos[i][a] = (double)c->q[i][a] * c->quantum;
  if (take_tools(c, f)) {
    /* out of memory: the vertex arrays may have moved under c->frame, so
     * it is not shown (tc_last_frame NULL) until the next keyframe */
    c->desync = 1;
    return;
  }

  tc_frame *o = &c->frame;
  o->session = f->session_id;
  o->seq = f->seq;
  o->baseline_seq = f->keyframe ? 0 : f->baseline_seq;
  o->sim_time = f->sim_time;
  o->keyframe = f->keyframe ? 1 : 0;
  o->vertex_count = c->n;
  o->quantum = c->quantum;
  o->q = (const int32_t(*)[3])c->q;
  o->positions = (const double(*)[3])c->pos;
  o->n_triangles = c->n_tris;
  o->triangles = c->tris;
  o->n_layers = c->n_layers;
  o->layer_triangle_counts = c->layer_counts;
  o->layer_names = (const char *const *)c->layer_names;
  o->n_tools = (uint32_t)f->n_tools;
  o->tools = c->tools;
  o->flags = f->flags;
  o->bytes = bytes;
  if (c->frame_cb) c->frame_cb(c->frame_ud, o);
}
