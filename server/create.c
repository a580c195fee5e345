/*
 * create.c: a session's creation (create.h) as three jobs in turn: the
 * storage worker reads what the tissue needs (its materials' stored fits, a
 * stored mesh); the builder thread builds it, the slow part (seconds for a
 * large upload, most of it in the springs' stable step); the storage worker
 * then stores an upload and loads a quasi-static session's stored model;
 * the loop starts the session and replies. A build never holds up SQLite
 * (a material list, a fit, a model save, a training run); only the
 * creation's short reads and writes queue there. Each job's done() runs on
 * the loop, which hands the job to the next thread or, on failure or at
 * shutdown, ends it with the reply.
 * The creation's stage is kept for its progress reports (create_progress.h).
 */
#include "create.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "create_progress.h"
#include "session_self.h"
#include "session_trial.h"
#include "core/ts_error.h"
#include "core/ts_mesh_io.h"
#include "core/ts_mesh_tissue.h"
#include "core/ts_refine.h"
#include "log.h"
#include "physics.h"
#include "server.h"
#include "shortcut.h"
#include "tissue.pb-c.h"
#include "tissue_catalog.h"
#include "ts_layer_spec.h"
#include "ts_storage.h"
#include "worker.h"

typedef Tissued__V1__Envelope Envelope;

/* Where the tissue of a new session comes from. */
enum { SRC_BUILTIN = 0, SRC_UPLOAD = 1, SRC_STORED = 2 };

typedef struct create_job {
  ts_job job;
  ts_server *server;
  uint64_t conn_id, rid;
  char name[64];
  ts_patch_def def;
  char material[TS_MAX_LAYERS][64];
  double dt;
  ts_solver_opts sv;          /* solver and its settings */
  int key_index;              /* the server key that asked (auth.h) */
  /* mesh tissues */
  int source;                 /* SRC_* */
  char tissue_name[64];       /* stored name ("" for an upload: from the hash) */
  int format;                 /* TS_MESH_* */
  uint8_t *data;              /* the uploaded file (owned) */
  size_t len;
  double scale;               /* file units to metres */
  size_t max_bytes;           /* limits, copied from the config */
  uint32_t max_tris;
  uint32_t max_verts;
  /* results */
  int rc;
  char err[512];
  ts_session *session;
  ts_refine_src *refine_src; /* what build_mesh_tissue keeps for refinement (refine.c) */
  /* what the extrusion changed so that the layers do not fold, for the
   * SessionCreated (mesh tissues; zero and "" otherwise) */
  uint32_t n_relaxed, n_thinned;
  double max_relaxed, min_depth_kept;
  char warning[400];
  int self_refused;          /* refused by --self-contact-max-nodes */
  int load_refused;          /* refused by --max-step-load */
  ts_trial trial;            /* the session's trial steps (session_trial.h) */
  char hash[65];             /* an upload's SHA-256 (hex) */
  uint32_t nv, nt;           /* an upload's imported surface */
  ts_create_track track;     /* its stage, for progress reports (loop: the list) */
} create_job;

/* A layer whose LayerSpec names a material takes the stored fits of that
 * name as its laws (tissue_catalog.h). */
static int resolve_materials(create_job *j, ts_storage *st) {
  return ts_catalog_resolve_materials(st, &j->def, j->material, j->err, sizeof j->err);
}

/* ---- tissues from meshes ---------------------------------------------------
 *
 * An uploaded or catalogued surface becomes a tissue as
 * core/ts_mesh_tissue.h says (placement, layers thinned where they would
 * fold, anchors, gravity and drag), the same function tissuetool and the
 * integration tests call; with no LayerSpec its layers are the default
 * stomach wall (mucosa 1.0, submucosa 1.5, muscularis 2.0 mm). */

static const char *format_name(int f) {
  return f == TS_MESH_STL ? "stl" : f == TS_MESH_PLY ? "ply" : "obj";
}

