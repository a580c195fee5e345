/*
 * test_mesh_io.c: Check suite for mesh import, validation and repair
 * (server/core/ts_mesh_io.h, ts_mesh_check.h).
 *
 * - Every mesh in shared/data/meshes loads with the counts in its SOURCES.md
 *   and the topology computed independently (a short Python script over the
 *   OBJ text: edges by vertex pair, union-find for components and boundary
 *   loops, signed volume by the divergence theorem), plus identities that
 *   must hold whatever the code does (closed manifold: E = 3F/2; open:
 *   2E = 3F + boundary edges). A mesh file added there (.obj, .stl, .ply)
 *   without a line in SHARED below fails shared_meshes_listed by its name.
 * - The OBJ writer round-trips bit for bit.
 * - One mesh written by this file as binary STL, ASCII STL, ASCII PLY and
 *   binary little-endian PLY (with extra properties and elements to skip)
 *   loads back to the same welded mesh.
 * - Polygons: ear clipping keeps a concave face's triangles inside it.
 * - Closed forms on hand-built meshes: tetrahedron (chi 2, volume 1/6),
 *   cube, torus (chi 0, genus 1), disjoint pieces, disk and annulus.
 * - Malformed files give the intended error, with the exact message where
 *   the message is part of the contract (it names the line).
 * - Size limits are enforced.
 * - A tissue's build from a mesh (ts_mesh_tissue.h) tells its stages in
 *   order, and stops at any of them when on_stage returns an error: that
 *   code, "stopped" in the message, nothing built (the ASan build checks
 *   that nothing leaks). Unstopped, its tissue has the stable step of
 *   ts_tissue_build's, bit for bit (it prepares the step apart).
 */
#include "ts_check.h"
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_error.h"
#include "ts_mesh.h"
#include "ts_mesh_check.h"
#include "ts_mesh_io.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_mesh_tissue.h"
#include "ts_tissue.h"
#include "../integration/grid_obj.h"

#define MESHES TS_SHARED_DIR "/data/meshes/"

