/*
 * test_mesh_tool.c: triangle-mesh tools (issue 5: "a tool is a mesh or a
 * primitive") in the contact response: the signed distance from a mesh
 * (ts_obb_tree_mesh_sdf, ts_obb_sdf.c) against analytic ones, and a mesh
 * tool pressed into the patch by the position-based solver.
 *
 *  - A closed cube mesh (12 triangles): on 3000 pseudo-random points around
 *    it the distance equals the exact box distance to 1e-12 m (both are
 *    exact; rounding only), with the same sign and, away from the surface,
 *    the same outward direction.
 *  - A closed latitude-longitude sphere mesh of radius 5 mm: the distance
 *    lies between the exact sphere's and that minus the mesh's largest
 *    sagitta (the mesh is inscribed), and the sign agrees for every point
 *    farther than the sagitta from the sphere.
 *  - The cube with one face removed (open): a point beyond the opening,
 *    nearest to the rim, counts as outside; points inside still count as
 *    inside (an open mesh bounds the region behind its faces).
 *  - Static equilibrium with the sphere mesh pressed 4 mm into the settled
 *    patch (as test_contact's sphere): the tool's force equals the anchors'
 *    reaction plus the tissue's weight within 1 % of the vertical force,
 *    no node is left inside, and the force is within 10 % of the exact
 *    sphere's at the same depth (faceting: the mesh lies up to its sagitta
 *    inside the sphere).
 *  - A thin mesh tool: the dental instrument at its real size pressed 2 mm
 *    tip first into a patch with the default patch's 3.6 mm triangles, its
 *    spatula between the nodes: the triangle pass (ts_contact.h,
 *    ts_ms_contact.c) dents the surface and the tool feels it, in both
 *    solvers (test_thin_tool says the bounds).

 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_contact.h"
#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_mesh.h"
#include "ts_mesh_io.h"
#include "ts_ms_internal.h"
#include "ts_obb_tree.h"
#include "ts_tissue.h"
#include "ts_xpbd.h"
#include "mesh_fixtures.h"

#define DT 1e-3
#define PI 3.14159265358979323846

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* xorshift64*, uniform in [0, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static ts_mesh *mesh_new(uint32_t nv, uint32_t nt) {
  ts_mesh *m = NULL;
  ck_assert_int_eq(ts_mesh_alloc(nv, nt, &m), 0);
  return m;
}

/* The cube [-h, h]^3, counter-clockwise seen from outside; without the +z
 * face (its two triangles) when open. */
static ts_mesh *box_mesh(const double h[3], int open);
static ts_mesh *cube(double h, int open) {
  const double hh[3] = {h, h, h};
  return box_mesh(hh, open);
}

/* The box [-h0, h0] x [-h1, h1] x [-h2, h2], as cube(). */
static ts_mesh *box_mesh(const double h[3], int open) {
  static const int V[8][3] = {{-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1},
                              {-1, -1, 1},  {1, -1, 1},  {1, 1, 1},  {-1, 1, 1}};
  static const uint32_t T[12][3] = {{0, 2, 1}, {0, 3, 2}, /* -z */
                                    {4, 5, 6}, {4, 6, 7}, /* +z */
                                    {0, 1, 5}, {0, 5, 4}, /* -y */
                                    {3, 7, 6}, {3, 6, 2}, /* +y */
                                    {0, 4, 7}, {0, 7, 3}, /* -x */
                                    {1, 2, 6}, {1, 6, 5}}; /* +x */
  ts_mesh *m = mesh_new(8, open ? 10 : 12);
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 3; k++) m->v[i][k] = h[k] * V[i][k];
  uint32_t n = 0;
  for (int f = 0; f < 12; f++) {
    if (open && (f == 2 || f == 3)) continue;
    memcpy(m->t[n++], T[f], sizeof T[f]);
  }
  return m;
}

static ts_obb_tree *mesh_tree(const ts_mesh *m) {
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *t = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &t), 0);
  return t;
}

/* The exact distance from the box [-h, h]^3. */
static double box_exact(double h, const double p[3]) {
  double o[3], out = 0, in = -INFINITY;
  for (int k = 0; k < 3; k++) {
    o[k] = fabs(p[k]) - h;
    if (o[k] > 0) out += o[k] * o[k];
    in = fmax(in, o[k]);
  }
  return out > 0 ? sqrt(out) : in;
}

