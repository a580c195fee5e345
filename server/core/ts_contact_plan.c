/*
 * ts_contact_plan.c: the contact's candidates planned once for a solver's
 * substeps (ts_contact_plan, ts_contact.h). A begin takes as candidates
 * the tissue triangles whose fat leaf boxes the tool's OBB tree reaches at
 * the sweep's mid pose, every tool box grown by the margin and half the
 * sweep's travel (ts_collide_tissue_tris): a walk of the tissue tree with
 * a descent of the tool's tree at every leaf the root box reaches, which
 * for the dental instrument on patch-L was most of the refit + query's
 * time when made at each of XPBD's 15 substeps. The plan walks once, with
 * the tool at the mid pose of the substeps' span, each box grown so that
 * it holds the box of every substep's mid pose and growth, and every
 * tissue box grown by what a leaf's fat box can grow while the nodes stay
 * within the caller's slack; each begin then keeps the superset's
 * triangles its own walk would give (ts_collide_tissue_tris_among), in
 * the walk's order, so the candidates and the physics stay bit for bit.
 *
 * The tool's side, for box i (centre c, half extents e in the tool frame)
 * at poses P and M with rotation angle th between them: a point y of the
 * box at P grown by g (|y| <= |c| + |e| + sqrt3 g) is at most
 * |p_P - p_M| + th |y| (|R_P - R_M| = 2 sin(th/2) <= th) from the same
 * point of the box at M grown by g, so the box at P grown by g lies in the
 * box at M grown by g + |p_P - p_M| + th (rho + sqrt3 g), rho the largest
 * |c| + |e| over the tree's boxes. The tissue's side: an escaped node's new
 * reference is within the slack (plus its float rounding) of its place at
 * the plan, which lies in its leaf's fat box then, and the new fat box is
 * the reference grown by the tree's margin (and the rounding's
 * allowance): a leaf box grows by at most slack + margin on each side,
 * with the tree's structure (and so the walk's order) unchanged until a
 * rebuild.
 */
#include "ts_contact_plan.h"

#include <math.h>
#include <string.h>

#include "ts_collide.h"
#include "ts_error.h"

#define SQRT3 1.7320508075688772
#define ANGLE_HAIR 1e-7 /* rad: acos's rounding near 1 (about 3e-8), with room */
#define HAIR 1e-9       /* m: every other rounding (1e-15 m at these sizes), with room */

/* Rotation angle between two unit quaternions' rotations, rad, rounded up. */
static double angle_between(const double a[4], const double b[4]) {
  double d = fabs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]);
  d = d > 1 ? 1 : d;
  return 2.0 * acos(d) + ANGLE_HAIR;
}

static double dist3(const double a[3], const double b[3]) {
  const double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
  return sqrt(dx * dx + dy * dy + dz * dz);
}

/* rho of the tool's tree (cached per tree: trees are not changed once built) */
static double tool_rho(ts_contact_ws *ws, const ts_obb_tree *tr) {
  if (ws->rho_tool == tr) return ws->rho;
  double r = 0;
  for (uint32_t i = 0; i < tr->n_nodes; i++) {
    const ts_obb *b = &tr->nodes[i].box;
    const double c = sqrt(b->c[0] * b->c[0] + b->c[1] * b->c[1] + b->c[2] * b->c[2]);
    const double e = sqrt(b->e[0] * b->e[0] + b->e[1] * b->e[1] + b->e[2] * b->e[2]);
    r = c + e > r ? c + e : r;
  }
  ws->rho_tool = tr;
  ws->rho = r;
  return r;
}

/* The growth that makes the box at M hold the box at P grown by g. */
static double cover(const ts_pose *P, const ts_pose *M, double rho, double g) {
  return g + dist3(P->p, M->p) + angle_between(P->q, M->q) * (rho + SQRT3 * g);
}

void ts_contact_unplan(ts_contact_ws *ws) {
  if (ws) ws->planned = 0;
}

