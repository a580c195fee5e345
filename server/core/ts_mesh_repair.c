/*
 * ts_mesh_repair.c: the safe repairs of ts_mesh_check.h: vertex welding,
 * dropping degenerate and duplicate triangles and unused vertices, flipping.
 *
 * Welding is greedy in vertex order: each vertex merges into the
 * lowest-numbered earlier representative within the tolerance, else becomes a
 * representative itself. Candidates come from a uniform grid with cells of
 * the tolerance's size (the 27 cells around a vertex hold every point within
 * tol), built by sorting the cell keys; only representatives are kept in the
 * per-cell lists, and representatives are more than tol apart, so each
 * lookup visits a bounded number of them whatever the tolerance (sphere
 * packing) and the whole weld is O(n log n). Tolerance 0 welds equal
 * coordinates only (sorted, exact comparison).
 *
 * Every step keeps the optional provenance (ts_mesh_read.h) in step, so the
 * import can still name file lines afterwards.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_mesh_read.h"

typedef struct cell_key {
  int64_t c[3];
  uint32_t v;
} cell_key;

static int cmp_cell(const void *pa, const void *pb) {
  const cell_key *a = pa, *b = pb;
  for (int i = 0; i < 3; i++)
    if (a->c[i] != b->c[i]) return a->c[i] < b->c[i] ? -1 : 1;
  return a->v < b->v ? -1 : a->v > b->v;
}

/* First index in the sorted unique cells equal to c, or -1. */
static int64_t find_cell(const cell_key *cells, uint32_t n, const int64_t c[3]) {
  uint32_t lo = 0, hi = n;
  cell_key key = {{c[0], c[1], c[2]}, 0};
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    int r = cmp_cell(&cells[mid], &key);
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < n && cells[lo].c[0] == c[0] && cells[lo].c[1] == c[1] && cells[lo].c[2] == c[2])
    return lo;
  return -1;
}

/* Applies the vertex map rep[] (old -> representative, rep[i] <= i, rep of a
 * representative is itself): representatives are renumbered in order. */
static void apply_map(ts_mesh *m, ts__mesh_prov *prov, uint32_t *rep, uint32_t *merged) {
  uint32_t nv = m->n_verts, k = 0;
  for (uint32_t i = 0; i < nv; i++) {
    if (rep[i] == i) {
      memmove(m->v[k], m->v[i], sizeof m->v[0]);
      if (prov && prov->vert_where) prov->vert_where[k] = prov->vert_where[i];
      rep[i] = k++;
    } else {
      rep[i] = rep[rep[i]]; /* the representative is earlier: already renumbered */
    }
  }
  for (uint32_t t = 0; t < m->n_tris; t++)
    for (int c = 0; c < 3; c++) m->t[t][c] = rep[m->t[t][c]];
  if (merged) *merged = nv - k;
  m->n_verts = k;
}

static int valid_input(const ts_mesh *m) {
  for (uint32_t t = 0; t < m->n_tris; t++)
    for (int c = 0; c < 3; c++)
      if (m->t[t][c] >= m->n_verts) return 0;
  for (uint32_t i = 0; i < m->n_verts; i++)
    for (int c = 0; c < 3; c++)
      if (!isfinite(m->v[i][c])) return 0;
  return 1;
}