/* ---- helpers ---- */

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static void b_put(buf *b, const void *d, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    ck_assert_ptr_nonnull(b->p);
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void b_printf(buf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  ck_assert_int_lt(n, (int)sizeof tmp);
  b_put(b, tmp, (size_t)n);
}

static void b_u8(buf *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u16(buf *b, uint16_t v) {
  uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  b_put(b, x, 2);
}
static void b_u32(buf *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  b_put(b, x, 4);
}
static void b_f32(buf *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  b_u32(b, u);
}
static void b_f64(buf *b, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  b_u32(b, (uint32_t)u);
  b_u32(b, (uint32_t)(u >> 32));
}

static ts_mesh *mesh_of(uint32_t nv, const double (*v)[3], uint32_t nt, const uint32_t (*t)[3]) {
  ts_mesh *m = NULL;
  ck_assert_int_eq(ts_mesh_alloc(nv, nt, &m), 0);
  memcpy(m->v, v, sizeof *v * nv);
  memcpy(m->t, t, sizeof *t * nt);
  return m;
}

static ts_mesh *import_file(const char *path, double scale, ts_mesh_report *rep,
                            ts_mesh_read_info *info) {
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = scale;
  ts_mesh *m = NULL;
  char err[512];
  int rc = ts_mesh_import_file(path, TS_MESH_AUTO, &o, &m, rep, info, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s (%s)", path, err, ts_err_name(rc));
  return m;
}

/* Import from a string; returns the code and leaves the message in err. */
static int import_str(const char *s, int format, ts_mesh **out, ts_mesh_report *rep, char *err,
                      size_t cap) {
  *out = NULL;
  return ts_mesh_import(s, strlen(s), format, NULL, out, rep, NULL, err, cap);
}

static void expect_err(const char *s, int format, int code, const char *msg) {
  ts_mesh *m = NULL;
  char err[512];
  int rc = import_str(s, format, &m, NULL, err, sizeof err);
  ck_assert_ptr_null(m);
  ck_assert_msg(rc == code, "expected %s, got %s (%s)", ts_err_name(code), ts_err_name(rc), err);
  ck_assert_str_eq(err, msg);
}

static void expect_err_has(const void *data, size_t len, int format, int code, const char *part) {
  ts_mesh *m = NULL;
  char err[512];
  int rc = ts_mesh_import(data, len, format, NULL, &m, NULL, NULL, err, sizeof err);
  ck_assert_ptr_null(m);
  ck_assert_msg(rc == code, "expected %s, got %s (%s)", ts_err_name(code), ts_err_name(rc), err);
  ck_assert_msg(strstr(err, part) != NULL, "message '%s' lacks '%s'", err, part);
}

static double tri_area_z(const ts_mesh *m, uint32_t k) {
  const double *a = m->v[m->t[k][0]], *b = m->v[m->t[k][1]], *c = m->v[m->t[k][2]];
  return 0.5 * ((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]));
}

/* ---- writers for STL and PLY (the formats the core reads but does not write) ---- */

static void write_stl_binary(buf *b, const ts_mesh *m, const char *header) {
  char h[80] = {0};
  memcpy(h, header, strlen(header) < 80 ? strlen(header) : 80);
  b_put(b, h, 80);
  b_u32(b, m->n_tris);
  for (uint32_t k = 0; k < m->n_tris; k++) {
    for (int i = 0; i < 3; i++) b_f32(b, 0.0f); /* normal: ignored by readers */
    for (int c = 0; c < 3; c++)
      for (int i = 0; i < 3; i++) b_f32(b, (float)m->v[m->t[k][c]][i]);
    b_u16(b, 0);
  }
}

static void write_stl_ascii(buf *b, const ts_mesh *m) {
  b_printf(b, "solid test mesh\n");
  for (uint32_t k = 0; k < m->n_tris; k++) {
    b_printf(b, "  facet normal 0 0 0\n    outer loop\n");
    for (int c = 0; c < 3; c++) {
      const double *p = m->v[m->t[k][c]];
      /* %.9g reproduces a float32 exactly */
      b_printf(b, "      vertex %.9g %.9g %.9g\n", (double)(float)p[0], (double)(float)p[1],
               (double)(float)p[2]);
    }
    b_printf(b, "    endloop\n  endfacet\n");
  }
  b_printf(b, "endsolid test mesh\n");
}

/* PLY with extra vertex properties (colour, a float), an extra scalar and
 * list on faces, and an extra element, all of which the reader must skip.
 * dbl: coordinates as double (else float). */
static void write_ply(buf *b, const ts_mesh *m, int binary, int dbl) {
  b_printf(b, "ply\nformat %s 1.0\ncomment written by test_mesh_io\n",
           binary ? "binary_little_endian" : "ascii");
  b_printf(b, "element vertex %u\n", m->n_verts);
  const char *ct = dbl ? "double" : "float";
  b_printf(b, "property %s x\nproperty %s y\nproperty %s z\n", ct, ct, ct);
  b_printf(b, "property uchar red\nproperty uchar green\nproperty uchar blue\n"
              "property float32 confidence\n");
  b_printf(b, "element face %u\nproperty uchar flags\n", m->n_tris);
  b_printf(b, "property list uchar int vertex_indices\nproperty list uchar float texcoord\n");
  b_printf(b, "element edge 1\nproperty int vertex1\nproperty int vertex2\nend_header\n");
  for (uint32_t i = 0; i < m->n_verts; i++) {
    const double *p = m->v[i];
    if (binary) {
      for (int c = 0; c < 3; c++) dbl ? b_f64(b, p[c]) : b_f32(b, (float)p[c]);
      b_u8(b, 200), b_u8(b, 10), b_u8(b, 30);
      b_f32(b, 0.5f);
    } else if (dbl) {
      b_printf(b, "%.17g %.17g %.17g 200 10 30 0.5\n", p[0], p[1], p[2]);
    } else {
      b_printf(b, "%.9g %.9g %.9g 200 10 30 0.5\n", (double)(float)p[0], (double)(float)p[1],
               (double)(float)p[2]);
    }
  }
  for (uint32_t k = 0; k < m->n_tris; k++) {
    const uint32_t *t = m->t[k];
    if (binary) {
      b_u8(b, 7);
      b_u8(b, 3);
      for (int c = 0; c < 3; c++) b_u32(b, t[c]);
      b_u8(b, 2);
      b_f32(b, 0.25f), b_f32(b, 0.75f);
    } else {
      b_printf(b, "7 3 %u %u %u 2 0.25 0.75\n", t[0], t[1], t[2]);
    }
  }
  if (binary)
    b_u32(b, 0), b_u32(b, 1);
  else
    b_printf(b, "0 1\n");
}

/* ---- the shared meshes ---- */

typedef struct shared_case {
  const char *file;
  double scale;
  uint32_t file_verts, verts, tris, edges, boundary_edges, loops;
  int closed;
  int64_t euler;
  double volume; /* in file units^3, from the independent script; 0: open */
} shared_case;

/* liver and liver-smooth are in centimetres (SOURCES.md); the other two are
 * read at scale 1. */
static const shared_case SHARED[] = {
    {"liver.obj", 0.01, 181, 139, 274, 411, 0, 0, 1, 2, 36.56851846758213},
    {"liver-smooth.obj", 0.01, 2194, 2194, 4384, 6576, 0, 0, 1, 2, 39.267352037054124},
    {"dental_instrument_light.obj", 1, 401, 401, 784, 1184, 16, 1, 0, 1, 0},
    {"spot.obj", 1, 2930, 2930, 5856, 8784, 0, 0, 1, 2, 0.7182587880998604},
};

START_TEST(shared_meshes_load) {
  const shared_case *c = &SHARED[_i];
  char path[1024];
  snprintf(path, sizeof path, "%s%s", MESHES, c->file);
  ts_mesh_report r;
  ts_mesh_read_info info;
  ts_mesh *m = import_file(path, c->scale, &r, &info);
  ck_assert_int_eq(info.format, TS_MESH_OBJ);
  ck_assert_uint_eq(info.file_verts, c->file_verts);
  ck_assert_uint_eq(info.file_faces, c->tris);
  ck_assert_uint_eq(info.unused_dropped, c->file_verts - c->verts);
  ck_assert_uint_eq(info.welded, 0);
  ck_assert_uint_eq(info.degenerate_dropped + info.duplicate_dropped, 0);
  ck_assert_int_eq(info.flipped, 0); /* all four are wound outward */
  ck_assert_uint_eq(m->n_verts, c->verts);
  ck_assert_uint_eq(m->n_tris, c->tris);
  ck_assert_uint_eq(r.n_used_verts, c->verts);
  ck_assert_uint_eq(r.n_edges, c->edges);
  ck_assert_uint_eq(r.n_boundary_edges, c->boundary_edges);
  ck_assert_uint_eq(r.n_boundary_loops, c->loops);
  ck_assert_uint_eq(r.n_components, 1);
  /* every edge has two sides, a boundary edge one */
  ck_assert_uint_eq(2 * r.n_edges, 3 * r.n_tris + r.n_boundary_edges);
  ck_assert_int_eq(r.manifold, 1);
  ck_assert_int_eq(r.oriented, 1);
  ck_assert_int_eq(r.closed, c->closed);
  ck_assert_int_eq(r.euler, c->euler);
  ck_assert_int_eq(r.genus, 0);
  ck_assert_int_eq(r.volume_valid, c->closed);
  if (c->closed) {
    /* reference from the independent script in file units; the scale enters
     * cubed. 1e-9 relative: only the summation order differs. */
    double want = c->volume * c->scale * c->scale * c->scale;
    ck_assert_double_eq_tol(r.volume, want, 1e-9 * want);
  }
  ck_assert_int_eq(ts_mesh_check(m, NULL, NULL, NULL, 0), 0);
  ts_mesh_free(m);

  /* the plain reader gives the same counts without the repair step */
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = c->scale;
  char err[512];
  ck_assert_int_eq(ts_mesh_read_file(path, TS_MESH_AUTO, &o, &m, &info, err, sizeof err), 0);
  ck_assert_uint_eq(m->n_verts, c->verts);
  ck_assert_uint_eq(m->n_tris, c->tris);
  ck_assert_uint_eq(info.polygons_split, 0);
  ts_mesh_free(m);
}
END_TEST

/* Every mesh file in the shared folder has its case in SHARED, so a mesh
 * added there is not silently left untested. */
START_TEST(shared_meshes_listed) {
  DIR *d = opendir(MESHES);
  ck_assert_msg(d != NULL, "cannot open %s", MESHES);
  char missing[1024] = "";
  size_t n_mesh = 0;
  for (struct dirent *de; (de = readdir(d));) {
    if (ts_mesh_format_from_name(de->d_name) == TS_MESH_AUTO) continue; /* SOURCES.md, ... */
    n_mesh++;
    int found = 0;
    for (size_t i = 0; i < sizeof SHARED / sizeof SHARED[0]; i++)
      found |= strcmp(SHARED[i].file, de->d_name) == 0;
    if (!found) {
      size_t len = strlen(missing);
      snprintf(missing + len, sizeof missing - len, " %s", de->d_name);
    }
  }
  closedir(d);
  ck_assert_msg(!missing[0], "meshes in %s with no case in SHARED:%s", MESHES, missing);
  /* and every case names a file that is there */
  ck_assert_uint_eq(n_mesh, sizeof SHARED / sizeof SHARED[0]);
}
END_TEST

START_TEST(scale_option) {
  ts_mesh_report r1, r2;
  ts_mesh *a = import_file(MESHES "liver.obj", 1.0, &r1, NULL);
  ts_mesh *b = import_file(MESHES "liver.obj", 0.01, &r2, NULL);
  ck_assert_uint_eq(a->n_verts, b->n_verts);
  for (uint32_t i = 0; i < a->n_verts; i++)
    for (int c = 0; c < 3; c++) ck_assert(b->v[i][c] == a->v[i][c] * 0.01); /* same operation */
  /* bounding box in cm from the file: x in [-4.67928, 1.80331] */
  ck_assert_double_eq_tol(r1.bbox_min[0], -4.67928, 1e-12);
  ck_assert_double_eq_tol(r2.bbox_max[0], 0.0180331, 1e-14);
  ck_assert_double_eq_tol(r2.volume, r1.volume * 1e-6, 1e-12 * r1.volume * 1e-6);
  ts_mesh_free(a);
  ts_mesh_free(b);
}
END_TEST

/* ---- OBJ writer ---- */

static void assert_same_mesh(const ts_mesh *a, const ts_mesh *b) {
  ck_assert_uint_eq(a->n_verts, b->n_verts);
  ck_assert_uint_eq(a->n_tris, b->n_tris);
  ck_assert_int_eq(memcmp(a->v, b->v, sizeof *a->v * a->n_verts), 0);
  ck_assert_int_eq(memcmp(a->t, b->t, sizeof *a->t * a->n_tris), 0);
}

START_TEST(obj_round_trip) {
  ts_mesh *m = import_file(MESHES "liver-smooth.obj", 0.01, NULL, NULL);
  char *s = NULL;
  size_t n = 0;
  ck_assert_int_eq(ts_mesh_write_obj(m, &s, &n), 0);
  ck_assert_uint_eq(strlen(s), n);
  ts_mesh *back = NULL;
  char err[256];
  ck_assert_int_eq(ts_mesh_read_obj(s, n, NULL, &back, NULL, err, sizeof err), 0);
  assert_same_mesh(m, back); /* %.17g: bit for bit */
  ts_mesh_free(back);
  free(s);

  char path[256];
  snprintf(path, sizeof path, "/tmp/test_mesh_io_%ld.obj", (long)getpid());
  ck_assert_int_eq(ts_mesh_write_obj_file(m, path, err, sizeof err), 0);
  ck_assert_int_eq(ts_mesh_read_file(path, TS_MESH_AUTO, NULL, &back, NULL, err, sizeof err), 0);
  assert_same_mesh(m, back);
  ts_mesh_free(back);
  unlink(path);
  ts_mesh_free(m);

  /* the writer refuses what it could not read back */
  const double v[3][3] = {{0, 0, 0}, {1, 0, 0}, {0, NAN, 0}};
  const uint32_t t[1][3] = {{0, 1, 2}};
  ts_mesh *bad = mesh_of(3, v, 1, t);
  ck_assert_int_eq(ts_mesh_write_obj(bad, &s, &n), TS_EINVAL);
  bad->v[2][1] = 1;
  bad->t[0][2] = 3;
  ck_assert_int_eq(ts_mesh_write_obj(bad, &s, &n), TS_EINVAL);
  ts_mesh_free(bad);
}
END_TEST

/* ---- the same mesh through every format ---- */

enum { EXACT = 0, F32 = 1, F32_TEXT = 2 };

/* Loads `data` and checks it is `ref` triangle for triangle, with the
 * coordinates exact (EXACT), rounded to float32 (F32: binary float32 fields),
 * or equal once rounded to float32 (F32_TEXT: a float32 printed with %.9g
 * identifies it but reads back as the nearest double to the decimal);
 * same_order: vertex numbering kept. */
static void check_loads_as(const buf *data, int format, const ts_mesh *ref, int mode,
                           int same_order, int binary) {
  ts_mesh *m = NULL;
  ts_mesh_report r;
  ts_mesh_read_info info;
  char err[512];
  int rc = ts_mesh_import(data->p, data->n, TS_MESH_AUTO, NULL, &m, &r, &info, err, sizeof err);
  ck_assert_msg(rc == 0, "%s", err);
  ck_assert_int_eq(info.format, format);
  ck_assert_int_eq(info.binary, binary);
  ck_assert_uint_eq(m->n_verts, ref->n_verts);
  ck_assert_uint_eq(m->n_tris, ref->n_tris);
  for (uint32_t k = 0; k < m->n_tris; k++)
    for (int c = 0; c < 3; c++) {
      if (same_order) ck_assert_uint_eq(m->t[k][c], ref->t[k][c]);
      for (int i = 0; i < 3; i++) {
        double want = ref->v[ref->t[k][c]][i], got = m->v[m->t[k][c]][i];
        if (mode == F32) want = (double)(float)want;
        if (mode == F32_TEXT)
          ck_assert((float)got == (float)want);
        else
          ck_assert(got == want);
      }
    }
  ck_assert_int_eq(r.closed, 1);
  ck_assert_int_eq(r.genus, 0);
  ck_assert_int_eq(r.euler, 2);
  ts_mesh_free(m);
}

START_TEST(formats_give_same_mesh) {
  ts_mesh *ref = import_file(MESHES "liver.obj", 0.01, NULL, NULL); /* 139 v, 274 t */
  buf b = {0};

  write_stl_binary(&b, ref, "binary STL from test_mesh_io");
  ck_assert_uint_eq(b.n, 84 + 50 * 274);
  check_loads_as(&b, TS_MESH_STL, ref, F32, 0, 1);
  /* 822 corners weld to 139 vertices */
  ts_mesh *m = NULL;
  ts_mesh_read_info info;
  char err[256];
  ck_assert_int_eq(ts_mesh_read_stl(b.p, b.n, NULL, &m, &info, err, sizeof err), 0);
  ck_assert_uint_eq(info.file_verts, 822);
  ck_assert_uint_eq(info.welded, 822 - 139);
  ts_mesh_free(m);
  /* a binary header starting with "solid" is still binary */
  b.n = 0;
  write_stl_binary(&b, ref, "solid liver, binary");
  check_loads_as(&b, TS_MESH_STL, ref, F32, 0, 1);

  b.n = 0;
  write_stl_ascii(&b, ref);
  check_loads_as(&b, TS_MESH_STL, ref, F32_TEXT, 0, 0);

  b.n = 0;
  write_ply(&b, ref, 0, 0);
  check_loads_as(&b, TS_MESH_PLY, ref, F32_TEXT, 1, 0);
  b.n = 0;
  write_ply(&b, ref, 0, 1);
  check_loads_as(&b, TS_MESH_PLY, ref, EXACT, 1, 0);
  b.n = 0;
  write_ply(&b, ref, 1, 0);
  check_loads_as(&b, TS_MESH_PLY, ref, F32, 1, 1);
  b.n = 0;
  write_ply(&b, ref, 1, 1);
  check_loads_as(&b, TS_MESH_PLY, ref, EXACT, 1, 1);
  free(b.p);
  ts_mesh_free(ref);
}
END_TEST

START_TEST(weld_tolerance) {
  /* a unit cube as a triangle soup: 12 triangles, 36 corners, 8 points */
  static const int q[6][4] = {{0, 2, 3, 1}, {4, 5, 7, 6}, {0, 1, 5, 4},
                              {2, 6, 7, 3}, {0, 4, 6, 2}, {1, 3, 7, 5}};
  double corner[8][3];
  for (int i = 0; i < 8; i++)
    corner[i][0] = i & 1, corner[i][1] = (i >> 1) & 1, corner[i][2] = (i >> 2) & 1;
  ts_mesh *m = NULL;
  ck_assert_int_eq(ts_mesh_alloc(36, 12, &m), 0);
  for (int f = 0; f < 6; f++) {
    const int tri[2][3] = {{q[f][0], q[f][1], q[f][2]}, {q[f][0], q[f][2], q[f][3]}};
    for (int h = 0; h < 2; h++)
      for (int c = 0; c < 3; c++) {
        uint32_t k = (uint32_t)(6 * f + 3 * h + c);
        memcpy(m->v[k], corner[tri[h][c]], sizeof corner[0]);
        /* jitter below the tolerance: 3e-9 m per copy, |d| <= 3e-9*sqrt(3) */
        m->v[k][0] += 3e-9 * (k % 2), m->v[k][1] -= 3e-9 * (k % 3 == 0);
        m->t[2 * f + h][c] = k;
      }
  }
  ts_mesh *c = NULL;
  ck_assert_int_eq(ts_mesh_clone(m, &c), 0);
  uint32_t merged = 0;
  ck_assert_int_eq(ts_mesh_weld(m, 1e-8, &merged), 0);
  ck_assert_uint_eq(merged, 28);
  ck_assert_uint_eq(m->n_verts, 8);
  ts_mesh_report r;
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, NULL, 0), 0);
  ck_assert_uint_eq(r.n_edges, 18);
  ck_assert_int_eq(r.closed, 1);
  /* the jitter moves the volume by at most ~6 faces x 1 m^2 x 5e-9 m */
  ck_assert_double_eq_tol(r.volume, 1.0, 1e-7);
  /* exact welding joins only copies with the same jitter: the cube stays
   * open (and may have bow-tie vertices, so only the counts are asserted) */
  ck_assert_int_eq(ts_mesh_weld(c, 0, &merged), 0);
  ck_assert_uint_gt(c->n_verts, 8);
  ts_mesh_check(c, NULL, &r, NULL, 0);
  ck_assert_uint_gt(r.n_boundary_edges, 0);
  ck_assert_int_eq(r.closed, 0);
  ts_mesh_free(c);
  ts_mesh_free(m);

  /* greedy welding merges into representatives: points 0.6 tol apart on a
   * line, the third is 1.2 tol from the first and stays separate */
  const double v[3][3] = {{0, 0, 0}, {0.6e-3, 0, 0}, {1.2e-3, 0, 0}};
  const uint32_t t[1][3] = {{0, 1, 2}};
  m = mesh_of(3, v, 1, t);
  ck_assert_int_eq(ts_mesh_weld(m, 1e-3, &merged), 0);
  ck_assert_uint_eq(merged, 1);
  ck_assert_uint_eq(m->n_verts, 2);
  ck_assert(m->v[1][0] == 1.2e-3);
  ck_assert_uint_eq(m->t[0][0], 0);
  ck_assert_uint_eq(m->t[0][1], 0);
  ck_assert_uint_eq(m->t[0][2], 1);
  ck_assert_int_eq(ts_mesh_weld(m, -1, NULL), TS_EINVAL);
  ck_assert_int_eq(ts_mesh_weld(m, 1e-300, NULL), TS_EINVAL); /* 2^50 cells exceeded */
  ts_mesh_free(m);
}
END_TEST

