/*
 * ts_self_contact.c: a tissue's contact with itself, vertex against
 * triangle through the tissue's AABB tree walked against itself
 * (ts_aabb_self.h), and its mass-weighted
 * projection (see ts_self_contact.h for the rule and why).
 */
#include "ts_self_contact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_tritri.h"

ts_self_contact_def ts_default_self_contact_def(void) {
  ts_self_contact_def d = {.thickness = 1e-3, .rest_skip = 4e-3, .cap = 8192, .cand_cap = 256};
  return d;
}

int ts_self_contact_init(ts_self_contact *sc, const ts_self_contact_def *def) {
  if (!sc) return TS_EINVAL;
  memset(sc, 0, sizeof *sc);
  sc->def = def ? *def : ts_default_self_contact_def();
  const ts_self_contact_def *d = &sc->def;
  if (!(d->thickness > 0 && d->thickness < 1) || !(d->rest_skip >= 0 && d->rest_skip < 10) ||
      d->cap < 1 || d->cap > (1u << 24) || d->cand_cap < 1 || d->cand_cap > (1u << 20))
    return TS_EINVAL;
  sc->pair = malloc(sizeof *sc->pair * d->cap);
  sc->cand = malloc(sizeof *sc->cand * d->cand_cap);
  if (!sc->pair || !sc->cand) {
    ts_self_contact_free(sc);
    return TS_ENOMEM;
  }
  return 0;
}

static void unbind(ts_self_contact *sc) {
  free(sc->own);
  free(sc->owner);
  free(sc->rlo);
  free(sc->rhi);
  free(sc->dlo);
  free(sc->dhi);
  sc->own = NULL;
  sc->owner = NULL;
  sc->rlo = sc->rhi = sc->dlo = sc->dhi = NULL;
  sc->b_tree = NULL;
  sc->b_tissue = NULL;
  sc->cap_tris = sc->cap_nodes = sc->cap_points = 0;
}

void ts_self_contact_free(ts_self_contact *sc) {
  if (!sc) return;
  free(sc->pair);
  free(sc->cand);
  sc->pair = NULL;
  sc->cand = NULL;
  sc->n = 0;
  unbind(sc);
}

/* The owners and rest boxes for the bound tree as it is now (sizes within
 * the capacities). No allocation. */
static void compute_bound(ts_self_contact *sc, const ts_aabb_tree *tree, const ts_tissue *t) {
  for (uint32_t p = 0; p < tree->n_points; p++) sc->owner[p] = UINT32_MAX;
  for (uint32_t k = tree->n_tris; k-- > 0;) /* the lowest-numbered triangle wins */
    for (int c = 0; c < 3; c++) sc->owner[tree->tris[k][c]] = k;
  for (uint32_t k = 0; k < tree->n_tris; k++) {
    uint8_t m = 0;
    for (int c = 0; c < 3; c++)
      if (sc->owner[tree->tris[k][c]] == k) m |= (uint8_t)(1u << c);
    /* a triangle naming a node twice owns it once */
    if (tree->tris[k][1] == tree->tris[k][0]) m &= (uint8_t)~2u;
    if (tree->tris[k][2] == tree->tris[k][0] || tree->tris[k][2] == tree->tris[k][1])
      m &= (uint8_t)~4u;
    sc->own[k] = m;
  }
  ts_aabb_self_boxes(tree, (const double (*)[3])t->rest, NULL, sc->rlo, sc->rhi);
  sc->b_tree = tree;
  sc->b_tissue = t;
  sc->b_rebuilds = tree->stats.rebuilds;
  sc->b_tris = tree->n_tris;
  sc->b_nodes = tree->n_nodes;
  sc->b_points = tree->n_points;
}

