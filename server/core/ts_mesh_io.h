/*
 * ts_mesh_io.h: meshes in and out. Readers for Wavefront OBJ, STL (ASCII and
 * binary) and PLY (ASCII and binary little-endian) from a memory buffer (a
 * mesh uploaded through the protocol) or a file (the offline tool, tests),
 * and an OBJ writer. Every reader returns a ts_mesh (ts_mesh.h) in metres.
 *
 * Readers parse and convert, nothing more:
 *   - OBJ: `v`, `f` with the `v`, `v/t`, `v//n` and `v/t/n` forms and
 *     negative (relative) indices; texture and normal indices are checked
 *     but not kept. Polygons are triangulated by ear clipping in the plane of
 *     their Newell normal (so concave faces stay inside their outline; a
 *     polygon with no ear, i.e. degenerate or self-intersecting, falls back to
 *     cutting its most convex corner). Other statements (o, g, s, usemtl, l,
 *     vp, ...) are ignored. Vertices no face uses are dropped.
 *   - STL: ASCII (`solid ... facet normal ... outer loop ... vertex ...`) or
 *     binary (80-byte header, uint32 count, 50 bytes per facet), told apart by
 *     the exact binary size and by text content. STL has no shared vertices,
 *     so duplicates are welded with opts.weld_tol.
 *   - PLY: `format ascii 1.0` or `binary_little_endian 1.0`; the vertex
 *     element's x, y, z (any scalar type) and the face element's
 *     `vertex_indices` (or `vertex_index`) list (any integer types); every
 *     other property and element is skipped. Polygons triangulated as OBJ.
 *     Vertices no face uses are dropped.
 * Validation and repair (non-manifold edges, winding, degenerate and
 * duplicate triangles, Euler characteristic, ...) live in ts_mesh_check.h;
 * ts_mesh_import() below is the whole pipeline (read, repair what is safe,
 * refuse the rest), the one call the daemon and the offline tool use.
 *
 * Errors: TS_EMESH for malformed input, TS_ETOOBIG when a size limit is hit,
 * TS_EIO for files, TS_EINVAL for bad arguments, TS_ENOMEM. The message goes
 * into the caller's err buffer (may be NULL) and names the place:
 * "line 12: face index 9 out of range (3 vertices)", "facet 7: ...",
 * "truncated binary STL: ...". Nothing is allocated before the limits in the
 * options have been checked, and nothing reads outside the buffer.
 */
#ifndef TS_MESH_IO_H
#define TS_MESH_IO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ts_mesh.h"

/* Largest polygon (vertices per face) the OBJ and PLY readers accept. */
#define TS_MESH_MAX_POLYGON 256

enum { TS_MESH_AUTO = 0, TS_MESH_OBJ = 1, TS_MESH_STL = 2, TS_MESH_PLY = 3 };

typedef struct ts_mesh_import_opts {
  double scale;         /* file units to metres: 1 (m), 0.01 (cm), 0.001 (mm); > 0 */
  double weld_tol;      /* m (after scaling): vertices closer than this merge. STL is
                           always welded (a negative value means exact equality);
                           ts_mesh_repair/ts_mesh_import weld every format when >= 0 */
  double degenerate_rel; /* a triangle whose height over its longest edge is at most
                           this fraction of that edge (or with a repeated vertex) is
                           degenerate */
  double max_abs_coord; /* m (after scaling): larger |coordinate| is refused as huge
                           (usually a units mistake: set scale) */
  uint32_t max_verts;   /* vertices in the file (STL: after welding) */
  uint32_t max_tris;    /* triangles after triangulation */
  size_t max_bytes;     /* input size */
  /* optional (NULL: none): told, on the calling thread, as a tissue's build
   * from this mesh enters each of its stages (ts_mesh_tissue.h's
   * TS_MESH_STAGE_*), so that a long one can be reported; the import alone
   * does not call it. It returns 0 to go on, or a negative ts_errno to
   * stop the build there, which then fails with that code (a daemon that
   * is stopping does not finish a build nobody will use) */
  int (*on_stage)(void *ud, int stage);
  void *stage_ud;
  /* optional (NULL: never): the built tissue's stop flag (ts_tissue.stop),
   * set before its step's preparation, whose stability bounds then stop
   * when *stop turns nonzero: the build fails with TS_ESHUTDOWN */
  const atomic_int *stop;
} ts_mesh_import_opts;

/* What a reader saw, for tools and tests. */
typedef struct ts_mesh_read_info {
  int format;               /* TS_MESH_OBJ/STL/PLY */
  int binary;               /* STL/PLY: 1 when binary */
  uint32_t file_verts;      /* vertex records in the file (STL: 3 per facet) */
  uint32_t file_faces;      /* faces/facets in the file */
  uint32_t polygons_split;  /* faces with more than 3 vertices, triangulated */
  uint32_t unused_dropped;  /* vertices no face uses, dropped */
  uint32_t welded;          /* vertices merged into another by welding */
  /* filled by ts_mesh_import's repair step: */
  uint32_t degenerate_dropped;
  uint32_t duplicate_dropped;
  int flipped;              /* 1 when a closed mesh was inside out and was flipped */
} ts_mesh_read_info;

