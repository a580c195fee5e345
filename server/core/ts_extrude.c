/*
 * ts_extrude.c: multi-layer extrusion of a surface mesh (ts_extrude.h), the
 * layered tissue of the third method: every surface vertex is offset once per
 * layer, along its inward vertex normal or along one given direction (the
 * method's "translate downward" for a flat patch), so N layers give N+1
 * sheets of identical topology and every surface triangle sweeps one prism
 * per layer.
 *
 * Directions: the angle-weighted inward vertex normal, or at sharp creases
 * the "most normal" direction (ts_extrude_dir.c). Prisms are checked by
 * ts_prism_check (ts_extrude_prism.c), the same test the tissue builder
 * applies.
 *
 * Relaxing (def->max_relax > 0): before the directions are taken, the
 * vertices of small pleats are moved, each by at most max_relax, so that
 * they get an inward direction (ts_extrude_relax.c); sheet 0 is then the
 * relaxed surface.
 *
 * Thinning (def->min_depth_fraction = f > 0): where offsetting by the full
 * depth D folds the layers (a bulge thinner than D, a crease), every vertex j
 * gets a depth fraction phi_j in [f, 1], all its layers scaled by it, so
 * that sheet s lies at phi_j * (t_0 + ... + t_{s-1}) along the vertex's
 * direction. Starting from phi = 1, each round checks every column of
 * prisms (a surface triangle swept through all the layers) and multiplies
 * the phi of the vertices of every column that ts_prism_check refuses or
 * that narrows with depth to below a quarter of its Jacobian at the surface
 * (ts__prism_shrink: a triangle shrinking to half its size; such nearly
 * collapsed prisms are valid but make springs so short and stiff that they
 * would set the mass-spring substep) by 0.8 (not below f), then
 * grades the change in one sweep over the edges, |phi_j - phi_k| D <=
 * 0.5 |x_j - x_k| across every edge (j, k) (the innermost sheet slopes by at
 * most about 27 degrees against the surface where the depth changes, however
 * fine the mesh), so the layers taper rather than step. When no marked
 * column can be thinned further (none, or all at f), the columns of sheets
 * that cross each other (ts_extrude_cross.c: a part of the organ thinner
 * than twice the depth, whose two sides' layers meet in the middle with
 * every prism sound) are marked and thinned the same way. It
 * stops when neither kind of column is left to thin (none marked, or every
 * marked column at f already), or after TS__THIN_ROUNDS rounds: the depth never
 * drops below f D anywhere, and what cannot be unfolded within that bound is
 * refused, the first inverted prism named (narrow but valid prisms at the
 * floor stay). Thinning is a warning, not an error: the
 * call returns 0 and says in err how many vertices kept how little depth.
 *
 * Crossings: once no prism is inverted, sheets that still pass through each
 * other (no thinning asked for, or at the floor) are counted and the first
 * pair named (ts_extrude_cross.c), and the call returns TS_EMESH: a tissue
 * whose layers interpenetrate is physically wrong, and the springs and
 * contacts of two sheets inside each other would fight. The shared meshes
 * with the default 4.5 mm of layers do cross without thinning (parts of the
 * livers are under 9 mm thick: liver.obj 6 pairs, liver-smooth 282, spot
 * 52, measured when the check was added) and none do after it. The check
 * stops past TS__CROSS_CAP (20000) pairs in one query, in a thinning round
 * or the final count, and the call returns TS_EMESH naming the count and
 * the cap (the extrusion assembled and returned, n_crossings = cap + 1):
 * many overlapping closed parts would otherwise have every pair counted in
 * every round. The thinning's queries share one tree, refitted for the
 * columns thinned since the last (ts_extrude_cross.c).
 *
 * The render surface keeps every layer visible from the correct side: each
 * layer's top sheet (sheet s for layer s) in the surface's winding
 * (counter-clockwise from outside, so facing outwards), the innermost sheet
 * reversed, and two triangles per layer on every open boundary edge (a side
 * wall) wound so that its normal points away from the surface's interior.
 * The outer sheet and the walls and the innermost sheet close the solid; the
 * inner layers' top sheets lie inside it, so a layer hidden or cut away in
 * a client shows the next one's outer face rather than nothing. See
 * ts__extrusion_assemble for the inversion test.
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
#define TS__THIN_STEP 0.8
#define TS__THIN_ROUNDS 200
#define TS__THIN_SLOPE 0.5
#define TS__THIN_SHRINK 0.25

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

int ts_extrusion_tri_inner(const ts_extrusion *e, uint32_t k) {
  if (!e || !e->tris || k >= e->n_tris || !e->nv) return 0;
  uint32_t s = e->tris[k][0] / e->nv;
  return s > 0 && s < e->n_layers && e->tris[k][1] / e->nv == s && e->tris[k][2] / e->nv == s;
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

uint32_t ts__extrusion_count_inverted(ts_extrusion *e, uint8_t *mark, char *err, size_t errcap) {
  uint32_t nv = e->nv, nt = e->n_surface_tris, L = e->n_layers;
  if (mark) memset(mark, 0, nv);
  e->n_inverted = 0;
  for (uint32_t s = 0; s < L; s++)
    for (uint32_t f = 0; f < nt; f++) {
      const uint32_t *v = e->surface_tris[f];
      const double(*x0)[3] = (const double(*)[3])e->x + (size_t)s * nv;
      const double(*x1)[3] = x0 + nv;
      double P[3][3], Q[3][3];
      for (int k = 0; k < 3; k++) {
        memcpy(P[k], x0[v[k]], sizeof P[k]);
        memcpy(Q[k], x1[v[k]], sizeof Q[k]);
      }
      if (ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, NULL, NULL) == 0) continue;
      if (mark) mark[v[0]] = mark[v[1]] = mark[v[2]] = 1;
      if (e->n_inverted++ == 0 && err && errcap)
        snprintf(err, errcap,
                 "layer %u (sheets %u-%u): the prism under surface triangle %u (%u,%u,%u) is "
                 "inverted: the offset folds it over (offset deeper than the local radius of "
                 "curvature of a bulge, a sharp crease, or pointing out of the surface)",
                 s, s, s + 1, f, v[0], v[1], v[2]);
    }
  if (e->n_inverted && err && errcap) {
    size_t len = strlen(err);
    if (len + 1 < errcap) snprintf(err + len, errcap - len, "; %u inverted prisms in all", e->n_inverted);
  }
  return e->n_inverted;
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
  uint64_t ntr = (uint64_t)(L + 1) * nt + 2 * (uint64_t)nb * L;
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
  for (uint32_t s = 0; s < L; s++) {
    uint32_t start = n;
    /* the layer's top sheet, surface winding: what shows when the layers
     * above it are hidden or cut away */
    for (uint32_t f = 0; f < nt; f++, n++)
      for (int k = 0; k < 3; k++) tris[n][k] = s * nv + e->surface_tris[f][k];
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

  ts__extrusion_count_inverted(e, NULL, err, errcap);
  return e->n_inverted ? TS_EMESH : 0;
}