START_TEST(test_sdf_cube) {
  const double h = 0.003;
  ts_mesh *m = cube(h, 0);
  ts_obb_tree *t = mesh_tree(m);
  double worst = 0;
  int outward_checked = 0;
  for (int i = 0; i < 3000; i++) {
    double p[3], n[3];
    for (int k = 0; k < 3; k++) p[k] = (2 * urand() - 1) * 2 * h;
    double d = ts_obb_tree_mesh_sdf(t, p, n);
    double e = box_exact(h, p);
    worst = fmax(worst, fabs(d - e));
    ck_assert_msg(fabs(d - e) <= 1e-12, "(%g %g %g): mesh %.17g, box %.17g", p[0], p[1], p[2], d, e);
    ck_assert_double_eq_tol(sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]), 1, 1e-12);
    if (e > 1e-6) { /* outside: the direction from the closest point */
      double c[3], g[3], gl = 0;
      for (int k = 0; k < 3; k++) {
        c[k] = fmax(-h, fmin(h, p[k]));
        g[k] = p[k] - c[k];
        gl += g[k] * g[k];
      }
      gl = sqrt(gl);
      ck_assert_double_gt((g[0] * n[0] + g[1] * n[1] + g[2] * n[2]) / gl, 1 - 1e-9);
      outward_checked++;
    }
  }
  printf("mesh sdf, cube: worst difference from the exact box %.3g m over 3000 points\n", worst);
  ck_assert_int_gt(outward_checked, 1000);
  ts_obb_tree_destroy(t);
  ts_mesh_free(m);
}
END_TEST

START_TEST(test_sdf_sphere) {
  const double r = 0.005;
  const uint32_t nlat = 24, nlon = 48;
  ts_mesh *m = fx_uv_sphere(r, nlat, nlon);
  ts_obb_tree *t = mesh_tree(m);
  /* the farthest a face lies inside the sphere: its circumcentre's depth
   * bounded by the longest edge l: r - sqrt(r^2 - l^2 / 3) */
  double lmax = 0;
  for (uint32_t f = 0; f < m->n_tris; f++)
    for (int c = 0; c < 3; c++) {
      const double *a = m->v[m->t[f][c]], *b = m->v[m->t[f][(c + 1) % 3]];
      lmax = fmax(lmax, sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                             (a[2] - b[2]) * (a[2] - b[2])));
    }
  const double sag = r - sqrt(r * r - lmax * lmax / 3);
  int signs = 0;
  for (int i = 0; i < 3000; i++) {
    double p[3];
    for (int k = 0; k < 3; k++) p[k] = (2 * urand() - 1) * 2 * r;
    double d = ts_obb_tree_mesh_sdf(t, p, NULL);
    double e = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]) - r;
    /* the mesh is inside the sphere: its distance is at least the exact one
     * and at most that plus the sagitta (1e-12 for rounding) */
    ck_assert_msg(d >= e - 1e-12 && d <= e + sag + 1e-12, "mesh %.6g, sphere %.6g, sagitta %.3g",
                  d, e, sag);
    if (fabs(e) > sag) {
      ck_assert_int_eq(d < 0, e < 0);
      signs++;
    }
  }
  printf("mesh sdf, sphere: %u triangles, sagitta %.3g mm, %d signs checked\n", m->n_tris,
         sag * 1e3, signs);
  ck_assert_int_gt(signs, 2500);
  ts_obb_tree_destroy(t);
  ts_mesh_free(m);
}
END_TEST

START_TEST(test_sdf_open_mesh) {
  const double h = 0.003;
  ts_mesh *m = cube(h, 1);
  ts_obb_tree *t = mesh_tree(m);
  /* deep inside, nearest to the -z face: inside */
  const double deep[3] = {0, 0, -0.8 * h};
  ck_assert_double_lt(ts_obb_tree_mesh_sdf(t, deep, NULL), -0.1 * h);
  /* just beyond the open +z side, where the closed cube's +z face would be
   * nearest: the nearest feature is the rim edge x = h, z = h, so outside,
   * at the distance to that edge */
  const double rim[3] = {0.2 * h, 0.1 * h, 1.05 * h};
  ck_assert_double_eq_tol(ts_obb_tree_mesh_sdf(t, rim, NULL), sqrt(0.8 * 0.8 + 0.05 * 0.05) * h,
                          1e-12);
  /* outside, beside a closed face: outside, at the box distance */
  const double side[3] = {1.5 * h, 0, 0};
  ck_assert_double_eq_tol(ts_obb_tree_mesh_sdf(t, side, NULL), 0.5 * h, 1e-12);
  ts_obb_tree_destroy(t);
  ts_mesh_free(m);
}
END_TEST

/* ---- a mesh tool in the position-based solver ---- */

typedef struct rig {
  ts_tissue *t;
  ts_xpbd *s;
  ts_aabb_tree *tree;
  ts_obb_tree *otree;
  ts_posed_tool pt;
  ts_contact_ws ws;
  ts_xpbd_tool tool;
  ts_xpbd_stats st;
} rig;

