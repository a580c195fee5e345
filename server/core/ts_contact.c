/*
 * ts_contact.c: tool-tissue contact response (ts_contact.h): candidate
 * vertices from the tissue's AABB tree around the swept tool, projection
 * to the surface of the tool's exact signed distance along a substepped
 * sweep (no tunnelling), and position-level Coulomb friction (Mueller et
 * al. 2020, "Detailed Rigid Body Simulation with Extended Position Based
 * Dynamics", section 3.5).
 */
#include "ts_contact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_collide.h"
#include "ts_contact_friction.h"
#include "ts_contact_plan.h"
#include "ts_error.h"
#include "ts_tritri.h"

#define TS__MAX_SUBSTEPS 4096u
#define TS__PIERCE_ROUNDS 4   /* pushes of one triangle per pass, mesh tools */
#define TS__PIERCE_TOL 0.01   /* of the thickness: a pierce this close to the allowance is done */
#define TS__SWEEP_NEAR 0.05   /* of the thickness: slack of a sweep pose's depth bound */

ts_contact_def ts_default_contact_def(void) {
  ts_contact_def d = {
      .mu_static = 0, .mu_kinetic = 0, .margin = 5e-4, .travel_fraction = 0.25, .max_substeps = 256,
      .triangle_pass = 1};
  return d;
}

static int def_ok(const ts_contact_def *d) {
  if (!(d->mu_static >= 0) || !isfinite(d->mu_static)) return 0;
  if (!(d->mu_kinetic >= 0) || !(d->mu_kinetic <= d->mu_static)) return 0;
  if (!(d->margin >= 0) || !isfinite(d->margin)) return 0;
  if (!(d->travel_fraction > 0) || !(d->travel_fraction <= 1)) return 0;
  return d->max_substeps >= 1 && d->max_substeps <= TS__MAX_SUBSTEPS;
}

int ts_contact_ws_init(ts_contact_ws *ws, const ts_contact_def *def, uint32_t n_points,
                       uint32_t cap, uint32_t tri_cap) {
  if (!ws) return TS_EINVAL;
  memset(ws, 0, sizeof *ws);
  ts_contact_def d = def ? *def : ts_default_contact_def();
  if (!def_ok(&d) || n_points == 0 || cap == 0 || tri_cap == 0) return TS_EINVAL;
  ws->def = d;
  ws->n_points = n_points;
  ws->cap = cap;
  ws->tri_cap = tri_cap;
  ws->v = calloc(cap, sizeof *ws->v);
  ws->carry = calloc(cap, sizeof *ws->carry);
  ws->tri_buf = calloc(tri_cap, sizeof *ws->tri_buf);
  ws->swept = calloc(tri_cap, sizeof *ws->swept);
  ws->mark = calloc(n_points, sizeof *ws->mark);
  ws->slot = calloc(n_points, sizeof *ws->slot);
  ws->anchor = calloc(n_points, sizeof *ws->anchor);
  ws->anc_stamp = calloc(n_points, sizeof *ws->anc_stamp);
  ws->plan_tris = calloc(tri_cap, sizeof *ws->plan_tris);
  if (!ws->v || !ws->carry || !ws->tri_buf || !ws->swept || !ws->mark || !ws->slot ||
      !ws->anchor || !ws->anc_stamp || !ws->plan_tris) {
    ts_contact_ws_free(ws);
    return TS_ENOMEM;
  }
  ws->substeps = 1;
  return 0;
}

void ts_contact_ws_free(ts_contact_ws *ws) {
  if (!ws) return;
  free(ws->v);
  free(ws->carry);
  free(ws->tri_buf);
  free(ws->swept);
  free(ws->mark);
  free(ws->slot);
  free(ws->anchor);
  free(ws->anc_stamp);
  free(ws->plan_tris);
  memset(ws, 0, sizeof *ws);
}

