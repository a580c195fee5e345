/*
 * test_subdivision.c: Check suite for mesh topology (ts_meshtopo), the BFS
 * contact region (ts_region), Loop subdivision whole and by region, also
 * through the layers of an extrusion (ts_loop), and longest-edge bisection
 * (ts_leb).
 *
 * What is asserted, and against what:
 *   - topology counts of shapes known in closed form (icosahedron, torus,
 *     patch) and of broken meshes (non-manifold edge and vertex, a flipped
 *     triangle, a degenerate one);
 *   - whole-mesh Loop subdivision equals OpenMesh's LoopT (the reference
 *     program tests/ref/openmesh_loop, compiled in when TS_OPENMESH_LOOP
 *     names it) to 1e-9 on closed meshes (spot, liver) and on meshes with a
 *     boundary (spot with a hole, a curved patch); OpenMesh's boundary rules
 *     are the (1/2 1/2 on a boundary edge, 1/8 6/8 1/8 at a boundary
 *     vertex), so everything is comparable; also Loop on an icosahedron
 *     against the rules worked out by hand;
 *   - region subdivision is conforming (closed stays closed, no T-junction),
 *     has exactly the red/green triangle counts a brute-force count predicts,
 *     and its vertices equal the whole-mesh result where the rules apply and
 *     the input elsewhere;
 *   - through an extrusion, every sheet follows the surface (affine
 *     invariance: a translated sheet stays translated exactly);
 *   - the BFS region equals a brute-force distance filter followed by a
 *     connected-component search;
 *   - longest-edge bisection leaves no edge over the bound, stays conforming,
 *     keeps the area (midpoint splits), bisects in order of decreasing length
 *     and keeps the smallest angle at least half the initial one (Rosenberg
 *     and Stenger's bound for longest-edge bisection).
 * After every operation the result is a manifold, consistently wound, free of
 * degenerate triangles, with the expected Euler characteristic.
 */
#include "ts_check.h"
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "extrude_fixtures.h"
#include "mesh_fixtures.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_leb.h"
#include "ts_loop.h"
#include "ts_mesh.h"
#include "ts_mesh_io.h"
#include "ts_meshtopo.h"
#include "ts_region.h"
#include "tool/commands.h"

extern char **environ;

/* ---- helpers ---- */

static ts_meshtopo *topo_of(const ts_mesh *m) {
  ts_meshtopo *t = NULL;
  ck_assert_int_eq(ts_meshtopo_build(m, &t), 0);
  return t;
}

static ts_meshtopo_report report_of(const ts_mesh *m, int expect_rc) {
  ts_meshtopo *t = topo_of(m);
  ts_meshtopo_report r;
  char err[256];
  ck_assert_int_eq(ts_meshtopo_check(m, t, &r, err, sizeof err), expect_rc);
  ts_meshtopo_free(t);
  return r;
}

static ts_mesh *loop_n(const ts_mesh *m, uint32_t levels) {
  ts_mesh *r = NULL;
  char err[256];
  int rc = ts_loop_subdivide_n(m, levels, &r, err, sizeof err);
  ck_assert_msg(rc == 0, "loop: %s %s", ts_err_name(rc), err);
  return r;
}

#ifdef TS_OPENMESH_LOOP
/* Spot with a round hole: drops the triangles whose centroid is within
 * `radius` of vertex 0. */
static ts_mesh *spot_with_hole(double radius) {
  ts_mesh *m = fx_load("spot.obj", 1.0);
  uint8_t *keep = malloc(m->n_tris);
  for (uint32_t f = 0; f < m->n_tris; f++) {
    double c[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
      for (int a = 0; a < 3; a++) c[a] += m->v[m->t[f][k]][a] / 3;
    keep[f] = fx_dist(c, m->v[0]) > radius;
  }
  ts_mesh *r = fx_keep_tris(m, keep);
  free(keep);
  ts_mesh_free(m);
  return r;
}

/* ---- OpenMesh comparison ---- */

typedef struct by_x {
  const double (*v)[3];
  uint32_t i;
} by_x;

static int cmp_byx(const void *pa, const void *pb) {
  const by_x *a = pa, *b = pb;
  double xa = a->v[a->i][0], xb = b->v[b->i][0];
  return (xa > xb) - (xa < xb);
}

static int cmp_tri(const void *pa, const void *pb) {
  const uint32_t *a = pa, *b = pb;
  for (int k = 0; k < 3; k++)
    if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

static void canon_tri(uint32_t *t) { /* rotate the smallest index first, keep the cycle */
  while (t[0] > t[1] || t[0] > t[2]) {
    uint32_t s = t[0];
    t[0] = t[1], t[1] = t[2], t[2] = s;
  }
}

/* Asserts ours == ref up to vertex numbering: every vertex within tol of a
 * distinct reference vertex, and the same triangles (with the same winding)
 * under that matching. Returns the largest distance. */
static double assert_same_mesh(const ts_mesh *ours, const ts_mesh *ref, double tol) {
  ck_assert_uint_eq(ours->n_verts, ref->n_verts);
  ck_assert_uint_eq(ours->n_tris, ref->n_tris);
  uint32_t n = ref->n_verts;
  by_x *sorted = malloc(sizeof *sorted * n);
  for (uint32_t i = 0; i < n; i++) sorted[i].v = (const double(*)[3])ref->v, sorted[i].i = i;
  qsort(sorted, n, sizeof *sorted, cmp_byx);
  uint32_t *map = malloc(sizeof *map * n);
  uint8_t *taken = calloc(n, 1);
  double worst = 0;
  for (uint32_t i = 0; i < n; i++) {
    double x = ours->v[i][0];
    uint32_t lo = 0, hi = n; /* first reference vertex with x >= x - tol */
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      if (ref->v[sorted[mid].i][0] < x - tol)
        lo = mid + 1;
      else
        hi = mid;
    }
    double best = INFINITY;
    uint32_t bj = UINT32_MAX;
    for (uint32_t k = lo; k < n && ref->v[sorted[k].i][0] <= x + tol; k++) {
      double d = fx_dist(ours->v[i], ref->v[sorted[k].i]);
      if (d < best) best = d, bj = sorted[k].i;
    }
    ck_assert_msg(bj != UINT32_MAX && best <= tol, "vertex %u (%.17g %.17g %.17g): nearest reference %g away",
                  i, ours->v[i][0], ours->v[i][1], ours->v[i][2], best);
    ck_assert_msg(!taken[bj], "two vertices match reference vertex %u", bj);
    taken[bj] = 1;
    map[i] = bj;
    if (best > worst) worst = best;
  }
  uint32_t(*a)[3] = malloc(sizeof *a * ours->n_tris);
  uint32_t(*b)[3] = malloc(sizeof *b * ref->n_tris);
  for (uint32_t f = 0; f < ours->n_tris; f++) {
    for (int k = 0; k < 3; k++) a[f][k] = map[ours->t[f][k]];
    canon_tri(a[f]);
    memcpy(b[f], ref->t[f], sizeof b[f]);
    canon_tri(b[f]);
  }
  qsort(a, ours->n_tris, sizeof *a, cmp_tri);
  qsort(b, ref->n_tris, sizeof *b, cmp_tri);
  ck_assert_msg(memcmp(a, b, sizeof *a * ours->n_tris) == 0, "triangles differ from the reference");
  free(a);
  free(b);
  free(sorted);
  free(map);
  free(taken);
  return worst;
}

/* Runs the OpenMesh reference on m for `levels` steps. */
static ts_mesh *openmesh_loop(const ts_mesh *m, int levels) {
  char in[] = "/tmp/ts_om_in_XXXXXX", out[] = "/tmp/ts_om_out_XXXXXX", err[256], lv[8];
  int fd = mkstemp(in);
  ck_assert_int_ge(fd, 0);
  close(fd);
  fd = mkstemp(out);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_eq(ts_mesh_write_obj_file(m, in, err, sizeof err), 0);
  snprintf(lv, sizeof lv, "%d", levels);
  char *argv[] = {(char *)TS_OPENMESH_LOOP, in, out, lv, NULL};
  pid_t pid;
  ck_assert_int_eq(posix_spawn(&pid, TS_OPENMESH_LOOP, NULL, NULL, argv, environ), 0);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "openmesh_loop failed (status %d)", status);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  ts_mesh *r = NULL;
  int rc = ts_mesh_read_file(out, TS_MESH_OBJ, &o, &r, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "reading the reference output: %s", err);
  unlink(in);
  unlink(out);
  return r;
}

