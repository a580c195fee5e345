/*
 * ts_mesh_obj.c: Wavefront OBJ in and out (ts_mesh_io.h). Format: the
 * "Object Files (.obj)" appendix B1 of the Advanced Visualizer manual
 * (Wavefront Technologies); the subset used for surface meshes:
 *
 *   v x y z [w]        vertex (w and any vertex colour ignored)
 *   vt ... / vn ...    texture coordinate / normal (counted, not kept)
 *   f a a/t a//n a/t/n polygon of 3 or more corners; indices count from 1,
 *                      negative ones back from the last vertex defined so far
 *   #, o, g, s, usemtl, mtllib, l, p, vp, ...: ignored
 *
 * Two passes: the first counts v/vt/vn lines so that positive indices
 * (which may point forward) are checked against the totals with the face's
 * line in the message, the second builds. Polygons are triangulated by ear
 * clipping (ts_mesh_earclip.c) and vertices no face uses are dropped.
 *
 * The writer prints %.17g, which reads back to the same double.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_mesh_read.h"

typedef struct obj_counts {
  uint64_t v, vt, vn;
} obj_counts;

static void count_pass(const uint8_t *buf, size_t len, obj_counts *c) {
  ts__text t;
  ts__text_init(&t, buf, len);
  memset(c, 0, sizeof *c);
  do {
    const char *tok;
    size_t n;
    if (!ts__text_token(&t, &tok, &n)) continue;
    if (ts__tok_is(tok, n, "v"))
      c->v++;
    else if (ts__tok_is(tok, n, "vt"))
      c->vt++;
    else if (ts__tok_is(tok, n, "vn"))
      c->vn++;
  } while (ts__text_next_line(&t));
}

/* Resolves one OBJ index (1-based, or negative relative to `seen` so far)
 * against `total`. what: "face index"; noun: "vertices". */
static int resolve(int64_t raw, uint64_t seen, uint64_t total, const char *what,
                   const char *noun, uint32_t line, uint32_t *out, char *err, size_t cap) {
  if (raw == 0) {
    ts__mesh_err(err, cap, "line %u: %s 0 is invalid (OBJ counts from 1)", line, what);
    return TS_EMESH;
  }
  if (raw > 0) {
    if ((uint64_t)raw > total) {
      ts__mesh_err(err, cap, "line %u: %s %lld out of range (%llu %s)", line, what,
                   (long long)raw, (unsigned long long)total, noun);
      return TS_EMESH;
    }
    *out = (uint32_t)(raw - 1);
    return 0;
  }
  if ((uint64_t)(-raw) > seen) {
    ts__mesh_err(err, cap, "line %u: %s %lld out of range (%llu %s before this line)", line, what,
                 (long long)raw, (unsigned long long)seen, noun);
    return TS_EMESH;
  }
  *out = (uint32_t)(seen - (uint64_t)(-raw));
  return 0;
}

/* One face corner "a", "a/t", "a//n" or "a/t/n": the vertex index into *vi
 * (texture and normal indices are checked only). */
static int parse_corner(const char *tok, size_t len, const obj_counts *seen,
                        const obj_counts *total, uint32_t line, uint32_t *vi, char *err,
                        size_t cap) {
  const char *part[3] = {tok, NULL, NULL};
  size_t plen[3] = {0, 0, 0};
  int np = 1;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || tok[i] == '/') {
      if (np > 3) break;
      part[np - 1] = tok + start;
      plen[np - 1] = i - start;
      if (i < len) np++;
      start = i + 1;
    }
  }
  char show[48];
  int64_t raw;
  uint32_t dummy;
  if (np > 3 || plen[0] == 0 || (np == 2 && plen[1] == 0) || (np == 3 && plen[2] == 0) ||
      ts__parse_int(part[0], plen[0], &raw)) {
    ts__tok_show(tok, len, show, sizeof show);
    ts__mesh_err(err, cap, "line %u: malformed face vertex '%s'", line, show);
    return TS_EMESH;
  }
  int rc = resolve(raw, seen->v, total->v, "face index", "vertices", line, vi, err, cap);
  if (rc) return rc;
  for (int k = 1; k < np; k++) {
    if (plen[k] == 0) continue; /* a//n */
    if (ts__parse_int(part[k], plen[k], &raw)) {
      ts__tok_show(tok, len, show, sizeof show);
      ts__mesh_err(err, cap, "line %u: malformed face vertex '%s'", line, show);
      return TS_EMESH;
    }
    rc = k == 1 ? resolve(raw, seen->vt, total->vt, "texture index", "texture coordinates", line,
                          &dummy, err, cap)
                : resolve(raw, seen->vn, total->vn, "normal index", "normals", line, &dummy, err,
                          cap);
    if (rc) return rc;
  }
  return 0;
}