int ts_self_contact_bind(ts_self_contact *sc, const ts_aabb_tree *tree, const ts_tissue *t) {
  if (!sc || !tree || !t || !t->rest || tree->n_points > t->n_nodes) return TS_EINVAL;
  if (tree->n_tris > sc->cap_tris || tree->n_nodes > sc->cap_nodes ||
      tree->n_points > sc->cap_points) {
    unbind(sc);
    const size_t nt = tree->n_tris ? tree->n_tris : 1, nn = tree->n_nodes ? tree->n_nodes : 1,
                 np = tree->n_points ? tree->n_points : 1;
    sc->own = malloc(nt);
    sc->owner = malloc(sizeof *sc->owner * np);
    sc->rlo = malloc(sizeof *sc->rlo * nn);
    sc->rhi = malloc(sizeof *sc->rhi * nn);
    sc->dlo = malloc(sizeof *sc->dlo * nn);
    sc->dhi = malloc(sizeof *sc->dhi * nn);
    if (!sc->own || !sc->owner || !sc->rlo || !sc->rhi || !sc->dlo || !sc->dhi) {
      unbind(sc);
      return TS_ENOMEM;
    }
    sc->cap_tris = (uint32_t)nt, sc->cap_nodes = (uint32_t)nn, sc->cap_points = (uint32_t)np;
  }
  compute_bound(sc, tree, t);
  return 0;
}

static void tri_at(const double (*x)[3], const uint32_t t[3], double T[3][3]) {
  for (int c = 0; c < 3; c++) memcpy(T[c], x[t[c]], sizeof T[c]);
}

/* The exact test of node p against triangle tri (corners t): 1 with *o
 * filled when in contact. The node must lie over the triangle (its
 * projection onto the plane inside, barycentric coordinates >= -1e-9) on
 * the front side closer than h: a vertex against a face. A node beside a
 * triangle, nearest its edge, is not that triangle's: pushing it along
 * that face's normal is the wrong way (a flap's rim node over the lower
 * sheet's side wall was pushed sideways every step, and the mass-spring
 * fold gained speed until it diverged); the face it lies over takes it. */
static int test_pair(const ts_self_contact_def *d, const ts_tissue *tis, const double (*x)[3],
                     uint32_t p, const uint32_t t[3], ts_self_pair *o) {
  if (t[0] == p || t[1] == p || t[2] == p) return 0; /* a corner: adjacent */
  double T[3][3];
  tri_at(x, t, T);
  double e0[3], e1[3], n[3], w[3];
  for (int k = 0; k < 3; k++)
    e0[k] = T[1][k] - T[0][k], e1[k] = T[2][k] - T[0][k], w[k] = x[p][k] - T[0][k];
  n[0] = e0[1] * e1[2] - e0[2] * e1[1];
  n[1] = e0[2] * e1[0] - e0[0] * e1[2];
  n[2] = e0[0] * e1[1] - e0[1] * e1[0];
  const double len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  if (!(len > 0)) return 0; /* degenerate now: no normal to push along */
  for (int k = 0; k < 3; k++) n[k] /= len;
  const double s = w[0] * n[0] + w[1] * n[1] + w[2] * n[2];
  if (!(s >= 0 && s < d->thickness)) return 0; /* behind, or too far in front */
  /* barycentric coordinates of the projection (w - s n in the plane) */
  const double d00 = e0[0] * e0[0] + e0[1] * e0[1] + e0[2] * e0[2];
  const double d01 = e0[0] * e1[0] + e0[1] * e1[1] + e0[2] * e1[2];
  const double d11 = e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2];
  const double d20 = w[0] * e0[0] + w[1] * e0[1] + w[2] * e0[2];
  const double d21 = w[0] * e1[0] + w[1] * e1[1] + w[2] * e1[2];
  const double den = d00 * d11 - d01 * d01;
  if (!(den > 0)) return 0;
  const double bv = (d11 * d20 - d01 * d21) / den, bw = (d00 * d21 - d01 * d20) / den;
  const double bu = 1 - bv - bw;
  if (bu < -1e-9 || bv < -1e-9 || bw < -1e-9) return 0; /* beside it */
  /* the skip rule: close at rest is the elastic model's, not a contact */
  if (d->rest_skip > 0) {
    double R[3][3], rc[3];
    tri_at((const double (*)[3])tis->rest, t, R);
    if (ts_closest_point_triangle(tis->rest[p], (const double (*)[3])R, rc) < d->rest_skip)
      return 0;
  }
  o->node = p;
  memcpy(o->tri, t, sizeof o->tri);
  o->bc[0] = bu < 0 ? 0 : bu, o->bc[1] = bv < 0 ? 0 : bv, o->bc[2] = bw < 0 ? 0 : bw;
  memcpy(o->n, n, sizeof o->n);
  o->lambda = 0;
  return 1;
}

