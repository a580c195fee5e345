/*
 * ts_mesh_ply.c: PLY in (ts_mesh_io.h), after Greg Turk's "The PLY Polygon
 * File Format" (Stanford, 1994).
 *
 * The header ("ply", "format ascii|binary_little_endian 1.0", "element NAME
 * COUNT", "property TYPE NAME" or "property list COUNT_TYPE ITEM_TYPE NAME",
 * "comment"/"obj_info", "end_header") describes the elements that follow in
 * order. Used: the `vertex` element's x, y, z (any scalar type) and the
 * `face` element's `vertex_indices` or `vertex_index` list (integer count
 * and item types); every other property and element is read past. Types:
 * char/int8, uchar/uint8, short/int16, ushort/uint16, int/int32,
 * uint/uint32, float/float32, double/float64. Binary big-endian files are
 * refused with a clear message (the issue asks for ASCII and little-endian).
 *
 * Limits are checked against the header's counts before any data is read,
 * and a binary element whose minimal size does not fit in what is left of the
 * file is reported as truncated before its first instance is read.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_mesh_read.h"

#define PLY_MAX_ELEMS 16
#define PLY_MAX_PROPS 32

enum { T_CHAR, T_UCHAR, T_SHORT, T_USHORT, T_INT, T_UINT, T_FLOAT, T_DOUBLE, T_NONE };
enum { R_SKIP, R_X, R_Y, R_Z, R_INDICES };
enum { F_NONE, F_ASCII, F_LE, F_BE };

static const struct {
  const char *name, *alias;
  uint8_t size;
} TYPES[] = {{"char", "int8", 1},  {"uchar", "uint8", 1},   {"short", "int16", 2},
             {"ushort", "uint16", 2}, {"int", "int32", 4},   {"uint", "uint32", 4},
             {"float", "float32", 4}, {"double", "float64", 8}};

typedef struct ply_prop {
  uint8_t type;       /* T_*: scalar type, or the list's item type */
  uint8_t count_type; /* T_NONE for a scalar */
  uint8_t role;       /* R_* */
} ply_prop;

typedef struct ply_elem {
  char name[32];
  uint32_t count;
  uint32_t n_props;
  ply_prop props[PLY_MAX_PROPS];
} ply_elem;

typedef struct ply_header {
  int format;
  uint32_t n_elems;
  ply_elem elems[PLY_MAX_ELEMS];
  int vertex, face; /* element numbers, -1 if absent */
} ply_header;

static int type_of(const char *tok, size_t n) {
  for (int i = 0; i < T_NONE; i++)
    if (ts__tok_is(tok, n, TYPES[i].name) || ts__tok_is(tok, n, TYPES[i].alias)) return i;
  return T_NONE;
}

static int is_int_type(int t) { return t < T_FLOAT; }