/* ---- OBJ details ---- */

START_TEST(obj_forms_and_polygons) {
  /* v/t/n forms, negative indices, CRLF, tabs, ignored statements, an unused
   * vertex; a quad and a concave "dart" A(0,0) B(2,1) C(0,2) D(1,1) listed
   * from A, where a fan from A would give the inverted triangle (A,C,D). */
  const char *s = "# test\r\n"
                  "mtllib x.mtl\r\n"
                  "o thing\r\n"
                  "v 0 0 0\r\n"
                  "v 2 1 0\r\n"
                  "v 0 2 0\r\n"
                  "v\t1 1 0\r\n"
                  "v 9 9 9\r\n" /* unused */
                  "vt 0 0\r\nvt 1 0\r\nvt 1 1\r\n"
                  "vn 0 0 1\r\n"
                  "g dart\r\ns 1\r\nusemtl m\r\n"
                  "f 1/1/1 2/2/1 3/3/1 4//1\r\n"
                  "v 3 0 0\r\nv 4 0 0\r\nv 4 1 0\r\nv 3 1 0\r\n"
                  "f -4/1 -3/2 -2/3 -1/1\r\n"
                  "l 1 2\r\n";
  ts_mesh *m = NULL;
  ts_mesh_read_info info;
  char err[256];
  int rc = ts_mesh_read_obj(s, strlen(s), NULL, &m, &info, err, sizeof err);
  ck_assert_msg(rc == 0, "%s", err);
  ck_assert_uint_eq(info.file_verts, 9);
  ck_assert_uint_eq(info.file_faces, 2);
  ck_assert_uint_eq(info.polygons_split, 2);
  ck_assert_uint_eq(info.unused_dropped, 1);
  ck_assert_uint_eq(m->n_verts, 8);
  ck_assert_uint_eq(m->n_tris, 4);
  double dart = 0, quad = 0;
  for (uint32_t k = 0; k < 4; k++) {
    double a = tri_area_z(m, k);
    ck_assert_msg(a > 0, "triangle %u has area %g: winding not kept", k, a);
    if (k < 2) dart += a;
    else quad += a;
  }
  /* shoelace: the dart has area 1, the quad 1 */
  ck_assert_double_eq_tol(dart, 1.0, 1e-15);
  ck_assert_double_eq_tol(quad, 1.0, 1e-15);
  /* the dart's reflex corner D=(1,1) is in both of its triangles */
  for (uint32_t k = 0; k < 2; k++) {
    int hasd = 0;
    for (int c = 0; c < 3; c++) hasd |= m->v[m->t[k][c]][0] == 1 && m->v[m->t[k][c]][1] == 1;
    ck_assert(hasd);
  }
  ts_mesh_free(m);
}
END_TEST

