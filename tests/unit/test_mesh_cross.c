/*
 * test_mesh_cross.c: Check suite for a surface's own crossings
 * (server/core/ts_mesh_cross.h) and for `tissuetool mesh subdivide --loop`,
 * which runs that check on its smoothed result as `mesh extrude` runs its
 * crossing check on its sheets.
 *
 *  - Two triangles that cross: one pair, met at the midpoint of their
 *    intersection segment, worked by hand.
 *  - A hollow shell: an octahedron of circumradius 10 mm around a finer
 *    latitude-longitude sphere of radius 5 mm facing inward. The input is
 *    clean (the octahedron's faces are 5.77 mm from the centre). One level
 *    of Loop's rules pulls the octahedron's corners in to about 5.2 mm and
 *    the centres of its new faces to about 4.3 mm, while the fine sphere
 *    stays within 2 % of 5 mm: the smoothed hull passes through the inner
 *    sheet. The tool reports the pairs, the input's 0 beside them, names
 *    the first pair and exits 1, still writing the file.
 *  - A clean case: the icosahedron (convex) smoothed stays clean: the
 *    report says 0 and the exit status is 0.
 *  - Many overlapping parts: the count stops at cap + 1 (the cap's
 *    meaning, as the extrusion's), and the first pair is the uncapped
 *    count's first (the same descent).
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/tool/commands.h"
#include "mesh_fixtures.h"
#include "test_util.h"
#include "ts_error.h"
#include "ts_loop.h"
#include "ts_mesh.h"
#include "ts_mesh_cross.h"
#include "ts_mesh_io.h"

/* Octahedron of circumradius r, counter-clockwise from outside. */
static ts_mesh *octahedron(double r) {
  static const double v[6][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
  static const uint32_t t[8][3] = {{0, 2, 4}, {2, 1, 4}, {1, 3, 4}, {3, 0, 4},
                                   {2, 0, 5}, {1, 2, 5}, {3, 1, 5}, {0, 3, 5}};
  ts_mesh *m = fx_mesh(6, 8);
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < 3; k++) m->v[i][k] = v[i][k] * r;
  memcpy(m->t, t, sizeof t);
  return m;
}

/* a and b in one mesh; b's triangles turned over when flip_b (an inner
 * sheet facing inward, the hollow between them the solid). */
static ts_mesh *join(const ts_mesh *a, const ts_mesh *b, int flip_b) {
  ts_mesh *m = fx_mesh(a->n_verts + b->n_verts, a->n_tris + b->n_tris);
  memcpy(m->v, a->v, sizeof *a->v * a->n_verts);
  memcpy(m->v + a->n_verts, b->v, sizeof *b->v * b->n_verts);
  memcpy(m->t, a->t, sizeof *a->t * a->n_tris);
  for (uint32_t f = 0; f < b->n_tris; f++)
    for (int k = 0; k < 3; k++)
      m->t[a->n_tris + f][k] = a->n_verts + b->t[f][flip_b && k ? 3 - k : k];
  return m;
}

static ts_mesh *shell(void) {
  ts_mesh *o = octahedron(0.010), *s = fx_uv_sphere(0.005, 24, 48);
  ts_mesh *m = join(o, s, 1);
  ts_mesh_free(o);
  ts_mesh_free(s);
  return m;
}

START_TEST(test_two_triangles) {
  ts_mesh *m = fx_mesh(6, 2);
  const double v[6][3] = {{0, 0, 0}, {4, 0, 0}, {0, 4, 0}, {1, 1, -1}, {1, 1, 1}, {1, 2.5, 0}};
  const uint32_t t[2][3] = {{0, 1, 2}, {3, 4, 5}};
  memcpy(m->v, v, sizeof v);
  memcpy(m->t, t, sizeof t);
  ts_mesh_cross c;
  ck_assert_int_eq(ts_mesh_self_crossings(m, 0, &c), 0);
  ck_assert_uint_eq(c.cap, TS_MESH_CROSS_CAP);
  ck_assert_uint_eq(c.n, 1);
  ck_assert_uint_eq(c.tri[0], 0);
  ck_assert_uint_eq(c.tri[1], 1);
  /* the second meets z = 0 along x = 1, y in [1, 2.5], all inside the
   * first: the midpoint (1, 1.75, 0); 1e-12: rounding of unit coordinates */
  const double want[3] = {1, 1.75, 0};
  for (int k = 0; k < 3; k++) ck_assert_double_eq_tol(c.point[k], want[k], 1e-12);
  /* moved clear (x = 5, past the first's reach): none */
  for (int i = 3; i < 6; i++) m->v[i][0] = 5;
  ck_assert_int_eq(ts_mesh_self_crossings(m, 0, &c), 0);
  ck_assert_uint_eq(c.n, 0);
  ck_assert_int_eq(ts_mesh_self_crossings(NULL, 0, &c), TS_EINVAL);
  ts_mesh_free(m);
}
END_TEST

