/*
 * dispatch.c: the protocol state machine of one client connection: decode an
 * Envelope, validate it, act, reply. Every failure is answered with an Error
 * from the single table; a client that keeps sending bad messages is closed.
 * Loop thread only; nothing here can reach another session's state.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "core/ts_error.h"
#include "core/ts_mesh_io.h"
#include "force.h"
#include "handover.h"
#include "log.h"
#include "models.h"
#include "physics.h"
#include "refine.h"
#include "create.h"
#include "requests.h"
#include "tissue_delete.h"
#include "tissue_list.h"
#include "server.h"
#include "session_self.h"
#include "shortcut.h"
#include "tissue.pb-c.h"
#include "training.h"

#define TS_PROTOCOL_VERSION 1
#define TS_MAX_STRIKES 8

typedef Tissued__V1__Envelope Envelope;

static void strike(ts_conn *c) {
  c->server->bad_messages++;
  if (++c->strikes > TS_MAX_STRIKES) {
    ts_log_warn("closing %s: too many bad messages", c->peer);
    c->ops->close(c, "too many bad messages");
  }
}

void ts_conn_opened(ts_conn *c) {
  ts_server *s = c->server;
  c->prev_conn = NULL;
  c->next_conn = s->conns;
  if (s->conns) s->conns->prev_conn = c;
  s->conns = c;
  c->server->n_conns++;
  c->frame_interval_us = 1000000u / (unsigned)c->server->cfg.frame_rate;
  c->key_index = -1;
  ts_log_debug("connection %llu from %s", (unsigned long long)c->id, c->peer);
}

void ts_conn_closed(ts_conn *c) {
  ts_server *s = c->server;
  if (c->session) ts_session_detach(c->session, c);
  if (c->prev_conn)
    c->prev_conn->next_conn = c->next_conn;
  else if (s->conns == c)
    s->conns = c->next_conn;
  if (c->next_conn) c->next_conn->prev_conn = c->prev_conn;
  c->next_conn = c->prev_conn = NULL;
  c->server->n_conns--;
  ts_log_debug("connection %llu from %s closed", (unsigned long long)c->id, c->peer);
}

static int finite3(const Tissued__V1__Vec3 *v) {
  return isfinite(v->x) && isfinite(v->y) && isfinite(v->z);
}

/* Refuses a request that needs the server key. 1 when refused. */
static int needs_key(ts_conn *c, uint64_t rid, const char *what) {
  if (c->key_index >= 0) return 0;
  c->server->auth_refused++;
  ts_send_error(c, rid, TS_EAUTH, "%s needs the server key in Hello.credentials", what);
  strike(c);
  return 1;
}

static void limit_refused(ts_server *s, int which) { s->limit_refused[which]++; }

static void on_hello(ts_conn *c, uint64_t rid, const Tissued__V1__Hello *h) {
  if (h->protocol_version != TS_PROTOCOL_VERSION) {
    ts_send_error(c, rid, TS_EVERSION, "protocol version %u is not supported (this server: %d)",
                  h->protocol_version, TS_PROTOCOL_VERSION);
    c->ops->close(c, "unsupported protocol version");
    return;
  }
  c->hello_done = 1;
  /* A key or a session token; which one is found out here (keys) or at
   * JoinSession (tokens). Neither is ever logged. */
  const char *cred = h->credentials ? h->credentials : "";
  c->key_index = ts_auth_key_index(&c->server->keys, cred);
  if (c->key_index < 0 && strlen(cred) < sizeof c->cred)
    snprintf(c->cred, sizeof c->cred, "%s", cred);
  Tissued__V1__HelloReply r = TISSUED__V1__HELLO_REPLY__INIT;
  r.protocol_version = TS_PROTOCOL_VERSION;
  r.server_name = (char *)"tissued";
  r.client_id = c->id;
  char *mesh_names[TS_TOOL_MESHES_MAX];
  const ts_tool_meshes *tm = &c->server->tool_meshes;
  for (uint32_t i = 0; i < tm->n; i++) mesh_names[i] = (char *)tm->name[i];
  r.n_tool_meshes = tm->n;
  r.tool_meshes = tm->n ? mesh_names : NULL;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY;
  env.hello_reply = &r;
  ts_send_envelope(c, &env);
  ts_log_info("hello from %s (%s, %s, %s)", c->peer,
              h->client_name && h->client_name[0] ? h->client_name : "unnamed",
              c->transport == TS_TRANSPORT_WS ? "websocket" : "tcp",
              c->key_index >= 0 ? "server key" : cred[0] ? "token" : "no credentials");
}

/* An uploaded mesh is checked for absurd input before any work: format,
 * size against max-mesh-bytes, scale (0 means 1). 0, or -1 with the Error
 * sent. */
