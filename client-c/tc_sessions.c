/*
 * tc_sessions.c: libtissueclient's session requests (tissueclient.h): create
 * (a built-in tissue or an uploaded mesh with its layers), the session's
 * tokens, refine, reset, end, join, poses, the session list and ping. Each
 * builds its Envelope and waits for its reply through tc__request.
 */
#include "tc_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"

/* Sends a CreateSession and reads its SessionCreated (counts may be NULL). */
static int create_session(tc_client *c, Tissued__V1__CreateSession *m, uint32_t *session_id,
                          uint32_t *vertex_count, uint32_t *triangle_count) {
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  m->progress = c->create_cb != NULL; /* its reports: handle_create_progress */
  env.create_session = m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, &r);
  if (rc) return rc;
  if (session_id) *session_id = r->session_created->session_id;
  if (vertex_count) *vertex_count = r->session_created->vertex_count;
  if (triangle_count) *triangle_count = r->session_created->triangle_count;
  const Tissued__V1__SessionCreated *sc = r->session_created;
  memset(&c->tokens, 0, sizeof c->tokens);
  snprintf(c->tokens.observer, sizeof c->tokens.observer, "%s",
           sc->observer_token ? sc->observer_token : "");
  for (size_t i = 0; i < sc->n_controller_tokens && i < TC_MAX_TOOL_TOKENS; i++)
    snprintf(c->tokens.controller[i], sizeof c->tokens.controller[i], "%s",
             sc->controller_tokens[i] ? sc->controller_tokens[i] : "");
  c->tokens.n_controller = (uint32_t)(sc->n_controller_tokens < TC_MAX_TOOL_TOKENS
                                          ? sc->n_controller_tokens
                                          : TC_MAX_TOOL_TOKENS);
  memset(&c->adjust, 0, sizeof c->adjust);
  c->adjust.moved_vertices = sc->moved_vertices;
  c->adjust.max_move = sc->max_move;
  c->adjust.thinned_vertices = sc->thinned_vertices;
  c->adjust.min_depth_fraction = sc->min_depth_fraction;
  snprintf(c->adjust.warning, sizeof c->adjust.warning, "%s", sc->warning ? sc->warning : "");
  c->step_load = sc->step_load > 0 && isfinite(sc->step_load) ? sc->step_load : 0;
  c->have_tokens = 1;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_session_adjust(const tc_client *c, tc_mesh_adjust *out) {
  if (!c->have_tokens) return 0;
  *out = c->adjust;
  return 1;
}

double tc_session_step_load(const tc_client *c) { return c->have_tokens ? c->step_load : 0; }

int tc_session_tokens(const tc_client *c, tc_tokens *out) {
  if (!c->have_tokens) return 0;
  *out = c->tokens;
  return 1;
}

int tc_create_session(tc_client *c, const char *builtin, uint32_t *session_id,
                      uint32_t *vertex_count, uint32_t *triangle_count) {
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = (char *)(builtin ? builtin : "stomach-patch");
  return create_session(c, &m, session_id, vertex_count, triangle_count);
}

int tc_create_session_solver(tc_client *c, const char *builtin, int solver,
                             uint32_t *session_id, uint32_t *vertex_count,
                             uint32_t *triangle_count) {
  return tc_create_session_substeps(c, builtin, solver, 0, session_id, vertex_count,
                                    triangle_count);
}

int tc_create_session_substeps(tc_client *c, const char *builtin, int solver, uint32_t substeps,
                               uint32_t *session_id, uint32_t *vertex_count,
                               uint32_t *triangle_count) {
  const tc_create_params p = {.builtin = builtin, .solver = solver, .substeps = substeps};
  return tc_create_session_ex(c, &p, session_id, vertex_count, triangle_count);
}

/* The LayerSpecs of layers[0..n) (n <= TC_MAX_LAYER_SPECS) into specs, ptrs
 * and fibres: a zero fibre is left out, so that the server keeps the
 * layer's default direction. */
#define TC_MAX_LAYER_SPECS 64
static void layer_specs(const tc_layer *layers, size_t n, Tissued__V1__LayerSpec *specs,
                        Tissued__V1__LayerSpec **ptrs, Tissued__V1__Vec3 *fibres) {
  for (size_t i = 0; i < n; i++) {
    tissued__v1__layer_spec__init(&specs[i]);
    specs[i].name = (char *)(layers[i].name ? layers[i].name : "");
    specs[i].thickness = (float)layers[i].thickness;
    specs[i].material = (char *)(layers[i].material ? layers[i].material : "");
    if (layers[i].fibre[0] != 0 || layers[i].fibre[1] != 0 || layers[i].fibre[2] != 0) {
      tissued__v1__vec3__init(&fibres[i]);
      fibres[i].x = (float)layers[i].fibre[0];
      fibres[i].y = (float)layers[i].fibre[1];
      fibres[i].z = (float)layers[i].fibre[2];
      specs[i].fibre_direction = &fibres[i];
    }
    ptrs[i] = &specs[i];
  }
}