/* a found pair stored, or counted as overflow */
static void keep(ts_self_contact *sc, const ts_self_pair *pr) {
  if (sc->n < sc->def.cap)
    sc->pair[sc->n++] = *pr;
  else
    sc->overflow++;
  sc->found++;
}

typedef struct leaf_ctx {
  ts_self_contact *sc;
  const ts_aabb_tree *tree;
  const ts_tissue *t;
  const double (*x)[3];
  double g; /* the walk's reach: h and a hair (1e-6 h) for the projection's tolerance */
} leaf_ctx;

/* node p (a corner triangle `own` owns) against triangle k: its leaf's fat
 * box first, then the exact test */
static void node_tri(leaf_ctx *c, uint32_t p, uint32_t k) {
  const ts_aabb_node *b = &c->tree->nodes[c->tree->leaf[k]];
  for (int j = 0; j < 3; j++)
    if (c->x[p][j] < b->lo[j] - c->g || c->x[p][j] > b->hi[j] + c->g) return;
  ts_self_pair pr;
  if (test_pair(&c->sc->def, c->t, c->x, p, c->tree->tris[k], &pr)) keep(c->sc, &pr);
}

static void leaf_pair(void *ctx, uint32_t a, uint32_t b) {
  leaf_ctx *c = ctx;
  const uint8_t oa = c->sc->own[a], ob = c->sc->own[b];
  for (int j = 0; j < 3; j++) {
    if (oa & (1u << j)) node_tri(c, c->tree->tris[a][j], b);
    if (ob & (1u << j)) node_tri(c, c->tree->tris[b][j], a);
  }
}

static int cmp_pair(const ts_self_pair *p, const ts_self_pair *q) {
  if (p->node != q->node) return p->node < q->node ? -1 : 1;
  for (int j = 0; j < 3; j++)
    if (p->tri[j] != q->tri[j]) return p->tri[j] < q->tri[j] ? -1 : 1;
  return 0;
}

/* heapsort by (node, corners): in place, no allocation (qsort may
 * allocate), and the order the projection's Gauss-Seidel pass follows
 * is the former node order whatever order the walk met the pairs in */
static void sift(ts_self_pair *a, uint32_t i, uint32_t n) {
  for (;;) {
    uint32_t m = i, l = 2 * i + 1, r = l + 1;
    if (l < n && cmp_pair(&a[l], &a[m]) > 0) m = l;
    if (r < n && cmp_pair(&a[r], &a[m]) > 0) m = r;
    if (m == i) return;
    const ts_self_pair tmp = a[i];
    a[i] = a[m], a[m] = tmp;
    i = m;
  }
}

static void sort_pairs(ts_self_pair *a, uint32_t n) {
  for (uint32_t i = n / 2; i-- > 0;) sift(a, i, n);
  for (uint32_t e = n; e-- > 1;) {
    const ts_self_pair tmp = a[0];
    a[0] = a[e], a[e] = tmp;
    sift(a, 0, e);
  }
}

uint32_t ts_self_contact_detect(ts_self_contact *sc, const ts_aabb_tree *tree, const ts_tissue *t,
                                const double (*x)[3]) {
  sc->n = sc->found = 0;
  sc->detections++;
  memset(&sc->walk, 0, sizeof sc->walk);
  if (!tree || !t || !x || !tree->n_tris) return 0;
  if (sc->b_tree != tree || sc->b_tissue != t || sc->b_tris != tree->n_tris ||
      sc->b_nodes != tree->n_nodes || sc->b_points != tree->n_points) {
    if (ts_self_contact_bind(sc, tree, t)) return 0; /* out of memory: nothing detected */
  } else if (sc->b_rebuilds != tree->stats.rebuilds) {
    compute_bound(sc, tree, t); /* rebuilt: new structure, same sizes */
  }
  const double h = sc->def.thickness, skip = sc->def.rest_skip;
  leaf_ctx c = {sc, tree, t, x, h * (1 + 1e-6)};
  ts_aabb_self_def wd = {.grow = c.g};
  /* the rest boxes: every pair below closer than rest_skip at rest */
  wd.prune[0] = (ts_aabb_self_prune){(const double (*)[3])sc->rlo, (const double (*)[3])sc->rhi,
                                     skip};
  /* the displacement boxes (x - rest): a pair in contact (node p, point q
   * of the triangle under it) is closer than h now and at least rest_skip
   * apart at rest, so its displacements differ by more than rest_skip - h;
   * where no two displacements of the two boxes differ that much, nothing
   * below is in contact (less 1e-6 of it for the barycentric tolerance and
   * rounding). Prunes a dented or moved tissue's quiet parts near the root. */
  if (skip > h) {
    ts_aabb_self_boxes(tree, x, (const double (*)[3])t->rest, sc->dlo, sc->dhi);
    wd.prune[1] = (ts_aabb_self_prune){(const double (*)[3])sc->dlo,
                                       (const double (*)[3])sc->dhi, (skip - h) * (1 - 1e-6)};
  }
  ts_aabb_self_walk(tree, &wd, leaf_pair, &c, &sc->walk);
  sort_pairs(sc->pair, sc->n);
  return sc->n;
}