static int check_mesh(ts_conn *c, uint64_t rid, const Tissued__V1__MeshUpload *u, int *format,
                      double *scale) {
  if (!u) {
    ts_send_error(c, rid, TS_EINVAL, "mesh upload without a mesh");
    return -1;
  }
  switch (u->format) {
  case TISSUED__V1__MESH_UPLOAD__FORMAT__OBJ: *format = TS_MESH_OBJ; break;
  case TISSUED__V1__MESH_UPLOAD__FORMAT__STL: *format = TS_MESH_STL; break;
  case TISSUED__V1__MESH_UPLOAD__FORMAT__PLY: *format = TS_MESH_PLY; break;
  default:
    ts_send_error(c, rid, TS_EUNSUPPORTED, "unknown mesh format %d (OBJ = 0, STL = 1, PLY = 2)",
                  (int)u->format);
    return -1;
  }
  if (u->data.len == 0) {
    ts_send_error(c, rid, TS_EMESH, "the uploaded mesh file is empty");
    return -1;
  }
  if (u->data.len > c->server->cfg.max_mesh_bytes) {
    limit_refused(c->server, TS_LIMIT_MESH);
    ts_send_error(c, rid, TS_ETOOBIG, "the mesh file is %zu bytes; this server accepts at most %zu",
                  u->data.len, c->server->cfg.max_mesh_bytes);
    return -1;
  }
  double sc = u->scale == 0 ? 1.0 : u->scale;
  if (!isfinite(sc)) {
    ts_send_error(c, rid, TS_ENAN, "mesh scale is NaN or infinite");
    return -1;
  }
  if (sc < 1e-6 || sc > 1e3) {
    ts_send_error(c, rid, TS_ERANGE,
                  "mesh scale %g must be in [1e-6, 1000] (file units to metres: 0.001 for "
                  "millimetres, 0.01 for centimetres, 1 for metres)",
                  sc);
    return -1;
  }
  *scale = sc;
  return 0;
}