static void compare_with_openmesh(ts_mesh *m, int levels, const char *what) {
  ts_mesh *ours = loop_n(m, (uint32_t)levels);
  ts_mesh *ref = openmesh_loop(m, levels);
  double worst = assert_same_mesh(ours, ref, 1e-9);
  printf("loop vs OpenMesh: %s, %d levels, %u vertices, %u triangles, largest difference %.3g\n", what,
         levels, ours->n_verts, ours->n_tris, worst);
  ts_mesh_free(ours);
  ts_mesh_free(ref);
}

START_TEST(test_loop_openmesh_closed) {
  ts_mesh *m = fx_load("spot.obj", 1.0);
  ts_meshtopo_report r = fx_check(m, "spot");
  ck_assert_int_eq(r.euler, 2);
  ck_assert_uint_eq(r.n_boundary_edges, 0);
  compare_with_openmesh(m, 2, "spot.obj (closed)");
  ts_mesh_free(m);
  m = fx_load("liver.obj", 0.01);
  compare_with_openmesh(m, 3, "liver.obj (closed)");
  ts_mesh_free(m);
}
END_TEST

START_TEST(test_loop_openmesh_boundary) {
  ts_mesh *m = spot_with_hole(0.2);
  ts_meshtopo_report r = fx_check(m, "spot with a hole");
  ck_assert_uint_eq(r.n_boundary_loops, 1);
  ck_assert_int_eq(r.euler, 1);
  compare_with_openmesh(m, 2, "spot.obj with a hole (boundary)");
  ts_mesh_free(m);
  m = fx_grid(12, 0.08, 0.15, 1);
  compare_with_openmesh(m, 3, "curved union-jack patch (boundary, valence 2..8)");
  ts_mesh_free(m);
}
END_TEST
#endif

/* ---- topology ---- */

START_TEST(test_topology_counts) {
  ts_mesh *ico = fx_icosahedron(1.0);
  ts_meshtopo_report r = fx_check(ico, "icosahedron");
  ck_assert_uint_eq(r.n_edges, 30);
  ck_assert_int_eq(r.euler, 2);
  ck_assert_int_eq(r.genus, 0);
  ck_assert_uint_eq(r.n_components, 1);
  ck_assert_uint_eq(r.n_boundary_loops, 0);
  ck_assert_double_gt(fx_volume_pts((const double(*)[3])ico->v, (const uint32_t(*)[3])ico->t, 20), 0);
  ts_meshtopo *t = topo_of(ico);
  for (uint32_t v = 0; v < 12; v++) { /* valence 5 everywhere */
    ck_assert_uint_eq(t->vert_edge_off[v + 1] - t->vert_edge_off[v], 5);
    ck_assert_uint_eq(t->vert_tri_off[v + 1] - t->vert_tri_off[v], 5);
  }
  for (uint32_t e = 0; e < 30; e++) {
    ck_assert_uint_eq(ts_meshtopo_edge_valence(t, e), 2);
    ck_assert_uint_eq(ts_meshtopo_find_edge(t, t->edges[e][1], t->edges[e][0]), e);
  }
  ck_assert_uint_eq(ts_meshtopo_find_edge(t, 0, 3), TS_MESHTOPO_NONE); /* antipodal-ish: no edge */
  ts_meshtopo_free(t);
  ts_mesh_free(ico);

  ts_mesh *tor = fx_torus(3, 1, 12, 8);
  r = fx_check(tor, "torus");
  ck_assert_int_eq(r.euler, 0);
  ck_assert_int_eq(r.genus, 1);
  ck_assert_uint_eq(r.n_edges, 3 * 12 * 8);
  ts_mesh_free(tor);

  ts_mesh *g = fx_grid(7, 1.0, 0, 1);
  r = fx_check(g, "grid");
  ck_assert_int_eq(r.euler, 1);
  ck_assert_uint_eq(r.n_boundary_edges, 24);
  ck_assert_uint_eq(r.n_boundary_loops, 1);
  ck_assert_int_eq(r.genus, 0);
  t = topo_of(g);
  uint32_t *lv = NULL, *lo = NULL, nl = 0;
  ck_assert_int_eq(ts_meshtopo_boundary_loops(g, t, &lv, &lo, &nl), 0);
  ck_assert_uint_eq(nl, 1);
  ck_assert_uint_eq(lo[1] - lo[0], 24);
  /* the loop runs counter-clockwise seen from +y (the interior on its left):
   * its signed area in the (z, x) plane is positive */
  double area = 0;
  for (uint32_t i = 0; i < 24; i++) {
    const double *p = g->v[lv[i]], *q = g->v[lv[(i + 1) % 24]];
    area += 0.5 * (p[2] * q[0] - q[2] * p[0]);
  }
  ck_assert_double_eq_tol(area, 1.0, 1e-12);
  free(lv);
  free(lo);
  ts_meshtopo_free(t);

  /* a flipped triangle: its three interior edges are misoriented */
  uint32_t s = g->t[20][1];
  g->t[20][1] = g->t[20][2];
  g->t[20][2] = s;
  r = report_of(g, TS_EMESH);
  ck_assert_uint_eq(r.n_misoriented_edges, 3);
  ck_assert_int_eq(r.genus, -1);
  g->t[20][2] = g->t[20][1];
  g->t[20][1] = s;
  /* a repeated vertex */
  uint32_t keep = g->t[5][2];
  g->t[5][2] = g->t[5][0];
  r = report_of(g, TS_EMESH);
  ck_assert_uint_ge(r.n_degenerate_tris, 1);
  g->t[5][2] = keep;
  ts_mesh_free(g);

  /* three triangles on one edge; two fans touching at one vertex */
  ts_mesh *nm = fx_mesh(6, 3);
  double pts[6][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {2, 2, 0}};
  memcpy(nm->v, pts, sizeof pts);
  uint32_t tris[3][3] = {{0, 1, 2}, {1, 0, 3}, {0, 1, 4}};
  memcpy(nm->t, tris, sizeof tris);
  r = report_of(nm, TS_EMESH);
  ck_assert_uint_eq(r.n_nonmanifold_edges, 1);
  ts_mesh_free(nm);
  ts_mesh *bow = fx_mesh(5, 2);
  double bp[5][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {-1, 0, 0}, {-1, -1, 0}};
  memcpy(bow->v, bp, sizeof bp);
  uint32_t bt[2][3] = {{0, 1, 2}, {0, 3, 4}};
  memcpy(bow->t, bt, sizeof bt);
  r = report_of(bow, TS_EMESH);
  ck_assert_uint_eq(r.n_nonmanifold_verts, 1);
  ck_assert_uint_eq(r.n_boundary_edges, 6);
  ts_mesh_free(bow);
}
END_TEST

/* ---- Loop subdivision ---- */

/* One step on a regular icosahedron of radius 1, worked out by hand: every
 * old vertex moves to radius 1 - a + a cos(theta) (a = Loop's alpha(5),
 * cos(theta) = 1/sqrt(5) between neighbours), every edge vertex to
 * (3/8 + lambda/8) |a + b| with lambda = 4 cos(theta) / (2 + 2 cos(theta)),
 * since the two opposite vertices sum to lambda (a + b) by symmetry. */
