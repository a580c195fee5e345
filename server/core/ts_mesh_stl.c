/*
 * ts_mesh_stl.c: STL in (ts_mesh_io.h), after the StereoLithography
 * Interface Specification (3D Systems, 1989).
 *
 * Binary: an 80-byte header, a little-endian uint32 facet count, then per
 * facet 12 float32 (normal, three vertices) and a 2-byte attribute, 50 bytes.
 * ASCII: `solid name`, then per facet `facet normal nx ny nz`, `outer loop`,
 * three `vertex x y z`, `endloop`, `endfacet`, and `endsolid name` (several
 * solids may follow one another). Tokens may be spread over lines freely.
 *
 * Which one: a file whose size is exactly 84 + 50 x its count is binary;
 * otherwise one that starts with "solid" and whose first bytes are text is
 * ASCII; anything else is binary and gets the size error (binary files from
 * some exporters also start with "solid", so the word alone decides nothing).
 * Normals are ignored (the winding defines the orientation). STL repeats every
 * shared vertex, so the vertices are welded (ts_mesh_weld) with the weld
 * tolerance; the vertex limit applies after welding.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_mesh_read.h"

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double lef32(const uint8_t *p) {
  uint32_t u = le32(p);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Starts (after blanks) with the word "solid", and the first 512 bytes hold
 * no control byte other than whitespace. */
static int looks_ascii(const uint8_t *buf, size_t len) {
  size_t i = 0;
  while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n')) i++;
  if (len - i < 5 || memcmp(buf + i, "solid", 5) != 0) return 0;
  if (len - i > 5 && buf[i + 5] > ' ') return 0;
  size_t n = len < 512 ? len : 512;
  for (size_t k = 0; k < n; k++) {
    uint8_t c = buf[k];
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') || c == 0x7f)
      return 0;
  }
  return 1;
}

static int read_binary(ts__mesh_builder *b, const uint8_t *buf, size_t len, uint32_t *faces,
                       char *err, size_t cap) {
  if (len < 84) {
    ts__mesh_err(err, cap, "binary STL shorter than its 84-byte header (%zu bytes)", len);
    return TS_EMESH;
  }
  uint32_t n = le32(buf + 80);
  uint64_t need = 84 + 50 * (uint64_t)n;
  if (len < need) {
    ts__mesh_err(err, cap,
                 "truncated binary STL: header announces %u facets (%llu bytes), file has %zu "
                 "bytes",
                 n, (unsigned long long)need, len);
    return TS_EMESH;
  }
  if (len > need) {
    ts__mesh_err(err, cap, "binary STL has %llu bytes after its %u facets",
                 (unsigned long long)(len - need), n);
    return TS_EMESH;
  }
  if (n == 0) {
    ts__mesh_err(err, cap, "STL has no facets");
    return TS_EMESH;
  }
  if (n > b->o->max_tris) {
    ts__mesh_err(err, cap, "STL has %u facets, over the limit of %u triangles", n,
                 b->o->max_tris);
    return TS_ETOOBIG;
  }
  b->tri_unit = "facet";
  for (uint32_t f = 0; f < n; f++) {
    const uint8_t *p = buf + 84 + 50 * (size_t)f + 12;
    uint32_t c[3];
    for (int k = 0; k < 3; k++) {
      double xyz[3] = {lef32(p + 12 * k), lef32(p + 12 * k + 4), lef32(p + 12 * k + 8)};
      c[k] = b->nv;
      int rc = ts__mb_vertex(b, xyz, "facet", f);
      if (rc) return rc;
    }
    int rc = ts__mb_polygon(b, c, 3, f);
    if (rc) return rc;
  }
  *faces = n;
  return 0;
}

/* Next token, which must be `word`. */
static int expect(ts__text *t, const char *word, char *err, size_t cap) {
  const char *tok;
  size_t n;
  char show[48];
  if (!ts__text_token_any(t, &tok, &n)) {
    ts__mesh_err(err, cap, "line %u: unexpected end of file, expected '%s'", t->line, word);
    return TS_EMESH;
  }
  if (!ts__tok_is(tok, n, word)) {
    ts__tok_show(tok, n, show, sizeof show);
    ts__mesh_err(err, cap, "line %u: expected '%s', found '%s'", t->line, word, show);
    return TS_EMESH;
  }
  return 0;
}

static int numbers(ts__text *t, double *out, int k, char *err, size_t cap) {
  const char *tok;
  size_t n;
  char show[48];
  for (int i = 0; i < k; i++) {
    if (!ts__text_token_any(t, &tok, &n)) {
      ts__mesh_err(err, cap, "line %u: unexpected end of file, expected a number", t->line);
      return TS_EMESH;
    }
    if (ts__parse_double(tok, n, &out[i])) {
      ts__tok_show(tok, n, show, sizeof show);
      ts__mesh_err(err, cap, "line %u: '%s' is not a number", t->line, show);
      return TS_EMESH;
    }
  }
  return 0;
}

