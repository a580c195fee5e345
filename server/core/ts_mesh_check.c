/*
 * ts_mesh_check.c: mesh validation and topology (ts_mesh_check.h).
 *
 * One sort of the 3F half-edges by vertex pair gives the edge table: a group
 * of one is a boundary edge, of two an interior edge (consistent when its
 * two uses run in opposite directions), of more a non-manifold edge.
 * Union-find then answers three questions: the corners of a vertex joined
 * across its interior edges form its fans (more than one fan: a non-manifold
 * "bow-tie" vertex); vertices joined by triangle edges form the connected
 * components; vertices joined by boundary edges form the boundary loops.
 * Euler characteristic, genus (chi = 2c - 2g - b for an orientable surface
 * with c components and b boundary loops) and the divergence-theorem volume
 * follow. Every problem is counted; the message names the first one in the
 * order of ts_mesh_check's comment, with file lines when the mesh comes from
 * the import pipeline (provenance, ts_mesh_read.h). O(F log F) time, O(F + V)
 * memory, all allocated once per call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_mesh_read.h"

typedef struct half {
  uint32_t lo, hi; /* vertex pair, lo <= hi */
  uint32_t tri;
  uint32_t fwd;    /* 1 when the triangle runs lo -> hi */
} half;

static int cmp_half(const void *pa, const void *pb) {
  const half *a = pa, *b = pb;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
  return a->tri < b->tri ? -1 : a->tri > b->tri;
}

static uint32_t uf_find(uint32_t *p, uint32_t x) {
  while (p[x] != x) {
    p[x] = p[p[x]];
    x = p[x];
  }
  return x;
}

static void uf_union(uint32_t *p, uint32_t a, uint32_t b) {
  a = uf_find(p, a);
  b = uf_find(p, b);
  if (a < b)
    p[b] = a;
  else if (b < a)
    p[a] = b;
}

static uint32_t corner_of(const ts_mesh *m, uint32_t k, uint32_t v) {
  return 3 * k + (m->t[k][0] == v ? 0 : m->t[k][1] == v ? 1 : 2);
}

/* First instance of each problem, for the message. */
typedef struct firsts {
  uint32_t bad_tri, bad_vert;
  uint32_t nonfinite_v;
  uint32_t huge_v;
  double huge_val;
  uint32_t degen_t;
  uint32_t dup[2];
  uint32_t unused_v;
  uint32_t nme_lo, nme_hi, nme_count, nme_tris[3];
  uint32_t nmv_v, nmv_fans, nmv_t[2];
  uint32_t inc_a, inc_b, inc_t[2];
} firsts;

