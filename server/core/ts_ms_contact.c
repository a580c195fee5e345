/*
 * ts_ms_contact.c: the tools' contact with the tissue in the mass-spring
 * step: checking and preparing the tools, projecting the nodes inside a
 * tool onto its surface and marking them for the next substep's reaction
 * (applied in ts_ms_integrate.c).
 *
 * Contact (frictionless, inelastic). After each substep every free node
 * inside an active tool is moved along the tool's outward normal n onto its
 * surface without a velocity kick (Verlet's previous position moves along,
 * so its implied velocity is kept; a kick of the move over h would bounce
 * the node off) and loses any velocity into the tool; the node is marked
 * with n (and stays marked while within 1e-4 of the radius of the surface).
 * In the next substep the part of a marked node's total force F_k (springs,
 * dampers, gravity,
 * drag, external) that pushes into the tool, (F.n) n when F.n < 0, is
 * cancelled: that is the tool's reaction, and what the tissue pushes on the
 * tool with. At rest it is exactly what the tool holds back (the anchors
 * carry the rest of the weight). With the scaled mass matrix the reaction
 * is the constraint force that stops the node's normal acceleration, found
 * after the column's solve (integrate_sms), so that the push does not reach
 * the rest of the column through the coupling. While held, the node's
 * velocity and remembered accelerations lose their normal parts
 * (hold_history), or Beeman's history would throw it off the surface. The
 * force is averaged over the substeps of a step, and the step's contact
 * count is the most nodes that touched in any of its substeps (a node held
 * on the surface may end one substep just beyond the skin and come back in
 * the next; the step's force still has its push). A node inside two tools
 * belongs to the last.
 *
 * Tools are spheres, capsules (the distance from the core segment),
 * grasper jaws (TS_TOOL_JAWS: the nearer jaw box's signed distance,
 * ts_contact_tool_sdf, with the jaws placed by ts_ms_grasp.c, which also
 * keeps the nodes they hold out of their contact) and
 * triangle meshes (TS_TOOL_MESH, issue 5): a mesh's signed distance and
 * outward direction come from its OBB tree (ts_obb_tree_mesh_sdf: the
 * closest point by the tree, the sign by the angle-weighted pseudonormal),
 * queried in the tool's frame; the node moves by the distance along that
 * direction, and the rest (no kick, the reaction, the skin) is the
 * primitives'. A mesh part thinner than the tissue's triangles (the dental
 * instrument's 2.6 x 0.4 mm spatula on 3.5 mm triangles) slips between the
 * nodes, and so does a sphere or capsule thinner than the node spacing (0.5
 * or 1 mm on patch-S's 1.6 mm), so mesh tools (with thin_pass,
 * ts_obb_tree.h), spheres and capsules (unless ts_tool.thin_off) also take
 * a triangle pass after the nodes (ts__ms_thin_pass below, the XPBD
 * contact's pass of ts_contact.h; the triangles near the tool by the
 * descent of its boxes against an AABB tree of the surface, swept from the last pose in a step's first substep,
 * or with a swept sphere's or capsule's core in every substep): a surface
 * triangle pierced from its outer side (ts_collide_mesh_pierce; a
 * primitive's core on its outer side) with no corner on a mesh tool is
 * moved by the point-triangle constraint until the tool reaches a quarter
 * of its thickness (a primitive: of its diameter) behind it, and its
 * corners are marked like projected nodes, so the next substep's reaction
 * holds them and reaches the tool's force.
 *
 * Friction (Coulomb, force level; the tool's mu_static, mu_kinetic). A node
 * that the tool holds in a substep (its push into the tool cancelled, the
 * normal reaction N > 0) also gets a tangential force f from the tool. The
 * tool's surface under the node moves with the tool's rigid motion over the
 * step (v_s = v + w x (x - pos), v and w from the tool's last two poses:
 * a slow tool stands at its pose through the step's substeps, so that a
 * node moving at v_s through the step ends where the material point under
 * it has gone; a swept one, TS__CORE_STEP, moves at v_s with it); w_t is the tangential part of the node's velocity relative to
 * it over the last substep ((x_k - x_(k-1)) / h - v_s) and a_t that of its
 * acceleration after the normal reaction. Stick: the force that makes the
 * next substep's relative tangential motion zero, f = -(a_t + w_t / h) / g
 * (g = 1/m, or the scaled mass matrix's (M~^-1)_ii with the column's
 * coupling), is applied when |f| <= mu_s N, and the node then takes the
 * Verlet update, for which this f is exact (x_(k+1) - x_k = x_k - x_(k-1)
 * + a h^2); slip: otherwise f = -mu_k N along the same direction (the
 * projection of the stick force onto the kinetic cone: for an isotropic
 * mass it opposes the slip at the end of the substep, the implicit
 * time-stepping form of Coulomb's law; J. J. Moreau, "Unilateral contact
 * and dry friction in finite freedom dynamics", in Nonsmooth Mechanics and
 * Applications, CISM 302, Springer 1988, pp. 1-82; with the static/kinetic
 * split as in Mueller et al., "Detailed Rigid Body Simulation with Extended
 * Position Based Dynamics", 2020, section 3.5, which the XPBD sessions'
 * contact (ts_contact.h) follows at position level). -f is part of the
 * tool's reaction force and torque, so the balance (tool force = weight
 * minus the anchors' reaction) holds for the tangential components too.
 * mu_static = 0 skips all of it (frictionless, the results of before).
 *
 * The tools' last poses live in the step's data, by the caller's tool
 * index; a tissue that replaces another between two steps (a live
 * refinement's install) takes them over (ts_massspring_carry_tools), or its
 * first step would take a moving tool as standing: friction then holds the
 * tissue to a surface that does not move.
 *
 * After a live refinement a node may carry a contact allowance (the
 * hand-over's depth times its weight, ts_handover.h): it touches the tool
 * shrunk by that much (its signed distance grows by the allowance), so that
 * a new node the refinement put inside the tool is pushed out over the
 * blend, not at once.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_collide.h"
#include "ts_contact.h"
#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"
#include "ts_obb_tree.h"

/* A sphere or capsule that moves more than this fraction of its radius in
 * a step is swept: its core moves along its path over the substeps
 * (ts__ms_tool_at), so that a node it meets is pushed ahead of it from the
 * side it came from. Standing at its new pose through the step instead, a
 * tool that jumped by about its radius has a node it met at the last pose
 * at or past its core, and the projection sends that node out the far side
 * (a 2 mm capsule at 2 m/s, its radius a step, went through patch-S:
 * test_contact's test_no_tunnelling_patch_massspring). A slower tool stands
 * at its pose, as before (its node is never past half the radius in), so
 * its results are unchanged. The sweep alone does not help a tool thinner
 * than the node spacing: a 0.5 or 1 mm capsule slipped between patch-S's
 * 1.6 mm nodes at any speed; the triangle pass (ts__ms_thin_pass, swept
 * with the core: triangles_swept) stops them (test_ms_thin). */