START_TEST(ply_polygons_and_types) {
  /* a quad and a triangle, int8/uint32 aliases, "vertex_index", a face
   * element placed before the vertex element */
  buf b = {0};
  b_printf(&b, "ply\nformat binary_little_endian 1.0\n"
               "element face 2\nproperty list uint8 uint32 vertex_index\n"
               "element vertex 5\nproperty int8 flag\nproperty double x\nproperty double y\n"
               "property double z\nend_header\n");
  b_u8(&b, 4), b_u32(&b, 0), b_u32(&b, 1), b_u32(&b, 2), b_u32(&b, 3);
  b_u8(&b, 3), b_u32(&b, 1), b_u32(&b, 4), b_u32(&b, 2);
  const double p[5][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {2, 0.5, 0}};
  for (int i = 0; i < 5; i++) {
    b_u8(&b, 0xff);
    for (int c = 0; c < 3; c++) b_f64(&b, p[i][c]);
  }
  ts_mesh *m = NULL;
  ts_mesh_read_info info;
  char err[256];
  int rc = ts_mesh_read(b.p, b.n, TS_MESH_AUTO, NULL, &m, &info, err, sizeof err);
  ck_assert_msg(rc == 0, "%s", err);
  ck_assert_int_eq(info.format, TS_MESH_PLY);
  ck_assert_uint_eq(info.polygons_split, 1);
  ck_assert_uint_eq(m->n_tris, 3);
  double area = 0;
  for (uint32_t k = 0; k < 3; k++) {
    ck_assert(tri_area_z(m, k) > 0);
    area += tri_area_z(m, k);
  }
  ck_assert_double_eq_tol(area, 1.5, 1e-15);
  ts_mesh_report r;
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), 0);
  ck_assert_uint_eq(r.n_boundary_loops, 1);
  ck_assert_int_eq(r.euler, 1);
  ts_mesh_free(m);
  free(b.p);
}
END_TEST

/* ---- topology on closed forms ---- */