START_TEST(test_loop_icosahedron_by_hand) {
  ts_mesh *m = fx_icosahedron(1.0);
  ts_mesh *r = loop_n(m, 1);
  ck_assert_uint_eq(r->n_verts, 42);
  ck_assert_uint_eq(r->n_tris, 80);
  ts_meshtopo_report rep = fx_check(r, "icosahedron, one Loop step");
  ck_assert_int_eq(rep.euler, 2);
  ck_assert_uint_eq(rep.n_boundary_edges, 0);
  double c = 1 / sqrt(5.0), t = 3.0 / 8 + 0.25 * cos(2 * M_PI / 5), alpha = 5.0 / 8 - t * t;
  double r_old = 1 - alpha + alpha * c;
  double lambda = 4 * c / (2 + 2 * c), r_edge = (3.0 / 8 + lambda / 8) * sqrt(2 + 2 * c);
  for (uint32_t v = 0; v < 42; v++) {
    double rad = sqrt(r->v[v][0] * r->v[v][0] + r->v[v][1] * r->v[v][1] + r->v[v][2] * r->v[v][2]);
    ck_assert_double_eq_tol(rad, v < 12 ? r_old : r_edge, 1e-14);
  }
  /* old vertices keep their direction */
  for (uint32_t v = 0; v < 12; v++)
    for (int k = 0; k < 3; k++) ck_assert_double_eq_tol(r->v[v][k], m->v[v][k] * r_old, 1e-15);
  ts_mesh_free(r);
  ts_mesh_free(m);
}
END_TEST

/* A flat patch stays flat (affine invariance), its straight boundary edges
 * stay on their lines (the boundary rules only mix boundary neighbours), the
 * counts are V + E vertices and 4F triangles, twice the boundary edges. */
START_TEST(test_loop_flat_patch_boundary) {
  const double h = 0.5;
  ts_mesh *m = fx_grid(9, 1.0, 0, 1);
  ts_meshtopo_report in = fx_check(m, "grid");
  ts_mesh *r = loop_n(m, 1);
  ck_assert_uint_eq(r->n_verts, m->n_verts + in.n_edges);
  ck_assert_uint_eq(r->n_tris, 4 * m->n_tris);
  ts_meshtopo_report out = fx_check(r, "grid, one Loop step");
  ck_assert_int_eq(out.euler, 1);
  ck_assert_uint_eq(out.n_boundary_edges, 2 * in.n_boundary_edges);
  for (uint32_t v = 0; v < r->n_verts; v++) {
    ck_assert(r->v[v][1] == 0.0);
    if (v < m->n_verts) {
      /* boundary (non-corner) vertices stay on their side */
      for (int k = 0; k < 3; k += 2)
        if (fabs(fabs(m->v[v][k]) - h) < 1e-12 && fabs(fabs(m->v[v][2 - k]) - h) > 1e-12)
          ck_assert_double_eq_tol(r->v[v][k], m->v[v][k], 1e-15);
    }
  }
  ts_mesh_free(r);
  ts_mesh_free(m);
}
END_TEST

/* Brute-force prediction of a region refinement's counts. */
static void predict_counts(const ts_mesh *m, const ts_meshtopo *t, const uint8_t *sel, uint32_t *nv,
                           uint32_t *nt, uint8_t *red_out) {
  uint8_t *split = calloc(t->n_edges, 1);
  for (uint32_t f = 0; f < m->n_tris; f++)
    if (sel[f])
      for (int i = 0; i < 3; i++)
        split[ts_meshtopo_find_edge(t, m->t[f][i], m->t[f][(i + 1) % 3])] = 1;
  uint32_t ns = 0;
  for (uint32_t e = 0; e < t->n_edges; e++) ns += split[e];
  *nv = m->n_verts + ns;
  *nt = 0;
  for (uint32_t f = 0; f < m->n_tris; f++) {
    uint32_t k = 0;
    for (int i = 0; i < 3; i++) k += split[ts_meshtopo_find_edge(t, m->t[f][i], m->t[f][(i + 1) % 3])];
    red_out[f] = sel[f] || k == 3;
    *nt += red_out[f] ? 4 : k + 1;
  }
  free(split);
}

/* Region on spot (closed, irregular valences): conforming, exact counts,
 * positions as the whole-mesh result where Loop's rules apply. */
START_TEST(test_loop_region_conforming) {
  ts_mesh *m = fx_load("spot.obj", 1.0);
  ts_meshtopo *t = topo_of(m);
  ts_region *reg = NULL;
  ck_assert_int_eq(ts_region_alloc(m->n_verts, m->n_tris, &reg), 0);
  const uint32_t seed = 1000;
  double p[3];
  for (int k = 0; k < 3; k++)
    p[k] = (m->v[m->t[seed][0]][k] + m->v[m->t[seed][1]][k] + m->v[m->t[seed][2]][k]) / 3;
  ck_assert_int_eq(ts_region_from_triangle(reg, m, t, seed, p, 0.12), 0);
  ck_assert_uint_gt(reg->n_tris, 20);
  ck_assert_uint_lt(reg->n_tris, m->n_tris / 4);

  uint8_t *sel = calloc(m->n_tris, 1), *red = calloc(m->n_tris, 1);
  for (uint32_t i = 0; i < reg->n_tris; i++) sel[reg->tris[i]] = 1;
  uint32_t want_v, want_t;
  predict_counts(m, t, sel, &want_v, &want_t, red);

  char err[256];
  ts_loop_plan *plan = NULL, *whole = NULL;
  ck_assert_int_eq(ts_loop_plan_build(m, reg->tris, reg->n_tris, TS_LOOP_SMOOTH, &plan, err, sizeof err), 0);
  ck_assert_int_eq(ts_loop_plan_build(m, NULL, 0, TS_LOOP_SMOOTH, &whole, err, sizeof err), 0);
  ck_assert_uint_eq(plan->n_verts, want_v);
  ck_assert_uint_eq(plan->n_tris, want_t);
  ck_assert_uint_gt(plan->n_green, 0);

  ts_mesh *r = NULL, *w = NULL;
  ck_assert_int_eq(ts_loop_subdivide(m, reg->tris, reg->n_tris, TS_LOOP_SMOOTH, &r, err, sizeof err), 0);
  ck_assert_int_eq(ts_loop_subdivide(m, NULL, 0, TS_LOOP_SMOOTH, &w, err, sizeof err), 0);
  ts_meshtopo_report rep = fx_check(r, "spot, region refined");
  ck_assert_uint_eq(rep.n_boundary_edges, 0); /* a T-junction would open the surface */
  ck_assert_int_eq(rep.euler, 2);
  ck_assert_int_eq(rep.genus, 0);

  /* old vertices: Loop's position when all their triangles are red, else unmoved */
  uint32_t moved = 0;
  for (uint32_t v = 0; v < m->n_verts; v++) {
    int all_red = 1;
    for (uint32_t q = t->vert_tri_off[v]; q < t->vert_tri_off[v + 1]; q++) all_red &= red[t->vert_tris[q]];
    const double *want = all_red ? w->v[v] : m->v[v];
    moved += all_red;
    for (int k = 0; k < 3; k++) ck_assert_double_eq_tol(r->v[v][k], want[k], 1e-15);
  }
  ck_assert_uint_gt(moved, 5);
  /* new vertices: Loop's edge point, as in the whole-mesh result (where the
   * edge vertex of topology edge e is number V + e) */
  for (uint32_t i = 0; i < plan->n_verts - plan->n_old_verts; i++) {
    uint32_t e = ts_meshtopo_find_edge(t, plan->edge_ends[i][0], plan->edge_ends[i][1]);
    ck_assert_uint_ne(e, TS_MESHTOPO_NONE);
    for (int k = 0; k < 3; k++)
      ck_assert_double_eq_tol(r->v[m->n_verts + i][k], w->v[m->n_verts + e][k], 1e-15);
  }
  /* triangles far from the region are kept as they were */
  for (uint32_t i = 0; i < plan->n_tris; i++) {
    uint32_t f = plan->tri_parent[i];
    int touched = red[f];
    for (int k = 0; k < 3 && !touched; k++) touched = plan->tris[i][k] >= m->n_verts;
    if (!touched) ck_assert(memcmp(plan->tris[i], m->t[f], sizeof m->t[f]) == 0);
  }

  /* selecting every triangle is the whole-mesh step, bit for bit */
  uint32_t *all = malloc(sizeof *all * m->n_tris);
  for (uint32_t f = 0; f < m->n_tris; f++) all[f] = m->n_tris - 1 - f;
  ts_mesh *a = NULL;
  ck_assert_int_eq(ts_loop_subdivide(m, all, m->n_tris, TS_LOOP_SMOOTH, &a, err, sizeof err), 0);
  ck_assert_uint_eq(a->n_verts, w->n_verts);
  ck_assert_uint_eq(a->n_tris, w->n_tris);
  ck_assert(memcmp(a->v, w->v, sizeof *a->v * a->n_verts) == 0);
  ck_assert(memcmp(a->t, w->t, sizeof *a->t * a->n_tris) == 0);

  free(all);
  ts_mesh_free(a);
  ts_mesh_free(r);
  ts_mesh_free(w);
  ts_loop_plan_free(plan);
  ts_loop_plan_free(whole);
  free(sel);
  free(red);
  ts_region_free(reg);
  ts_meshtopo_free(t);
  ts_mesh_free(m);
}
END_TEST