static int parse_header(ts__text *t, ply_header *h, char *err, size_t cap) {
  const char *tok;
  size_t n;
  char show[48];
  memset(h, 0, sizeof *h);
  h->vertex = h->face = -1;
  if (!ts__text_token(t, &tok, &n) || !ts__tok_is(tok, n, "ply")) {
    ts__mesh_err(err, cap, "not a PLY file (the first line must be 'ply')");
    return TS_EMESH;
  }
  for (;;) {
    if (!ts__text_next_line(t)) {
      ts__mesh_err(err, cap, "line %u: PLY header has no 'end_header'", t->line);
      return TS_EMESH;
    }
    if (!ts__text_token(t, &tok, &n)) continue;
    if (ts__tok_is(tok, n, "end_header")) {
      ts__text_next_line(t); /* data start right after this line */
      break;
    }
    if (ts__tok_is(tok, n, "comment") || ts__tok_is(tok, n, "obj_info")) continue;
    if (ts__tok_is(tok, n, "format")) {
      const char *v;
      size_t vn;
      if (!ts__text_token(t, &tok, &n) || !ts__text_token(t, &v, &vn)) {
        ts__mesh_err(err, cap, "line %u: 'format' needs a format and a version", t->line);
        return TS_EMESH;
      }
      if (ts__tok_is(tok, n, "ascii"))
        h->format = F_ASCII;
      else if (ts__tok_is(tok, n, "binary_little_endian"))
        h->format = F_LE;
      else if (ts__tok_is(tok, n, "binary_big_endian")) {
        ts__mesh_err(err, cap,
                     "line %u: binary big-endian PLY is not supported (use ASCII or "
                     "binary_little_endian)",
                     t->line);
        return TS_EMESH;
      } else {
        ts__tok_show(tok, n, show, sizeof show);
        ts__mesh_err(err, cap, "line %u: unknown PLY format '%s'", t->line, show);
        return TS_EMESH;
      }
      if (!ts__tok_is(v, vn, "1.0")) {
        ts__tok_show(v, vn, show, sizeof show);
        ts__mesh_err(err, cap, "line %u: unsupported PLY version '%s' (1.0 expected)", t->line,
                     show);
        return TS_EMESH;
      }
      continue;
    }
    if (ts__tok_is(tok, n, "element")) {
      const char *c;
      size_t cn;
      int64_t count;
      if (!ts__text_token(t, &tok, &n) || !ts__text_token(t, &c, &cn) ||
          ts__parse_int(c, cn, &count) || count < 0 || count > UINT32_MAX) {
        ts__mesh_err(err, cap, "line %u: 'element' needs a name and a count", t->line);
        return TS_EMESH;
      }
      if (h->n_elems == PLY_MAX_ELEMS) {
        ts__mesh_err(err, cap, "line %u: more than %d elements", t->line, PLY_MAX_ELEMS);
        return TS_EMESH;
      }
      ply_elem *e = &h->elems[h->n_elems];
      ts__tok_show(tok, n, e->name, sizeof e->name);
      e->count = (uint32_t)count;
      if (ts__tok_is(tok, n, "vertex") && h->vertex < 0) h->vertex = (int)h->n_elems;
      if (ts__tok_is(tok, n, "face") && h->face < 0) h->face = (int)h->n_elems;
      h->n_elems++;
      continue;
    }
    if (ts__tok_is(tok, n, "property")) {
      if (h->n_elems == 0) {
        ts__mesh_err(err, cap, "line %u: 'property' before any 'element'", t->line);
        return TS_EMESH;
      }
      ply_elem *e = &h->elems[h->n_elems - 1];
      if (e->n_props == PLY_MAX_PROPS) {
        ts__mesh_err(err, cap, "line %u: more than %d properties in element '%s'", t->line,
                     PLY_MAX_PROPS, e->name);
        return TS_EMESH;
      }
      ply_prop *p = &e->props[e->n_props];
      p->count_type = T_NONE;
      p->role = R_SKIP;
      if (!ts__text_token(t, &tok, &n)) {
        ts__mesh_err(err, cap, "line %u: 'property' needs a type and a name", t->line);
        return TS_EMESH;
      }
      if (ts__tok_is(tok, n, "list")) {
        if (!ts__text_token(t, &tok, &n)) tok = "", n = 0;
        p->count_type = (uint8_t)type_of(tok, n);
        if (p->count_type == T_NONE || !is_int_type(p->count_type)) {
          ts__tok_show(tok, n, show, sizeof show);
          ts__mesh_err(err, cap, "line %u: list count type '%s' is not an integer type", t->line,
                       show);
          return TS_EMESH;
        }
        if (!ts__text_token(t, &tok, &n)) tok = "", n = 0;
      }
      p->type = (uint8_t)type_of(tok, n);
      if (p->type == T_NONE) {
        ts__tok_show(tok, n, show, sizeof show);
        ts__mesh_err(err, cap, "line %u: unknown property type '%s'", t->line, show);
        return TS_EMESH;
      }
      if (!ts__text_token(t, &tok, &n)) {
        ts__mesh_err(err, cap, "line %u: property without a name", t->line);
        return TS_EMESH;
      }
      int in_vertex = (int)h->n_elems - 1 == h->vertex, in_face = (int)h->n_elems - 1 == h->face;
      int list = p->count_type != T_NONE;
      if (in_vertex && !list) {
        if (ts__tok_is(tok, n, "x")) p->role = R_X;
        if (ts__tok_is(tok, n, "y")) p->role = R_Y;
        if (ts__tok_is(tok, n, "z")) p->role = R_Z;
      }
      int have_indices = 0;
      for (uint32_t i = 0; i < e->n_props; i++) have_indices |= e->props[i].role == R_INDICES;
      if (in_face && list && !have_indices &&
          (ts__tok_is(tok, n, "vertex_indices") || ts__tok_is(tok, n, "vertex_index"))) {
        if (!is_int_type(p->type)) {
          ts__mesh_err(err, cap, "line %u: face vertex indices are not of an integer type",
                       t->line);
          return TS_EMESH;
        }
        p->role = R_INDICES;
      }
      e->n_props++;
      continue;
    }
    ts__tok_show(tok, n, show, sizeof show);
    ts__mesh_err(err, cap, "line %u: unknown PLY header keyword '%s'", t->line, show);
    return TS_EMESH;
  }
  if (h->format == F_NONE) {
    ts__mesh_err(err, cap, "PLY header has no 'format' line");
    return TS_EMESH;
  }
  if (h->vertex < 0) {
    ts__mesh_err(err, cap, "PLY has no 'vertex' element");
    return TS_EMESH;
  }
  if (h->face < 0) {
    ts__mesh_err(err, cap, "PLY has no 'face' element (a point cloud is not a surface)");
    return TS_EMESH;
  }
  const ply_elem *ve = &h->elems[h->vertex], *fe = &h->elems[h->face];
  int seen[5] = {0, 0, 0, 0, 0};
  for (uint32_t i = 0; i < ve->n_props; i++) seen[ve->props[i].role] = 1;
  for (uint32_t i = 0; i < fe->n_props; i++) seen[fe->props[i].role] = 1;
  for (int r = R_X; r <= R_Z; r++)
    if (!seen[r]) {
      ts__mesh_err(err, cap, "PLY vertex element has no scalar property '%c'", 'x' + r - R_X);
      return TS_EMESH;
    }
  if (!seen[R_INDICES]) {
    ts__mesh_err(err, cap, "PLY face element has no 'vertex_indices' list");
    return TS_EMESH;
  }
  return 0;
}