/* A mesh less than this many weld tolerances across (its bounding box's
 * longest side, after scaling) is refused by ts_mesh_import before welding:
 * welding would merge its vertices into another shape (ts_mesh_repair, used
 * on its own, takes any size).
 * With the default tolerance that is 10 um, far below any organ or tool. */
#define TS_MESH_MIN_EXTENT_WELDS 1000

/* Defaults: scale 1, weld_tol 1e-8 m (below any feature of an organ mesh,
 * above float32 rounding of coordinates up to ~0.1 m), degenerate_rel 1e-9,
 * max_abs_coord 10 m, max_verts 1,000,000, max_tris 2,000,000,
 * max_bytes 256 MiB. */
ts_mesh_import_opts ts_mesh_import_opts_default(void);

/* Format from a name or path: "obj", "STL", "x/liver.ply" (by extension,
 * case-insensitive). TS_MESH_AUTO when not recognised. */
int ts_mesh_format_from_name(const char *name);

/* Format from content: "ply" magic; a binary STL whose size matches its
 * facet count; text starting with "solid" (ASCII STL); other text (OBJ);
 * other binary data of at least 84 bytes (binary STL, whose reader will say
 * what is wrong with it). TS_MESH_AUTO when unknown. */
int ts_mesh_detect_format(const void *buf, size_t len);

/* Readers. buf/len: the whole file. opts NULL means defaults. On success
 * *out is a new mesh (free with ts_mesh_free) and info (may be NULL) is
 * filled. Returns 0, TS_EMESH, TS_ETOOBIG, TS_EINVAL or TS_ENOMEM. */
int ts_mesh_read_obj(const void *buf, size_t len, const ts_mesh_import_opts *opts, ts_mesh **out,
                     ts_mesh_read_info *info, char *err, size_t errcap);
int ts_mesh_read_stl(const void *buf, size_t len, const ts_mesh_import_opts *opts, ts_mesh **out,
                     ts_mesh_read_info *info, char *err, size_t errcap);
int ts_mesh_read_ply(const void *buf, size_t len, const ts_mesh_import_opts *opts, ts_mesh **out,
                     ts_mesh_read_info *info, char *err, size_t errcap);
/* Any of the three; format TS_MESH_AUTO detects it from the content. */
int ts_mesh_read(const void *buf, size_t len, int format, const ts_mesh_import_opts *opts,
                 ts_mesh **out, ts_mesh_read_info *info, char *err, size_t errcap);
/* From a file; TS_MESH_AUTO goes by extension, then content. The message is
 * prefixed with the path. Adds TS_EIO; a file over opts.max_bytes is refused
 * (TS_ETOOBIG) before it is read. */
int ts_mesh_read_file(const char *path, int format, const ts_mesh_import_opts *opts,
                      ts_mesh **out, ts_mesh_read_info *info, char *err, size_t errcap);

struct ts_mesh_report;
/* The import pipeline: read, then repair what is safe (weld with
 * opts.weld_tol when >= 0, drop degenerate and duplicate triangles and unused
 * vertices, flip a closed mesh that is inside out), then validate
 * (ts_mesh_check.h). Anything left (non-finite or huge coordinates,
 * non-manifold edges or vertices, inconsistent winding, an empty mesh) is
 * refused with TS_EMESH and a message naming the place in the file (line, or
 * facet/face number for binary files). rep and info may be NULL.
 * Returns 0, TS_EMESH, TS_ETOOBIG, TS_EINVAL, TS_ENOMEM (and TS_EIO for
 * ts_mesh_import_file). */
int ts_mesh_import(const void *buf, size_t len, int format, const ts_mesh_import_opts *opts,
                   ts_mesh **out, struct ts_mesh_report *rep, ts_mesh_read_info *info, char *err,
                   size_t errcap);
int ts_mesh_import_file(const char *path, int format, const ts_mesh_import_opts *opts,
                        ts_mesh **out, struct ts_mesh_report *rep, ts_mesh_read_info *info,
                        char *err, size_t errcap);

/* OBJ writer: `v x y z` in metres with 17 significant digits (reading it back
 * gives the same doubles) and 1-based `f a b c`. *out is malloc'd text of
 * *len bytes (NUL-terminated). Returns 0, TS_EINVAL (indices out of range),
 * TS_ETOOBIG or TS_ENOMEM. */
int ts_mesh_write_obj(const ts_mesh *m, char **out, size_t *len);
/* Same into a file. Returns 0, TS_EINVAL, TS_ETOOBIG, TS_ENOMEM or TS_EIO. */
int ts_mesh_write_obj_file(const ts_mesh *m, const char *path, char *err, size_t errcap);

#endif