#define TS__CORE_STEP 0.5

static void disarm(struct ts__ms *ms);

int ts__ms_valid_tool(const ts_tool *tl) {
  if (tl->kind != TS_TOOL_SPHERE && tl->kind != TS_TOOL_CAPSULE && tl->kind != TS_TOOL_MESH &&
      tl->kind != TS_TOOL_JAWS)
    return TS_EINVAL;
  if (tl->kind == TS_TOOL_MESH &&
      (!tl->shape || tl->shape->kind != TS_SHAPE_MESH || !isfinite(tl->shape->reach)))
    return TS_EINVAL;
  for (int i = 0; i < 3; i++)
    if (!isfinite(tl->pos[i])) return TS_ENAN;
  for (int i = 0; i < 4; i++)
    if (!isfinite(tl->quat[i])) return TS_ENAN;
  if (!isfinite(tl->radius) || !isfinite(tl->length)) return TS_ENAN;
  if (tl->kind != TS_TOOL_MESH && (!(tl->radius > 0) || tl->radius > 1.0)) return TS_EINVAL;
  if (tl->kind == TS_TOOL_CAPSULE && (tl->length < 0 || tl->length > 10.0)) return TS_EINVAL;
  /* jaws: length 0 takes the default jaw length (ts_obb_tree.h) */
  if (tl->kind == TS_TOOL_JAWS && (tl->length < 0 || tl->length > 1.0)) return TS_EINVAL;
  if (tl->kind == TS_TOOL_JAWS && !isfinite(tl->jaw)) return TS_ENAN;
  if (!isfinite(tl->mu_static) || !isfinite(tl->mu_kinetic)) return TS_ENAN;
  return ts_tool_friction_valid(tl->mu_static, tl->mu_kinetic);
}

void ts__ms_prepare_tool(ts__ptool *p, ts_tool *tl) {
  double b[3];
  memset(p, 0, sizeof *p);
  p->tool = tl;
  ts_tool_segment(tl, p->a, b);
  double l2 = 0;
  for (int i = 0; i < 3; i++) {
    p->ab[i] = b[i] - p->a[i];
    l2 += p->ab[i] * p->ab[i];
    p->bc[i] = 0.5 * (p->a[i] + b[i]);
  }
  p->inv_len2 = l2 > 0 ? 1.0 / l2 : 0.0;
  p->r = tl->radius;
  p->mus = tl->mu_static;
  p->muk = tl->mu_kinetic;
  p->skin = tl->radius * TS__SKIN;
  double br = tl->radius * (1.0 + TS__SKIN) + 0.5 * sqrt(l2);
  /* the rotation of the (normalised) quaternion (a capsule's axis is its
   * second column, as ts_tool_segment has it); a mesh tree's points lie
   * within `reach` of the tool's origin, pos */
  double w = tl->quat[0], x = tl->quat[1], y = tl->quat[2], z = tl->quat[3];
  double n2 = w * w + x * x + y * y + z * z;
  if (!(n2 > 0)) w = 1, x = y = z = 0, n2 = 1;
  double q = 2.0 / n2;
  double R[3][3] = {{1 - q * (y * y + z * z), q * (x * y - w * z), q * (x * z + w * y)},
                    {q * (x * y + w * z), 1 - q * (x * x + z * z), q * (y * z - w * x)},
                    {q * (x * z - w * y), q * (y * z + w * x), 1 - q * (x * x + y * y)}};
  memcpy(p->R, R, sizeof R);
  memcpy(p->at_R, R, sizeof R);
  memcpy(p->at_pos, tl->pos, sizeof p->at_pos);
  p->at_s0 = p->at_s = 1.0;
  p->thin = (tl->kind == TS_TOOL_SPHERE || tl->kind == TS_TOOL_CAPSULE) && !tl->thin_off;
  if (tl->kind == TS_TOOL_MESH) {
    p->mesh = tl->shape;
    p->skin = tl->shape->reach * TS__SKIN;
    memcpy(p->bc, tl->pos, sizeof p->bc);
    br = tl->shape->reach + p->skin;
  }
  p->br2 = br * br;
}

