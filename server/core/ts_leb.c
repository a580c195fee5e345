/*
 * ts_leb.c: longest-edge bisection under a density condition (ts_leb.h;
 * M.-C. Rivara, SIAM J. Numer. Anal. 21(3):604-613, 1984, and Int. J. Numer.
 * Meth. Engng 40:3313-3324, 1997, for the longest-edge propagation path).
 *
 * State: growable vertex and triangle arrays, an edge -> triangles hash map
 * (ts_edgehash.h) and a max-heap of (length, edge) entries, the "set of edges
 * sorted by length". Entries are never removed when their edge disappears;
 * a popped entry whose edge is no longer in the map is stale and skipped.
 * Ties in length are broken by the vertex pair, so the result is
 * deterministic.
 */
#include "ts_leb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_edgehash.h"
#include "ts_error.h"
#include "ts_extrude_internal.h"

typedef struct ts__leb_entry {
  double len;
  uint32_t a, b; /* a < b */
  uint32_t forced;
} ts__leb_entry;

typedef struct ts__leb {
  double (*v)[3];
  uint32_t nv, cap_v, n_old;
  uint32_t (*t)[3];
  uint32_t *tri_parent;
  uint32_t nt, cap_t;
  uint32_t (*parents)[2];
  ts_edgehash h;
  ts__leb_entry *heap;
  uint32_t nh, cap_h;
  const ts_leb_def *def;
  uint32_t max_verts;
  uint32_t n_forced;
  int bad_bound;
  double bad_value, bad_at[3];
} ts__leb;

static double ts__len(const ts__leb *s, uint32_t a, uint32_t b) {
  const double *p = s->v[a], *q = s->v[b];
  double d0 = p[0] - q[0], d1 = p[1] - q[1], d2 = p[2] - q[2];
  return sqrt(d0 * d0 + d1 * d1 + d2 * d2);
}

/* Is edge (a, b) frozen (ts_leb_def.frozen)? */
static int ts__frozen(const ts__leb *s, uint32_t a, uint32_t b) {
  const uint8_t *fz = s->def->frozen;
  return fz && a < s->n_old && b < s->n_old && fz[a] && fz[b];
}

/* Has triangle f a frozen edge? */
static int ts__touches_frozen(const ts__leb *s, uint32_t f) {
  const uint32_t *t = s->t[f];
  return ts__frozen(s, t[0], t[1]) || ts__frozen(s, t[1], t[2]) || ts__frozen(s, t[2], t[0]);
}

/* Does edge (a, b) of length len fail the density condition? A frozen edge
 * never does, nor an edge of a triangle with a frozen edge: bisecting the
 * latter would leave a triangle on the same frozen edge with an edge about
 * as long, again and again (ever thinner slivers along a frozen edge longer
 * than the bound); such triangles are only split when a neighbour's edge
 * is bisected, which keeps the mesh conforming. */
static int ts__fails(ts__leb *s, uint32_t a, uint32_t b, double len) {
  if (ts__frozen(s, a, b)) return 0;
  if (s->def->frozen) {
    ts_edgehash_slot *slot = ts_edgehash_get(&s->h, a, b);
    for (int j = 0; slot && j < 2; j++)
      if (slot->tri[j] != TS_EDGEHASH_NONE && ts__touches_frozen(s, slot->tri[j])) return 0;
  }
  double bound = s->def->max_edge;
  if (s->def->size_at) {
    double mid[3];
    for (int k = 0; k < 3; k++) mid[k] = 0.5 * (s->v[a][k] + s->v[b][k]);
    bound = s->def->size_at(mid, s->def->size_ud);
    if (!(bound > 0)) { /* also NaN */
      if (!s->bad_bound) {
        s->bad_bound = 1;
        s->bad_value = bound;
        memcpy(s->bad_at, mid, sizeof mid);
      }
      return 0;
    }
  }
  return len > bound;
}

static int ts__before(const ts__leb_entry *x, const ts__leb_entry *y) {
  if (x->len != y->len) return x->len > y->len;
  if (x->a != y->a) return x->a < y->a;
  return x->b < y->b;
}

