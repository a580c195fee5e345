/*
 * ts_mesh_io.c: the entry points of ts_mesh_io.h around the format readers
 * (ts_mesh_obj.c, ts_mesh_stl.c, ts_mesh_ply.c): default options, format
 * detection by name and by content, reading whole files within the byte
 * limit, and the import pipeline (read, repair what is safe, validate with
 * the file's own line numbers in the message, orient a closed mesh outward).
 * Only C11 stdio is used for files, so the core stays free of POSIX.
 */
#include "ts_mesh_io.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ts_error.h"
#include "ts_mesh_check.h"
#include "ts_mesh_read.h"

ts_mesh_import_opts ts_mesh_import_opts_default(void) {
  ts_mesh_import_opts o;
  memset(&o, 0, sizeof o);
  o.scale = 1.0;
  o.weld_tol = 1e-8;
  o.degenerate_rel = 1e-9;
  o.max_abs_coord = 10.0;
  o.max_verts = 1000000;
  o.max_tris = 2000000;
  o.max_bytes = (size_t)256 << 20;
  return o;
}

static int ieq(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

int ts_mesh_format_from_name(const char *name) {
  if (!name) return TS_MESH_AUTO;
  const char *dot = strrchr(name, '.');
  const char *ext = dot ? dot + 1 : name;
  if (ieq(ext, "obj")) return TS_MESH_OBJ;
  if (ieq(ext, "stl")) return TS_MESH_STL;
  if (ieq(ext, "ply")) return TS_MESH_PLY;
  return TS_MESH_AUTO;
}

static uint32_t count_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int ts_mesh_detect_format(const void *buf, size_t len) {
  const uint8_t *b = buf;
  if (!b || len == 0) return TS_MESH_AUTO;
  if (len >= 4 && memcmp(b, "ply", 3) == 0 && (b[3] == '\n' || b[3] == '\r'))
    return TS_MESH_PLY;
  if (len >= 84 && 84 + 50 * (uint64_t)count_le32(b + 80) == len) return TS_MESH_STL;
  size_t n = len < 1024 ? len : 1024, i = 0;
  for (size_t k = 0; k < n; k++)
    if (b[k] == 0 || (b[k] < 0x20 && !isspace(b[k])))
      /* not text: binary STL is the only binary format without a magic (its
       * reader explains a size that does not match) */
      return len >= 84 ? TS_MESH_STL : TS_MESH_AUTO;
  while (i < n && isspace(b[i])) i++;
  if (n - i >= 6 && memcmp(b + i, "solid", 5) == 0 && isspace(b[i + 5])) return TS_MESH_STL;
  return TS_MESH_OBJ;
}

static int read_any(const uint8_t *buf, size_t len, int format, const ts_mesh_import_opts *o,
                    ts_mesh **out, ts__mesh_prov *prov, ts_mesh_read_info *info, char *err,
                    size_t cap) {
  if (len > o->max_bytes) {
    ts__mesh_err(err, cap, "mesh file of %zu bytes, over the limit of %zu", len, o->max_bytes);
    return TS_ETOOBIG;
  }
  if (len == 0) {
    ts__mesh_err(err, cap, "empty file");
    return TS_EMESH;
  }
  if (format == TS_MESH_AUTO) format = ts_mesh_detect_format(buf, len);
  switch (format) {
  case TS_MESH_OBJ: return ts__read_obj(buf, len, o, out, prov, info, err, cap);
  case TS_MESH_STL: return ts__read_stl(buf, len, o, out, prov, info, err, cap);
  case TS_MESH_PLY: return ts__read_ply(buf, len, o, out, prov, info, err, cap);
  default:
    ts__mesh_err(err, cap, "unrecognised mesh format (expected OBJ, STL or PLY)");
    return TS_EMESH;
  }
}

/* Common argument handling of the buffer readers. */
static int entry(const void *buf, size_t len, int format, const ts_mesh_import_opts *opts,
                 ts_mesh **out, ts_mesh_read_info *info, char *err, size_t cap) {
  if (err && cap) err[0] = 0;
  if (!out || (!buf && len)) {
    ts__mesh_err(err, cap, "invalid argument");
    return TS_EINVAL;
  }
  *out = NULL;
  if (info) memset(info, 0, sizeof *info);
  ts_mesh_import_opts d = ts_mesh_import_opts_default();
  const ts_mesh_import_opts *o = opts ? opts : &d;
  int rc = ts__mesh_opts_ok(o, err, cap);
  if (rc) return rc;
  return read_any(buf, len, format, o, out, NULL, info, err, cap);
}

int ts_mesh_read_obj(const void *buf, size_t len, const ts_mesh_import_opts *opts, ts_mesh **out,
                     ts_mesh_read_info *info, char *err, size_t errcap) {
  return entry(buf, len, TS_MESH_OBJ, opts, out, info, err, errcap);
}

int ts_mesh_read_stl(const void *buf, size_t len, const ts_mesh_import_opts *opts, ts_mesh **out,
                     ts_mesh_read_info *info, char *err, size_t errcap) {
  return entry(buf, len, TS_MESH_STL, opts, out, info, err, errcap);
}

int ts_mesh_read_ply(const void *buf, size_t len, const ts_mesh_import_opts *opts, ts_mesh **out,
                     ts_mesh_read_info *info, char *err, size_t errcap) {
  return entry(buf, len, TS_MESH_PLY, opts, out, info, err, errcap);
}

int ts_mesh_read(const void *buf, size_t len, int format, const ts_mesh_import_opts *opts,
                 ts_mesh **out, ts_mesh_read_info *info, char *err, size_t errcap) {
  if (format < TS_MESH_AUTO || format > TS_MESH_PLY) {
    ts__mesh_err(err, errcap, "unknown mesh format %d", format);
    return TS_EINVAL;
  }
  return entry(buf, len, format, opts, out, info, err, errcap);
}

/* The whole pipeline on a buffer; o already checked. */
/* A mesh whose whole extent is within a few weld tolerances would be welded
 * into a different shape (a 1 m cube read at scale 8e-9 is 8 nm across
 * against the 10 nm default: some corners merge and what is left can still
 * be a closed surface). Anything that small is a units mistake, so the
 * pipeline refuses it before welding rather than silently reshaping it.
 * Non-finite coordinates are left to the repair step, which names them. */
static int too_small(const ts_mesh *m, const ts_mesh_import_opts *o, char *err, size_t cap) {
  if (!(o->weld_tol > 0) || !m->n_verts) return 0;
  double ext = 0;
  for (int c = 0; c < 3; c++) {
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t i = 0; i < m->n_verts; i++) {
      double x = m->v[i][c];
      if (!isfinite(x)) return 0;
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
    if (hi - lo > ext) ext = hi - lo;
  }
  if (ext >= TS_MESH_MIN_EXTENT_WELDS * o->weld_tol) return 0;
  ts__mesh_err(err, cap,
               "the mesh is %.3g m across (after scale %g), under %g m (%d times the weld "
               "tolerance of %g m): is the scale (units) right?",
               ext, o->scale, TS_MESH_MIN_EXTENT_WELDS * o->weld_tol, TS_MESH_MIN_EXTENT_WELDS,
               o->weld_tol);
  return TS_EMESH;
}

static int import(const uint8_t *buf, size_t len, int format, const ts_mesh_import_opts *o,
                  ts_mesh **out, ts_mesh_report *rep, ts_mesh_read_info *info, char *err,
                  size_t cap) {
  ts_mesh_read_info inf;
  memset(&inf, 0, sizeof inf);
  ts__mesh_prov prov = {0};
  ts_mesh *m = NULL;
  int rc = read_any(buf, len, format, o, &m, &prov, &inf, err, cap);
  if (rc) return rc;
  rc = too_small(m, o, err, cap);
  if (rc) {
    ts__mesh_prov_free(&prov);
    ts_mesh_free(m);
    return rc;
  }
  ts_mesh_repair_stats st;
  rc = ts__mesh_repair(m, o, &prov, &st, err, cap);
  if (!rc && m->n_tris == 0) {
    ts__mesh_err(err, cap,
                 "no triangles left after dropping %u degenerate and %u duplicate triangles",
                 st.degenerate, st.duplicate);
    rc = TS_EMESH;
  }
  ts_mesh_report r;
  if (!rc) rc = ts__mesh_check(m, o, &prov, &r, err, cap);
  ts__mesh_prov_free(&prov);
  if (rc) {
    ts_mesh_free(m);
    return rc;
  }
  inf.welded += st.welded;
  inf.unused_dropped += st.unused;
  inf.degenerate_dropped = st.degenerate;
  inf.duplicate_dropped = st.duplicate;
  if (r.volume_valid && r.volume < 0) { /* closed and inside out */
    ts_mesh_flip(m);
    r.volume = -r.volume;
    inf.flipped = 1;
  }
  if (rep) *rep = r;
  if (info) *info = inf;
  *out = m;
  return 0;
}

int ts_mesh_import(const void *buf, size_t len, int format, const ts_mesh_import_opts *opts,
                   ts_mesh **out, struct ts_mesh_report *rep, ts_mesh_read_info *info, char *err,
                   size_t errcap) {
  if (err && errcap) err[0] = 0;
  if (!out || (!buf && len) || format < TS_MESH_AUTO || format > TS_MESH_PLY) {
    ts__mesh_err(err, errcap, "invalid argument");
    return TS_EINVAL;
  }
  *out = NULL;
  if (info) memset(info, 0, sizeof *info);
  ts_mesh_import_opts d = ts_mesh_import_opts_default();
  const ts_mesh_import_opts *o = opts ? opts : &d;
  int rc = ts__mesh_opts_ok(o, err, errcap);
  if (rc) return rc;
  return import(buf, len, format, o, out, rep, info, err, errcap);
}

/* Reads a whole file of at most max bytes. */
static int slurp(const char *path, size_t max, uint8_t **buf, size_t *len, char *err,
                 size_t cap) {
  *buf = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    ts__mesh_err(err, cap, "%s: %s", path, strerror(errno));
    return TS_EIO;
  }
  /* a directory opens, and its ftell says 2^63 - 1: "over the limit" */
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fclose(f);
    ts__mesh_err(err, cap, "%s: is a directory, not a mesh file", path);
    return TS_EIO;
  }
  /* a size hint refuses big files before reading them; the read below is
   * bounded anyway, for files whose size cannot be told */
  long hint = -1;
  if (fseek(f, 0, SEEK_END) == 0) hint = ftell(f);
  if (fseek(f, 0, SEEK_SET) != 0) hint = -1;
  if (hint >= 0 && (unsigned long)hint > max) {
    fclose(f);
    ts__mesh_err(err, cap, "%s: file of %ld bytes, over the limit of %zu", path, hint, max);
    return TS_ETOOBIG;
  }
  size_t capb = hint > 0 ? (size_t)hint + 1 : 65536, n = 0;
  if (capb > max + 1) capb = max + 1;
  uint8_t *b = malloc(capb);
  if (!b) {
    fclose(f);
    return TS_ENOMEM;
  }
  for (;;) {
    if (n == capb) {
      if (n > max) break;
      size_t nc = capb * 2 > max + 1 ? max + 1 : capb * 2;
      uint8_t *q = realloc(b, nc);
      if (!q) {
        free(b);
        fclose(f);
        return TS_ENOMEM;
      }
      b = q;
      capb = nc;
    }
    size_t got = fread(b + n, 1, capb - n, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  int eno = errno;
  fclose(f);
  if (bad) {
    free(b);
    ts__mesh_err(err, cap, "%s: read error: %s", path, strerror(eno));
    return TS_EIO;
  }
  if (n > max) {
    free(b);
    ts__mesh_err(err, cap, "%s: file over the limit of %zu bytes", path, max);
    return TS_ETOOBIG;
  }
  *buf = b;
  *len = n;
  return 0;
}

typedef int (*buf_fn)(const uint8_t *, size_t, int, const ts_mesh_import_opts *, ts_mesh **,
                      ts_mesh_report *, ts_mesh_read_info *, char *, size_t);

static int read_plain(const uint8_t *buf, size_t len, int format, const ts_mesh_import_opts *o,
                      ts_mesh **out, ts_mesh_report *rep, ts_mesh_read_info *info, char *err,
                      size_t cap) {
  (void)rep;
  return read_any(buf, len, format, o, out, NULL, info, err, cap);
}

static int from_file(buf_fn fn, const char *path, int format, const ts_mesh_import_opts *opts,
                     ts_mesh **out, ts_mesh_report *rep, ts_mesh_read_info *info, char *err,
                     size_t cap) {
  if (err && cap) err[0] = 0;
  if (!path || !out || format < TS_MESH_AUTO || format > TS_MESH_PLY) {
    ts__mesh_err(err, cap, "invalid argument");
    return TS_EINVAL;
  }
  *out = NULL;
  if (info) memset(info, 0, sizeof *info);
  ts_mesh_import_opts d = ts_mesh_import_opts_default();
  const ts_mesh_import_opts *o = opts ? opts : &d;
  int rc = ts__mesh_opts_ok(o, err, cap);
  if (rc) return rc;
  uint8_t *buf;
  size_t len;
  if ((rc = slurp(path, o->max_bytes, &buf, &len, err, cap))) return rc;
  if (format == TS_MESH_AUTO) format = ts_mesh_format_from_name(path);
  char msg[512];
  msg[0] = 0;
  rc = fn(buf, len, format, o, out, rep, info, msg, sizeof msg);
  free(buf);
  if (rc) ts__mesh_err(err, cap, "%s: %s", path, msg);
  return rc;
}

int ts_mesh_read_file(const char *path, int format, const ts_mesh_import_opts *opts,
                      ts_mesh **out, ts_mesh_read_info *info, char *err, size_t errcap) {
  return from_file(read_plain, path, format, opts, out, NULL, info, err, errcap);
}

int ts_mesh_import_file(const char *path, int format, const ts_mesh_import_opts *opts,
                        ts_mesh **out, struct ts_mesh_report *rep, ts_mesh_read_info *info,
                        char *err, size_t errcap) {
  return from_file(import, path, format, opts, out, rep, info, err, errcap);
}

int ts_mesh_write_obj_file(const ts_mesh *m, const char *path, char *err, size_t errcap) {
  if (!path) return TS_EINVAL;
  char *s;
  size_t n;
  int rc = ts_mesh_write_obj(m, &s, &n);
  if (rc) {
    ts__mesh_err(err, errcap, "%s: cannot write the mesh (%s)", path, ts_strerror(rc));
    return rc;
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    ts__mesh_err(err, errcap, "%s: %s", path, strerror(errno));
    free(s);
    return TS_EIO;
  }
  size_t w = fwrite(s, 1, n, f);
  int bad = w != n;
  if (fclose(f) != 0) bad = 1;
  free(s);
  if (bad) {
    ts__mesh_err(err, errcap, "%s: write error", path);
    return TS_EIO;
  }
  return 0;
}