int ts__mesh_weld(ts_mesh *m, double tol, ts__mesh_prov *prov, uint32_t *merged) {
  if (merged) *merged = 0;
  if (!m || !(tol >= 0) || !isfinite(tol) || !valid_input(m)) return TS_EINVAL;
  const uint32_t nv = m->n_verts;
  if (nv < 2) return 0;
  const double lim = 1125899906842624.0; /* 2^50 cells across */
  for (uint32_t i = 0; i < nv; i++)
    for (int c = 0; c < 3; c++)
      if (tol > 0 && !(fabs(m->v[i][c]) / tol < lim)) return TS_EINVAL;
  cell_key *keys = malloc(sizeof *keys * nv);
  uint32_t *rep = malloc(sizeof *rep * nv);
  uint32_t *cell_of = malloc(sizeof *cell_of * nv);
  uint32_t *head = malloc(sizeof *head * nv);
  uint32_t *next = malloc(sizeof *next * nv);
  if (!keys || !rep || !cell_of || !head || !next) {
    free(keys), free(rep), free(cell_of), free(head), free(next);
    return TS_ENOMEM;
  }
  if (tol == 0) {
    /* exact: sort by coordinates, each run of equal points merges into its
     * lowest index (the first of the run, as the index breaks ties) */
    for (uint32_t i = 0; i < nv; i++) {
      for (int c = 0; c < 3; c++) {
        double x = m->v[i][c] == 0 ? 0.0 : m->v[i][c]; /* -0 == 0 */
        int64_t b;
        memcpy(&b, &x, sizeof b);
        keys[i].c[c] = b < 0 ? INT64_MIN - b - 1 : b; /* order-preserving for doubles */
      }
      keys[i].v = i;
    }
    qsort(keys, nv, sizeof *keys, cmp_cell);
    for (uint32_t s = 0; s < nv;) {
      uint32_t e = s + 1;
      while (e < nv && memcmp(keys[e].c, keys[s].c, sizeof keys[s].c) == 0) e++;
      for (uint32_t k = s; k < e; k++) rep[keys[k].v] = keys[s].v;
      s = e;
    }
  } else {
    for (uint32_t i = 0; i < nv; i++) {
      for (int c = 0; c < 3; c++) keys[i].c[c] = (int64_t)floor(m->v[i][c] / tol);
      keys[i].v = i;
    }
    qsort(keys, nv, sizeof *keys, cmp_cell);
    /* unique cells in place (keys[0..nc)), cell number of every vertex */
    uint32_t nc = 0;
    for (uint32_t s = 0; s < nv; s++) {
      if (nc == 0 || memcmp(keys[s].c, keys[nc - 1].c, sizeof keys[s].c) != 0) keys[nc++] = keys[s];
      cell_of[keys[s].v] = nc - 1;
    }
    for (uint32_t c = 0; c < nc; c++) head[c] = UINT32_MAX;
    const double tol2 = tol * tol;
    for (uint32_t i = 0; i < nv; i++) {
      const double *p = m->v[i];
      int64_t ci[3];
      for (int c = 0; c < 3; c++) ci[c] = (int64_t)floor(p[c] / tol);
      uint32_t best = i;
      for (int dz = -1; dz <= 1; dz++)
        for (int dy = -1; dy <= 1; dy++)
          for (int dx = -1; dx <= 1; dx++) {
            int64_t cc[3] = {ci[0] + dx, ci[1] + dy, ci[2] + dz};
            int64_t cell = find_cell(keys, nc, cc);
            if (cell < 0) continue;
            for (uint32_t j = head[cell]; j != UINT32_MAX; j = next[j]) {
              const double *q = m->v[j];
              double d2 = (p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) +
                          (p[2] - q[2]) * (p[2] - q[2]);
              if (d2 <= tol2 && j < best) best = j;
            }
          }
      rep[i] = best;
      if (best == i) {
        next[i] = head[cell_of[i]];
        head[cell_of[i]] = i;
      }
    }
  }
  apply_map(m, prov, rep, merged);
  free(keys), free(rep), free(cell_of), free(head), free(next);
  return 0;
}

int ts_mesh_weld(ts_mesh *m, double tol, uint32_t *merged) {
  return ts__mesh_weld(m, tol, NULL, merged);
}

int ts__mesh_tri_degenerate(const ts_mesh *m, uint32_t k, double rel) {
  const uint32_t *t = m->t[k];
  if (t[0] == t[1] || t[1] == t[2] || t[0] == t[2]) return 1;
  const double *a = m->v[t[0]], *b = m->v[t[1]], *c = m->v[t[2]];
  double u[3], w[3], z[3];
  for (int i = 0; i < 3; i++) u[i] = b[i] - a[i], w[i] = c[i] - a[i], z[i] = c[i] - b[i];
  double lu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
  double lw = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
  double lz = z[0] * z[0] + z[1] * z[1] + z[2] * z[2];
  double l2 = fmax(lu, fmax(lw, lz));
  double cx = u[1] * w[2] - u[2] * w[1], cy = u[2] * w[0] - u[0] * w[2],
         cz = u[0] * w[1] - u[1] * w[0];
  /* |u x w| / L is the height over the longest edge L; degenerate when that
   * is at most rel * L */
  double cr = sqrt(cx * cx + cy * cy + cz * cz);
  return l2 == 0 || cr <= rel * l2;
}

/* Keeps the triangles with keep[k] != 0, in order. */
static void keep_tris(ts_mesh *m, ts__mesh_prov *prov, const uint8_t *keep) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < m->n_tris; k++) {
    if (!keep[k]) continue;
    memmove(m->t[n], m->t[k], sizeof m->t[0]);
    if (prov && prov->tri_where) prov->tri_where[n] = prov->tri_where[k];
    n++;
  }
  m->n_tris = n;
}

typedef struct tri_key {
  uint32_t s[3]; /* sorted vertices */
  uint32_t k;
} tri_key;

static int cmp_tri(const void *pa, const void *pb) {
  const tri_key *a = pa, *b = pb;
  for (int i = 0; i < 3; i++)
    if (a->s[i] != b->s[i]) return a->s[i] < b->s[i] ? -1 : 1;
  return a->k < b->k ? -1 : a->k > b->k;
}

static void sort3(const uint32_t *t, uint32_t *s) {
  uint32_t a = t[0], b = t[1], c = t[2], x;
  if (a > b) x = a, a = b, b = x;
  if (b > c) x = b, b = c, c = x;
  if (a > b) x = a, a = b, b = x;
  s[0] = a, s[1] = b, s[2] = c;
}