/* ---- signed distance of the primitives ---- */

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* Signed distance from an oriented box and the outward direction. */
static double box_sdf(const ts_obb *b, const double p[3], double n[3]) {
  double d[3], q[3], o[3];
  for (int k = 0; k < 3; k++) d[k] = p[k] - b->c[k];
  int inside = 1, imax = 0;
  for (int i = 0; i < 3; i++) {
    q[i] = dot3(d, b->r[i]);
    o[i] = fabs(q[i]) - b->e[i];
    inside &= o[i] <= 0;
    if (o[i] > o[imax]) imax = i;
  }
  if (inside) {
    const double s = q[imax] < 0 ? -1.0 : 1.0;
    for (int k = 0; k < 3; k++) n[k] = s * b->r[imax][k];
    return o[imax];
  }
  double v[3], l2 = 0;
  for (int i = 0; i < 3; i++) {
    v[i] = o[i] > 0 ? (q[i] < 0 ? -o[i] : o[i]) : 0.0;
    l2 += v[i] * v[i];
  }
  const double l = sqrt(l2);
  for (int k = 0; k < 3; k++) n[k] = (v[0] * b->r[0][k] + v[1] * b->r[1][k] + v[2] * b->r[2][k]) / l;
  return l;
}

double ts_contact_tool_sdf(const ts_posed_tool *tool, const double p[3], double n[3]) {
  double nn[3];
  if (!n) n = nn;
  if (!tool || !tool->tree || !p) return NAN;
  const ts_obb_tree *tr = tool->tree;
  if (tr->kind == TS_SHAPE_SPHERE || tr->kind == TS_SHAPE_CAPSULE) {
    double a[3], b[3], ab[3], ap[3];
    ts_posed_tool_segment(tool, a, b);
    for (int k = 0; k < 3; k++) ab[k] = b[k] - a[k], ap[k] = p[k] - a[k];
    const double l2 = dot3(ab, ab);
    double u = l2 > 0 ? dot3(ap, ab) / l2 : 0.0;
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double d[3];
    for (int k = 0; k < 3; k++) d[k] = ap[k] - u * ab[k];
    const double dl = sqrt(dot3(d, d));
    if (dl > 0) {
      for (int k = 0; k < 3; k++) n[k] = d[k] / dl;
    } else {
      n[0] = 0, n[1] = 1, n[2] = 0;
    }
    return dl - tr->radius;
  }
  if (tr->kind == TS_SHAPE_JAWS) {
    ts_obb j0, j1;
    double n1[3];
    ts_posed_tool_jaw(tool, 0, &j0);
    ts_posed_tool_jaw(tool, 1, &j1);
    double d0 = box_sdf(&j0, p, n), d1 = box_sdf(&j1, p, n1);
    if (d1 < d0) {
      memcpy(n, n1, sizeof n1);
      return d1;
    }
    return d0;
  }
  if (tr->kind == TS_SHAPE_MESH) {
    /* into the tool frame and back: p_tool = R^T (p - position) */
    const double (*R)[3] = (const double (*)[3])tool->R;
    double d[3], q[3], nl[3];
    for (int k = 0; k < 3; k++) d[k] = p[k] - tool->pose.p[k];
    for (int k = 0; k < 3; k++) q[k] = R[0][k] * d[0] + R[1][k] * d[1] + R[2][k] * d[2];
    const double s = ts_obb_tree_mesh_sdf(tr, q, nl);
    for (int k = 0; k < 3; k++) n[k] = R[k][0] * nl[0] + R[k][1] * nl[1] + R[k][2] * nl[2];
    return s;
  }
  return NAN;
}

/* ---- the step ---- */

/* Bound of the distance any tool point moves from a to b (as ts_collide's
 * sweep): translation, rotation angle times reach, the jaws' turn. */
double ts__contact_travel(const ts_obb_tree *tr, const ts_pose *a, const ts_pose *b) {
  double dp[3], qa = 0, qb = 0, qd = 0;
  for (int k = 0; k < 3; k++) dp[k] = b->p[k] - a->p[k];
  for (int k = 0; k < 4; k++) qa += a->q[k] * a->q[k], qb += b->q[k] * b->q[k], qd += a->q[k] * b->q[k];
  double c = fabs(qd) / sqrt(qa * qb);
  c = c > 1 ? 1 : c;
  const double angle = 2.0 * acos(c);
  double t = sqrt(dot3(dp, dp)) + angle * tr->reach;
  if (tr->kind == TS_SHAPE_JAWS)
    t += fabs(b->jaw - a->jaw) * 0.5 * tr->jaw_max_angle * tr->reach;
  return t;
}

