/*
 * ts_xpbd_contact.c: the position-based solver's tools. Spheres and
 * capsules (ts_tool) on the node-wise path: checked, moved linearly from
 * their previous segment to the current one over the substeps (the
 * previous segments carried to a solver that replaces another:
 * ts_xpbd_carry_tools), their candidates (free nodes within a margin)
 * gathered once per substep, and each candidate pushed out to the surface
 * (rigid, frictionless, lambda >= 0) in every sweep. Tools given as placed OBB trees (ts_xpbd_step_posed)
 * on the tree-based path: their poses over each substep, candidates and
 * grasps (ts_contact.c, ts_grasp.c; the candidates by the descent of the
 * tool's OBB tree against the tissue's AABB tree) and their projection in
 * every sweep. The node-wise path tests every free node within reach of
 * the core, inner nodes too, which no surface triangle (and so no descent)
 * holds.
 */
#include <math.h>
#include <string.h>

#include "ts_error.h"
#include "ts_xpbd_internal.h"

int ts__xpbd_valid_tool(const ts_tool *tl) {
  for (int i = 0; i < 3; i++)
    if (!isfinite(tl->pos[i])) return TS_ENAN;
  for (int i = 0; i < 4; i++)
    if (!isfinite(tl->quat[i])) return TS_ENAN;
  if (!isfinite(tl->radius) || !isfinite(tl->length)) return TS_ENAN;
  if (tl->kind != TS_TOOL_SPHERE && tl->kind != TS_TOOL_CAPSULE) return TS_EINVAL;
  if (!(tl->radius > 0) || tl->radius > 1.0) return TS_EINVAL;
  if (tl->kind == TS_TOOL_CAPSULE && (tl->length < 0 || tl->length > 10.0)) return TS_EINVAL;
  return 0;
}

/* The tool's segment at fraction u of the step. */
void ts__xpbd_place_tool(ts__ptool *p, double u) {
  double b[3], l2 = 0;
  for (int k = 0; k < 3; k++) {
    p->a[k] = p->a0[k] + u * (p->a1[k] - p->a0[k]);
    b[k] = p->b0[k] + u * (p->b1[k] - p->b0[k]);
    p->ab[k] = b[k] - p->a[k];
    l2 += p->ab[k] * p->ab[k];
    p->bc[k] = 0.5 * (p->a[k] + b[k]);
  }
  p->inv_len2 = l2 > 0 ? 1.0 / l2 : 0.0;
  /* margin: nodes this close may be pushed in by their neighbours within
   * the substep */
  double reach = p->r * 1.25 + 0.5 * sqrt(l2) + 1e-4;
  p->reach2 = reach * reach;
}

/* Distance from x to the tool's core, and the unit direction away from it
 * (+y when x is on the core). */
static double core_distance(const ts__ptool *p, const double x[3], double n[3]) {
  double ap[3];
  ts__xpbd_sub3(x, p->a, ap);
  double u = ts__xpbd_dot3(ap, p->ab) * p->inv_len2;
  u = u < 0 ? 0 : u > 1 ? 1 : u;
  double d[3];
  for (int k = 0; k < 3; k++) d[k] = ap[k] - u * p->ab[k];
  double dl = sqrt(ts__xpbd_dot3(d, d));
  if (dl > 0) {
    for (int k = 0; k < 3; k++) n[k] = d[k] / dl;
  } else {
    n[0] = 0, n[1] = 1, n[2] = 0;
  }
  return dl;
}

uint32_t ts__xpbd_gather_contacts(ts_xpbd *s, const ts_tissue *t, ts__ptool *pt, int np,
                                  uint32_t *dropped) {
  const double (*x)[3] = (const double (*)[3])t->x;
  const double *im = t->inv_mass;
  uint32_t n = 0;
  for (int q = 0; q < np; q++) {
    const ts__ptool *p = &pt[q];
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      if (im[i] == 0) continue;
      double d[3];
      ts__xpbd_sub3(x[i], p->bc, d);
      if (!(ts__xpbd_dot3(d, d) < p->reach2)) continue;
      if (n == s->cap_contacts) {
        (*dropped)++;
        continue;
      }
      ts__contact *c = &s->contacts[n++];
      c->node = i;
      c->tool = (uint32_t)q;
      c->lambda = 0;
      c->n[0] = 0, c->n[1] = 1, c->n[2] = 0;
    }
  }
  return n;
}

/* Rigid, frictionless contact: lambda >= 0 pushes the node out along the
 * normal until it is on the tool's surface, and no further. */
void ts__xpbd_sweep_contacts(ts_xpbd *s, ts_tissue *t, const ts__ptool *pt, const double *depth,
                             double wh) {
  double (*x)[3] = t->x;
  const double *im = t->inv_mass;
  for (uint32_t j = 0; j < s->n_contacts; j++) {
    ts__contact *c = &s->contacts[j];
    const ts__ptool *p = &pt[c->tool];
    const uint32_t i = c->node;
    double n[3];
    /* a refinement's contact allowance shrinks the tool for this node */
    const double C = core_distance(p, x[i], n) - (depth ? p->r - wh * depth[i] : p->r);
    double lam = c->lambda - C / im[i];
    if (lam < 0) lam = 0;
    const double dl = lam - c->lambda;
    c->lambda = lam;
    if (dl == 0) continue;
    memcpy(c->n, n, sizeof n);
    for (int k = 0; k < 3; k++) x[i][k] += im[i] * dl * n[k];
  }
}