static const double TET_V[4][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
static const uint32_t TET_T[4][3] = {{0, 2, 1}, {0, 1, 3}, {0, 3, 2}, {1, 2, 3}};

START_TEST(topology_closed_forms) {
  ts_mesh_report r;
  char err[256];
  /* tetrahedron: chi 2, volume 1/6 */
  ts_mesh *m = mesh_of(4, TET_V, 4, TET_T);
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), 0);
  ck_assert_uint_eq(r.n_edges, 6);
  ck_assert_int_eq(r.euler, 2);
  ck_assert_int_eq(r.genus, 0);
  ck_assert_int_eq(r.closed, 1);
  ck_assert_double_eq_tol(r.volume, 1.0 / 6, 1e-15);
  /* inside out: same topology, negative volume; the import flips it */
  ts_mesh_flip(m);
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), 0);
  ck_assert_double_eq_tol(r.volume, -1.0 / 6, 1e-15);
  char *s;
  size_t n;
  ck_assert_int_eq(ts_mesh_write_obj(m, &s, &n), 0);
  ts_mesh *im = NULL;
  ts_mesh_read_info info;
  ck_assert_int_eq(ts_mesh_import(s, n, TS_MESH_OBJ, NULL, &im, &r, &info, err, sizeof err), 0);
  ck_assert_int_eq(info.flipped, 1);
  ck_assert_double_eq_tol(r.volume, 1.0 / 6, 1e-15);
  ck_assert_int_eq(ts_mesh_check(im, NULL, &r, err, sizeof err), 0);
  ck_assert_double_eq_tol(r.volume, 1.0 / 6, 1e-15);
  ts_mesh_free(im);
  free(s);
  ts_mesh_free(m);

  /* two disjoint tetrahedra: 2 components, chi 4, genus 0 */
  double v2[8][3];
  uint32_t t2[8][3];
  for (int i = 0; i < 4; i++) {
    memcpy(v2[i], TET_V[i], sizeof v2[i]);
    memcpy(v2[i + 4], TET_V[i], sizeof v2[i]);
    v2[i + 4][0] += 3;
    for (int c = 0; c < 3; c++) t2[i][c] = TET_T[i][c], t2[i + 4][c] = TET_T[i][c] + 4;
  }
  m = mesh_of(8, (const double(*)[3])v2, 8, (const uint32_t(*)[3])t2);
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), 0);
  ck_assert_uint_eq(r.n_components, 2);
  ck_assert_int_eq(r.euler, 4);
  ck_assert_int_eq(r.genus, 0);
  ck_assert_double_eq_tol(r.volume, 2.0 / 6, 1e-15);
  ts_mesh_free(m);

  /* torus: an N x M grid of quads wrapped both ways, chi 0, genus 1 */
  enum { N = 8, M = 6 };
  double tv[N * M][3];
  uint32_t tt[2 * N * M][3];
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) {
      double u = 2 * M_PI * i / N, w = 2 * M_PI * j / M;
      double *p = tv[i * M + j];
      p[0] = (0.05 + 0.02 * cos(w)) * cos(u);
      p[1] = (0.05 + 0.02 * cos(w)) * sin(u);
      p[2] = 0.02 * sin(w);
      uint32_t a = (uint32_t)(i * M + j), b = (uint32_t)(((i + 1) % N) * M + j),
               c = (uint32_t)(((i + 1) % N) * M + (j + 1) % M), d = (uint32_t)(i * M + (j + 1) % M);
      uint32_t *t0 = tt[2 * (i * M + j)], *t1 = tt[2 * (i * M + j) + 1];
      t0[0] = a, t0[1] = b, t0[2] = c;
      t1[0] = a, t1[1] = c, t1[2] = d;
    }
  m = mesh_of(N * M, (const double(*)[3])tv, 2 * N * M, (const uint32_t(*)[3])tt);
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), 0);
  ck_assert_uint_eq(r.n_edges, 3 * N * M);
  ck_assert_int_eq(r.euler, 0);
  ck_assert_int_eq(r.genus, 1);
  ck_assert_int_eq(r.closed, 1);
  /* outward: positive. With 8 x 6 vertices on the smooth torus the volume
   * is a fraction of 2 pi^2 R r^2 (the hexagonal section alone keeps 83 % of
   * the circle's area, the octagonal path 95 % of the circle's length); 0.6
   * to 1 leaves room for how the flat triangles cut the saddle region. */
  double smooth = 2 * M_PI * M_PI * 0.05 * 0.02 * 0.02;
  ck_assert_msg(r.volume > 0.6 * smooth && r.volume < smooth, "volume %g of %g", r.volume,
                smooth);
  ts_mesh_free(m);

  /* annulus (the torus grid cut open in j, not wrapped): 2 loops, chi 0 */
  const double av[8][3] = {{1, 0, 0}, {0, 1, 0}, {-1, 0, 0}, {0, -1, 0},
                           {2, 0, 0}, {0, 2, 0}, {-2, 0, 0}, {0, -2, 0}};
  uint32_t at[8][3];
  for (uint32_t i = 0; i < 4; i++) {
    uint32_t j = (i + 1) % 4;
    at[2 * i][0] = i, at[2 * i][1] = 4 + i, at[2 * i][2] = 4 + j;
    at[2 * i + 1][0] = i, at[2 * i + 1][1] = 4 + j, at[2 * i + 1][2] = j;
  }
  m = mesh_of(8, av, 8, (const uint32_t(*)[3])at);
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), 0);
  ck_assert_uint_eq(r.n_boundary_loops, 2);
  ck_assert_int_eq(r.euler, 0);
  ck_assert_int_eq(r.genus, 0);
  ck_assert_int_eq(r.closed, 0);
  ck_assert_int_eq(r.volume_valid, 0);
  ts_mesh_free(m);
}
END_TEST

START_TEST(repair_drops_what_is_safe) {
  /* the tetrahedron plus: a triangle with a repeated vertex, a zero-area
   * one (collinear, vertex 4 on edge 0-1), a duplicate of triangle 1 with
   * the other orientation, and an unused vertex 5 */
  const double v[6][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0.5, 0, 0}, {7, 7, 7}};
  const uint32_t t[7][3] = {{0, 2, 1}, {0, 1, 3}, {0, 3, 2}, {1, 2, 3},
                            {2, 2, 3}, {0, 4, 1}, {0, 3, 1}};
  ts_mesh *m = mesh_of(6, v, 7, t);
  ts_mesh_report r;
  char err[256];
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), TS_EMESH);
  ck_assert_str_eq(err, "triangle 4 is degenerate (a repeated vertex; vertices 2, 2, 3)");
  ck_assert_uint_eq(r.n_degenerate, 2);
  ck_assert_uint_eq(r.n_duplicate, 1);
  ck_assert_uint_eq(r.n_unused, 1);
  ts_mesh_repair_stats st;
  ck_assert_int_eq(ts_mesh_repair(m, NULL, &st, err, sizeof err), 0);
  ck_assert_uint_eq(st.welded, 0);
  ck_assert_uint_eq(st.degenerate, 2);
  ck_assert_uint_eq(st.duplicate, 1);
  ck_assert_uint_eq(st.unused, 2); /* 5, and 4 once its only triangle went */
  ck_assert_uint_eq(m->n_verts, 4);
  ck_assert_uint_eq(m->n_tris, 4);
  ck_assert_int_eq(memcmp(m->t, TET_T, sizeof TET_T), 0); /* order kept */
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), 0);
  ck_assert_double_eq_tol(r.volume, 1.0 / 6, 1e-15);
  ts_mesh_free(m);

  /* refused: an index out of range, a NaN */
  const uint32_t tb[1][3] = {{0, 1, 9}};
  m = mesh_of(4, TET_V, 1, tb);
  ck_assert_int_eq(ts_mesh_repair(m, NULL, NULL, err, sizeof err), TS_EMESH);
  ck_assert_str_eq(err, "triangle 0 refers to vertex 9 (the mesh has 4 vertices)");
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), TS_EMESH);
  ck_assert_str_eq(err, "triangle 0 refers to vertex 9 (the mesh has 4 vertices)");
  ck_assert_uint_eq(r.n_bad_index, 1);
  ts_mesh_free(m);
  m = mesh_of(4, TET_V, 4, TET_T);
  m->v[2][1] = NAN;
  ck_assert_int_eq(ts_mesh_repair(m, NULL, NULL, err, sizeof err), TS_EMESH);
  ck_assert_str_eq(err, "vertex 2 has a non-finite coordinate (NaN)");
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), TS_EMESH);
  ck_assert_str_eq(err, "vertex 2 has a non-finite coordinate");
  ck_assert_uint_eq(r.n_nonfinite, 1);
  ck_assert_int_eq(r.volume_valid, 0);
  ts_mesh_free(m);
}
END_TEST