void ts__ms_tool_motion(struct ts__ms *ms, ts__ptool *p, int i, double dt) {
  const ts_tool *tl = p->tool;
  double q[4], n2 = 0;
  for (int k = 0; k < 4; k++) n2 += tl->quat[k] * tl->quat[k];
  for (int k = 0; k < 4; k++) q[k] = n2 > 0 ? tl->quat[k] / sqrt(n2) : (k == 0);
  memcpy(p->from_pos, tl->pos, sizeof p->from_pos);
  memcpy(p->from_q, q, sizeof p->from_q);
  p->travel = 0;
  if (ms->tl_seen[i]) {
    const double *o = ms->tl_quat[i];
    memcpy(p->from_pos, ms->tl_pos[i], sizeof p->from_pos);
    memcpy(p->from_q, o, sizeof p->from_q);
    for (int k = 0; k < 3; k++) p->vel[k] = (tl->pos[k] - ms->tl_pos[i][k]) / dt;
    /* the turn from the last pose, dq = q conj(o), as an angle about an axis */
    double dw = q[0] * o[0] + q[1] * o[1] + q[2] * o[2] + q[3] * o[3];
    double dv[3] = {-q[0] * o[1] + q[1] * o[0] - q[2] * o[3] + q[3] * o[2],
                    -q[0] * o[2] + q[1] * o[3] + q[2] * o[0] - q[3] * o[1],
                    -q[0] * o[3] - q[1] * o[2] + q[2] * o[1] + q[3] * o[0]};
    if (dw < 0) {
      dw = -dw;
      for (int k = 0; k < 3; k++) dv[k] = -dv[k];
    }
    double sv = sqrt(dv[0] * dv[0] + dv[1] * dv[1] + dv[2] * dv[2]);
    double ang = 2.0 * atan2(sv, dw);
    for (int k = 0; k < 3; k++) p->omega[k] = sv > 0 ? dv[k] / sv * ang / dt : 0.0;
    /* as ts_collide_sweep's bound: translation plus angle times reach (a
     * capsule's core reaches its length from pos; a sphere's turn moves
     * nothing) */
    const double reach = p->mesh ? p->mesh->reach : tl->kind == TS_TOOL_CAPSULE ? tl->length : 0.0;
    p->travel = hypot(hypot(p->vel[0], p->vel[1]), p->vel[2]) * dt + ang * reach;
    p->swept = !p->mesh && tl->kind != TS_TOOL_JAWS && p->travel > TS__CORE_STEP * p->r;
  }
  memcpy(ms->tl_pos[i], tl->pos, sizeof ms->tl_pos[i]);
  memcpy(ms->tl_quat[i], q, sizeof ms->tl_quat[i]);
  ms->tl_seen[i] = 1;
  disarm(ms); /* a step's start: the caller may have moved nodes since the last */
}

/* The pose of p's tool the fraction s (0..1) of the way from its last
 * step's pose to this one (ts_pose_lerp). */
static void pose_at(const ts__ptool *p, double s, ts_pose *ps) {
  ts_pose a = {.jaw = 0}, b = {.jaw = 0};
  memcpy(a.p, p->from_pos, sizeof a.p);
  memcpy(a.q, p->from_q, sizeof a.q);
  memcpy(b.p, p->tool->pos, sizeof b.p);
  const double *q = p->tool->quat;
  double n2 = 0;
  for (int k = 0; k < 4; k++) n2 += q[k] * q[k];
  for (int k = 0; k < 4; k++) b.q[k] = n2 > 0 ? q[k] / sqrt(n2) : (k == 0);
  ts_pose_lerp(&a, &b, s, ps);
}

void ts__ms_tool_at(ts__ptool *p, double s) {
  if (!p->swept) return;
  ts_tool at = *p->tool;
  p->at_s0 = p->at_s;
  p->at_s = s < 0 ? 0 : s < 1 ? s : 1;
  if (s < 1) {
    ts_pose ps;
    pose_at(p, s < 0 ? 0 : s, &ps);
    memcpy(at.pos, ps.p, sizeof at.pos);
    memcpy(at.quat, ps.q, sizeof at.quat);
    ts_quat_to_mat(ps.q, p->at_R);
  } else {
    memcpy(p->at_R, p->R, sizeof p->at_R);
  }
  memcpy(p->at_pos, at.pos, sizeof p->at_pos);
  double b[3];
  ts_tool_segment(&at, p->a, b);
  for (int i = 0; i < 3; i++) {
    p->ab[i] = b[i] - p->a[i];
    p->bc[i] = 0.5 * (p->a[i] + b[i]);
  }
}

int ts__ms_friction(const ts_tissue *t, uint32_t i, const ts__ptool *p, const double n[3],
                    double N, const double a[3], double g, double h, double f[3]) {
  /* the tool's surface velocity at x about its origin at the pose the
   * contact was taken at (a swept tool's pose of the sweep, at_pos): the
   * final origin would add w x (pos - at_pos) to it */
  const double *x = t->x[i], *xp = t->x_prev[i], *o = p->at_pos, *w = p->omega;
  const double r[3] = {x[0] - o[0], x[1] - o[1], x[2] - o[2]};
  const double vs[3] = {p->vel[0] + w[1] * r[2] - w[2] * r[1],
                        p->vel[1] + w[2] * r[0] - w[0] * r[2],
                        p->vel[2] + w[0] * r[1] - w[1] * r[0]};
  const double ih = 1.0 / h;
  double s[3], an = 0, wn = 0, rel[3];
  for (int c = 0; c < 3; c++) {
    rel[c] = (x[c] - xp[c]) * ih - vs[c];
    an += a[c] * n[c];
    wn += rel[c] * n[c];
  }
  double s2 = 0;
  for (int c = 0; c < 3; c++) {
    s[c] = (a[c] - an * n[c]) + (rel[c] - wn * n[c]) * ih; /* tangential */
    s2 += s[c] * s[c];
  }
  const double ig = 1.0 / g, fs = sqrt(s2) * ig; /* the stick force's size */
  if (fs <= p->mus * N) {
    for (int c = 0; c < 3; c++) f[c] = -s[c] * ig;
    return 1;
  }
  const double k = p->muk * N / fs * ig; /* fs > 0 here */
  for (int c = 0; c < 3; c++) f[c] = -s[c] * k;
  return 0;
}

/* A mesh tool's signed distance at x (m, negative inside) and the outward
 * unit direction n in the world, for a node whose contact allowance is
 * allow: the callers only ask whether sd + allow < skin, so the query is
 * bounded by skin - allow (ts_obb_tree_mesh_sdf_within: a node outside the
 * tool's root box and farther than that from its surface ends at the root
 * or near it, INFINITY, n untouched; a nearer one gets the full query's
 * sd and n bit for bit), grown by a millionth of skin + allow, far above
 * the rounding of sd + allow against skin - allow. */