/* Refining around the same contact again and again (each time the region
 * found anew on the refined mesh) stays conforming; on a patch whose region
 * reaches the border, the border gains exactly the split boundary edges. */
START_TEST(test_loop_region_repeated) {
  ts_mesh *m = fx_load("liver.obj", 0.01);
  double origin[3] = {0, 0.2, 0}, dir[3] = {0, -1, 0.05}; /* from above, at the liver */
  for (int round = 0; round < 3; round++) {
    ts_meshtopo *t = topo_of(m);
    ts_region *reg = NULL;
    ck_assert_int_eq(ts_region_alloc(m->n_verts, m->n_tris, &reg), 0);
    uint32_t tri;
    double p[3], tt;
    ck_assert_int_eq(ts_region_raypick(m, origin, dir, &tri, p, &tt), 0);
    ck_assert_int_eq(ts_region_from_triangle(reg, m, t, tri, p, 0.015), 0);
    ts_mesh *r = NULL;
    char err[256];
    ck_assert_int_eq(ts_loop_subdivide(m, reg->tris, reg->n_tris, TS_LOOP_SMOOTH, &r, err, sizeof err), 0);
    ts_meshtopo_report rep = fx_check(r, "liver, region refined again");
    ck_assert_int_eq(rep.euler, 2);
    ck_assert_uint_eq(rep.n_boundary_edges, 0);
    ck_assert_uint_gt(r->n_tris, m->n_tris);
    ts_region_free(reg);
    ts_meshtopo_free(t);
    ts_mesh_free(m);
    m = r;
  }
  ts_mesh_free(m);

  /* a patch, region at its border */
  m = fx_grid(15, 0.08, 0.15, 1);
  ts_meshtopo *t = topo_of(m);
  ts_region *reg = NULL;
  ck_assert_int_eq(ts_region_alloc(m->n_verts, m->n_tris, &reg), 0);
  double p[3] = {0.04, -0.0107, 0.0};
  uint32_t seed = 0;
  double best = INFINITY;
  for (uint32_t f = 0; f < m->n_tris; f++) {
    double d = ts_point_triangle_distance(p, m->v[m->t[f][0]], m->v[m->t[f][1]], m->v[m->t[f][2]], NULL);
    if (d < best) best = d, seed = f;
  }
  ck_assert_int_eq(ts_region_from_triangle(reg, m, t, seed, p, 0.012), 0);
  uint32_t split_boundary = 0;
  uint8_t *sel = calloc(m->n_tris, 1);
  for (uint32_t i = 0; i < reg->n_tris; i++) sel[reg->tris[i]] = 1;
  for (uint32_t e = 0; e < t->n_edges; e++) {
    if (ts_meshtopo_edge_valence(t, e) != 1) continue;
    split_boundary += sel[t->edge_tris[t->edge_tri_off[e]]];
  }
  ck_assert_uint_gt(split_boundary, 2);
  ts_mesh *r = NULL;
  char err[256];
  ck_assert_int_eq(ts_loop_subdivide(m, reg->tris, reg->n_tris, TS_LOOP_SMOOTH, &r, err, sizeof err), 0);
  ts_meshtopo_report rep = fx_check(r, "patch, region at the border refined");
  ck_assert_int_eq(rep.euler, 1);
  ck_assert_uint_eq(rep.n_boundary_loops, 1);
  ck_assert_uint_eq(rep.n_boundary_edges, 4 * 14 + split_boundary);
  free(sel);
  ts_mesh_free(r);
  ts_region_free(reg);
  ts_meshtopo_free(t);
  ts_mesh_free(m);
}
END_TEST

/* Through an extrusion: every sheet is refined with the surface's plan, so a
 * sheet translated from the surface stays exactly translated (the stencils'
 * weights sum to one), the render surface stays closed, and a flat slab
 * keeps its volume. */