static int ts__push(ts__leb *s, uint32_t a, uint32_t b, double len, uint32_t forced) {
  if (s->nh == s->cap_h) {
    uint32_t cap = s->cap_h ? 2 * s->cap_h : 64;
    ts__leb_entry *n = realloc(s->heap, sizeof *n * cap);
    if (!n) return TS_ENOMEM;
    s->heap = n;
    s->cap_h = cap;
  }
  ts__leb_entry e = {len, a < b ? a : b, a < b ? b : a, forced};
  uint32_t i = s->nh++;
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (!ts__before(&e, &s->heap[p])) break;
    s->heap[i] = s->heap[p];
    i = p;
  }
  s->heap[i] = e;
  return 0;
}

static ts__leb_entry ts__pop(ts__leb *s) {
  ts__leb_entry top = s->heap[0], last = s->heap[--s->nh];
  uint32_t i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= s->nh) break;
    if (c + 1 < s->nh && ts__before(&s->heap[c + 1], &s->heap[c])) c++;
    if (!ts__before(&s->heap[c], &last)) break;
    s->heap[i] = s->heap[c];
    i = c;
  }
  if (s->nh) s->heap[i] = last;
  return top;
}

static int ts__push_if_fails(ts__leb *s, uint32_t a, uint32_t b) {
  double len = ts__len(s, a, b);
  return ts__fails(s, a, b, len) ? ts__push(s, a, b, len, 0) : 0;
}

static int ts__grow(ts__leb *s) {
  if (s->nv == s->cap_v) {
    uint64_t want = 2 * (uint64_t)s->cap_v;
    uint32_t cap = want > s->max_verts ? s->max_verts : (uint32_t)want;
    double(*v)[3] = realloc(s->v, sizeof *v * cap);
    if (!v) return TS_ENOMEM;
    s->v = v;
    uint32_t(*p)[2] = realloc(s->parents, sizeof *p * (cap - s->n_old));
    if (!p) return TS_ENOMEM;
    s->parents = p;
    s->cap_v = cap;
  }
  if (s->nt + 2 > s->cap_t) {
    if (s->cap_t > UINT32_MAX / 2 - 2) return TS_ENOMEM;
    uint32_t cap = 2 * s->cap_t + 2;
    uint32_t(*t)[3] = realloc(s->t, sizeof *t * cap);
    if (!t) return TS_ENOMEM;
    s->t = t;
    uint32_t *tp = realloc(s->tri_parent, sizeof *tp * cap);
    if (!tp) return TS_ENOMEM;
    s->tri_parent = tp;
    s->cap_t = cap;
  }
  return 0;
}

/* Bisects edge (a, b) at its midpoint and splits its triangles. */
static int ts__bisect(ts__leb *s, uint32_t a, uint32_t b) {
  int rc = ts__grow(s);
  if (rc) return rc;
  ts_edgehash_slot *slot = ts_edgehash_get(&s->h, a, b);
  uint32_t tris[2] = {slot->tri[0], slot->tri[1]};
  uint32_t m = s->nv++;
  for (int k = 0; k < 3; k++) s->v[m][k] = 0.5 * (s->v[a][k] + s->v[b][k]);
  s->parents[m - s->n_old][0] = a;
  s->parents[m - s->n_old][1] = b;
  ts_edgehash_remove(&s->h, a, b);
  for (int j = 0; j < 2; j++) {
    uint32_t f = tris[j];
    if (f == TS_EDGEHASH_NONE) continue;
    uint32_t *t = s->t[f];
    int i = 0;
    while (!((t[i] == a && t[(i + 1) % 3] == b) || (t[i] == b && t[(i + 1) % 3] == a))) i++;
    uint32_t p = t[i], q = t[(i + 1) % 3], c = t[(i + 2) % 3], g = s->nt++;
    t[0] = p, t[1] = m, t[2] = c;
    s->t[g][0] = m, s->t[g][1] = q, s->t[g][2] = c;
    s->tri_parent[g] = s->tri_parent[f];
    if ((rc = ts_edgehash_add(&s->h, p, m, f)) || (rc = ts_edgehash_add(&s->h, m, q, g)) ||
        (rc = ts_edgehash_add(&s->h, m, c, f)) || (rc = ts_edgehash_add(&s->h, m, c, g)) ||
        (rc = ts_edgehash_replace(&s->h, q, c, f, g)))
      return rc == TS_ENOMEM ? rc : TS_EINTERNAL;
    if ((rc = ts__push_if_fails(s, p, m)) || (rc = ts__push_if_fails(s, m, q)) ||
        (rc = ts__push_if_fails(s, m, c)))
      return rc;
    /* a child no longer on a frozen edge: its old edges may now fail */
    if (s->def->frozen && ((rc = ts__push_if_fails(s, p, c)) || (rc = ts__push_if_fails(s, q, c))))
      return rc;
  }
  return 0;
}