uint32_t ts_self_contact_detect_pernode(ts_self_contact *sc, const ts_aabb_tree *tree,
                                        const ts_tissue *t, const double (*x)[3]) {
  sc->n = sc->found = 0;
  sc->detections++;
  if (!tree || !t || !x || !tree->n_tris) return 0;
  const double h = sc->def.thickness;
  for (uint32_t u = 0; u < tree->n_used; u++) {
    const uint32_t p = tree->used[u];
    double lo[3], hi[3];
    for (int k = 0; k < 3; k++) lo[k] = x[p][k] - h, hi[k] = x[p][k] + h;
    uint32_t nc = ts_aabb_tree_query_box(tree, lo, hi, sc->cand, sc->def.cand_cap);
    if (nc > sc->def.cand_cap) {
      sc->overflow += nc - sc->def.cand_cap;
      nc = sc->def.cand_cap;
    }
    for (uint32_t i = 0; i < nc; i++) {
      ts_self_pair pr;
      if (test_pair(&sc->def, t, x, p, tree->tris[sc->cand[i]], &pr)) keep(sc, &pr);
    }
  }
  return sc->n;
}

/* C = (p - sum bc_j x_j) . n - h for pair c at x */
static double violation(const ts_self_pair *c, const double (*x)[3], double h) {
  double s = 0;
  for (int k = 0; k < 3; k++) {
    const double q = c->bc[0] * x[c->tri[0]][k] + c->bc[1] * x[c->tri[1]][k] +
                     c->bc[2] * x[c->tri[2]][k];
    s += (x[c->node][k] - q) * c->n[k];
  }
  return s - h;
}

double ts_self_contact_project(ts_self_contact *sc, double (*x)[3], const double *im) {
  const double h = sc->def.thickness;
  double worst = 0;
  for (uint32_t i = 0; i < sc->n; i++) {
    ts_self_pair *c = &sc->pair[i];
    const double C = violation(c, (const double (*)[3])x, h);
    if (C >= 0) continue;
    if (-C > worst) worst = -C;
    const double wp = im[c->node];
    double W = wp;
    for (int j = 0; j < 3; j++) W += im[c->tri[j]] * c->bc[j] * c->bc[j];
    if (!(W > 0)) continue; /* every node anchored */
    const double dl = -C / W;
    c->lambda += dl;
    for (int k = 0; k < 3; k++) x[c->node][k] += wp * dl * c->n[k];
    for (int j = 0; j < 3; j++) {
      const double f = im[c->tri[j]] * c->bc[j] * dl;
      if (f == 0) continue;
      for (int k = 0; k < 3; k++) x[c->tri[j]][k] -= f * c->n[k];
    }
  }
  return worst;
}

/* Node i is pushed along d (unit; the way the contact moves it): the
 * accelerations the mass-spring integrator remembers (Beeman's a_(k-1),
 * a_(k-2)) lose their parts against d, or their history term would throw
 * the node back into the contact (as the tool contact's hold_history). */
static void hold_history(ts_tissue *t, uint32_t i, const double d[3]) {
  if (!t->acc || !t->acc_prev) return;
  double *h[2] = {t->acc[i], t->acc_prev[i]};
  for (int q = 0; q < 2; q++) {
    const double an = h[q][0] * d[0] + h[q][1] * d[1] + h[q][2] * d[2];
    if (an < 0)
      for (int c = 0; c < 3; c++) h[q][c] -= an * d[c];
  }
}