START_TEST(test_loop_extrusion_layers) {
  const double size = 0.04;
  ts_mesh *m = fx_grid(11, size, 0, 1);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = 3;
  d.thickness[0] = 1e-3, d.thickness[1] = 1.5e-3, d.thickness[2] = 2e-3;
  d.mode = TS_EXTRUDE_DIRECTION;
  d.direction[1] = -1;
  ts_extrusion *e = NULL;
  char err[256];
  ck_assert_int_eq(ts_extrude(m, &d, &e, err, sizeof err), 0);
  ts_meshtopo *t = topo_of(m);
  ts_region *reg = NULL;
  ck_assert_int_eq(ts_region_alloc(m->n_verts, m->n_tris, &reg), 0);
  double p[3] = {0.001, 0, 0.002};
  uint32_t tri;
  double hit[3], tt, o[3] = {0.001, 0.01, 0.002}, down[3] = {0, -1, 0};
  ck_assert_int_eq(ts_region_raypick(m, o, down, &tri, hit, &tt), 0);
  ck_assert_double_eq_tol(tt, 0.01, 1e-15);
  ck_assert_int_eq(ts_region_from_triangle(reg, m, t, tri, p, 0.01), 0);

  for (int mode = TS_LOOP_SMOOTH; mode <= TS_LOOP_LINEAR; mode++) {
    ts_extrusion *r = NULL;
    ts_loop_plan *plan = NULL;
    int rc = ts_loop_extrusion(e, reg->tris, reg->n_tris, mode, &r, &plan, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_eq(r->n_sheets, 4);
    ck_assert_uint_eq(r->nv, plan->n_verts);
    ck_assert_uint_eq(r->n_surface_tris, plan->n_tris);
    ck_assert_uint_gt(r->nv, e->nv);
    double depth = 0;
    for (uint32_t s = 0; s < 4; s++) {
      if (s) depth += d.thickness[s - 1];
      for (uint32_t j = 0; j < r->nv; j++) {
        ck_assert_double_eq_tol(r->x[s * r->nv + j][0], r->x[j][0], 1e-15);
        ck_assert_double_eq_tol(r->x[s * r->nv + j][1], -depth, 1e-15);
        ck_assert_double_eq_tol(r->x[s * r->nv + j][2], r->x[j][2], 1e-15);
      }
    }
    ts_meshtopo_report rep = fx_check_hull(r, "refined slab");
    ck_assert_int_eq(rep.euler, 2);
    ck_assert_uint_eq(rep.n_boundary_edges, 0);
    fx_check_layer_tops(r, 0.999, NULL); /* every layer's top sheet rebuilt, facing +y */
    double vol = fx_hull_volume(r);
    ck_assert_double_eq_tol(vol, size * size * 4.5e-3, 1e-9 * size * size * 4.5e-3);
    fx_check_mesh((const double(*)[3])r->x, r->nv, (const uint32_t(*)[3])r->surface_tris, r->n_surface_tris,
                  "refined surface");
    ts_loop_plan_free(plan);
    ts_extrusion_free(r);
  }
  ts_region_free(reg);
  ts_meshtopo_free(t);
  ts_extrusion_free(e);
  ts_mesh_free(m);

  /* a closed surface, whole: two closed sheets (chi 4), nothing inverted */
  ts_mesh *ico = fx_icosahedron(0.02);
  d.mode = TS_EXTRUDE_NORMAL;
  ck_assert_int_eq(ts_extrude(ico, &d, &e, err, sizeof err), 0);
  ts_extrusion *r = NULL;
  ck_assert_int_eq(ts_loop_extrusion(e, NULL, 0, TS_LOOP_SMOOTH, &r, NULL, err, sizeof err), 0);
  ck_assert_uint_eq(r->nv, 42);
  ck_assert_uint_eq(r->n_inverted, 0);
  ts_meshtopo_report rep = fx_check_hull(r, "refined shell");
  ck_assert_int_eq(rep.euler, 4);
  double vol[3];
  fx_check_layer_tops(r, 0.7, vol); /* a subdivided icosahedron's vertex directions: near radial */
  for (int l = 0; l < 3; l++) ck_assert_double_gt(vol[l], 0);
  ts_extrusion_free(r);
  ts_extrusion_free(e);
  ts_mesh_free(ico);
}
END_TEST

START_TEST(test_loop_bad_input) {
  ts_mesh *m = fx_grid(4, 1, 0, 0);
  ts_loop_plan *p = NULL;
  char err[256];
  uint32_t bad = 999;
  ck_assert_int_eq(ts_loop_plan_build(m, &bad, 1, TS_LOOP_SMOOTH, &p, err, sizeof err), TS_EINVAL);
  ck_assert_msg(strstr(err, "999") != NULL, "%s", err);
  ck_assert_int_eq(ts_loop_plan_build(m, NULL, 0, 5, &p, err, sizeof err), TS_EINVAL);
  ck_assert_int_eq(ts_loop_plan_build(NULL, NULL, 0, TS_LOOP_SMOOTH, &p, err, sizeof err), TS_EINVAL);
  ck_assert_ptr_null(p);
  ts_mesh_free(m);
  ts_mesh *nm = fx_mesh(5, 3);
  double pts[5][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}};
  memcpy(nm->v, pts, sizeof pts);
  uint32_t tris[3][3] = {{0, 1, 2}, {1, 0, 3}, {0, 1, 4}};
  memcpy(nm->t, tris, sizeof tris);
  ck_assert_int_eq(ts_loop_plan_build(nm, NULL, 0, TS_LOOP_SMOOTH, &p, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "(0,1)") != NULL, "%s", err);
  ts_mesh_free(nm);
}
END_TEST

/* ---- BFS region ---- */

/* Distance from p to triangle (a, b, c), written independently of the
 * library: the plane projection when it falls inside, else the nearest of
 * the three edges. */
static double seg_dist(const double *p, const double *a, const double *b) {
  double ab[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, ap[3] = {p[0] - a[0], p[1] - a[1], p[2] - a[2]};
  double t = (ab[0] * ap[0] + ab[1] * ap[1] + ab[2] * ap[2]) / (ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2]);
  t = fmax(0, fmin(1, t));
  double q[3] = {a[0] + t * ab[0], a[1] + t * ab[1], a[2] + t * ab[2]};
  return fx_dist(p, q);
}

static double brute_tri_dist(const double *p, const double *a, const double *b, const double *c) {
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  double w[3] = {p[0] - a[0], p[1] - a[1], p[2] - a[2]};
  double uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2], vv = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
  double uv = u[0] * v[0] + u[1] * v[1] + u[2] * v[2], wu = w[0] * u[0] + w[1] * u[1] + w[2] * u[2];
  double wv = w[0] * v[0] + w[1] * v[1] + w[2] * v[2], den = uu * vv - uv * uv;
  double s = (vv * wu - uv * wv) / den, t = (uu * wv - uv * wu) / den;
  double best = fmin(seg_dist(p, a, b), fmin(seg_dist(p, b, c), seg_dist(p, c, a)));
  if (s >= 0 && t >= 0 && s + t <= 1) {
    double q[3] = {a[0] + s * u[0] + t * v[0], a[1] + s * u[1] + t * v[1], a[2] + s * u[2] + t * v[2]};
    best = fmin(best, fx_dist(p, q));
  }
  return best;
}

static int cmp_tri_u64(const void *pa, const void *pb) {
  const uint64_t *a = pa, *b = pb;
  if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
  return (a[1] > b[1]) - (a[1] < b[1]);
}

static uint32_t uf_find(uint32_t *p, uint32_t x) {
  while (p[x] != x) x = p[x] = p[p[x]];
  return x;
}

/* The brute-force region: every in-range triangle, then the edge-connected
 * component of the seeds among them. Writes flags; returns the count. */
static uint32_t brute_region(const ts_mesh *m, const uint32_t *seeds, uint32_t n_seeds, const double *p,
                             double range, uint8_t *in) {
  uint32_t nt = m->n_tris;
  uint8_t *ok = calloc(nt, 1);
  uint32_t *uf = malloc(sizeof *uf * nt);
  for (uint32_t f = 0; f < nt; f++) {
    uf[f] = f;
    ok[f] = brute_tri_dist(p, m->v[m->t[f][0]], m->v[m->t[f][1]], m->v[m->t[f][2]]) <= range;
  }
  for (uint32_t i = 0; i < n_seeds; i++) ok[seeds[i]] = 1;
  /* pairs of triangles sharing an edge: sort the 3F edge records */
  uint64_t(*rec)[2] = malloc(sizeof *rec * 3 * nt);
  for (uint32_t f = 0; f < nt; f++)
    for (int i = 0; i < 3; i++) {
      uint64_t a = m->t[f][i], b = m->t[f][(i + 1) % 3];
      rec[3 * f + i][0] = a < b ? a << 32 | b : b << 32 | a;
      rec[3 * f + i][1] = f;
    }
  qsort(rec, 3 * (size_t)nt, sizeof *rec, cmp_tri_u64);
  for (uint32_t i = 0; i + 1 < 3 * nt; i++)
    for (uint32_t j = i + 1; j < 3 * nt && rec[j][0] == rec[i][0]; j++) {
      uint32_t f = (uint32_t)rec[i][1], g = (uint32_t)rec[j][1];
      if (ok[f] && ok[g]) uf[uf_find(uf, f)] = uf_find(uf, g);
    }
  uint32_t n = 0, root = uf_find(uf, seeds[0]);
  for (uint32_t f = 0; f < nt; f++) {
    in[f] = ok[f] && uf_find(uf, f) == root;
    n += in[f];
  }
  free(ok);
  free(uf);
  free(rec);
  return n;
}