static void rig_init(rig *r, ts_tissue *t, const ts_tool_shape_def *shape, const ts_pose *start) {
  memset(r, 0, sizeof *r);
  r->t = t;
  r->s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(r->s);
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &r->tree), 0);
  ck_assert_int_eq(ts_obb_tree_create(shape, &r->otree), 0);
  ck_assert_int_eq(ts_posed_tool_init(&r->pt, r->otree), 0);
  ck_assert_int_eq(ts_contact_ws_init(&r->ws, NULL, t->n_nodes, t->n_nodes, ts_tissue_n_contact_tris(t)), 0);
  r->tool.posed = &r->pt;
  r->tool.contact = &r->ws;
  r->tool.prev = r->tool.pose = *start;
}

static void rig_free(rig *r) {
  ts_contact_ws_free(&r->ws);
  ts_posed_tool_free(&r->pt);
  ts_obb_tree_destroy(r->otree);
  ts_aabb_tree_destroy(r->tree);
  ts_xpbd_destroy(r->s);
  ts_tissue_destroy(r->t);
}

static ts_pose pose_at(double y) {
  ts_pose p = {.p = {0, y, 0}, .q = {1, 0, 0, 0}, .jaw = 0};
  return p;
}

/* Presses the tool's centre to 4 mm below its radius above the settled top
 * over 150 ms and holds 250 ms; returns the tool's vertical force and checks
 * the balance against the anchors and the weight (1 %). */
static double press(const ts_tool_shape_def *sd, const char *what) {
  ts_patch_def pd = ts_default_patch_def();
  pd.gravity[1] = -9.81;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &t), 0);
  uint32_t c = 0;
  double bd = INFINITY;
  for (uint32_t j = 0; j < t->nodes_per_sheet; j++) {
    double d = hypot(t->rest[j][0], t->rest[j][2]);
    if (d < bd) bd = d, c = j;
  }
  ts_pose p = pose_at(0.05);
  rig r;
  rig_init(&r, t, sd, &p);
  for (int i = 0; i < 450; i++) ck_assert_int_eq(ts_xpbd_step(r.s, t, DT, NULL, 0, &r.st), 0);
  const double y0 = t->x[c][1];
  for (int i = 0; i < 400; i++) {
    double depth = i < 150 ? 0.004 * (i + 1) / 150 : 0.004;
    p = pose_at(y0 + 0.005 - depth);
    if (i == 0) r.tool.pose = p;
    r.tool.prev = r.tool.pose;
    r.tool.pose = p;
    ck_assert_int_eq(ts_xpbd_step_posed(r.s, t, DT, NULL, 0, r.tree, &r.tool, 1, &r.st), 0);
  }
  ck_assert_msg(r.st.max_speed < 1e-5, "%s: still moving at %.3g m/s", what, r.st.max_speed);
  for (uint32_t i = 0; i < t->n_nodes; i++)
    ck_assert(ts_contact_tool_sdf(&r.pt, t->x[i], NULL) > -1e-9);
  double (*f)[3] = malloc(sizeof *f * t->n_nodes);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(ts_xpbd_node_forces(r.s, t, f), 0);
  double R[3] = {0, 0, 0}, M = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (t->inv_mass[i] > 0)
      M += 1.0 / t->inv_mass[i];
    else
      for (int k = 0; k < 3; k++) R[k] -= f[i][k];
  }
  free(f);
  printf("%s pressed 4 mm: tool (%.6g %.6g %.6g) N, anchors+weight (%.6g %.6g %.6g) N, %u "
         "contacts\n",
         what, r.tool.force[0], r.tool.force[1], r.tool.force[2], R[0] + M * t->gravity[0],
         R[1] + M * t->gravity[1], R[2] + M * t->gravity[2], r.tool.contacts);
  ck_assert_uint_ge(r.tool.contacts, 4);
  /* measured 0.06470 N (the sphere as a mesh) and 0.06476 N (exact),
   * 2026-12-04: a change by a quarter shows here; the balance below checks
   * it to 1 % */
  ck_assert_msg(r.tool.force[1] > 0.049 && r.tool.force[1] < 0.081, "%s: Fy %.6g N", what,
                r.tool.force[1]);
  for (int k = 0; k < 3; k++) {
    double want = R[k] + M * t->gravity[k];
    ck_assert_msg(fabs(r.tool.force[k] - want) <= 0.01 * r.tool.force[1],
                  "%s axis %d: tool %.6g N, anchors and weight %.6g N", what, k, r.tool.force[k],
                  want);
  }
  double fy = r.tool.force[1];
  rig_free(&r);
  return fy;
}

START_TEST(test_mesh_press) {
  ts_mesh *m = fx_uv_sphere(0.005, 24, 48);
  ts_tool_shape_def md = ts_default_tool_shape_def();
  md.kind = TS_SHAPE_MESH;
  md.mesh = m;
  double fm = press(&md, "sphere mesh");
  ts_mesh_free(m);
  ts_tool_shape_def sd = ts_default_tool_shape_def();
  sd.kind = TS_SHAPE_SPHERE;
  sd.radius = 0.005;
  double fs = press(&sd, "exact sphere");
  printf("mesh against exact sphere: %.4g N against %.4g N (%.2f %%)\n", fm, fs,
         100 * (fm - fs) / fs);
  ck_assert_double_le(fabs(fm - fs), 0.10 * fs);
}
END_TEST