int ts_contact_begin(ts_contact_ws *ws, ts_posed_tool *tool, const ts_pose *from,
                     const ts_pose *to, const ts_aabb_tree *tree, const double *inv_mass,
                     const uint8_t *skip) {
  if (!ws || !ws->v || !tool || !tool->tree || !from || !to || !tree || !inv_mass)
    return TS_EINVAL;
  if (tree->n_points != ws->n_points) return TS_EINVAL;
  ts__friction_carry(ws); /* the sticking vertices' anchors, before n is cleared */
  ws->n = 0;
  ws->dropped = 0;
  ws->touching = 0;
  /* the tool's swept box */
  double lo[3], hi[3];
  int rc = ts_posed_tool_set_pose(tool, from);
  if (rc) return rc;
  ws->from = tool->pose;
  memcpy(ws->Rf, tool->R, sizeof ws->Rf);
  const double *ext;
  const ts_obb *b = ts_posed_tool_box_ext(tool, 0, &ext);
  for (int k = 0; k < 3; k++) lo[k] = b->c[k] - ext[k], hi[k] = b->c[k] + ext[k];
  rc = ts_posed_tool_set_pose(tool, to);
  if (rc) return rc;
  ws->to = tool->pose;
  memcpy(ws->Rt, tool->R, sizeof ws->Rt);
  b = ts_posed_tool_box_ext(tool, 0, &ext);
  for (int k = 0; k < 3; k++) {
    lo[k] = fmin(lo[k], b->c[k] - ext[k]) - ws->def.margin;
    hi[k] = fmax(hi[k], b->c[k] + ext[k]) + ws->def.margin;
  }
  /* substeps of the sweep */
  const double travel = ts__contact_travel(tool->tree, &ws->from, &ws->to);
  const double per = ws->def.travel_fraction * tool->tree->thickness;
  double m = per > 0 ? ceil(travel / per) : ws->def.max_substeps;
  if (!(m >= 1)) m = 1;
  if (m > ws->def.max_substeps) m = ws->def.max_substeps;
  ws->substeps = (uint32_t)m;

  /* candidates: free nodes of the triangles the tool may reach within the
   * step. By the method's descent (ts_collide_tissue_tris): the tool at
   * its mid pose, each of its boxes grown by half the travel bound (no
   * tool point is farther than that from its mid-pose place at any pose
   * between) and the margin, against the tissue's fat leaf boxes; or, as
   * a reference (box_candidates), the swept root box above */
  uint32_t nt;
  /* A tool whose tree is one box (a sphere, a capsule) has for descent the
   * tissue tree's walk with that box's bounds, which is the root box's
   * query: the swept box above is that box over the step, and was 1.10 to
   * 1.16 times faster than the descent's mid pose and per-leaf tool loop
   * (collide, contact_response_us_per_step beside
   * root_box_response_us_per_step, alternated in one run) */
  const double grow = 0.5 * travel * (1 + 1e-9) + 1e-12 + ws->def.margin;
  /* A vertex inside a mesh tool within `grow` of its surface is inside the
   * grown leaf box of the nearest triangle, so the descent has it; a deeper
   * one only if the tool can hold a point that deep, and no point of a
   * mesh is deeper inside than its root box's smallest half extent. A tool
   * thicker than that (twice the margin and the travel: 1 mm at rest) put
   * down on the tissue rather than swept into it (a jump: tool-max-speed 0,
   * a core caller) would leave the deeper vertices inside for good
   * (test_contact_buried: the instrument at 15 times its size, 6 mm thick,
   * put down 0-3 mm deep, 13-26 of the 95-188 nodes inside it were no
   * candidates); it takes the swept root box's candidates, which hold every
   * point the tool covers. The dental instrument (0.4 mm thick) and the
   * primitives (a vertex inside is inside a leaf box) keep the descent. */
  const ts_obb *rb = &tool->tree->nodes[0].box;
  const int thick_mesh = tool->tree->kind == TS_SHAPE_MESH &&
                         fmin(rb->e[0], fmin(rb->e[1], rb->e[2])) > grow;
  if (ws->def.box_candidates || tool->tree->n_nodes == 1 || thick_mesh) {
    nt = ts_aabb_tree_query_box(tree, lo, hi, ws->tri_buf, ws->tri_cap);
  } else {
    ts_pose mid;
    ts_pose_lerp(&ws->from, &ws->to, 0.5, &mid);
    rc = ts_posed_tool_set_pose(tool, &mid);
    if (rc) return rc;
    /* from the plan's superset when it holds this sweep (the same
     * triangles in the same order), else by the walk */
    if (!ts__contact_planned(ws, tool, tree, grow, &nt))
      nt = ts_collide_tissue_tris(tool, tree, NULL, grow, ws->tri_buf, ws->tri_cap, NULL);
    rc = ts_posed_tool_set_pose(tool, &ws->to);
    if (rc) return rc;
  }
  int full = nt > ws->tri_cap;
  if (full) nt = ws->tri_cap;
  ws->n_tris = nt;
  ws->tree = tree;
  memset(ws->swept, 0, sizeof *ws->swept * nt);
  if (++ws->stamp == 0) { /* wrapped: clear the marks */
    memset(ws->mark, 0, sizeof *ws->mark * ws->n_points);
    ws->stamp = 1;
  }
  for (uint32_t j = 0; j < nt; j++) {
    const uint32_t *tri = tree->tris[ws->tri_buf[j]];
    for (int c = 0; c < 3; c++) {
      const uint32_t i = tri[c];
      if (ws->mark[i] == ws->stamp) continue;
      ws->mark[i] = ws->stamp;
      ws->slot[i] = UINT32_MAX;
      if (!(inv_mass[i] > 0) || (skip && skip[i])) continue;
      if (ws->n == ws->cap) {
        ws->dropped++;
        continue;
      }
      ws->slot[i] = ws->n;
      ts_contact_vertex *v = &ws->v[ws->n++];
      memset(v, 0, sizeof *v);
      v->node = i;
      v->n[1] = 1;
      ts__friction_take(ws, v);
    }
  }
  return full || ws->dropped ? TS_EFULL : 0;
}

