/*
 * materials.c: material fits between the core (ts_fit, ts_csv), the
 * database (ts_storage) and their users, the daemon and tissuetool; see
 * materials.h for the contract.
 *
 * Keys are checked here, before storage sees them, because storage accepts
 * any non-empty text: the direction must be one of the law's two, the layer
 * one the tissue has, names short and plain enough to type on a command line
 * and to print in JSON without escaping surprises.
 */
#include "materials.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_storage.h"

#ifndef TS_DEFAULT_MATERIALS
#define TS_DEFAULT_MATERIALS "storage/defaults/stomach-wall-materials.csv"
#endif

/* Largest default table accepted (rows). */
#define TS__TABLE_MAX_ROWS 1024
#define TS__TABLE_COLUMNS 9

static const char *const ts__table_header[TS__TABLE_COLUMNS] = {
    "tissue", "layer", "direction", "name", "a", "b", "rmse", "r2", "samples"};

static int fail(char *err, size_t cap, int code, const char *fmt, ...) {
  if (err && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return code;
}

static int storage_fail(ts_storage *st, int code, char *err, size_t cap, const char *what) {
  return fail(err, cap, code, "%s: %s", what, ts_storage_errmsg(st));
}

static void ok(char *err, size_t cap) {
  if (err && cap) err[0] = '\0';
}

const char *ts_materials_default_table(void) { return TS_DEFAULT_MATERIALS; }

static const char *name_or_default(const char *name) {
  return name && *name ? name : TS_MATERIALS_DEFAULT_NAME;
}

/* ---- key checks ------------------------------------------------------------ */

static int is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* 1..max characters of [A-Za-z0-9_.-], starting with a letter or digit. */
static int check_word(const char *what, const char *s, size_t max, char *err, size_t cap) {
  if (!s || !*s) return fail(err, cap, TS_EINVAL, "no %s given", what);
  size_t n = strlen(s);
  if (n > max)
    return fail(err, cap, TS_EINVAL, "%s '%.20s...' is longer than %zu characters", what, s, max);
  if (!is_alnum(s[0]))
    return fail(err, cap, TS_EINVAL, "%s '%s' must start with a letter or digit", what, s);
  for (size_t i = 0; i < n; i++)
    if (!is_alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
      return fail(err, cap, TS_EINVAL, "%s '%s' may only contain letters, digits, '_', '.' and '-'",
                  what, s);
  return 0;
}

static int check_direction(const char *d, char *err, size_t cap) {
  if (d && (strcmp(d, "axial") == 0 || strcmp(d, "radial") == 0)) return 0;
  return fail(err, cap, TS_EINVAL, "direction '%s' must be axial or radial", d ? d : "");
}

/* Does the tissue's layer_spec list this layer? A spec without a "layers"
 * list accepts any layer. */
static int layer_in_spec(const char *spec, const char *layer) {
  if (!spec || !strstr(spec, "\"layers\"")) return 1;
  char quoted[TS_MATERIAL_TEXT_MAX + 3];
  snprintf(quoted, sizeof quoted, "\"%s\"", layer);
  return strstr(spec, quoted) != NULL;
}

typedef struct names {
  char *buf;
  size_t cap, len;
  int count;
} names;

static void names_add(names *n, const char *s) {
  if (!n->cap) return;
  size_t l = strlen(s);
  const char *sep = n->count ? ", " : "";
  if (n->len + strlen(sep) + l + 1 < n->cap) {
    n->len += (size_t)snprintf(n->buf + n->len, n->cap - n->len, "%s%s", sep, s);
  } else if (n->len + 5 < n->cap && !strstr(n->buf, "...")) {
    n->len += (size_t)snprintf(n->buf + n->len, n->cap - n->len, ", ...");
  }
  n->count++;
}

static int collect_tissue_name(void *ud, const ts_tissue_rec *t) {
  names_add(ud, t->name);
  return 0;
}

/* Looks the tissue up: 0 with its id (and layer_spec copied to spec when
 * given), or TS_ENOTISSUE naming the tissues that exist. */
static int find_tissue(ts_storage *st, const char *tissue, int64_t *id, char *spec, size_t speccap,
                       char *err, size_t cap) {
  if (!tissue || !*tissue) return fail(err, cap, TS_EINVAL, "no tissue given");
  ts_tissue_rec t;
  int rc = ts_storage_get_tissue(st, tissue, &t);
  if (rc == 0) {
    *id = t.id;
    if (spec && speccap) snprintf(spec, speccap, "%s", t.layer_spec ? t.layer_spec : "");
    ts_storage_tissue_free(&t);
    return 0;
  }
  if (rc != TS_ENOTISSUE) return storage_fail(st, rc, err, cap, "looking up the tissue");
  char known[256] = "";
  names n = {known, sizeof known, 0, 0};
  ts_storage_list_tissues(st, collect_tissue_name, &n);
  return fail(err, cap, TS_ENOTISSUE, "no tissue '%s' in the catalog (known: %s)", tissue,
              n.count ? known : "none");
}

/* ---- records --------------------------------------------------------------- */

static void copy_text(char *dst, const char *src) {
  snprintf(dst, TS_MATERIAL_TEXT_MAX + 1, "%s", src ? src : "");
}

static void fill(ts_material *m, const ts_fit_rec *f, const char *tissue) {
  memset(m, 0, sizeof *m);
  m->id = f->id;
  copy_text(m->tissue, tissue);
  copy_text(m->layer, f->layer);
  copy_text(m->direction, f->direction);
  copy_text(m->name, f->name);
  m->a = f->a;
  m->b = f->b;
  m->rmse = f->rmse;
  m->r2 = f->r2;
  m->samples = f->samples;
  m->created = f->created;
}

/* Searches the fits of one tissue for (layer, direction, name), collecting
 * the names of the other fits for (layer, direction) into `others` on the
 * way (for messages). */
typedef struct finder {
  const char *tissue, *layer, *direction, *name;
  ts_material *out;
  int found;
  names others;
} finder;

static int find_cb(void *ud, const ts_fit_rec *f) {
  finder *fd = ud;
  if (strcmp(f->layer, fd->layer) != 0 || strcmp(f->direction, fd->direction) != 0) return 0;
  if (fd->name && strcmp(f->name, fd->name) == 0) {
    if (fd->out) fill(fd->out, f, fd->tissue);
    fd->found = 1;
    return 1; /* stop */
  }
  names_add(&fd->others, f->name);
  return 0;
}

/* 0 = not found, 1 = found (out filled), < 0 = storage error. */
static int find_fit(ts_storage *st, int64_t tissue_id, const char *tissue, const char *layer,
                    const char *direction, const char *name, ts_material *out, names *others) {
  finder fd = {tissue, layer, direction, name, out, 0, {NULL, 0, 0, 0}};
  if (others) fd.others = *others;
  int rc = ts_storage_list_fits(st, tissue_id, find_cb, &fd);
  if (others) *others = fd.others;
  if (rc < 0) return rc;
  return fd.found;
}

/* ---- the default table ----------------------------------------------------- */

typedef struct table_row {
  char tissue[TS_MATERIAL_TEXT_MAX + 1], layer[TS_MATERIAL_TEXT_MAX + 1];
  char direction[TS_MATERIAL_TEXT_MAX + 1], name[TS_MATERIAL_TEXT_MAX + 1];
  double a, b, rmse, r2;
  int64_t samples;
} table_row;

static int field_text(const ts_csv_field *f, char *dst, const char *what, char *err, size_t cap) {
  if (f->len > TS_MATERIAL_TEXT_MAX)
    return fail(err, cap, TS_EINVAL, "%s is longer than %d characters", what, TS_MATERIAL_TEXT_MAX);
  memcpy(dst, f->p, f->len);
  dst[f->len] = '\0';
  return check_word(what, dst, TS_MATERIAL_TEXT_MAX, err, cap) ? -1 : 0;
}

static int parse_row(const ts_csv_field *f, uint32_t line, table_row *r, char *err, size_t cap) {
  char msg[200];
  if (field_text(&f[0], r->tissue, "tissue", msg, sizeof msg) ||
      field_text(&f[1], r->layer, "layer", msg, sizeof msg) ||
      field_text(&f[2], r->direction, "direction", msg, sizeof msg) ||
      field_text(&f[3], r->name, "name", msg, sizeof msg) ||
      check_direction(r->direction, msg, sizeof msg))
    return fail(err, cap, TS_EINVAL, "line %u: %s", line, msg);
  double *num[4] = {&r->a, &r->b, &r->rmse, &r->r2};
  for (int i = 0; i < 4; i++) {
    int rc = ts_csv_parse_double(&f[4 + i], num[i]);
    if (rc)
      return fail(err, cap, rc, "line %u: %s '%.*s' is not a %s", line, ts__table_header[4 + i],
                  (int)(f[4 + i].len < 40 ? f[4 + i].len : 40), f[4 + i].p,
                  rc == TS_ENAN ? "finite number" : "number");
  }
  double samples;
  int rc = ts_csv_parse_double(&f[8], &samples);
  if (rc || samples < 0 || samples > 1e15 || samples != floor(samples))
    return fail(err, cap, TS_EINVAL, "line %u: samples '%.*s' is not a count", line,
                (int)(f[8].len < 40 ? f[8].len : 40), f[8].p);
  r->samples = (int64_t)samples;
  if (!(r->a > 0.0))
    return fail(err, cap, TS_EINVAL, "line %u: a must be positive (the law's stress)", line);
  if (r->rmse < 0.0) return fail(err, cap, TS_EINVAL, "line %u: rmse must not be negative", line);
  return 0;
}

/* Reads and checks the whole table: 0 with the rows and their count (the
 * caller frees the rows). */
static int parse_table(const char *buf, size_t len, table_row **rows, uint32_t *n, char *err,
                       size_t cap) {
  *rows = NULL;
  *n = 0;
  ts_csv_reader r;
  ts_csv_reader_init(&r, buf, len, 0);
  ts_csv_field f[TS__TABLE_COLUMNS];
  int k = ts_csv_next(&r, f, TS__TABLE_COLUMNS, err, cap);
  if (k < 0) return k;
  if (k == 0) return fail(err, cap, TS_EINVAL, "the material table is empty");
  int header_ok = k == TS__TABLE_COLUMNS;
  for (int i = 0; header_ok && i < TS__TABLE_COLUMNS; i++)
    header_ok = f[i].len == strlen(ts__table_header[i]) &&
                memcmp(f[i].p, ts__table_header[i], f[i].len) == 0;
  if (!header_ok)
    return fail(err, cap, TS_EINVAL,
                "line %u: the header must be tissue,layer,direction,name,a,b,rmse,r2,samples",
                r.line);
  table_row *out = calloc(TS__TABLE_MAX_ROWS, sizeof *out);
  if (!out) return fail(err, cap, TS_ENOMEM, "out of memory");
  uint32_t count = 0;
  int rc = 0;
  while ((k = ts_csv_next(&r, f, TS__TABLE_COLUMNS, err, cap)) != 0) {
    if (k < 0) {
      rc = k;
      break;
    }
    if (k != TS__TABLE_COLUMNS) {
      rc = fail(err, cap, TS_EINVAL, "line %u: expected %d fields, found %d", r.line,
                TS__TABLE_COLUMNS, k);
      break;
    }
    if (count == TS__TABLE_MAX_ROWS) {
      rc = fail(err, cap, TS_ETOOBIG, "line %u: more than %d rows", r.line, TS__TABLE_MAX_ROWS);
      break;
    }
    if ((rc = parse_row(f, r.line, &out[count], err, cap))) break;
    for (uint32_t j = 0; j < count; j++)
      if (!strcmp(out[j].tissue, out[count].tissue) && !strcmp(out[j].layer, out[count].layer) &&
          !strcmp(out[j].direction, out[count].direction) && !strcmp(out[j].name, out[count].name))
        rc = fail(err, cap, TS_EINVAL, "line %u: the key %s/%s/%s/%s appears twice", r.line,
                  out[count].tissue, out[count].layer, out[count].direction, out[count].name);
    if (rc) break;
    count++;
  }
  if (!rc && count == 0) rc = fail(err, cap, TS_EINVAL, "the material table has no rows");
  if (rc) {
    free(out);
    return rc;
  }
  *rows = out;
  *n = count;
  return 0;
}

/* Creates the tissue of rows[i] if the catalog lacks it, with the layers the
 * table lists for it in order of first appearance. */
static int ensure_tissue(ts_storage *st, const table_row *rows, uint32_t n, uint32_t i, int64_t *id,
                         char *err, size_t cap) {
  ts_tissue_rec t;
  int rc = ts_storage_get_tissue(st, rows[i].tissue, &t);
  if (rc == 0) {
    *id = t.id;
    ts_storage_tissue_free(&t);
    return 0;
  }
  if (rc != TS_ENOTISSUE) return storage_fail(st, rc, err, cap, "looking up a tissue");
  char spec[1024];
  size_t len = (size_t)snprintf(spec, sizeof spec, "{\"layers\":[");
  int listed = 0;
  for (uint32_t j = 0; j < n; j++) {
    if (strcmp(rows[j].tissue, rows[i].tissue) != 0) continue;
    int seen = 0;
    for (uint32_t k = 0; k < j && !seen; k++)
      seen = !strcmp(rows[k].tissue, rows[i].tissue) && !strcmp(rows[k].layer, rows[j].layer);
    if (seen) continue;
    if (len + strlen(rows[j].layer) + 8 >= sizeof spec)
      return fail(err, cap, TS_ETOOBIG, "tissue %s lists too many layers", rows[i].tissue);
    len += (size_t)snprintf(spec + len, sizeof spec - len, "%s\"%s\"", listed ? "," : "",
                            rows[j].layer);
    listed++;
  }
  snprintf(spec + len, sizeof spec - len, "]}");
  ts_tissue_rec nt;
  memset(&nt, 0, sizeof nt);
  nt.name = rows[i].tissue;
  nt.kind = "builtin";
  nt.mesh_hash = "";
  nt.layer_spec = spec;
  int64_t tid = ts_storage_put_tissue(st, &nt);
  if (tid <= 0) return storage_fail(st, (int)tid, err, cap, "creating a tissue");
  *id = tid;
  return 0;
}

int ts_materials_load_table(ts_storage *st, const char *buf, size_t len, char *err, size_t errcap) {
  if (!st) return fail(err, errcap, TS_EINVAL, "no database");
  table_row *rows;
  uint32_t n;
  int rc = parse_table(buf, len, &rows, &n, err, errcap);
  if (rc) return rc;
  int inserted = 0;
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    const table_row *r = &rows[i];
    int64_t tid = 0;
    if ((rc = ensure_tissue(st, rows, n, i, &tid, err, errcap))) break;
    int found = find_fit(st, tid, r->tissue, r->layer, r->direction, r->name, NULL, NULL);
    if (found < 0) {
      rc = storage_fail(st, found, err, errcap, "reading material fits");
      break;
    }
    if (found) continue; /* present: never overwrite */
    ts_fit_rec f;
    memset(&f, 0, sizeof f);
    f.tissue = tid;
    f.layer = r->layer;
    f.direction = r->direction;
    f.name = r->name;
    f.a = r->a;
    f.b = r->b;
    f.rmse = r->rmse;
    f.r2 = r->r2;
    f.samples = r->samples;
    int64_t id = ts_storage_put_fit(st, &f);
    if (id <= 0) {
      rc = storage_fail(st, (int)id, err, errcap, "storing a default material");
      break;
    }
    inserted++;
  }
  free(rows);
  if (rc) return rc;
  ok(err, errcap);
  return inserted;
}

int ts_materials_load_defaults(ts_storage *st, const char *path, char *err, size_t errcap) {
  if (!path) path = ts_materials_default_table();
  FILE *f = fopen(path, "rb");
  if (!f) return fail(err, errcap, TS_EIO, "cannot open the material table %s", path);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  int rc = buf ? 0 : fail(err, errcap, TS_ENOMEM, "out of memory");
  while (!rc) {
    if (n == cap) {
      if (cap >= ((size_t)1 << 20)) {
        rc = fail(err, errcap, TS_ETOOBIG, "%s: the material table is over 1 MiB", path);
        break;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        rc = fail(err, errcap, TS_ENOMEM, "out of memory");
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) rc = fail(err, errcap, TS_EIO, "cannot read the material table %s", path);
      break;
    }
  }
  fclose(f);
  if (!rc) {
    char msg[256];
    rc = ts_materials_load_table(st, buf, n, msg, sizeof msg);
    if (rc < 0)
      fail(err, errcap, rc, "%s: %s", path, msg);
    else
      ok(err, errcap);
  }
  free(buf);
  return rc;
}

/* ---- fitting --------------------------------------------------------------- */

/* Checks a key for writing: 0 with the tissue id, or an error. */
static int check_key(ts_storage *st, const char *tissue, const char *layer, const char *direction,
                     const char *name, int64_t *tid, char *err, size_t cap) {
  int rc;
  if ((rc = check_word("tissue", tissue, TS_MATERIAL_TEXT_MAX, err, cap)) ||
      (rc = check_word("layer", layer, TS_MATERIAL_TEXT_MAX, err, cap)) ||
      (rc = check_direction(direction, err, cap)) ||
      (rc = check_word("name", name, TS_MATERIAL_TEXT_MAX, err, cap)))
    return rc;
  char spec[1024];
  if ((rc = find_tissue(st, tissue, tid, spec, sizeof spec, err, cap))) return rc;
  if (!layer_in_spec(spec, layer))
    return fail(err, cap, TS_EINVAL, "tissue %s has no layer '%s' (its layer spec: %s)", tissue,
                layer, spec);
  return 0;
}

int ts_materials_fit_samples(ts_storage *st, const char *tissue, const char *layer,
                             const char *direction, const char *name, const ts_samples *s,
                             ts_material *out, ts_expfit *fit, char *err, size_t errcap) {
  if (!st || !s || !out) return fail(err, errcap, TS_EINVAL, "bad arguments");
  if (!name || !*name) /* see materials.h: never "default" by omission */
    return fail(err, errcap, TS_EINVAL,
                "a fit needs a name (the shipped fits are \"%s\"; that name replaces them)",
                TS_MATERIALS_DEFAULT_NAME);
  int64_t tid = 0;
  int rc = check_key(st, tissue, layer, direction, name, &tid, err, errcap);
  if (rc) return rc;
  ts_expfit fr;
  if ((rc = ts_fit_exp(s->strain, s->stress, s->line, s->n, &fr, err, errcap))) return rc;
  ts_fit_rec f;
  memset(&f, 0, sizeof f);
  f.tissue = tid;
  f.layer = layer;
  f.direction = direction;
  f.name = name;
  f.a = fr.a;
  f.b = fr.b;
  f.rmse = fr.rmse;
  f.r2 = fr.r2;
  f.samples = fr.n;
  int64_t id = ts_storage_put_fit(st, &f);
  if (id <= 0) return storage_fail(st, (int)id, err, errcap, "storing the fit");
  /* read it back: what the caller reports is what is stored */
  int found = find_fit(st, tid, tissue, layer, direction, name, out, NULL);
  if (found < 0) return storage_fail(st, found, err, errcap, "reading the fit back");
  if (!found) return fail(err, errcap, TS_ESTORAGE, "the stored fit cannot be read back");
  if (fit) *fit = fr;
  ok(err, errcap);
  return 0;
}

int ts_materials_fit_csv(ts_storage *st, const char *tissue, const char *layer,
                         const char *direction, const char *name, const char *csv, size_t len,
                         ts_material *out, ts_expfit *fit, char *err, size_t errcap) {
  ts_samples s;
  int rc = ts_csv_read_samples(csv, len, NULL, &s, err, errcap);
  if (rc) return rc;
  rc = ts_materials_fit_samples(st, tissue, layer, direction, name, &s, out, fit, err, errcap);
  ts_samples_free(&s);
  return rc;
}

/* ---- resolving and listing -------------------------------------------------- */

int ts_materials_resolve(ts_storage *st, const char *tissue, const char *layer,
                         const char *direction, const char *name, ts_material *out, char *err,
                         size_t errcap) {
  if (!st || !out) return fail(err, errcap, TS_EINVAL, "bad arguments");
  name = name_or_default(name);
  int rc;
  if (!layer || !*layer) return fail(err, errcap, TS_EINVAL, "no layer given");
  if ((rc = check_direction(direction, err, errcap))) return rc;
  int64_t tid = 0;
  if ((rc = find_tissue(st, tissue, &tid, NULL, 0, err, errcap))) return rc;
  char others[200] = "";
  names n = {others, sizeof others, 0, 0};
  int found = find_fit(st, tid, tissue, layer, direction, name, out, &n);
  if (found < 0) return storage_fail(st, found, err, errcap, "reading material fits");
  if (!found)
    return fail(err, errcap, TS_EINVAL, "no material fit '%s' for %s/%s/%s (stored: %s)", name,
                tissue, layer, direction, n.count ? others : "none");
  ok(err, errcap);
  return 0;
}

int ts_materials_resolve_layers(ts_storage *st, const char *tissue, const char *name,
                                const char *const *layers, uint32_t n_layers, ts_material *axial,
                                ts_material *radial, char *err, size_t errcap) {
  if (!st || (n_layers && (!layers || !axial || !radial)))
    return fail(err, errcap, TS_EINVAL, "bad arguments");
  name = name_or_default(name);
  int64_t tid = 0;
  int rc = find_tissue(st, tissue, &tid, NULL, 0, err, errcap);
  if (rc) return rc;
  int named = 0;
  for (uint32_t i = 0; i < n_layers; i++) {
    if (!layers[i] || !*layers[i]) return fail(err, errcap, TS_EINVAL, "layer %u has no name", i);
    for (int d = 0; d < 2; d++) {
      const char *dir = d ? "radial" : "axial";
      ts_material *m = d ? &radial[i] : &axial[i];
      int found = find_fit(st, tid, tissue, layers[i], dir, name, m, NULL);
      if (found < 0) return storage_fail(st, found, err, errcap, "reading material fits");
      if (found) {
        named++;
        continue;
      }
      found = find_fit(st, tid, tissue, layers[i], dir, TS_MATERIALS_DEFAULT_NAME, m, NULL);
      if (found < 0) return storage_fail(st, found, err, errcap, "reading material fits");
      if (!found)
        return fail(err, errcap, TS_EINVAL, "no material fit '%s' or '%s' for %s/%s/%s", name,
                    TS_MATERIALS_DEFAULT_NAME, tissue, layers[i], dir);
    }
  }
  if (n_layers && !named)
    return fail(err, errcap, TS_EINVAL, "no material fits named '%s' for tissue %s", name, tissue);
  ok(err, errcap);
  return 0;
}

/* Tissue names by id, for listing. */
typedef struct tissue_map {
  int64_t *ids;
  char (*names)[TS_MATERIAL_TEXT_MAX + 1];
  size_t n, cap;
  int oom;
} tissue_map;

static int map_tissue(void *ud, const ts_tissue_rec *t) {
  tissue_map *m = ud;
  if (m->n == m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 16;
    int64_t *ids = realloc(m->ids, nc * sizeof *ids);
    if (!ids) return m->oom = 1;
    m->ids = ids;
    char(*nn)[TS_MATERIAL_TEXT_MAX + 1] = realloc(m->names, nc * sizeof *nn);
    if (!nn) return m->oom = 1;
    m->names = nn;
    m->cap = nc;
  }
  m->ids[m->n] = t->id;
  copy_text(m->names[m->n], t->name);
  m->n++;
  return 0;
}

typedef struct lister {
  tissue_map *map;
  ts_materials_cb cb;
  void *ud;
  int stopped; /* the caller's callback returned this non-zero value */
} lister;

static int list_cb(void *ud, const ts_fit_rec *f) {
  lister *l = ud;
  const char *tname = "?";
  for (size_t i = 0; i < l->map->n; i++)
    if (l->map->ids[i] == f->tissue) tname = l->map->names[i];
  ts_material m;
  fill(&m, f, tname);
  l->stopped = l->cb(l->ud, &m);
  return l->stopped;
}

int ts_materials_list(ts_storage *st, const char *tissue, ts_materials_cb cb, void *ud, char *err,
                      size_t errcap) {
  if (!st || !cb) return fail(err, errcap, TS_EINVAL, "bad arguments");
  int64_t tid = 0;
  int rc;
  if (tissue && *tissue && (rc = find_tissue(st, tissue, &tid, NULL, 0, err, errcap))) return rc;
  tissue_map map = {0};
  rc = ts_storage_list_tissues(st, map_tissue, &map);
  if (map.oom)
    rc = fail(err, errcap, TS_ENOMEM, "out of memory");
  else if (rc < 0)
    rc = storage_fail(st, rc, err, errcap, "listing tissues");
  if (!rc) {
    lister l = {&map, cb, ud, 0};
    rc = ts_storage_list_fits(st, tid, list_cb, &l);
    if (l.stopped)
      rc = l.stopped; /* the callback's own stop value is passed on */
    else if (rc < 0)
      rc = storage_fail(st, rc, err, errcap, "listing fits");
    else
      ok(err, errcap);
  }
  free(map.ids);
  free(map.names);
  return rc;
}