static void assert_region_matches(const ts_region *reg, const ts_mesh *m, const uint32_t *seeds,
                                  uint32_t n_seeds, const double *p, double range) {
  uint8_t *in = calloc(m->n_tris, 1);
  uint32_t n = brute_region(m, seeds, n_seeds, p, range, in);
  ck_assert_uint_eq(reg->n_tris, n);
  uint8_t *seen = calloc(m->n_tris, 1), *vin = calloc(m->n_verts, 1);
  for (uint32_t i = 0; i < reg->n_tris; i++) {
    ck_assert(in[reg->tris[i]]);
    ck_assert(!seen[reg->tris[i]]);
    seen[reg->tris[i]] = 1;
    for (int k = 0; k < 3; k++) vin[m->t[reg->tris[i]][k]] = 1;
  }
  uint32_t nv = 0;
  for (uint32_t v = 0; v < m->n_verts; v++) nv += vin[v];
  ck_assert_uint_eq(reg->n_verts, nv);
  for (uint32_t i = 0; i < reg->n_verts; i++) {
    ck_assert(vin[reg->verts[i]]);
    ck_assert_int_eq(reg->vert_in_range[i], fx_dist(m->v[reg->verts[i]], p) <= range);
  }
  free(in);
  free(seen);
  free(vin);
}

START_TEST(test_region_matches_brute_force) {
  const char *names[2] = {"liver-smooth.obj", "spot.obj"};
  const double scales[2] = {0.01, 1.0};
  for (int i = 0; i < 2; i++) {
    ts_mesh *m = fx_load(names[i], scales[i]);
    ts_meshtopo *t = topo_of(m);
    ts_region *reg = NULL;
    ck_assert_int_eq(ts_region_alloc(m->n_verts, m->n_tris, &reg), 0);
    double lo[3], hi[3];
    for (int k = 0; k < 3; k++) lo[k] = hi[k] = m->v[0][k];
    for (uint32_t v = 0; v < m->n_verts; v++)
      for (int k = 0; k < 3; k++) lo[k] = fmin(lo[k], m->v[v][k]), hi[k] = fmax(hi[k], m->v[v][k]);
    double diag = fx_dist(lo, hi);
    const uint32_t seeds[3] = {7, m->n_tris / 3, m->n_tris - 5};
    const double fr[4] = {0.0, 0.03, 0.1, 0.3};
    for (int s = 0; s < 3; s++)
      for (int q = 0; q < 4; q++) {
        const uint32_t *tv = m->t[seeds[s]];
        double p[3];
        for (int k = 0; k < 3; k++) p[k] = 0.2 * m->v[tv[0]][k] + 0.3 * m->v[tv[1]][k] + 0.5 * m->v[tv[2]][k];
        ck_assert_int_eq(ts_region_from_triangle(reg, m, t, seeds[s], p, fr[q] * diag), 0);
        assert_region_matches(reg, m, &seeds[s], 1, p, fr[q] * diag);
        ck_assert_uint_eq(reg->tris[0], seeds[s]);
        /* on an edge: the midpoint of the seed's first edge seeds both sides */
        for (int k = 0; k < 3; k++) p[k] = 0.5 * (m->v[tv[0]][k] + m->v[tv[1]][k]);
        ck_assert_int_eq(ts_region_from_edge(reg, m, t, tv[0], tv[1], p, fr[q] * diag), 0);
        uint32_t e = ts_meshtopo_find_edge(t, tv[0], tv[1]);
        assert_region_matches(reg, m, t->edge_tris + t->edge_tri_off[e], 2, p, fr[q] * diag);
        ck_assert_uint_ge(reg->n_tris, 2);
      }
    ts_region_free(reg);
    ts_meshtopo_free(t);
    ts_mesh_free(m);
  }

  /* two parallel sheets 1 mm apart: a 5 mm range reaches both, the region
   * only the contact's own sheet */
  ts_mesh *g = fx_grid(9, 0.02, 0, 0);
  ts_mesh *two = fx_mesh(2 * g->n_verts, 2 * g->n_tris);
  for (uint32_t v = 0; v < g->n_verts; v++) {
    memcpy(two->v[v], g->v[v], sizeof two->v[v]);
    memcpy(two->v[g->n_verts + v], g->v[v], sizeof two->v[v]);
    two->v[g->n_verts + v][1] -= 1e-3;
  }
  for (uint32_t f = 0; f < g->n_tris; f++)
    for (int k = 0; k < 3; k++) {
      two->t[f][k] = g->t[f][k];
      two->t[g->n_tris + f][k] = g->t[f][k] + g->n_verts;
    }
  ts_meshtopo *t = topo_of(two);
  ts_region *reg = NULL;
  ck_assert_int_eq(ts_region_alloc(two->n_verts, two->n_tris, &reg), 0);
  double o[3] = {0.0012, 0.05, -0.0007}, down[3] = {0, -1, 0}, p[3], tt;
  uint32_t tri;
  ck_assert_int_eq(ts_region_raypick(two, o, down, &tri, p, &tt), 0);
  ck_assert_uint_lt(tri, g->n_tris); /* the upper sheet is hit first */
  ck_assert_double_eq_tol(p[1], 0, 1e-15);
  ck_assert_int_eq(ts_region_from_triangle(reg, two, t, tri, p, 5e-3), 0);
  uint32_t upper = 0, lower = 0;
  for (uint32_t f = 0; f < two->n_tris; f++)
    if (brute_tri_dist(p, two->v[two->t[f][0]], two->v[two->t[f][1]], two->v[two->t[f][2]]) <= 5e-3)
      *(f < g->n_tris ? &upper : &lower) += 1;
  ck_assert_uint_gt(lower, 10); /* in range, but not connected to the contact */
  ck_assert_uint_eq(reg->n_tris, upper);
  for (uint32_t i = 0; i < reg->n_tris; i++) ck_assert_uint_lt(reg->tris[i], g->n_tris);
  assert_region_matches(reg, two, &tri, 1, p, 5e-3);
  /* misses and bad input */
  double up[3] = {0, 1, 0};
  ck_assert_int_eq(ts_region_raypick(two, o, up, &tri, p, &tt), TS_ERANGE);
  double nanp[3] = {NAN, 0, 0};
  ck_assert_int_eq(ts_region_from_triangle(reg, two, t, 0, nanp, 1e-3), TS_ENAN);
  ck_assert_int_eq(ts_region_from_triangle(reg, two, t, two->n_tris, p, 1e-3), TS_EINVAL);
  ck_assert_int_eq(ts_region_from_edge(reg, two, t, 0, 80, p, 1e-3), TS_EINVAL);
  ts_region_free(reg);
  ts_meshtopo_free(t);
  ts_mesh_free(two);
  ts_mesh_free(g);
}
END_TEST

/* ---- longest-edge bisection ---- */

static void assert_leb_result(const ts_mesh *in, const ts_leb_result *r, double bound, int64_t euler,
                              const char *what) {
  ts_mesh *m = r->mesh;
  ts_meshtopo_report rep = fx_check(m, what);
  ck_assert_int_eq(rep.euler, euler);
  ck_assert_double_le(fx_max_edge(m), bound);
  /* midpoint splits keep the surface: same area */
  ck_assert_double_eq_tol(fx_area(m), fx_area(in), 1e-12 * fx_area(in));
  /* Rosenberg-Stenger: the smallest angle at least half the initial one */
  ck_assert_double_ge(fx_min_angle(m), 0.5 * fx_min_angle(in) - 1e-12);
  /* every new vertex is the midpoint of its (older) parents */
  for (uint32_t i = 0; i < r->n_new; i++) {
    uint32_t v = r->n_old_verts + i;
    ck_assert_uint_lt(r->parents[i][0], v);
    ck_assert_uint_lt(r->parents[i][1], v);
    for (int k = 0; k < 3; k++)
      ck_assert_double_eq(m->v[v][k], 0.5 * (m->v[r->parents[i][0]][k] + m->v[r->parents[i][1]][k]));
  }
  ck_assert_uint_eq(m->n_verts, r->n_old_verts + r->n_new);
  for (uint32_t f = 0; f < m->n_tris; f++) ck_assert_uint_lt(r->tri_parent[f], in->n_tris);
}