static void describe(const ts_mesh *m, const ts__mesh_prov *prov, const ts_mesh_import_opts *o,
                     const ts_mesh_report *r, const firsts *f, char *err, size_t cap) {
  char a[96], b[96], c[96], d[96];
#define TN(buf, k) ts__mesh_tri_name(prov, (k), (buf), sizeof(buf))
#define VN(buf, v) ts__mesh_vert_name(m, prov, (v), (buf), sizeof(buf))
  if (r->n_verts > o->max_verts) {
    ts__mesh_err(err, cap, "mesh has %u vertices, over the limit of %u", r->n_verts,
                 o->max_verts);
  } else if (r->n_tris > o->max_tris) {
    ts__mesh_err(err, cap, "mesh has %u triangles, over the limit of %u", r->n_tris, o->max_tris);
  } else if (r->n_tris == 0) {
    ts__mesh_err(err, cap, "mesh is empty (no triangles)");
  } else if (r->n_bad_index) {
    TN(a, f->bad_tri);
    ts__mesh_err(err, cap, "%s refers to vertex %u (the mesh has %u vertices)", a, f->bad_vert,
                 r->n_verts);
  } else if (r->n_nonfinite) {
    snprintf(a, sizeof a, "%u",
             prov && prov->vert_where ? prov->vert_where[f->nonfinite_v] : f->nonfinite_v);
    ts__mesh_err(err, cap, "vertex %s has a non-finite coordinate", a);
  } else if (r->n_huge) {
    VN(a, f->huge_v);
    ts__mesh_err(err, cap,
                 "vertex %s: coordinate %g m is beyond the limit of %g m (wrong units? set the "
                 "scale)",
                 a, f->huge_val, o->max_abs_coord);
  } else if (r->n_degenerate) {
    const uint32_t *t = m->t[f->degen_t];
    TN(a, f->degen_t);
    VN(b, t[0]), VN(c, t[1]), VN(d, t[2]);
    ts__mesh_err(err, cap, "%s is degenerate (%s; vertices %s, %s, %s)", a,
                 t[0] == t[1] || t[1] == t[2] || t[0] == t[2] ? "a repeated vertex" : "no area", b,
                 c, d);
  } else if (r->n_duplicate) {
    const uint32_t *t = m->t[f->dup[0]];
    char e[96];
    TN(a, f->dup[1]);
    TN(b, f->dup[0]);
    VN(c, t[0]), VN(d, t[1]), VN(e, t[2]);
    ts__mesh_err(err, cap, "%s repeats the vertices of %s (%s, %s, %s)", a, b, c, d, e);
  } else if (r->n_unused) {
    VN(a, f->unused_v);
    ts__mesh_err(err, cap, "vertex %s is used by no triangle", a);
  } else if (r->n_nonmanifold_edges) {
    char t0[96], t1[96], t2[96];
    VN(a, f->nme_lo), VN(b, f->nme_hi);
    TN(t0, f->nme_tris[0]), TN(t1, f->nme_tris[1]), TN(t2, f->nme_tris[2]);
    ts__mesh_err(err, cap, "non-manifold edge (%s,%s): shared by %u triangles (%s, %s, %s%s)", a,
                 b, f->nme_count, t0, t1, t2, f->nme_count > 3 ? ", ..." : "");
  } else if (r->n_nonmanifold_verts) {
    VN(a, f->nmv_v);
    TN(b, f->nmv_t[0]), TN(c, f->nmv_t[1]);
    ts__mesh_err(err, cap,
                 "non-manifold vertex %s: its triangles form %u separate fans (%s and %s are in "
                 "different ones)",
                 a, f->nmv_fans, b, c);
  } else if (r->n_inconsistent_edges) {
    VN(c, f->inc_a), VN(d, f->inc_b);
    if (prov && prov->tri_where) {
      TN(a, f->inc_t[0]), TN(b, f->inc_t[1]);
    } else { /* "triangles 17 and 240" */
      snprintf(a, sizeof a, "triangles %u", f->inc_t[0]);
      snprintf(b, sizeof b, "%u", f->inc_t[1]);
    }
    ts__mesh_err(err, cap, "%s and %s share edge (%s,%s) with the same orientation", a, b, c, d);
  }
#undef TN
#undef VN
}