static void on_create(ts_conn *c, uint64_t rid, const Tissued__V1__CreateSession *m) {
  ts_server *s = c->server;
  if (needs_key(c, rid, "creating a session")) return;
  const Tissued__V1__MeshUpload *mesh = NULL;
  int mesh_format = 0;
  double mesh_scale = 1;
  if (m->tissue_case == TISSUED__V1__CREATE_SESSION__TISSUE_MESH) {
    if (check_mesh(c, rid, m->mesh, &mesh_format, &mesh_scale)) return;
    mesh = m->mesh;
    if (m->name && strcmp(m->name, TS_BUILTIN_TISSUE) == 0) {
      ts_send_error(c, rid, TS_EINVAL, "'" TS_BUILTIN_TISSUE "' is the built-in tissue; name the mesh otherwise");
      return;
    }
  }
  const char *builtin = m->tissue_case == TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN
                            ? m->builtin
                            : TS_BUILTIN_TISSUE;
  if (!builtin[0]) builtin = TS_BUILTIN_TISSUE;
  /* any other name is a stored tissue (an earlier upload), rebuilt from its
   * stored mesh and layers */
  int stored = !mesh && strcmp(builtin, TS_BUILTIN_TISSUE) != 0;
  if (stored && strlen(builtin) > 63) {
    ts_send_error(c, rid, TS_ENOTISSUE, "no tissue '%.64s...' (names are at most 63 bytes)",
                  builtin);
    return;
  }
  if (stored && m->n_layers > 0) {
    ts_send_error(c, rid, TS_EINVAL,
                  "stored tissue '%s' keeps the layers it was uploaded with; upload the mesh "
                  "again to change them",
                  builtin);
    return;
  }
  if (m->solver != TISSUED__V1__SOLVER__SOLVER_DEFAULT &&
      m->solver != TISSUED__V1__SOLVER__SOLVER_MASS_SPRING &&
      m->solver != TISSUED__V1__SOLVER__SOLVER_XPBD &&
      m->solver != TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC) {
    ts_send_error(c, rid, TS_EUNSUPPORTED, "solver %d is not available yet", (int)m->solver);
    return;
  }
  /* XPBD is unconditionally stable: its sessions may step once per frame */
  const int xpbd = m->solver == TISSUED__V1__SOLVER__SOLVER_XPBD;
  double dt = m->dt == 0 ? s->cfg.dt : m->dt;
  /* (a float on the wire: 1/30 arrives as 0.033333335) */
  if (!isfinite(dt) || dt < 1e-5 || dt > (xpbd ? TS_XPBD_MAX_DT * (1 + 1e-6) : 0.01)) {
    ts_send_error(c, rid, TS_ERANGE, xpbd ? "dt must be in [1e-5, 1/30] s for an XPBD session"
                                          : "dt must be in [1e-5, 0.01] s (up to 1/30 s with "
                                            "the XPBD solver)");
    return;
  }
  /* a mass-spring session's substeps: a cap, paid for by inertia scaling */
  const int mass_spring = m->solver == TISSUED__V1__SOLVER__SOLVER_DEFAULT ||
                          m->solver == TISSUED__V1__SOLVER__SOLVER_MASS_SPRING;
  if (!xpbd && m->iterations) {
    ts_send_error(c, rid, TS_EINVAL, "iterations apply to XPBD sessions only");
    return;
  }
  if (!xpbd && !mass_spring && m->substeps) {
    ts_send_error(c, rid, TS_EINVAL, "substeps apply to XPBD and mass-spring sessions only");
    return;
  }
  if (mass_spring && m->substeps > TS_MS_MAX_SUBSTEPS) {
    ts_send_error(c, rid, TS_EINVAL,
                  "substeps of a mass-spring session must be in [1, %d] (at most that many per "
                  "step, the inertia scaled to stay stable; 0: physical masses)",
                  TS_MS_MAX_SUBSTEPS);
    return;
  }
  if (m->substeps > TS_XPBD_MAX_SUBSTEPS || m->iterations > TS_XPBD_MAX_ITERATIONS) {
    ts_send_error(c, rid, TS_ERANGE,
                  "substeps must be in [1, %d] and iterations in [1, %d] (0: automatic)",
                  TS_XPBD_MAX_SUBSTEPS, TS_XPBD_MAX_ITERATIONS);
    return;
  }
  /* tool against tool: a wall the controllers' devices can render */
  const double tool_k = m->tool_stiffness == 0 ? s->cfg.tool_stiffness : m->tool_stiffness;
  if (ts_tool_contact_stiffness_check(tool_k) || tool_k == 0) {
    ts_send_error(c, rid, TS_ERANGE,
                  "tool_stiffness must be in [%g, %g] N/m (%g to %g N/mm; 0: the server's "
                  "default, %g N/m): the wall two instruments feel, hardly harder than tissue "
                  "below, and beyond what a desk haptic device renders stably above",
                  TS_TOOL_CONTACT_STIFFNESS_MIN, TS_TOOL_CONTACT_STIFFNESS_MAX,
                  TS_TOOL_CONTACT_STIFFNESS_MIN / 1000, TS_TOOL_CONTACT_STIFFNESS_MAX / 1000,
                  s->cfg.tool_stiffness);
    return;
  }
  if (m->name && strlen(m->name) > 63) {
    ts_send_error(c, rid, TS_ERANGE, "session name longer than 63 bytes");
    return;
  }
  /* a session's name is how clients (and a proxy routing by name) find it */
  for (ts_session *o = s->sessions; m->name && m->name[0] && o; o = o->next) {
    if (!o->ending && strcmp(o->name, m->name) == 0) {
      ts_send_error(c, rid, TS_EEXISTS, "a session named '%s' exists (session %u)", m->name,
                    o->id);
      return;
    }
  }
  if ((int)(s->n_sessions + s->pending_creates) >= s->cfg.max_sessions) {
    limit_refused(s, TS_LIMIT_SESSIONS);
    ts_send_error(c, rid, TS_EFULL, "the server hosts its maximum of %d sessions",
                  s->cfg.max_sessions);
    return;
  }
  if ((int)ts_server_sessions_of_key(s, c->key_index) >= s->cfg.max_sessions_per_key) {
    limit_refused(s, TS_LIMIT_SESSIONS_KEY);
    ts_send_error(c, rid, TS_EFULL,
                  "this server key has created its maximum of %d live sessions (end one "
                  "first: EndSession, e.g. tissuectl end --session N)",
                  s->cfg.max_sessions_per_key);
    return;
  }
  ts_patch_def def = ts_default_patch_def();
  def.resolution = (uint32_t)s->cfg.patch_resolution;
  char material[TS_MAX_LAYERS][64];
  memset(material, 0, sizeof material);
  if (m->n_layers > 0) {
    if (m->n_layers > TS_MAX_LAYERS) {
      ts_send_error(c, rid, TS_ERANGE, "at most %d layers", TS_MAX_LAYERS);
      return;
    }
    ts_patch_def base = def;
    def.n_layers = (uint32_t)m->n_layers;
    for (size_t i = 0; i < m->n_layers; i++) {
      const Tissued__V1__LayerSpec *l = m->layers[i];
      ts_layer *d = &def.layers[i];
      *d = base.layers[i < base.n_layers ? i : base.n_layers - 1];
      if (l->name && l->name[0]) {
        if (strlen(l->name) >= TS_NAME_MAX) {
          ts_send_error(c, rid, TS_ERANGE, "layer name longer than %d bytes", TS_NAME_MAX - 1);
          return;
        }
        snprintf(d->name, sizeof d->name, "%s", l->name);
      }
      if (l->thickness != 0) {
        if (!isfinite(l->thickness) || l->thickness < 1e-4 || l->thickness > 0.05) {
          ts_send_error(c, rid, TS_ERANGE, "layer %zu thickness must be in [0.1, 50] mm", i);
          return;
        }
        d->thickness = l->thickness;
      }
      if (l->fibre_direction) {
        const Tissued__V1__Vec3 *f = l->fibre_direction;
        if (!finite3(f) || (f->x == 0 && f->y == 0 && f->z == 0)) {
          ts_send_error(c, rid, TS_EINVAL,
                        "layer %zu fibre_direction must be a finite, non-zero vector", i);
          return;
        }
        d->fibre[0] = f->x;
        d->fibre[1] = f->y;
        d->fibre[2] = f->z;
      }
      if (l->material && l->material[0]) {
        if (strlen(l->material) > 63) {
          ts_send_error(c, rid, TS_ERANGE, "material name longer than 63 bytes");
          return;
        }
        snprintf(material[i], sizeof material[i], "%s", l->material);
      }
    }
  }
  char name[64];
  if (m->name && m->name[0])
    snprintf(name, sizeof name, "%s", m->name);
  else
    snprintf(name, sizeof name, "session-%u", s->next_session_id + s->pending_creates);
  ts_solver_opts sv = {m->solver == TISSUED__V1__SOLVER__SOLVER_DEFAULT
                           ? TISSUED__V1__SOLVER__SOLVER_MASS_SPRING
                           : (int)m->solver,
                       m->substeps, m->iterations, tool_k,
                       /* 1: asked (refused over the limit); 2: the daemon's
                        * --self-contact only (off over the limit) */
                       m->self_contact ? 1 : s->cfg.self_contact ? 2 : 0};
  if (mesh) {
    ts_log_info("%s uploads a %zu-byte mesh for a session '%s' (%u layers, scale %g, dt %g s)",
                c->peer, mesh->data.len, name, def.n_layers, mesh_scale, dt);
    ts_request_create_mesh_session(c, rid, name, m->name ? m->name : "", mesh_format,
                                   mesh->data.data, mesh->data.len, mesh_scale, &def, material,
                                   dt, &sv, m->progress);
  } else if (stored) {
    ts_log_info("%s asks for a session '%s' of stored tissue '%s' (dt %g s)", c->peer, name,
                builtin, dt);
    ts_request_create_stored_session(c, rid, name, builtin, dt, &sv, m->progress);
  } else {
    ts_log_info("%s asks for a session '%s' (%u layers, dt %g s)", c->peer, name, def.n_layers,
                dt);
    ts_request_create_session(c, rid, name, &def, material, dt, &sv, m->progress);
  }
}