START_TEST(test_leb_uniform) {
  /* a patch: with one bound everywhere the longest failing edge is always
   * the longest edge of its triangles, so nothing is forced and the edges
   * are bisected in order of decreasing length */
  ts_mesh *m = fx_grid(9, 0.08, 0.15, 1);
  ts_leb_def d = {.max_edge = 0.004};
  ts_leb_result *r = NULL;
  char err[256];
  ck_assert_int_eq(ts_leb_refine(m, &d, &r, err, sizeof err), 0);
  assert_leb_result(m, r, 0.004, 1, "patch after LEB");
  ck_assert_uint_eq(r->n_forced, 0);
  double prev = INFINITY;
  for (uint32_t i = 0; i < r->n_new; i++) {
    double len = fx_dist(r->mesh->v[r->parents[i][0]], r->mesh->v[r->parents[i][1]]);
    ck_assert_double_le(len, prev * (1 + 1e-12));
    prev = len;
  }
  ts_meshtopo_report in = fx_check(m, "patch");
  ts_meshtopo_report out = fx_check(r->mesh, "patch after LEB");
  ck_assert_uint_eq(out.n_boundary_loops, 1);
  ck_assert_uint_gt(out.n_boundary_edges, in.n_boundary_edges);
  ts_leb_result_free(r);
  ts_mesh_free(m);

  /* the closed coarse liver (centimetres -> m) down to 5 mm edges */
  m = fx_load("liver.obj", 0.01);
  d.max_edge = 0.005;
  ck_assert_int_eq(ts_leb_refine(m, &d, &r, err, sizeof err), 0);
  assert_leb_result(m, r, 0.005, 2, "liver after LEB");
  ck_assert_uint_eq(fx_check(r->mesh, "liver after LEB").n_boundary_edges, 0);
  ck_assert_uint_gt(r->mesh->n_tris, 4 * m->n_tris);
  ts_leb_result_free(r);
  ts_mesh_free(m);
}
END_TEST

typedef struct ball {
  double c[3], r, fine;
} ball;

static double ball_size(const double p[3], void *ud) {
  const ball *b = ud;
  return fx_dist(p, b->c) <= b->r ? b->fine : INFINITY;
}

/* A density condition of position: fine within 10 mm of a contact, free
 * elsewhere. Edges there end up short enough, propagation keeps the mesh
 * conforming and only a small part of the surface is touched. */
START_TEST(test_leb_local) {
  ts_mesh *m = fx_load("liver-smooth.obj", 0.01);
  ball b = {{0, 0, 0}, 0.01, 0.001};
  memcpy(b.c, m->v[100], sizeof b.c);
  ts_leb_def d = {.size_at = ball_size, .size_ud = &b};
  ts_leb_result *r = NULL;
  char err[256];
  ck_assert_int_eq(ts_leb_refine(m, &d, &r, err, sizeof err), 0);
  ts_meshtopo_report rep = fx_check(r->mesh, "liver after local LEB");
  ck_assert_int_eq(rep.euler, 2);
  ck_assert_uint_eq(rep.n_boundary_edges, 0);
  ck_assert_double_eq_tol(fx_area(r->mesh), fx_area(m), 1e-12 * fx_area(m));
  ck_assert_double_ge(fx_min_angle(r->mesh), 0.5 * fx_min_angle(m) - 1e-12);
  uint32_t inside = 0;
  for (uint32_t f = 0; f < r->mesh->n_tris; f++)
    for (int i = 0; i < 3; i++) {
      const double *p = r->mesh->v[r->mesh->t[f][i]], *q = r->mesh->v[r->mesh->t[f][(i + 1) % 3]];
      double mid[3] = {(p[0] + q[0]) / 2, (p[1] + q[1]) / 2, (p[2] + q[2]) / 2};
      if (fx_dist(mid, b.c) <= b.r) {
        inside++;
        ck_assert_double_le(fx_dist(p, q), b.fine);
      }
    }
  ck_assert_uint_gt(inside, 100);
  uint32_t untouched = 0;
  for (uint32_t f = 0; f < r->mesh->n_tris; f++) {
    uint32_t g = r->tri_parent[f];
    untouched += memcmp(r->mesh->t[f], m->t[g], sizeof m->t[g]) == 0;
  }
  ck_assert_uint_gt(untouched, m->n_tris / 2);
  ts_leb_result_free(r);
  r = NULL;

  ts_mesh_free(m);

  /* through an extrusion (the curved patch, two layers): every sheet
   * bisected alike, the slab still closed */
  m = fx_grid(9, 0.08, 0.15, 1);
  ball pb = {{0, 0, 0}, 0.015, 0.003};
  ts_leb_def pd = {.size_at = ball_size, .size_ud = &pb};
  ts_extrude_def ed;
  memset(&ed, 0, sizeof ed);
  ed.n_layers = 2;
  ed.thickness[0] = 1e-3, ed.thickness[1] = 2e-3;
  ts_extrusion *e = NULL, *er = NULL;
  ck_assert_int_eq(ts_extrude(m, &ed, &e, err, sizeof err), 0);
  ck_assert_int_eq(ts_leb_extrusion(e, &pd, &er, &r, err, sizeof err), 0);
  ck_assert_uint_eq(er->nv, r->mesh->n_verts);
  ck_assert_uint_gt(r->n_new, 10);
  for (uint32_t s = 0; s < 3; s++)
    for (uint32_t i = 0; i < r->n_new; i++) {
      const double *x = er->x[s * er->nv + r->n_old_verts + i];
      const double *a = er->x[s * er->nv + r->parents[i][0]], *c = er->x[s * er->nv + r->parents[i][1]];
      for (int k = 0; k < 3; k++) ck_assert_double_eq(x[k], 0.5 * (a[k] + c[k]));
    }
  rep = fx_check_hull(er, "refined patch slab");
  ck_assert_int_eq(rep.euler, 2);
  fx_check_layer_tops(er, 0.9, NULL);
  ck_assert_uint_eq(rep.n_boundary_edges, 0);
  ck_assert_uint_eq(er->n_inverted, 0);
  ts_extrusion_free(e);
  ts_extrusion_free(er);
  ts_leb_result_free(r);
  ts_mesh_free(m);
}
END_TEST

static double bad_size(const double p[3], void *ud) {
  return p[0] > 0 ? -1.0 : 1.0;
}

START_TEST(test_leb_limits) {
  ts_mesh *m = fx_grid(5, 1.0, 0, 0);
  ts_leb_result *r = NULL;
  char err[256];
  ts_leb_def d = {.max_edge = 1e-3, .max_verts = 1000};
  ck_assert_int_eq(ts_leb_refine(m, &d, &r, err, sizeof err), TS_EFULL);
  ck_assert_ptr_null(r);
  ck_assert_msg(strstr(err, "1000") != NULL, "%s", err);
  d.max_edge = 0;
  ck_assert_int_eq(ts_leb_refine(m, &d, &r, err, sizeof err), TS_EINVAL);
  d.max_edge = NAN;
  ck_assert_int_eq(ts_leb_refine(m, &d, &r, err, sizeof err), TS_EINVAL);
  ts_leb_def bd = {.size_at = bad_size};
  ck_assert_int_eq(ts_leb_refine(m, &bd, &r, err, sizeof err), TS_EINVAL);
  ck_assert_msg(strstr(err, "size function") != NULL, "%s", err);
  /* a bound above every edge changes nothing */
  d.max_edge = 10;
  d.max_verts = 0;
  ck_assert_int_eq(ts_leb_refine(m, &d, &r, err, sizeof err), 0);
  ck_assert_uint_eq(r->n_new, 0);
  ck_assert(memcmp(r->mesh->t, m->t, sizeof *m->t * m->n_tris) == 0);
  ts_leb_result_free(r);
  ts_mesh_free(m);
  ts_mesh *nm = fx_mesh(5, 3);
  double pts[5][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}};
  memcpy(nm->v, pts, sizeof pts);
  uint32_t tris[3][3] = {{0, 1, 2}, {1, 0, 3}, {0, 1, 4}};
  memcpy(nm->t, tris, sizeof tris);
  d.max_edge = 0.1;
  ck_assert_int_eq(ts_leb_refine(nm, &d, &r, err, sizeof err), TS_EMESH);
  ck_assert_msg(strstr(err, "more than two") != NULL, "%s", err);
  ts_mesh_free(nm);
}
END_TEST