/* Marks (mark: nv flags) the vertices of every column of prisms (sheet 0
 * to the innermost sheet: every layer's prism is a slice of it, since each
 * vertex's sheets lie on one line at the same fractions of its depth) that
 * ts_prism_check refuses or that narrows below TS__THIN_SHRINK
 * (ts__prism_shrink); returns how many columns. */
static uint32_t thin_marks(const ts_extrusion *e, uint8_t *mark) {
  uint32_t nv = e->nv, n = 0;
  memset(mark, 0, nv);
  for (uint32_t f = 0; f < e->n_surface_tris; f++) {
    const uint32_t *v = e->surface_tris[f];
    double P[3][3], Q[3][3];
    for (int k = 0; k < 3; k++) {
      memcpy(P[k], e->x[v[k]], sizeof P[k]);
      memcpy(Q[k], e->x[(size_t)e->n_layers * nv + v[k]], sizeof Q[k]);
    }
    if (ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, NULL, NULL) == 0 &&
        ts__prism_shrink((const double(*)[3])P, (const double(*)[3])Q) >= TS__THIN_SHRINK)
      continue;
    mark[v[0]] = mark[v[1]] = mark[v[2]] = 1;
    n++;
  }
  return n;
}

/* Shrinks the depth fraction phi of every marked vertex by TS__THIN_STEP,
 * not below floor_f; returns whether any changed. */
