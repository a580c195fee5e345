/*
 * ts_mesh_read.h: internals shared by the mesh readers (ts_mesh_obj.c,
 * ts_mesh_stl.c, ts_mesh_ply.c), validation and repair (ts_mesh_check.c,
 * ts_mesh_repair.c) and the import pipeline (ts_mesh_io.c). Not a public API.
 *
 *   - error messages into a caller's buffer;
 *   - a text cursor over a buffer that is not NUL-terminated, with line
 *     numbers, and locale-independent-enough number parsing;
 *   - a polygon-soup builder that checks the size limits before every
 *     allocation and converts coordinates to metres;
 *   - ear-clipping triangulation (ts_mesh_earclip.c);
 *   - provenance: for each triangle the file line (or face number) it came
 *     from and for each vertex its number in the file, so that validation
 *     after repair can still name places in the file.
 */
#ifndef TS_MESH_READ_H
#define TS_MESH_READ_H

#include <stddef.h>
#include <stdint.h>

#include "ts_mesh.h"
#include "ts_mesh_check.h"
#include "ts_mesh_io.h"

#if defined(__GNUC__)
#define TS__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TS__PRINTF(f, a)
#endif

/* Writes a message into err (if err and cap). */
void ts__mesh_err(char *err, size_t cap, const char *fmt, ...) TS__PRINTF(3, 4);

/* ---- provenance ---- */

typedef struct ts__mesh_prov {
  const char *tri_unit;  /* what tri_where counts: "line", "facet" or "face" */
  uint32_t *tri_where;   /* per triangle: 1-based line, or 0-based facet/face */
  uint32_t *vert_where;  /* per vertex: its number in the file; NULL: name by position */
} ts__mesh_prov;

void ts__mesh_prov_free(ts__mesh_prov *p);

/* Writes a description of triangle k ("triangle 17", "line 40", "face 3"),
 * or vertex v ("5", or "(0.1, 0.2, 0.3)" when the file has no vertex numbers)
 * into buf. */
void ts__mesh_tri_name(const ts__mesh_prov *p, uint32_t k, char *buf, size_t cap);
void ts__mesh_vert_name(const ts_mesh *m, const ts__mesh_prov *p, uint32_t v, char *buf,
                        size_t cap);

/* Versions of the ts_mesh_check.h calls that keep prov (may be NULL) in step
 * with the mesh and use it in messages. */
int ts__mesh_check(const ts_mesh *m, const ts_mesh_import_opts *o, const ts__mesh_prov *prov,
                   ts_mesh_report *rep, char *err, size_t cap);
int ts__mesh_repair(ts_mesh *m, const ts_mesh_import_opts *o, ts__mesh_prov *prov,
                    ts_mesh_repair_stats *st, char *err, size_t cap);
int ts__mesh_weld(ts_mesh *m, double tol, ts__mesh_prov *prov, uint32_t *merged);
int ts__mesh_drop_unused(ts_mesh *m, ts__mesh_prov *prov, uint32_t *dropped);
/* Marks in dup[] (n_tris flags) every triangle repeating an earlier one's
 * vertex set (either orientation); first (may be NULL) gets, for the first
 * duplicate in vertex order, the kept and the repeating triangle. Returns
 * the count, or -1 when out of memory. */
int64_t ts__mesh_find_duplicates(const ts_mesh *m, uint8_t *dup, uint32_t first[2]);
/* Degenerate per ts_mesh_import_opts.degenerate_rel (indices must be valid). */
int ts__mesh_tri_degenerate(const ts_mesh *m, uint32_t k, double rel);

/* ---- text cursor ---- */

typedef struct ts__text {
  const char *p, *end;
  uint32_t line; /* 1-based line of p */
} ts__text;

void ts__text_init(ts__text *t, const void *buf, size_t len);
/* Next whitespace-separated token on the current line; 0 at the end of the
 * line or input (the cursor then stays before the newline). */