/* ---- the offline tool's mesh commands ---- */

/* Runs tissuetool's mesh command with the given arguments; returns the exit
 * status, stdout and stderr in out/err (malloc'd). */
static int run_mesh_cmd(char **out, char **err, int argc, char **argv) {
  size_t ol = 0, el = 0;
  FILE *fo = open_memstream(out, &ol), *fe = open_memstream(err, &el);
  int rc = ts_cmd_mesh(argc, argv, fo, fe);
  fclose(fo);
  fclose(fe);
  return rc;
}

static ts_mesh *read_obj(const char *path) {
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  ts_mesh *m = NULL;
  char err[256];
  int rc = ts_mesh_read_file(path, TS_MESH_OBJ, &o, &m, NULL, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", path, err);
  return m;
}

/* The commands do what the library does, and say so in their JSON: whole
 * Loop subdivision written to OBJ reads back bit for bit as the library's
 * result (17 significant digits), LEB honours the bound, extrusion writes the
 * closed render surface, bad arguments are usage errors (status 2). */
START_TEST(test_tool_mesh_commands) {
  char in[] = "/tmp/ts_mesh_in_XXXXXX", res[] = "/tmp/ts_mesh_out_XXXXXX", msg[256];
  int fd = mkstemp(in);
  close(fd);
  fd = mkstemp(res);
  close(fd);
  ts_mesh *m = fx_grid(7, 0.04, 0.15, 1);
  ck_assert_int_eq(ts_mesh_write_obj_file(m, in, msg, sizeof msg), 0);
  char *out = NULL, *err = NULL;

  char *info[] = {"mesh", "info", in};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 3, info), 0);
  ck_assert_msg(strstr(out, "\"vertices\":49,\"triangles\":72,") && strstr(out, "\"euler\":1,") &&
                    strstr(out, "\"boundary_loops\":1,") && strstr(out, "\"valid\":true"),
                "%s", out);
  free(out);
  free(err);

  char *sub[] = {"mesh", "subdivide", "--loop", in, "--levels", "2", "-o", res};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 8, sub), 0);
  ts_mesh *want = loop_n(m, 2), *got = read_obj(res);
  ck_assert_uint_eq(got->n_verts, want->n_verts);
  ck_assert_uint_eq(got->n_tris, want->n_tris);
  ck_assert(memcmp(got->v, want->v, sizeof *got->v * got->n_verts) == 0);
  ck_assert(memcmp(got->t, want->t, sizeof *got->t * got->n_tris) == 0);
  ck_assert_msg(strstr(out, "\"triangles\":1152,") != NULL, "%s", out);
  ts_mesh_free(want);
  ts_mesh_free(got);
  free(out);
  free(err);

  char *reg[] = {"mesh", "subdivide", in, "--loop", "--region", "10,11,12", "-o", res};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 8, reg), 0);
  got = read_obj(res);
  ck_assert_int_eq(fx_check(got, "tool region subdivision").euler, 1);
  ck_assert_msg(strstr(out, "\"split_in_four\":3,") != NULL, "%s", out);
  ts_mesh_free(got);
  free(out);
  free(err);

  char *leb[] = {"mesh", "refine", "--leb", in, "--max-edge", "0.003", "-o", res};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 8, leb), 0);
  got = read_obj(res);
  ck_assert_double_le(fx_max_edge(got), 0.003);
  ck_assert_int_eq(fx_check(got, "tool LEB").euler, 1);
  ts_mesh_free(got);
  free(out);
  free(err);
  /* a bound no refinement can meet within its vertex limit: refused at
   * once (it ran to the limit first, 15 s on the liver at 0.1 um) */
  char *tiny[] = {"mesh", "refine", "--leb", in, "--max-edge", "1e-7", "-o", res};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 8, tiny), 1);
  ck_assert_msg(strstr(err, "needs at least") && strstr(err, "give a longer --max-edge"), "%s", err);
  free(out);
  free(err);

  char *ext[] = {"mesh", "extrude", in, "--layers", "1e-3,1.5e-3,2e-3", "--direction", "0,-1,0", "-o", res};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 9, ext), 0);
  got = read_obj(res);
  ts_meshtopo_report r = fx_check(got, "tool extrusion");
  ck_assert_int_eq(r.euler, 2);
  ck_assert_uint_eq(r.n_boundary_edges, 0);
  ck_assert_uint_eq(got->n_tris, 2 * 72 + 2 * 24 * 3);
  ck_assert_msg(strstr(out, "\"inverted_prisms\":0,") != NULL, "%s", out);
  ts_mesh_free(got);
  free(out);
  free(err);

  /* usage errors */
  char *bad1[] = {"mesh", "refine", in, "--max-edge", "0.003", "-o", res};    /* no --leb */
  char *bad2[] = {"mesh", "extrude", in, "--layers", "1e-3,x", "-o", res};     /* bad number */
  char *bad3[] = {"mesh", "subdivide", "--loop", in, "--region", "1,999999", "-o", res};
  char *bad4[] = {"mesh", "frobnicate", in};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 7, bad1), 2);
  ck_assert_msg(strstr(err, "--leb") != NULL, "%s", err);
  free(out), free(err);
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 7, bad2), 2);
  free(out), free(err);
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 8, bad3), 2);
  ck_assert_msg(strstr(err, "999999") != NULL, "%s", err);
  free(out), free(err);
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 3, bad4), 2);
  free(out), free(err);
  char *missing[] = {"mesh", "info", "/nonexistent/mesh.obj"};
  ck_assert_int_eq(run_mesh_cmd(&out, &err, 3, missing), 1);
  ck_assert_msg(strstr(err, "TS_EIO") != NULL, "%s", err);
  free(out), free(err);

  unlink(in);
  unlink(res);
  ts_mesh_free(m);
}
END_TEST

static Suite *subdivision_suite(void) {
  Suite *s = suite_create("subdivision");
  TCase *tc = tcase_create("subdivision");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_topology_counts);
  tcase_add_test(tc, test_loop_icosahedron_by_hand);
  tcase_add_test(tc, test_loop_flat_patch_boundary);
#ifdef TS_OPENMESH_LOOP
  tcase_add_test(tc, test_loop_openmesh_closed);
  tcase_add_test(tc, test_loop_openmesh_boundary);
#else
  fprintf(stderr, "test_subdivision: TS_OPENMESH_LOOP not defined (OpenMesh not installed?): "
                  "the comparison with OpenMesh's Loop subdivision is not run\n");
#endif
  tcase_add_test(tc, test_loop_region_conforming);
  tcase_add_test(tc, test_loop_region_repeated);
  tcase_add_test(tc, test_loop_extrusion_layers);
  tcase_add_test(tc, test_loop_bad_input);
  tcase_add_test(tc, test_region_matches_brute_force);
  tcase_add_test(tc, test_leb_uniform);
  tcase_add_test(tc, test_leb_local);
  tcase_add_test(tc, test_leb_limits);
  tcase_add_test(tc, test_tool_mesh_commands);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(subdivision_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