/* Pushes y out of the tool shrunk by the allowance a (m, >= 0) when inside
 * it: returns the correction's length (0 outside) with the normal in n. */
static double push_out(const ts_posed_tool *tool, double y[3], double n[3], double a) {
  const double d = ts_contact_tool_sdf(tool, y, n) + a;
  if (!(d < 0)) return 0;
  for (int k = 0; k < 3; k++) y[k] -= d * n[k];
  return -d;
}

/* Moves the corners of triangle tri (candidate slots sl, inverse masses w)
 * by the point-triangle constraint: the point at barycentric bc moves by
 * depth along the unit normal n, each corner by w_c bc_c s n with s = depth
 * / sum(w_c bc_c^2). Returns the number of corners newly touching. */
static uint32_t push_triangle(ts_contact_ws *ws, const uint32_t *tri, const uint32_t sl[3],
                              const double w[3], const double bc[3], const double n[3],
                              double depth, double (*x)[3]) {
  double den = 0;
  for (int c = 0; c < 3; c++) den += w[c] * bc[c] * bc[c];
  if (!(den > 0)) return 0;
  const double s = depth / den;
  uint32_t fresh = 0;
  for (int c = 0; c < 3; c++) {
    if (!(w[c] > 0) || !(bc[c] > 0)) continue;
    ts_contact_vertex *v = &ws->v[sl[c]];
    const double k = w[c] * bc[c] * s, mass = 1.0 / w[c];
    for (int q = 0; q < 3; q++) {
      x[tri[c]][q] += k * n[q];
      v->imp[q] += mass * k * n[q];
    }
    v->lam_n += k;
    memcpy(v->n, n, sizeof v->n);
    if (!v->touching) {
      v->touching = 2; /* by a triangle: its other triangles still take the pass */
      fresh++;
    }
  }
  return fresh;
}

/* The triangle pass of a mesh tool (ts_contact.h): every candidate
 * triangle none of whose free corners touches the tool, pierced by the tool
 * from its outer side (ts_collide_mesh_pierce, at most the tool's thickness
 * deep) more than a quarter of the thickness, is moved until the tool's
 * deepest point over it is that quarter behind its plane. Returns the
 * corners newly touching. */