/* ---- a thin mesh tool at its own size (the triangle pass) ---- */

/* The dental instrument (../shared/data/meshes, centimetres) at its real
 * size: a handle along local z with a spatula at the +z tip, 2.6 mm wide
 * (local x from -2.49 to 0.15 mm within 0.5 mm of the tip) and 0.41 mm
 * thick (local y). Tip down (+90 degrees about x: local z onto world -y,
 * local y onto world z), the spatula's middle over the patch's centre. The
 * patch: 40 mm, 12 nodes a side, so 3.6 mm triangles as the daemon's default
 * patch (80 mm, 24 nodes) has, on a quarter of its nodes (a short test);
 * its centre is the middle of a grid quad, 1.8 mm from the nearest nodes,
 * so the spatula (1.3 mm to each side, 0.2 mm thick) touches no node and
 * only a triangle pass sees it. */
#define THIN_MID 0.00117 /* m: the spatula's middle at local x = -1.17 mm */
#define THIN_PRESS 0.002 /* m: how far the tip goes below the surface */

typedef struct thin {
  ts_tissue *t;
  ts_xpbd *s;          /* NULL: the mass-spring step */
  ts_aabb_tree *tree;
  ts_obb_tree *otree;
  ts_posed_tool pt;
  ts_contact_ws ws;
  ts_xpbd_tool xt;
  ts_tool tool;        /* the mass-spring step's */
  double tipz;         /* the tip's local z, m */
} thin;

static ts_pose thin_pose(const thin *r, double tip_y) {
  ts_pose p = {.p = {THIN_MID, tip_y + r->tipz, 0}, .q = {sqrt(0.5), sqrt(0.5), 0, 0}, .jaw = 0};
  return p;
}

/* Height of the top sheet at (x, z): the top triangle over that point,
 * interpolated (NAN when none is). */
static double top_height(const ts_tissue *t, double px, double pz) {
  for (uint32_t f = 0; f < t->n_tris; f++) {
    const uint32_t *c = t->tris[f];
    if (c[0] >= t->nodes_per_sheet || c[1] >= t->nodes_per_sheet || c[2] >= t->nodes_per_sheet)
      continue;
    const double *a = t->x[c[0]], *b = t->x[c[1]], *d = t->x[c[2]];
    double den = (b[0] - a[0]) * (d[2] - a[2]) - (d[0] - a[0]) * (b[2] - a[2]);
    if (!(fabs(den) > 0)) continue;
    double u = ((px - a[0]) * (d[2] - a[2]) - (d[0] - a[0]) * (pz - a[2])) / den;
    double v = ((b[0] - a[0]) * (pz - a[2]) - (px - a[0]) * (b[2] - a[2])) / den;
    if (u >= -1e-12 && v >= -1e-12 && u + v <= 1 + 1e-12)
      return a[1] + u * (b[1] - a[1]) + v * (d[1] - a[1]);
  }
  return NAN;
}

/* full: the daemon's default patch (80 mm, 24 nodes a side), else the
 * 40 mm quarter with 12; sweep: the tree's thin_sweep. */
static void thin_init_patch(thin *r, int xpbd, int triangle_pass, int full, int sweep,
                            uint32_t substeps) {
  memset(r, 0, sizeof *r);
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts io = ts_mesh_import_opts_default();
  io.scale = 0.01; /* centimetres: the real size */
  ts_mesh *mesh = NULL;
  ck_assert_msg(ts_mesh_import_file(path, TS_MESH_AUTO, &io, &mesh, NULL, NULL, err, sizeof err) == 0,
                "%s", err);
  ts_tool_shape_def sd = ts_default_tool_shape_def();
  sd.kind = TS_SHAPE_MESH;
  sd.mesh = mesh;
  ck_assert_int_eq(ts_obb_tree_create(&sd, &r->otree), 0);
  ts_mesh_free(mesh);
  r->otree->thin_sweep = sweep;
  r->tipz = -INFINITY;
  for (uint32_t i = 0; i < r->otree->n_verts; i++) r->tipz = fmax(r->tipz, r->otree->v[i][2]);
  ts_patch_def pd = ts_default_patch_def();
  if (!full) {
    pd.size = 0.04;
    pd.resolution = 12;
  }
  ck_assert_int_eq(ts_patch_create(&pd, &r->t), 0);
  ts_pose start = thin_pose(r, 0.01);
  if (xpbd) {
    ts_xpbd_def xd = ts_xpbd_default_def();
    xd.substeps = substeps; /* 0: automatic */
    r->s = ts_xpbd_create(r->t, &xd);
    ck_assert_ptr_nonnull(r->s);
    ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, r->t, &r->tree), 0);
    ck_assert_int_eq(ts_posed_tool_init(&r->pt, r->otree), 0);
    ts_contact_def cd = ts_default_contact_def();
    cd.triangle_pass = triangle_pass;
    ck_assert_int_eq(ts_contact_ws_init(&r->ws, &cd, r->t->n_nodes, r->t->n_nodes, ts_tissue_n_contact_tris(r->t)), 0);
    r->xt.posed = &r->pt;
    r->xt.contact = &r->ws;
    r->xt.prev = r->xt.pose = start;
  } else {
    r->tool.kind = TS_TOOL_MESH;
    r->tool.shape = r->otree;
    r->tool.active = 1;
    memcpy(r->tool.pos, start.p, sizeof start.p);
    memcpy(r->tool.quat, start.q, sizeof start.q);
  }
}

