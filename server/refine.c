/*
 * refine.c: RefineRegion in a running session (see refine.h). The loop
 * thread checks who asks and what, and leaves the request in the session's
 * mailbox; the physics thread, which owns the tissue, refines it between two
 * steps (core/ts_refine.h: old nodes keep their indices and state, new ones
 * are appended at the midpoints of the current state, and the hand-over of
 * core/ts_handover.h keeps the next steps continuous), rebuilds the solver
 * data (XPBD and its contact trees) and the topology, and posts one
 * TS_EV_REFINED event. The outbox is one queue, so the loop installs the new
 * topology before it sees the first frame of the refined tissue: frames
 * published before are encoded with the old topology, every frame after as
 * a keyframe (each client's delta base is dropped, and ts_session_on_frame
 * refuses a base of another vertex count anyway).
 */
#include "refine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_handover.h"
#include "core/ts_refine.h"
#include "log.h"
#include "server.h"
#include "session_contact.h"

#define TS_REFINE_DEFAULT_RANGE 0.005 /* m: a pick's region when range is 0 */

typedef Tissued__V1__Envelope Envelope;

struct ts_refine_req {
  uint64_t conn_id, rid;
  int method;             /* TS_REFINE_* */
  uint32_t *tris;         /* render triangle indices; NULL: by ray */
  uint32_t n_tris;
  double origin[3], dir[3];
  double range, max_edge; /* m */
  uint32_t max_nodes;
};

typedef struct refine_res {
  uint64_t conn_id, rid;
  int rc;
  char err[256];
  ts_topology *topo;      /* the new topology on success */
  uint32_t vertex_count, triangle_count, selected, new_vertices;
  uint64_t step;
  double millis;
  int method;
} refine_res;