/* May c join se in `role`? A server key opens every session in every role;
 * otherwise the token (JoinSession.token, else Hello.credentials) must be
 * se's observer token (observers only) or the controller token of a tool
 * (that tool, or watching). 0 with *tool set (0 = any the key may take), or
 * -1 with the Error sent. */
static int join_allowed(ts_conn *c, uint64_t rid, ts_session *se, int role, uint32_t want_tool,
                        const char *token, uint32_t *tool) {
  *tool = want_tool;
  if (c->key_index >= 0) return 0;
  const char *tok = token && token[0] ? token : c->cred;
  int is_observer = ts_auth_equal(tok, se->observer_token);
  int ctl = -1;
  for (int i = 0; i < TS_MAX_TOOLS; i++)
    if (ts_auth_equal(tok, se->controller_token[i]) && ctl < 0) ctl = i;
  const char *why = NULL;
  if (!tok[0])
    why = "joining needs a session token (JoinSession.token) or the server key";
  else if (!is_observer && ctl < 0)
    why = "the token does not open this session";
  else if (is_observer && role == TISSUED__V1__ROLE__ROLE_CONTROLLER)
    why = "an observer token cannot control a tool";
  else if (ctl >= 0 && role == TISSUED__V1__ROLE__ROLE_CONTROLLER && want_tool &&
           want_tool != (uint32_t)ctl + 1)
    why = "this controller token is for another tool";
  if (why) {
    c->server->auth_refused++;
    ts_send_error(c, rid, TS_EAUTH, "session %u: %s", se->id, why);
    strike(c);
    return -1;
  }
  if (ctl >= 0 && role == TISSUED__V1__ROLE__ROLE_CONTROLLER) *tool = (uint32_t)ctl + 1;
  return 0;
}

