/*
 * ts_ms_grasp.c: grasper jaws holding tissue in the mass-spring step
 * (issue 5; ts_grasp.h is the grasp itself, shared with the XPBD sessions).
 *
 * Which nodes are held is ts_grasp's rule, not a copy of it: at the start
 * of each step a jaws tool's candidates are taken as the XPBD contact takes
 * them (ts_contact_begin on the tissue's surface tree, the one the thin
 * mesh tools' pass keeps, ts_ms_contact.c), and ts_grasp_update holds those
 * within reach of a jaw while the jaws close below close_below (and at
 * every further narrowing), and lets all go when they open past
 * open_above. The candidates are measured with the tool at its last step's
 * pose (with this step's opening): that is where the nodes are at the
 * start of the step, so a node's tool-frame coordinates l = R^T (x - p)
 * are its place on the jaws as they close.
 *
 * A held node is kinematic. The integrator updates it as any free node
 * (with lumped masses its remembered accelerations are then those of the
 * forces at its place, so Beeman's history is ready when it is let go;
 * with the scaled mass matrix they are zero, the constraint below, as for
 * a node the jaws carry at a steady speed), and after each substep
 * (after strain limiting) it is put at R l + p for the tool's pose the
 * fraction (k + 1) / n of the way from its last step's pose to this one
 * (ts_pose_lerp), with the tool's rigid velocity there, v = v_tool + w x
 * (x - p) (ts__ms_tool_motion's, constant over the step), and Verlet's
 * previous position x - v h, so that either branch continues from a state
 * that moves with the jaws. Let go, it keeps that velocity and history: it
 * is free again from the next substep on.
 *
 * Contact. Otherwise the jaws push the tissue as any tool
 * (ts_ms_contact.c): a free node inside a jaw box is projected out by the
 * jaws' signed distance (ts_contact_tool_sdf, of the nearer box) at this
 * step's pose and opening, with the reaction and friction of the other
 * tools; the nodes the jaws hold are not in their contact, and a node they
 * take loses its contact mark (its force goes to the tool through the
 * grasp instead).
 *
 * Force. What the jaws hold back is the rest of the node's force: the
 * tissue's springs and dampers on it (t->f of the substep, at its start),
 * gravity, drag and the external forces, with the physical mass, as the
 * integrator sums them. The sum over the held nodes is the force on the
 * tool, its moment about the tool's tip the torque, averaged over the
 * substeps like the contact reactions (and filtered with them by the
 * session's haptic filter). The held nodes' own inertia (m a) is left out:
 * the jaws' pose changes at the step's rate, and a few nodes' mass times
 * that jolt would only add noise to the haptic force. In a held static
 * pull the sum is the anchors' reaction plus the weight of the free
 * tissue, the same balance as a pressing tool's (test_ms_grasp).
 *
 * Scaled mass matrices (extruded tissues, ts_ms_sms.c): the column's solve
 * couples a node's acceleration to its column's, so the integrator applies
 * on each held node the force that makes its acceleration zero, through
 * the column (ts_ms_integrate.c, as a contact's normal reaction): the free
 * nodes of its column then move as next to a node the jaws carry. The
 * tool's force is the held nodes' force as above, which that constraint
 * force equals at rest; in motion it leaves out the column's coupling, as
 * it leaves out the held nodes' inertia.
 *
 * Memory: a jaws tool's tree, placed copy, candidate workspace and grasp
 * are made at the first step that sees it (and again when its shape
 * changes), and freed with the step's data; steps after that allocate
 * nothing. Each step with active jaws refits the surface tree for the
 * candidates (ts_aabb_tree_refit: only what left its fat box), which a
 * step without jaws (or thin mesh tools) does not do.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_contact.h"
#include "ts_error.h"
#include "ts_grasp.h"
#include "ts_ms_internal.h"
#include "ts_obb_tree.h"

struct ts__msgrasp {
  ts_obb_tree *otree;
  double radius, length; /* the tool's, that otree was built for */
  ts_posed_tool pt;
  ts_contact_ws ws; /* the candidates of ts_grasp_update */
  ts_grasp g;
  uint32_t n_nodes;
  uint32_t *slot;   /* n_nodes: per held node (by its index in g), its slot
                       in ms->col's order; n_slot of them are set */
  uint32_t *inv;    /* n_nodes: scratch, node -> slot */
  uint32_t n_slot;
};