static int read_ascii(ts__mesh_builder *b, const uint8_t *buf, size_t len, uint32_t *faces,
                      char *err, size_t cap) {
  ts__text t;
  ts__text_init(&t, buf, len);
  const char *tok;
  size_t n;
  char show[48];
  int rc = expect(&t, "solid", err, cap);
  if (rc) return rc;
  ts__text_next_line(&t); /* the solid's name */
  b->tri_unit = "line";
  uint32_t nf = 0;
  for (;;) {
    if (!ts__text_token_any(&t, &tok, &n)) {
      ts__mesh_err(err, cap, "line %u: unexpected end of file, expected 'endsolid'", t.line);
      return TS_EMESH;
    }
    if (ts__tok_is(tok, n, "endsolid")) {
      ts__text_next_line(&t);
      if (!ts__text_token_any(&t, &tok, &n)) break;
      if (!ts__tok_is(tok, n, "solid")) {
        ts__tok_show(tok, n, show, sizeof show);
        ts__mesh_err(err, cap, "line %u: expected 'solid' or the end of the file, found '%s'",
                     t.line, show);
        return TS_EMESH;
      }
      ts__text_next_line(&t);
      continue;
    }
    if (!ts__tok_is(tok, n, "facet")) {
      ts__tok_show(tok, n, show, sizeof show);
      ts__mesh_err(err, cap, "line %u: expected 'facet' or 'endsolid', found '%s'", t.line, show);
      return TS_EMESH;
    }
    uint32_t where = t.line;
    double nrm[3], xyz[3];
    if ((rc = expect(&t, "normal", err, cap)) || (rc = numbers(&t, nrm, 3, err, cap)) ||
        (rc = expect(&t, "outer", err, cap)) || (rc = expect(&t, "loop", err, cap)))
      return rc;
    uint32_t c[3];
    for (int k = 0; k < 3; k++) {
      if ((rc = expect(&t, "vertex", err, cap)) || (rc = numbers(&t, xyz, 3, err, cap)))
        return rc;
      c[k] = b->nv;
      if ((rc = ts__mb_vertex(b, xyz, "line", t.line))) return rc;
    }
    if (!ts__text_token_any(&t, &tok, &n)) {
      ts__mesh_err(err, cap, "line %u: unexpected end of file, expected 'endloop'", t.line);
      return TS_EMESH;
    }
    if (ts__tok_is(tok, n, "vertex")) {
      ts__mesh_err(err, cap, "line %u: facet has more than 3 vertices (STL facets are triangles)",
                   t.line);
      return TS_EMESH;
    }
    if (!ts__tok_is(tok, n, "endloop")) {
      ts__tok_show(tok, n, show, sizeof show);
      ts__mesh_err(err, cap, "line %u: expected 'endloop', found '%s'", t.line, show);
      return TS_EMESH;
    }
    if ((rc = expect(&t, "endfacet", err, cap))) return rc;
    if ((rc = ts__mb_polygon(b, c, 3, where))) return rc;
    nf++;
  }
  if (nf == 0) {
    ts__mesh_err(err, cap, "STL has no facets");
    return TS_EMESH;
  }
  *faces = nf;
  return 0;
}

int ts__read_stl(const uint8_t *buf, size_t len, const ts_mesh_import_opts *o, ts_mesh **out,
                 ts__mesh_prov *prov, ts_mesh_read_info *info, char *err, size_t cap) {
  if (len == 0) {
    ts__mesh_err(err, cap, "empty file");
    return TS_EMESH;
  }
  ts__mesh_builder b;
  ts__mb_init(&b, o, err, cap);
  uint64_t vl = 3 * (uint64_t)o->max_tris;
  b.vert_limit = vl < UINT32_MAX ? (uint32_t)vl : UINT32_MAX;
  int binary = !(len >= 84 && 84 + 50 * (uint64_t)le32(buf + 80) == len) && looks_ascii(buf, len)
                   ? 0
                   : 1;
  uint32_t faces = 0;
  int rc = binary ? read_binary(&b, buf, len, &faces, err, cap)
                  : read_ascii(&b, buf, len, &faces, err, cap);
  ts_mesh *m = NULL;
  ts__mesh_prov pv = {0};
  if (!rc) rc = ts__mb_finish(&b, 0, &m, &pv, info);
  ts__mb_free(&b);
  if (rc) return rc;
  /* welded STL vertices have no number in the file: messages name positions */
  free(pv.vert_where);
  pv.vert_where = NULL;
  ts__mesh_prov pw = pv;
  uint32_t merged = 0;
  rc = ts__mesh_weld(m, o->weld_tol > 0 ? o->weld_tol : 0, &pw, &merged);
  if (!rc && m->n_verts > o->max_verts) {
    ts__mesh_err(err, cap, "STL has %u distinct vertices, over the limit of %u", m->n_verts,
                 o->max_verts);
    rc = TS_ETOOBIG;
  } else if (rc) {
    ts__mesh_err(err, cap, "STL: welding failed (%s)", ts_strerror(rc));
  }
  if (rc) {
    ts__mesh_prov_free(&pw);
    ts_mesh_free(m);
    return rc;
  }
  if (info) {
    info->format = TS_MESH_STL;
    info->binary = binary;
    info->file_faces = faces;
    info->welded = merged;
  }
  if (prov)
    *prov = pw;
  else
    ts__mesh_prov_free(&pw);
  *out = m;
  return 0;
}