static void on_join(ts_conn *c, uint64_t rid, const Tissued__V1__JoinSession *m) {
  ts_server *s = c->server;
  ts_session *se = ts_server_find_session(s, m->session_id);
  if (!se) {
    ts_send_error(c, rid, TS_ENOSESSION, "no session %u", m->session_id);
    return;
  }
  uint32_t want_tool = 0;
  if (join_allowed(c, rid, se, m->role, m->tool_id, m->token, &want_tool)) return;
  if ((int)se->n_clients >= s->cfg.max_clients_per_session && c->session != se) {
    limit_refused(s, TS_LIMIT_CLIENTS);
    ts_send_error(c, rid, TS_EFULL, "session %u has its maximum of %d clients", se->id,
                  s->cfg.max_clients_per_session);
    return;
  }
  uint32_t rate = m->frame_rate ? m->frame_rate : (uint32_t)s->cfg.frame_rate;
  if (rate < 1 || rate > 1000) {
    ts_send_error(c, rid, TS_ERANGE, "frame_rate must be in [1, 1000]");
    return;
  }
  if (m->force_rate > 100000) {
    ts_send_error(c, rid, TS_ERANGE, "force_rate must be at most 100000 (0: every physics step)");
    return;
  }
  double radius = 0.005, length = 0;
  double mu_s = TS_TOOL_MU_STATIC_DEFAULT, mu_k = TS_TOOL_MU_KINETIC_DEFAULT;
  int kind = 0;
  const ts_obb_tree *shape = NULL;
  uint32_t tool_id = 0;
  int role = m->role;
  if (role != TISSUED__V1__ROLE__ROLE_OBSERVER && role != TISSUED__V1__ROLE__ROLE_CONTROLLER) {
    ts_send_error(c, rid, TS_EINVAL, "unknown role %d", role);
    return;
  }
  if (role == TISSUED__V1__ROLE__ROLE_CONTROLLER) {
    if (m->tool) {
      if (m->tool->radius != 0) radius = m->tool->radius;
      length = m->tool->length;
      switch (m->tool->kind) {
      case TISSUED__V1__TOOL_SHAPE__KIND__SPHERE: kind = TS_TOOL_SPHERE; break;
      case TISSUED__V1__TOOL_SHAPE__KIND__CAPSULE: kind = TS_TOOL_CAPSULE; break;
      case TISSUED__V1__TOOL_SHAPE__KIND__JAWS: kind = TS_TOOL_JAWS; break;
      case TISSUED__V1__TOOL_SHAPE__KIND__MESH: {
        kind = TS_TOOL_MESH;
        const char *mn = m->tool->mesh ? m->tool->mesh : "";
        shape = ts_tool_meshes_find(&s->tool_meshes, mn);
        if (!shape) {
          char names[TS_TOOL_MESHES_MAX * (TS_TOOL_MESH_NAME + 2) + 80];
          ts_tool_meshes_names(&s->tool_meshes, names, sizeof names);
          ts_send_error(c, rid, TS_EINVAL, "no tool mesh '%.40s' (available: %s)", mn, names);
          return;
        }
        if (se->sim.shortcut) {
          ts_send_error(c, rid, TS_EUNSUPPORTED,
                        "mesh tools need a dynamic session (the mass-spring or XPBD solver)");
          return;
        }
        break;
      }
      default:
        ts_send_error(c, rid, TS_EUNSUPPORTED,
                      "unknown tool kind %d (sphere 0, capsule 1, jaws 2, mesh 3)",
                      (int)m->tool->kind);
        return;
      }
      if (kind == TS_TOOL_JAWS && se->sim.shortcut) {
        ts_send_error(c, rid, TS_EUNSUPPORTED,
                      "grasper jaws need a dynamic session (the mass-spring or XPBD solver)");
        return;
      }
      if (kind == TS_TOOL_JAWS && length != 0 && (length < 0.002 || length > 0.05)) {
        ts_send_error(c, rid, TS_ERANGE, "jaw length must be in [2, 50] mm (0: 10 mm)");
        return;
      }
      if (!isfinite(radius) || radius < 5e-4 || radius > 0.05 || !isfinite(length) ||
          length < 0 || length > 0.3) {
        ts_send_error(c, rid, TS_ERANGE, "tool radius must be in [0.5, 50] mm, length in [0, 300] mm");
        return;
      }
      /* friction: unset means a steel instrument on wet tissue (ts_tool.h) */
      if (m->tool->friction) {
        mu_s = m->tool->friction->mu_static;
        mu_k = m->tool->friction->mu_kinetic;
      }
      if (ts_tool_friction_valid(mu_s, mu_k)) {
        ts_send_error(c, rid, TS_EINVAL,
                      "tool friction must be finite with 0 <= mu_kinetic <= mu_static <= %g "
                      "(got mu_static %g, mu_kinetic %g)",
                      TS_TOOL_MU_MAX, mu_s, mu_k);
        return;
      }
    }
    int max_tools = s->cfg.max_tools < TS_MAX_TOOLS ? s->cfg.max_tools : TS_MAX_TOOLS;
    if (want_tool) {
      if (want_tool > (uint32_t)max_tools) {
        limit_refused(s, TS_LIMIT_TOOLS);
        ts_send_error(c, rid, TS_ETOOL, "tool ids are 1..%d", max_tools);
        return;
      }
      if (se->tool_owner[want_tool - 1] && se->tool_owner[want_tool - 1] != c) {
        ts_send_error(c, rid, TS_ETOOL, "tool %u is taken", want_tool);
        return;
      }
      tool_id = want_tool;
    } else {
      for (int i = 0; i < max_tools; i++) {
        if (!se->tool_owner[i] || se->tool_owner[i] == c) {
          tool_id = (uint32_t)i + 1;
          break;
        }
      }
      if (!tool_id) {
        limit_refused(s, TS_LIMIT_TOOLS);
        ts_send_error(c, rid, TS_ETOOL, "every tool of session %u is taken", se->id);
        return;
      }
    }
  }
  if (c->session) ts_session_detach(c->session, c);
  ts_session_attach(se, c);
  c->role = role;
  c->tool_id = tool_id;
  c->frame_interval_us = 1000000u / rate;
  if (tool_id) {
    se->tool_owner[tool_id - 1] = c;
    ts_session_set_tool_shape(se, tool_id, 1, kind, radius, length, shape);
    ts_session_set_tool_friction(se, tool_id, mu_s, mu_k);
    ts_session_set_force_every(se, tool_id, ts_force_every(m->force_rate, se->sim.dt));
  }
  if (tool_id)
    ts_log_info("%s joined session %u as controller of tool %u", c->peer, se->id, tool_id);
  else
    ts_log_info("%s joined session %u as observer", c->peer, se->id);
  Tissued__V1__Joined r = TISSUED__V1__JOINED__INIT;
  r.session_id = se->id;
  r.role = role;
  r.tool_id = tool_id;
  r.dt = (float)se->sim.dt;
  r.frame_rate = rate;
  r.vertex_count = se->topo->vertex_count;
  if (tool_id)
    r.force_rate = (uint32_t)(1.0 / (se->sim.dt * ts_force_every(m->force_rate, se->sim.dt)) + 0.5);
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_JOINED;
  env.joined = &r;
  ts_send_envelope(c, &env);
  ts_training_replay(se, c); /* the last training's progress, for the loss plot */
}

