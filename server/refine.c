/*
 * refine.c: RefineRegion in a running session (see refine.h). The loop
 * thread checks who asks and what, and leaves the request in the session's
 * mailbox. The physics thread, which owns the tissue, notes its sizes and
 * hands the request to the refinement thread, which sets aside and writes
 * once the memory for a snapshot (the room: see ask_room) and puts it
 * back into the mailbox; the physics thread then takes the snapshot between
 * two steps (a copy of the tissue with its state and hand-over into the
 * room, a share of its refinement source, the tools' poses and the
 * solver's settings: 1 ms on patch-S and the liver) and hands it to the
 * server's refinement thread (s->refiner, a second ts_worker: the storage
 * worker runs SQLite and training jobs in order, and a refinement queued
 * behind a training job would wait for it; this one runs refinements only,
 * in order, one at a time for the whole daemon, which is one more thread
 * and keeps a burst of refinements off the other cores). There the
 * snapshot is refined (core/ts_refine.h: old nodes keep their indices, new
 * ones appended at the midpoints, the hand-over of core/ts_handover.h), the
 * XPBD hand-over fitted to the solver by trial steps (its rest-length
 * corrections kept apart), the solver data (XPBD and its contact trees, the
 * self-contact tree and its count against the limit) and the topology
 * rebuilt, while the session steps on. The loop gets the
 * result back (worker.h's done) and puts it into the session's mailbox,
 * unless the session has ended (then it is dropped and the requester told);
 * the physics thread installs it between two later steps: old nodes take
 * their current state, new ones the current midpoints of their parents
 * (ts_refine_restate), the hand-over is made again at that state with the
 * current tools and the fit's corrections added (ts_handover_renew: no
 * trial steps), and the new tissue, solver and trees replace the old.
 * What the install replaced (the old tissue, the snapshot) goes back to
 * the refinement thread to be freed (dispose).
 * XPBD's corrections carry only to a state near the one they were fitted
 * at (ts_handover.h, TS_HANDOVER_CARRY_DRIFT): when the tissue has moved
 * further, the physics thread takes a fresh snapshot instead (into the
 * last one's arrays: 0.6 ms on the liver) and hands the result back to the refinement thread, which fits
 * again there from the corrections it has (chase_work), a few rounds at
 * most (ts_handover_install_plan); only a tissue still too far from the
 * last fit after them is fitted again at the install, on the physics
 * thread, as it always was before (0.2 s on the liver).
 * A reset or a recovery from a divergence in between (sim.rest_epoch)
 * discards the result (TS_EMISMATCH to the requester). Then one
 * TS_EV_REFINED event goes out as before: the outbox is one queue, so the
 * loop installs the new topology before it sees the first frame of the
 * refined tissue: frames published before are encoded with the old
 * topology, every frame after as a keyframe (each client's delta base is
 * dropped, and ts_session_on_frame refuses a base of another vertex count
 * anyway). One refinement per session at a time: another RefineRegion
 * meanwhile is refused with TS_EFULL.
 */
#include "refine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_handover.h"
#include "core/ts_massspring.h"
#include "core/ts_refine.h"
#include "core/ts_tool_proxy.h"
#include "log.h"
#include "server.h"
#include "session_contact.h"
#include "session_self.h"

#define TS_REFINE_DEFAULT_RANGE 0.005 /* m: a pick's region when range is 0 */

typedef Tissued__V1__Envelope Envelope;

/* A RefineRegion from the request to its install. Stage ASKED: in the
 * session's mailbox for the physics thread, which notes the tissue's sizes
 * and hands it to the refinement thread (s->refiner) to make the
 * snapshot's room; RESERVED: back in the mailbox with that room, where the
 * physics thread takes the snapshot and hands it to the refinement thread;
 * REFINED: back in the mailbox with the result, for the physics thread to
 * install. From the physics thread, a request goes to the refinement
 * thread once more to be freed (dispose): the tissue an install replaced
 * and the snapshot are the size of the tissue. */
enum { REQ_ASKED = 0, REQ_REFINED = 1, REQ_RESERVED = 2 };