/* ---- data ---- */

typedef struct ply_reader {
  const ply_header *h;
  ts__mesh_builder *b;
  int ascii;
  ts__text t;              /* ASCII */
  const uint8_t *p, *end;  /* binary */
  uint32_t nv;             /* vertex count from the header */
  char *err;
  size_t cap;
} ply_reader;

/* Reads one binary scalar of type ty as double and (for integer types) as
 * integer. -1 when the file ends first. */
static int bin_scalar(ply_reader *r, int ty, double *d, int64_t *iv) {
  size_t sz = TYPES[ty].size;
  if ((size_t)(r->end - r->p) < sz) return -1;
  const uint8_t *q = r->p;
  uint64_t u = 0;
  for (size_t i = 0; i < sz; i++) u |= (uint64_t)q[i] << (8 * i);
  r->p += sz;
  switch (ty) {
  case T_CHAR: *iv = (int8_t)u; break;
  case T_UCHAR: *iv = (uint8_t)u; break;
  case T_SHORT: *iv = (int16_t)u; break;
  case T_USHORT: *iv = (uint16_t)u; break;
  case T_INT: *iv = (int32_t)u; break;
  case T_UINT: *iv = (uint32_t)u; break;
  case T_FLOAT: {
    uint32_t w = (uint32_t)u;
    float f;
    memcpy(&f, &w, sizeof f);
    *d = f;
    *iv = 0;
    return 0;
  }
  default: {
    double g;
    memcpy(&g, &u, sizeof g);
    *d = g;
    *iv = 0;
    return 0;
  }
  }
  *d = (double)*iv;
  return 0;
}

/* Reads one value (ASCII token or binary scalar). Integer types must hold an
 * integer. Returns 0 or TS_EMESH with a message. */