/* The shell through the library: clean, and crossing after one level. */
START_TEST(test_smoothed_shell_crosses) {
  ts_mesh *m = shell(), *r = NULL;
  ts_mesh_cross c;
  ck_assert_int_eq(ts_mesh_self_crossings(m, 0, &c), 0);
  ck_assert_uint_eq(c.n, 0);
  char err[256] = "";
  ck_assert_msg(ts_loop_subdivide_n(m, 1, &r, err, sizeof err) == 0, "%s", err);
  /* the sheets: the components over shared vertices (union-find); the
   * octahedron's corner 0 keeps its index (Loop's old vertices come first) */
  uint32_t *up = malloc(sizeof *up * r->n_verts);
  ck_assert_ptr_nonnull(up);
  for (uint32_t i = 0; i < r->n_verts; i++) up[i] = i;
  for (uint32_t f = 0; f < r->n_tris; f++)
    for (int k = 1; k < 3; k++) {
      uint32_t a = r->t[f][0], b = r->t[f][k];
      while (up[a] != a) a = up[a];
      while (up[b] != b) b = up[b];
      up[a > b ? a : b] = a < b ? a : b;
    }
  uint32_t hull = 0;
  double hmin = INFINITY, imin = INFINITY;
  for (uint32_t i = 0; i < r->n_verts; i++) {
    uint32_t a = i;
    while (up[a] != a) a = up[a];
    double d = sqrt(r->v[i][0] * r->v[i][0] + r->v[i][1] * r->v[i][1] + r->v[i][2] * r->v[i][2]);
    if (a == hull)
      hmin = fmin(hmin, d);
    else
      imin = fmin(imin, d);
  }
  ck_assert_int_eq(ts_mesh_self_crossings(r, 0, &c), 0);
  printf("shell after one Loop level: hull vertices down to %.3f mm from the centre, inner sheet "
         "from %.3f mm; %u crossing pairs, first %u x %u at (%.3f, %.3f, %.3f) mm\n",
         hmin * 1e3, imin * 1e3, c.n, c.tri[0], c.tri[1], c.point[0] * 1e3, c.point[1] * 1e3,
         c.point[2] * 1e3);
  /* the inner sheet barely shrinks (2 %), the hull's vertices stay outside
   * it (its corners at about 5.2 mm) while its faces pass through */
  ck_assert_double_gt(imin, 0.98 * 0.005);
  ck_assert_double_gt(hmin, imin);
  ck_assert_uint_gt(c.n, 0);
  ck_assert_uint_le(c.n, c.cap);
  /* the first pair: one triangle of each sheet, the point between them */
  uint32_t side[2];
  for (int j = 0; j < 2; j++) {
    uint32_t a = r->t[c.tri[j]][0];
    while (up[a] != a) a = up[a];
    side[j] = a == hull;
  }
  ck_assert_uint_ne(side[0], side[1]);
  double pd = sqrt(c.point[0] * c.point[0] + c.point[1] * c.point[1] + c.point[2] * c.point[2]);
  ck_assert_double_lt(pd, 0.005 + 1e-9);
  ck_assert_double_gt(pd, 0.98 * 0.005 - 1e-9);
  free(up);
  ts_mesh_free(r);
  ts_mesh_free(m);
}
END_TEST

/* Runs `tissuetool mesh subdivide --loop in -o out`. */
static tu_captured subdivide(const char *in, const char *out) {
  const char *argv[] = {"mesh", "subdivide", "--loop", in, "-o", out};
  return tu_run_cmd(ts_cmd_mesh, 6, argv);
}