/* ---- malformed input ---- */

START_TEST(malformed_obj) {
  const char *head = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\n";
  char s[512];
  snprintf(s, sizeof s, "%s# comment\n\nf 1 2 9\n", head);
  expect_err(s, TS_MESH_OBJ, TS_EMESH, "line 7: face index 9 out of range (4 vertices)");
  snprintf(s, sizeof s, "%sf 1 2 -5\n", head);
  expect_err(s, TS_MESH_OBJ, TS_EMESH,
             "line 5: face index -5 out of range (4 vertices before this line)");
  snprintf(s, sizeof s, "%sf 1 0 2\n", head);
  expect_err(s, TS_MESH_OBJ, TS_EMESH, "line 5: face index 0 is invalid (OBJ counts from 1)");
  snprintf(s, sizeof s, "%sf 1/4 2/1 3/1\n", head);
  expect_err(s, TS_MESH_OBJ, TS_EMESH,
             "line 5: texture index 4 out of range (0 texture coordinates)");
  snprintf(s, sizeof s, "%sf 1 2\n", head);
  expect_err(s, TS_MESH_OBJ, TS_EMESH, "line 5: face has 2 vertices (needs at least 3)");
  snprintf(s, sizeof s, "%sf 1/2/3/4 2 3\n", head);
  expect_err(s, TS_MESH_OBJ, TS_EMESH, "line 5: malformed face vertex '1/2/3/4'");
  expect_err("v 0 0 0\nv 1 nan 0\nv 0 1 0\nf 1 2 3\n", TS_MESH_OBJ, TS_EMESH,
             "line 2: coordinate is NaN (not a finite number)");
  expect_err("v 0 0 0\nv 1 0 -inf\nv 0 1 0\nf 1 2 3\n", TS_MESH_OBJ, TS_EMESH,
             "line 2: coordinate is infinite (not a finite number)");
  expect_err("v 0 0 0\nv 1 0 0\nv 0 1 zero\nf 1 2 3\n", TS_MESH_OBJ, TS_EMESH,
             "line 3: 'zero' is not a number");
  expect_err("v 0 0\n", TS_MESH_OBJ, TS_EMESH, "line 1: vertex has 2 coordinates (needs 3)");
  expect_err("v 0 0 0\nv 2000 0 0\nv 0 1 0\nf 1 2 3\n", TS_MESH_OBJ, TS_EMESH,
             "line 2: coordinate 2000 (2000 m at scale 1) is beyond the limit of 10 m (wrong "
             "units? set the scale)");
  expect_err("", TS_MESH_OBJ, TS_EMESH, "empty file");
  expect_err("# only a comment\n\n", TS_MESH_OBJ, TS_EMESH, "OBJ has no faces ('f' lines)");
  /* everything degenerate: nothing left */
  expect_err("v 0 0 0\nv 1 0 0\nv 2 0 0\nf 1 2 3\nf 1 1 2\n", TS_MESH_OBJ, TS_EMESH,
             "no triangles left after dropping 2 degenerate and 0 duplicate triangles");
}
END_TEST

START_TEST(malformed_topology) {
  /* a fin: three triangles on edge (1,2) */
  expect_err("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 -1 0\nv 0 0 1\n"
             "f 1 2 3\nf 2 1 4\nf 1 2 5\n",
             TS_MESH_OBJ, TS_EMESH,
             "non-manifold edge (1,2): shared by 3 triangles (line 6, line 7, line 8)");
  /* inconsistent winding */
  expect_err("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 -1 0\nf 1 2 3\nf 1 2 4\n", TS_MESH_OBJ, TS_EMESH,
             "line 5 and line 6 share edge (1,2) with the same orientation");
  /* a bow-tie vertex */
  expect_err("v 0 0 0\nv 1 0 0\nv 0 1 0\nv -1 0 0\nv 0 -1 0\nf 1 2 3\nf 1 4 5\n", TS_MESH_OBJ,
             TS_EMESH,
             "non-manifold vertex 1: its triangles form 2 separate fans (line 6 and line 7 are "
             "in different ones)");
  /* the same through the mesh API, named by index */
  const double v[4][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, -1, 0}};
  const uint32_t t[2][3] = {{0, 1, 2}, {0, 1, 3}};
  ts_mesh *m = mesh_of(4, v, 2, t);
  ts_mesh_report r;
  char err[256];
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), TS_EMESH);
  ck_assert_str_eq(err, "triangles 0 and 1 share edge (0,1) with the same orientation");
  ck_assert_uint_eq(r.n_inconsistent_edges, 1);
  ck_assert_int_eq(r.oriented, 0);
  ck_assert_int_eq(r.genus, -1);
  ts_mesh_free(m);
  /* an empty mesh */
  ck_assert_int_eq(ts_mesh_alloc(0, 0, &m), 0);
  ck_assert_int_eq(ts_mesh_check(m, NULL, &r, err, sizeof err), TS_EMESH);
  ck_assert_str_eq(err, "mesh is empty (no triangles)");
  ts_mesh_free(m);
}
END_TEST

START_TEST(malformed_stl) {
  ts_mesh *ref = import_file(MESHES "liver.obj", 0.01, NULL, NULL);
  buf b = {0};
  write_stl_binary(&b, ref, "binary");
  expect_err_has(b.p, b.n - 10, TS_MESH_STL, TS_EMESH,
                 "truncated binary STL: header announces 274 facets (13784 bytes), file has "
                 "13774 bytes");
  expect_err_has(b.p, b.n - 10, TS_MESH_AUTO, TS_EMESH, "truncated binary STL");
  expect_err_has(b.p, 50, TS_MESH_STL, TS_EMESH, "binary STL shorter than its 84-byte header");
  /* NaN in facet 3's second vertex */
  float nan = NAN;
  memcpy(b.p + 84 + 50 * 3 + 24, &nan, 4);
  expect_err_has(b.p, b.n, TS_MESH_STL, TS_EMESH,
                 "facet 3: coordinate is NaN (not a finite number)");
  free(b.p);
  ts_mesh_free(ref);
  expect_err("solid x\n  facet normal 0 0 1\n    outer loop\n      vertex 0 0 0\n"
             "      vertex 1 0 0\n      vertex 0 1 0\n      vertex 1 1 0\n",
             TS_MESH_STL, TS_EMESH,
             "line 7: facet has more than 3 vertices (STL facets are triangles)");
  expect_err("solid x\n  facet normal 0 0 1\n    outer loop\n      vertex 0 0 0\n",
             TS_MESH_STL, TS_EMESH, "line 5: unexpected end of file, expected 'vertex'");
  expect_err("solid x\nendsolid x\n", TS_MESH_STL, TS_EMESH, "STL has no facets");
  expect_err("", TS_MESH_STL, TS_EMESH, "empty file");
}
END_TEST