int tc_create_session_ex(tc_client *c, const tc_create_params *p, uint32_t *session_id,
                         uint32_t *vertex_count, uint32_t *triangle_count) {
  if (!p) return tc__fail(c, TS_EINVAL, "no session parameters");
  const int solver = p->solver;
  if (solver != TC_SOLVER_DEFAULT && solver != TC_SOLVER_MASS_SPRING && solver != TC_SOLVER_XPBD &&
      solver != TC_SOLVER_QUASI_STATIC)
    return tc__fail(c, TS_EINVAL, "solver must be TC_SOLVER_DEFAULT, _MASS_SPRING, _XPBD or _QUASI_STATIC");
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = (char *)(p->builtin ? p->builtin : "stomach-patch");
  m.solver = (Tissued__V1__Solver)solver;
  m.substeps = p->substeps;
  /* a float on the wire; the server checks the range (a NaN too) */
  m.tool_stiffness = (float)p->tool_stiffness;
  m.self_contact = p->self_contact != 0;
  if (p->n_layers > TC_MAX_LAYER_SPECS || (p->n_layers && !p->layers))
    return tc__fail(c, TS_EINVAL, "bad layer list");
  Tissued__V1__LayerSpec specs[TC_MAX_LAYER_SPECS];
  Tissued__V1__LayerSpec *ptrs[TC_MAX_LAYER_SPECS];
  Tissued__V1__Vec3 fibres[TC_MAX_LAYER_SPECS];
  layer_specs(p->layers, p->n_layers, specs, ptrs, fibres);
  m.n_layers = p->n_layers;
  m.layers = p->n_layers ? ptrs : NULL;
  m.name = (char *)(p->name ? p->name : "");
  return create_session(c, &m, session_id, vertex_count, triangle_count);
}

