/*
 * fuzz_mesh.h: the body shared by the mesh fuzz targets (fuzz_obj.c,
 * fuzz_stl.c, fuzz_ply.c) over server/core/ts_mesh_io.h and ts_mesh_check.h.
 * Header-only because each target is built from one source file plus
 * replay_main.c; and the fuzz targets link only ts_proto
 * (tests/fuzz/CMakeLists.txt), so the mesh sources (C11 and libm only) are
 * compiled into each target directly.
 *
 * Besides "no crash, no out-of-bounds access, no leak" (ASan + UBSan), every
 * input checks invariants that would expose wrong results:
 *   - every failure is one of the documented codes, with a message;
 *   - a mesh a reader accepts has triangles, indices in range, finite
 *     coordinates within the limit, and no unused vertex;
 *   - it round-trips through the OBJ writer bit for bit;
 *   - validation agrees with itself: an accepted mesh has 2E = 3F + B and an
 *     integer genus >= 0 (chi = 2c - 2g - b for orientable surfaces);
 *   - after repair no degenerate, duplicate or unused element is left;
 *   - whatever the import pipeline accepts passes validation, with a
 *     non-negative volume when closed.
 */
#ifndef FUZZ_MESH_H
#define FUZZ_MESH_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/core/ts_mesh.c"
#include "../../server/core/ts_mesh_check.c"
#include "../../server/core/ts_mesh_earclip.c"
#include "../../server/core/ts_mesh_io.c"
#include "../../server/core/ts_mesh_obj.c"
#include "../../server/core/ts_mesh_ply.c"
#include "../../server/core/ts_mesh_read.c"
#include "../../server/core/ts_mesh_repair.c"
#include "../../server/core/ts_mesh_stl.c"

static ts_mesh_import_opts fuzz_mesh_opts(void) {
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.max_verts = 4096;
  o.max_tris = 8192;
  o.max_bytes = 1 << 20;
  return o;
}

static void fuzz_mesh_rc(int rc, const char *err) {
  if (rc == 0) return;
  if (rc != TS_EMESH && rc != TS_ETOOBIG && rc != TS_ENOMEM) abort();
  if (rc != TS_ENOMEM && err[0] == 0) abort(); /* a refusal always explains itself */
}

static void fuzz_mesh_valid_read(const ts_mesh *m, const ts_mesh_import_opts *o) {
  if (m->n_tris == 0 || m->n_verts > o->max_verts || m->n_tris > o->max_tris) abort();
  uint8_t *used = calloc(m->n_verts, 1);
  if (!used) abort();
  for (uint32_t k = 0; k < m->n_tris; k++)
    for (int c = 0; c < 3; c++) {
      if (m->t[k][c] >= m->n_verts) abort();
      used[m->t[k][c]] = 1;
    }
  for (uint32_t i = 0; i < m->n_verts; i++) {
    if (!used[i]) abort();
    for (int c = 0; c < 3; c++)
      if (!isfinite(m->v[i][c]) || fabs(m->v[i][c]) > o->max_abs_coord) abort();
  }
  free(used);
}

static void fuzz_mesh_round_trip(const ts_mesh *m, const ts_mesh_import_opts *o) {
  char *s = NULL, err[256];
  size_t n = 0;
  if (ts_mesh_write_obj(m, &s, &n) != 0) abort();
  ts_mesh *back = NULL;
  if (ts_mesh_read_obj(s, n, o, &back, NULL, err, sizeof err) != 0) abort();
  if (back->n_verts != m->n_verts || back->n_tris != m->n_tris ||
      memcmp(back->v, m->v, sizeof *m->v * m->n_verts) ||
      memcmp(back->t, m->t, sizeof *m->t * m->n_tris))
    abort();
  ts_mesh_free(back);
  free(s);
}

static void fuzz_mesh_report_sane(int rc, const ts_mesh_report *r) {
  if (rc != 0) return;
  if (2 * (uint64_t)r->n_edges != 3 * (uint64_t)r->n_tris + r->n_boundary_edges) abort();
  if (r->n_used_verts != r->n_verts || !r->manifold || !r->oriented || r->genus < 0) abort();
  if (r->closed != (r->n_boundary_edges == 0)) abort();
}

static int fuzz_mesh(const uint8_t *data, size_t size, int format) {
  ts_mesh_import_opts o = fuzz_mesh_opts();
  char err[512];
  ts_mesh *m = NULL;
  ts_mesh_read_info info;
  err[0] = 0;
  int rc = ts_mesh_read(data, size, format, &o, &m, &info, err, sizeof err);
  fuzz_mesh_rc(rc, err);
  if (rc == 0) {
    fuzz_mesh_valid_read(m, &o);
    fuzz_mesh_round_trip(m, &o);
    ts_mesh_report r;
    int crc = ts_mesh_check(m, &o, &r, err, sizeof err);
    fuzz_mesh_rc(crc, err);
    fuzz_mesh_report_sane(crc, &r);
    ts_mesh_repair_stats st;
    int rrc = ts_mesh_repair(m, &o, &st, err, sizeof err);
    if (rrc != 0) abort(); /* readers only give finite coordinates and valid indices */
    crc = ts_mesh_check(m, &o, &r, err, sizeof err);
    if (r.n_degenerate || r.n_duplicate || r.n_unused || r.n_bad_index) abort();
    fuzz_mesh_report_sane(crc, &r);
    ts_mesh_free(m);
  }
  /* the whole pipeline, with the format detected from the content */
  m = NULL;
  err[0] = 0;
  ts_mesh_report r;
  rc = ts_mesh_import(data, size, TS_MESH_AUTO, &o, &m, &r, &info, err, sizeof err);
  fuzz_mesh_rc(rc, err);
  if (rc == 0) {
    fuzz_mesh_valid_read(m, &o);
    ts_mesh_report r2;
    if (ts_mesh_check(m, &o, &r2, err, sizeof err) != 0) abort();
    fuzz_mesh_report_sane(0, &r2);
    if (r2.volume_valid && !(r2.volume >= 0)) abort();
    ts_mesh_free(m);
  }
  return 0;
}

#endif