int64_t ts__mesh_find_duplicates(const ts_mesh *m, uint8_t *dup, uint32_t first[2]) {
  uint32_t nt = m->n_tris;
  memset(dup, 0, nt);
  if (nt < 2) return 0;
  tri_key *keys = malloc(sizeof *keys * nt);
  if (!keys) return -1;
  for (uint32_t k = 0; k < nt; k++) sort3(m->t[k], keys[k].s), keys[k].k = k;
  qsort(keys, nt, sizeof *keys, cmp_tri);
  int64_t count = 0;
  uint32_t s = 0; /* start of the current run of equal vertex sets */
  for (uint32_t i = 1; i < nt; i++) {
    if (memcmp(keys[i].s, keys[i - 1].s, sizeof keys[i].s) != 0) {
      s = i;
      continue;
    }
    /* the run's first entry has the lowest index and is kept */
    if (count == 0 && first) first[0] = keys[s].k, first[1] = keys[i].k;
    dup[keys[i].k] = 1;
    count++;
  }
  free(keys);
  return count;
}

int ts__mesh_drop_unused(ts_mesh *m, ts__mesh_prov *prov, uint32_t *dropped) {
  if (dropped) *dropped = 0;
  uint32_t nv = m->n_verts;
  uint32_t *map = malloc(sizeof *map * (nv ? nv : 1));
  if (!map) return TS_ENOMEM;
  for (uint32_t i = 0; i < nv; i++) map[i] = UINT32_MAX;
  for (uint32_t t = 0; t < m->n_tris; t++)
    for (int c = 0; c < 3; c++) map[m->t[t][c]] = 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < nv; i++) {
    if (map[i] == UINT32_MAX) continue;
    memmove(m->v[k], m->v[i], sizeof m->v[0]);
    if (prov && prov->vert_where) prov->vert_where[k] = prov->vert_where[i];
    map[i] = k++;
  }
  for (uint32_t t = 0; t < m->n_tris; t++)
    for (int c = 0; c < 3; c++) m->t[t][c] = map[m->t[t][c]];
  free(map);
  if (dropped) *dropped = nv - k;
  m->n_verts = k;
  return 0;
}

int ts__mesh_repair(ts_mesh *m, const ts_mesh_import_opts *o, ts__mesh_prov *prov,
                    ts_mesh_repair_stats *st, char *err, size_t cap) {
  ts_mesh_repair_stats s = {0, 0, 0, 0};
  if (st) *st = s;
  char a[96];
  for (uint32_t t = 0; t < m->n_tris; t++)
    for (int c = 0; c < 3; c++)
      if (m->t[t][c] >= m->n_verts) {
        ts__mesh_tri_name(prov, t, a, sizeof a);
        ts__mesh_err(err, cap, "%s refers to vertex %u (the mesh has %u vertices)", a,
                     m->t[t][c], m->n_verts);
        return TS_EMESH;
      }
  for (uint32_t i = 0; i < m->n_verts; i++)
    for (int c = 0; c < 3; c++)
      if (!isfinite(m->v[i][c])) {
        ts__mesh_err(err, cap, "vertex %u has a non-finite coordinate (%s)",
                     prov && prov->vert_where ? prov->vert_where[i] : i,
                     isnan(m->v[i][c]) ? "NaN" : "infinite");
        return TS_EMESH;
      }
  int rc;
  if (o->weld_tol >= 0) {
    rc = ts__mesh_weld(m, o->weld_tol, prov, &s.welded);
    if (rc) {
      ts__mesh_err(err, cap,
                   "cannot weld with tolerance %g m: too small for coordinates this large",
                   o->weld_tol);
      return rc;
    }
  }
  uint8_t *keep = malloc(m->n_tris ? m->n_tris : 1);
  if (!keep) return TS_ENOMEM;
  for (uint32_t k = 0; k < m->n_tris; k++) {
    keep[k] = !ts__mesh_tri_degenerate(m, k, o->degenerate_rel);
    s.degenerate += !keep[k];
  }
  keep_tris(m, prov, keep);
  int64_t nd = ts__mesh_find_duplicates(m, keep, NULL);
  if (nd < 0) {
    free(keep);
    return TS_ENOMEM;
  }
  s.duplicate = (uint32_t)nd;
  for (uint32_t k = 0; k < m->n_tris; k++) keep[k] = !keep[k];
  keep_tris(m, prov, keep);
  free(keep);
  if ((rc = ts__mesh_drop_unused(m, prov, &s.unused))) return rc;
  if (st) *st = s;
  return 0;
}

int ts_mesh_repair(ts_mesh *m, const ts_mesh_import_opts *opts, ts_mesh_repair_stats *stats,
                   char *err, size_t errcap) {
  if (!m) return TS_EINVAL;
  ts_mesh_import_opts d = ts_mesh_import_opts_default();
  const ts_mesh_import_opts *o = opts ? opts : &d;
  int rc = ts__mesh_opts_ok(o, err, errcap);
  if (rc) return rc;
  return ts__mesh_repair(m, o, NULL, stats, err, errcap);
}

void ts_mesh_flip(ts_mesh *m) {
  if (!m) return;
  for (uint32_t k = 0; k < m->n_tris; k++) {
    uint32_t x = m->t[k][1];
    m->t[k][1] = m->t[k][2];
    m->t[k][2] = x;
  }
}