static uint32_t mesh_triangle_pass(ts_contact_ws *ws, const ts_posed_tool *tool, double (*x)[3],
                                   const double *inv_mass) {
  const ts_obb_tree *tr = tool->tree;
  const double (*R)[3] = (const double (*)[3])tool->R;
  const double *p = tool->pose.p;
  const double cap = tr->thickness > 0 ? tr->thickness : tr->reach;
  const double allow = 0.25 * tr->thickness; /* as the primitives' pass */
  uint32_t fresh = 0;
  for (uint32_t j = 0; j < ws->n_tris; j++) {
    const uint32_t *tri = ws->tree->tris[ws->tri_buf[j]];
    uint32_t sl[3];
    double w[3], tal = 0; /* tal: the corners' largest allowance (as the primitives') */
    int movable = 0, touched = 0;
    for (int c = 0; c < 3; c++) {
      sl[c] = ws->slot[tri[c]];
      w[c] = sl[c] != UINT32_MAX ? inv_mass[tri[c]] : 0.0;
      movable |= w[c] > 0;
      touched |= sl[c] != UINT32_MAX && ws->v[sl[c]].touching == 1;
      if (ws->allow) tal = fmax(tal, ws->allow_w * ws->allow[tri[c]]);
    }
    if (!movable || touched) continue; /* the vertex pass holds this one */
    /* the tool cannot cross a triangle one of whose corners is farther from
     * it than the triangle's longest edge (every point of T is nearer to
     * each corner): most triangles end here, without a tree descent */
    double e2 = 0, far = 0;
    for (int c = 0; c < 3; c++) {
      const double *a = x[tri[c]], *b = x[tri[(c + 1) % 3]];
      const double ex = a[0] - b[0], ey = a[1] - b[1], ez = a[2] - b[2];
      e2 = fmax(e2, ex * ex + ey * ey + ez * ez);
      if (sl[c] != UINT32_MAX) far = fmax(far, ws->v[sl[c]].sd);
    }
    if (far * far > e2 && far > 0) continue;
    /* a push moves the crossing point by the depth, but the triangle turns
     * about it when its corners move unequally, and the tool's deepest point
     * lies elsewhere: a few rounds on the same triangle settle it */
    for (int round = 0; round < TS__PIERCE_ROUNDS; round++) {
      const double X[3][3] = {{x[tri[0]][0], x[tri[0]][1], x[tri[0]][2]},
                              {x[tri[1]][0], x[tri[1]][1], x[tri[1]][2]},
                              {x[tri[2]][0], x[tri[2]][1], x[tri[2]][2]}};
      ts_hit hit;
      double bc[3];
      if (!ts_collide_mesh_pierce_posed(tr, R, p, X, ws->swept[j] ? INFINITY : cap, &hit, bc))
        break;
      if (round == 0) ws->tri_hits++;
      if (!(hit.depth > allow + tal + TS__PIERCE_TOL * tr->thickness)) break;
      fresh += push_triangle(ws, tri, sl, w, bc, hit.normal, hit.depth - allow - tal, x);
    }
  }
  return fresh;
}

/* The mesh pass (above) swept over the projection: at the poses k / m
 * (k = 1..m-1, m such that no tool point moves, relative to a candidate,
 * more than travel_fraction of the thickness from one to the next: the
 * tool's travel plus the candidates' largest motion from x0 to x) between
 * `from` and `to`, each candidate triangle's corners at y = x0 + s (x - x0) plus what
 * the sweep has pushed them so far (the vertex sweep's way, ws->carry), the
 * triangles the tool pierced from their outer side more than the allowance
 * are pushed as in the pass. The pierce's depth bound (the thickness) sees
 * a triangle only while the tool is less than its thickness through it: a
 * tool that moved farther than that since the last pass is through unseen.
 * In these substeps it is seen at most a quarter of the thickness beyond
 * the allowance and pushed back on the side it came from. A pose takes a
 * pierce only up to the allowance, two moves and 5 % of the thickness deep
 * (the tissue moves too); deeper, the tool was through the triangle before
 * this step (a side triangle the blade passed long ago), and a pose nearer
 * the last one must not push it back. The pushes are
 * then made on x (corrections of the corners, as the vertex pass's carried
 * ones), and the pass at `to` follows. Candidates whose nearest corner is
 * farther from the tool (at `to`) than the triangle's longest edge plus the
 * tool's travel and the corners' own are skipped: the tool cannot reach
 * them. Returns the corners newly touching. */