static void on_pose(ts_conn *c, uint64_t rid, const Tissued__V1__ToolPose *m) {
  if (!c->session) {
    ts_send_error(c, rid, TS_ENOTJOINED, "join a session before sending poses");
    return;
  }
  if (c->role != TISSUED__V1__ROLE__ROLE_CONTROLLER) {
    ts_send_error(c, rid, TS_EROLE, "observers cannot move tools");
    strike(c);
    return;
  }
  uint64_t now = ts_now_ms(c->server);
  if (now - c->pose_window_ms >= 1000) {
    c->pose_window_ms = now;
    c->poses_in_window = 0;
  }
  if (++c->poses_in_window > (uint32_t)c->server->cfg.max_pose_rate) {
    c->server->poses_dropped++;
    if (now - c->last_rate_error_ms >= 1000 || !c->last_rate_error_ms) {
      c->last_rate_error_ms = now;
      limit_refused(c->server, TS_LIMIT_POSE_RATE);
      ts_send_error(c, rid, TS_EFULL,
                    "more than %d poses in a second: poses are dropped until the next second",
                    c->server->cfg.max_pose_rate);
    }
    return;
  }
  if (m->tool_id && m->tool_id != c->tool_id) {
    ts_send_error(c, rid, TS_ETOOL, "this client controls tool %u, not %u", c->tool_id,
                  m->tool_id);
    return;
  }
  if (!m->position) {
    ts_send_error(c, rid, TS_EINVAL, "pose without a position");
    strike(c);
    return;
  }
  double q[4] = {1, 0, 0, 0};
  if (!finite3(m->position) || !isfinite(m->jaw) ||
      (m->orientation && !(isfinite(m->orientation->w) && isfinite(m->orientation->x) &&
                           isfinite(m->orientation->y) && isfinite(m->orientation->z)))) {
    ts_send_error(c, rid, TS_ENAN, "pose has a NaN or infinite number");
    strike(c);
    return;
  }
  if (m->orientation) {
    q[0] = m->orientation->w;
    q[1] = m->orientation->x;
    q[2] = m->orientation->y;
    q[3] = m->orientation->z;
    double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    if (fabs(n - 1.0) > 1e-3) {
      ts_send_error(c, rid, TS_EQUAT, "orientation quaternion has norm %g, not 1", n);
      strike(c);
      return;
    }
    for (int i = 0; i < 4; i++) q[i] /= n;
  }
  double p[3] = {m->position->x, m->position->y, m->position->z};
  if (fabs(p[0]) > 10 || fabs(p[1]) > 10 || fabs(p[2]) > 10 || m->jaw < 0 || m->jaw > 1) {
    ts_send_error(c, rid, TS_ERANGE, "position must be within 10 m, jaw in [0, 1]");
    strike(c);
    return;
  }
  ts_session_post_pose(c->session, c->tool_id, p, q, m->jaw, m->seq, m->client_time_us);
}

static void on_list(ts_conn *c, uint64_t rid) {
  ts_server *s = c->server;
  uint32_t n = 0;
  for (ts_session *se = s->sessions; se; se = se->next)
    if (!se->ending) n++;
  Tissued__V1__SessionInfo *infos = calloc(n ? n : 1, sizeof *infos);
  Tissued__V1__SessionInfo **ptrs = calloc(n ? n : 1, sizeof *ptrs);
  if (!infos || !ptrs) {
    free(infos);
    free(ptrs);
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return;
  }
  uint32_t i = 0;
  for (ts_session *se = s->sessions; se && i < n; se = se->next) {
    if (se->ending) continue;
    tissued__v1__session_info__init(&infos[i]);
    infos[i].session_id = se->id;
    infos[i].name = se->name;
    infos[i].tissue = se->tissue_name;
    infos[i].solver = se->solver;
    infos[i].clients = se->n_clients;
    infos[i].vertex_count = se->topo->vertex_count;
    infos[i].tool_stiffness = (float)se->sim.tool_contact.stiffness;
    /* sim.self is set at creation, constant after (safe to read on the loop
     * thread); whether the pass runs for the current tissue comes with the
     * frames (ts_session_on_frame) */
    const int self_state = se->sim.self ? se->self_state : -1;
    infos[i].self_contact = self_state == TS_SELF_ON;
    infos[i].self_contacts = se->latest && self_state == TS_SELF_ON ? se->latest->self_contacts : 0;
    infos[i].self_contact_off =
        self_state == TS_SELF_OVER_LIMIT || se->self_refused
            ? TISSUED__V1__SESSION_INFO__SELF_CONTACT_OFF__OVER_LIMIT
        : self_state == TS_SELF_FAILED ? TISSUED__V1__SESSION_INFO__SELF_CONTACT_OFF__FAILED
                                       : TISSUED__V1__SESSION_INFO__SELF_CONTACT_OFF__NONE;
    infos[i].self_contact_surface_nodes = se->self_surface_nodes;
    infos[i].asleep = se->latest && se->latest->asleep; /* as of the newest frame */
    infos[i].slow_lane = s->physics && ts_physics_on_slow(s->physics, se);
    infos[i].step_load = se->latest ? se->latest->step_load : -1;
    if (se->sim.shortcut) {
      uv_mutex_lock(&se->mbox.lock);
      infos[i].learned = se->mbox.learned;
      infos[i].samples = se->mbox.samples;
      infos[i].model_answers = se->mbox.model_answers;
      infos[i].model_rejected = se->mbox.model_rejected;
      infos[i].qs_solves = se->mbox.qs_solves;
      infos[i].qs_unconverged = se->mbox.qs_unconverged;
      infos[i].qs_worst_residual = se->mbox.qs_worst_residual;
      uv_mutex_unlock(&se->mbox.lock);
    }
    ptrs[i] = &infos[i];
    i++;
  }
  Tissued__V1__SessionList r = TISSUED__V1__SESSION_LIST__INIT;
  r.n_sessions = i;
  r.sessions = ptrs;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_SESSION_LIST;
  env.session_list = &r;
  ts_send_envelope(c, &env);
  free(infos);
  free(ptrs);
}