START_TEST(malformed_ply) {
  const char *h = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                  "property float z\nelement face 1\nproperty list uchar int vertex_indices\n"
                  "end_header\n";
  char s[1024];
  snprintf(s, sizeof s, "%s0 0 0\n1 0 0\n0 1 0\n3 0 1 3\n", h);
  expect_err(s, TS_MESH_PLY, TS_EMESH, "line 13: vertex index 3 out of range (3 vertices)");
  snprintf(s, sizeof s, "%s0 0 0\n1 nan 0\n0 1 0\n3 0 1 2\n", h);
  expect_err(s, TS_MESH_PLY, TS_EMESH, "line 11: coordinate is NaN (not a finite number)");
  snprintf(s, sizeof s, "%s0 0 0\n1 0 0\n0 1 0\n2 0 1\n", h);
  expect_err(s, TS_MESH_PLY, TS_EMESH, "line 13: face has 2 vertices (needs 3 to 256)");
  snprintf(s, sizeof s, "%s0 0 0\n1 0 0\n0 1 0\n", h);
  expect_err(s, TS_MESH_PLY, TS_EMESH, "line 13: file ends in element 'face' 0 (of 1)");
  snprintf(s, sizeof s, "%s0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n7\n", h);
  expect_err(s, TS_MESH_PLY, TS_EMESH, "line 14: data after the last element");
  expect_err("ply\nformat binary_big_endian 1.0\nend_header\n", TS_MESH_PLY, TS_EMESH,
             "line 2: binary big-endian PLY is not supported (use ASCII or "
             "binary_little_endian)");
  expect_err("ply\nformat ascii 1.0\nelement vertex 3\n", TS_MESH_PLY, TS_EMESH,
             "line 4: PLY header has no 'end_header'");
  expect_err("ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
             "property float z\nend_header\n0 0 0\n",
             TS_MESH_PLY, TS_EMESH, "PLY has no 'face' element (a point cloud is not a surface)");
  expect_err("ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
             "element face 0\nproperty list uchar int vertex_indices\nend_header\n",
             TS_MESH_PLY, TS_EMESH, "PLY vertex element has no scalar property 'z'");
  expect_err("ply\nformat ascii 1.0\nelement vertex 1\nproperty quaternion x\nend_header\n",
             TS_MESH_PLY, TS_EMESH, "line 4: unknown property type 'quaternion'");
  expect_err("solid\n", TS_MESH_PLY, TS_EMESH, "not a PLY file (the first line must be 'ply')");
  expect_err("", TS_MESH_PLY, TS_EMESH, "empty file");

  /* truncated binary: the face element cannot fit */
  ts_mesh *ref = import_file(MESHES "liver.obj", 0.01, NULL, NULL);
  buf b = {0};
  write_ply(&b, ref, 1, 0);
  expect_err_has(b.p, b.n - 100, TS_MESH_PLY, TS_EMESH, "truncated binary PLY");
  expect_err_has(b.p, b.n - 1, TS_MESH_AUTO, TS_EMESH, "truncated binary PLY");
  free(b.p);
  ts_mesh_free(ref);
}
END_TEST

START_TEST(detect_format) {
  ck_assert_int_eq(ts_mesh_format_from_name("a/b/Liver.OBJ"), TS_MESH_OBJ);
  ck_assert_int_eq(ts_mesh_format_from_name("stl"), TS_MESH_STL);
  ck_assert_int_eq(ts_mesh_format_from_name("x.ply"), TS_MESH_PLY);
  ck_assert_int_eq(ts_mesh_format_from_name("x.off"), TS_MESH_AUTO);
  ck_assert_int_eq(ts_mesh_detect_format("ply\nformat ascii 1.0\n", 20), TS_MESH_PLY);
  ck_assert_int_eq(ts_mesh_detect_format("solid x\nfacet", 13), TS_MESH_STL);
  ck_assert_int_eq(ts_mesh_detect_format("v 0 0 0\n", 8), TS_MESH_OBJ);
  const uint8_t junk[8] = {0x7f, 'E', 'L', 'F', 0, 1, 2, 3};
  ck_assert_int_eq(ts_mesh_detect_format(junk, sizeof junk), TS_MESH_AUTO);
  expect_err_has(junk, sizeof junk, TS_MESH_AUTO, TS_EMESH, "unrecognised mesh format");
  char err[256];
  ts_mesh *m = (ts_mesh *)1;
  ck_assert_int_eq(ts_mesh_read_file("/nonexistent/liver.obj", TS_MESH_AUTO, NULL, &m, NULL, err,
                                     sizeof err),
                   TS_EIO);
  ck_assert_ptr_null(m);
  ck_assert_str_eq(err, "/nonexistent/liver.obj: No such file or directory");
  /* a directory opens: it said "file of 9223372036854775807 bytes, over the limit" */
  ck_assert_int_eq(ts_mesh_read_file("/tmp", TS_MESH_AUTO, NULL, &m, NULL, err, sizeof err),
                   TS_EIO);
  ck_assert_ptr_null(m);
  ck_assert_str_eq(err, "/tmp: is a directory, not a mesh file");
  /* bad options */
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 0;
  ck_assert_int_eq(ts_mesh_read_obj("v 0 0 0\n", 8, &o, &m, NULL, err, sizeof err), TS_EINVAL);
}
END_TEST

/* ---- size limits ---- */

/* A mesh only a few weld tolerances across is refused, not welded into
 * another shape: a unit cube read at scale 8e-9 is 8 nm across against the
 * 10 nm tolerance, and before the check some corners merged and a smaller
 * closed surface came out (found by fuzz_config). At 1e-5 (10 um, the
 * smallest size accepted) it is the whole cube. */
START_TEST(tiny_mesh_refused) {
  static const char cube[] = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\n"
                             "v 1 1 1\nv 0 1 1\nf 1 3 2\nf 1 4 3\nf 5 6 7\nf 5 7 8\n"
                             "f 1 2 6\nf 1 6 5\nf 2 3 7\nf 2 7 6\nf 3 4 8\nf 3 8 7\n"
                             "f 4 1 5\nf 4 5 8\n";
  const double refused[] = {8.0125e-9, 1e-7, 9.99e-6};
  for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
    ts_mesh_import_opts o = ts_mesh_import_opts_default();
    o.scale = refused[k];
    ts_mesh *m = NULL;
    char err[512] = "";
    ck_assert_int_eq(ts_mesh_import(cube, strlen(cube), TS_MESH_OBJ, &o, &m, NULL, NULL, err,
                                     sizeof err),
                     TS_EMESH);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, "across") && strstr(err, "scale"), "%s", err);
  }
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 1e-5;
  ts_mesh *m = NULL;
  char err[512] = "";
  ck_assert_int_eq(
      ts_mesh_import(cube, strlen(cube), TS_MESH_OBJ, &o, &m, NULL, NULL, err, sizeof err), 0);
  ck_assert_uint_eq(m->n_verts, 8);
  ck_assert_uint_eq(m->n_tris, 12);
  ts_mesh_free(m);
  /* exact welding (tolerance 0) has nothing to merge: any size is read */
  o.weld_tol = 0;
  o.scale = 1e-7;
  ck_assert_int_eq(
      ts_mesh_import(cube, strlen(cube), TS_MESH_OBJ, &o, &m, NULL, NULL, err, sizeof err), 0);
  ck_assert_uint_eq(m->n_tris, 12);
  ts_mesh_free(m);
}
END_TEST

