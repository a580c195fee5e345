/*
 * ts_refine.c: local refinement of a live tissue with its state carried
 * over (see ts_refine.h for the rules; the refinements themselves are Loop's
 * subdivision, ts_loop.c, and Rivara's longest-edge bisection, ts_leb.c).
 */
#include "ts_refine.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover.h"
#include "ts_leb.h"
#include "ts_loop.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_meshtopo.h"
#include "ts_refine_smooth.h"
#include "ts_refine_springs.h"
#include "ts_region.h"

/* ---- the source ---- */

static ts_extrusion *extrusion_copy(const ts_extrusion *e) {
  ts_extrusion *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  *c = *e;
  size_t nn = (size_t)e->n_sheets * e->nv;
  c->x = malloc(sizeof *c->x * nn);
  c->surface_tris = malloc(sizeof *c->surface_tris * e->n_surface_tris);
  c->boundary = malloc(e->nv);
  c->tris = malloc(sizeof *c->tris * (e->n_tris ? e->n_tris : 1));
  if (!c->x || !c->surface_tris || !c->boundary || !c->tris) {
    ts_extrusion_free(c);
    return NULL;
  }
  memcpy(c->x, e->x, sizeof *c->x * nn);
  memcpy(c->surface_tris, e->surface_tris, sizeof *c->surface_tris * e->n_surface_tris);
  if (e->boundary)
    memcpy(c->boundary, e->boundary, e->nv);
  else
    memset(c->boundary, 0, e->nv);
  if (e->n_tris) memcpy(c->tris, e->tris, sizeof *c->tris * e->n_tris);
  return c;
}

/* Node masses of e: density times a sixth of every prism's volume on the
 * node (ts_tissue_build's rule). TS_EMESH for a refused prism. */
static int node_masses(const ts_extrusion *e, const ts_layer *layers, double *mass) {
  const uint32_t nv = e->nv;
  memset(mass, 0, sizeof *mass * (size_t)e->n_sheets * nv);
  for (uint32_t l = 0; l < e->n_layers; l++)
    for (uint32_t f = 0; f < e->n_surface_tris; f++) {
      const uint32_t *tr = e->surface_tris[f];
      double P[3][3], Q[3][3], vol = 0;
      for (int k = 0; k < 3; k++) {
        memcpy(P[k], e->x[(size_t)l * nv + tr[k]], sizeof P[k]);
        memcpy(Q[k], e->x[(size_t)(l + 1) * nv + tr[k]], sizeof Q[k]);
      }
      if (ts_prism_check((const double (*)[3])P, (const double (*)[3])Q, &vol, NULL)) return TS_EMESH;
      double dm = layers[l].density * vol / 6.0;
      for (int k = 0; k < 3; k++) {
        mass[(size_t)l * nv + tr[k]] += dm;
        mass[(size_t)(l + 1) * nv + tr[k]] += dm;
      }
    }
  return 0;
}

/* The refined tissue's masses (ts_refine.h, "masses"): mass (in: e2's
 * node masses by node_masses; out: the tissue's). A node whose prisms
 * weigh, bit for bit, what they weighed in s's extrusion keeps its mass
 * from s exactly; the others (the new nodes and those whose prisms the
 * refinement changed: the region R) share what R's old nodes weighed in
 * proportion to their prisms' masses, so the total stays (rounding aside)
 * and nothing outside R changes. The hand-over's map (ts_handover_map.c)
 * then finds the nodes outside R untouched and its passes stay on R.
 * Before, every mass was scaled by the ratio of the totals: Loop's
 * smoothed rest shape changes the region's volume, so every mass changed
 * by about 1e-7 and every free node counted as touched (9,224 of 10,000 on
 * a resolution-50 patch), which made the hand-over whole-tissue passes on
 * the refinement thread and again at the install, on the physics thread.
 * When R had no mass (it cannot: a new node's parents change with it),
 * every mass is scaled by `whole` (the ratio of the totals), as before. */
static int region_masses(const ts_refine_src *s, const ts_extrusion *e2, double whole, double *mass) {
  const uint32_t S = e2->n_sheets, nv = s->e->nv, nv2 = e2->nv;
  double *was = malloc(sizeof *was * ((size_t)S * nv + 1));
  if (!was) return TS_ENOMEM;
  int rc = node_masses(s->e, s->layers, was);
  if (rc) {
    free(was);
    return rc;
  }
  double had = 0, now = 0; /* R's old nodes' masses in s; R's by its prisms */
  for (uint32_t sh = 0; sh < S; sh++)
    for (uint32_t j = 0; j < nv2; j++) {
      const size_t k = (size_t)sh * nv2 + j, ko = (size_t)sh * nv + j;
      if (j < nv && mass[k] == was[ko]) continue;
      now += mass[k];
      if (j < nv) had += s->mass[ko];
    }
  const double f = had > 0 && now > 0 ? had / now : 0.0;
  for (uint32_t sh = 0; sh < S; sh++)
    for (uint32_t j = 0; j < nv2; j++) {
      const size_t k = (size_t)sh * nv2 + j, ko = (size_t)sh * nv + j;
      if (!(f > 0))
        mass[k] *= whole;
      else if (j < nv && mass[k] == was[ko])
        mass[k] = s->mass[ko];
      else
        mass[k] *= f;
    }
  free(was);
  return 0;
}