int ts__text_token(ts__text *t, const char **tok, size_t *len);
/* Next token, crossing line ends; 0 at the end of input. */
int ts__text_token_any(ts__text *t, const char **tok, size_t *len);
/* Skips the rest of the line and its newline; 0 at the end of input. */
int ts__text_next_line(ts__text *t);
/* Token equals word (exactly, case-sensitive). */
int ts__tok_is(const char *tok, size_t len, const char *word);
/* A whole token as a number (strtod syntax: also nan, inf). 0 or -1. */
int ts__parse_double(const char *tok, size_t len, double *out);
/* A whole token as a decimal integer with optional sign, |v| < 2^62. 0 or -1. */
int ts__parse_int(const char *tok, size_t len, int64_t *out);
/* A printable copy of a token for messages (at most cap-1 chars, "..." when cut). */
void ts__tok_show(const char *tok, size_t len, char *buf, size_t cap);

/* ---- builder ---- */

typedef struct ts__mesh_builder {
  const ts_mesh_import_opts *o;
  uint32_t vert_limit;   /* vertices accepted (o->max_verts, STL 3*max_tris) */
  uint32_t vert_base;    /* number of the first vertex in the file (OBJ 1, PLY 0) */
  const char *tri_unit;  /* provenance unit of poly_where */
  double (*v)[3];
  uint32_t nv, cap_v;
  uint32_t *idx;         /* polygon corners, flat */
  uint32_t n_idx, cap_idx;
  uint32_t *poly_off;    /* n_poly + 1 offsets into idx */
  uint32_t *poly_where;  /* n_poly */
  uint32_t n_poly, cap_poly;
  uint64_t n_tris;       /* triangles the polygons give */
  uint32_t n_split;      /* polygons with more than 3 corners */
  char *err;
  size_t errcap;
} ts__mesh_builder;

void ts__mb_init(ts__mesh_builder *b, const ts_mesh_import_opts *o, char *err, size_t cap);
void ts__mb_free(ts__mesh_builder *b);
/* Adds a vertex in file units: checks finiteness, scales, checks
 * o->max_abs_coord and the vertex limit. unit/num name the place for
 * messages ("line", 12). Returns 0, TS_EMESH, TS_ETOOBIG, TS_ENOMEM. */
int ts__mb_vertex(ts__mesh_builder *b, const double xyz[3], const char *unit, uint64_t num);
/* Adds a polygon of n (3..TS_MESH_MAX_POLYGON) corners, indices already
 * checked against the vertex count; where is its provenance. Checks the
 * triangle limit. Returns 0, TS_ETOOBIG, TS_ENOMEM. */
int ts__mb_polygon(ts__mesh_builder *b, const uint32_t *corners, uint32_t n, uint32_t where);
/* Triangulates every polygon, builds the mesh (vertices with vert_where =
 * file numbers), and drops unused vertices when drop_unused. prov may be
 * NULL. Returns 0, TS_ENOMEM. */
int ts__mb_finish(ts__mesh_builder *b, int drop_unused, ts_mesh **out, ts__mesh_prov *prov,
                  ts_mesh_read_info *info);

/* Triangulates polygon poly[0..n-1] (3 <= n <= TS_MESH_MAX_POLYGON, indices
 * into v) by ear clipping; writes n-2 triangles with the polygon's winding. */
void ts__earclip(const double (*v)[3], const uint32_t *poly, uint32_t n, uint32_t (*out)[3]);

/* ---- format readers with provenance (prov may be NULL) ---- */

int ts__read_obj(const uint8_t *buf, size_t len, const ts_mesh_import_opts *o, ts_mesh **out,
                 ts__mesh_prov *prov, ts_mesh_read_info *info, char *err, size_t cap);
int ts__read_stl(const uint8_t *buf, size_t len, const ts_mesh_import_opts *o, ts_mesh **out,
                 ts__mesh_prov *prov, ts_mesh_read_info *info, char *err, size_t cap);
int ts__read_ply(const uint8_t *buf, size_t len, const ts_mesh_import_opts *o, ts_mesh **out,
                 ts__mesh_prov *prov, ts_mesh_read_info *info, char *err, size_t cap);

/* Checks the options (scale > 0 and finite, limits > 0). 0 or TS_EINVAL. */
int ts__mesh_opts_ok(const ts_mesh_import_opts *o, char *err, size_t cap);

#endif