static void sha256_hex(const uint8_t *data, size_t len, char hex[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  hex[0] = 0;
  if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32) return;
  for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* Builder thread: TS_ESHUTDOWN (with j->err saying so) once the daemon is
 * stopping, 0 otherwise. A build checks it as it enters each stage: a
 * large upload builds for seconds (a 250,000-node one 10 s), and the
 * builder's queue is drained at shutdown (worker.h), so without it a stop
 * waited for every build asked for, past --shutdown-timeout, for sessions
 * that would never start. Within the springs and the step's preparation
 * the core looks at the same flag (ts_tissue.stop; ts_patch_create_stoppable,
 * ts_mesh_import_opts.stop). */
static int stop_asked(create_job *j) {
  if (!atomic_load(&j->server->stopping)) return 0;
  snprintf(j->err, sizeof j->err, "server is shutting down");
  return TS_ESHUTDOWN;
}

/* The mesh build's stages as the creation's (create_progress.h: the
 * springs' report covers the stability bounds too); a negative code stops
 * the build (ts_mesh_io.h). */
static int on_mesh_stage(void *ud, int stage) {
  create_job *j = ud;
  int p = TISSUED__V1__CREATE_PROGRESS__STAGE__SPRINGS;
  if (stage == TS_MESH_STAGE_READING) p = TISSUED__V1__CREATE_PROGRESS__STAGE__READING;
  if (stage == TS_MESH_STAGE_LAYERS) p = TISSUED__V1__CREATE_PROGRESS__STAGE__LAYERS;
  ts_create_track_set(&j->track, p);
  return stop_asked(j);
}

/* Imports the file and builds the tissue of j's layers. *nv and *nt get the
 * imported surface's counts. Returns 0 or a ts_errno with j->err set. */
static int build_mesh_tissue(create_job *j, ts_tissue **out, uint32_t *nv, uint32_t *nt) {
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = j->scale;
  o.max_bytes = j->max_bytes;
  o.max_tris = j->max_tris;
  o.max_verts = j->max_verts;
  o.on_stage = on_mesh_stage;
  o.stage_ud = j;
  o.stop = &j->server->stopping; /* and within the stability bounds */
  ts_mesh_tissue mt;
  int rc = ts_mesh_tissue_build(j->data, j->len, j->format, &o, j->def.layers, j->def.n_layers,
                                &mt, j->err, sizeof j->err);
  if (rc) return rc;
  *nv = mt.n_verts;
  *nt = mt.n_tris;
  /* the client hears of it too, in its SessionCreated (create_done) */
  j->n_relaxed = mt.e->n_relaxed;
  j->max_relaxed = mt.e->max_relaxed;
  j->n_thinned = mt.e->n_thinned;
  j->min_depth_kept = mt.e->min_depth_kept;
  if (mt.warning[0]) {
    ts_log_info("mesh for session '%s': %s", j->name, mt.warning);
    snprintf(j->warning, sizeof j->warning, "%s", mt.warning);
  }
  /* kept so the session can refine the tissue; without it the session runs
   * but refuses RefineRegion */
  ts_patch_def pd = ts_default_patch_def();
  ts_refine_src_free(j->refine_src);
  if (ts_refine_src_create(mt.e, j->def.layers, mt.anchors, pd.gravity, &j->refine_src))
    j->refine_src = NULL;
  *out = mt.t;
  mt.t = NULL;
  ts_mesh_tissue_free(&mt);
  return 0;
}

/* A session holding tissue t (taken over, also on failure). */
static int session_with_tissue(create_job *j, ts_tissue *t, const char *tissue_name) {
  int rc = ts_session_create_with_tissue(j->server, j->name, tissue_name, t, j->dt,
                                         j->server->cfg.frame_rate, &j->session, j->err,
                                         sizeof j->err);
  if (!rc) j->session->sim.refine_src = j->refine_src;
  else ts_refine_src_free(j->refine_src);
  j->refine_src = NULL;
  return rc;
}

/* The layer spec stored with a tissue, from j's layers. */
static int spec_text(const create_job *j, char *buf, size_t cap) {
  ts_layer_spec ls;
  memset(&ls, 0, sizeof ls);
  ls.scale = j->scale;
  ls.n_layers = j->def.n_layers;
  for (uint32_t i = 0; i < ls.n_layers; i++) {
    snprintf(ls.layers[i].name, sizeof ls.layers[i].name, "%s", j->def.layers[i].name);
    ls.layers[i].thickness = j->def.layers[i].thickness;
    snprintf(ls.layers[i].material, sizeof ls.layers[i].material, "%s", j->material[i]);
    memcpy(ls.layers[i].fibre, j->def.layers[i].fibre, sizeof ls.layers[i].fibre);
  }
  return ts_layer_spec_format(&ls, buf, cap);
}

/* The newest model of this kind when it is one of an unknown solve: the
 * operator learns why the session did not start from it. */
static void legacy_warning(const create_job *j, ts_storage *st, int64_t tid, ts_learn_kind k) {
  ts_model_rec rec;
  if (ts_storage_get_latest_model(st, tid, j->session->material, ts_learn_kind_name(k), &rec))
    return;
  if (rec.solve && strcmp(rec.solve, "unknown") == 0)
    ts_log_warn("session '%s' does not start from stored %s model %lld: it was stored before "
                "models recorded their solve, so it cannot be verified for this session's; "
                "retrain it, or re-import it with its solve named",
                j->name, rec.kind, (long long)rec.id);
  ts_storage_model_free(&rec);
}

/* A quasi-static session starts with the newest model stored for its tissue
 * and material (the method's, else a richer one) that learned the session's
 * solve, when there is one; a model of another solve is passed over, and so
 * is one stored before solves were recorded (its solve cannot be verified:
 * ts_learn.h), with a warning that names it. */
static void load_model(create_job *j, ts_storage *st) {
  ts_session *se = j->session;
  ts_tissue_rec tr;
  if (ts_storage_get_tissue(st, se->tissue_name, &tr)) return;
  int64_t tid = tr.id;
  ts_storage_tissue_free(&tr);
  for (int k = TS_LEARN_METHOD; k <= TS_LEARN_KIND_LAST; k++) {
    ts_model_rec rec;
    const ts_learn_solve sv = se->sim.shortcut->solve;
    if (ts_storage_get_latest_model_solve(
            st, tid, se->material, ts_learn_kind_name((ts_learn_kind)k),
            ts_learn_solve_name(sv.kind), sv.kind == TS_LEARN_SOLVE_REFINED ? sv.refine_edge : 0,
            &rec)) {
      legacy_warning(j, st, tid, (ts_learn_kind)k);
      continue;
    }
    ts_learn_model m;
    int rc = ts_learn_theta_decode((ts_learn_kind)k, se->sim.shortcut->q->n_sheets, rec.theta,
                                   rec.theta_bytes, &m);
    if (!rc) rc = ts_shortcut_install(se->sim.shortcut, &m);
    if (!rc) {
      se->mbox.learned = 1;
      se->has_model = 1;
      ts_log_info("session '%s' starts with stored %s model %lld (held-out RMS %.3g mm)", j->name,
                  rec.kind, (long long)rec.id, rec.heldout_rmse * 1e3);
    } else {
      ts_log_warn("session '%s': stored model %lld does not fit this tissue: %s", j->name,
                  (long long)rec.id, ts_strerror(rc));
    }
    ts_storage_model_free(&rec);
    if (!rc) return;
  }
}

/* ---- the three jobs ---- */

/* The storage worker, first: a stored tissue's mesh and layers, an upload's
 * hash and tissue name, and the layers' materials. */
static void read_work(ts_job *jb, ts_storage *st) {
  create_job *j = (create_job *)jb;
  if (j->source == SRC_STORED) {
    ts_catalog_tissue ct;
    if ((j->rc = ts_catalog_load(st, j->tissue_name, &ct, j->err, sizeof j->err))) return;
    /* the layers as a CreateSession naming them would give (dispatch.c) */
    j->def.n_layers = ct.def.n_layers;
    memcpy(j->def.layers, ct.def.layers, sizeof j->def.layers);
    memcpy(j->material, ct.material, sizeof j->material);
    j->scale = ct.scale;
    j->format = ct.format;
    j->data = malloc(ct.mesh.n_bytes ? ct.mesh.n_bytes : 1); /* the builder's copy */
    if (j->data && ct.mesh.n_bytes) memcpy(j->data, ct.mesh.bytes, ct.mesh.n_bytes);
    j->len = j->data ? ct.mesh.n_bytes : 0;
    ts_catalog_free(&ct);
    if (!j->data) {
      j->rc = TS_ENOMEM;
      snprintf(j->err, sizeof j->err, "out of memory for tissue '%s'", j->tissue_name);
      return;
    }
  } else if (j->source == SRC_UPLOAD) {
    sha256_hex(j->data, j->len, j->hash);
    if (!j->hash[0]) {
      j->rc = TS_EINTERNAL;
      snprintf(j->err, sizeof j->err, "cannot compute the SHA-256 of the mesh");
      return;
    }
    if (!j->tissue_name[0])
      snprintf(j->tissue_name, sizeof j->tissue_name, "mesh-%.12s", j->hash);
  }
  j->rc = resolve_materials(j, st);
}

/* The builder thread: the tissue, the session around it and its solver. */
static void build_work(ts_job *jb, ts_storage *st) {
  (void)st; /* the builder has none */
  create_job *j = (create_job *)jb;
  if ((j->rc = stop_asked(j))) return; /* queued behind a build when the stop came */
  if (j->source == SRC_BUILTIN) {
    ts_create_track_set(&j->track, TISSUED__V1__CREATE_PROGRESS__STAGE__SPRINGS);
    j->rc = ts_session_create(j->server, j->name, &j->def, j->dt, j->server->cfg.frame_rate,
                              &j->session, j->err, sizeof j->err);
  } else {
    ts_tissue *t = NULL;
    j->rc = build_mesh_tissue(j, &t, &j->nv, &j->nt);
    if (!j->rc && (j->rc = stop_asked(j))) {
      ts_tissue_destroy(t);
      ts_refine_src_free(j->refine_src);
      j->refine_src = NULL;
    }
    if (!j->rc) j->rc = session_with_tissue(j, t, j->tissue_name);
  }
  if (!j->rc) j->rc = stop_asked(j);
  if (j->rc) return;
  ts_create_track_set(&j->track, TISSUED__V1__CREATE_PROGRESS__STAGE__SOLVER);
  j->session->solver = j->sv.solver;
  /* before physics owns the session; constant from then on (session lists
   * read it on the loop thread) */
  if (j->sv.tool_stiffness > 0) j->session->sim.tool_contact.stiffness = j->sv.tool_stiffness;
  if (j->sv.solver == TISSUED__V1__SOLVER__SOLVER_MASS_SPRING) /* a cap on the substeps */
    j->session->sim.tissue->max_substeps = j->sv.substeps;
  /* a refinement's local mass scaling (core/ts_ms_local.c); it takes
   * effect at the next refinement, which prepares the refined tissue */
  j->session->sim.tissue->local_mass_scaling = j->server->cfg.local_mass_scaling;
  if (j->sv.solver == TISSUED__V1__SOLVER__SOLVER_XPBD)
    j->rc = ts_session_use_xpbd(j->session, &j->sv, j->err, sizeof j->err);
  if (j->sv.solver == TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC) {
    const ts_config *cfg = &j->server->cfg;
    j->rc = ts_session_use_shortcut(j->session, cfg->qs_interval,
                                    (uint32_t)cfg->max_training_samples,
                                    (uint32_t)cfg->train_after_samples, j->err, sizeof j->err);
    if (!j->rc && cfg->qs_refine_edge != 0) { /* < 0: auto */
      j->rc = ts_shortcut_set_refine(j->session->sim.shortcut, j->session->sim.tissue,
                                     cfg->qs_refine_edge);
      if (j->rc)
        snprintf(j->err, sizeof j->err, "cannot set up the refined quasi-static solve: %s",
                 ts_strerror(j->rc));
    }
  }
  /* tissue self-contact (session_self.h): the moving solvers only */
  if (!j->rc && j->sv.self_contact && j->sv.solver != TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC) {
    const uint32_t max = (uint32_t)j->server->cfg.self_contact_max_nodes;
    uint32_t ns = 0;
    j->rc = ts_session_self_create(j->session->sim.tissue, max, &j->session->sim.self, &ns);
    j->session->self_surface_nodes = ns;
    if (j->rc == TS_ETOOBIG && j->sv.self_contact == 2) {
      /* only the daemon-wide --self-contact asked: the session runs
       * without it (SessionInfo.self_contact false) */
      ts_log_warn("session '%s' runs without self-contact: its tissue has %u surface nodes, "
                  "more than --self-contact-max-nodes %u", j->name, ns, max);
      j->session->self_refused = 1; /* SessionInfo.self_contact_off says so */
      j->rc = 0;
    } else if (j->rc == TS_ETOOBIG) {
      j->self_refused = 1;
      snprintf(j->err, sizeof j->err,
               "self-contact refused: the tissue has %u surface nodes, more than this daemon's "
               "limit of %u (--self-contact-max-nodes); its detection's cost per step grows with "
               "them and would slow the other sessions on its physics thread",
               ns, max);
    } else if (j->rc) {
      snprintf(j->err, sizeof j->err, "cannot set up self-contact: %s", ts_strerror(j->rc));
    }
  }
  /* what it will cost (session_trial.h): where the physics starts it, and
   * its client hears it */
  if (!j->rc) j->rc = stop_asked(j);
  if (!j->rc && j->server->cfg.session_trial) {
    ts_session_trial(j->session, &j->trial);
    const double max = j->server->cfg.max_step_load;
    if (max > 0 && j->trial.load > max) {
      j->rc = TS_ETOOBIG;
      j->load_refused = 1;
      snprintf(j->err, sizeof j->err,
               "the tissue is too costly for this server: each of its steps takes about %.3g "
               "times the time it simulates (measured at creation, with no tool touching it), over "
               "its limit of %g (--max-step-load); a coarser mesh, fewer layers or a larger dt "
               "steps faster",
               j->trial.load, max);
    }
  }
}

/* The storage worker, last: an upload stored (only now that it has made a
 * session: a refused one stores nothing), a quasi-static session's stored
 * model loaded. */
static void store_work(ts_job *jb, ts_storage *st) {
  create_job *j = (create_job *)jb;
  ts_create_track_set(&j->track, TISSUED__V1__CREATE_PROGRESS__STAGE__STORING);
  if (j->source == SRC_UPLOAD) {
    char spec[2048];
    int n = spec_text(j, spec, sizeof spec);
    if (n < 0) {
      j->rc = n;
      snprintf(j->err, sizeof j->err, "cannot describe the layers: %s", ts_strerror(n));
      return;
    }
    ts_mesh_rec rec = {.hash = j->hash, .format = format_name(j->format), .bytes = j->data,
                       .n_bytes = j->len, .vertex_count = j->nv, .triangle_count = j->nt};
    int inserted = 0;
    int64_t id = ts_storage_put_mesh_tissue(st, &rec, j->tissue_name, spec, &inserted);
    if (id < 0) {
      j->rc = (int)id;
      snprintf(j->err, sizeof j->err, "cannot store tissue '%s': %s", j->tissue_name,
               ts_storage_errmsg(st));
      return;
    }
    ts_log_info("mesh %.12s (%s, %zu bytes, %u vertices, %u triangles) %s; tissue '%s'",
                j->hash, format_name(j->format), j->len, j->nv, j->nt,
                inserted ? "stored" : "already stored", j->tissue_name);
  }
  if (j->sv.solver == TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC) load_model(j, st);
}

static void create_done(ts_job *jb);
static void build_done(ts_job *jb);

/* Loop: from the storage worker to the builder, unless it failed or the
 * daemon is stopping (then the builder may be stopped already). */
static void read_done(ts_job *jb) {
  create_job *j = (create_job *)jb;
  if (j->rc || j->server->shutting_down) {
    create_done(jb);
    return;
  }
  j->job.work = build_work;
  j->job.done = build_done;
  ts_worker_submit(&j->server->builder, &j->job);
}

/* Loop: back to the storage worker when there is something to store or
 * load, likewise. */
static void build_done(ts_job *jb) {
  create_job *j = (create_job *)jb;
  const int store = j->source == SRC_UPLOAD ||
                    j->sv.solver == TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC;
  if (j->rc || j->server->shutting_down || !store) {
    create_done(jb);
    return;
  }
  j->job.work = store_work;
  j->job.done = create_done;
  ts_worker_submit(&j->server->worker, &j->job);
}

static void create_done(ts_job *jb) {
  create_job *j = (create_job *)jb;
  ts_server *s = j->server;
  ts_create_track_end(s, &j->track);
  s->pending_creates--;
  if (j->key_index >= 0 && j->key_index < TS_MAX_KEYS) s->pending_per_key[j->key_index]--;
  ts_conn *c = ts_server_find_conn(s, j->conn_id);
  if (!j->rc && !s->shutting_down) {
    /* the tokens that open this session (auth.h) */
    ts_session *ns = j->session;
    ns->creator_key = j->key_index;
    int trc = ts_auth_random_token(ns->observer_token);
    for (int i = 0; i < TS_MAX_TOOLS && !trc; i++)
      trc = ts_auth_random_token(ns->controller_token[i]);
    if (trc) {
      j->rc = trc;
      snprintf(j->err, sizeof j->err, "no randomness from the kernel for session tokens");
    }
  }
  if (j->rc == TS_ETOOBIG)
    s->limit_refused[j->self_refused   ? TS_LIMIT_SELF_CONTACT
                     : j->load_refused ? TS_LIMIT_STEP_LOAD
                                       : TS_LIMIT_MESH]++;
  if (j->rc == TS_ESHUTDOWN || (s->shutting_down && !j->rc))
    ts_log_info("session '%s' not created: the server is shutting down%s", j->name,
                j->rc ? " (its build stopped)" : "");
  if (j->rc || s->shutting_down) {
    if (c) ts_send_error(c, j->rid, j->rc ? j->rc : TS_ESHUTDOWN, "%s",
                         j->rc ? j->err : "server is shutting down");
    ts_session_free(j->session);
    free(j->data);
    free(j);
    return;
  }
  free(j->data);
  ts_session *se = j->session;
  if (!c) {
    /* The connection that asked has closed (a client that gave up waiting:
     * a large upload builds for tens of seconds). Nobody has the session's
     * id or tokens, and it would step, a core's share for a large tissue,
     * until --session-idle-timeout: it is not started. An upload's tissue
     * stays stored, so asking again by its name does not upload again. */
    ts_log_warn("session '%s' not started: the connection that asked for it closed before it was "
                "ready",
                se->name);
    ts_session_free(se);
    free(j);
    return;
  }
  ts_server_add_session(s, se, j->trial.load);
  char load[32] = "not measured";
  if (j->trial.load >= 0) snprintf(load, sizeof load, "%.3g", j->trial.load);
  ts_log_info("session %u '%s' created: %u nodes, %u triangles, dt %g s, step load %s", se->id,
              se->name, se->topo->vertex_count, se->topo->n_tris, se->sim.dt, load);
  /* the mesh's warning, then the trial's (session_trial.h) */
  const double over = ts_physics_slow_lane(s->physics) ? s->cfg.slow_lane_load : 1.0;
  char slow[400], warning[sizeof j->warning + sizeof slow + 2];
  ts_session_trial_warning(&j->trial, over, slow, sizeof slow);
  snprintf(warning, sizeof warning, "%s%s%s", j->warning, j->warning[0] && slow[0] ? " " : "", slow);
  Tissued__V1__SessionCreated r = TISSUED__V1__SESSION_CREATED__INIT;
  r.session_id = se->id;
  r.name = se->name;
  r.vertex_count = se->topo->vertex_count;
  r.triangle_count = se->topo->n_tris;
  r.observer_token = se->observer_token;
  int ntools = s->cfg.max_tools < TS_MAX_TOOLS ? s->cfg.max_tools : TS_MAX_TOOLS;
  char *ctl[TS_MAX_TOOLS];
  for (int i = 0; i < ntools; i++) ctl[i] = se->controller_token[i];
  r.n_controller_tokens = (size_t)ntools;
  r.controller_tokens = ctl;
  r.moved_vertices = j->n_relaxed;
  r.max_move = (float)j->max_relaxed;
  r.thinned_vertices = j->n_thinned;
  r.min_depth_fraction = j->n_thinned ? (float)j->min_depth_kept : 0.0f;
  r.warning = warning;
  r.step_load = j->trial.load > 0 ? (float)j->trial.load : 0.0f;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = j->rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED;
  env.session_created = &r;
  ts_send_envelope(c, &env);
  free(j);
}

static create_job *new_create_job(ts_conn *c, uint64_t rid, const char *name, double dt,
                                  const ts_solver_opts *sv) {
  create_job *j = calloc(1, sizeof *j);
  if (!j) {
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return NULL;
  }
  j->job.work = read_work;
  j->job.done = read_done;
  j->server = c->server;
  j->conn_id = c->id;
  j->rid = rid;
  snprintf(j->name, sizeof j->name, "%s", name);
  j->dt = dt;
  j->sv = *sv;
  j->scale = 1;
  j->trial.load = -1; /* none until build_work's trial */
  return j;
}

static void set_layers(create_job *j, const ts_patch_def *def, char material[][64]) {
  j->def = *def;
  for (uint32_t i = 0; i < def->n_layers && i < TS_MAX_LAYERS; i++)
    snprintf(j->material[i], sizeof j->material[i], "%s", material[i]);
}

static void submit_create(ts_conn *c, create_job *j, int progress) {
  ts_create_track_begin(c->server, &j->track, c->id, j->rid, progress);
  c->server->pending_creates++;
  j->key_index = c->key_index;
  if (j->key_index >= 0 && j->key_index < TS_MAX_KEYS) c->server->pending_per_key[j->key_index]++;
  ts_worker_submit(&c->server->worker, &j->job);
}

void ts_request_create_session(ts_conn *c, uint64_t rid, const char *name,
                               const ts_patch_def *def, char material[][64], double dt,
                               const ts_solver_opts *sv, int progress) {
  create_job *j = new_create_job(c, rid, name, dt, sv);
  if (!j) return;
  set_layers(j, def, material);
  submit_create(c, j, progress);
}

void ts_request_create_mesh_session(ts_conn *c, uint64_t rid, const char *name,
                                    const char *tissue_name, int format, const uint8_t *data,
                                    size_t len, double scale, const ts_patch_def *def,
                                    char material[][64], double dt,
                                    const ts_solver_opts *sv, int progress) {
  create_job *j = new_create_job(c, rid, name, dt, sv);
  if (!j) return;
  j->data = malloc(len ? len : 1);
  if (!j->data) {
    free(j);
    ts_send_error(c, rid, TS_ENOMEM, "out of memory for a mesh of %zu bytes", len);
    return;
  }
  if (len) memcpy(j->data, data, len);
  j->len = len;
  j->source = SRC_UPLOAD;
  snprintf(j->tissue_name, sizeof j->tissue_name, "%s", tissue_name ? tissue_name : "");
  j->format = format;
  j->scale = scale;
  j->max_bytes = c->server->cfg.max_mesh_bytes;
  j->max_tris = (uint32_t)c->server->cfg.max_mesh_triangles;
  j->max_verts = (uint32_t)c->server->cfg.max_mesh_vertices;
  set_layers(j, def, material);
  submit_create(c, j, progress);
}

void ts_request_create_stored_session(ts_conn *c, uint64_t rid, const char *name,
                                      const char *tissue_name, double dt,
                                      const ts_solver_opts *sv, int progress) {
  create_job *j = new_create_job(c, rid, name, dt, sv);
  if (!j) return;
  j->source = SRC_STORED;
  snprintf(j->tissue_name, sizeof j->tissue_name, "%s", tissue_name);
  /* a stored file was within the limits when it was uploaded; the limits
   * apply again in case they were lowered since */
  j->max_bytes = c->server->cfg.max_mesh_bytes;
  j->max_tris = (uint32_t)c->server->cfg.max_mesh_triangles;
  j->max_verts = (uint32_t)c->server->cfg.max_mesh_vertices;
  submit_create(c, j, progress);
}

