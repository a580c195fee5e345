/*
 * ts_extrude.c: multi-layer extrusion of a surface mesh (ts_extrude.h), the
 * layered tissue of the third method: every surface vertex is offset once per
 * layer, along its inward vertex normal or along one given direction (the
 * method's "translate downward" for a flat patch), so N layers give N+1
 * sheets of identical topology and every surface triangle sweeps one prism
 * per layer.
 *
 * Vertex normals are angle-weighted (G. Thuermer and C. A. Wuethrich,
 * "Computing vertex normals from polygonal facets", Journal of Graphics Tools
 * 3(1):43-46, 1998): the sum of the unit normals of the triangles around the
 * vertex, each weighted by the triangle's angle at the vertex. Unlike area or
 * uniform weights this depends only on the surface's shape, not on how it is
 * triangulated (a cube's corner normal is (1,1,1)/sqrt(3) whatever the
 * diagonals), so the layers do not shift with the meshing.
 *
 * The render surface keeps every layer visible from the correct side: the
 * outer sheet in the surface's winding (counter-clockwise from outside), the
 * innermost sheet reversed, and two triangles per layer on every open
 * boundary edge (a side wall) wound so that its normal points away from the
 * surface's interior. See ts__extrusion_assemble for the inversion test.
 */
#include "ts_extrude.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude_internal.h"
#include "ts_meshtopo.h"

/* Largest extrusion accepted: 64 Mi nodes or render triangles. */
#define TS__EXTRUDE_MAX (1u << 26)

static void ts__sub(const double *a, const double *b, double *o) {
  o[0] = a[0] - b[0];
  o[1] = a[1] - b[1];
  o[2] = a[2] - b[2];
}

static void ts__cross(const double *a, const double *b, double *o) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}