struct ts_refine_req {
  ts_job job;             /* the refinement thread's job (first member) */
  ts_server *server;
  uint32_t session_id;
  uint64_t conn_id, rid;
  int method;             /* TS_REFINE_* */
  int smooth;             /* LOOP: Loop's smoothing rules on the rest shape (not midpoint_rest) */
  uint32_t *tris;         /* render triangle indices; NULL: by ray */
  uint32_t n_tris;
  double origin[3], dir[3];
  double range, max_edge; /* m */
  uint32_t max_nodes;
  int stage;              /* REQ_* */
  /* the snapshot's room (the physics thread's sizes, the refinement
   * thread's ts_refine_snapshot_reserve; NULL: none could be had) */
  uint32_t room_nodes, room_springs, room_tris;
  int room_hand;
  ts_tissue *room;
  /* the snapshot (physics thread, read by the refinement thread) */
  ts_tissue *snap;
  ts_refine_src *src;     /* the session's source, shared (ts_refine_src_share) */
  ts_tool tools[TS_MAX_TOOLS];
  ts_tool fit_tools[TS_MAX_TOOLS]; /* the same at their poses of the next step (next_poses): XPBD's fits */
  int xpbd, contact;      /* the session's solver: XPBD; with tree-based contact */
  int self;               /* the session runs tissue self-contact (session_self.h) */
  uint32_t self_max;      /* and its limit (--self-contact-max-nodes) */
  ts_xpbd_def def;
  double dt;              /* s */
  uint64_t rest_epoch;    /* the session's at the snapshot */
  uint64_t t_taken;       /* uv_hrtime when the physics thread took the request */
  double hold_ms;         /* physics thread: snapshot, then install */
  double work_ms;         /* refinement thread */
  /* the result (refinement thread, installed by the physics thread) */
  int rc;
  char err[256];
  ts_tissue *nt;
  ts_refine_src *nsrc;
  ts_xpbd *nx;            /* after the install: the solver it replaced (dispose) */
  ts_session_contact *nc; /* after the install: the contact trees it replaced (dispose) */
  ts_aabb_tree *self_tree; /* self-contact's tree over nt (NULL over the limit) */
  uint32_t self_nodes;    /* nt's contact-surface nodes (self-contact's limit) */
  ts_topology *topo;
  ts_refine_info info;    /* info.parents: each new node's parent edge */
  double *rest_fix;       /* XPBD: the fit's rest-length corrections per spring */
  int rounds;             /* XPBD: fits again at fresh snapshots (the chase, see install) */
  int refitted;           /* XPBD: fitted again at the install (the tissue had moved) */
  double drift;           /* XPBD: m the tissue had moved since the last fit's snapshot */
  double fit_err;         /* XPBD: m the last fit's trials left (NaN: it did not run) */
  /* what the install replaced, freed off the physics thread (dispose) */
  ts_tissue *spent;
  ts_refine_src *spent_src;
};

typedef struct refine_res {
  uint32_t session_id;
  uint64_t conn_id, rid;
  int rc;
  char err[256];
  ts_topology *topo;      /* the new topology on success */
  uint32_t vertex_count, triangle_count, selected, new_vertices;
  uint64_t step;
  double millis;
  int method;
  double work_ms, total_ms; /* the refinement thread's time; request to install */
  int refitted;             /* XPBD's fit ran again at the install */
  ts_local_mass lm;         /* mass-spring: the refined tissue's local mass scaling */
  int rounds;               /* XPBD's fits again off the physics thread (the chase) */
  double drift;             /* m: moved since the last fit's snapshot, at the install */
} refine_res;

/* Frees what q holds (q itself stays, its members NULL). */
static void req_release(struct ts_refine_req *q) {
  free(q->tris);
  q->tris = NULL;
  ts_tissue_destroy(q->room);
  q->room = NULL;
  ts_tissue_destroy(q->snap);
  q->snap = NULL;
  ts_refine_src_free(q->src);
  q->src = NULL;
  ts_tissue_destroy(q->nt);
  q->nt = NULL;
  ts_refine_src_free(q->nsrc);
  q->nsrc = NULL;
  ts_xpbd_destroy(q->nx);
  q->nx = NULL;
  if (q->nc) {
    ts_session_contact_free(q->nc);
    free(q->nc);
    q->nc = NULL;
  }
  ts_aabb_tree_destroy(q->self_tree);
  q->self_tree = NULL;
  ts_topology_free(q->topo);
  q->topo = NULL;
  free(q->info.parents);
  q->info.parents = NULL;
  free(q->rest_fix);
  q->rest_fix = NULL;
  ts_tissue_destroy(q->spent);
  q->spent = NULL;
  ts_refine_src_free(q->spent_src);
  q->spent_src = NULL;
}

void ts_refine_req_free(struct ts_refine_req *q) {
  if (!q) return;
  req_release(q);
  free(q);
}

/* ---- loop thread: the request ---- */

static int finite_vec(const Tissued__V1__Vec3 *v) {
  return v && isfinite(v->x) && isfinite(v->y) && isfinite(v->z);
}

static void refuse(ts_conn *c, uint64_t rid, int code, const char *msg, uint32_t sid) {
  c->server->refinements_refused++;
  ts_send_error(c, rid, code, "refine session %u: %s", sid, msg);
}