static int thin_step(const uint8_t *mark, double *phi, uint32_t nv, double floor_f) {
  int changed = 0;
  for (uint32_t j = 0; j < nv; j++)
    if (mark[j] && phi[j] > floor_f) {
      phi[j] = fmax(floor_f, TS__THIN_STEP * phi[j]);
      changed = 1;
    }
  return changed;
}

/* One round's crossing query of the thinning: the first builds the check
 * (*cc) and keeps phi as it queried it (*phi_q); later ones refit it for the
 * nodes of the columns whose phi changed since (sheet 0 never moves) rather
 * than rebuilding. Marks the crossing pairs' columns, *n_pairs their count.
 * Returns 0, TS_EMESH (past TS__CROSS_CAP: err says so), TS_ENOMEM or as
 * the check. */
static int cross_query(ts_extrusion *e, const double *phi, ts__cross_check **cc, double **phi_q,
                       uint32_t **moved, uint8_t *mark, uint32_t *n_pairs, char *err, size_t errcap) {
  const uint32_t nv = e->nv, S = e->n_sheets;
  int rc;
  if (!*cc) {
    *phi_q = malloc(sizeof **phi_q * nv);
    *moved = malloc(sizeof **moved * (size_t)(S - 1) * nv);
    if (!*phi_q || !*moved) return TS_ENOMEM;
    rc = ts__cross_check_new(e, cc);
    if (rc) return rc;
  } else {
    uint32_t n = 0;
    for (uint32_t j = 0; j < nv; j++)
      if (phi[j] != (*phi_q)[j])
        for (uint32_t s = 1; s < S; s++) (*moved)[n++] = s * nv + j;
    rc = ts__cross_check_moved(*cc, e, *moved, n);
    if (rc) return rc;
  }
  memcpy(*phi_q, phi, sizeof *phi * nv);
  return ts__cross_check_mark(*cc, e, mark, n_pairs, err, errcap);
}

/* Whether def->stop asks the extrusion to stop (ts_extrude_def.stop);
 * err then says so. */