START_TEST(size_limits) {
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  ts_mesh *m = NULL;
  char err[256];
  const char *liver = MESHES "liver.obj";
  /* liver.obj: 8661 bytes, 181 vertex lines, 274 triangles */
  o.max_bytes = 8660;
  ck_assert_int_eq(ts_mesh_read_file(liver, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err),
                   TS_ETOOBIG);
  ck_assert_str_eq(err, MESHES "liver.obj: file of 8661 bytes, over the limit of 8660");
  o.max_bytes = 8661;
  ck_assert_int_eq(ts_mesh_read_file(liver, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err), 0);
  ts_mesh_free(m);
  ck_assert_int_eq(ts_mesh_read_obj("v 0 0 0\n", 8, &o, &m, NULL, err, sizeof err), TS_EMESH);
  o.max_bytes = 7;
  ck_assert_int_eq(ts_mesh_read_obj("v 0 0 0\n", 8, &o, &m, NULL, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "mesh file of 8 bytes, over the limit of 7");

  o = ts_mesh_import_opts_default();
  o.max_verts = 180;
  ck_assert_int_eq(ts_mesh_import_file(liver, TS_MESH_AUTO, &o, &m, NULL, NULL, err, sizeof err),
                   TS_ETOOBIG);
  ck_assert_str_eq(err, MESHES "liver.obj: OBJ has 181 vertices, over the limit of 180");
  o.max_verts = 181;
  ck_assert_int_eq(ts_mesh_import_file(liver, TS_MESH_AUTO, &o, &m, NULL, NULL, err, sizeof err),
                   0);
  ts_mesh_free(m);
  o.max_tris = 273;
  ck_assert_int_eq(ts_mesh_import_file(liver, TS_MESH_AUTO, &o, &m, NULL, NULL, err, sizeof err),
                   TS_ETOOBIG);
  ck_assert_ptr_null(m);

  /* STL: facets against max_tris, welded vertices against max_verts */
  ts_mesh *ref = import_file(liver, 0.01, NULL, NULL);
  buf b = {0};
  write_stl_binary(&b, ref, "binary");
  o = ts_mesh_import_opts_default();
  o.max_tris = 273;
  ck_assert_int_eq(ts_mesh_read_stl(b.p, b.n, &o, &m, NULL, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "STL has 274 facets, over the limit of 273 triangles");
  o = ts_mesh_import_opts_default();
  o.max_verts = 138;
  ck_assert_int_eq(ts_mesh_read_stl(b.p, b.n, &o, &m, NULL, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "STL has 139 distinct vertices, over the limit of 138");
  o.max_verts = 139;
  ck_assert_int_eq(ts_mesh_read_stl(b.p, b.n, &o, &m, NULL, err, sizeof err), 0);
  ts_mesh_free(m);
  /* PLY: header counts are checked before any data is read */
  b.n = 0;
  write_ply(&b, ref, 1, 0);
  o = ts_mesh_import_opts_default();
  o.max_verts = 100;
  ck_assert_int_eq(ts_mesh_read_ply(b.p, b.n, &o, &m, NULL, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "PLY has 139 vertices, over the limit of 100");
  o = ts_mesh_import_opts_default();
  o.max_tris = 100;
  ck_assert_int_eq(ts_mesh_read_ply(b.p, b.n, &o, &m, NULL, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "PLY has 274 faces, over the limit of 100 triangles");
  /* a polygon's triangles count against max_tris */
  const char *quad = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3 4\n";
  o = ts_mesh_import_opts_default();
  o.max_tris = 1;
  ck_assert_int_eq(
      ts_mesh_read_obj(quad, strlen(quad), &o, &m, NULL, err, sizeof err),
      TS_ETOOBIG);
  ck_assert_str_eq(err, "line 5: more than 1 triangles (the limit)");
  /* and the check applies the limits to any mesh */
  o = ts_mesh_import_opts_default();
  o.max_tris = 273;
  ck_assert_int_eq(ts_mesh_check(ref, &o, NULL, err, sizeof err), TS_ETOOBIG);
  ck_assert_str_eq(err, "mesh has 274 triangles, over the limit of 273");
  free(b.p);
  ts_mesh_free(ref);
}
END_TEST

/* on_stage's record: the stages told, and the one to stop at (0 none). */
typedef struct stage_log {
  int seen[8], n, stop_at;
} stage_log;

static int on_stage(void *ud, int stage) {
  stage_log *l = ud;
  if (l->n < 8) l->seen[l->n++] = stage;
  return stage == l->stop_at ? TS_ESHUTDOWN : 0;
}

START_TEST(build_stops_at_a_stage) {
  size_t len = 0;
  char *obj = ts_grid_obj(12, &len);
  ck_assert_ptr_nonnull(obj);
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t nl = ts_material_default_layers(layers);
  const int stages[4] = {TS_MESH_STAGE_READING, TS_MESH_STAGE_LAYERS, TS_MESH_STAGE_SPRINGS,
                         TS_MESH_STAGE_BOUNDS};
  for (int stop = 0; stop <= 4; stop++) { /* 0: none, then each stage */
    stage_log l = {.n = 0, .stop_at = stop ? stages[stop - 1] : 0};
    ts_mesh_import_opts o = ts_mesh_import_opts_default();
    o.on_stage = on_stage;
    o.stage_ud = &l;
    ts_mesh_tissue mt;
    char err[300] = "";
    int rc = ts_mesh_tissue_build((const uint8_t *)obj, len, TS_MESH_OBJ, &o, layers, nl, &mt,
                                  err, sizeof err);
    ck_assert_int_eq(l.n, stop ? stop : 4);
    for (int k = 0; k < l.n; k++) ck_assert_int_eq(l.seen[k], stages[k]);
    if (!stop) {
      ck_assert_msg(rc == 0, "%s", err);
      ck_assert_ptr_nonnull(mt.t);
      ck_assert_uint_eq(mt.n_verts, 144);
      /* prepared apart from the springs, as ts_tissue_build prepares: the
       * same stable step, bit for bit */
      ts_tissue *t2 = NULL;
      ts_patch_def pd = ts_default_patch_def();
      ck_assert_int_eq(ts_tissue_build(mt.e, layers, mt.anchors, pd.gravity, &t2), 0);
      t2->drag = mt.t->drag;
      ck_assert_uint_eq(t2->n_springs, mt.t->n_springs);
      ck_assert_double_gt(mt.t->stable_dt, 0);
      ck_assert_double_eq(ts_massspring_stable_dt(t2), mt.t->stable_dt);
      ts_tissue_destroy(t2);
      ts_mesh_tissue_free(&mt);
    } else {
      ck_assert_int_eq(rc, TS_ESHUTDOWN);
      ck_assert_msg(strstr(err, "stopped"), "'%s'", err);
      ck_assert_ptr_null(mt.t);
      ck_assert_ptr_null(mt.e);
      ck_assert_ptr_null(mt.anchors);
    }
  }
  free(obj);
}
END_TEST

static Suite *mesh_io_suite(void) {
  Suite *s = suite_create("mesh_io");
  TCase *tc = tcase_create("import");
  tcase_add_loop_test(tc, shared_meshes_load, 0, (int)(sizeof SHARED / sizeof SHARED[0]));
  tcase_add_test(tc, shared_meshes_listed);
  tcase_add_test(tc, scale_option);
  tcase_add_test(tc, obj_round_trip);
  tcase_add_test(tc, formats_give_same_mesh);
  tcase_add_test(tc, weld_tolerance);
  tcase_add_test(tc, obj_forms_and_polygons);
  tcase_add_test(tc, ply_polygons_and_types);
  tcase_add_test(tc, topology_closed_forms);
  tcase_add_test(tc, repair_drops_what_is_safe);
  tcase_add_test(tc, malformed_obj);
  tcase_add_test(tc, malformed_topology);
  tcase_add_test(tc, malformed_stl);
  tcase_add_test(tc, malformed_ply);
  tcase_add_test(tc, detect_format);
  tcase_add_test(tc, size_limits);
  tcase_add_test(tc, tiny_mesh_refused);
  tcase_add_test(tc, build_stops_at_a_stage);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(mesh_io_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