void ts_refine_request(ts_conn *c, uint64_t rid, const Tissued__V1__RefineRegion *m) {
  ts_server *s = c->server;
  ts_session *se = ts_server_find_session(s, m->session_id);
  if (!se || se->ending) {
    refuse(c, rid, TS_ENOSESSION, "no such session", m->session_id);
    return;
  }
  if (c->key_index < 0) { /* without the server key: a controller of this session */
    if (c->session != se) {
      refuse(c, rid, TS_ENOTJOINED, "not joined to it", se->id);
      return;
    }
    if (c->role != TISSUED__V1__ROLE__ROLE_CONTROLLER) {
      refuse(c, rid, TS_EROLE, "only a controller of the session or a holder of the server key may refine",
             se->id);
      return;
    }
  }
  if (se->sim.shortcut) {
    refuse(c, rid, TS_EUNSUPPORTED,
           "a quasi-static session is not refined here (its solve would need rebuilding)", se->id);
    return;
  }
  if (m->method != TISSUED__V1__REFINE_REGION__METHOD__LOOP &&
      m->method != TISSUED__V1__REFINE_REGION__METHOD__LEB) {
    refuse(c, rid, TS_EINVAL, "method must be LOOP or LEB", se->id);
    return;
  }
  if (!isfinite(m->range) || m->range < 0 || !isfinite(m->max_edge) || m->max_edge < 0) {
    refuse(c, rid, TS_EINVAL, "range and max_edge must be finite and not negative", se->id);
    return;
  }
  if (m->n_triangles == 0) {
    if (!finite_vec(m->ray_origin) || !finite_vec(m->ray_direction)) {
      refuse(c, rid, TS_EINVAL, "give triangles, or a finite ray_origin and ray_direction", se->id);
      return;
    }
    const Tissued__V1__Vec3 *d = m->ray_direction;
    if (d->x == 0 && d->y == 0 && d->z == 0) {
      refuse(c, rid, TS_EINVAL, "ray_direction is zero", se->id);
      return;
    }
  }
  if (m->n_triangles > se->topo->n_tris) {
    refuse(c, rid, TS_EINVAL, "more triangles than the topology has", se->id);
    return;
  }
  for (size_t i = 0; i < m->n_triangles; i++)
    if (m->triangles[i] >= se->topo->n_tris) {
      char msg[128];
      snprintf(msg, sizeof msg, "triangle %u out of range (the topology has %u)", m->triangles[i],
               se->topo->n_tris);
      refuse(c, rid, TS_EINVAL, msg, se->id);
      return;
    }
  if (se->refine_pending) {
    refuse(c, rid, TS_EFULL, "a refinement is under way; try again when it is answered", se->id);
    return;
  }
  struct ts_refine_req *q = calloc(1, sizeof *q);
  if (q && m->n_triangles) {
    q->tris = malloc(sizeof *q->tris * m->n_triangles);
    if (!q->tris) {
      free(q);
      q = NULL;
    }
  }
  if (!q) {
    refuse(c, rid, TS_ENOMEM, "out of memory", se->id);
    return;
  }
  q->server = s;
  q->session_id = se->id;
  q->conn_id = c->id;
  q->rid = rid;
  q->method = m->method == TISSUED__V1__REFINE_REGION__METHOD__LEB ? TS_REFINE_LEB : TS_REFINE_LOOP;
  q->smooth = q->method == TS_REFINE_LOOP && !m->midpoint_rest;
  q->n_tris = (uint32_t)m->n_triangles;
  if (q->n_tris) memcpy(q->tris, m->triangles, sizeof *q->tris * q->n_tris);
  if (!q->n_tris) {
    q->origin[0] = m->ray_origin->x, q->origin[1] = m->ray_origin->y, q->origin[2] = m->ray_origin->z;
    q->dir[0] = m->ray_direction->x, q->dir[1] = m->ray_direction->y, q->dir[2] = m->ray_direction->z;
  }
  q->range = m->range > 0 ? m->range : TS_REFINE_DEFAULT_RANGE;
  q->max_edge = m->max_edge;
  /* the session's vertex limit: the uploaded-mesh limit per sheet */
  uint64_t per_sheet = s->cfg.max_mesh_vertices > 0 ? (uint64_t)s->cfg.max_mesh_vertices : 100000;
  uint64_t limit = per_sheet * (TS_MAX_LAYERS + 1);
  q->max_nodes = limit > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)limit;
  se->refine_pending = 1;
  uv_mutex_lock(&se->mbox.lock);
  ts_refine_req_free(se->mbox.refine); /* none: refine_pending guards it */
  se->mbox.refine = q;
  uv_mutex_unlock(&se->mbox.lock);
}

static void to_session(struct ts_refine_req *q, int stage);
static void refine_done(ts_job *j) { to_session((struct ts_refine_req *)j, REQ_REFINED); }
static void room_done(ts_job *j) { to_session((struct ts_refine_req *)j, REQ_RESERVED); }

/* Refinement thread: q's snapshot's room (ts_refine_snapshot_reserve:
 * every page written once here, so that the physics thread's copy into it
 * is a copy; without the room the physics thread allocates, as before).
 * Touches nothing but q. */
static void room_work(ts_job *j, ts_storage *st) {
  (void)st;
  struct ts_refine_req *q = (struct ts_refine_req *)j;
  uint64_t t0 = uv_hrtime();
  if (ts_refine_snapshot_reserve(q->room_nodes, q->room_springs, q->room_tris, q->room_hand, &q->room))
    q->room = NULL;
  q->work_ms += (double)(uv_hrtime() - t0) * 1e-6;
}

/* Refinement thread: frees what q holds (dispose). */
static void dispose_work(ts_job *j, ts_storage *st) {
  (void)st;
  req_release((struct ts_refine_req *)j);
}

/* Loop thread: q itself, emptied by dispose_work. */
static void dispose_done(ts_job *j) { ts_refine_req_free((struct ts_refine_req *)j); }