int ts_contact_plan(ts_contact_ws *ws, ts_posed_tool *tool, const ts_pose *from,
                    const ts_pose *to, const ts_aabb_tree *tree, double tissue_slack) {
  if (!ws || !ws->v || !ws->plan_tris || !tool || !tool->tree || !from || !to || !tree)
    return TS_EINVAL;
  ws->planned = 0;
  if (tree->n_points != ws->n_points || !(tissue_slack >= 0) || !isfinite(tissue_slack))
    return TS_EINVAL;
  const ts_obb_tree *tr = tool->tree;
  ts_pose f, t, m;
  int rc = ts_posed_tool_set_pose(tool, from);
  if (rc) return rc;
  f = tool->pose;
  rc = ts_posed_tool_set_pose(tool, to);
  if (rc) return rc;
  t = tool->pose;
  /* the begins that walk: see ts_contact_begin */
  if (ws->def.box_candidates || tr->n_nodes == 1 || tr->kind == TS_SHAPE_JAWS) return 0;

  /* the widest growth of a begin between f and t (its sweep's travel is at
   * most this one's), and the cover of every mid pose between: half the
   * translation and half the turn from the middle */
  const double rho = tool_rho(ws, tr);
  const double g = 0.5 * ts__contact_travel(tr, &f, &t) * (1 + 1e-9) + 1e-12 + ws->def.margin;
  ts_pose_lerp(&f, &t, 0.5, &m);
  rc = ts_posed_tool_set_pose(tool, &m);
  if (rc) return rc;
  m = tool->pose;
  const double G = (g + 0.5 * dist3(f.p, t.p) +
                    (0.5 * angle_between(f.q, t.q) + ANGLE_HAIR) * (rho + SQRT3 * g)) *
                       1.001 +
                   1e-6;
  /* the tissue's side: a fat box grows by the slack and the margin, and
   * the float references' rounding (2^-22 of the coordinates in the box,
   * twice: the reference and the fat box's allowance) */
  const ts_aabb_node *root = tree->n_tris ? &tree->nodes[0] : NULL;
  double cmax = 0;
  for (int k = 0; root && k < 3; k++)
    cmax = fmax(cmax, fmax(fabs(root->lo[k]), fabs(root->hi[k])));
  const double E = (tissue_slack + tree->def.margin) * (1 + 1e-6) +
                   (cmax + tissue_slack + tree->def.margin) * 0x1p-20 + HAIR;
  const uint32_t n = ts_collide_tissue_tris_wide(tool, tree, G, E, ws->plan_tris, ws->tri_cap);
  rc = ts_posed_tool_set_pose(tool, &t);
  if (rc) return rc;
  if (n > ws->tri_cap || !isfinite(G) || !isfinite(E)) return 0; /* the begins walk */
  ws->plan_n = n;
  ws->plan_tree = tree;
  ws->plan_rebuilds = tree->stats.rebuilds;
  ws->plan_tool = tr;
  ws->plan_mid = m;
  ws->plan_grow = G;
  ws->planned = 1;
  return 1;
}

int ts__contact_planned(ts_contact_ws *ws, ts_posed_tool *tool, const ts_aabb_tree *tree,
                        double grow, uint32_t *nt) {
  if (!ws->planned || ws->plan_tree != tree || ws->plan_rebuilds != tree->stats.rebuilds ||
      ws->plan_tool != tool->tree)
    return 0;
  /* the begin's boxes inside the plan's */
  const double c = cover(&tool->pose, &ws->plan_mid, ws->rho, grow);
  if (!(c * (1 + 1e-9) + HAIR <= ws->plan_grow)) return 0;
  if (ts_collide_tissue_tris_among(tool, tree, ws->plan_tris, ws->plan_n, grow, ws->tri_buf,
                                   ws->tri_cap, nt))
    return 0;
  ws->plan_uses++;
  return 1;
}