/* Longest edge of triangle f: writes its ends, returns its length. */
static double ts__longest(const ts__leb *s, uint32_t f, uint32_t *la, uint32_t *lb) {
  const uint32_t *t = s->t[f];
  double best = -1;
  for (int i = 0; i < 3; i++) {
    double l = ts__len(s, t[i], t[(i + 1) % 3]);
    if (l > best) best = l, *la = t[i], *lb = t[(i + 1) % 3];
  }
  return best;
}

static void ts__free_state(ts__leb *s) {
  free(s->v);
  free(s->t);
  free(s->tri_parent);
  free(s->parents);
  free(s->heap);
  ts_edgehash_destroy(&s->h);
}

void ts_leb_result_free(ts_leb_result *r) {
  if (!r) return;
  ts_mesh_free(r->mesh);
  free(r->parents);
  free(r->tri_parent);
  free(r);
}

int ts_leb_refine(const ts_mesh *m, const ts_leb_def *def, ts_leb_result **out, char *err,
                  size_t errcap) {
  if (err && errcap) err[0] = 0;
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!m || !def || (!def->size_at && !(def->max_edge > 0 && isfinite(def->max_edge)))) {
    if (err && errcap) snprintf(err, errcap, "the maximum edge length must be a positive number");
    return TS_EINVAL;
  }
  if (!m->n_verts || !m->n_tris || !m->v || !m->t) {
    if (err && errcap) snprintf(err, errcap, "mesh is empty");
    return TS_EMESH;
  }
  ts__leb s;
  memset(&s, 0, sizeof s);
  s.def = def;
  s.max_verts = def->max_verts ? def->max_verts : TS_LEB_DEFAULT_MAX_VERTS;
  if (s.max_verts < m->n_verts) s.max_verts = m->n_verts;
  s.n_old = s.nv = m->n_verts;
  s.cap_v = m->n_verts;
  s.nt = s.cap_t = m->n_tris;
  s.v = malloc(sizeof *s.v * s.cap_v);
  s.t = malloc(sizeof *s.t * s.cap_t);
  s.tri_parent = malloc(sizeof *s.tri_parent * s.cap_t);
  s.parents = malloc(sizeof *s.parents);
  int rc = (!s.v || !s.t || !s.tri_parent || !s.parents) ? TS_ENOMEM : 0;
  if (!rc) rc = ts_edgehash_init(&s.h, m->n_tris * 2 + 16);
  if (rc) {
    ts__free_state(&s);
    return rc;
  }
  memcpy(s.v, m->v, sizeof *s.v * m->n_verts);
  memcpy(s.t, m->t, sizeof *s.t * m->n_tris);
  for (uint32_t f = 0; f < m->n_tris && !rc; f++) {
    s.tri_parent[f] = f;
    const uint32_t *t = m->t[f];
    for (int i = 0; i < 3 && !rc; i++) {
      if (t[i] >= m->n_verts || t[i] == t[(i + 1) % 3]) {
        if (err && errcap) snprintf(err, errcap, "triangle %u (%u,%u,%u) is invalid", f, t[0], t[1], t[2]);
        rc = TS_EMESH;
        break;
      }
      rc = ts_edgehash_add(&s.h, t[i], t[(i + 1) % 3], f);
      if (rc == TS_EFULL) {
        if (err && errcap)
          snprintf(err, errcap, "edge (%u,%u) is shared by more than two triangles: not a manifold", t[i],
                   t[(i + 1) % 3]);
        rc = TS_EMESH;
      }
    }
  }
  for (uint32_t i = 0; i <= s.h.mask && !rc; i++) {
    ts_edgehash_slot *sl = &s.h.slots[i];
    if (sl->key == UINT64_MAX) continue;
    rc = ts__push_if_fails(&s, (uint32_t)(sl->key >> 32), (uint32_t)sl->key);
  }

  while (!rc && s.nh && !s.bad_bound) {
    ts__leb_entry e = ts__pop(&s);
    ts_edgehash_slot *slot = ts_edgehash_get(&s.h, e.a, e.b);
    if (!slot) continue; /* stale: bisected already */
    uint32_t tris[2] = {slot->tri[0], slot->tri[1]};
    int wait = 0;
    for (int j = 0; j < 2 && !rc; j++) {
      if (tris[j] == TS_EDGEHASH_NONE) continue;
      if (s.def->frozen && ts__touches_frozen(&s, tris[j])) continue; /* see ts__fails */
      uint32_t la = e.a, lb = e.b;
      double ll = ts__longest(&s, tris[j], &la, &lb);
      if (ll > e.len * (1 + 1e-12)) { /* bisect the neighbour's longest edge first */
        rc = ts__push(&s, la, lb, ll, !ts__fails(&s, la, lb, ll));
        wait = 1;
      }
    }
    if (rc) break;
    if (wait) {
      rc = ts__push(&s, e.a, e.b, e.len, e.forced);
      continue;
    }
    if (s.nv >= s.max_verts) {
      if (err && errcap)
        snprintf(err, errcap, "refinement would exceed %u vertices; raise the limit or the edge bound",
                 s.max_verts);
      rc = TS_EFULL;
      break;
    }
    if (e.forced) s.n_forced++;
    rc = ts__bisect(&s, e.a, e.b);
  }
  if (!rc && s.bad_bound) {
    if (err && errcap)
      snprintf(err, errcap, "the size function gave %g at (%g, %g, %g): bounds must be positive", s.bad_value,
               s.bad_at[0], s.bad_at[1], s.bad_at[2]);
    rc = TS_EINVAL;
  }

  ts_leb_result *r = NULL;
  if (!rc) {
    r = calloc(1, sizeof *r);
    rc = r ? ts_mesh_alloc(s.nv, s.nt, &r->mesh) : TS_ENOMEM;
  }
  if (!rc) {
    memcpy(r->mesh->v, s.v, sizeof *s.v * s.nv);
    memcpy(r->mesh->t, s.t, sizeof *s.t * s.nt);
    r->n_old_verts = s.n_old;
    r->n_new = s.nv - s.n_old;
    r->n_forced = s.n_forced;
    r->parents = s.parents; /* hand over */
    r->tri_parent = s.tri_parent;
    s.parents = NULL;
    s.tri_parent = NULL;
  }
  ts__free_state(&s);
  if (rc) {
    ts_leb_result_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

int ts_leb_extrusion(const ts_extrusion *e, const ts_leb_def *def, ts_extrusion **out,
                     ts_leb_result **res_out, char *err, size_t errcap) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (res_out) *res_out = NULL;
  if (!e || !e->x || !e->surface_tris || e->n_sheets != e->n_layers + 1) return TS_EINVAL;
  ts_mesh surf = {e->nv, e->n_surface_tris, e->x, e->surface_tris};
  ts_leb_result *res = NULL;
  int rc = ts_leb_refine(&surf, def, &res, err, errcap);
  if (rc) return rc;
  ts_extrusion *r = NULL;
  rc = ts__extrusion_new(e->n_layers, res->mesh->n_verts, res->mesh->n_tris, &r);
  if (rc) {
    ts_leb_result_free(res);
    return rc;
  }
  memcpy(r->surface_tris, res->mesh->t, sizeof *r->surface_tris * res->mesh->n_tris);
  for (uint32_t s = 0; s < e->n_sheets; s++) {
    const double(*src)[3] = (const double(*)[3])(e->x + (size_t)s * e->nv);
    double(*dst)[3] = r->x + (size_t)s * r->nv;
    memcpy(dst, src, sizeof *dst * e->nv);
    for (uint32_t i = 0; i < res->n_new; i++) {
      const uint32_t *p = res->parents[i];
      for (int k = 0; k < 3; k++) dst[e->nv + i][k] = 0.5 * (dst[p[0]][k] + dst[p[1]][k]);
    }
  }
  rc = ts__extrusion_assemble(r, err, errcap);
  if (rc && !(rc == TS_EMESH && r->n_inverted)) {
    ts_extrusion_free(r);
    ts_leb_result_free(res);
    return rc;
  }
  *out = r;
  if (res_out)
    *res_out = res;
  else
    ts_leb_result_free(res);
  return rc;
}