void ts_refine_req_free(struct ts_refine_req *q) {
  if (!q) return;
  free(q->tris);
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
  q->conn_id = c->id;
  q->rid = rid;
  q->method = m->method == TISSUED__V1__REFINE_REGION__METHOD__LEB ? TS_REFINE_LEB : TS_REFINE_LOOP;
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

/* ---- physics thread: the refinement ---- */

static int select_tris(ts_session_sim *sim, const struct ts_refine_req *q, uint32_t **sel,
                       uint32_t *n, char *err, size_t cap) {
  const ts_refine_src *src = sim->refine_src;
  if (q->n_tris) {
    *sel = malloc(sizeof **sel * q->n_tris);
    if (!*sel) return TS_ENOMEM;
    for (uint32_t i = 0; i < q->n_tris; i++) {
      if (ts_refine_surface_tri(src, sim->tissue, q->tris[i], &(*sel)[i])) {
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
  int rc = ts_refine_pick(src, sim->tissue, q->origin, q->dir, q->range, sel, n, NULL);
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

void ts_refine_physics(ts_session *se) {
  uv_mutex_lock(&se->mbox.lock);
  struct ts_refine_req *q = se->mbox.refine;
  se->mbox.refine = NULL;
  uv_mutex_unlock(&se->mbox.lock);
  if (!q) return;
  ts_session_sim *sim = &se->sim;
  uint64_t t0 = uv_hrtime();
  refine_res *r = calloc(1, sizeof *r);
  while (!r) { /* the loop waits for this answer */
    uv_sleep(1);
    r = calloc(1, sizeof *r);
  }
  r->conn_id = q->conn_id;
  r->rid = q->rid;
  r->method = q->method;
  uint32_t *sel = NULL, n = 0;
  ts_tissue *nt = NULL;
  ts_refine_src *nsrc = NULL;
  ts_xpbd *nx = NULL;
  ts_session_contact *nc = NULL;
  ts_topology *topo = NULL;
  int rc = 0;
  if (!sim->refine_src) {
    rc = TS_EUNSUPPORTED;
    snprintf(r->err, sizeof r->err, "this session's tissue keeps no extrusion to refine");
  }
  if (!rc) rc = select_tris(sim, q, &sel, &n, r->err, sizeof r->err);
  ts_refine_info info;
  memset(&info, 0, sizeof info);
  if (!rc) {
    /* the default blend (ts_handover.h); the session's tools (spheres,
     * capsules, meshes, jaws) give the new nodes inside them their contact
     * allowance */
    ts_refine_opts o = {q->method, q->max_edge, q->max_nodes, 0, 0, sim->tools, TS_MAX_TOOLS};
    rc = ts_refine_run(sim->refine_src, sim->tissue, sel, n, &o, &nt, &nsrc, &info, r->err,
                       sizeof r->err);
  }
  if (!rc && sim->xpbd) {
    ts_xpbd_def def = sim->xpbd_def; /* the session's substeps and sweeps */
    def.damping = nt->drag;
    /* the hand-over's rest lengths fitted to XPBD's own step (ts_handover.h),
     * with the tools on the contact path the session steps them by (the
     * tree-based one when it has its trees); a fit that cannot run leaves
     * them as ts_refine_run made them */
    if (nt->hand)
      (void)ts_handover_fit_xpbd(nt, sim->tissue, (const uint32_t(*)[2])info.parents, &def, sim->tools,
                                 TS_MAX_TOOLS, sim->contact ? TS_FIT_POSED : 0, sim->dt, NULL);
    rc = ts_xpbd_build(nt, &def, &nx);
    if (rc) snprintf(r->err, sizeof r->err, "cannot rebuild the XPBD solver: %s", ts_strerror(rc));
  }
  free(info.parents);
  if (!rc && sim->contact) {
    nc = calloc(1, sizeof *nc);
    rc = nc ? ts_session_contact_init(nc, nt) : TS_ENOMEM;
    if (rc) snprintf(r->err, sizeof r->err, "cannot rebuild the collision tree: %s", ts_strerror(rc));
  }
  if (!rc) {
    topo = ts_topology_from_tissue(nt);
    if (!topo) {
      rc = TS_ENOMEM;
      snprintf(r->err, sizeof r->err, "out of memory");
    }
  }
  if (!rc) {
    /* install: old node indices hold, so the tools' state stays; grasps and
     * contact workspaces start afresh on the new trees */
    ts_tissue_destroy(sim->tissue);
    sim->tissue = nt;
    nt = NULL;
    ts_refine_src_free(sim->refine_src);
    sim->refine_src = nsrc;
    nsrc = NULL;
    if (nx) {
      ts_xpbd_destroy(sim->xpbd);
      sim->xpbd = nx;
      nx = NULL;
    }
    if (nc) {
      ts_session_contact_free(sim->contact);
      free(sim->contact);
      sim->contact = nc;
      nc = NULL;
    }
    sim->next_frame_time = sim->tissue->time; /* the new topology's first frame right away */
    r->topo = topo;
    topo = NULL;
    r->vertex_count = info.n_nodes;
    r->triangle_count = info.n_tris;
    r->selected = info.selected;
    r->new_vertices = info.new_nodes;
    r->step = sim->steps;
  }
  r->rc = rc;
  r->millis = (double)(uv_hrtime() - t0) * 1e-6;
  ts_topology_free(topo);
  if (nc) {
    ts_session_contact_free(nc);
    free(nc);
  }
  ts_xpbd_destroy(nx);
  ts_refine_src_free(nsrc);
  ts_tissue_destroy(nt);
  free(sel);
  ts_refine_req_free(q);
  post(se, r);
}

/* ---- loop thread: the answer ---- */

void ts_refine_event_free(void *payload) {
  refine_res *r = payload;
  if (!r) return;
  ts_topology_free(r->topo);
  free(r);
}

void ts_refine_on_event(ts_server *s, ts_session *se, void *payload) {
  refine_res *r = payload;
  se->refine_pending = 0;
  if (r->rc == 0 && r->topo) {
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
                "triangles, after step %llu, %.1f ms",
                se->id, r->method == TS_REFINE_LEB ? "LEB" : "Loop", r->selected, r->new_vertices, r->vertex_count, r->triangle_count,
                (unsigned long long)r->step, r->millis);
  } else {
    s->refinements_refused++;
    ts_log_info("session %u: refinement refused: %s", se->id, r->err);
  }
  ts_conn *c = ts_server_find_conn(s, r->conn_id);
  if (c && !c->closing) {
    if (r->rc) {
      ts_send_error(c, r->rid, r->rc, "refine session %u: %s", se->id, r->err);
    } else {
      Tissued__V1__Refined m = TISSUED__V1__REFINED__INIT;
      m.session_id = se->id;
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
        c->ops->send(c, buf, len);
      }
    }
  }
  ts_refine_event_free(r);
}