static int value(ply_reader *r, int ty, const ply_elem *e, uint32_t inst, double *d,
                 int64_t *iv) {
  char show[48];
  if (!r->ascii) {
    if (bin_scalar(r, ty, d, iv) == 0) return 0;
    ts__mesh_err(r->err, r->cap, "truncated binary PLY: file ends in element '%s' %u", e->name,
                 inst);
    return TS_EMESH;
  }
  const char *tok;
  size_t n;
  if (!ts__text_token_any(&r->t, &tok, &n)) {
    ts__mesh_err(r->err, r->cap, "line %u: file ends in element '%s' %u (of %u)", r->t.line,
                 e->name, inst, e->count);
    return TS_EMESH;
  }
  if (is_int_type(ty)) {
    if (ts__parse_int(tok, n, iv)) {
      ts__tok_show(tok, n, show, sizeof show);
      ts__mesh_err(r->err, r->cap, "line %u: '%s' is not an integer", r->t.line, show);
      return TS_EMESH;
    }
    *d = (double)*iv;
    return 0;
  }
  if (ts__parse_double(tok, n, d)) {
    ts__tok_show(tok, n, show, sizeof show);
    ts__mesh_err(r->err, r->cap, "line %u: '%s' is not a number", r->t.line, show);
    return TS_EMESH;
  }
  *iv = 0;
  return 0;
}

static int read_instance(ply_reader *r, const ply_elem *e, int kind, uint32_t inst) {
  double xyz[3] = {0, 0, 0}, d;
  int64_t iv;
  uint32_t corners[TS_MESH_MAX_POLYGON], nc = 0;
  /* where: the line of the instance's first value (ASCII) or its number */
  uint32_t line = 0;
  int rc;
  for (uint32_t k = 0; k < e->n_props; k++) {
    const ply_prop *p = &e->props[k];
    if (r->ascii && k == 0) {
      /* skip blank lines so the instance's own line is named */
      const char *tok;
      size_t n;
      ts__text save = r->t;
      if (ts__text_token_any(&r->t, &tok, &n)) line = r->t.line;
      r->t = save;
    }
    if (p->count_type == T_NONE) {
      if ((rc = value(r, p->type, e, inst, &d, &iv))) return rc;
      if (p->role >= R_X && p->role <= R_Z) xyz[p->role - R_X] = d;
      continue;
    }
    if ((rc = value(r, p->count_type, e, inst, &d, &iv))) return rc;
    if (iv < 0) {
      ts__mesh_err(r->err, r->cap, "%s %u: negative list length %lld",
                   r->ascii ? "line" : e->name, r->ascii ? line : inst, (long long)iv);
      return TS_EMESH;
    }
    int64_t cnt = iv;
    if (p->role != R_INDICES) {
      if (!r->ascii) { /* skip the items in one go */
        uint64_t bytes = (uint64_t)cnt * TYPES[p->type].size;
        if (bytes > (uint64_t)(r->end - r->p)) {
          ts__mesh_err(r->err, r->cap, "truncated binary PLY: file ends in element '%s' %u",
                       e->name, inst);
          return TS_EMESH;
        }
        r->p += bytes;
      } else {
        for (int64_t j = 0; j < cnt; j++)
          if ((rc = value(r, p->type, e, inst, &d, &iv))) return rc;
      }
      continue;
    }
    if (cnt < 3 || cnt > TS_MESH_MAX_POLYGON - nc) {
      if (r->ascii)
        ts__mesh_err(r->err, r->cap, "line %u: face has %lld vertices (needs 3 to %d)", line,
                     (long long)cnt, TS_MESH_MAX_POLYGON);
      else
        ts__mesh_err(r->err, r->cap, "face %u has %lld vertices (needs 3 to %d)", inst,
                     (long long)cnt, TS_MESH_MAX_POLYGON);
      return TS_EMESH;
    }
    for (int64_t j = 0; j < cnt; j++) {
      if ((rc = value(r, p->type, e, inst, &d, &iv))) return rc;
      if (iv < 0 || iv >= r->nv) {
        if (r->ascii)
          ts__mesh_err(r->err, r->cap, "line %u: vertex index %lld out of range (%u vertices)",
                       line, (long long)iv, r->nv);
        else
          ts__mesh_err(r->err, r->cap, "face %u: vertex index %lld out of range (%u vertices)",
                       inst, (long long)iv, r->nv);
        return TS_EMESH;
      }
      corners[nc++] = (uint32_t)iv;
    }
  }
  if (kind == R_X) return ts__mb_vertex(r->b, xyz, r->ascii ? "line" : "vertex",
                                        r->ascii ? line : inst);
  if (kind == R_INDICES) return ts__mb_polygon(r->b, corners, nc, r->ascii ? line : inst);
  return 0;
}