static double mesh_sdf(const ts__ptool *p, const double x[3], double allow, double n[3]) {
  double d[3], q[3], nl[3];
  for (int k = 0; k < 3; k++) d[k] = x[k] - p->tool->pos[k];
  for (int k = 0; k < 3; k++) q[k] = p->R[0][k] * d[0] + p->R[1][k] * d[1] + p->R[2][k] * d[2];
  const double limit = p->skin - allow + 1e-6 * (p->skin + allow);
  double s = ts_obb_tree_mesh_sdf_within(p->mesh, q, limit, nl);
  if (s == INFINITY || isnan(s)) return s; /* n unknown (and not used) */
  for (int k = 0; k < 3; k++) n[k] = p->R[k][0] * nl[0] + p->R[k][1] * nl[1] + p->R[k][2] * nl[2];
  return s;
}

/* The surface tree's deferred refit (ts_aabb_tree_defer_note): after each
 * refit (the substep's first use of the tree, a pass over the surface
 * nodes) it is armed, and every node this file moves is noted, so that the
 * substep's later uses (the poses of a triangle pass's sweep, up to 256; a
 * second thin tool) refit only what was noted instead of
 * another pass over the surface. Disarmed where nodes move elsewhere: each
 * substep's ts__ms_clear_contacts (after the update, the strain limit and
 * the jaws' placing) and the step's start (ts__ms_tool_motion, the
 * revalidation). The substep's first use keeps the pass: the same test of
 * every node fused into XPBD's prediction was dearer (ts_xpbd_contact.c).
 * The instrument's contact was nearly all the node projection's distances
 * with the full query (0.64 s a step on patch-L, 37 substeps; the refit
 * under 1 %); with the bounded one (mesh_sdf below) it is 20 ms a step,
 * against 0.70 s for the full query in the same run (collide,
 * ms_live_contact_us_per_step and its ms_full_query_contact_us_per_step,
 * --quick, load 10). */
static ts_aabb_tree *armed_tree(const ts_tissue *t, const struct ts__ms *ms) {
  ts_aabb_tree *tr = ms->tree;
  return tr && ts_aabb_tree_defer_armed(tr) && tr->n_points == t->n_nodes ? tr : NULL;
}

static void disarm(struct ts__ms *ms) { ts_aabb_tree_defer_cancel(ms->tree); }

/* A node is moved by dx (the tool's push along its outward direction n,
 * unit) without a velocity kick and loses its velocity into the tool, as
 * the node projection below does. */
static void move_node(ts_tissue *t, struct ts__ms *ms, uint32_t i, const double dx[3],
                      const double n[3]) {
  const int verlet = t->branch[i] == TS_BRANCH_VERLET;
  double *x = t->x[i], *xp = t->x_prev[i], *v = t->v[i];
  for (int k = 0; k < 3; k++) {
    x[k] += dx[k];
    if (verlet) xp[k] += dx[k];
  }
  const double vn = v[0] * n[0] + v[1] * n[1] + v[2] * n[2];
  if (vn < 0)
    for (int k = 0; k < 3; k++) v[k] -= vn * n[k];
  if (verlet) {
    double rel = 0;
    for (int k = 0; k < 3; k++) rel += (x[k] - xp[k]) * n[k];
    if (rel < 0)
      for (int k = 0; k < 3; k++) xp[k] += rel * n[k];
  }
  ts_aabb_tree *tr = armed_tree(t, ms);
  if (tr) ts_aabb_tree_defer_note(tr, i, x);
}

static void mark_node(struct ts__ms *ms, const ts__ptool *p, uint32_t i, const double n[3]) {
  if (!ms->ctool[i]) ms->clist[ms->n_clist++] = i;
  ms->ctool[i] = (uint8_t)(p->index + 1);
  memcpy(ms->cn[i], n, sizeof ms->cn[i]);
}

/* The triangle pass of a tool (as the XPBD contact's, ts_contact.h): a
 * surface triangle that the tool pierced from its outer side (a mesh:
 * ts_collide_mesh_pierce, at most the tool's thickness deep; a sphere or
 * capsule: prim_pierce, its core on the triangle's outer side) more than a
 * quarter of the thickness (a primitive's: its diameter), with no corner on
 * or in the tool (those the node projection holds), is moved until the
 * tool's deepest point over it is that quarter behind its plane (a
 * primitive's: the triangle's closest point to the core half the radius
 * inside, moved along the normal from the core): the corners by the point-triangle
 * constraint, corner c by w_c b_c s along the push direction n (w the
 * inverse masses, b the barycentric coordinates of the crossing point, s =
 * (depth - quarter) / sum(w b^2)), each without a kick as a projected node.
 * Its free corners are marked with n, so that the next substep's reaction
 * cancels their push into the tool (the whole of it: the triangle rests on
 * the tool through them) and it reaches the tool's force. A triangle pierced
 * within the skin of the quarter is marked without a move. move 0: marks
 * only (the step's revalidation at the new pose). The tool stands at
 * rotation R and origin o for the pierce (a pose of the sweep, see
 * triangles_swept); "on or in the tool" is at the node projection's pose
 * (the step's, or a swept sphere or capsule's pose of the sweep).
 *
 * A sphere's or capsule's triangle may have corners in the tool (held by
 * the node projection, unlike a mesh's): a 1 mm capsule lying between
 * patch-S's rows holds their nodes 0.82 mm from its core, and driven at
 * 0.5 m/s it pushed them aside and went through until the triangle
 * between them was pushed too. A sphere or capsule thicker than the
 * tissue's triangles still never moves one: a point of a triangle lies
 * within its longest edge over sqrt(3) of a corner, and the distance from
 * the core changes by no more than the distance moved, so a point half the
 * radius inside with every corner on or outside the surface (the node
 * projection's work, before the pass) takes an edge of at least 0.87 of the
 * radius (4.3 mm for a 5 mm sphere, against patch-S's 1.6 to 2.3 mm
 * edges): the node projection alone acts, as it did before the pass.
 *
 * Which triangles. Only those whose box meets the world box of the tool
 * (a mesh's root OBB, a primitive's core grown by its radius; grown by the
 * skin) can be pierced. The method's descent (ts_collide_tissue_tris_frame
 * for a mesh's OBB tree at the pass's pose, _box for the oriented box
 * around a sphere's or capsule's core) against the surface's AABB tree
 * (ts_aabb_tree.h, the XPBD contact's kind; fat leaf boxes, so refitting
 * for the substep's positions is one comparison per surface node and a
 * short walk up for the nodes that escaped), every tool box grown by the
 * skin and the depth bound, gives the triangles near the tool, in triangle
 * order: the same ones, in the same order, as a scan of every triangle
 * finds them, unless a push of this pass moves a corner farther than the
 * depth bound (test_contact_descent, test_thin_tree_scan). Returns the
 * corners marked.
 *
 * The node projection above (ts__ms_contact) still tests every node
 * within the tool's bounding sphere, not the surface tree's candidates:
 * it projects the solid's inner nodes too (a tool pressed deeper than the
 * top layer), which no surface triangle holds. For a mesh tool a node
 * outside the tool's root box ends there or near it (mesh_sdf's bounded
 * query), so that test costs little more than the sphere's. */