/* The number after "key": in the tool's JSON, or -1. */
static long json_uint(const char *json, const char *key) {
  char k[96];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *p = strstr(json, k);
  return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

START_TEST(test_tool_subdivide_reports) {
  char dir[512], in[600], out[600], msg[256];
  tu_tmpdir_make(dir, sizeof dir, "ts_mesh_cross_test");
  snprintf(in, sizeof in, "%s/in.obj", dir);
  snprintf(out, sizeof out, "%s/out.obj", dir);

  /* the shell: crossing after the smoothing, the file still written */
  ts_mesh *m = shell(), *want = NULL;
  ck_assert_int_eq(ts_mesh_write_obj_file(m, in, msg, sizeof msg), 0);
  tu_captured c = subdivide(in, out);
  printf("shell: status %d\n%s%s", c.status, c.out, c.err);
  ck_assert_int_eq(c.status, 1);
  /* the same count as the library's check on the library's result */
  char err[256] = "";
  ck_assert_msg(ts_loop_subdivide_n(m, 1, &want, err, sizeof err) == 0, "%s", err);
  ts_mesh_cross x;
  ck_assert_int_eq(ts_mesh_self_crossings(want, 0, &x), 0);
  ck_assert_uint_gt(x.n, 0);
  ck_assert_int_eq(json_uint(c.out, "self_intersections"), (long)x.n);
  ck_assert_int_eq(json_uint(c.out, "input_self_intersections"), 0);
  ck_assert_ptr_nonnull(strstr(c.out, "\"first_self_intersection\":{\"triangles\":["));
  ck_assert_ptr_nonnull(strstr(c.err, "passes through itself"));
  char pair[64];
  snprintf(pair, sizeof pair, "triangles %u and %u", x.tri[0], x.tri[1]);
  ck_assert_msg(strstr(c.err, pair) != NULL, "%s", c.err);
  ck_assert_int_eq(access(out, R_OK), 0);
  tu_captured_free(&c);
  ts_mesh_free(want);
  ts_mesh_free(m);

  /* the icosahedron: convex, clean before and after */
  m = fx_icosahedron(0.01);
  ck_assert_int_eq(ts_mesh_write_obj_file(m, in, msg, sizeof msg), 0);
  c = subdivide(in, out);
  ck_assert_msg(c.status == 0, "%s%s", c.out, c.err);
  ck_assert_int_eq(json_uint(c.out, "self_intersections"), 0);
  ck_assert_int_eq(json_uint(c.out, "input_self_intersections"), 0);
  ck_assert_ptr_null(strstr(c.out, "first_self_intersection"));
  ck_assert_int_eq(json_uint(c.out, "triangles"), 80);
  tu_captured_free(&c);
  ts_mesh_free(m);
  tu_tmpdir_remove(dir);
}
END_TEST

/* K spheres (8 x 16, 224 triangles), each 0.3 mm along x from the last:
 * every pair overlaps. */
START_TEST(test_cap) {
  enum { K = 12 };
  ts_mesh *s = fx_uv_sphere(0.005, 8, 16);
  ts_mesh *m = fx_mesh(K * s->n_verts, K * s->n_tris);
  for (uint32_t p = 0; p < K; p++) {
    for (uint32_t i = 0; i < s->n_verts; i++) {
      memcpy(m->v[p * s->n_verts + i], s->v[i], sizeof s->v[i]);
      m->v[p * s->n_verts + i][0] += 3e-4 * p;
    }
    for (uint32_t f = 0; f < s->n_tris; f++)
      for (int k = 0; k < 3; k++) m->t[p * s->n_tris + f][k] = p * s->n_verts + s->t[f][k];
  }
  ts_mesh_cross all, capped;
  ck_assert_int_eq(ts_mesh_self_crossings(m, 1000000, &all), 0);
  ck_assert_int_eq(ts_mesh_self_crossings(m, 100, &capped), 0);
  printf("%u overlapping spheres: %u crossing pairs; capped at 100: %u\n", (unsigned)K, all.n, capped.n);
  ck_assert_uint_gt(all.n, 100);
  ck_assert_uint_le(all.n, 1000000);
  ck_assert_uint_eq(capped.n, 101); /* cap + 1: "more than the cap" */
  ck_assert_uint_eq(capped.tri[0], all.tri[0]);
  ck_assert_uint_eq(capped.tri[1], all.tri[1]);
  ts_mesh_free(m);
  ts_mesh_free(s);
}
END_TEST

int main(void) {
  const tu_case cases[] = {{"two_triangles", test_two_triangles},
                           {"shell", test_smoothed_shell_crosses},
                           {"tool", test_tool_subdivide_reports},
                           {"cap", test_cap}};
  return tu_run_suite(tu_suite_of_cases("mesh_cross", cases, sizeof cases / sizeof cases[0], 120));
}