/* Physics thread: q is done with; what it holds (at an install the tissue
 * it replaced and the snapshot, each the size of the tissue: 20-30 ms of
 * freeing on a resolution-200 patch) is freed on the refinement thread. */
static void dispose(ts_session *se, struct ts_refine_req *q) {
  q->job.work = dispose_work;
  q->job.done = dispose_done;
  ts_worker_submit(&se->server->refiner, &q->job);
}

/* ---- physics thread: the snapshot; refinement thread: the refinement ---- */

static int select_tris(const struct ts_refine_req *q, uint32_t **sel, uint32_t *n, char *err, size_t cap) {
  const ts_refine_src *src = q->src;
  if (q->n_tris) {
    *sel = malloc(sizeof **sel * q->n_tris);
    if (!*sel) return TS_ENOMEM;
    for (uint32_t i = 0; i < q->n_tris; i++) {
      if (ts_refine_surface_tri(src, q->snap, q->tris[i], &(*sel)[i])) {
        snprintf(err, cap,
                 "triangle %u is not an outer-surface triangle (a side wall, the inner sheet, or "
                 "out of range)",
                 q->tris[i]);
        return TS_EINVAL;
      }
    }
    *n = q->n_tris;
    return 0;
  }
  int rc = ts_refine_pick(src, q->snap, q->origin, q->dir, q->range, sel, n, NULL);
  if (rc == TS_ERANGE)
    snprintf(err, cap, "the ray meets no outer-surface triangle");
  else if (rc)
    snprintf(err, cap, "pick failed: %s", ts_strerror(rc));
  return rc;
}

static void post(ts_session *se, refine_res *r) {
  ts_server *s = se->server;
  while (ts_outbox_push_payload(&s->outbox, TS_EV_REFINED, se, r, 0)) uv_sleep(1);
  ts_outbox_wake(&s->outbox);
}

/* The answer for q (rc, err, the times); the caller fills a success's
 * figures. Never NULL: the loop waits for it. */
static refine_res *res_for(const struct ts_refine_req *q, int rc, const char *err) {
  refine_res *r = calloc(1, sizeof *r);
  while (!r) {
    uv_sleep(1);
    r = calloc(1, sizeof *r);
  }
  r->session_id = q->session_id;
  r->conn_id = q->conn_id;
  r->rid = q->rid;
  r->method = q->method;
  r->rc = rc;
  if (err) snprintf(r->err, sizeof r->err, "%s", err);
  r->millis = q->hold_ms;
  r->work_ms = q->work_ms;
  r->total_ms = q->t_taken ? (double)(uv_hrtime() - q->t_taken) * 1e-6 : 0;
  return r;
}

/* Physics thread, between two steps: the tools at the poses they will have
 * at the end of the next step, into out (TS_MAX_TOOLS). The install and the
 * snapshots are taken after the commands of that step were drained and
 * before the proxies follow them (ts_session_step), so each active proxy's
 * ts_tool_proxy_follow from here gives its pose then. XPBD's fit takes its
 * tools at these poses: its trial steps hold the tools still, and a tool
 * that moves in the step the hand-over must match stands better where it
 * ends the step than where it starts it. Measured (test_refine_async, async
 * case: the sphere pressing on 30 um a step): the first step after the
 * install 12.7 um off the twin's with the chase's corrections (17.6 um with
 * the fits at the poses of then), 4.3 um fitted again at the install
 * (13.9 um). A tool standing still: the same poses as before. */
static void next_poses(const ts_session_sim *sim, ts_tool out[TS_MAX_TOOLS]) {
  memcpy(out, sim->tools, sizeof *out * TS_MAX_TOOLS);
  for (int i = 0; i < TS_MAX_TOOLS; i++)
    if (out[i].active) /* a command that is not finite leaves the pose: so does the step */
      (void)ts_tool_proxy_follow(&out[i], sim->cmd_pos[i], sim->cmd_quat[i], sim->cmd_jaw[i], sim->max_step);
}

/* Refinement thread: the refinement of the snapshot (what the physics
 * thread did between two steps before: select, ts_refine_run with the
 * tools' allowances, XPBD's fit, the solver, the contact tree and the
 * topology). Touches nothing but q. */