static void thin_init(thin *r, int xpbd, int triangle_pass) {
  thin_init_patch(r, xpbd, triangle_pass, 0, 1, 0);
}

static void thin_step(thin *r, double tip_y) {
  ts_pose p = thin_pose(r, tip_y);
  if (r->s) {
    r->xt.prev = r->xt.pose;
    r->xt.pose = p;
    ck_assert_int_eq(ts_xpbd_step_posed(r->s, r->t, DT, NULL, 0, r->tree, &r->xt, 1, NULL), 0);
  } else {
    memcpy(r->tool.pos, p.p, sizeof p.p);
    ck_assert_int_eq(ts_massspring_step(r->t, DT, &r->tool, 1, NULL), 0);
  }
}

static void thin_free(thin *r) {
  if (r->s) {
    ts_contact_ws_free(&r->ws);
    ts_posed_tool_free(&r->pt);
    ts_aabb_tree_destroy(r->tree);
    ts_xpbd_destroy(r->s);
  }
  ts_obb_tree_destroy(r->otree);
  ts_tissue_destroy(r->t);
}

/* How far the tool with its tip at tip_y reaches behind the top sheet: minus
 * the deepest pierce of a top triangle (ts_collide_mesh_pierce without a
 * depth bound, in the tool's frame), 0 for none. A tool through the sheet
 * reaches behind the triangles it crosses by its whole length below them. */
static double thin_behind(const thin *r, double tip_y) {
  ts_pose tp = thin_pose(r, tip_y);
  double R[3][3];
  ts_quat_to_mat(tp.q, R);
  double above = 0;
  for (uint32_t j = 0; j < r->t->n_tris; j++) {
    const uint32_t *c = r->t->tris[j];
    if (c[0] >= r->t->nodes_per_sheet || c[1] >= r->t->nodes_per_sheet || c[2] >= r->t->nodes_per_sheet)
      continue;
    double T[3][3];
    for (int q = 0; q < 3; q++)
      for (int k = 0; k < 3; k++)
        T[q][k] = R[0][k] * (r->t->x[c[q]][0] - tp.p[0]) + R[1][k] * (r->t->x[c[q]][1] - tp.p[1]) +
                  R[2][k] * (r->t->x[c[q]][2] - tp.p[2]);
    ts_hit hit;
    if (ts_collide_mesh_pierce(r->otree, (const double (*)[3])T, INFINITY, &hit))
      above = fmin(above, -hit.depth);
  }
  return above;
}

/* Settles the patch (60 ms), lowers the tip from 1 mm above the surface to
 * THIN_PRESS below it in 60 ms and holds 40 ms. Gives the surface's
 * displacement under the tip, the tip's height above the surface there
 * (negative: below it) and the tool's force. */