static uint32_t mesh_triangle_sweep(ts_contact_ws *ws, const ts_obb_tree *tr, double (*x)[3],
                                    const double (*x0)[3], const double *inv_mass) {
  if (!tr->thin_sweep || ws->n == 0) return 0;
  const double allow = 0.25 * tr->thickness;
  const double travel = ts__contact_travel(tr, &ws->from, &ws->to);
  /* the poses: the tool's travel and the candidates' own motion since x0
   * (a tissue springing back onto a resting tool crosses it as a moving
   * tool would), travel_fraction of the thickness apart */
  double moved = 0;
  for (uint32_t j = 0; j < ws->n; j++) {
    const uint32_t i = ws->v[j].node;
    const double dx = x[i][0] - x0[i][0], dy = x[i][1] - x0[i][1], dz = x[i][2] - x0[i][2];
    moved = fmax(moved, dx * dx + dy * dy + dz * dz);
  }
  moved = sqrt(moved);
  const double per = ws->def.travel_fraction * tr->thickness;
  double mm = per > 0 ? ceil((travel + moved) / per) : ws->def.max_substeps;
  if (!(mm >= 1)) mm = 1;
  if (mm > ws->def.max_substeps) mm = ws->def.max_substeps;
  const uint32_t m = (uint32_t)mm;
  if (m < 2) return 0;
  /* the deepest pierce a pose takes: the allowance, two moves and a slack
   * (the mass-spring sweep's bound, ts_ms_contact.c) */
  const double cap = fmin(tr->thickness > 0 ? tr->thickness : tr->reach,
                          allow + 2.0 * (travel + moved) / m + TS__SWEEP_NEAR * tr->thickness);
  memset(ws->carry, 0, sizeof *ws->carry * ws->n);
  uint32_t fresh = 0;
  for (uint32_t k = 1; k < m; k++) {
    const double s = (double)k / m;
    ts_pose ps;
    ts_pose_lerp(&ws->from, &ws->to, s, &ps);
    double R[3][3];
    ts_quat_to_mat(ps.q, R);
    for (uint32_t j = 0; j < ws->n_tris; j++) {
      const uint32_t *tri = ws->tree->tris[ws->tri_buf[j]];
      uint32_t sl[3];
      double w[3], tal = 0, Y[3][3];
      int movable = 0, touched = 0;
      double e2 = 0, far = 0;
      for (int c = 0; c < 3; c++) {
        const uint32_t i = tri[c];
        sl[c] = ws->slot[i];
        w[c] = sl[c] != UINT32_MAX ? inv_mass[i] : 0.0;
        movable |= w[c] > 0;
        touched |= sl[c] != UINT32_MAX && ws->v[sl[c]].touching == 1;
        if (ws->allow) tal = fmax(tal, ws->allow_w * ws->allow[i]);
        double own = 0; /* how far this corner is from where it is at `to` */
        for (int q = 0; q < 3; q++) {
          Y[c][q] = x0[i][q] + s * (x[i][q] - x0[i][q]) + (sl[c] != UINT32_MAX ? ws->carry[sl[c]][q] : 0.0);
          own += (Y[c][q] - x[i][q]) * (Y[c][q] - x[i][q]);
        }
        if (sl[c] != UINT32_MAX) far = fmax(far, ws->v[sl[c]].sd - sqrt(own) - (1 - s) * travel);
      }
      if (!movable || touched) continue;
      for (int c = 0; c < 3; c++) {
        const double *a = Y[c], *b = Y[(c + 1) % 3];
        const double ex = a[0] - b[0], ey = a[1] - b[1], ez = a[2] - b[2];
        e2 = fmax(e2, ex * ex + ey * ey + ez * ez);
      }
      if (far * far > e2 && far > 0) continue;
      for (int round = 0; round < TS__PIERCE_ROUNDS; round++) {
        ts_hit hit;
        double bc[3], den = 0;
        if (!ts_collide_mesh_pierce_posed(tr, (const double (*)[3])R, ps.p, (const double (*)[3])Y,
                                          cap, &hit, bc))
          break;
        if (!(hit.depth > allow + tal + TS__PIERCE_TOL * tr->thickness)) break;
        const double *n = hit.normal;
        for (int c = 0; c < 3; c++) den += w[c] * bc[c] * bc[c];
        if (!(den > 0)) break;
        const double sc = (hit.depth - allow - tal) / den;
        ws->swept[j] = 1;
        for (int c = 0; c < 3; c++) {
          if (!(w[c] > 0) || !(bc[c] > 0)) continue;
          ts_contact_vertex *v = &ws->v[sl[c]];
          const double kk = w[c] * bc[c] * sc;
          for (int q = 0; q < 3; q++) {
            ws->carry[sl[c]][q] += kk * n[q];
            Y[c][q] += kk * n[q];
          }
          v->lam_n += kk;
          memcpy(v->n, n, sizeof v->n);
          if (!v->touching) {
            v->touching = 2;
            fresh++;
          }
        }
      }
    }
  }
  for (uint32_t j = 0; j < ws->n; j++) { /* the pushes, on x */
    ts_contact_vertex *v = &ws->v[j];
    const double *cj = ws->carry[j];
    if (cj[0] == 0 && cj[1] == 0 && cj[2] == 0) continue;
    const double mass = 1.0 / inv_mass[v->node];
    for (int q = 0; q < 3; q++) {
      x[v->node][q] += cj[q];
      v->imp[q] += mass * cj[q];
    }
  }
  return fresh;
}

