/*
 * ts_self_contact.c: a tissue's contact with itself, vertex against
 * triangle through the tissue's AABB tree, and its mass-weighted
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

void ts_self_contact_free(ts_self_contact *sc) {
  if (!sc) return;
  free(sc->pair);
  free(sc->cand);
  sc->pair = NULL;
  sc->cand = NULL;
  sc->n = 0;
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

uint32_t ts_self_contact_detect(ts_self_contact *sc, const ts_aabb_tree *tree, const ts_tissue *t,
                                const double (*x)[3]) {
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
      if (!test_pair(&sc->def, t, x, p, tree->tris[sc->cand[i]], &pr)) continue;
      if (sc->n < sc->def.cap)
        sc->pair[sc->n++] = pr;
      else
        sc->overflow++;
      sc->found++;
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

static int cmp_pair(const void *a, const void *b) {
  const ts_self_pair *p = a, *q = b;
  if (p->node != q->node) return p->node < q->node ? -1 : 1;
  for (int j = 0; j < 3; j++)
    if (p->tri[j] != q->tri[j]) return p->tri[j] < q->tri[j] ? -1 : 1;
  return 0;
}

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
  qsort(out, n < cap ? n : cap, sizeof *out, cmp_pair);
  return n;
}