static void thin_press(int xpbd, int triangle_pass, double *dent, double *above, double f[3],
                       double *thick) {
  thin r;
  thin_init(&r, xpbd, triangle_pass);
  for (int i = 0; i < 60; i++) thin_step(&r, 0.01);
  const double y0 = top_height(r.t, 0, 0);
  ck_assert(isfinite(y0));
  for (int i = 1; i <= 100; i++) {
    double tip = i <= 60 ? y0 + 0.001 - (0.001 + THIN_PRESS) * i / 60.0 : y0 - THIN_PRESS;
    thin_step(&r, tip);
  }
  const double tip = y0 - THIN_PRESS, y1 = top_height(r.t, 0, 0);
  *dent = y0 - y1;
  ts_pose tp = thin_pose(&r, tip);
  double R[3][3];
  ts_quat_to_mat(tp.q, R);
  *above = thin_behind(&r, tip);
  memcpy(f, r.s ? r.xt.force : r.tool.force, sizeof(double[3]));
  *thick = r.otree->thickness;
  uint32_t inside = 0;
  for (uint32_t i = 0; i < r.t->n_nodes; i++) {
    double d[3], q[3];
    for (int k = 0; k < 3; k++) d[k] = r.t->x[i][k] - tp.p[k];
    for (int k = 0; k < 3; k++) q[k] = R[0][k] * d[0] + R[1][k] * d[1] + R[2][k] * d[2];
    inside += ts_obb_tree_mesh_sdf(r.otree, q, NULL) < 0;
  }
  printf("dental instrument 1x, %s, triangle pass %s: pressed %.1f mm, surface under the tip "
         "%.4f mm down, the tool %.4f mm behind the top sheet at most, force (%.4g %.4g %.4g) N, %u nodes inside; "
         "thickness %.3f mm\n",
         xpbd ? "XPBD" : "mass-spring", triangle_pass ? "on" : "off", THIN_PRESS * 1e3,
         *dent * 1e3, -*above * 1e3, f[0], f[1], f[2], inside, *thick * 1e3);
  ck_assert_uint_eq(inside, 0); /* no node is inside: the tool meets triangles only */
  thin_free(&r);
}

/* The real-size instrument pressed 2 mm tip first, both solvers. The
 * surface under the tip goes down with it: more than 1 mm, half the press
 * (a tip that slips through leaves the surface where gravity put it, as
 * the run without the pass shows: XPBD, under 0.1 mm); the tool reaches no
 * farther behind any top triangle (ts_collide_mesh_pierce) than a quarter of
 * its thickness (0.028 mm: the pass's allowance, as for the primitives,
 * ts_contact.h) and 10 um (the tissue's recoil after the last projection),
 * so the tip is not under the top sheet; the tool feels the tissue:
 * the force points up (F_y > 1 mN and over 3 times the tangential part). */
START_TEST(test_thin_tool) {
  const int xpbd = _i;
  double dent, above, f[3], thick;
  thin_press(xpbd, 1, &dent, &above, f, &thick);
  ck_assert_msg(dent > 0.001, "surface under the tip down %.4g mm", dent * 1e3);
  ck_assert_msg(above > -(0.25 * thick + 1e-5), "the tool %.4g mm behind the top sheet", -above * 1e3);
  ck_assert_msg(f[1] > 1e-3 && f[1] > 3 * hypot(f[0], f[2]), "force (%.4g %.4g %.4g) N", f[0],
                f[1], f[2]);
  if (xpbd) { /* without the pass: the spatula slips between the nodes */
    thin_press(xpbd, 0, &dent, &above, f, &thick);
    ck_assert_msg(dent < 1e-4, "without the pass: surface down %.4g mm", dent * 1e3);
    ck_assert_msg(fabs(f[1]) < 1e-6, "without the pass: force %.4g N", f[1]);
  }
}
END_TEST

/* The instrument driven tip first into the daemon's default patch at
 * 0.5 m/s (issue 5: no tunnelling up to 0.5 m/s at the session's dt), 1 ms
 * steps, the solver's own substeps: from 1 mm above the settled surface
 * (60 ms) to FAST_PRESS below it in 0.5 mm steps, then held 20 ms. Gives
 * the surface's displacement under the tip and how far the tool reaches
 * behind the top sheet at the end of the last moving step and after the
 * hold (thin_behind). */
#define FAST_PRESS 0.003 /* m */
static void thin_fast(int xpbd, int sweep, uint32_t substeps, double *dent,
                      double *behind_moving, double *behind_held, double *thick) {
  thin r;
  thin_init_patch(&r, xpbd, 1, 1, sweep, substeps);
  for (int i = 0; i < 60; i++) thin_step(&r, 0.01);
  const double y0 = top_height(r.t, 0, 0);
  ck_assert(isfinite(y0));
  const int n = (int)lround((0.001 + FAST_PRESS) / 0.0005); /* 0.5 mm a step */
  const double tip = y0 - FAST_PRESS;
  for (int i = 1; i <= n; i++) thin_step(&r, y0 + 0.001 - 0.0005 * i);
  *behind_moving = thin_behind(&r, tip);
  for (int i = 0; i < 20; i++) thin_step(&r, tip);
  *behind_held = thin_behind(&r, tip);
  *dent = y0 - top_height(r.t, 0, 0);
  *thick = r.otree->thickness;
  char ns[32] = "default";
  if (substeps) snprintf(ns, sizeof ns, "%u", substeps);
  printf("dental instrument at 0.5 m/s into the default patch, %s (%s substeps), sweep %s: tip "
         "%.1f mm down, surface under it %.4f mm down, the tool %.4f mm behind the top sheet "
         "after the last move, %.4f mm after 20 ms held; thickness %.3f mm\n",
         xpbd ? "XPBD" : "mass-spring", ns, sweep ? "on" : "off",
         FAST_PRESS * 1e3, *dent * 1e3,
         -*behind_moving * 1e3, -*behind_held * 1e3, *thick * 1e3);
  thin_free(&r);
}