static void refine_work(ts_job *j, ts_storage *st) {
  (void)st;
  struct ts_refine_req *q = (struct ts_refine_req *)j;
  uint64_t t0 = uv_hrtime();
  uint32_t *sel = NULL, n = 0;
  int rc = select_tris(q, &sel, &n, q->err, sizeof q->err);
  memset(&q->info, 0, sizeof q->info);
  if (!rc) {
    /* Loop with its smoothing rules unless asked for midpoints (ts_refine.h:
     * the smoothing limited, its blend as long as its rest change needs);
     * the default blend (ts_handover.h); the session's tools (spheres,
     * capsules, meshes, jaws) give the new nodes inside them their contact
     * allowance (made again at the install, where they are then) */
    ts_refine_opts o = {q->method, q->max_edge, q->max_nodes, q->smooth, 0, q->tools, TS_MAX_TOOLS, TS_REFINE_REBUILD_LOCAL,
                        TS_HANDOVER_MS_DEFAULT, 0};
    rc = ts_refine_run(q->src, q->snap, sel, n, &o, &q->nt, &q->nsrc, &q->info, q->err, sizeof q->err);
  }
  if (!rc && q->xpbd) {
    ts_xpbd_def def = q->def; /* the session's substeps and sweeps */
    def.damping = q->nt->drag;
    /* the hand-over's rest lengths fitted to XPBD's own step (ts_handover.h),
     * with the tools on the contact path the session steps them by (the
     * tree-based one when it has its trees); a fit that cannot run leaves
     * them as ts_refine_run made them. What the fit changed is kept apart:
     * the install makes the hand-over again at the state of then and adds
     * these corrections (ts_handover_renew), or fits again there from them
     * when the tissue has moved */
    if (q->nt->hand) {
      ts_handover_fit_stats fs = {NAN, 0, 0};
      q->rest_fix = calloc((size_t)q->nt->n_springs + 1, sizeof *q->rest_fix);
      if (q->rest_fix)
        (void)ts_handover_fit_carried(q->nt, q->snap, (const uint32_t(*)[2])q->info.parents, &def, q->fit_tools,
                                      TS_MAX_TOOLS, q->contact ? TS_FIT_POSED : 0, q->dt, q->rest_fix, &fs);
      q->fit_err = fs.err;
    }
    rc = ts_xpbd_build(q->nt, &def, &q->nx);
    if (rc) snprintf(q->err, sizeof q->err, "cannot rebuild the XPBD solver: %s", ts_strerror(rc));
  }
  if (!rc && q->contact) {
    q->nc = calloc(1, sizeof *q->nc);
    rc = q->nc ? ts_session_contact_init(q->nc, q->nt) : TS_ENOMEM;
    if (rc) snprintf(q->err, sizeof q->err, "cannot rebuild the collision tree: %s", ts_strerror(rc));
  }
  if (!rc && q->self) {
    /* self-contact's count against its limit and its tree, here rather
     * than on the physics thread at the install (which binds it) */
    rc = ts_session_self_build(q->nt, q->self_max, &q->self_tree, &q->self_nodes);
    if (rc) snprintf(q->err, sizeof q->err, "cannot rebuild the self-contact tree: %s", ts_strerror(rc));
  }
  if (!rc) {
    q->topo = ts_topology_from_tissue(q->nt);
    if (!q->topo) {
      rc = TS_ENOMEM;
      snprintf(q->err, sizeof q->err, "out of memory");
    }
  }
  q->rc = rc;
  free(sel);
  /* the source is done with; the snapshot's positions tell the install
   * how far the tissue has moved since */
  ts_refine_src_free(q->src);
  q->src = NULL;
  q->work_ms += (double)(uv_hrtime() - t0) * 1e-6;
}

/* Refinement thread: one round of the chase (see install): the fit again
 * at the fresh snapshot q->snap the physics thread took, from the
 * corrections so far, quick (TS_FIT_QUICK: a few trials on a smaller
 * region, 8-25 ms on the liver, so that the tissue moves about one step
 * meanwhile; a fit that cannot run keeps them). Touches nothing but q. */
static void chase_work(ts_job *j, ts_storage *st) {
  (void)st;
  struct ts_refine_req *q = (struct ts_refine_req *)j;
  uint64_t t0 = uv_hrtime();
  const uint32_t(*par)[2] = (const uint32_t(*)[2])q->info.parents;
  int rc = ts_refine_restate(q->nt, q->snap, par);
  if (!rc) {
    ts_xpbd_def def = q->def;
    def.damping = q->nt->drag;
    ts_handover_fit_stats fs = {NAN, 0, 0};
    (void)ts_handover_fit_carried(q->nt, q->snap, par, &def, q->fit_tools, TS_MAX_TOOLS,
                                  TS_FIT_QUICK | (q->contact ? TS_FIT_POSED : 0), q->dt, q->rest_fix, &fs);
    q->fit_err = fs.err;
  } else {
    snprintf(q->err, sizeof q->err, "cannot carry the refinement to the current state: %s", ts_strerror(rc));
  }
  q->rc = rc;
  q->work_ms += (double)(uv_hrtime() - t0) * 1e-6;
}

static void answer(ts_server *s, ts_session *se, refine_res *r);

/* Loop thread: the refinement thread is done with q (its room made, or its
 * refinement). A failure is answered here; otherwise q goes back to its
 * session's mailbox at `stage` for the physics thread, unless the session
 * has ended meanwhile (then it is dropped). */
static void to_session(struct ts_refine_req *q, int stage) {
  ts_server *s = q->server;
  ts_session *se = ts_server_find_session(s, q->session_id);
  if (!se || se->ending || q->rc) {
    refine_res *r = q->rc ? res_for(q, q->rc, q->err)
                          : res_for(q, TS_ENOSESSION, "the session ended while it was refined");
    answer(s, se && !se->ending ? se : NULL, r);
    ts_refine_req_free(q);
    return;
  }
  q->stage = stage;
  uv_mutex_lock(&se->mbox.lock);
  ts_refine_req_free(se->mbox.refine); /* none: refine_pending guards it */
  se->mbox.refine = q;
  uv_mutex_unlock(&se->mbox.lock);
}