double ts_self_contact_settle(ts_self_contact *sc, ts_tissue *t, uint32_t iterations) {
  if (!sc->n) return 0;
  double worst = 0;
  for (uint32_t i = 0; i < sc->n; i++) sc->pair[i].lambda = 0;
  for (uint32_t it = 0; it < iterations; it++) {
    worst = ts_self_contact_project(sc, t->x, t->inv_mass);
    if (worst == 0) break;
  }
  const double *im = t->inv_mass;
  const double hp = t->x_prev && t->h_prev > 0 ? t->h_prev : 0;
  for (uint32_t i = 0; i < sc->n; i++) {
    const ts_self_pair *c = &sc->pair[i];
    double mn[3];
    for (int k = 0; k < 3; k++) mn[k] = -c->n[k];
    /* x_prev moves with the node (the projection's move is not a velocity:
     * a kick of it over the substep would throw the sheets apart) */
    if (c->lambda != 0 && t->x_prev) {
      for (int k = 0; k < 3; k++) t->x_prev[c->node][k] += im[c->node] * c->lambda * c->n[k];
      for (int j = 0; j < 3; j++)
        for (int k = 0; k < 3; k++)
          t->x_prev[c->tri[j]][k] -= im[c->tri[j]] * c->bc[j] * c->lambda * c->n[k];
    }
    if (im[c->node] > 0) hold_history(t, c->node, c->n);
    for (int j = 0; j < 3; j++)
      if (im[c->tri[j]] > 0 && c->bc[j] > 0) hold_history(t, c->tri[j], mn);
    /* inelastic: the approaching relative normal velocity goes, mass
     * weighted as the projection, in v and in Verlet's implied velocity
     * (x - x_prev) / h_prev alike */
    double vr = 0;
    for (int k = 0; k < 3; k++) {
      const double q = c->bc[0] * t->v[c->tri[0]][k] + c->bc[1] * t->v[c->tri[1]][k] +
                       c->bc[2] * t->v[c->tri[2]][k];
      vr += (t->v[c->node][k] - q) * c->n[k];
    }
    if (vr >= 0) continue;
    double W = im[c->node];
    for (int j = 0; j < 3; j++) W += im[c->tri[j]] * c->bc[j] * c->bc[j];
    if (!(W > 0)) continue;
    const double dv = -vr / W;
    for (int k = 0; k < 3; k++) {
      const double d = im[c->node] * dv * c->n[k];
      t->v[c->node][k] += d;
      if (hp > 0) t->x_prev[c->node][k] -= d * hp;
    }
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++) {
        const double d = im[c->tri[j]] * c->bc[j] * dv * c->n[k];
        t->v[c->tri[j]][k] -= d;
        if (hp > 0) t->x_prev[c->tri[j]][k] += d * hp;
      }
  }
  for (uint32_t i = 0; i < sc->n; i++) {
    const double C = violation(&sc->pair[i], (const double (*)[3])t->x, sc->def.thickness);
    if (-C > worst) worst = -C;
  }
  return worst < 0 ? 0 : worst;
}

static int cmp_qsort(const void *a, const void *b) { return cmp_pair(a, b); }

uint32_t ts_self_contact_brute(const ts_self_contact_def *def, const ts_tissue *t,
                               const double (*x)[3], ts_self_pair *out, uint32_t cap) {
  const uint32_t nt = ts_tissue_n_contact_tris(t);
  const uint32_t (*tris)[3] = (const uint32_t (*)[3])ts_tissue_contact_tris(t);
  uint8_t *surf = calloc(t->n_nodes, 1);
  if (!surf) return 0;
  for (uint32_t k = 0; k < nt; k++)
    for (int c = 0; c < 3; c++) surf[tris[k][c]] = 1;
  uint32_t n = 0;
  for (uint32_t p = 0; p < t->n_nodes; p++) {
    if (!surf[p]) continue;
    for (uint32_t k = 0; k < nt; k++) {
      ts_self_pair pr;
      if (!test_pair(def, t, x, p, tris[k], &pr)) continue;
      if (n < cap) out[n] = pr;
      n++;
    }
  }
  free(surf);
  qsort(out, n < cap ? n : cap, sizeof *out, cmp_qsort);
  return n;
}