void ts_refine_src_free(ts_refine_src *s) {
  if (!s) return;
  /* another holder shares it: one fewer (acq_rel: the last holder's free
   * comes after every other holder's reads) */
  if (atomic_fetch_sub_explicit(&s->shares, 1, memory_order_acq_rel) > 0) return;
  ts_extrusion_free(s->e);
  free(s->anchored);
  free(s->mass);
  free(s->node_of);
  free(s->ext_of);
  free(s);
}

int ts_refine_src_create(const ts_extrusion *e, const ts_layer *layers, const uint8_t *anchored,
                         const double gravity[3], ts_refine_src **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!e || !layers || !e->x || !e->surface_tris || e->n_layers < 1 ||
      e->n_layers > TS_MAX_LAYERS || e->n_sheets != e->n_layers + 1 || e->nv < 3)
    return TS_EINVAL;
  ts_refine_src *s = calloc(1, sizeof *s);
  if (!s) return TS_ENOMEM;
  size_t nn = (size_t)e->n_sheets * e->nv;
  s->e = extrusion_copy(e);
  s->anchored = calloc(nn, 1);
  s->mass = malloc(sizeof *s->mass * nn);
  s->node_of = malloc(sizeof *s->node_of * nn);
  s->ext_of = malloc(sizeof *s->ext_of * nn);
  if (!s->e || !s->anchored || !s->mass || !s->node_of || !s->ext_of) {
    ts_refine_src_free(s);
    return TS_ENOMEM;
  }
  memcpy(s->layers, layers, sizeof *layers * e->n_layers);
  if (gravity) memcpy(s->gravity, gravity, sizeof s->gravity);
  if (anchored) memcpy(s->anchored, anchored, nn);
  for (size_t i = 0; i < nn; i++) s->node_of[i] = s->ext_of[i] = (uint32_t)i;
  int rc = node_masses(e, layers, s->mass);
  if (rc) {
    ts_refine_src_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int ts_refine_src_patch(const ts_patch_def *def, ts_refine_src **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  ts_extrusion *e = NULL;
  int rc = ts_patch_extrusion(def, &e);
  if (rc) return rc;
  size_t nn = (size_t)e->n_sheets * e->nv;
  uint8_t *anch = malloc(nn);
  if (!anch) {
    ts_extrusion_free(e);
    return TS_ENOMEM;
  }
  for (size_t i = 0; i < nn; i++) anch[i] = e->boundary[i % e->nv];
  rc = ts_refine_src_create(e, def->layers, anch, def->gravity, out);
  free(anch);
  ts_extrusion_free(e);
  return rc;
}

double ts_refine_total_mass(const ts_refine_src *s) {
  if (!s || !s->e) return 0.0;
  double m = 0;
  size_t nn = (size_t)s->e->n_sheets * s->e->nv;
  for (size_t i = 0; i < nn; i++) m += s->mass[i];
  return m;
}

static int src_matches(const ts_refine_src *s, const ts_tissue *t) {
  return s && t && s->e && (uint64_t)s->e->n_sheets * s->e->nv == t->n_nodes &&
         t->n_tris == s->e->n_tris;
}

/* ---- selection ---- */

int ts_refine_surface_tri(const ts_refine_src *s, const ts_tissue *t, uint32_t tri, uint32_t *surf) {
  if (!src_matches(s, t) || !surf) return TS_EINVAL;
  const ts_extrusion *e = s->e;
  if (tri >= t->n_tris) return TS_EINVAL;
  /* render group g opens with layer g's top sheet (sheet g), in surface order */
  uint32_t start = 0;
  for (uint32_t g = 0; g < e->n_groups; start += e->group_tri_count[g++]) {
    if (tri < start || tri - start >= e->n_surface_tris) continue;
    uint32_t f = tri - start;
    for (int k = 0; k < 3; k++)
      if (t->tris[tri][k] != s->node_of[(size_t)g * e->nv + e->surface_tris[f][k]]) return TS_EINVAL;
    *surf = f;
    return 0;
  }
  return TS_EINVAL;
}

/* The outer surface at t's current positions (caller frees). */
static int current_surface(const ts_refine_src *s, const ts_tissue *t, ts_mesh **out) {
  const ts_extrusion *e = s->e;
  int rc = ts_mesh_alloc(e->nv, e->n_surface_tris, out);
  if (rc) return rc;
  for (uint32_t j = 0; j < e->nv; j++) memcpy((*out)->v[j], t->x[s->node_of[j]], sizeof (*out)->v[j]);
  memcpy((*out)->t, e->surface_tris, sizeof *e->surface_tris * e->n_surface_tris);
  return 0;
}

int ts_refine_pick(const ts_refine_src *s, const ts_tissue *t, const double origin[3],
                   const double dir[3], double range, uint32_t **tris, uint32_t *n, double hit[3]) {
  if (!tris || !n) return TS_EINVAL;
  *tris = NULL;
  *n = 0;
  if (!src_matches(s, t) || !origin || !dir) return TS_EINVAL;
  if (!isfinite(range)) return TS_ENAN;
  if (range < 0) return TS_EINVAL;
  ts_mesh *m = NULL;
  ts_meshtopo *topo = NULL;
  ts_region *r = NULL;
  int rc = current_surface(s, t, &m);
  if (rc) return rc;
  uint32_t tri = 0;
  double p[3], u = 0;
  rc = ts_region_raypick(m, origin, dir, &tri, p, &u);
  if (!rc) rc = ts_meshtopo_build(m, &topo);
  if (!rc) rc = ts_region_alloc(m->n_verts, m->n_tris, &r);
  if (!rc) rc = ts_region_from_triangle(r, m, topo, tri, p, range);
  if (!rc) {
    *tris = malloc(sizeof **tris * r->n_tris);
    if (!*tris) {
      rc = TS_ENOMEM;
    } else {
      memcpy(*tris, r->tris, sizeof **tris * r->n_tris);
      *n = r->n_tris;
      if (hit) memcpy(hit, p, sizeof p);
    }
  }
  ts_region_free(r);
  ts_meshtopo_free(topo);
  ts_mesh_free(m);
  return rc;
}

/* ---- LEB's size function: the bound on the selected triangles only ---- */

typedef struct sel_region {
  const ts_extrusion *e;
  const uint32_t *tris; /* distinct selected surface triangles */
  uint32_t n;
  double lo[3], hi[3];  /* their bounds, grown by tol */
  double tol;           /* m: "on a selected triangle" */
  double bound;         /* m */
} sel_region;

static double sel_size(const double p[3], void *ud) {
  const sel_region *r = ud;
  for (int c = 0; c < 3; c++)
    if (p[c] < r->lo[c] || p[c] > r->hi[c]) return INFINITY;
  for (uint32_t i = 0; i < r->n; i++) {
    const uint32_t *tr = r->e->surface_tris[r->tris[i]];
    if (ts_point_triangle_distance(p, r->e->x[tr[0]], r->e->x[tr[1]], r->e->x[tr[2]], NULL) <= r->tol)
      return r->bound;
  }
  return INFINITY;
}

/* ---- the refinement ---- */

/* The refined tissue ft's column map (ts_tissue.h), extended from t's: an
 * old column keeps its nodes (old nodes keep their indices), and a new
 * surface vertex j (nv <= j < nv2), which the refinement makes in every
 * sheet for the same parent edge, is a new column whose node in sheet sh
 * is the appended n_old + sh * (nv2 - nv) + (j - nv). That is the
 * numbering of the refined extrusion's nodes, map2 (extrusion node (sh, j)
 * at sh * nv2 + j -> tissue node), so the result must equal map2; a t
 * without columns (none of its own) takes map2. Returns 0, TS_EINVAL (t's
 * columns disagree with the source's node map) or TS_ENOMEM. */
static int extend_columns(const ts_tissue *t, uint32_t S, uint32_t nv, uint32_t nv2, const uint32_t *map2,
                          ts_tissue *ft) {
  if (ts_tissue_columns(t) != nv) return ts_tissue_set_columns(ft, nv2, map2);
  const uint32_t n_old = t->n_nodes, nnew = nv2 - nv;
  uint32_t *m = malloc(sizeof *m * (size_t)S * nv2);
  if (!m) return TS_ENOMEM;
  int rc = 0;
  for (uint32_t sh = 0; sh < S && !rc; sh++)
    for (uint32_t j = 0; j < nv2 && !rc; j++) {
      uint32_t k = sh * nv2 + j;
      m[k] = j < nv ? ts_tissue_sheet_node(t, sh, j) : n_old + sh * nnew + (j - nv);
      if (m[k] != map2[k]) rc = TS_EINVAL;
    }
  if (!rc) rc = ts_tissue_set_columns(ft, nv2, m);
  free(m);
  return rc;
}

/* Which surface triangles of the refined extrusion e2 the refinement built
 * anew (malloc'd flags, one per e2 surface triangle; NULL on no memory): a
 * triangle with a new vertex (index >= e->nv), or one of old vertices that
 * is not a surface triangle of e (as a vertex set). The others are e's own
 * triangles, untouched: their prisms keep their nodes, and so their shape.
 * e's triangles are looked up by their smallest vertex (a CSR list of the
 * other two, sorted), so the pass is linear in the triangle counts. */
static uint8_t *rebuilt_tris(const ts_extrusion *e, const ts_extrusion *e2) {
  const uint32_t nv = e->nv, nt = e->n_surface_tris, nt2 = e2->n_surface_tris;
  uint8_t *out = malloc(nt2 ? nt2 : 1);
  uint32_t *start = calloc((size_t)nv + 1, sizeof *start);
  uint32_t(*other)[2] = malloc(sizeof *other * (nt ? nt : 1));
  if (!out || !start || !other) {
    free(out);
    out = NULL;
    goto done;
  }
  /* sorted vertex triple of a triangle: a < b < c */
#define TS_SORT3(tr, a, b, c)                                                \
  do {                                                                       \
    a = (tr)[0], b = (tr)[1], c = (tr)[2];                                   \
    uint32_t tmp_;                                                           \
    if (a > b) tmp_ = a, a = b, b = tmp_;                                    \
    if (b > c) tmp_ = b, b = c, c = tmp_;                                    \
    if (a > b) tmp_ = a, a = b, b = tmp_;                                    \
  } while (0)
  for (uint32_t f = 0; f < nt; f++) {
    uint32_t a, b, c;
    TS_SORT3(e->surface_tris[f], a, b, c);
    (void)b;
    (void)c;
    start[a + 1]++;
  }
  for (uint32_t j = 0; j < nv; j++) start[j + 1] += start[j];
  for (uint32_t f = 0; f < nt; f++) { /* start[a] runs ahead while filling */
    uint32_t a, b, c;
    TS_SORT3(e->surface_tris[f], a, b, c);
    other[start[a]][0] = b;
    other[start[a]][1] = c;
    start[a]++;
  }
  for (uint32_t j = nv; j > 0; j--) start[j] = start[j - 1]; /* back to the starts */
  start[0] = 0;
  for (uint32_t f = 0; f < nt2; f++) {
    uint32_t a, b, c;
    TS_SORT3(e2->surface_tris[f], a, b, c);
    out[f] = 1;
    if (c >= nv) continue; /* a new vertex */
    for (uint32_t k = start[a]; k < start[a + 1]; k++)
      if (other[k][0] == b && other[k][1] == c) {
        out[f] = 0;
        break;
      }
  }
#undef TS_SORT3
done:
  free(start);
  free(other);
  return out;
}

/* The refined tissue's springs (tissue nodes, ts_tissue_build's order),
 * malloc'd into *out: rebuilt locally (ts_refine_springs.c) or, for
 * TS_REFINE_REBUILD_FULL or when t's springs are not the builder's, by
 * ts_tissue_build on e2, renumbered. mb: e2's node masses by the builder's
 * rule (node_masses, before the scaling to the old total: the dampers read
 * these, as ts_tissue_build's do). info (may be NULL) gets the counts. */
static int refined_springs(const ts_refine_src *s, const ts_tissue *t, const ts_extrusion *e2, const uint32_t *map2,
                           const uint8_t *anch2, const double *mb, int how, ts_spring **out, uint32_t *n,
                           ts_refine_info *info) {
  *out = NULL;
  *n = 0;
  int rc = 1;
  for (uint32_t l = 0; l < e2->n_layers; l++) /* as ts_tissue_build refuses them */
    if (ts_layer_validate(&s->layers[l])) return TS_EINVAL;
  if (how != TS_REFINE_REBUILD_FULL) {
    ts__refine_springs_in in = {s->e, t, e2, map2, s->layers, anch2, mb, how == TS_REFINE_REBUILD_NARROW ? 0 : 1};
    ts__refine_springs_out o;
    rc = ts__refine_springs(&in, &o);
    if (!rc) {
      *out = o.springs;
      *n = o.n;
      if (info) {
        info->n_springs = o.n;
        info->springs_computed = o.computed;
        info->prisms_computed = o.prisms;
        info->local = 1;
      }
    }
    if (rc <= 0) return rc; /* 1: t's springs are not the builder's; build whole */
  }
  /* the whole build: its springs only (not prepared: the stability bounds
   * would be most of the work, for a tissue dropped below) */
  ts_tissue *nt = NULL;
  rc = ts_tissue_build_unprepared(e2, s->layers, anch2, s->gravity, t->stop, &nt);
  if (rc) return rc;
  *out = malloc(sizeof **out * (nt->n_springs ? nt->n_springs : 1));
  if (!*out) {
    ts_tissue_destroy(nt);
    return TS_ENOMEM;
  }
  for (uint32_t i = 0; i < nt->n_springs; i++) {
    ts_spring sp = nt->springs[i];
    uint32_t a = map2[sp.a], b = map2[sp.b];
    sp.a = a < b ? a : b;
    sp.b = a < b ? b : a;
    (*out)[i] = sp;
  }
  *n = nt->n_springs;
  if (info) {
    info->n_springs = nt->n_springs;
    info->springs_computed = nt->n_springs;
    info->prisms_computed = e2->n_layers * e2->n_surface_tris;
    info->local = 0;
  }
  ts_tissue_destroy(nt);
  return 0;
}

static void errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t cap, const char *fmt, ...) {
  if (!err || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

int ts_refine_run(const ts_refine_src *s, const ts_tissue *t, const uint32_t *sel, uint32_t n_sel,
                  const ts_refine_opts *o, ts_tissue **out, ts_refine_src **src_out,
                  ts_refine_info *info, char *err, size_t errcap) {
  if (err && errcap) err[0] = 0;
  if (!out || !src_out) return TS_EINVAL;
  *out = NULL;
  *src_out = NULL;
  if (!o || (o->method != TS_REFINE_LOOP && o->method != TS_REFINE_LEB) || !isfinite(o->max_edge) ||
      o->max_edge < 0 || !isfinite(o->blend_time) || !isfinite(o->smooth_rate) || o->smooth_rate < 0 || o->n_tools < 0 || (o->n_tools > 0 && !o->tools) ||
      o->rebuild < TS_REFINE_REBUILD_LOCAL || o->rebuild > TS_REFINE_REBUILD_NARROW ||
      o->handover < TS_HANDOVER_MS_DEFAULT || o->handover > TS_HANDOVER_MS_FORCE) {
    errf(err, errcap, "bad refinement options");
    return TS_EINVAL;
  }
  if (!src_matches(s, t)) {
    errf(err, errcap, "the tissue is not the one the refinement source describes");
    return TS_EINVAL;
  }
  if (!sel || n_sel == 0) {
    errf(err, errcap, "empty selection");
    return TS_EINVAL;
  }
  const ts_extrusion *e = s->e;
  const uint32_t nv = e->nv, S = e->n_sheets, n_old = t->n_nodes;
  for (uint32_t i = 0; i < n_sel; i++)
    if (sel[i] >= e->n_surface_tris) {
      errf(err, errcap, "triangle %u out of range (%u outer-surface triangles)", sel[i],
           e->n_surface_tris);
      return TS_EINVAL;
    }

  int rc = 0;
  ts_extrusion *e2 = NULL;
  ts_loop_plan *plan = NULL;
  ts_leb_result *leb = NULL;
  ts_tissue *ft = NULL;
  uint8_t *flag = calloc(e->n_surface_tris, 1), *anch2 = NULL, *rebuilt = NULL;
  uint32_t *dsel = malloc(sizeof *dsel * n_sel), *map2 = NULL, *ext2 = NULL;
  uint32_t(*tpar)[2] = NULL;
  double *mass2 = NULL, *massb = NULL;
  uint32_t nd = 0;
  ts__refine_smooth_out so = {0, 0, 1, 0, 0};
  if (!flag || !dsel) {
    rc = TS_ENOMEM;
    goto done;
  }
  for (uint32_t i = 0; i < n_sel; i++)
    if (!flag[sel[i]]) flag[sel[i]] = 1, dsel[nd++] = sel[i];

  /* the refined extrusion and each new surface vertex's parent edge */
  const uint32_t(*parents)[2] = NULL;
  if (o->method == TS_REFINE_LOOP) {
    if (o->smooth_rest)
      rc = ts__refine_smooth(e, dsel, nd, o->smooth_rate > 0 ? o->smooth_rate : TS_REFINE_SMOOTH_RATE,
                             TS_REFINE_SMOOTH_MAX_BLEND, &e2, &plan, &so, err, errcap);
    else
      rc = ts_loop_extrusion(e, dsel, nd, TS_LOOP_LINEAR, &e2, &plan, err, errcap);
    if (!rc) parents = (const uint32_t(*)[2])plan->edge_ends;
  } else {
    sel_region r = {e, dsel, nd, {INFINITY, INFINITY, INFINITY}, {-INFINITY, -INFINITY, -INFINITY},
                    0, o->max_edge};
    double longest = 0;
    for (uint32_t i = 0; i < nd; i++) {
      const uint32_t *tr = e->surface_tris[dsel[i]];
      for (int k = 0; k < 3; k++) {
        const double *a = e->x[tr[k]], *b = e->x[tr[(k + 1) % 3]];
        double d2 = 0;
        for (int c = 0; c < 3; c++) {
          d2 += (a[c] - b[c]) * (a[c] - b[c]);
          if (a[c] < r.lo[c]) r.lo[c] = a[c];
          if (a[c] > r.hi[c]) r.hi[c] = a[c];
        }
        if (sqrt(d2) > longest) longest = sqrt(d2);
      }
    }
    r.tol = 1e-9 * (longest > 0 ? longest : 1.0);
    for (int c = 0; c < 3; c++) r.lo[c] -= r.tol, r.hi[c] += r.tol;
    if (r.bound == 0) r.bound = 0.5 * longest;
    if (!(r.bound > 0)) {
      errf(err, errcap, "degenerate selection");
      rc = TS_EINVAL;
      goto done;
    }
    ts_leb_def d = {0};
    d.max_edge = r.bound;
    d.size_at = sel_size;
    d.size_ud = &r;
    if (o->max_nodes) d.max_verts = o->max_nodes / S;
    rc = ts_leb_extrusion(e, &d, &e2, &leb, err, errcap);
    if (!rc) parents = (const uint32_t(*)[2])leb->parents;
  }
  if (rc) {
    if (rc == TS_EMESH && err && err[0]) {
      char tmp[256];
      snprintf(tmp, sizeof tmp, "%s", err);
      errf(err, errcap, "refined rest shape: %s", tmp);
    }
    goto done;
  }
  const uint32_t nv2 = e2->nv, nnew = nv2 - nv;
  const uint64_t N2_64 = (uint64_t)S * nv2;
  if ((o->max_nodes && N2_64 > o->max_nodes) || N2_64 > UINT32_MAX / 2) {
    errf(err, errcap, "refinement would give %llu nodes (limit %u)", (unsigned long long)N2_64,
         o->max_nodes);
    rc = TS_EFULL;
    goto done;
  }
  const uint32_t N2 = (uint32_t)N2_64;

  /* anchors, node map */
  anch2 = malloc(N2);
  map2 = malloc(sizeof *map2 * N2);
  ext2 = malloc(sizeof *ext2 * N2);
  mass2 = malloc(sizeof *mass2 * N2);
  massb = malloc(sizeof *massb * N2);
  if (!anch2 || !map2 || !ext2 || !mass2 || !massb) {
    rc = TS_ENOMEM;
    goto done;
  }
  for (uint32_t sh = 0; sh < S; sh++) {
    for (uint32_t j = 0; j < nv2; j++) {
      uint32_t k = sh * nv2 + j;
      if (j < nv) {
        anch2[k] = s->anchored[sh * nv + j];
        map2[k] = s->node_of[sh * nv + j];
      } else {
        const uint32_t *pq = parents[j - nv];
        anch2[k] = e2->boundary[j] && anch2[sh * nv2 + pq[0]] && anch2[sh * nv2 + pq[1]];
        map2[k] = n_old + sh * nnew + (j - nv);
      }
      ext2[map2[k]] = k;
    }
  }

  /* masses, scaled to the old total */
  rc = node_masses(e2, s->layers, mass2);
  if (rc) {
    errf(err, errcap, "refined rest shape has a degenerate prism");
    goto done;
  }
  double m_old = ts_refine_total_mass(s), m_new = 0;
  for (uint32_t k = 0; k < N2; k++) m_new += mass2[k];
  if (!(m_new > 0)) {
    rc = TS_EMESH;
    goto done;
  }
  memcpy(massb, mass2, sizeof *massb * N2);
  rc = region_masses(s, e2, m_old / m_new, mass2);
  if (rc) goto done;

  /* springs: the changed ones computed, the rest copied from t (or the
   * whole tissue built again); ts_refine_springs.c */
  ts_spring *sp = NULL;
  uint32_t nsp = 0;
  rc = refined_springs(s, t, e2, map2, anch2, massb, o->rebuild, &sp, &nsp, info);
  if (rc) {
    errf(err, errcap, "cannot build the refined tissue's springs: %s", ts_strerror(rc));
    goto done;
  }
  rc = ts_tissue_alloc(N2, 0, e2->n_tris, &ft);
  if (rc) {
    free(sp);
    goto done;
  }
  /* handed over, not copied (as ts_tissue_build does: a copy into fresh
   * pages is mostly their first touch) */
  free(ft->springs);
  ft->springs = sp;
  ft->n_springs = nsp;

  /* triangles, rest positions, masses in the tissue's numbering */
  for (uint32_t i = 0; i < e2->n_tris; i++)
    for (int k = 0; k < 3; k++) ft->tris[i][k] = map2[e2->tris[i][k]];
  rc = ts_tissue_set_contact_extrusion(ft, e2, map2); /* the boundary, in the same numbering */
  if (rc) goto done;
  for (uint32_t k = 0; k < N2; k++) {
    uint32_t i = map2[k];
    memcpy(ft->rest[i], e2->x[k], sizeof ft->rest[i]);
    ft->inv_mass[i] = !anch2[k] && mass2[k] > 0 ? 1.0 / mass2[k] : 0.0;
  }

  /* state: old nodes as they are, new ones at their parents' midpoints */
  memcpy(ft->x, t->x, sizeof *ft->x * n_old);
  memcpy(ft->v, t->v, sizeof *ft->v * n_old);
  memcpy(ft->x_prev, t->x_prev, sizeof *ft->x_prev * n_old);
  memcpy(ft->f_ext, t->f_ext, sizeof *ft->f_ext * n_old);
  for (uint32_t j = nv; j < nv2; j++) {
    const uint32_t *pq = parents[j - nv];
    for (uint32_t sh = 0; sh < S; sh++) {
      uint32_t i = map2[sh * nv2 + j], a = map2[sh * nv2 + pq[0]], b = map2[sh * nv2 + pq[1]];
      for (int c = 0; c < 3; c++) {
        ft->x[i][c] = 0.5 * (ft->x[a][c] + ft->x[b][c]);
        ft->v[i][c] = 0.5 * (ft->v[a][c] + ft->v[b][c]);
        ft->x_prev[i][c] = 0.5 * (ft->x_prev[a][c] + ft->x_prev[b][c]);
      }
    }
  }

  /* the current shape's prisms that the refinement builds anew (see
   * rebuilt_tris); the others keep their nodes and so their current shape,
   * which is not the refinement's business */
  rebuilt = rebuilt_tris(e, e2);
  if (!rebuilt) {
    rc = TS_ENOMEM;
    goto done;
  }
  for (uint32_t l = 0; l < e2->n_layers; l++)
    for (uint32_t f = 0; f < e2->n_surface_tris; f++) {
      if (!rebuilt[f]) continue;
      const uint32_t *tr = e2->surface_tris[f];
      double P[3][3], Q[3][3];
      for (int k = 0; k < 3; k++) {
        memcpy(P[k], ft->x[map2[l * nv2 + tr[k]]], sizeof P[k]);
        memcpy(Q[k], ft->x[map2[(l + 1) * nv2 + tr[k]]], sizeof Q[k]);
      }
      if (ts_prism_check((const double (*)[3])P, (const double (*)[3])Q, NULL, NULL)) {
        errf(err, errcap,
             "prism of layer %u on refined surface triangle %u (nodes %u %u %u) is inverted in the "
             "current shape",
             l, f, map2[l * nv2 + tr[0]], map2[l * nv2 + tr[1]], map2[l * nv2 + tr[2]]);
        rc = TS_EMESH;
        goto done;
      }
    }

  /* the rest of the tissue */
  ft->n_layers = e2->n_layers; /* as ts_tissue_build sets them */
  for (uint32_t l = 0; l < e2->n_layers; l++) {
    ft->layers[l] = s->layers[l];
    ft->layers[l].young = s->layers[l].axial.a * s->layers[l].axial.b;
    ft->layer_tri_count[l] = e2->group_tri_count[l];
    memcpy(ft->render_group_name[l], s->layers[l].name, TS_NAME_MAX);
    ft->render_group_name[l][TS_NAME_MAX - 1] = 0;
  }
  ft->n_render_groups = e2->n_layers;
  ft->n_sheets = S;
  int identity = 1;
  for (uint32_t k = 0; k < N2 && identity; k++) identity = map2[k] == k;
  ft->nodes_per_sheet = identity ? nv2 : 0; /* see ts_refine.h */
  rc = extend_columns(t, S, nv, nv2, map2, ft);
  if (rc) {
    errf(err, errcap, "the tissue's columns disagree with the refinement source");
    goto done;
  }
  ts_tissue_copy_settings(ft, t);
  ft->h_prev = 0; /* the integrator restarts with a Taylor step */
  rc = ts_massspring_prepare(ft);
  if (rc) {
    errf(err, errcap, "cannot prepare the refined tissue: %s", ts_strerror(rc));
    goto done;
  }

  /* every new node's parents (tissue indices) */
  tpar = malloc(sizeof *tpar * ((size_t)(N2 - n_old) + 1));
  if (!tpar) {
    rc = TS_ENOMEM;
    goto done;
  }
  for (uint32_t j = nv; j < nv2; j++)
    for (uint32_t sh = 0; sh < S; sh++) {
      const uint32_t *pq = parents[j - nv];
      uint32_t i = map2[sh * nv2 + j];
      tpar[i - n_old][0] = map2[sh * nv2 + pq[0]];
      tpar[i - n_old][1] = map2[sh * nv2 + pq[1]];
    }

  /* the hand-over (ts_handover.h): the first step continues the unrefined
   * tissue's motion, then the finer network takes over over blend_time */
  double blend = o->blend_time > 0 ? o->blend_time : TS_HANDOVER_DEFAULT_TIME;
  /* Loop's smoothing: at least the time its rest change needs
   * (ts_refine_smooth.h); during an earlier blend, at least that blend's
   * time, so the earlier rest change still under way (taken into this
   * hand-over) goes on no faster than it did */
  if (so.blend > blend) blend = so.blend;
  if (t->hand && ts_handover_weight(t->hand, t->time) > 0 && t->hand->duration > blend)
    blend = t->hand->duration;
  if (o->blend_time >= 0) {
    rc = ts_handover_create(t, ft, (const uint32_t(*)[2])tpar, o->tools, o->n_tools, blend, o->handover,
                            &ft->hand);
    if (rc) {
      errf(err, errcap, "cannot hand the state over: %s", ts_strerror(rc));
      goto done;
    }
  }

  if (info) {
    info->smooth_limited = so.limited;
    info->smooth_scale = so.scale;
    info->rest_move = so.rest_move;
    info->blend_time = o->blend_time >= 0 ? blend : 0;
    info->parents = tpar;
    tpar = NULL;
    info->selected = nd;
    info->new_verts = nnew;
    info->new_nodes = N2 - n_old;
    info->n_nodes = N2;
    info->n_tris = ft->n_tris;
  }
  /* the new source */
  ts_refine_src *ns = calloc(1, sizeof *ns);
  if (!ns) {
    if (info) {
      free(info->parents);
      info->parents = NULL;
    }
    rc = TS_ENOMEM;
    goto done;
  }
  memcpy(ns->layers, s->layers, sizeof ns->layers);
  memcpy(ns->gravity, s->gravity, sizeof ns->gravity);
  ns->e = e2;
  e2 = NULL;
  ns->anchored = anch2;
  anch2 = NULL;
  ns->mass = mass2;
  mass2 = NULL;
  ns->node_of = map2;
  map2 = NULL;
  ns->ext_of = ext2;
  ext2 = NULL;
  *src_out = ns;
  *out = ft;
  ft = NULL;

done:
  if (rc && err && errcap && !err[0]) errf(err, errcap, "refinement failed: %s", ts_strerror(rc));
  ts_tissue_destroy(ft);
  ts_extrusion_free(e2);
  ts_loop_plan_free(plan);
  ts_leb_result_free(leb);
  free(flag);
  free(rebuilt);
  free(dsel);
  free(anch2);
  free(map2);
  free(ext2);
  free(mass2);
  free(massb);
  free(tpar);
  return rc;
}

/* ---- a refinement off the stepping thread: snapshot and restate ---- */

/* Writes a byte on every page of p (n bytes): their first touch here, not
 * in the copy that fills them (ts_refine_snapshot_reserve). */
static void touch(void *p, size_t n) {
  volatile unsigned char *c = p;
  for (size_t i = 0; i < n; i += 4096) c[i] = 0;
  if (n) c[n - 1] = 0;
}

int ts_refine_snapshot_reserve(uint32_t n_nodes, uint32_t n_springs, uint32_t n_tris, int hand, ts_tissue **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  ts_tissue *c = NULL;
  int rc = ts_tissue_alloc(n_nodes, n_springs, n_tris, &c);
  if (rc) return rc;
  if (hand) {
    rc = ts_handover_alloc(n_nodes, n_springs, &c->hand);
    if (rc) {
      ts_tissue_destroy(c);
      return rc;
    }
    touch(c->hand->f, sizeof *c->hand->f * n_nodes);
    touch(c->hand->f_res, sizeof *c->hand->f_res * n_nodes);
    touch(c->hand->rest, sizeof *c->hand->rest * n_springs);
    touch(c->hand->depth, sizeof *c->hand->depth * n_nodes);
  }
  const size_t n = n_nodes;
  touch(c->x, sizeof *c->x * n);
  touch(c->v, sizeof *c->v * n);
  touch(c->f, sizeof *c->f * n);
  touch(c->f_ext, sizeof *c->f_ext * n);
  touch(c->inv_mass, sizeof *c->inv_mass * n);
  touch(c->rest, sizeof *c->rest * n);
  touch(c->x_prev, sizeof *c->x_prev * n);
  touch(c->acc, sizeof *c->acc * n);
  touch(c->acc_prev, sizeof *c->acc_prev * n);
  touch(c->branch, n);
  touch(c->springs, sizeof *c->springs * n_springs);
  touch(c->tris, sizeof *c->tris * n_tris);
  *out = c;
  return 0;
}

int ts_refine_snapshot_into(const ts_tissue *t, ts_tissue *c) {
  if (!t || !c) return TS_EINVAL;
  if (c->n_nodes != t->n_nodes || c->n_springs != t->n_springs || c->n_tris != t->n_tris) return TS_EMISMATCH;
  const size_t n = t->n_nodes;
  memcpy(c->x, t->x, sizeof *c->x * n);
  memcpy(c->v, t->v, sizeof *c->v * n);
  memcpy(c->f, t->f, sizeof *c->f * n);
  memcpy(c->f_ext, t->f_ext, sizeof *c->f_ext * n);
  memcpy(c->inv_mass, t->inv_mass, sizeof *c->inv_mass * n);
  memcpy(c->rest, t->rest, sizeof *c->rest * n);
  memcpy(c->x_prev, t->x_prev, sizeof *c->x_prev * n);
  memcpy(c->acc, t->acc, sizeof *c->acc * n);
  memcpy(c->acc_prev, t->acc_prev, sizeof *c->acc_prev * n);
  memcpy(c->branch, t->branch, n);
  memcpy(c->springs, t->springs, sizeof *c->springs * t->n_springs);
  memcpy(c->tris, t->tris, sizeof *c->tris * t->n_tris);
  int rc = ts_tissue_copy_contact(c, t, NULL);
  if (rc) return rc;
  c->h_prev = t->h_prev;
  c->n_layers = t->n_layers;
  memcpy(c->layers, t->layers, sizeof c->layers);
  memcpy(c->layer_tri_count, t->layer_tri_count, sizeof c->layer_tri_count);
  c->n_render_groups = t->n_render_groups;
  memcpy(c->render_group_name, t->render_group_name, sizeof c->render_group_name);
  c->n_sheets = t->n_sheets;
  c->nodes_per_sheet = t->nodes_per_sheet;
  c->stable_dt = t->stable_dt;
  ts_tissue_copy_settings(c, t);
  rc = ts_tissue_copy_columns(c, t, NULL); /* the refinement extends the map */
  if (rc) return rc;
  /* the hand-over: into dst's arrays when it has them */
  if (!t->hand) {
    ts_handover_free(c->hand);
    c->hand = NULL;
    return 0;
  }
  if (c->hand) return ts_handover_copy_into(t->hand, t->n_nodes, t->n_springs, c->hand);
  return ts_handover_copy(t->hand, t->n_nodes, t->n_springs, &c->hand);
}

int ts_refine_snapshot(const ts_tissue *t, ts_tissue **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!t) return TS_EINVAL;
  ts_tissue *c = NULL;
  int rc = ts_tissue_alloc(t->n_nodes, t->n_springs, t->n_tris, &c);
  if (!rc) rc = ts_refine_snapshot_into(t, c);
  if (rc) {
    ts_tissue_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

ts_refine_src *ts_refine_src_share(ts_refine_src *s) {
  if (s) atomic_fetch_add_explicit(&s->shares, 1, memory_order_relaxed);
  return s;
}

int ts_refine_src_copy(const ts_refine_src *s, ts_refine_src **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!s || !s->e) return TS_EINVAL;
  const size_t nn = (size_t)s->e->n_sheets * s->e->nv;
  ts_refine_src *c = calloc(1, sizeof *c);
  if (!c) return TS_ENOMEM;
  c->e = extrusion_copy(s->e);
  c->anchored = malloc(nn);
  c->mass = malloc(sizeof *c->mass * nn);
  c->node_of = malloc(sizeof *c->node_of * nn);
  c->ext_of = malloc(sizeof *c->ext_of * nn);
  if (!c->e || !c->anchored || !c->mass || !c->node_of || !c->ext_of) {
    ts_refine_src_free(c);
    return TS_ENOMEM;
  }
  memcpy(c->layers, s->layers, sizeof c->layers);
  memcpy(c->gravity, s->gravity, sizeof c->gravity);
  memcpy(c->anchored, s->anchored, nn);
  memcpy(c->mass, s->mass, sizeof *c->mass * nn);
  memcpy(c->node_of, s->node_of, sizeof *c->node_of * nn);
  memcpy(c->ext_of, s->ext_of, sizeof *c->ext_of * nn);
  *out = c;
  return 0;
}

int ts_refine_restate(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2]) {
  if (!nt || !cur || nt->n_nodes < cur->n_nodes || (nt->n_nodes > cur->n_nodes && !parents))
    return TS_EINVAL;
  const uint32_t n0 = cur->n_nodes, n = nt->n_nodes;
  for (uint32_t i = n0; i < n; i++)
    if (parents[i - n0][0] >= i || parents[i - n0][1] >= i) return TS_EINVAL;
  memcpy(nt->x, cur->x, sizeof *nt->x * n0);
  memcpy(nt->v, cur->v, sizeof *nt->v * n0);
  memcpy(nt->x_prev, cur->x_prev, sizeof *nt->x_prev * n0);
  memcpy(nt->f_ext, cur->f_ext, sizeof *nt->f_ext * n0);
  for (uint32_t i = n0; i < n; i++) {
    const uint32_t a = parents[i - n0][0], b = parents[i - n0][1];
    for (int c = 0; c < 3; c++) {
      nt->x[i][c] = 0.5 * (nt->x[a][c] + nt->x[b][c]);
      nt->v[i][c] = 0.5 * (nt->v[a][c] + nt->v[b][c]);
      nt->x_prev[i][c] = 0.5 * (nt->x_prev[a][c] + nt->x_prev[b][c]);
      nt->f_ext[i][c] = 0;
    }
  }
  ts_tissue_copy_settings(nt, cur);
  nt->h_prev = 0; /* the integrator restarts with a Taylor step */
  return 0;
}