/* Checks the tree-based tools and places each at its start pose. */
int ts__xpbd_valid_posed(const ts_tissue *t, ts_aabb_tree *tree, ts_xpbd_tool *pt, int n) {
  if (n < 0 || n > TS__MAX_TOOLS || (n > 0 && (!pt || !tree))) return TS_EINVAL;
  if (n > 0 && tree->n_points != t->n_nodes) return TS_EINVAL;
  for (int i = 0; i < n; i++) {
    const ts_xpbd_tool *p = &pt[i];
    if (!p->posed || !p->posed->tree || !p->contact || !p->contact->v) return TS_EINVAL;
    if (p->contact->n_points != t->n_nodes) return TS_EINVAL;
    if (p->grasp && (!p->grasp->held || p->grasp->n_points != t->n_nodes)) return TS_EINVAL;
    int rc = ts_posed_tool_set_pose(pt[i].posed, &p->pose);
    if (!rc) rc = ts_posed_tool_set_pose(pt[i].posed, &p->prev);
    if (rc) return rc;
  }
  return 0;
}

int ts__xpbd_refit_posed(const ts_tissue *t, ts_aabb_tree *tree, double moved, double slack) {
  /* the fat boxes' refit: a pass over the surface nodes, the escaped
   * ones refitted, in a step's first substep (or when the bound went past
   * the slack); in the others the listed points near their escape only,
   * the same tree for a fraction of the pass (ts_aabb_tree_refit_watch).
   * Testing each node inside the prediction instead (the deferred refit,
   * ts_aabb_tree_defer_note) made it dearer: 2247 and 2311 against 1789
   * and 1701 us a step for refit + candidates on patch-L, 15 substeps, the
   * instrument on the standard path, two runs (collide,
   * live_refit_query_us_per_step beside fused_refit_query_us_per_step,
   * load 12-20; liver 260 against 194, patch-S 305 against 245), the test
   * on every one of the 79,524 nodes costing more than this pass over the
   * 40,882 surface ones */
  const double (*x)[3] = (const double (*)[3])t->x;
  if (slack > 0 && moved <= slack) {
    const int rc = ts_aabb_tree_refit_watched(tree, x);
    if (rc >= 0) return rc; /* 1: rebuilt, every reference at x */
  }
  const int rc = slack > 0 ? ts_aabb_tree_refit_watch(tree, x, slack) : ts_aabb_tree_refit(tree, x);
  return rc < 0 ? -1 : 1; /* refused (a NaN): the tree as it was, a full refit next */
}

/* Substep k of nsub of the tree-based tools: their poses over the substep,
 * candidates and grasps. Returns the candidates dropped. */
uint32_t ts__xpbd_begin_posed(ts_tissue *t, ts_aabb_tree *tree, ts_xpbd_tool *pt, int n,
                              uint32_t k, uint32_t nsub) {
  uint32_t dropped = 0;
  for (int q = 0; q < n; q++) {
    ts_xpbd_tool *p = &pt[q];
    ts_pose a, b;
    ts_pose_lerp(&p->prev, &p->pose, (double)k / nsub, &a);
    ts_pose_lerp(&p->prev, &p->pose, (double)(k + 1) / nsub, &b);
    const uint8_t *skip = p->grasp ? ts_grasp_held(p->grasp) : NULL;
    ts_contact_begin(p->contact, p->posed, &a, &b, tree, t->inv_mass, skip);
    if (p->grasp) {
      const uint32_t before = p->grasp->n;
      ts_grasp_update(p->grasp, p->posed, p->contact, (const double (*)[3])t->x);
      ts_grasp_clear_impulses(p->grasp);
      if (p->grasp->n != before) /* newly held: not contact candidates too */
        ts_contact_begin(p->contact, p->posed, &a, &b, tree, t->inv_mass, skip);
    }
    dropped += p->contact->dropped;
  }
  return dropped;
}

void ts__xpbd_plan_posed(ts_aabb_tree *tree, ts_xpbd_tool *pt, int n, uint32_t k, uint32_t nsub,
                         int rb, double slack) {
  /* the candidates of the substeps from k on from one walk of the tissue
   * tree (ts_contact_plan), for as long as the watched bound holds: every
   * node within slack of its place at the plan's refit. Each substep's
   * begin keeps from that superset what its own walk would take (the same
   * candidates in the same order). The walk at every substep was most of
   * the refit + query's time on patch-L (see ts_contact_plan.c). */
  for (int q = 0; q < n; q++) {
    ts_xpbd_tool *p = &pt[q];
    if (rb == 0 && nsub > 0) continue; /* the plan goes on */
    ts_contact_unplan(p->contact);
    if (rb != 1 || !(slack > 0) || nsub == 0) continue;
    ts_pose a, b;
    ts_pose_lerp(&p->prev, &p->pose, (double)k / nsub, &a);
    ts_pose_lerp(&p->prev, &p->pose, 1.0, &b);
    (void)ts_contact_plan(p->contact, p->posed, &a, &b, tree, slack); /* 0 or an error: no plan */
  }
}

void ts__xpbd_sweep_posed(ts_xpbd *s, ts_tissue *t, ts_xpbd_tool *pt, int n, int sweep,
                          const double *hdepth, double wh) {
  for (int q = 0; q < n; q++) {
    ts_xpbd_tool *p = &pt[q];
    if (p->grasp) ts_grasp_project(p->grasp, p->posed, t->x, t->inv_mass);
    p->contact->allow = hdepth; /* a refinement's contact allowances */
    p->contact->allow_w = wh;
    ts_contact_project(p->contact, p->posed, t->x, (const double (*)[3])s->x_prev, t->inv_mass,
                       sweep);
  }
}

void ts_xpbd_carry_tools(ts_xpbd *to, const ts_xpbd *from) {
  if (!to || to == from) return;
  if (from)
    memcpy(to->prev, from->prev, sizeof to->prev);
  else
    memset(to->prev, 0, sizeof to->prev);
}