static double ts__dot(const double *a, const double *b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static void ts__errf(char *err, size_t errcap, const char *msg) {
  if (err && errcap) snprintf(err, errcap, "%s", msg);
}

void ts_extrusion_free(ts_extrusion *e) {
  if (!e) return;
  free(e->x);
  free(e->surface_tris);
  free(e->boundary);
  free(e->tris);
  free(e);
}

int ts__extrusion_new(uint32_t n_layers, uint32_t nv, uint32_t nt, ts_extrusion **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (n_layers < 1 || n_layers > TS_MAX_LAYERS || nv == 0 || nt == 0) return TS_EINVAL;
  if ((uint64_t)(n_layers + 1) * nv > TS__EXTRUDE_MAX || nt > TS__EXTRUDE_MAX) return TS_ETOOBIG;
  ts_extrusion *e = calloc(1, sizeof *e);
  if (!e) return TS_ENOMEM;
  e->n_layers = n_layers;
  e->n_sheets = n_layers + 1;
  e->nv = nv;
  e->n_surface_tris = nt;
  e->x = calloc((size_t)e->n_sheets * nv, sizeof *e->x);
  e->surface_tris = calloc(nt, sizeof *e->surface_tris);
  e->boundary = calloc(nv, 1);
  if (!e->x || !e->surface_tris || !e->boundary) {
    ts_extrusion_free(e);
    return TS_ENOMEM;
  }
  *out = e;
  return 0;
}

/* Inversion test of the prism swept by triangle (A, B, C) on one sheet to
 * (A', B', C') on the next. Every intermediate triangle
 * T(s) = T + s (T' - T), s in [0, 1], must keep the orientation of the outer
 * face: with u(s) = B(s) - A(s), v(s) = C(s) - A(s), the function
 * f(s) = n0 . (u(s) x v(s)), n0 = u(0) x v(0), is a quadratic in s, and the
 * prism is inverted when its minimum over [0, 1] falls to 1e-6 f(0) or below
 * (an intermediate triangle shrinks to a millionth of its area, flips, or
 * collapses through a point, as when a convex bulge is offset inwards past
 * its centre of curvature: comparing only the two end faces misses that,
 * because a point reflection keeps a triangle's normal). A prism whose
 * lateral edges leave the outer face's outer side is inverted too (a layer
 * grown outwards, e.g. a direction pointing out of the surface). */
static int ts__prism_inverted(const double *a, const double *b, const double *c, const double *a1,
                              const double *b1, const double *c1) {
  double u0[3], v0[3], u1[3], v1[3], du[3], dv[3], n0[3], t1[3], t2[3], n2[3];
  ts__sub(b, a, u0);
  ts__sub(c, a, v0);
  ts__sub(b1, a1, u1);
  ts__sub(c1, a1, v1);
  ts__sub(u1, u0, du);
  ts__sub(v1, v0, dv);
  ts__cross(u0, v0, n0);
  ts__cross(u0, dv, t1);
  ts__cross(du, v0, t2);
  ts__cross(du, dv, n2);
  double f0 = ts__dot(n0, n0);
  double c1c = ts__dot(n0, t1) + ts__dot(n0, t2), c2 = ts__dot(n0, n2);
  double lo = fmin(f0, f0 + c1c + c2);
  if (c2 > 0) {
    double s = -c1c / (2 * c2);
    if (s > 0 && s < 1) lo = fmin(lo, f0 + s * (c1c + s * c2));
  }
  if (!(lo > 1e-6 * f0)) return 1;
  double lat[3] = {a1[0] - a[0] + b1[0] - b[0] + c1[0] - c[0], a1[1] - a[1] + b1[1] - b[1] + c1[1] - c[1],
                   a1[2] - a[2] + b1[2] - b[2] + c1[2] - c[2]};
  return !(ts__dot(lat, n0) < 0);
}

int ts__extrusion_assemble(ts_extrusion *e, char *err, size_t errcap) {
  if (!e || !e->x || !e->surface_tris) return TS_EINVAL;
  if (err && errcap) err[0] = 0;
  ts_mesh surf = {e->nv, e->n_surface_tris, e->x, e->surface_tris};
  ts_meshtopo *topo = NULL;
  int rc = ts_meshtopo_build(&surf, &topo);
  if (rc == TS_EMESH) ts__errf(err, errcap, "surface: a triangle's vertex index is out of range");
  if (rc) return rc;
  ts_meshtopo_report rep;
  char why[160];
  rc = ts_meshtopo_check(&surf, topo, &rep, why, sizeof why);
  if (rc == TS_EMESH && (rep.n_nonmanifold_edges || rep.n_nonmanifold_verts || rep.n_misoriented_edges)) {
    if (err && errcap) snprintf(err, errcap, "surface is not a consistently wound manifold: %s", why);
    ts_meshtopo_free(topo);
    return TS_EMESH;
  }
  if (rc && rc != TS_EMESH) {
    ts_meshtopo_free(topo);
    return rc;
  }

  uint32_t nv = e->nv, nt = e->n_surface_tris, L = e->n_layers, nb = rep.n_boundary_edges;
  uint64_t ntr = 2 * (uint64_t)nt + 2 * (uint64_t)nb * L;
  if (ntr > TS__EXTRUDE_MAX) {
    ts_meshtopo_free(topo);
    return TS_ETOOBIG;
  }
  uint32_t(*tris)[3] = malloc(sizeof *tris * ntr);
  if (!tris) {
    ts_meshtopo_free(topo);
    return TS_ENOMEM;
  }
  free(e->tris);
  e->tris = tris;
  e->n_tris = (uint32_t)ntr;
  e->n_groups = L;
  memset(e->group_tri_count, 0, sizeof e->group_tri_count);
  memset(e->boundary, 0, nv);

  uint32_t n = 0;
  for (uint32_t f = 0; f < nt; f++) { /* outer sheet, surface winding */
    memcpy(tris[n++], e->surface_tris[f], sizeof *tris);
  }
  for (uint32_t s = 0; s < L; s++) {
    uint32_t start = s == 0 ? 0 : n;
    for (uint32_t q = 0; q < topo->n_edges; q++) {
      if (ts_meshtopo_edge_valence(topo, q) != 1) continue;
      uint32_t f = topo->edge_tris[topo->edge_tri_off[q]], i = 0;
      while (topo->tri_edges[f][i] != q) i++;
      uint32_t a = e->surface_tris[f][i], b = e->surface_tris[f][(i + 1) % 3];
      e->boundary[a] = e->boundary[b] = 1;
      /* a -> b runs with the surface interior on its left seen from outside;
       * the wall's normal must point to its right, away from the interior */
      uint32_t as = s * nv + a, bs = s * nv + b, a1 = as + nv, b1 = bs + nv;
      tris[n][0] = as, tris[n][1] = a1, tris[n][2] = b1, n++;
      tris[n][0] = as, tris[n][1] = b1, tris[n][2] = bs, n++;
    }
    if (s == L - 1) { /* innermost sheet, reversed */
      uint32_t base = L * nv;
      for (uint32_t f = 0; f < nt; f++) {
        tris[n][0] = base + e->surface_tris[f][0];
        tris[n][1] = base + e->surface_tris[f][2];
        tris[n][2] = base + e->surface_tris[f][1];
        n++;
      }
    }
    e->group_tri_count[s] = n - start;
  }
  ts_meshtopo_free(topo);

  /* inverted prisms */
  e->n_inverted = 0;
  for (uint32_t s = 0; s < L; s++)
    for (uint32_t f = 0; f < nt; f++) {
      const uint32_t *v = e->surface_tris[f];
      const double(*x0)[3] = (const double(*)[3])e->x + (size_t)s * nv;
      const double(*x1)[3] = x0 + nv;
      if (!ts__prism_inverted(x0[v[0]], x0[v[1]], x0[v[2]], x1[v[0]], x1[v[1]], x1[v[2]])) continue;
      if (e->n_inverted++ == 0 && err && errcap)
        snprintf(err, errcap,
                 "layer %u (sheets %u-%u): the prism under surface triangle %u (%u,%u,%u) is "
                 "inverted: the offset folds it over (offset deeper than the local radius of "
                 "curvature of a bulge, or pointing out of the surface)",
                 s, s, s + 1, f, v[0], v[1], v[2]);
    }
  if (e->n_inverted && err && errcap) {
    size_t len = strlen(err);
    if (len + 1 < errcap)
      snprintf(err + len, errcap - len, "; %u inverted prisms in all", e->n_inverted);
  }
  return e->n_inverted ? TS_EMESH : 0;
}

/* Inward unit vertex normals, angle-weighted. */
static int ts__inward_normals(const ts_mesh *m, double (*nrm)[3], char *err, size_t errcap) {
  memset(nrm, 0, sizeof *nrm * m->n_verts);
  double *wsum = calloc(m->n_verts, sizeof *wsum);
  if (!wsum) return TS_ENOMEM;
  for (uint32_t f = 0; f < m->n_tris; f++) {
    const uint32_t *t = m->t[f];
    double e0[3], e1[3], fn[3];
    ts__sub(m->v[t[1]], m->v[t[0]], e0);
    ts__sub(m->v[t[2]], m->v[t[0]], e1);
    ts__cross(e0, e1, fn);
    double len = sqrt(ts__dot(fn, fn));
    if (!(len > 0)) continue; /* degenerate: refused by the surface check */
    for (int k = 0; k < 3; k++) fn[k] /= len;
    for (int i = 0; i < 3; i++) {
      const double *p = m->v[t[i]], *q = m->v[t[(i + 1) % 3]], *r = m->v[t[(i + 2) % 3]];
      double a[3], b[3], c[3];
      ts__sub(q, p, a);
      ts__sub(r, p, b);
      ts__cross(a, b, c);
      double ang = atan2(sqrt(ts__dot(c, c)), ts__dot(a, b));
      for (int k = 0; k < 3; k++) nrm[t[i]][k] -= ang * fn[k];
      wsum[t[i]] += ang;
    }
  }
  int rc = 0;
  for (uint32_t j = 0; j < m->n_verts && !rc; j++) {
    double len = sqrt(ts__dot(nrm[j], nrm[j]));
    if (wsum[j] == 0) {
      if (err && errcap) snprintf(err, errcap, "surface vertex %u is used by no triangle", j);
      rc = TS_EMESH;
    } else if (!(len > 1e-9 * wsum[j])) {
      if (err && errcap)
        snprintf(err, errcap, "surface vertex %u has no inward normal (its triangles cancel out)", j);
      rc = TS_EMESH;
    } else {
      for (int k = 0; k < 3; k++) nrm[j][k] /= len;
    }
  }
  free(wsum);
  return rc;
}

int ts_extrude(const ts_mesh *surface, const ts_extrude_def *def, ts_extrusion **out, char *err,
               size_t errcap) {
  if (err && errcap) err[0] = 0;
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!surface || !def) {
    ts__errf(err, errcap, "no surface or no extrusion definition");
    return TS_EINVAL;
  }
  if (def->n_layers < 1 || def->n_layers > TS_MAX_LAYERS) {
    if (err && errcap) snprintf(err, errcap, "layer count %u is not in 1..%d", def->n_layers, TS_MAX_LAYERS);
    return TS_EINVAL;
  }
  for (uint32_t l = 0; l < def->n_layers; l++)
    if (!isfinite(def->thickness[l]) || !(def->thickness[l] > 0)) {
      if (err && errcap) snprintf(err, errcap, "layer %u: thickness %g m is not a positive number", l, def->thickness[l]);
      return TS_EINVAL;
    }
  double dir[3] = {0, 0, 0};
  if (def->mode == TS_EXTRUDE_DIRECTION) {
    double len = sqrt(ts__dot(def->direction, def->direction));
    if (!isfinite(len) || !(len > 1e-12)) {
      ts__errf(err, errcap, "extrusion direction is zero or not finite");
      return TS_EINVAL;
    }
    for (int k = 0; k < 3; k++) dir[k] = def->direction[k] / len;
  } else if (def->mode != TS_EXTRUDE_NORMAL) {
    ts__errf(err, errcap, "unknown extrusion mode");
    return TS_EINVAL;
  }
  if (surface->n_verts < 3 || surface->n_tris < 1 || !surface->v || !surface->t) {
    ts__errf(err, errcap, "surface is empty");
    return TS_EMESH;
  }
  for (uint32_t j = 0; j < surface->n_verts; j++)
    if (!isfinite(surface->v[j][0]) || !isfinite(surface->v[j][1]) || !isfinite(surface->v[j][2])) {
      if (err && errcap) snprintf(err, errcap, "surface vertex %u has a coordinate that is NaN or infinite", j);
      return TS_EMESH;
    }
  for (uint32_t f = 0; f < surface->n_tris; f++)
    for (int i = 0; i < 3; i++)
      if (surface->t[f][i] >= surface->n_verts) {
        if (err && errcap)
          snprintf(err, errcap, "surface triangle %u: vertex index %u out of range (%u vertices)", f,
                   surface->t[f][i], surface->n_verts);
        return TS_EMESH;
      }

  /* the surface must be something the layers can follow */
  ts_meshtopo *topo = NULL;
  int rc = ts_meshtopo_build(surface, &topo);
  if (rc) return rc;
  ts_meshtopo_report rep;
  char why[160];
  rc = ts_meshtopo_check(surface, topo, &rep, why, sizeof why);
  ts_meshtopo_free(topo);
  if (rc == TS_EMESH) {
    if (err && errcap) snprintf(err, errcap, "surface: %s", why);
    return rc;
  }
  if (rc) return rc;

  ts_extrusion *e = NULL;
  rc = ts__extrusion_new(def->n_layers, surface->n_verts, surface->n_tris, &e);
  if (rc == TS_ETOOBIG) ts__errf(err, errcap, "extrusion would exceed 64 Mi nodes");
  if (rc) return rc;
  memcpy(e->surface_tris, surface->t, sizeof *e->surface_tris * surface->n_tris);
  memcpy(e->x, surface->v, sizeof *e->x * surface->n_verts);

  uint32_t nv = surface->n_verts;
  double(*nrm)[3] = malloc(sizeof *nrm * nv);
  if (!nrm) {
    ts_extrusion_free(e);
    return TS_ENOMEM;
  }
  if (def->mode == TS_EXTRUDE_NORMAL) {
    rc = ts__inward_normals(surface, nrm, err, errcap);
    if (rc) {
      free(nrm);
      ts_extrusion_free(e);
      return rc;
    }
  } else {
    for (uint32_t j = 0; j < nv; j++) memcpy(nrm[j], dir, sizeof dir);
  }
  double depth = 0;
  for (uint32_t s = 1; s <= def->n_layers; s++) {
    depth += def->thickness[s - 1];
    for (uint32_t j = 0; j < nv; j++)
      for (int k = 0; k < 3; k++) e->x[(size_t)s * nv + j][k] = surface->v[j][k] + depth * nrm[j][k];
  }
  free(nrm);

  rc = ts__extrusion_assemble(e, err, errcap);
  if (rc && rc != TS_EMESH) {
    ts_extrusion_free(e);
    return rc;
  }
  if (rc == TS_EMESH && e->n_inverted == 0) { /* topology refused: cannot happen after the check */
    ts_extrusion_free(e);
    return rc;
  }
  *out = e;
  return rc;
}