static int stop_asked(const ts_extrude_def *def, char *err, size_t errcap) {
  if (!def->stop || !atomic_load_explicit(def->stop, memory_order_relaxed)) return 0;
  if (err && errcap) snprintf(err, errcap, "the extrusion was stopped");
  return 1;
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
  if (!isfinite(def->min_depth_fraction) || def->min_depth_fraction < 0 || def->min_depth_fraction >= 1) {
    if (err && errcap)
      snprintf(err, errcap, "min_depth_fraction %g is not in [0, 1)", def->min_depth_fraction);
    return TS_EINVAL;
  }
  if (!isfinite(def->max_relax) || def->max_relax < 0 || def->max_relax > 1) {
    if (err && errcap) snprintf(err, errcap, "max_relax %g m is not in [0, 1]", def->max_relax);
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
  if (rc) {
    if (rc == TS_EMESH && err && errcap) snprintf(err, errcap, "surface: %s", why);
    ts_meshtopo_free(topo);
    return rc;
  }

  uint32_t nv = surface->n_verts;
  if (stop_asked(def, err, errcap)) {
    ts_meshtopo_free(topo);
    return TS_ESHUTDOWN;
  }
  ts_extrusion *e = NULL;
  double(*nrm)[3] = NULL, *phi = NULL, *phi_q = NULL;
  uint8_t *mark = NULL;
  uint32_t *moved = NULL;
  ts__cross_check *cc = NULL;
  int capped = 0;
  char cap_msg[512] = "";
  rc = ts__extrusion_new(def->n_layers, nv, surface->n_tris, &e);
  if (rc == TS_ETOOBIG) ts__errf(err, errcap, "extrusion would exceed 64 Mi nodes");
  if (rc) goto fail;
  memcpy(e->surface_tris, surface->t, sizeof *e->surface_tris * surface->n_tris);
  memcpy(e->x, surface->v, sizeof *e->x * nv);
  nrm = malloc(sizeof *nrm * nv);
  phi = malloc(sizeof *phi * nv);
  mark = malloc(nv);
  if (!nrm || !phi || !mark) {
    rc = TS_ENOMEM;
    goto fail;
  }
  if (def->mode == TS_EXTRUDE_NORMAL) {
    /* sheet 0: the surface, its pleats relaxed when asked to */
    ts_mesh base = {nv, surface->n_tris, e->x, e->surface_tris};
    rc = ts__extrude_relax(&base, topo, def->max_relax, &e->n_relaxed, &e->max_relaxed);
    if (rc) goto fail;
    rc = ts__extrude_directions(&base, topo, nrm, &e->n_tilted, err, errcap);
    if (rc == TS_EMESH && e->n_relaxed && err && errcap) {
      size_t len = strlen(err);
      if (len + 1 < errcap)
        snprintf(err + len, errcap - len, " (still, after moving %u vertices by up to %.3g mm)",
                 e->n_relaxed, e->max_relaxed * 1e3);
    }
    if (rc) goto fail;
  } else {
    for (uint32_t j = 0; j < nv; j++) memcpy(nrm[j], dir, sizeof dir);
  }
  if (stop_asked(def, err, errcap)) {
    rc = TS_ESHUTDOWN;
    goto fail;
  }

  /* sheets at phi_j times the full depth, phi thinned where prisms fold */
  const double floor_f = def->min_depth_fraction;
  double full_depth = 0;
  for (uint32_t l = 0; l < def->n_layers; l++) full_depth += def->thickness[l];
  for (uint32_t j = 0; j < nv; j++) phi[j] = 1;
  for (int round = 0;; round++) {
    double depth = 0;
    for (uint32_t s = 1; s <= def->n_layers; s++) {
      depth += def->thickness[s - 1];
      for (uint32_t j = 0; j < nv; j++)
        for (int k = 0; k < 3; k++)
          e->x[(size_t)s * nv + j][k] = e->x[j][k] + phi[j] * depth * nrm[j][k];
    }
    if (!(floor_f > 0) || round == TS__THIN_ROUNDS) break;
    if (stop_asked(def, err, errcap)) {
      rc = TS_ESHUTDOWN;
      goto fail;
    }
    thin_marks(e, mark);
    int changed = thin_step(mark, phi, nv, floor_f);
    if (!changed) {
      /* no fold left to thin: sheets that cross (a part thinner than twice
       * the depth) are thinned the same way */
      uint32_t n_pairs = 0;
      rc = cross_query(e, phi, &cc, &phi_q, &moved, mark, &n_pairs, cap_msg, sizeof cap_msg);
      if (rc == TS_EMESH) { /* past the check's cap: refused below, once assembled */
        capped = 1;
        break;
      }
      if (rc) goto fail;
      if (n_pairs > e->n_crossings_thinned) e->n_crossings_thinned = n_pairs;
      if (n_pairs) changed = thin_step(mark, phi, nv, floor_f);
    }
    if (!changed) break; /* every marked column is at the floor already */
    for (uint32_t q = 0; q < topo->n_edges; q++) {
      uint32_t a = topo->edges[q][0], b = topo->edges[q][1];
      double d[3];
      for (int k = 0; k < 3; k++) d[k] = e->x[a][k] - e->x[b][k];
      double g = TS__THIN_SLOPE * sqrt(ts__dot(d, d)) / full_depth;
      phi[a] = fmin(phi[a], phi[b] + g);
      phi[b] = fmin(phi[b], phi[a] + g);
    }
  }
  e->n_thinned = 0;
  e->min_depth_kept = 1;
  for (uint32_t j = 0; j < nv; j++)
    if (phi[j] < 1) {
      e->n_thinned++;
      e->min_depth_kept = fmin(e->min_depth_kept, phi[j]);
    }

  ts__cross_check_free(cc);
  cc = NULL;
  if (stop_asked(def, err, errcap)) {
    rc = TS_ESHUTDOWN;
    goto fail;
  }
  if (capped) {
    /* the render surface is built for a tool to show; the crossings stay as
     * the capped query left them (assembling leaves them alone) */
    rc = ts__extrusion_assemble(e, NULL, 0);
    if (rc && rc != TS_EMESH) goto fail;
    if (err && errcap) snprintf(err, errcap, "%s", cap_msg);
    rc = TS_EMESH;
    goto done;
  }
  rc = ts__extrusion_assemble(e, err, errcap);
  if (rc && (rc != TS_EMESH || e->n_inverted == 0)) /* topology refused: cannot happen after the check */
    goto fail;
  if (rc == 0 && stop_asked(def, err, errcap)) {
    rc = TS_ESHUTDOWN;
    goto fail;
  }
  if (rc == 0) {
    /* no column folds; do sheets cross elsewhere? */
    rc = ts__extrusion_count_crossings(e, err, errcap);
    if (rc) goto fail;
    if (e->n_crossings) rc = TS_EMESH;
  }
  if (rc == TS_EMESH && (e->n_thinned || e->n_relaxed) && e->n_crossings && err && errcap) {
    size_t len = strlen(err);
    if (len + 1 < errcap)
      snprintf(err + len, errcap - len,
               " (with the depth thinned to %.3g of its full value at %u vertices, %u surface "
               "vertices moved by up to %.3g mm)",
               e->min_depth_kept, e->n_thinned, e->n_relaxed, e->max_relaxed * 1e3);
  } else if (rc == TS_EMESH && e->n_thinned && err && errcap) {
    size_t len = strlen(err);
    if (len + 1 < errcap)
      snprintf(err + len, errcap - len, " (even with the depth thinned to %.3g of its full value at %u vertices)",
               e->min_depth_kept, e->n_thinned);
  } else if (rc == 0 && (e->n_thinned || e->n_relaxed) && err && errcap) {
    int n = snprintf(err, errcap, "warning:");
    if (e->n_relaxed && n >= 0 && (size_t)n < errcap)
      n += snprintf(err + n, errcap - (size_t)n, " %u surface vertices moved by up to %.3g mm to undo pleats;",
                    e->n_relaxed, e->max_relaxed * 1e3);
    if (e->n_thinned && n >= 0 && (size_t)n < errcap)
      n += snprintf(err + n, errcap - (size_t)n,
                    " the layers would fold, nearly collapse or cross at full depth, %u of %u vertices were "
                    "offset less, down to "
                    "%.3g of the full depth",
                    e->n_thinned, nv, e->min_depth_kept);
    if (e->n_crossings_thinned && n >= 0 && (size_t)n < errcap)
      snprintf(err + n, errcap - (size_t)n, " (sheets crossed at up to %u triangle pairs before)",
               e->n_crossings_thinned);
  }
done:
  free(nrm);
  free(phi);
  free(phi_q);
  free(moved);
  free(mark);
  ts_meshtopo_free(topo);
  *out = e;
  return rc;

fail:
  ts__cross_check_free(cc);
  free(nrm);
  free(phi);
  free(phi_q);
  free(moved);
  free(mark);
  ts_meshtopo_free(topo);
  ts_extrusion_free(e);
  return rc;
}