static void on_leave(ts_conn *c, uint64_t rid) {
  if (c->session) ts_session_detach(c->session, c);
}

/* Session control needs a controller joined to that very session. */
static ts_session *controlled_session(ts_conn *c, uint64_t rid, uint32_t session_id) {
  if (!c->session || c->session->id != session_id) {
    ts_send_error(c, rid, TS_ENOTJOINED, "not joined to session %u", session_id);
    return NULL;
  }
  if (c->role != TISSUED__V1__ROLE__ROLE_CONTROLLER) {
    ts_send_error(c, rid, TS_EROLE, "only a controller may do this");
    return NULL;
  }
  return c->session;
}

/* Reset and end: a holder of the server key acts on any session by id,
 * joined or not, in any role (as RefineRegion, refine.c): an instructor
 * ends a class's session whose tools are all taken, where joining as a
 * controller to end it was refused (TS_ETOOL). A session token's holder:
 * a controller joined to that very session. */
static ts_session *session_for_control(ts_conn *c, uint64_t rid, uint32_t session_id) {
  if (c->key_index < 0) return controlled_session(c, rid, session_id);
  ts_session *se = ts_server_find_session(c->server, session_id);
  if (!se || se->ending) {
    ts_send_error(c, rid, TS_ENOSESSION, "no session %u", session_id);
    return NULL;
  }
  return se;
}

static void on_reset(ts_conn *c, uint64_t rid, const Tissued__V1__ResetSession *m) {
  ts_session *se = session_for_control(c, rid, m->session_id);
  if (!se) return;
  ts_session_request_reset(se);
  ts_log_info("session %u reset by %s", se->id, c->peer);
  ts_send_ack(c, rid, "reset");
}

static void on_end(ts_conn *c, uint64_t rid, const Tissued__V1__EndSession *m) {
  ts_session *se = session_for_control(c, rid, m->session_id);
  if (!se) return;
  ts_send_ack(c, rid, "end");
  ts_server_end_session(c->server, se,
                        c->key_index >= 0 ? "ended by a holder of the server key" : "ended by a controller");
}

/* TrainShortcut: a controller of a quasi-static session asks for training on
 * the samples so far; the physics copies them between two steps and
 * training.c takes it from there. */
static void on_train(ts_conn *c, uint64_t rid, const Tissued__V1__TrainShortcut *m) {
  ts_session *se = controlled_session(c, rid, m->session_id);
  if (!se) return;
  if (!se->sim.shortcut) {
    ts_send_error(c, rid, TS_EUNSUPPORTED,
                  "session %u is not quasi-static: only SOLVER_QUASI_STATIC sessions learn", se->id);
    return;
  }
  ts_learn_kind kind = TS_LEARN_METHOD;
  if (m->model && m->model[0] && ts_learn_kind_parse(m->model, &kind)) {
    ts_send_error(c, rid, TS_EINVAL,
                  "model must be \"method\", \"rich\", \"spread\", \"spread2\" or \"spread2r\"");
    return;
  }
  if (se->training) {
    ts_send_error(c, rid, TS_EFULL, "session %u is training already", se->id);
    return;
  }
  se->training = 1;
  se->train_kind = kind;
  se->train_rid = rid;
  uv_mutex_lock(&se->mbox.lock);
  se->mbox.train_request = 1;
  uv_mutex_unlock(&se->mbox.lock);
  ts_send_ack(c, rid, "train");
}

/* UseShortcut: switch between the quasi-static solve and the model; with a
 * model_id, first install that stored model (models.c). */
static void on_use(ts_conn *c, uint64_t rid, const Tissued__V1__UseShortcut *m) {
  ts_session *se = controlled_session(c, rid, m->session_id);
  if (!se) return;
  if (!se->sim.shortcut) {
    ts_send_error(c, rid, TS_EUNSUPPORTED, "session %u is not quasi-static", se->id);
    return;
  }
  if (m->model_id != 0) {
    ts_models_use(c, rid, se, m->model_id, m->learned);
    return;
  }
  uv_mutex_lock(&se->mbox.lock);
  int trained = se->has_model;
  if (trained || !m->learned) se->mbox.use_learned = m->learned ? 1 : 0;
  uv_mutex_unlock(&se->mbox.lock);
  if (!trained && m->learned) {
    ts_send_error(c, rid, TS_EINVAL, "session %u has no trained model yet (TrainShortcut)",
                  se->id);
    return;
  }
  ts_send_ack(c, rid, m->learned ? "learned" : "solve");
}