/* Physics thread, between two steps: the snapshot's sizes, for the
 * refinement thread to make its room (room_work) before the snapshot is
 * taken (take_snapshot, when q comes back). Why: the snapshot's copy into
 * fresh memory was mostly the pages' first touch, on the physics thread,
 * which every session on that thread waits for: 13-32 ms of a
 * resolution-50 patch's (10,000 nodes, a real-time session at one substep)
 * and 340-440 ms of a resolution-200 patch's, against 0.5 ms when the
 * memory happened to be warm. */
static void ask_room(ts_session *se, struct ts_refine_req *q) {
  ts_session_sim *sim = &se->sim;
  uint64_t t0 = uv_hrtime();
  q->t_taken = t0;
  if (!sim->refine_src) {
    q->hold_ms = (double)(uv_hrtime() - t0) * 1e-6;
    post(se, res_for(q, TS_EUNSUPPORTED, "this session's tissue keeps no extrusion to refine"));
    dispose(se, q);
    return;
  }
  q->room_nodes = sim->tissue->n_nodes;
  q->room_springs = sim->tissue->n_springs;
  q->room_tris = sim->tissue->n_tris;
  q->room_hand = sim->tissue->hand != NULL;
  q->job.work = room_work;
  q->job.done = room_done;
  q->hold_ms = (double)(uv_hrtime() - t0) * 1e-6;
  ts_worker_submit(&se->server->refiner, &q->job);
}

/* Physics thread, between two steps: the snapshot of what the refinement
 * needs (into its room when the refinement thread could make it and the
 * tissue still has its sizes: a reset keeps them, a hand-over may have
 * ended meanwhile), handed to the refinement thread. */
static void take_snapshot(ts_session *se, struct ts_refine_req *q) {
  ts_session_sim *sim = &se->sim;
  uint64_t t0 = uv_hrtime();
  int rc = 0;
  const char *err = NULL;
  if (!sim->refine_src) {
    rc = TS_EUNSUPPORTED;
    err = "this session's tissue keeps no extrusion to refine";
  }
  if (!rc && q->room && ts_refine_snapshot_into(sim->tissue, q->room) == 0) {
    q->snap = q->room;
    q->room = NULL;
  } else if (!rc) {
    rc = ts_refine_snapshot(sim->tissue, &q->snap);
  }
  if (rc) {
    q->hold_ms += (double)(uv_hrtime() - t0) * 1e-6;
    post(se, res_for(q, rc, err ? err : "out of memory"));
    dispose(se, q);
    return;
  }
  /* the source is never changed once made: shared, not copied */
  q->src = ts_refine_src_share(sim->refine_src);
  memcpy(q->tools, sim->tools, sizeof q->tools);
  next_poses(sim, q->fit_tools);
  q->xpbd = sim->xpbd != NULL;
  q->contact = sim->contact != NULL;
  q->self = sim->self != NULL;
  q->self_max = sim->self ? sim->self->max_nodes : 0;
  q->def = sim->xpbd_def;
  q->dt = sim->dt;
  q->rest_epoch = sim->rest_epoch;
  q->job.work = refine_work;
  q->job.done = refine_done;
  q->hold_ms += (double)(uv_hrtime() - t0) * 1e-6;
  ts_worker_submit(&se->server->refiner, &q->job);
}

/* Physics thread, between two steps: the next round of XPBD's chase (see
 * install): a fresh snapshot of the tissue and the tools (the state the
 * fit is made at), into the last one's arrays (0.6 ms on the liver), for
 * the refinement thread (the physics thread's time from t0 on counted into
 * q->hold_ms before q is handed over: the refinement thread owns q from
 * then on). 0 or TS_ENOMEM (q->snap may then hold part of the current
 * state: nothing reads it after a chase that failed). */
static int chase(ts_session *se, struct ts_refine_req *q, uint64_t t0) {
  ts_session_sim *sim = &se->sim;
  int rc = ts_refine_snapshot_into(sim->tissue, q->snap);
  if (rc == TS_EMISMATCH) { /* not the snapshot's sizes (it cannot be: the install checked) */
    ts_tissue *snap = NULL;
    rc = ts_refine_snapshot(sim->tissue, &snap);
    if (!rc) {
      ts_tissue_destroy(q->snap);
      q->snap = snap;
    }
  }
  if (rc) return rc;
  memcpy(q->tools, sim->tools, sizeof q->tools);
  next_poses(sim, q->fit_tools);
  q->dt = sim->dt;
  q->rounds++;
  q->job.work = chase_work;
  q->job.done = refine_done;
  q->hold_ms += (double)(uv_hrtime() - t0) * 1e-6;
  ts_worker_submit(&se->server->refiner, &q->job);
  return 0;
}

/* Physics thread, between two steps: installs q's refinement (see the top
 * of this file) and posts the TS_EV_REFINED event. */