/* ms's tree of t's surface and the query's scratch, made when missing or
 * when t's topology is not the tree's, refitted for t->x. Returns the tree,
 * or NULL (the caller scans). The jaws' grasp takes its candidates from it
 * too (ts_ms_grasp.c). */
ts_aabb_tree *ts__ms_surface_tree(const ts_tissue *t, struct ts__ms *ms) {
  const uint32_t nct = ts_tissue_n_contact_tris(t);
  if (ms->tree && (ms->tree->n_points != t->n_nodes || ms->tree->n_tris != nct)) {
    ts_aabb_tree_destroy(ms->tree);
    free(ms->tri_buf);
    ms->tree = NULL;
    ms->tri_buf = NULL;
  }
  if (!ms->tree) {
    if (!nct || !ts_tissue_contact_tris(t)) return NULL;
    ms->tri_buf = malloc(sizeof *ms->tri_buf * nct);
    if (!ms->tri_buf || ts_aabb_tree_create_tissue(NULL, t, &ms->tree) != 0) {
      free(ms->tri_buf);
      ms->tri_buf = NULL;
      ms->tree = NULL;
      return NULL;
    }
    ts_aabb_tree_defer_begin(ms->tree); /* built at t->x: nothing escaped */
    return ms->tree;
  }
  /* what this file's moves noted since the tree was armed, or a full
   * ts_aabb_tree_refit when unarmed (a substep's first use); then armed
   * again, for this file's moves until the next use */
  if (ts_aabb_tree_defer_refit(ms->tree, (const double (*)[3])t->x) < 0) return NULL;
  ts_aabb_tree_defer_begin(ms->tree);
  return ms->tree;
}

/* A primitive's pierce of world triangle X (the triangle pass's, for a
 * sphere or capsule with its core [a, b] and radius r): the contact of the
 * primitive with X (ts_contact_capsule_triangle, the XPBD pass's: point =
 * the closest point of X to the core, normal from the core to it, depth = r
 * minus their distance; the core meeting X: X's inward normal, r plus the
 * core's reach behind X's plane), taken when the core is on X's outer side
 * (the normal goes into the tissue: X's inward normal . normal > 0; a core
 * past X's plane is through X, or came from inside, and its normal would
 * pull X through to its far side) and the depth at most max_depth. bc gets
 * the point's barycentric coordinates in X. Returns 1, or 0 for none (also
 * for a degenerate X, whose normal is not known). */
static int prim_pierce(const ts__ptool *p, const double a[3], const double b[3],
                       const double X[3][3], double max_depth, ts_hit *hit, double bc[3]) {
  const int got = p->tool->kind == TS_TOOL_CAPSULE ? ts_contact_capsule_triangle(a, b, p->r, X, hit)
                                                   : ts_contact_sphere_triangle(a, p->r, X, hit);
  if (!got || !(hit->depth <= max_depth)) return 0;
  double e1[3], e2[3], nin[3];
  for (int k = 0; k < 3; k++) e1[k] = X[1][k] - X[0][k], e2[k] = X[2][k] - X[0][k];
  nin[0] = e2[1] * e1[2] - e2[2] * e1[1]; /* -(e1 x e2): inward, not normalised */
  nin[1] = e2[2] * e1[0] - e2[0] * e1[2];
  nin[2] = e2[0] * e1[1] - e2[1] * e1[0];
  if (!(nin[0] * hit->normal[0] + nin[1] * hit->normal[1] + nin[2] * hit->normal[2] > 0)) return 0;
  return ts_collide_barycentric(X, hit->point, bc);
}

/* How much the surface's longest edge may grow within a step for the
 * skip of ts__ms_thin_can_act to hold: half again. (A step that stretches
 * an edge by half is one that diverges.) */
#define TS__THIN_EDGE_GROWTH 1.5

double ts__ms_longest_edge(const ts_tissue *t) {
  double m2 = 0;
  const uint32_t(*tris)[3] = (const uint32_t(*)[3])ts_tissue_contact_tris(t);
  for (uint32_t f = 0, n = ts_tissue_n_contact_tris(t); f < n; f++) {
    const uint32_t *c = tris[f];
    for (int k = 0; k < 3; k++) {
      const double *a = t->x[c[k]], *b = t->x[c[(k + 1) % 3]];
      const double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
      m2 = fmax(m2, dx * dx + dy * dy + dz * dz);
    }
  }
  return sqrt(m2);
}

/* The pass moves a triangle only with a point more than half the radius
 * (less the skin) inside while its corners are on or outside the surface
 * (below): that takes an edge of sqrt(3) (1/2 - TS__SKIN) r at least. With
 * the step's longest edge grown by TS__THIN_EDGE_GROWTH short of that, the
 * pass cannot act and is skipped: running it costs a refit of the
 * surface's tree in every substep (measured on patch-S sagging under
 * gravity with a 5 mm sphere above it: 28 % of the step), where the node
 * projection does all the work. */
int ts__ms_thin_can_act(const ts__ptool *p, double edge) {
  return ts__ms_thin_can_act_bound(p, TS__THIN_EDGE_GROWTH * edge);
}