static void on_ping(ts_conn *c, uint64_t rid, const Tissued__V1__Ping *m) {
  Tissued__V1__Pong r = TISSUED__V1__PONG__INIT;
  r.client_time_us = m->client_time_us;
  r.server_time_us = uv_hrtime() / 1000;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_PONG;
  env.pong = &r;
  ts_send_envelope(c, &env);
}

void ts_dispatch_message(ts_conn *c, const uint8_t *msg, size_t len) {
  if (c->closing) return;
  ts_server *s = c->server;
  s->messages_in++;
  if (s->shutting_down) return;
  Envelope *env = tissued__v1__envelope__unpack(NULL, len, msg);
  if (!env) {
    ts_send_error(c, 0, TS_EDECODE, "message of %zu bytes does not decode as an Envelope", len);
    strike(c);
    return;
  }
  uint64_t rid = env->request_id;
  if (!c->hello_done && env->body_case != TISSUED__V1__ENVELOPE__BODY_HELLO) {
    ts_send_error(c, rid, TS_ENOHELLO, "the first message must be Hello");
    strike(c);
    tissued__v1__envelope__free_unpacked(env, NULL);
    return;
  }
  switch (env->body_case) {
  case TISSUED__V1__ENVELOPE__BODY_HELLO:
    if (c->hello_done)
      ts_send_error(c, rid, TS_EPROTOCOL, "Hello was already received");
    else
      on_hello(c, rid, env->hello);
    break;
  case TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION: on_create(c, rid, env->create_session); break;
  case TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION: on_join(c, rid, env->join_session); break;
  case TISSUED__V1__ENVELOPE__BODY_LEAVE_SESSION: on_leave(c, rid); break;
  case TISSUED__V1__ENVELOPE__BODY_TOOL_POSE: on_pose(c, rid, env->tool_pose); break;
  case TISSUED__V1__ENVELOPE__BODY_LIST_SESSIONS: on_list(c, rid); break;
  case TISSUED__V1__ENVELOPE__BODY_PING: on_ping(c, rid, env->ping); break;
  case TISSUED__V1__ENVELOPE__BODY_RESET_SESSION: on_reset(c, rid, env->reset_session); break;
  case TISSUED__V1__ENVELOPE__BODY_END_SESSION: on_end(c, rid, env->end_session); break;
  case TISSUED__V1__ENVELOPE__BODY_TRAIN_SHORTCUT: on_train(c, rid, env->train_shortcut); break;
  case TISSUED__V1__ENVELOPE__BODY_USE_SHORTCUT: on_use(c, rid, env->use_shortcut); break;
  case TISSUED__V1__ENVELOPE__BODY_HAND_OVER_TOOL: ts_handover_tool(c, rid, env->hand_over_tool); break;
  case TISSUED__V1__ENVELOPE__BODY_REFINE_REGION: ts_refine_request(c, rid, env->refine_region); break;
  case TISSUED__V1__ENVELOPE__BODY_LIST_MATERIALS:
    ts_request_list_materials(c, rid, env->list_materials->tissue);
    break;
  case TISSUED__V1__ENVELOPE__BODY_LIST_TISSUES:
    if (!needs_key(c, rid, "listing the stored tissues")) ts_request_list_tissues(c, rid);
    break;
  case TISSUED__V1__ENVELOPE__BODY_DELETE_TISSUE:
    if (!needs_key(c, rid, "deleting a stored tissue"))
      ts_request_delete_tissue(c, rid, env->delete_tissue);
    break;
  case TISSUED__V1__ENVELOPE__BODY_FIT_MATERIAL:
    if (!needs_key(c, rid, "fitting a material")) ts_request_fit_material(c, rid, env->fit_material);
    break;
  case TISSUED__V1__ENVELOPE__BODY_LIST_MODELS:
    if (!needs_key(c, rid, "listing models")) ts_models_list(c, rid, env->list_models->tissue);
    break;
  case TISSUED__V1__ENVELOPE__BODY_EXPORT_MODEL:
    if (!needs_key(c, rid, "exporting a model"))
      ts_models_export(c, rid, env->export_model->model_id);
    break;
  case TISSUED__V1__ENVELOPE__BODY_IMPORT_MODEL:
    if (!needs_key(c, rid, "importing a model"))
      ts_models_import(c, rid, env->import_model->document);
    break;
  case TISSUED__V1__ENVELOPE__BODY_DELETE_MODEL:
    if (!needs_key(c, rid, "deleting a model"))
      ts_models_delete(c, rid, env->delete_model->model_id);
    break;
  case TISSUED__V1__ENVELOPE__BODY__NOT_SET:
    ts_send_error(c, rid, TS_EPROTOCOL, "empty or unknown message body");
    strike(c);
    break;
  default:
    ts_send_error(c, rid, TS_EPROTOCOL, "a client may not send this message (body %d)",
                  (int)env->body_case);
    strike(c);
    break;
  }
  tissued__v1__envelope__free_unpacked(env, NULL);
}