static void install(ts_session *se, struct ts_refine_req *q) {
  ts_session_sim *sim = &se->sim;
  uint64_t t0 = uv_hrtime();
  int rc = 0;
  char err[256] = "";
  const uint32_t(*par)[2] = (const uint32_t(*)[2])q->info.parents;
  if (q->rest_epoch != sim->rest_epoch || !sim->refine_src ||
      sim->tissue->n_nodes != q->nt->n_nodes - q->info.new_nodes) {
    rc = TS_EMISMATCH;
    snprintf(err, sizeof err,
             "the tissue was put back at rest while it was refined; nothing changed, ask again");
  }
  /* XPBD: the fit's corrections carry only as far as the tissue has not
   * moved much since its snapshot (ts_handover.h): further away, the
   * refinement thread fits again at a fresh snapshot (the chase, a few
   * rounds at most), and only a tissue still too far from the last fit
   * after them is fitted here */
  int plan = TS_INSTALL_CARRY;
  if (!rc && q->rest_fix && q->nt->hand) {
    q->drift = ts_handover_drift(sim->tissue, q->snap);
    plan = ts_handover_install_plan(q->drift, q->fit_err, q->rounds);
    if (plan == TS_INSTALL_CHASE && chase(se, q, t0) == 0) return; /* q is the refinement thread's now */
    if (plan == TS_INSTALL_CHASE) plan = TS_INSTALL_REFIT; /* no memory for a snapshot */
  }
  /* the current state: old nodes as they are now, new ones at the current
   * midpoints; the hand-over made again here, with the fit's corrections */
  if (!rc) rc = ts_refine_restate(q->nt, sim->tissue, par);
  if (!rc) rc = ts_handover_renew(q->nt, sim->tissue, par, sim->tools, TS_MAX_TOOLS, q->rest_fix);
  if (!rc && plan == TS_INSTALL_REFIT) {
    /* the fit again here, from the corrections (a fit that cannot run
     * leaves the renewed hand-over as it is) */
    ts_xpbd_def def = q->def;
    def.damping = q->nt->drag;
    ts_tool next[TS_MAX_TOOLS];
    next_poses(sim, next);
    (void)ts_handover_fit_carried(q->nt, sim->tissue, par, &def, next, TS_MAX_TOOLS,
                                  q->contact ? TS_FIT_POSED : 0, sim->dt, q->rest_fix, NULL);
    q->refitted = 1;
  }
  /* a mass-spring session's refined tissue takes the tools' last poses
   * from the one it replaces (ts_massspring_carry_tools; nt was prepared
   * on the refinement thread, so no allocation here), so that its first
   * step's friction sees a moving tool move as the unrefined tissue's
   * would (without it the tool stands in that step and its friction holds
   * the tissue back: 2.5 um against 0.5 um off the twin's step on the
   * node the sphere drags, test_refine_async's async case with the daemon's
   * default friction) */
  if (!rc && !sim->xpbd) rc = ts_massspring_carry_tools(q->nt, sim->tissue);
  if (rc && !err[0]) snprintf(err, sizeof err, "cannot install the refinement: %s", ts_strerror(rc));
  if (rc) {
    q->hold_ms += (double)(uv_hrtime() - t0) * 1e-6;
    post(se, res_for(q, rc, err));
    dispose(se, q);
    return;
  }
  /* old node indices hold, so the tools' state stays; grasps and contact
   * workspaces start afresh on the new trees. The new solver (or contact)
   * takes each tool's last pose from the one it replaces, so that its first
   * step sweeps a moving tool from there as the unrefined tissue's would
   * (without it the tool's motion in that step arrives in its first
   * substep: 1.6 um more in test_refine_async's async case fitted again at the
   * install, measured) */
  q->nt->stop = sim->tissue->stop;
  q->spent = sim->tissue; /* freed off this thread (dispose) */
  sim->tissue = q->nt;
  q->nt = NULL;
  q->spent_src = sim->refine_src;
  sim->refine_src = q->nsrc;
  q->nsrc = NULL;
  /* the solver and contact trees they replace go into q, to be freed off
   * this thread with the old tissue (dispose) */
  if (q->nx) {
    ts_xpbd_carry_tools(q->nx, sim->xpbd);
    ts_xpbd *old = sim->xpbd;
    sim->xpbd = q->nx;
    q->nx = old;
  }
  if (q->nc) {
    ts_session_contact_carry(q->nc, sim->contact);
    ts_session_contact *old = sim->contact;
    sim->contact = q->nc;
    q->nc = old;
  }
  if (sim->self) { /* on the new tree, or off for this tissue (session_self.h) */
    ts_session_self_install(sim->self, sim->tissue, q->self_tree, q->self_nodes, sim->xpbd);
    q->self_tree = NULL;
  }
  sim->next_frame_time = sim->tissue->time; /* the new topology's first frame right away */
  q->hold_ms += (double)(uv_hrtime() - t0) * 1e-6;
  refine_res *r = res_for(q, 0, NULL);
  r->topo = q->topo;
  q->topo = NULL;
  r->vertex_count = q->info.n_nodes;
  r->triangle_count = q->info.n_tris;
  r->selected = q->info.selected;
  r->new_vertices = q->info.new_nodes;
  r->step = sim->steps;
  r->refitted = q->refitted;
  /* the local mass scaling the refined tissue was prepared with (a
   * mass-spring session's; XPBD and the quasi-static solve do not use it) */
  if (!sim->xpbd && !sim->shortcut && ts_massspring_local_mass(sim->tissue, &r->lm, NULL) == 0 &&
      r->lm.tissue_mass > 0)
    sim->added_mass = r->lm.added / r->lm.tissue_mass;
  r->rounds = q->rounds;
  r->drift = q->drift;
  post(se, r);
  dispose(se, q);
}

