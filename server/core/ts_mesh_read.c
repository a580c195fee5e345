/*
 * ts_mesh_read.c: the pieces every mesh reader shares (ts_mesh_read.h):
 * error messages, provenance, a text cursor with line numbers over a buffer
 * that is not NUL-terminated, number parsing, and the polygon-soup builder
 * that enforces the size limits of ts_mesh_import_opts before it allocates.
 *
 * Numbers go through strtod on a bounded, NUL-terminated copy of the token,
 * so the syntax is C's (the daemon runs in the "C" locale). Memory grows by
 * doubling, never past what the limits allow, so a hostile file can make the
 * builder allocate at most a small multiple of the limits (and of its own
 * size, since each vertex and corner costs input bytes).
 */
#include "ts_mesh_read.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

void ts__mesh_err(char *err, size_t cap, const char *fmt, ...) {
  if (!err || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

int ts__mesh_opts_ok(const ts_mesh_import_opts *o, char *err, size_t cap) {
  if (!(o->scale > 0) || !isfinite(o->scale)) {
    ts__mesh_err(err, cap, "import options: scale must be a positive number");
    return TS_EINVAL;
  }
  if (isnan(o->weld_tol) || !isfinite(o->degenerate_rel) || o->degenerate_rel < 0 ||
      !(o->max_abs_coord > 0)) {
    ts__mesh_err(err, cap, "import options: bad weld tolerance, degenerate tolerance or "
                           "coordinate limit");
    return TS_EINVAL;
  }
  if (!o->max_verts || !o->max_tris || !o->max_bytes) {
    ts__mesh_err(err, cap, "import options: size limits must be positive");
    return TS_EINVAL;
  }
  return 0;
}

/* ---- provenance ---- */

void ts__mesh_prov_free(ts__mesh_prov *p) {
  if (!p) return;
  free(p->tri_where);
  free(p->vert_where);
  p->tri_where = p->vert_where = NULL;
}

void ts__mesh_tri_name(const ts__mesh_prov *p, uint32_t k, char *buf, size_t cap) {
  if (p && p->tri_where)
    snprintf(buf, cap, "%s %u", p->tri_unit, p->tri_where[k]);
  else
    snprintf(buf, cap, "triangle %u", k);
}

void ts__mesh_vert_name(const ts_mesh *m, const ts__mesh_prov *p, uint32_t v, char *buf,
                        size_t cap) {
  if (p && !p->vert_where && v < m->n_verts)
    snprintf(buf, cap, "(%.9g, %.9g, %.9g)", m->v[v][0], m->v[v][1], m->v[v][2]);
  else
    snprintf(buf, cap, "%u", p && p->vert_where ? p->vert_where[v] : v);
}

/* ---- text cursor ---- */

static int is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

void ts__text_init(ts__text *t, const void *buf, size_t len) {
  t->p = buf;
  t->end = t->p + len;
  t->line = 1;
}

int ts__text_token(ts__text *t, const char **tok, size_t *len) {
  while (t->p < t->end && is_blank(*t->p)) t->p++;
  if (t->p >= t->end || *t->p == '\n') return 0;
  const char *s = t->p;
  while (t->p < t->end && !is_blank(*t->p) && *t->p != '\n') t->p++;
  *tok = s;
  *len = (size_t)(t->p - s);
  return 1;
}

int ts__text_token_any(ts__text *t, const char **tok, size_t *len) {
  for (;;) {
    if (ts__text_token(t, tok, len)) return 1;
    if (t->p >= t->end) return 0;
    t->p++; /* the newline */
    t->line++;
  }
}

int ts__text_next_line(ts__text *t) {
  const char *nl = t->p < t->end ? memchr(t->p, '\n', (size_t)(t->end - t->p)) : NULL;
  if (!nl) {
    t->p = t->end;
    return 0;
  }
  t->p = nl + 1;
  t->line++;
  return 1;
}

int ts__tok_is(const char *tok, size_t len, const char *word) {
  size_t n = strlen(word);
  return n == len && memcmp(tok, word, n) == 0;
}

int ts__parse_double(const char *tok, size_t len, double *out) {
  char buf[128];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, tok, len);
  buf[len] = 0;
  char *end = NULL;
  double d = strtod(buf, &end);
  if (end != buf + len) return -1;
  *out = d;
  return 0;
}

int ts__parse_int(const char *tok, size_t len, int64_t *out) {
  size_t i = 0;
  int neg = 0;
  if (i < len && (tok[i] == '+' || tok[i] == '-')) neg = tok[i++] == '-';
  if (i == len) return -1;
  int64_t v = 0;
  for (; i < len; i++) {
    if (tok[i] < '0' || tok[i] > '9') return -1;
    if (v > ((int64_t)1 << 62) / 10) return -1;
    v = v * 10 + (tok[i] - '0');
  }
  *out = neg ? -v : v;
  return 0;
}

void ts__tok_show(const char *tok, size_t len, char *buf, size_t cap) {
  if (!cap) return;
  size_t n = 0, max = cap - 1;
  int cut = len > max;
  if (cut) max = max > 3 ? max - 3 : 0;
  for (size_t i = 0; i < len && n < max; i++)
    buf[n++] = isprint((unsigned char)tok[i]) ? tok[i] : '?';
  if (cut)
    for (int k = 0; k < 3 && n + 1 < cap; k++) buf[n++] = '.';
  buf[n] = 0;
}

/* ---- builder ---- */

void ts__mb_init(ts__mesh_builder *b, const ts_mesh_import_opts *o, char *err, size_t cap) {
  memset(b, 0, sizeof *b);
  b->o = o;
  b->vert_limit = o->max_verts;
  b->tri_unit = "line";
  b->err = err;
  b->errcap = cap;
}

void ts__mb_free(ts__mesh_builder *b) {
  free(b->v);
  free(b->idx);
  free(b->poly_off);
  free(b->poly_where);
  memset(b, 0, sizeof *b);
}

/* Capacity for `need` elements, doubling from `cap`, never past `limit`
 * (need <= limit is the caller's check); 0 when it cannot be had. */
static uint64_t next_cap(uint32_t cap, uint64_t need, uint64_t limit, size_t elem) {
  uint64_t nc = cap ? (uint64_t)cap * 2 : 256;
  while (nc < need) nc *= 2;
  if (nc > limit) nc = limit;
  if (nc < need || nc > UINT32_MAX || nc > SIZE_MAX / elem) return 0;
  return nc;
}

int ts__mb_vertex(ts__mesh_builder *b, const double xyz[3], const char *unit, uint64_t num) {
  const ts_mesh_import_opts *o = b->o;
  double s[3];
  for (int i = 0; i < 3; i++) {
    if (!isfinite(xyz[i])) {
      ts__mesh_err(b->err, b->errcap, "%s %llu: coordinate is %s (not a finite number)", unit,
                   (unsigned long long)num, isnan(xyz[i]) ? "NaN" : "infinite");
      return TS_EMESH;
    }
    s[i] = xyz[i] * o->scale;
    if (!(fabs(s[i]) <= o->max_abs_coord)) {
      ts__mesh_err(b->err, b->errcap,
                   "%s %llu: coordinate %g (%g m at scale %g) is beyond the limit of %g m "
                   "(wrong units? set the scale)",
                   unit, (unsigned long long)num, xyz[i], s[i], o->scale, o->max_abs_coord);
      return TS_EMESH;
    }
  }
  if (b->nv >= b->vert_limit) {
    ts__mesh_err(b->err, b->errcap, "%s %llu: more than %u vertices (the limit)", unit,
                 (unsigned long long)num, b->vert_limit);
    return TS_ETOOBIG;
  }
  if (b->nv == b->cap_v) {
    uint64_t nc = next_cap(b->cap_v, (uint64_t)b->nv + 1, b->vert_limit, sizeof *b->v);
    double(*q)[3] = nc ? realloc(b->v, (size_t)nc * sizeof *b->v) : NULL;
    if (!q) {
      ts__mesh_err(b->err, b->errcap, "out of memory for %u vertices", b->nv + 1);
      return TS_ENOMEM;
    }
    b->v = q;
    b->cap_v = (uint32_t)nc;
  }
  memcpy(b->v[b->nv++], s, sizeof s);
  return 0;
}

int ts__mb_polygon(ts__mesh_builder *b, const uint32_t *corners, uint32_t n, uint32_t where) {
  const uint64_t max_tris = b->o->max_tris;
  if (n < 3 || n > TS_MESH_MAX_POLYGON) {
    ts__mesh_err(b->err, b->errcap, "%s %u: polygon with %u vertices", b->tri_unit, where, n);
    return TS_EMESH;
  }
  if (b->n_tris + (n - 2) > max_tris) {
    ts__mesh_err(b->err, b->errcap, "%s %u: more than %llu triangles (the limit)", b->tri_unit,
                 where, (unsigned long long)max_tris);
    return TS_ETOOBIG;
  }
  /* every polygon gives >= 1 triangle and has <= triangles + 2 corners */
  const uint64_t idx_limit = 3 * max_tris < UINT32_MAX ? 3 * max_tris : UINT32_MAX;
  const uint64_t poly_limit = max_tris + 1 < UINT32_MAX ? max_tris + 1 : UINT32_MAX;
  if ((uint64_t)b->n_idx + n > b->cap_idx) {
    uint64_t nc = next_cap(b->cap_idx, (uint64_t)b->n_idx + n, idx_limit, sizeof *b->idx);
    uint32_t *q = nc ? realloc(b->idx, (size_t)nc * sizeof *b->idx) : NULL;
    if (!q) {
      ts__mesh_err(b->err, b->errcap, "out of memory for polygons");
      return TS_ENOMEM;
    }
    b->idx = q;
    b->cap_idx = (uint32_t)nc;
  }
  if ((uint64_t)b->n_poly + 2 > b->cap_poly) { /* poly_off needs n_poly + 1 entries */
    uint64_t nc = next_cap(b->cap_poly, (uint64_t)b->n_poly + 2, poly_limit, sizeof(uint32_t));
    uint32_t *q = nc ? realloc(b->poly_off, (size_t)nc * sizeof *q) : NULL;
    if (q) b->poly_off = q;
    uint32_t *r = q ? realloc(b->poly_where, (size_t)nc * sizeof *r) : NULL;
    if (r) b->poly_where = r;
    if (!q || !r) { /* a grown poly_off alone is harmless: cap_poly stays */
      ts__mesh_err(b->err, b->errcap, "out of memory for polygons");
      return TS_ENOMEM;
    }
    b->cap_poly = (uint32_t)nc;
  }
  if (b->n_poly == 0) b->poly_off[0] = 0;
  memcpy(b->idx + b->n_idx, corners, sizeof *corners * n);
  b->n_idx += n;
  b->poly_where[b->n_poly] = where;
  b->poly_off[++b->n_poly] = b->n_idx;
  b->n_tris += n - 2;
  if (n > 3) b->n_split++;
  return 0;
}

int ts__mb_finish(ts__mesh_builder *b, int drop_unused, ts_mesh **out, ts__mesh_prov *prov,
                  ts_mesh_read_info *info) {
  *out = NULL;
  for (uint32_t i = 0; i < b->n_idx; i++)
    if (b->idx[i] >= b->nv) { /* the readers check; this keeps a slip from escaping */
      ts__mesh_err(b->err, b->errcap, "vertex index %u out of range (%u vertices)", b->idx[i],
                   b->nv);
      return TS_EMESH;
    }
  ts_mesh *m = NULL;
  int rc = ts_mesh_alloc(b->nv, (uint32_t)b->n_tris, &m);
  if (rc) return rc;
  ts__mesh_prov pv = {b->tri_unit, NULL, NULL};
  pv.tri_where = malloc(sizeof *pv.tri_where * (b->n_tris ? b->n_tris : 1));
  pv.vert_where = malloc(sizeof *pv.vert_where * (b->nv ? b->nv : 1));
  if (!pv.tri_where || !pv.vert_where) {
    ts__mesh_prov_free(&pv);
    ts_mesh_free(m);
    return TS_ENOMEM;
  }
  if (b->nv) memcpy(m->v, b->v, sizeof *m->v * b->nv);
  for (uint32_t i = 0; i < b->nv; i++) pv.vert_where[i] = b->vert_base + i;
  uint32_t k = 0;
  for (uint32_t p = 0; p < b->n_poly; p++) {
    const uint32_t *c = b->idx + b->poly_off[p];
    uint32_t n = b->poly_off[p + 1] - b->poly_off[p];
    ts__earclip((const double(*)[3])m->v, c, n, m->t + k);
    for (uint32_t j = 0; j < n - 2; j++) pv.tri_where[k + j] = b->poly_where[p];
    k += n - 2;
  }
  uint32_t dropped = 0;
  if (drop_unused && (rc = ts__mesh_drop_unused(m, &pv, &dropped))) {
    ts__mesh_prov_free(&pv);
    ts_mesh_free(m);
    return rc;
  }
  if (info) {
    info->file_verts = b->nv;
    info->polygons_split = b->n_split;
    info->unused_dropped = dropped;
  }
  if (prov)
    *prov = pv;
  else
    ts__mesh_prov_free(&pv);
  *out = m;
  return 0;
}