int ts__read_obj(const uint8_t *buf, size_t len, const ts_mesh_import_opts *o, ts_mesh **out,
                 ts__mesh_prov *prov, ts_mesh_read_info *info, char *err, size_t cap) {
  obj_counts total, seen = {0, 0, 0};
  count_pass(buf, len, &total);
  if (total.v > o->max_verts) {
    ts__mesh_err(err, cap, "OBJ has %llu vertices, over the limit of %u",
                 (unsigned long long)total.v, o->max_verts);
    return TS_ETOOBIG;
  }
  ts__mesh_builder b;
  ts__mb_init(&b, o, err, cap);
  b.vert_base = 1;
  b.tri_unit = "line";
  ts__text t;
  ts__text_init(&t, buf, len);
  uint32_t faces = 0, poly[TS_MESH_MAX_POLYGON];
  int rc = 0;
  char show[48];
  do {
    const char *tok;
    size_t n;
    if (!ts__text_token(&t, &tok, &n)) continue;
    if (ts__tok_is(tok, n, "v")) {
      double xyz[3];
      for (int i = 0; i < 3; i++) {
        if (!ts__text_token(&t, &tok, &n)) {
          ts__mesh_err(err, cap, "line %u: vertex has %d coordinates (needs 3)", t.line, i);
          rc = TS_EMESH;
          goto done;
        }
        if (ts__parse_double(tok, n, &xyz[i])) {
          ts__tok_show(tok, n, show, sizeof show);
          ts__mesh_err(err, cap, "line %u: '%s' is not a number", t.line, show);
          rc = TS_EMESH;
          goto done;
        }
      }
      if ((rc = ts__mb_vertex(&b, xyz, "line", t.line))) goto done;
      seen.v++;
    } else if (ts__tok_is(tok, n, "vt")) {
      seen.vt++;
    } else if (ts__tok_is(tok, n, "vn")) {
      seen.vn++;
    } else if (ts__tok_is(tok, n, "f") || ts__tok_is(tok, n, "fo")) {
      uint32_t nc = 0;
      while (ts__text_token(&t, &tok, &n)) {
        if (nc == TS_MESH_MAX_POLYGON) {
          ts__mesh_err(err, cap, "line %u: face has more than %d vertices", t.line,
                       TS_MESH_MAX_POLYGON);
          rc = TS_EMESH;
          goto done;
        }
        if ((rc = parse_corner(tok, n, &seen, &total, t.line, &poly[nc], err, cap))) goto done;
        nc++;
      }
      if (nc < 3) {
        ts__mesh_err(err, cap, "line %u: face has %u vertices (needs at least 3)", t.line, nc);
        rc = TS_EMESH;
        goto done;
      }
      if ((rc = ts__mb_polygon(&b, poly, nc, t.line))) goto done;
      faces++;
    }
  } while (ts__text_next_line(&t));
  if (faces == 0) {
    ts__mesh_err(err, cap, "%s", len == 0 ? "empty file" : "OBJ has no faces ('f' lines)");
    rc = TS_EMESH;
    goto done;
  }
  rc = ts__mb_finish(&b, 1, out, prov, info);
  if (!rc && info) {
    info->format = TS_MESH_OBJ;
    info->binary = 0;
    info->file_faces = faces;
  }
done:
  ts__mb_free(&b);
  return rc;
}

/* ---- writer ---- */

int ts_mesh_write_obj(const ts_mesh *m, char **out, size_t *len) {
  if (!m || !out || !len) return TS_EINVAL;
  *out = NULL;
  *len = 0;
  for (uint32_t i = 0; i < m->n_verts; i++)
    for (int k = 0; k < 3; k++)
      if (!isfinite(m->v[i][k])) return TS_EINVAL;
  for (uint32_t i = 0; i < m->n_tris; i++)
    for (int k = 0; k < 3; k++)
      if (m->t[i][k] >= m->n_verts) return TS_EINVAL;
  /* "v " + 3 x (24 chars of %.17g + space) + newline; "f " + 3 x (10 + 1) */
  const uint64_t vline = 2 + 3 * 26 + 1, fline = 2 + 3 * 11 + 1;
  uint64_t bound = 160 + vline * m->n_verts + fline * m->n_tris;
  if (bound > SIZE_MAX / 2) return TS_ETOOBIG;
  char *s = malloc((size_t)bound);
  if (!s) return TS_ENOMEM;
  size_t n = 0;
  n += (size_t)snprintf(s + n, (size_t)bound - n,
                        "# tissued mesh: %u vertices, %u triangles, metres\n", m->n_verts,
                        m->n_tris);
  for (uint32_t i = 0; i < m->n_verts; i++)
    n += (size_t)snprintf(s + n, (size_t)bound - n, "v %.17g %.17g %.17g\n", m->v[i][0],
                          m->v[i][1], m->v[i][2]);
  for (uint32_t i = 0; i < m->n_tris; i++)
    n += (size_t)snprintf(s + n, (size_t)bound - n, "f %u %u %u\n", m->t[i][0] + 1,
                          m->t[i][1] + 1, m->t[i][2] + 1);
  *out = s;
  *len = n;
  return 0;
}