/* ResetSession / EndSession share one shape: a session id, answered by Ack. */
static int session_control(tc_client *c, uint32_t session_id, int end) {
  Tissued__V1__ResetSession reset = TISSUED__V1__RESET_SESSION__INIT;
  Tissued__V1__EndSession endm = TISSUED__V1__END_SESSION__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  if (end) {
    endm.session_id = session_id;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_END_SESSION;
    env.end_session = &endm;
  } else {
    reset.session_id = session_id;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_RESET_SESSION;
    env.reset_session = &reset;
  }
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_refine(tc_client *c, const tc_refine_params *p, tc_refined *out) {
  if (!p) return tc__fail(c, TS_EINVAL, "no refinement parameters");
  Tissued__V1__RefineRegion m = TISSUED__V1__REFINE_REGION__INIT;
  Tissued__V1__Vec3 o = TISSUED__V1__VEC3__INIT, d = TISSUED__V1__VEC3__INIT;
  m.session_id = p->session_id;
  m.method = p->method == TC_REFINE_LEB ? TISSUED__V1__REFINE_REGION__METHOD__LEB
                                        : TISSUED__V1__REFINE_REGION__METHOD__LOOP;
  m.n_triangles = p->triangles ? p->n_triangles : 0;
  m.triangles = (uint32_t *)p->triangles;
  if (!m.n_triangles) {
    o.x = p->ray_origin[0], o.y = p->ray_origin[1], o.z = p->ray_origin[2];
    d.x = p->ray_direction[0], d.y = p->ray_direction[1], d.z = p->ray_direction[2];
    m.ray_origin = &o;
    m.ray_direction = &d;
  }
  m.range = (float)p->range;
  m.max_edge = (float)p->max_edge;
  m.midpoint_rest = p->midpoint_rest != 0;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_REFINE_REGION;
  env.refine_region = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_REFINED, &r);
  if (rc) return rc;
  if (out) {
    const Tissued__V1__Refined *x = r->refined;
    out->vertex_count = x->vertex_count;
    out->triangle_count = x->triangle_count;
    out->selected_triangles = x->selected_triangles;
    out->new_vertices = x->new_vertices;
    out->step = x->step;
    out->millis = x->millis;
  }
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_reset_session(tc_client *c, uint32_t session_id) { return session_control(c, session_id, 0); }

int tc_end_session(tc_client *c, uint32_t session_id) { return session_control(c, session_id, 1); }

int tc_join_ex(tc_client *c, const tc_join_params *p, tc_joined *out) {
  if (!p || (p->role != TC_ROLE_OBSERVER && p->role != TC_ROLE_CONTROLLER))
    return tc__fail(c, TS_EINVAL, "role must be TC_ROLE_OBSERVER or TC_ROLE_CONTROLLER");
  if (!isfinite(p->radius) || p->radius < 0)
    return tc__fail(c, TS_ERANGE, "tool radius must be a finite number >= 0");
  if (p->tool_kind != TC_TOOL_SPHERE && p->tool_kind != TC_TOOL_CAPSULE &&
      p->tool_kind != TC_TOOL_JAWS && p->tool_kind != TC_TOOL_MESH)
    return tc__fail(c, TS_EINVAL,
                "tool_kind must be TC_TOOL_SPHERE, TC_TOOL_CAPSULE, TC_TOOL_JAWS or TC_TOOL_MESH");
  if (p->tool_kind == TC_TOOL_MESH && (!p->tool_mesh || !p->tool_mesh[0]))
    return tc__fail(c, TS_EINVAL, "a mesh tool needs tool_mesh, the name of one of the server's");
  if (!isfinite(p->length) || p->length < 0)
    return tc__fail(c, TS_ERANGE, "capsule or jaw length must be a finite number >= 0");
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.kind = p->tool_kind == TC_TOOL_CAPSULE ? TISSUED__V1__TOOL_SHAPE__KIND__CAPSULE
               : p->tool_kind == TC_TOOL_JAWS  ? TISSUED__V1__TOOL_SHAPE__KIND__JAWS
               : p->tool_kind == TC_TOOL_MESH  ? TISSUED__V1__TOOL_SHAPE__KIND__MESH
                                               : TISSUED__V1__TOOL_SHAPE__KIND__SPHERE;
  shape.radius = (float)p->radius;
  shape.length = p->tool_kind == TC_TOOL_SPHERE ? 0 : (float)p->length;
  shape.mesh = (char *)(p->tool_kind == TC_TOOL_MESH ? p->tool_mesh : "");
  Tissued__V1__Friction fr = TISSUED__V1__FRICTION__INIT;
  if (p->friction) { /* the server validates the pair (TS_EINVAL) */
    fr.mu_static = (float)p->mu_static;
    fr.mu_kinetic = (float)p->mu_kinetic;
    shape.friction = &fr;
  }
  Tissued__V1__JoinSession m = TISSUED__V1__JOIN_SESSION__INIT;
  m.session_id = p->session_id;
  m.role = p->role == TC_ROLE_CONTROLLER ? TISSUED__V1__ROLE__ROLE_CONTROLLER
                                         : TISSUED__V1__ROLE__ROLE_OBSERVER;
  m.tool_id = p->tool_id;
  m.tool = p->role == TC_ROLE_CONTROLLER ? &shape : NULL;
  m.frame_rate = p->frame_rate;
  m.force_rate = p->force_rate;
  m.token = (char *)(p->token ? p->token : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  env.join_session = &m;
  /* a new session's frames start with a keyframe */
  c->have_state = 0;
  c->desync = 0;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_JOINED, &r);
  if (rc) return rc;
  c->have_force = 0;
  if (out) {
    const Tissued__V1__Joined *j = r->joined;
    out->session_id = j->session_id;
    out->role = j->role == TISSUED__V1__ROLE__ROLE_CONTROLLER ? TC_ROLE_CONTROLLER
                                                             : TC_ROLE_OBSERVER;
    out->tool_id = j->tool_id;
    out->dt = j->dt;
    out->frame_rate = j->frame_rate;
    out->vertex_count = j->vertex_count;
    out->force_rate = j->force_rate;
  }
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_join(tc_client *c, uint32_t session_id, int role, uint32_t tool_id, double radius,
            uint32_t *assigned_tool_id) {
  tc_join_params p = {.session_id = session_id, .role = role, .tool_id = tool_id,
                      .radius = radius};
  tc_joined j = {0};
  int rc = tc_join_ex(c, &p, &j);
  if (rc == 0 && assigned_tool_id) *assigned_tool_id = j.tool_id;
  return rc;
}

int tc_send_pose(tc_client *c, uint32_t tool_id, const double pos[3], const double quat[4],
                 double jaw) {
  Tissued__V1__Vec3 p = TISSUED__V1__VEC3__INIT;
  p.x = (float)pos[0];
  p.y = (float)pos[1];
  p.z = (float)pos[2];
  Tissued__V1__Quat q = TISSUED__V1__QUAT__INIT;
  q.w = (float)(quat ? quat[0] : 1);
  q.x = (float)(quat ? quat[1] : 0);
  q.y = (float)(quat ? quat[2] : 0);
  q.z = (float)(quat ? quat[3] : 0);
  Tissued__V1__ToolPose m = TISSUED__V1__TOOL_POSE__INIT;
  m.tool_id = tool_id;
  m.seq = c->pose_seq + 1;
  m.client_time_us = tc_now_us();
  m.position = &p;
  m.orientation = &q;
  m.jaw = (float)jaw;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = ++c->next_rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_POSE;
  env.tool_pose = &m;
  int rc = tc__send_env(c, &env);
  if (rc == 0) c->pose_seq = m.seq;
  return rc;
}

int tc_list_sessions(tc_client *c, tc_session_info **out, size_t *n) {
  *out = NULL;
  *n = 0;
  Tissued__V1__ListSessions m = TISSUED__V1__LIST_SESSIONS__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_SESSIONS;
  env.list_sessions = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_SESSION_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__SessionList *l = r->session_list;
  tc_session_info *v = calloc(l->n_sessions ? l->n_sessions : 1, sizeof *v);
  if (!v) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return tc__fail(c, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < l->n_sessions; i++) {
    const Tissued__V1__SessionInfo *s = l->sessions[i];
    v[i].session_id = s->session_id;
    snprintf(v[i].name, sizeof v[i].name, "%s", s->name ? s->name : "");
    snprintf(v[i].tissue, sizeof v[i].tissue, "%s", s->tissue ? s->tissue : "");
    v[i].solver = s->solver;
    v[i].clients = s->clients;
    v[i].vertex_count = s->vertex_count;
    v[i].tool_stiffness = s->tool_stiffness;
    v[i].self_contact = s->self_contact;
    v[i].self_contacts = s->self_contacts;
    v[i].self_contact_off = (int)s->self_contact_off;
    v[i].self_contact_surface_nodes = s->self_contact_surface_nodes;
    v[i].asleep = s->asleep;
    v[i].slow_lane = s->slow_lane;
    v[i].step_load = s->step_load;
    v[i].learned = s->learned;
    v[i].samples = s->samples;
    v[i].model_answers = s->model_answers;
  }
  *out = v;
  *n = l->n_sessions;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_ping(tc_client *c, uint64_t *rtt_us) {
  Tissued__V1__Ping m = TISSUED__V1__PING__INIT;
  uint64_t t0 = tc_now_us();
  m.client_time_us = t0;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_PING;
  env.ping = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_PONG, &r);
  if (rc) return rc;
  int ok = r->pong->client_time_us == t0;
  tissued__v1__envelope__free_unpacked(r, NULL);
  if (!ok) return tc__fail(c, TS_EPROTOCOL, "Pong does not echo the Ping's client time");
  if (rtt_us) *rtt_us = tc_now_us() - t0;
  return 0;
}

/* ---- mesh upload ------------------------------------------------------------------ */

int tc_create_session_mesh(tc_client *c, int format, const void *bytes, size_t len, double scale,
                           const tc_layer *layers, size_t n_layers, const char *name,
                           uint32_t *session_id, uint32_t *vertex_count,
                           uint32_t *triangle_count) {
  if (format != TC_MESH_OBJ && format != TC_MESH_STL && format != TC_MESH_PLY)
    return tc__fail(c, TS_EINVAL, "mesh format must be TC_MESH_OBJ, TC_MESH_STL or TC_MESH_PLY");
  if (!bytes && len) return tc__fail(c, TS_EINVAL, "no mesh bytes");
  if (n_layers > TC_MAX_LAYER_SPECS || (n_layers && !layers))
    return tc__fail(c, TS_EINVAL, "bad layer list");
  /* NaN and out-of-range scales and thicknesses go to the server as they
   * are: it is the one that decides, and says why */
  Tissued__V1__MeshUpload up = TISSUED__V1__MESH_UPLOAD__INIT;
  up.format = (Tissued__V1__MeshUpload__Format)format;
  up.data.data = (uint8_t *)bytes;
  up.data.len = len;
  up.scale = (float)scale;
  Tissued__V1__LayerSpec specs[TC_MAX_LAYER_SPECS];
  Tissued__V1__LayerSpec *ptrs[TC_MAX_LAYER_SPECS];
  Tissued__V1__Vec3 fibres[TC_MAX_LAYER_SPECS];
  layer_specs(layers, n_layers, specs, ptrs, fibres);
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_MESH;
  m.mesh = &up;
  m.n_layers = n_layers;
  m.layers = n_layers ? ptrs : NULL;
  m.name = (char *)(name ? name : "");
  return create_session(c, &m, session_id, vertex_count, triangle_count);
}