int ts__mesh_check(const ts_mesh *m, const ts_mesh_import_opts *o, const ts__mesh_prov *prov,
                   ts_mesh_report *rep, char *err, size_t cap) {
  ts_mesh_report r;
  memset(&r, 0, sizeof r);
  firsts f;
  memset(&f, 0, sizeof f);
  r.genus = -1;
  r.n_verts = m->n_verts;
  r.n_tris = m->n_tris;
  const uint32_t nv = m->n_verts, nt = m->n_tris;
  for (int c = 0; c < 3; c++) r.bbox_min[c] = INFINITY, r.bbox_max[c] = -INFINITY;
  if (err && cap) err[0] = 0;
  int code = 0;

  if (nt > UINT32_MAX / 3) { /* the corner numbering needs 3F to fit */
    ts__mesh_err(err, cap, "mesh has %u triangles, over the limit of %u", nt, o->max_tris);
    if (rep) *rep = r;
    return TS_ETOOBIG;
  }
  for (uint32_t k = 0; k < nt; k++)
    for (int c = 0; c < 3; c++)
      if (m->t[k][c] >= nv) {
        if (!r.n_bad_index++) f.bad_tri = k, f.bad_vert = m->t[k][c];
        break;
      }
  if (r.n_bad_index || nt == 0) { /* no topology to speak of */
    describe(m, prov, o, &r, &f, err, cap);
    if (rep) *rep = r;
    return r.n_verts > o->max_verts || r.n_tris > o->max_tris ? TS_ETOOBIG : TS_EMESH;
  }

  half *h = malloc(sizeof *h * 3 * (size_t)nt);
  uint32_t *cp = malloc(sizeof *cp * 3 * (size_t)nt); /* corner union-find */
  uint32_t *vp = malloc(sizeof *vp * (nv ? nv : 1));  /* vertex union-find */
  uint32_t *fans = calloc(nv ? nv : 1, sizeof *fans);
  uint8_t *flag = calloc(nt > nv ? nt : (nv ? nv : 1), 1);
  if (!h || !cp || !vp || !fans || !flag) {
    free(h), free(cp), free(vp), free(fans), free(flag);
    ts__mesh_err(err, cap, "out of memory checking the mesh");
    return TS_ENOMEM;
  }

  /* coordinates */
  for (uint32_t i = 0; i < nv; i++) {
    int bad = 0;
    for (int c = 0; c < 3; c++) bad |= !isfinite(m->v[i][c]);
    if (bad) {
      if (!r.n_nonfinite++) f.nonfinite_v = i;
      continue;
    }
    double big = 0;
    for (int c = 0; c < 3; c++)
      if (fabs(m->v[i][c]) > fabs(big)) big = m->v[i][c];
    if (fabs(big) > o->max_abs_coord && !r.n_huge++) f.huge_v = i, f.huge_val = big;
  }

  /* degenerate and duplicate triangles */
  for (uint32_t k = 0; k < nt; k++)
    if (ts__mesh_tri_degenerate(m, k, o->degenerate_rel) && !r.n_degenerate++) f.degen_t = k;
  int64_t nd = ts__mesh_find_duplicates(m, flag, f.dup);
  if (nd < 0) {
    free(h), free(cp), free(vp), free(fans), free(flag);
    return TS_ENOMEM;
  }
  r.n_duplicate = (uint32_t)nd;

  /* edge table */
  for (uint32_t k = 0; k < nt; k++)
    for (int c = 0; c < 3; c++) {
      uint32_t a = m->t[k][c], b = m->t[k][(c + 1) % 3];
      half *e = &h[3 * k + c];
      e->lo = a < b ? a : b;
      e->hi = a < b ? b : a;
      e->tri = k;
      e->fwd = a <= b;
    }
  const size_t nh = 3 * (size_t)nt;
  qsort(h, nh, sizeof *h, cmp_half);
  for (size_t i = 0; i < nh; i++) cp[i] = (uint32_t)i;
  memset(flag, 0, nv ? nv : 1); /* now: vertex on a boundary edge */
  for (uint32_t i = 0; i < nv; i++) vp[i] = i;
  for (size_t s = 0; s < nh;) {
    size_t e = s + 1;
    while (e < nh && h[e].lo == h[s].lo && h[e].hi == h[s].hi) e++;
    size_t cnt = e - s;
    r.n_edges++;
    if (cnt == 1) {
      r.n_boundary_edges++;
      flag[h[s].lo] = flag[h[s].hi] = 1;
    } else if (cnt == 2) {
      const half *x = &h[s], *y = &h[s + 1];
      if (x->fwd == y->fwd && !r.n_inconsistent_edges++) {
        f.inc_t[0] = x->tri, f.inc_t[1] = y->tri;
        f.inc_a = x->fwd ? x->lo : x->hi;
        f.inc_b = x->fwd ? x->hi : x->lo;
      }
      uf_union(cp, corner_of(m, x->tri, x->lo), corner_of(m, y->tri, x->lo));
      uf_union(cp, corner_of(m, x->tri, x->hi), corner_of(m, y->tri, x->hi));
    } else if (!r.n_nonmanifold_edges++) {
      f.nme_lo = h[s].lo, f.nme_hi = h[s].hi, f.nme_count = (uint32_t)cnt;
      for (int q = 0; q < 3; q++) f.nme_tris[q] = h[s + (size_t)q].tri;
    }
    s = e;
  }

  /* fans per vertex: corners that are their own root */
  for (size_t c = 0; c < nh; c++) {
    uint32_t v = m->t[c / 3][c % 3];
    if (uf_find(cp, (uint32_t)c) == c) fans[v]++;
  }
  for (uint32_t v = 0; v < nv; v++) {
    if (fans[v] == 0) {
      if (!r.n_unused++) f.unused_v = v;
      continue;
    }
    r.n_used_verts++;
    if (fans[v] > 1 && !r.n_nonmanifold_verts++) {
      f.nmv_v = v, f.nmv_fans = fans[v];
      uint32_t root0 = UINT32_MAX;
      for (size_t c = 0; c < nh; c++) {
        if (m->t[c / 3][c % 3] != v) continue;
        uint32_t rt = uf_find(cp, (uint32_t)c);
        if (root0 == UINT32_MAX)
          root0 = rt, f.nmv_t[0] = (uint32_t)(c / 3);
        else if (rt != root0) {
          f.nmv_t[1] = (uint32_t)(c / 3);
          break;
        }
      }
    }
  }

  /* boundary loops: vertices joined by boundary edges */
  for (size_t s = 0; s < nh;) {
    size_t e = s + 1;
    while (e < nh && h[e].lo == h[s].lo && h[e].hi == h[s].hi) e++;
    if (e - s == 1) uf_union(vp, h[s].lo, h[s].hi);
    s = e;
  }
  for (uint32_t v = 0; v < nv; v++)
    if (flag[v] && uf_find(vp, v) == v) r.n_boundary_loops++;
  /* components: vertices joined by any edge */
  for (uint32_t i = 0; i < nv; i++) vp[i] = i;
  for (uint32_t k = 0; k < nt; k++) {
    uf_union(vp, m->t[k][0], m->t[k][1]);
    uf_union(vp, m->t[k][1], m->t[k][2]);
  }
  for (uint32_t v = 0; v < nv; v++)
    if (fans[v] && uf_find(vp, v) == v) r.n_components++;

  /* bounding box over used finite vertices */
  for (uint32_t v = 0; v < nv; v++) {
    if (!fans[v] || !isfinite(m->v[v][0]) || !isfinite(m->v[v][1]) || !isfinite(m->v[v][2]))
      continue;
    for (int c = 0; c < 3; c++) {
      r.bbox_min[c] = fmin(r.bbox_min[c], m->v[v][c]);
      r.bbox_max[c] = fmax(r.bbox_max[c], m->v[v][c]);
    }
  }

  r.euler = (int64_t)r.n_used_verts - (int64_t)r.n_edges + (int64_t)nt;
  r.manifold = r.n_nonmanifold_edges == 0 && r.n_nonmanifold_verts == 0;
  r.oriented = r.manifold && r.n_inconsistent_edges == 0;
  r.closed = r.manifold && r.n_boundary_edges == 0;
  if (r.oriented) {
    int64_t g2 = 2 * (int64_t)r.n_components - (int64_t)r.n_boundary_loops - r.euler;
    if (g2 >= 0 && g2 % 2 == 0 && g2 / 2 <= INT32_MAX) r.genus = (int)(g2 / 2);
  }
  if (r.closed && r.oriented && r.n_nonfinite == 0) {
    double o3[3], vol = 0;
    for (int c = 0; c < 3; c++) o3[c] = 0.5 * (r.bbox_min[c] + r.bbox_max[c]);
    for (uint32_t k = 0; k < nt; k++) {
      const double *pa = m->v[m->t[k][0]], *pb = m->v[m->t[k][1]], *pc = m->v[m->t[k][2]];
      double a[3], b[3], c[3];
      for (int q = 0; q < 3; q++) a[q] = pa[q] - o3[q], b[q] = pb[q] - o3[q], c[q] = pc[q] - o3[q];
      vol += a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) +
             a[2] * (b[0] * c[1] - b[1] * c[0]);
    }
    r.volume = vol / 6;
    r.volume_valid = 1;
  }

  if (r.n_verts > o->max_verts || r.n_tris > o->max_tris)
    code = TS_ETOOBIG;
  else if (r.n_nonfinite || r.n_huge || r.n_degenerate || r.n_duplicate || r.n_unused ||
           r.n_nonmanifold_edges || r.n_nonmanifold_verts || r.n_inconsistent_edges)
    code = TS_EMESH;
  if (code) describe(m, prov, o, &r, &f, err, cap);
  free(h), free(cp), free(vp), free(fans), free(flag);
  if (rep) *rep = r;
  return code;
}

int ts_mesh_check(const ts_mesh *m, const ts_mesh_import_opts *opts, ts_mesh_report *rep,
                  char *err, size_t errcap) {
  if (!m || (!m->v && m->n_verts) || (!m->t && m->n_tris)) return TS_EINVAL;
  ts_mesh_import_opts d = ts_mesh_import_opts_default();
  const ts_mesh_import_opts *o = opts ? opts : &d;
  int rc = ts__mesh_opts_ok(o, err, errcap);
  if (rc) return rc;
  return ts__mesh_check(m, o, NULL, rep, err, errcap);
}