int ts_contact_project(ts_contact_ws *ws, ts_posed_tool *tool, double (*x)[3],
                       const double (*x0)[3], const double *inv_mass, int sweep) {
  if (!ws || !tool || !tool->tree || !x || !x0 || !inv_mass) return TS_EINVAL;
  const uint32_t n = ws->n;
  const uint32_t m = sweep && sweep != TS_CONTACT_SWEEP_THIN ? ws->substeps : 1;
  if (m > 1) {
    memset(ws->carry, 0, sizeof *ws->carry * n);
    for (uint32_t k = 1; k < m; k++) {
      const double s = (double)k / m;
      ts_pose p;
      ts_pose_lerp(&ws->from, &ws->to, s, &p);
      ts_posed_tool_set_pose(tool, &p);
      for (uint32_t j = 0; j < n; j++) {
        ts_contact_vertex *v = &ws->v[j];
        const uint32_t i = v->node;
        double y[3], nn[3];
        for (int q = 0; q < 3; q++) y[q] = x0[i][q] + s * (x[i][q] - x0[i][q]) + ws->carry[j][q];
        const double c = push_out(tool, y, nn, ws->allow ? ws->allow_w * ws->allow[i] : 0.0);
        if (c > 0) {
          for (int q = 0; q < 3; q++) ws->carry[j][q] += c * nn[q];
          memcpy(v->n, nn, sizeof nn);
        }
      }
    }
  }
  ts_posed_tool_set_pose(tool, &ws->to);
  uint32_t touching = 0;
  for (uint32_t j = 0; j < n; j++) {
    ts_contact_vertex *v = &ws->v[j];
    const uint32_t i = v->node;
    const double al = ws->allow ? ws->allow_w * ws->allow[i] : 0.0;
    double y[3], nn[3];
    memcpy(y, x[i], sizeof y);
    if (m > 1)
      for (int q = 0; q < 3; q++) y[q] += ws->carry[j][q];
    /* normal: carried corrections plus the push at `to` */
    const double c = push_out(tool, y, nn, al);
    if (c > 0) memcpy(v->n, nn, sizeof nn);
    double moved[3];
    for (int q = 0; q < 3; q++) moved[q] = y[q] - x[i][q];
    const double cn = sqrt(dot3(moved, moved));
    v->lam_n += cn;
    /* friction, then back onto the surface if it slid inside */
    if (ts__friction(ws, v, y, x0[i]) > 0) {
      const double c2 = push_out(tool, y, nn, al);
      if (c2 > 0) {
        memcpy(v->n, nn, sizeof nn);
        v->lam_n += c2;
      }
    }
    const double mass = 1.0 / inv_mass[i];
    for (int q = 0; q < 3; q++) {
      v->imp[q] += mass * (y[q] - x[i][q]);
      x[i][q] = y[q];
    }
    const double sd = ts_contact_tool_sdf(tool, y, NULL);
    const double d = sd + al;
    v->sd = sd;
    v->touching = cn > 0 || d < 1e-9;
    touching += (uint32_t)v->touching;
  }
  /* the triangles the tool still meets, by barycentric weights */
  ws->tri_hits = 0;
  const ts_obb_tree *tr = tool->tree;
  double a[3], b[3];
  ts_obb jaw[2];
  const double allow = 0.25 * tr->thickness;
  if (tr->kind == TS_SHAPE_JAWS) {
    ts_posed_tool_jaw(tool, 0, &jaw[0]);
    ts_posed_tool_jaw(tool, 1, &jaw[1]);
  } else if (tr->kind != TS_SHAPE_MESH) {
    ts_posed_tool_segment(tool, a, b);
  }
  if (ws->def.triangle_pass && tr->kind == TS_SHAPE_MESH && tr->thin_pass) {
    if (sweep) touching += mesh_triangle_sweep(ws, tr, x, x0, inv_mass);
    touching += mesh_triangle_pass(ws, tool, x, inv_mass);
  }
  for (uint32_t j = 0; ws->def.triangle_pass && tr->kind != TS_SHAPE_MESH && j < ws->n_tris; j++) {
    const uint32_t *tri = ws->tree->tris[ws->tri_buf[j]];
    uint32_t sl[3];
    double T[3][3], w[3], tal = 0; /* tal: the corners' largest allowance */
    int movable = 0;
    for (int c = 0; c < 3; c++) {
      sl[c] = ws->slot[tri[c]];
      w[c] = sl[c] != UINT32_MAX ? inv_mass[tri[c]] : 0.0;
      movable |= w[c] > 0;
      memcpy(T[c], x[tri[c]], sizeof T[c]);
      if (ws->allow) tal = fmax(tal, ws->allow_w * ws->allow[tri[c]]);
    }
    if (!movable) continue;
    ts_hit hit;
    int got;
    if (tr->kind == TS_SHAPE_JAWS) {
      got = ts_contact_box_triangle(&jaw[0], (const double (*)[3])T, &hit);
      ts_hit h1;
      if (ts_contact_box_triangle(&jaw[1], (const double (*)[3])T, &h1) && (!got || h1.depth > hit.depth)) {
        hit = h1;
        got = 1;
      }
    } else if (tr->kind == TS_SHAPE_CAPSULE) {
      got = ts_contact_capsule_triangle(a, b, tr->radius, (const double (*)[3])T, &hit);
    } else {
      got = ts_contact_sphere_triangle(a, tr->radius, (const double (*)[3])T, &hit);
    }
    if (!got || !(hit.depth > allow + tal)) continue;
    double bc[3];
    (void)ts_collide_barycentric(T, hit.point, bc);
    double den = 0;
    for (int c = 0; c < 3; c++) den += w[c] * bc[c] * bc[c];
    if (!(den > 0)) continue;
    const double s = (hit.depth - allow - tal) / den;
    for (int c = 0; c < 3; c++) {
      if (!(w[c] > 0) || !(bc[c] > 0)) continue;
      ts_contact_vertex *v = &ws->v[sl[c]];
      const double k = w[c] * bc[c] * s, mass = 1.0 / w[c];
      for (int q = 0; q < 3; q++) {
        x[tri[c]][q] += k * hit.normal[q];
        v->imp[q] += mass * k * hit.normal[q];
      }
      v->lam_n += k;
      memcpy(v->n, hit.normal, sizeof v->n);
      if (!v->touching) touching++;
      v->touching = 1;
    }
    ws->tri_hits++;
  }
  ws->touching = touching;
  return (int)touching;
}

void ts_contact_reaction(const ts_contact_ws *ws, const double (*x)[3], double scale,
                         double force[3], double torque[3]) {
  double f[3] = {0, 0, 0}, tq[3] = {0, 0, 0};
  if (ws && x) {
    for (uint32_t j = 0; j < ws->n; j++) {
      const ts_contact_vertex *v = &ws->v[j];
      double fi[3], r[3];
      for (int k = 0; k < 3; k++) {
        fi[k] = -scale * v->imp[k];
        r[k] = x[v->node][k] - ws->to.p[k];
        f[k] += fi[k];
      }
      tq[0] += r[1] * fi[2] - r[2] * fi[1];
      tq[1] += r[2] * fi[0] - r[0] * fi[2];
      tq[2] += r[0] * fi[1] - r[1] * fi[0];
    }
  }
  if (force) memcpy(force, f, sizeof f);
  if (torque) memcpy(torque, tq, sizeof tq);
}