int ts__ms_thin_can_act_bound(const ts__ptool *p, double bound) {
  return bound >= sqrt(3.0) * (0.5 - TS__SKIN) * p->r;
}

/* The thickness the triangle pass measures against: a mesh's thinnest
 * part, a primitive's diameter. */
static double thin_thickness(const ts__ptool *p) {
  return p->mesh ? p->mesh->thickness : 2.0 * p->r;
}

uint32_t ts__ms_thin_pass(ts_tissue *t, struct ts__ms *ms, const ts__ptool *p,
                          const double R[3][3], const double o[3], double depth_cap, int move,
                          int use_tree) {
  const ts_obb_tree *tr = p->mesh;
  const double thick = thin_thickness(p);
  const double cap = depth_cap > 0 ? depth_cap : thick > 0 ? thick : tr->reach;
  const double quarter = 0.25 * thick;
  /* the tool's world bounds, grown by the skin: a mesh's root box; a
   * primitive's core from o (along R's second column for a capsule) grown
   * by the radius */
  double lo[3], hi[3], ca[3] = {0, 0, 0}, cb[3] = {0, 0, 0};
  if (tr) {
    const ts_obb *rb = &tr->nodes[0].box;
    for (int k = 0; k < 3; k++) {
      double c = o[k], e = p->skin;
      for (int j = 0; j < 3; j++) {
        c += R[k][j] * rb->c[j];
        e += rb->e[j] * fabs(R[k][0] * rb->r[j][0] + R[k][1] * rb->r[j][1] + R[k][2] * rb->r[j][2]);
      }
      lo[k] = c - e, hi[k] = c + e;
    }
  } else {
    const double len = p->tool->kind == TS_TOOL_CAPSULE ? p->tool->length : 0.0;
    for (int k = 0; k < 3; k++) {
      ca[k] = o[k];
      cb[k] = o[k] + len * R[k][1];
      lo[k] = fmin(ca[k], cb[k]) - p->r - p->skin;
      hi[k] = fmax(ca[k], cb[k]) + p->r + p->skin;
    }
  }
  const ts_aabb_tree *tree = use_tree ? ts__ms_surface_tree(t, ms) : NULL;
  const uint32_t(*tris)[3] = (const uint32_t(*)[3])ts_tissue_contact_tris(t);
  uint32_t nc = ts_tissue_n_contact_tris(t);
  if (tree) {
    /* the descent of the tool's boxes (a mesh's OBB tree at (R, o); a
     * sphere's or capsule's one box around its core) grown by the skin and
     * the depth bound against the surface tree, each triangle once in
     * triangle order */
    const double grow = p->skin + cap;
    if (tr) {
      nc = ts_collide_tissue_tris_frame(tr, R, o, tree, (const double (*)[3])t->x, grow,
                                        ms->tri_buf, tree->n_tris, NULL);
    } else {
      ts_obb box;
      const double len = 0.5 * (p->tool->kind == TS_TOOL_CAPSULE ? p->tool->length : 0.0);
      for (int a = 0; a < 3; a++)
        for (int k = 0; k < 3; k++) box.r[a][k] = R[k][a];
      for (int k = 0; k < 3; k++) box.c[k] = 0.5 * (ca[k] + cb[k]);
      box.e[0] = box.e[2] = p->r;
      box.e[1] = len + p->r;
      nc = ts_collide_tissue_tris_box(&box, tree, (const double (*)[3])t->x, grow, ms->tri_buf,
                                      tree->n_tris, NULL);
    }
    if (nc > tree->n_tris) nc = tree->n_tris; /* room for every triangle: not reached */
  }
  const double *im = t->inv_mass, *depth = ms->depth;
  uint32_t marked = 0;
  for (uint32_t j = 0; j < nc; j++) {
    const uint32_t f = tree ? ms->tri_buf[j] : j;
    const uint32_t *c = tris[f];
    int out = 0;
    for (int k = 0; k < 3 && !out; k++) {
      const double a = t->x[c[0]][k], b = t->x[c[1]][k], d = t->x[c[2]][k];
      out = fmax(a, fmax(b, d)) < lo[k] || fmin(a, fmin(b, d)) > hi[k];
    }
    if (out || !(im[c[0]] > 0 || im[c[1]] > 0 || im[c[2]] > 0)) continue;
    const double X[3][3] = {{t->x[c[0]][0], t->x[c[0]][1], t->x[c[0]][2]},
                            {t->x[c[1]][0], t->x[c[1]][1], t->x[c[1]][2]},
                            {t->x[c[2]][0], t->x[c[2]][1], t->x[c[2]][2]}};
    ts_hit hit;
    double bc[3]; /* the crossing point's barycentric coordinates, clamped into X */
    const int pierced = tr ? ts_collide_mesh_pierce_posed(tr, R, o, X, cap, &hit, bc)
                           : prim_pierce(p, ca, cb, X, cap, &hit, bc);
    if (!pierced) continue;
    double tal = 0; /* the corners' largest contact allowance, as for a node */
    for (int q = 0; depth && q < 3; q++) tal = fmax(tal, ms->wh * depth[c[q]]);
    if (!(hit.depth > quarter + tal - p->skin)) continue;
    /* a corner on or in a mesh tool: the node projection's (a sphere's or
     * capsule's triangle is pushed with its held corners: see above) */
    int held = 0;
    for (int q = 0; tr && q < 3 && !held; q++) {
      double nn[3];
      const double al = depth ? ms->wh * depth[c[q]] : 0.0;
      held = mesh_sdf(p, t->x[c[q]], al, nn) + al < p->skin;
    }
    if (held || pierced != 1) continue; /* 2: a degenerate triangle */
    const double *n = hit.normal;
    double sw = 0;
    for (int q = 0; q < 3; q++) sw += im[c[q]] * bc[q] * bc[q];
    if (!(sw > 0)) continue;
    const double s = hit.depth > quarter + tal ? (hit.depth - quarter - tal) / sw : 0.0;
    for (int q = 0; q < 3; q++) {
      if (!(im[c[q]] > 0) || !(bc[q] > 0)) continue;
      if (move && s > 0) {
        double dx[3];
        for (int k = 0; k < 3; k++) dx[k] = im[c[q]] * bc[q] * s * n[k];
        move_node(t, ms, c[q], dx, n);
      }
      mark_node(ms, p, c[q], n);
      marked++;
    }
  }
  return marked;
}