void ts_refine_physics(ts_session *se) {
  uv_mutex_lock(&se->mbox.lock);
  struct ts_refine_req *q = se->mbox.refine;
  se->mbox.refine = NULL;
  uv_mutex_unlock(&se->mbox.lock);
  if (!q) return;
  if (q->stage == REQ_REFINED)
    install(se, q);
  else if (q->stage == REQ_RESERVED)
    take_snapshot(se, q);
  else
    ask_room(se, q);
}

/* ---- loop thread: the answer ---- */

void ts_refine_event_free(void *payload) {
  refine_res *r = payload;
  if (!r) return;
  ts_topology_free(r->topo);
  free(r);
}

/* Loop thread: answers r (and frees it); se NULL when the session has
 * ended meanwhile (a failure's answer then). */
static void answer(ts_server *s, ts_session *se, refine_res *r) {
  if (se) se->refine_pending = 0;
  if (se && r->rc == 0 && r->topo) {
    ts_topology_free(se->topo);
    se->topo = r->topo;
    r->topo = NULL;
    if (se->latest) { /* of the old vertex count */
      ts_frame_release(se->latest);
      se->latest = NULL;
    }
    for (ts_conn *c = se->clients; c; c = c->next_in_session)
      if (c->baseline) { /* every client's next frame is a keyframe */
        ts_frame_release(c->baseline);
        c->baseline = NULL;
      }
    s->refinements++;
    ts_log_info("session %u refined (%s): %u triangles selected, %u new vertices, now %u vertices and %u "
                "triangles, after step %llu: %.1f ms on the refinement thread (%d XPBD fits again at fresh "
                "snapshots; %.1f um moved since the last), %.2f ms on the physics thread%s, %.1f ms from "
                "request to install",
                se->id, r->method == TS_REFINE_LEB ? "LEB" : "Loop", r->selected, r->new_vertices, r->vertex_count, r->triangle_count,
                (unsigned long long)r->step, r->work_ms, r->rounds, r->drift * 1e6, r->millis,
                r->refitted ? " (the XPBD fit again there: the tissue had moved too far)" : "", r->total_ms);
    if (r->lm.nodes > 0)
      ts_log_info("session %u: local mass scaling: %.4g g of inertia added to %u nodes of the refined "
                  "region (%.0f %% of their mass, %.2f %% of the tissue's), for a stable substep of "
                  "%.3g us as before the refinement",
                  se->id, r->lm.added * 1e3, r->lm.nodes, 100 * r->lm.added / r->lm.region_mass,
                  100 * r->lm.added / r->lm.tissue_mass, r->lm.target_dt * 1e6);
  } else if (r->rc == TS_ESHUTDOWN) { /* its preparation stopped (ts_tissue.stop): not refused */
    ts_log_info("session %u: refinement not finished: the server is shutting down (%s)",
                r->session_id, r->err);
  } else {
    s->refinements_refused++;
    ts_log_info("session %u: refinement refused: %s", r->session_id, r->err);
  }
  ts_conn *c = ts_server_find_conn(s, r->conn_id);
  const uint32_t sid = r->session_id;
  if (c && !c->closing) {
    if (r->rc) {
      ts_send_error(c, r->rid, r->rc, "refine session %u: %s", sid, r->err);
    } else {
      Tissued__V1__Refined m = TISSUED__V1__REFINED__INIT;
      m.session_id = sid;
      m.vertex_count = r->vertex_count;
      m.triangle_count = r->triangle_count;
      m.selected_triangles = r->selected;
      m.new_vertices = r->new_vertices;
      m.step = r->step;
      m.millis = (float)r->millis;
      Envelope env = TISSUED__V1__ENVELOPE__INIT;
      env.request_id = r->rid;
      env.body_case = TISSUED__V1__ENVELOPE__BODY_REFINED;
      env.refined = &m;
      size_t len = tissued__v1__envelope__get_packed_size(&env);
      uint8_t buf[256];
      if (len <= sizeof buf) {
        tissued__v1__envelope__pack(&env, buf);
        ts_conn_send(c, buf, len);
      }
    }
  }
  ts_refine_event_free(r);
}

void ts_refine_on_event(ts_server *s, ts_session *se, void *payload) { answer(s, se, payload); }

void ts_refine_session_ended(ts_server *s, ts_session *se) {
  uv_mutex_lock(&se->mbox.lock);
  struct ts_refine_req *q = se->mbox.refine;
  se->mbox.refine = NULL;
  uv_mutex_unlock(&se->mbox.lock);
  if (!q) return;
  answer(s, NULL, res_for(q, TS_ENOSESSION, "the session ended before the refinement was installed"));
  ts_refine_req_free(q);
}