void ts__ms_grasp_free(struct ts__msgrasp *mg) {
  if (!mg) return;
  ts_grasp_free(&mg->g);
  ts_contact_ws_free(&mg->ws);
  ts_posed_tool_free(&mg->pt);
  ts_obb_tree_destroy(mg->otree);
  free(mg->slot);
  free(mg->inv);
  free(mg);
}

void ts__ms_grasp_release(struct ts__msgrasp *mg) {
  if (mg) ts_grasp_release(&mg->g);
}

uint32_t ts__ms_grasp_held(const struct ts__msgrasp *mg) { return mg ? mg->g.n : 0; }

uint32_t ts__ms_grasp_slots(const struct ts__msgrasp *mg, const uint32_t **out) {
  *out = mg ? mg->slot : NULL;
  return mg ? mg->n_slot : 0;
}

/* The held nodes' slots in the scaled mass matrix's column order (the
 * integrator's constraint on them, ts_ms_integrate.c); none without it. */
static void find_slots(const ts_tissue *t, const struct ts__ms *ms, struct ts__msgrasp *mg) {
  mg->n_slot = 0;
  if (!ms->sms || mg->g.n == 0) return;
  const uint32_t nk = ms->nv * ms->S;
  if (!ms->col_identity) {
    for (uint32_t i = 0; i < t->n_nodes; i++) mg->inv[i] = UINT32_MAX;
    for (uint32_t k = 0; k < nk; k++)
      if (ms->col[k] < t->n_nodes) mg->inv[ms->col[k]] = k;
  }
  for (uint32_t j = 0; j < mg->g.n; j++) {
    const uint32_t i = mg->g.node[j], k = ms->col_identity ? i : mg->inv[i];
    if (k < nk) mg->slot[mg->n_slot++] = k;
  }
}

/* A grasp for tool tl on t, everything zeroed until made. */
static int make(const ts_tissue *t, const ts_tool *tl, struct ts__msgrasp **out) {
  struct ts__msgrasp *mg = calloc(1, sizeof *mg);
  if (!mg) return TS_ENOMEM;
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_JAWS;
  d.radius = tl->radius;
  if (tl->length > 0) d.length = tl->length; /* else the default jaw length */
  int rc = ts_obb_tree_create(&d, &mg->otree);
  if (!rc) rc = ts_posed_tool_init(&mg->pt, mg->otree);
  const uint32_t nct = ts_tissue_n_contact_tris(t); /* the boundary ts__ms_surface_tree holds */
  if (!rc) rc = ts_contact_ws_init(&mg->ws, NULL, t->n_nodes, t->n_nodes, nct ? nct : 1);
  if (!rc) rc = ts_grasp_init(&mg->g, NULL, t->n_nodes, t->n_nodes);
  if (!rc) {
    mg->slot = malloc(sizeof *mg->slot * t->n_nodes);
    mg->inv = malloc(sizeof *mg->inv * t->n_nodes);
    if (!mg->slot || !mg->inv) rc = TS_ENOMEM;
  }
  if (rc) {
    ts__ms_grasp_free(mg);
    return rc;
  }
  mg->radius = tl->radius;
  mg->length = tl->length;
  mg->n_nodes = t->n_nodes;
  *out = mg;
  return 0;
}

int ts__ms_grasp_begin(ts_tissue *t, struct ts__ms *ms, ts__ptool *p, int i) {
  const ts_tool *tl = p->tool;
  struct ts__msgrasp *mg = ms->grasp[i];
  if (mg && (mg->radius != tl->radius || mg->length != tl->length || mg->n_nodes != t->n_nodes)) {
    ts__ms_grasp_free(mg);
    mg = ms->grasp[i] = NULL;
  }
  if (!mg) {
    int rc = make(t, tl, &ms->grasp[i]);
    if (rc) return rc;
    mg = ms->grasp[i];
  }
  p->grasp = mg;
  if (t->h_prev == 0) ts_grasp_release(&mg->g); /* a start or a reset: the tissue is at rest */
  ts_pose from, to;
  memcpy(from.p, p->from_pos, sizeof from.p);
  memcpy(from.q, p->from_q, sizeof from.q);
  memcpy(to.p, tl->pos, sizeof to.p);
  memcpy(to.q, ms->tl_quat[i], sizeof to.q); /* normalised (a zero one: the identity) */
  from.jaw = to.jaw = tl->jaw;
  ts_aabb_tree *tree = ts__ms_surface_tree(t, ms);
  if (!tree) {
    /* no surface to take candidates from: nothing new is held, but the
     * jaws still let go when they open */
    mg->ws.n = 0;
  } else {
    int rc = ts_contact_begin(&mg->ws, &mg->pt, &from, &to, tree, t->inv_mass, ts_grasp_held(&mg->g));
    if (rc && rc != TS_EFULL) return rc;
  }
  /* the candidates measured at the pose the nodes are at: the last step's */
  int rc = ts_posed_tool_set_pose(&mg->pt, &from);
  if (rc) return rc;
  rc = ts_grasp_update(&mg->g, &mg->pt, &mg->ws, (const double (*)[3])t->x);
  if (rc < 0 && rc != TS_EFULL) return rc;
  find_slots(t, ms, mg);
  /* the jaws' contact (ts_ms_contact.c) at this step's pose; the nodes
   * they hold are not its */
  rc = ts_posed_tool_set_pose(&mg->pt, &to);
  if (rc) return rc;
  p->jaws = &mg->pt;
  p->held = ts_grasp_held(&mg->g);
  memcpy(p->bc, tl->pos, sizeof p->bc);
  p->skin = mg->otree->reach * TS__SKIN;
  const double br = mg->otree->reach + p->skin;
  p->br2 = br * br;
  return 0;
}