#define TS__THIN_SWEEP_MAX 256 /* poses of one sweep, at most */
#define TS__THIN_STEP 0.5       /* of the thickness: the tool's move between two poses */
#define TS__THIN_NEAR 0.05      /* of the thickness: slack of a sweep pose's depth bound */

/* The triangle pass of tool p, swept (sweep nonzero, and for a mesh its
 * tree's thin_sweep) over the fractions s0..s1 of its way from the last
 * step's pose to this one: first at the poses s0 + (s1 - s0) j / m, j =
 * 1..m-1, m the least count that moves no tool point more than half the
 * tool's thickness from one pose to the next (at most TS__THIN_SWEEP_MAX),
 * interpolated by ts_pose_lerp, then at the pose of the node projection
 * (at_R, at_pos). A mesh tool and a standing sphere or capsule sweep from
 * the last step's pose (s0 0, s1 1) in a step's first substep, and a swept
 * sphere or capsule (ts__ms_tool_at) from its last pose of the sweep to
 * this one in every substep. The pass's depth bound (the thickness) sees a
 * triangle only while the tool is less than its thickness through it: a
 * tool that moved farther than that between two passes (in the first
 * substep of a step the tool jumps to its new pose) went through unseen.
 * At each pose the tool is at most the pass's quarter, one move (half)
 * and the 1 % of its slack behind a triangle it met at the pose before, so
 * the triangle is seen and pushed ahead of it on the side it came from. A
 * sweep pose takes a pierce only up to the quarter, two moves and 5 % of
 * the thickness deep (the tissue may have moved as much as the tool since
 * the last pass); deeper, the tool was through the triangle before this
 * step (a side triangle the blade passed long ago), and the pass leaves it
 * as it would without the sweep. A tool slower than half its thickness a
 * pass takes the pass at its pose only, as without the sweep: pushes at a
 * pose between, with no springs acting before the next, turn a triangle
 * about the crossing point, and a slow press then ends less steadily. (A
 * standing sphere or capsule moves at most half its radius, a quarter of
 * its thickness, in a step, so it never sweeps here: the core's sweep
 * takes over before.) Returns the corners marked at the projection's
 * pose. */
static uint32_t triangles_swept(ts_tissue *t, struct ts__ms *ms, const ts__ptool *p, int sweep,
                                double s0, double s1) {
  const double thick = thin_thickness(p);
  const double quarter = 0.25 * thick, per = TS__THIN_STEP * thick;
  const double travel = p->travel * (s1 - s0);
  double m = 1;
  if (sweep && (!p->mesh || p->mesh->thin_sweep))
    m = per > 0 ? ceil(travel / per) : TS__THIN_SWEEP_MAX;
  if (!(m >= 1)) m = 1;
  if (m > TS__THIN_SWEEP_MAX) m = TS__THIN_SWEEP_MAX;
  const uint32_t nm = (uint32_t)m;
  if (nm > 1) {
    const double near = fmin(thick, quarter + 2.0 * travel / nm + TS__THIN_NEAR * thick);
    for (uint32_t j = 1; j < nm; j++) {
      ts_pose ps;
      pose_at(p, s0 + (s1 - s0) * ((double)j / nm), &ps);
      double R[3][3];
      ts_quat_to_mat(ps.q, R);
      (void)ts__ms_thin_pass(t, ms, p, (const double (*)[3])R, ps.p, near, 1, 1);
    }
  }
  return ts__ms_thin_pass(t, ms, p, (const double (*)[3])p->at_R, p->at_pos, 0, 1, 1);
}

/* Projects the free nodes inside tool p onto its surface and marks them
 * (normal, tool) for the next substep's reaction. */
void ts__ms_contact(ts_tissue *t, struct ts__ms *ms, ts__ptool *p, int sweep) {
  if (p->tool->kind == TS_TOOL_JAWS && !p->jaws) return; /* not placed (ts_ms_grasp.c) */
  double (*x)[3] = t->x, (*v)[3] = t->v;
  const double *im = t->inv_mass;
  uint32_t hits = 0;
  const double *depth = ms->depth, wh = ms->wh;
  const int thin = p->mesh ? p->mesh->thin_pass : p->thin;
  /* moves noted for the surface tree while it is armed (armed_tree) */
  ts_aabb_tree *nt = armed_tree(t, ms);
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double ex = x[i][0] - p->bc[0], ey = x[i][1] - p->bc[1], ez = x[i][2] - p->bc[2];
    if (!(ex * ex + ey * ey + ez * ez < p->br2) || im[i] == 0) continue;
    if (p->held && p->held[i]) continue; /* the jaws carry it */
    /* signed distance sd from the tool and its outward direction n */
    double n[3] = {0, 1, 0}, sd;
    if (p->jaws) {
      sd = ts_contact_tool_sdf(p->jaws, x[i], n); /* of the nearer jaw box */
    } else if (p->mesh) {
      sd = mesh_sdf(p, x[i], depth ? wh * depth[i] : 0.0, n);
    } else {
      double ap[3] = {x[i][0] - p->a[0], x[i][1] - p->a[1], x[i][2] - p->a[2]};
      double u = (ap[0] * p->ab[0] + ap[1] * p->ab[1] + ap[2] * p->ab[2]) * p->inv_len2;
      u = u < 0 ? 0 : u > 1 ? 1 : u;
      double d[3];
      for (int k = 0; k < 3; k++) d[k] = x[i][k] - (p->a[k] + u * p->ab[k]);
      double dl = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      if (dl > 0)
        for (int k = 0; k < 3; k++) n[k] = d[k] / dl;
      sd = dl - p->r;
    }
    /* a node left on the surface by the last projection (and held there by
     * its reaction) is still in contact: a skin of 1e-4 r (0.5 um for a
     * 5 mm tool; of the reach for a mesh) that rounding and the tangential
     * sliding do not cross */
    if (depth) sd += wh * depth[i]; /* the allowance, if any */
    if (!(sd < p->skin)) continue;
    if (sd < 0) {
      /* inelastic: the node moves onto the surface without a velocity
       * kick (Verlet's implied velocity x - x_prev is kept by moving
       * x_prev along), then loses its velocity into the tool */
      int verlet = t->branch[i] == TS_BRANCH_VERLET;
      double *xp = t->x_prev[i];
      for (int k = 0; k < 3; k++) {
        double target = x[i][k] - sd * n[k];
        if (verlet) xp[k] += target - x[i][k];
        x[i][k] = target;
      }
      double vn = v[i][0] * n[0] + v[i][1] * n[1] + v[i][2] * n[2];
      if (vn < 0)
        for (int k = 0; k < 3; k++) v[i][k] -= vn * n[k];
      if (verlet) {
        double rel = 0;
        for (int k = 0; k < 3; k++) rel += (x[i][k] - xp[k]) * n[k];
        if (rel < 0)
          for (int k = 0; k < 3; k++) xp[k] += rel * n[k];
      }
      if (nt) ts_aabb_tree_defer_note(nt, i, x[i]);
    }
    mark_node(ms, p, i, n);
    hits++;
  }
  if (thin)
    hits += p->swept ? triangles_swept(t, ms, p, sweep, p->at_s0, p->at_s)
                     : triangles_swept(t, ms, p, sweep, 0.0, 1.0);
  if (hits > p->contacts) p->contacts = hits; /* the most in any substep of the step */
}