/* With the sweep the surface goes down with the tip (more than half the
 * 3 mm press) and the tool reaches no farther behind the top sheet than a
 * quarter of its thickness (the pass's allowance) and 10 um (the tissue's
 * recoil after the last pass), held or just moved, in both solvers. The
 * mass-spring step's tool stands at its new pose through the step's
 * substeps, so it jumps 0.5 mm, 4.5 times the tool's thickness (0.11 mm),
 * at once: without the sweep (thin_sweep 0) the same run ends with the
 * spatula through the sheet (the surface not pushed, the tool farther
 * behind it). XPBD moves the tool over its own substeps (4 on this patch,
 * 0.125 mm each), and this run stays out without the sweep too, so there
 * it is only the bound that is checked; the same bounds hold with the 1
 * and 2 substeps a session may ask for (CreateSession.substeps), where the
 * tool moves 4.5 and 2.25 times its thickness in one substep (measured:
 * surface 3.41 and 3.34 mm down, the tool 0.028 mm behind it moving and
 * held). Both need the sweep in every projection of the substep, not the
 * first only (else the later sweeps' distance constraints lift the pushed
 * surface back over the tool: 0.28 mm behind at 1 substep, 0.27 at 2),
 * and its poses spaced by the tissue's own motion too (else the dented
 * surface springing back onto the resting tool crosses it: 0.22 mm behind
 * after the hold). */
START_TEST(test_thin_fast) {
  const int xpbd = _i;
  double dent, moving, held, thick;
  thin_fast(xpbd, 1, 0, &dent, &moving, &held, &thick);
  const double tol = 0.25 * thick + 1e-5;
  ck_assert_msg(dent > 0.5 * FAST_PRESS, "surface under the tip down %.4g mm", dent * 1e3);
  ck_assert_msg(moving > -tol, "the tool %.4g mm behind the top sheet after the move",
                -moving * 1e3);
  ck_assert_msg(held > -tol, "the tool %.4g mm behind the top sheet, held", -held * 1e3);
  if (xpbd) { /* a session's 1 or 2 substeps: the tool moves 0.5 or 0.25 mm in one */
    for (uint32_t ns = 1; ns <= 2; ns++) {
      thin_fast(xpbd, 1, ns, &dent, &moving, &held, &thick);
      ck_assert_msg(dent > 0.5 * FAST_PRESS, "%u substeps: surface under the tip down %.4g mm", ns,
                    dent * 1e3);
      ck_assert_msg(moving > -tol, "%u substeps: the tool %.4g mm behind the top sheet after the move",
                    ns, -moving * 1e3);
      ck_assert_msg(held > -tol, "%u substeps: the tool %.4g mm behind the top sheet, held", ns,
                    -held * 1e3);
    }
    return;
  }
  thin_fast(xpbd, 0, 0, &dent, &moving, &held, &thick);
  ck_assert_msg(dent < 0.5 * FAST_PRESS && held < -tol && moving < -tol,
                "without the sweep: down %.4g mm, %.4g mm behind", dent * 1e3, -held * 1e3);
}
END_TEST

/* The mass-spring triangle pass through the surface's AABB tree against the
 * scan of every triangle (ts__ms_thin_pass): on 600 random poses of the
 * instrument around the quarter patch (tip within 0.4 mm of the surface,
 * up to 4 mm off the centre, tilted up to 0.3 rad), with the surface's
 * nodes moved up to 0.3 mm at random (a deformed tissue, refitted), both
 * leave the same positions, previous positions, velocities and contact
 * marks bit for bit (they visit the same triangles in the same order; any
 * difference is a bug, not rounding). The poses must pierce: at least 30
 * of them move the tissue (a pierce between a quarter and the whole of the
 * 0.11 mm thickness with no node on the tool: about one pose in ten). */