/* Smallest size in bytes of one binary instance of e. */
static uint64_t min_size(const ply_elem *e) {
  uint64_t s = 0;
  for (uint32_t k = 0; k < e->n_props; k++)
    s += TYPES[e->props[k].count_type != T_NONE ? e->props[k].count_type : e->props[k].type].size;
  return s;
}

int ts__read_ply(const uint8_t *buf, size_t len, const ts_mesh_import_opts *o, ts_mesh **out,
                 ts__mesh_prov *prov, ts_mesh_read_info *info, char *err, size_t cap) {
  if (len == 0) {
    ts__mesh_err(err, cap, "empty file");
    return TS_EMESH;
  }
  ply_header *h = malloc(sizeof *h);
  if (!h) return TS_ENOMEM;
  ply_reader r;
  memset(&r, 0, sizeof r);
  ts__text_init(&r.t, buf, len);
  int rc = parse_header(&r.t, h, err, cap);
  ts__mesh_builder b;
  ts__mb_init(&b, o, err, cap);
  if (rc) goto done;
  const ply_elem *ve = &h->elems[h->vertex], *fe = &h->elems[h->face];
  if (ve->count > o->max_verts) {
    ts__mesh_err(err, cap, "PLY has %u vertices, over the limit of %u", ve->count, o->max_verts);
    rc = TS_ETOOBIG;
    goto done;
  }
  if (fe->count > o->max_tris) {
    ts__mesh_err(err, cap, "PLY has %u faces, over the limit of %u triangles", fe->count,
                 o->max_tris);
    rc = TS_ETOOBIG;
    goto done;
  }
  if (fe->count == 0) {
    ts__mesh_err(err, cap, "PLY has no faces");
    rc = TS_EMESH;
    goto done;
  }
  r.h = h;
  r.b = &b;
  r.ascii = h->format == F_ASCII;
  r.p = (const uint8_t *)r.t.p;
  r.end = buf + len;
  r.nv = ve->count;
  r.err = err;
  r.cap = cap;
  b.vert_base = 0;
  b.tri_unit = r.ascii ? "line" : "face";
  for (uint32_t ei = 0; ei < h->n_elems; ei++) {
    const ply_elem *e = &h->elems[ei];
    if (e->n_props == 0) continue; /* nothing to read, however many instances */
    int kind = (int)ei == h->vertex ? R_X : (int)ei == h->face ? R_INDICES : R_SKIP;
    if (!r.ascii) {
      uint64_t need = min_size(e) * e->count;
      if (need > (uint64_t)(r.end - r.p)) {
        ts__mesh_err(err, cap,
                     "truncated binary PLY: element '%s' needs at least %llu bytes, %llu left",
                     e->name, (unsigned long long)need, (unsigned long long)(r.end - r.p));
        rc = TS_EMESH;
        goto done;
      }
    }
    for (uint32_t i = 0; i < e->count; i++)
      if ((rc = read_instance(&r, e, kind, i))) goto done;
  }
  if (r.ascii) {
    const char *tok;
    size_t n;
    if (ts__text_token_any(&r.t, &tok, &n)) {
      ts__mesh_err(err, cap, "line %u: data after the last element", r.t.line);
      rc = TS_EMESH;
      goto done;
    }
  } else if (r.p != r.end) {
    ts__mesh_err(err, cap, "binary PLY has %llu bytes after its last element",
                 (unsigned long long)(r.end - r.p));
    rc = TS_EMESH;
    goto done;
  }
  rc = ts__mb_finish(&b, 1, out, prov, info);
  if (!rc && info) {
    info->format = TS_MESH_PLY;
    info->binary = !r.ascii;
    info->file_faces = fe->count;
  }
done:
  ts__mb_free(&b);
  free(h);
  return rc;
}