/* Keeps only the marks of nodes still within the skin of their tool at its
 * pose for this step (a tool that moved away or went inactive lets go at
 * once), with the normals at the new pose. */
void ts__ms_revalidate_contacts(const ts_tissue *t, struct ts__ms *ms, const ts__ptool *pt,
                                const int8_t *slot) {
  disarm(ms); /* the step's start (the jaws' grasp may have moved nodes) */
  uint32_t kept = 0;
  for (uint32_t q = 0; q < ms->n_clist; q++) {
    uint32_t i = ms->clist[q];
    int j = slot[(ms->ctool[i] & TS__CTOOL) - 1];
    int keep = 0;
    if (j >= 0) {
      const ts__ptool *p = &pt[j];
      const double allow = ms->depth ? ms->wh * ms->depth[i] : 0.0;
      double n[3];
      if (p->held && p->held[i]) {
        keep = 0; /* held by the jaws now: no contact reaction */
      } else if (p->jaws) {
        keep = ts_contact_tool_sdf(p->jaws, t->x[i], n) + allow < p->skin;
      } else if (p->mesh) {
        keep = mesh_sdf(p, t->x[i], allow, n) + allow < p->skin;
      } else {
        double ap[3] = {t->x[i][0] - p->a[0], t->x[i][1] - p->a[1], t->x[i][2] - p->a[2]};
        double u = (ap[0] * p->ab[0] + ap[1] * p->ab[1] + ap[2] * p->ab[2]) * p->inv_len2;
        u = u < 0 ? 0 : u > 1 ? 1 : u;
        double d[3], dl = 0;
        for (int k = 0; k < 3; k++) {
          d[k] = t->x[i][k] - (p->a[k] + u * p->ab[k]);
          dl += d[k] * d[k];
        }
        dl = sqrt(dl);
        keep = dl + allow < p->r + p->skin && dl > 0;
        for (int k = 0; keep && k < 3; k++) n[k] = d[k] / dl;
      }
      if (keep) memcpy(ms->cn[i], n, sizeof n);
    }
    if (keep)
      ms->clist[kept++] = i;
    else
      ms->ctool[i] = 0;
  }
  ms->n_clist = kept;
  /* the triangles a tool rests on at its new pose (a swept one's first pose
   * of the sweep), marked again */
  for (int i = 0; i < TS__MAX_STEP_TOOLS; i++) {
    const ts__ptool *p = slot[i] >= 0 ? &pt[slot[i]] : NULL;
    if (p && (p->mesh ? p->mesh->thin_pass : p->thin))
      ts__ms_thin_pass((ts_tissue *)t, ms, p, (const double (*)[3])p->at_R, p->at_pos, 0, 0,
                       1); /* move 0: t is only read */
  }
}

void ts__ms_free(struct ts__ms *ms) {
  if (!ms) return;
  ts_aabb_tree_destroy(ms->tree);
  free(ms->tri_buf);
  free(ms->hot_of); /* and lim_of, one block */
  free(ms->lim_off); /* and lim_at, lim_due, lim_moved, one block */
  ts__ms_guard_free(ms->guard);
  for (int i = 0; i < TS__MAX_STEP_TOOLS; i++) ts__ms_grasp_free(ms->grasp[i]);
  free(ms);
}

/* Forgets the contacts of the last substep. */
void ts__ms_clear_contacts(struct ts__ms *ms) {
  /* called after the substep's update moved the nodes: the surface tree's
   * deferred refit has lost track */
  disarm(ms);
  for (uint32_t k = 0; k < ms->n_clist; k++) ms->ctool[ms->clist[k]] = 0;
  ms->n_clist = 0;
}

int ts_massspring_carry_tools(ts_tissue *to, const ts_tissue *from) {
  if (!to) return TS_EINVAL;
  if (to == from) return 0;
  if (!to->ms || to->ms->n_nodes != to->n_nodes || to->ms->n_springs != to->n_springs) {
    int rc = ts_massspring_prepare(to);
    if (rc) return rc;
  }
  struct ts__ms *ms = to->ms;
  const struct ts__ms *om = from ? from->ms : NULL;
  if (om) {
    memcpy(ms->tl_pos, om->tl_pos, sizeof ms->tl_pos);
    memcpy(ms->tl_quat, om->tl_quat, sizeof ms->tl_quat);
    memcpy(ms->tl_seen, om->tl_seen, sizeof ms->tl_seen);
  } else {
    memset(ms->tl_seen, 0, sizeof ms->tl_seen);
  }
  return 0;
}