START_TEST(test_thin_tree_scan) {
  thin r;
  thin_init(&r, 0, 1);
  ck_assert_int_eq(ts_massspring_prepare(r.t), 0);
  ts_tissue *t = r.t;
  struct ts__ms *ms = t->ms;
  const uint32_t n = t->n_nodes;
  double(*x0)[3] = malloc(sizeof *x0 * n), (*xs)[3] = malloc(sizeof *xs * n);
  double(*ps)[3] = malloc(sizeof *ps * n), (*vs)[3] = malloc(sizeof *vs * n);
  uint32_t *cl = malloc(sizeof *cl * n);
  ck_assert(x0 && xs && ps && vs && cl);
  memcpy(x0, t->rest, sizeof *x0 * n);
  const double y0 = top_height(t, 0, 0);
  int moved = 0;
  for (int it = 0; it < 600; it++) {
    for (uint32_t i = 0; i < n; i++)
      for (int k = 0; k < 3; k++) {
        t->x[i][k] = x0[i][k] + (i < t->nodes_per_sheet ? 0.0003 * (2 * urand() - 1) : 0.0);
        t->x_prev[i][k] = t->x[i][k] - 1e-5 * urand();
        t->v[i][k] = 0.01 * (2 * urand() - 1);
      }
    const double ang = 0.3 * (2 * urand() - 1), ax = urand() * 2 * PI;
    const double q1[4] = {cos(ang / 2), sin(ang / 2) * cos(ax), 0, sin(ang / 2) * sin(ax)};
    const double q0[4] = {sqrt(0.5), sqrt(0.5), 0, 0};
    ts_pose tp = thin_pose(&r, y0 - 0.0004 * (2 * urand() - 1));
    tp.p[0] += 0.004 * (2 * urand() - 1);
    tp.p[2] += 0.004 * (2 * urand() - 1);
    /* q1 q0: the tilt after the tip-down turn */
    tp.q[0] = q1[0] * q0[0] - q1[1] * q0[1] - q1[2] * q0[2] - q1[3] * q0[3];
    tp.q[1] = q1[0] * q0[1] + q1[1] * q0[0] + q1[2] * q0[3] - q1[3] * q0[2];
    tp.q[2] = q1[0] * q0[2] - q1[1] * q0[3] + q1[2] * q0[0] + q1[3] * q0[1];
    tp.q[3] = q1[0] * q0[3] + q1[1] * q0[2] - q1[2] * q0[1] + q1[3] * q0[0];
    memcpy(r.tool.pos, tp.p, sizeof tp.p);
    memcpy(r.tool.quat, tp.q, sizeof tp.q);
    ts__ptool p;
    ts__ms_prepare_tool(&p, &r.tool);
    p.index = 0;
    double (*xa)[3] = malloc(sizeof *xa * n);
    ck_assert_ptr_nonnull(xa);
    memcpy(xa, t->x, sizeof *xa * n);
    memcpy(ps, t->x_prev, sizeof *ps * n);
    memcpy(vs, t->v, sizeof *vs * n);
    /* the scan */
    ts__ms_clear_contacts(ms);
    const uint32_t ms_scan = ts__ms_thin_pass(t, ms, &p, (const double (*)[3])p.R, r.tool.pos, 0, 1, 0);
    memcpy(xs, t->x, sizeof *xs * n);
    const uint32_t ncl = ms->n_clist;
    memcpy(cl, ms->clist, sizeof *cl * ncl);
    double (*xps)[3] = malloc(sizeof *xps * n), (*vvs)[3] = malloc(sizeof *vvs * n);
    ck_assert(xps && vvs);
    memcpy(xps, t->x_prev, sizeof *xps * n);
    memcpy(vvs, t->v, sizeof *vvs * n);
    /* the tree, from the same state */
    memcpy(t->x, xa, sizeof *xa * n);
    memcpy(t->x_prev, ps, sizeof *ps * n);
    memcpy(t->v, vs, sizeof *vs * n);
    ts__ms_clear_contacts(ms);
    const uint32_t ms_tree = ts__ms_thin_pass(t, ms, &p, (const double (*)[3])p.R, r.tool.pos, 0, 1, 1);
    ck_assert_ptr_nonnull(ms->tree); /* the tree was used */
    ck_assert_uint_eq(ms_tree, ms_scan);
    ck_assert_uint_eq(ms->n_clist, ncl);
    ck_assert(memcmp(ms->clist, cl, sizeof *cl * ncl) == 0);
    ck_assert(memcmp(t->x, xs, sizeof *xs * n) == 0);
    ck_assert(memcmp(t->x_prev, xps, sizeof *xps * n) == 0);
    ck_assert(memcmp(t->v, vvs, sizeof *vvs * n) == 0);
    moved += memcmp(xs, xa, sizeof *xa * n) != 0;
    free(xa);
    free(xps);
    free(vvs);
  }
  printf("mass-spring thin pass, tree against scan: 600 poses, %d moved the tissue, all identical\n",
         moved);
  ck_assert_int_ge(moved, 30);
  free(x0);
  free(xs);
  free(ps);
  free(vs);
  free(cl);
  thin_free(&r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("mesh_tool");
  TCase *tc = tcase_create("mesh_tool");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_sdf_cube);
  tcase_add_test(tc, test_sdf_sphere);
  tcase_add_test(tc, test_sdf_open_mesh);
  tcase_add_test(tc, test_mesh_press);
  tcase_add_loop_test(tc, test_thin_tool, 0, 2);
  tcase_add_loop_test(tc, test_thin_fast, 0, 2);
  tcase_add_test(tc, test_thin_tree_scan);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