void ts__ms_grasp_place(ts_tissue *t, const struct ts__ms *ms, ts__ptool *p, double s, double h) {
  struct ts__msgrasp *mg = p->grasp;
  if (!mg || mg->g.n == 0) return;
  const ts_tool *tl = p->tool;
  ts_pose a, b, ps;
  memcpy(a.p, p->from_pos, sizeof a.p);
  memcpy(a.q, p->from_q, sizeof a.q);
  memcpy(b.p, tl->pos, sizeof b.p);
  memcpy(b.q, ms->tl_quat[p->index], sizeof b.q); /* normalised, as ts__ms_tool_motion left it */
  a.jaw = b.jaw = tl->jaw;
  ts_pose_lerp(&a, &b, s > 1 ? 1 : s, &ps);
  double R[3][3];
  ts_quat_to_mat(ps.q, R);
  const double g[3] = {t->gravity[0], t->gravity[1], t->gravity[2]};
  const double *w = p->omega;
  for (uint32_t j = 0; j < mg->g.n; j++) {
    const uint32_t i = mg->g.node[j];
    if (!(t->inv_mass[i] > 0)) continue;
    const double *l = mg->g.local[j];
    double *x = t->x[i], *v = t->v[i], *xp = t->x_prev[i];
    double r[3];
    for (int c = 0; c < 3; c++) {
      r[c] = R[c][0] * l[0] + R[c][1] * l[1] + R[c][2] * l[2];
      x[c] = r[c] + ps.p[c];
    }
    v[0] = p->vel[0] + w[1] * r[2] - w[2] * r[1];
    v[1] = p->vel[1] + w[2] * r[0] - w[0] * r[2];
    v[2] = p->vel[2] + w[0] * r[1] - w[1] * r[0];
    for (int c = 0; c < 3; c++) xp[c] = x[c] - v[c] * h;
    /* the force the jaws hold back: the springs' at the substep's start
     * (t->f) and the rest at the jaws' velocity, which the node had then
     * (held through the last substep; the jaws' velocity is the step's) */
    const double m = ms->mass[i];
    double f[3];
    for (int c = 0; c < 3; c++)
      f[c] = t->f[i][c] + t->f_ext[i][c] + ms->wh * ms->fh[i][c] + m * (g[c] - t->drag * v[c]);
    double rt[3]; /* about the tool's tip at this step's pose */
    for (int c = 0; c < 3; c++) {
      rt[c] = x[c] - tl->pos[c];
      p->force[c] += f[c];
    }
    p->torque[0] += rt[1] * f[2] - rt[2] * f[1];
    p->torque[1] += rt[2] * f[0] - rt[0] * f[2];
    p->torque[2] += rt[0] * f[1] - rt[1] * f[0];
  }
}

uint32_t ts_massspring_grasped(const ts_tissue *t, int tool, const uint32_t **node,
                               const double (**local)[3]) {
  const struct ts__msgrasp *mg =
      t && t->ms && tool >= 0 && tool < TS__MAX_STEP_TOOLS ? t->ms->grasp[tool] : NULL;
  if (node) *node = mg ? mg->g.node : NULL;
  if (local) *local = mg ? (const double (*)[3])mg->g.local : NULL;
  return mg ? mg->g.n : 0;
}
