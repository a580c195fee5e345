/*
 * session_contact.c: the tree-based tool contact of XPBD sessions (see
 * session_contact.h): builds a tool's OBB tree and workspaces when its shape
 * changes, then steps the solver with every active tool moving from its last
 * pose to the current one (ts_xpbd_step_posed: swept contact against
 * tunnelling, Coulomb friction with the tool's mu_static and mu_kinetic,
 * grasp by the jaws).
 */
#include "session_contact.h"

#include <string.h>

#include "core/ts_error.h"
#include "core/ts_tool_tree.h"

int ts_session_contact_init(ts_session_contact *sc, const ts_tissue *t) {
  memset(sc, 0, sizeof *sc);
  return ts_aabb_tree_create_tissue(NULL, t, &sc->tree);
}

static void free_tool(ts_session_ptool *p) {
  if (!p->otree) return;
  ts_posed_tool_free(&p->pt);
  ts_contact_ws_free(&p->ws);
  if (p->has_grasp) ts_grasp_free(&p->grasp);
  if (p->owns_tree) ts_obb_tree_destroy(p->otree);
  memset(p, 0, sizeof *p);
}

void ts_session_contact_free(ts_session_contact *sc) {
  if (!sc) return;
  for (int i = 0; i < TS_MAX_TOOLS; i++) free_tool(&sc->tool[i]);
  ts_aabb_tree_destroy(sc->tree);
  sc->tree = NULL;
}

void ts_session_contact_reset(ts_session_contact *sc) {
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    if (sc->tool[i].has_grasp) ts_grasp_release(&sc->tool[i].grasp);
    if (sc->tool[i].otree) ts_contact_forget(&sc->tool[i].ws);
    sc->tool[i].have_last = 0;
  }
}

void ts_session_contact_carry(ts_session_contact *sc, const ts_session_contact *from) {
  if (!sc || !from || sc == from) return;
  /* a tool not built yet keeps these through its first build (build_tool
   * frees nothing there and sets neither) */
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    if (sc->tool[i].otree) continue;
    sc->tool[i].last = from->tool[i].last;
    sc->tool[i].have_last = from->tool[i].have_last;
  }
}

/* (Re)builds tool p for the shape of t: tree, placed copy, contact
 * workspace (room for every node: a tool may press a whole small patch),
 * grasp for jaws. */
static int build_tool(ts_session_ptool *p, const ts_tool *t, const ts_tissue *tis) {
  free_tool(p);
  int rc = ts_tool_tree_make(t, &p->otree, &p->owns_tree); /* as tool against tool's */
  if (rc) return rc;
  rc = ts_posed_tool_init(&p->pt, p->otree);
  if (!rc) rc = ts_contact_ws_init(&p->ws, NULL, tis->n_nodes, tis->n_nodes, ts_tissue_n_contact_tris(tis));
  if (!rc && t->kind == TS_TOOL_JAWS) {
    rc = ts_grasp_init(&p->grasp, NULL, tis->n_nodes, tis->n_nodes);
    p->has_grasp = rc == 0;
  }
  if (rc) {
    /* each part is zeroed until initialised, and zeroed parts free safely */
    ts_posed_tool_free(&p->pt);
    ts_contact_ws_free(&p->ws);
    if (p->owns_tree) ts_obb_tree_destroy(p->otree);
    memset(p, 0, sizeof *p);
    return rc;
  }
  p->kind = t->kind;
  p->shape = t->shape;
  p->radius = t->radius;
  p->length = t->length;
  return 0;
}

int ts_session_contact_step(ts_session_contact *sc, ts_xpbd *x, ts_tissue *t, double dt,
                            ts_tool tools[TS_MAX_TOOLS], ts_xpbd_stats *stats) {
  ts_xpbd_tool xt[TS_MAX_TOOLS];
  int idx[TS_MAX_TOOLS];
  int n = 0;
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    ts_tool *tool = &tools[i];
    ts_session_ptool *p = &sc->tool[i];
    if (!tool->active) {
      if (p->has_grasp) ts_grasp_release(&p->grasp);
      if (p->otree) ts_contact_forget(&p->ws); /* no friction anchors on return */
      p->have_last = 0;
      continue;
    }
    if (!p->otree || p->kind != tool->kind || p->radius != tool->radius ||
        p->length != tool->length || p->shape != tool->shape) {
      int rc = build_tool(p, tool, t);
      if (rc) return rc;
    }
    /* the tool's friction (ts_tool.h) is the contact's (ts_contact.h) */
    if (ts_tool_friction_valid(tool->mu_static, tool->mu_kinetic)) return TS_EINVAL;
    p->ws.def.mu_static = tool->mu_static;
    p->ws.def.mu_kinetic = tool->mu_kinetic;
    ts_pose now;
    memcpy(now.p, tool->pos, sizeof now.p);
    memcpy(now.q, tool->quat, sizeof now.q);
    now.jaw = tool->jaw;
    memset(&xt[n], 0, sizeof xt[n]);
    xt[n].posed = &p->pt;
    xt[n].prev = p->have_last ? p->last : now;
    xt[n].pose = now;
    xt[n].contact = &p->ws;
    xt[n].grasp = p->has_grasp ? &p->grasp : NULL;
    idx[n++] = i;
  }
  int rc = ts_xpbd_step_posed(x, t, dt, NULL, 0, sc->tree, xt, n, stats);
  if (rc) return rc;
  for (int k = 0; k < n; k++) {
    ts_tool *tool = &tools[idx[k]];
    ts_session_ptool *p = &sc->tool[idx[k]];
    memcpy(tool->force, xt[k].force, sizeof tool->force);
    memcpy(tool->torque, xt[k].torque, sizeof tool->torque);
    tool->contacts = xt[k].contacts + xt[k].held;
    p->last = xt[k].pose;
    p->have_last = 1;
  }
  return 0;
}
