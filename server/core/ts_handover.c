/*
 * ts_handover.c: the hand-over of a live refinement (see ts_handover.h for
 * why and how): the extra node forces that give the refined network the
 * unrefined one's accelerations, the rest lengths that carry the tensions
 * over (and their fit to XPBD's own step, by trial steps of the refined
 * region), the new nodes' contact allowances against every kind of tool,
 * and the smooth fade of all; each computed on the nodes the refinement
 * touched, the rest carried (ts_handover.h, "Local").
 */
#include "ts_handover.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_contact.h"
#include "ts_error.h"
#include "ts_obb_tree.h"
#include "ts_xpbd.h"

double ts_handover_weight(const ts_handover *h, double at) {
  if (!h) return 0.0;
  double u = (at - h->start) / h->duration;
  if (!(u > 0)) return 1.0;
  if (u >= 1) return 0.0;
  return 1.0 - u * u * (3.0 - 2.0 * u);
}

static void map_free(ts_handover_map *m);

void ts_handover_free(ts_handover *h) {
  if (!h) return;
  map_free(h->map);
  free(h->f);
  free(h->f_res);
  free(h->rest);
  free(h->depth);
  free(h);
}

void ts_handover_expire(ts_tissue *t, double at) {
  if (t && t->hand && ts_handover_weight(t->hand, at) == 0.0) {
    ts_handover_free(t->hand);
    t->hand = NULL;
  }
}

/* The elastic tension of spring sp at length l with rest length L0 (the law
 * of ts_ms_forces.c without the damper), N. */
static double tension(const ts_spring *sp, double l, double L0) {
  double e = l - L0, s = e / L0;
  if (s < 0) s = 0;
  double kk;
  if (sp->k1 == 0 && sp->k2 == 0)
    kk = sp->k;
  else
    kk = sp->k1 * exp(fmin(sp->b1 * s, 700.0)) + sp->k2 * exp(fmin(sp->b2 * s, 700.0));
  return kk * e;
}

/* The elastic tension of spring sp at length l with rest length L0 (as
 * tension) and its derivative with respect to L0 (N/m, negative). */
static double tension_d(const ts_spring *sp, double l, double L0, double *dT) {
  double e = l - L0, s = e / L0, ds = -l / (L0 * L0);
  if (s < 0) s = 0, ds = 0;
  double kk, dkk = 0;
  if (sp->k1 == 0 && sp->k2 == 0) {
    kk = sp->k;
  } else {
    const double u1 = sp->b1 * s, u2 = sp->b2 * s;
    const double e1 = exp(fmin(u1, 700.0)), e2 = exp(fmin(u2, 700.0));
    kk = sp->k1 * e1 + sp->k2 * e2;
    if (u1 < 700) dkk += sp->k1 * sp->b1 * e1;
    if (u2 < 700) dkk += sp->k2 * sp->b2 * e2;
  }
  *dT = dkk * ds * e - kk;
  return kk * e;
}

/* The rest length that gives spring sp the tension T at length l (the law
 * is monotonic in L0: Newton's method kept inside a shrinking bracket,
 * bisecting where a Newton step would leave it, to rounding; a few
 * iterations where bisection took some fifty, each with two exponentials:
 * most of a fit's time besides its trial steps, measured on the liver). */
static double rest_for(const ts_spring *sp, double l, double T) {
  const double k0 = sp->k1 == 0 && sp->k2 == 0 ? sp->k : sp->k1 + sp->k2;
  if (T <= 0) /* compressed: the law is linear there */
    return k0 > 0 ? l - T / k0 : l;
  double lo = l * 0.25, hi = l;
  if (tension(sp, l, lo) < T) return lo; /* beyond the law's reach: the nearest */
  if (tension(sp, l, hi) > T) return hi;
  /* start from the law's linear part */
  double x = k0 > 0 ? l - T / k0 : 0.5 * (lo + hi);
  if (!(x > lo && x < hi)) x = 0.5 * (lo + hi);
  for (int it = 0; it < 200 && hi - lo > 1e-15 * l; it++) {
    double dT, g = tension_d(sp, l, x, &dT) - T;
    if (g == 0) return x;
    if (g > 0)
      lo = x;
    else
      hi = x;
    double xn = dT < 0 ? x - g / dT : 0.5 * (lo + hi);
    if (!(xn > lo && xn < hi)) xn = 0.5 * (lo + hi);
    if (fabs(xn - x) <= 1e-15 * l) return xn;
    x = xn;
  }
  return x;
}

static double spring_length(const ts_tissue *t, const ts_spring *sp) {
  const double *xa = t->x[sp->a], *xb = t->x[sp->b];
  double d[3] = {xb[0] - xa[0], xb[1] - xa[1], xb[2] - xa[2]};
  return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

/* The rest length spring j of t has in the steps at weight w: its own, or
 * the hand-over's blended towards it (XPBD's view, ts_xpbd.c). */
static double rest_at(const ts_tissue *t, uint32_t j, const double *hrest, double w) {
  double L0 = t->springs[j].rest;
  return hrest && w > 0 ? L0 + w * (hrest[j] - L0) : L0;
}

/* The elastic spring forces plus gravity on t's nodes nodes[0..nn) (mark[i]
 * set for exactly those) at their current positions, from t's springs
 * springs[0..ns) (every spring of t with a marked end, ascending: each
 * marked node sums its springs in the order of a pass over all of them),
 * their rest lengths blended with hrest at weight w (NULL: their own), plus
 * w times the node forces hf (NULL: none). f (t->n_nodes) is written at the
 * marked nodes only. */
static void node_forces(const ts_tissue *t, const uint32_t *nodes, uint32_t nn, const uint8_t *mark,
                        const uint32_t *springs, uint32_t ns, const double *hrest, const double (*hf)[3],
                        double w, double (*f)[3]) {
  for (uint32_t q = 0; q < nn; q++) memset(f[nodes[q]], 0, sizeof f[0]);
  for (uint32_t q = 0; q < ns; q++) {
    const uint32_t j = springs[q];
    const ts_spring *sp = &t->springs[j];
    const double *xa = t->x[sp->a], *xb = t->x[sp->b];
    double d[3] = {xb[0] - xa[0], xb[1] - xa[1], xb[2] - xa[2]};
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    double L0 = rest_at(t, j, hrest, w);
    if (!(l > 0) || !(L0 > 0)) continue;
    double fs = tension(sp, l, L0) / l;
    const int ma = mark[sp->a], mb = mark[sp->b];
    for (int c = 0; c < 3; c++) {
      if (ma) f[sp->a][c] += fs * d[c];
      if (mb) f[sp->b][c] -= fs * d[c];
    }
  }
  for (uint32_t q = 0; q < nn; q++) {
    const uint32_t i = nodes[q];
    if (t->inv_mass[i] == 0) continue;
    double m = 1.0 / t->inv_mass[i];
    for (int c = 0; c < 3; c++) f[i][c] += m * t->gravity[c];
    if (hf && w > 0)
      for (int c = 0; c < 3; c++) f[i][c] += w * hf[i][c];
  }
}

static int cmp_key(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

/* Index of old's spring between nodes a and b (keys: sorted (min << 32 |
 * max) << 0 pairs with the index in the next word), or -1. */
static int64_t find_spring(const uint64_t *keys, uint32_t n, uint32_t a, uint32_t b) {
  uint64_t k = (uint64_t)(a < b ? a : b) << 32 | (a < b ? b : a);
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (keys[2 * (size_t)mid] < k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && keys[2 * (size_t)lo] == k ? (int64_t)keys[2 * (size_t)lo + 1] : -1;
}

/* A tool placed at its pose as a tree (ts_obb_tree.h): the signed
 * distance of the kinds with no closed form here (meshes, jaws) and the
 * trial steps' tree-based contact. The tree is the mesh tool's own or one
 * built here from the tool's sizes (as server/session_contact.c builds
 * it). */
typedef struct placed_tool {
  ts_obb_tree *own; /* built here; NULL for a mesh tool's */
  ts_posed_tool pt;
  int ok;           /* placed */
} placed_tool;

static void placed_free(placed_tool *p) {
  if (!p->ok) return;
  ts_posed_tool_free(&p->pt);
  ts_obb_tree_destroy(p->own);
  memset(p, 0, sizeof *p);
}

/* Places tool tl. Returns 0, TS_EINVAL (a mesh tool without its tree), or
 * an error of the tree's builders (p then unset). */
static int placed_make(const ts_tool *tl, placed_tool *p) {
  memset(p, 0, sizeof *p);
  const ts_obb_tree *tree = tl->shape;
  int rc = 0;
  if (tl->kind == TS_TOOL_MESH) {
    if (!tree) return TS_EINVAL;
  } else {
    ts_tool_shape_def d = ts_default_tool_shape_def();
    d.radius = tl->radius;
    if (tl->kind == TS_TOOL_CAPSULE) {
      d.kind = TS_SHAPE_CAPSULE;
      d.length = tl->length;
    } else if (tl->kind == TS_TOOL_JAWS) {
      d.kind = TS_SHAPE_JAWS;
      if (tl->length > 0) d.length = tl->length; /* else the default jaw length */
    } else {
      d.kind = TS_SHAPE_SPHERE;
    }
    rc = ts_obb_tree_create(&d, &p->own);
    if (rc) return rc;
    tree = p->own;
  }
  rc = ts_posed_tool_init(&p->pt, tree);
  if (rc) {
    ts_obb_tree_destroy(p->own);
    p->own = NULL;
    return rc;
  }
  ts_pose pose;
  memcpy(pose.p, tl->pos, sizeof pose.p);
  memcpy(pose.q, tl->quat, sizeof pose.q);
  if (pose.q[0] == 0 && pose.q[1] == 0 && pose.q[2] == 0 && pose.q[3] == 0) pose.q[0] = 1;
  pose.jaw = tl->jaw;
  rc = ts_posed_tool_set_pose(&p->pt, &pose);
  p->ok = 1;
  if (rc) placed_free(p);
  return rc;
}

/* The active tools of a hand-over: the meshes and jaws placed (placed[k]
 * for tool k; primitives need none). Returns 0 or a placing error (every
 * placed one freed). */
static int place_all(const ts_tool *tools, int n_tools, placed_tool *placed) {
  for (int k = 0; k < n_tools; k++) {
    memset(&placed[k], 0, sizeof placed[k]);
    const ts_tool *tl = &tools[k];
    if (!tl->active || tl->kind == TS_TOOL_SPHERE || tl->kind == TS_TOOL_CAPSULE) continue;
    int rc = placed_make(tl, &placed[k]);
    if (rc) {
      for (int q = 0; q < k; q++) placed_free(&placed[q]);
      return rc;
    }
  }
  return 0;
}

/* The contact band: a node this close to a tool's surface (relative to its
 * size: a primitive's radius, a tree's reach) is held by it in either
 * solver (the mass-spring step's skin is 1e-4 of it; XPBD ends its
 * substeps on the surface) */
#define CONTACT_BAND 1e-3

/* How deep x is inside the active tools (the deepest), m (negative:
 * outside, by the distance to the nearest); n (may be NULL) gets that
 * tool's outward normal at x, band (may be NULL) its contact band (m).
 * Spheres and capsules by their core segment, meshes and jaws by their
 * placed tree (placed[k]; a tool not placed is left out). */
static double tool_depth(const ts_tool *tools, int n_tools, const placed_tool *placed, const double x[3],
                         double n[3], double *band) {
  double depth = -INFINITY;
  for (int k = 0; k < n_tools; k++) {
    const ts_tool *tl = &tools[k];
    if (!tl->active) continue;
    if (tl->kind != TS_TOOL_SPHERE && tl->kind != TS_TOOL_CAPSULE) {
      if (!placed || !placed[k].ok) continue;
      double nn[3], pen = -ts_contact_tool_sdf(&placed[k].pt, x, nn);
      if (pen > depth) {
        depth = pen;
        if (n) memcpy(n, nn, sizeof nn);
        if (band) band[0] = CONTACT_BAND * placed[k].pt.tree->reach;
      }
      continue;
    }
    double a[3], b[3], ab[3], ap[3], l2 = 0, u = 0;
    ts_tool_segment(tl, a, b);
    for (int c = 0; c < 3; c++) {
      ab[c] = b[c] - a[c];
      ap[c] = x[c] - a[c];
      l2 += ab[c] * ab[c];
      u += ap[c] * ab[c];
    }
    u = l2 > 0 ? u / l2 : 0.0;
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double d[3], d2 = 0;
    for (int c = 0; c < 3; c++) {
      d[c] = ap[c] - u * ab[c];
      d2 += d[c] * d[c];
    }
    double dl = sqrt(d2), pen = tl->radius - dl;
    if (pen > depth) {
      depth = pen;
      if (n)
        for (int c = 0; c < 3; c++) n[c] = dl > 0 ? d[c] / dl : c == 1;
      if (band) band[0] = CONTACT_BAND * tl->radius;
    }
  }
  return depth;
}

#define TS_FIT_MAX_TOOLS 64 /* tools a trial step takes (ts_xpbd_step's limit) */

/* What ts_handover_create finds of the two networks' topologies (see
 * ts_handover.h, "Local"): the state-free part of a hand-over, kept for
 * ts_handover_renew. */
struct ts_handover_map {
  uint32_t n0, n, ns0, ns; /* old's and nt's nodes and springs */
  uint32_t *from;          /* per spring of nt: old's spring whose tension it
                              takes (itself, or its parent edge), or UINT32_MAX */
  uint8_t *same;           /* per spring of nt: 1 when it is old's spring
                              from[j] unchanged (ends, constants, rest length) */
  uint8_t *touched;        /* per node of nt: 1 when the refinement touched it */
  uint32_t *nodes;         /* the touched nodes, ascending */
  uint32_t n_nodes, n_old_nodes; /* how many; how many of them are old's (a prefix) */
  uint32_t *old_springs, n_old_springs; /* old's springs with a touched end, ascending */
  uint32_t *new_springs, n_new_springs; /* nt's springs with a touched end, ascending */
  /* XPBD's fit (ts_handover_fit_xpbd), made by the first fit that uses the
     map and reused by the next ones (a chase's rounds, a fit at the
     install: same networks, another state): the sweep orders of old's and
     nt's springs (sweep_order; most of a fit's setup, 20 ms of its 28 on
     the liver, measured) and the trials' region for FIT_RING and for
     FIT_QUICK_RING (fit_region: role per node of nt and the stepped count;
     NULL until made) */
  uint32_t *ord_old, *ord_new;
  uint8_t *role[2];
  int64_t moving[2];
};

static void map_free(ts_handover_map *m) {
  if (!m) return;
  free(m->from);
  free(m->same);
  free(m->touched);
  free(m->nodes);
  free(m->old_springs);
  free(m->new_springs);
  free(m->ord_old);
  free(m->ord_new);
  free(m->role[0]);
  free(m->role[1]);
  free(m);
}

/* A mass change smaller than this (relative) is rounding of the
 * refinement's rescaling to the old total (ts_refine.c), not a change */
#define MAP_MASS_TOL 1e-12

/* The map of old -> nt (ts_handover_create's checks done). Returns 0 and
 * *out, or TS_ENOMEM. */
static int map_build(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                     ts_handover_map **out) {
  *out = NULL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes, ns0 = old->n_springs, ns = nt->n_springs;
  ts_handover_map *m = calloc(1, sizeof *m);
  uint64_t *keys = malloc(sizeof *keys * 2 * ((size_t)ns0 + 1));
  int32_t *cnt = calloc((size_t)n0 + 1, sizeof *cnt);
  if (m) {
    m->from = malloc(sizeof *m->from * ((size_t)ns + 1));
    m->same = malloc((size_t)ns + 1);
    m->touched = calloc((size_t)n + 1, 1);
  }
  if (!m || !keys || !cnt || !m->from || !m->same || !m->touched) {
    map_free(m);
    free(keys);
    free(cnt);
    return TS_ENOMEM;
  }
  m->n0 = n0, m->n = n, m->ns0 = ns0, m->ns = ns;
  for (uint32_t j = 0; j < ns0; j++) {
    const ts_spring *sp = &old->springs[j];
    keys[2 * (size_t)j] = (uint64_t)(sp->a < sp->b ? sp->a : sp->b) << 32 | (sp->a < sp->b ? sp->b : sp->a);
    keys[2 * (size_t)j + 1] = j;
    cnt[sp->a]--, cnt[sp->b]--;
  }
  qsort(keys, ns0, 2 * sizeof *keys, cmp_key);
  /* two springs on one pair: their ends are taken as touched (the match
     below finds one of them) */
  for (uint32_t j = 1; j < ns0; j++)
    if (keys[2 * (size_t)j] == keys[2 * (size_t)j - 2]) {
      const uint64_t k = keys[2 * (size_t)j];
      m->touched[k >> 32] = m->touched[k & 0xffffffffu] = 1;
    }
  for (uint32_t j = 0; j < ns; j++) {
    const ts_spring *sp = &nt->springs[j];
    int64_t k = -1;
    if (sp->a < n0 && sp->b < n0) {
      k = find_spring(keys, ns0, sp->a, sp->b);
    } else {
      uint32_t mm = sp->a >= n0 ? sp->a : sp->b, o = sp->a >= n0 ? sp->b : sp->a;
      const uint32_t *pq = parents[mm - n0];
      if (o == pq[0] || o == pq[1]) k = find_spring(keys, ns0, pq[0], pq[1]);
    }
    m->from[j] = k >= 0 ? (uint32_t)k : UINT32_MAX;
    m->same[j] = 0;
    if (k >= 0 && sp->a < n0 && sp->b < n0) {
      const ts_spring *os = &old->springs[k];
      m->same[j] = os->k == sp->k && os->k1 == sp->k1 && os->k2 == sp->k2 && os->b1 == sp->b1 &&
                   os->b2 == sp->b2 && os->rest == sp->rest;
    }
    if (m->same[j])
      cnt[sp->a]++, cnt[sp->b]++;
    else
      m->touched[sp->a] = m->touched[sp->b] = 1;
  }
  free(keys);
  /* an old node is untouched when each of its springs is unchanged, none
     was removed (as many unchanged ones as it had) and its mass is the
     same; the new nodes and their parents are touched */
  for (uint32_t i = 0; i < n0; i++) {
    const double a = old->inv_mass[i], b = nt->inv_mass[i];
    if (cnt[i] != 0 || (a == 0) != (b == 0) || (a > 0 && !(fabs(b / a - 1.0) <= MAP_MASS_TOL)))
      m->touched[i] = 1;
  }
  free(cnt);
  for (uint32_t i = n0; i < n; i++) {
    m->touched[i] = 1;
    m->touched[parents[i - n0][0]] = m->touched[parents[i - n0][1]] = 1;
  }
  for (uint32_t i = 0; i < n; i++) m->n_nodes += m->touched[i], m->n_old_nodes += i < n0 && m->touched[i];
  for (uint32_t j = 0; j < ns0; j++)
    m->n_old_springs += m->touched[old->springs[j].a] || m->touched[old->springs[j].b];
  for (uint32_t j = 0; j < ns; j++)
    m->n_new_springs += m->touched[nt->springs[j].a] || m->touched[nt->springs[j].b];
  m->nodes = malloc(sizeof *m->nodes * ((size_t)m->n_nodes + 1));
  m->old_springs = malloc(sizeof *m->old_springs * ((size_t)m->n_old_springs + 1));
  m->new_springs = malloc(sizeof *m->new_springs * ((size_t)m->n_new_springs + 1));
  if (!m->nodes || !m->old_springs || !m->new_springs) {
    map_free(m);
    return TS_ENOMEM;
  }
  uint32_t q = 0;
  for (uint32_t i = 0; i < n; i++)
    if (m->touched[i]) m->nodes[q++] = i;
  q = 0;
  for (uint32_t j = 0; j < ns0; j++)
    if (m->touched[old->springs[j].a] || m->touched[old->springs[j].b]) m->old_springs[q++] = j;
  q = 0;
  for (uint32_t j = 0; j < ns; j++)
    if (m->touched[nt->springs[j].a] || m->touched[nt->springs[j].b]) m->new_springs[q++] = j;
  *out = m;
  return 0;
}

/* 1 when m was made for networks of old's and nt's sizes. */
static int map_fits(const ts_handover_map *m, const ts_tissue *old, const ts_tissue *nt) {
  return m && m->n0 == old->n_nodes && m->n == nt->n_nodes && m->ns0 == old->n_springs &&
         m->ns == nt->n_springs;
}

/* The unrefined network's accelerations at its current state, carried to
 * the refined one's touched nodes (acc; m's touched nodes only): an old
 * node keeps its own, a new node gets the mean of its parents' with the
 * push of a parent held by a tool into it removed (the tool's reaction
 * cancels it, so the node's motion, which its new neighbours interpolate,
 * has none). The forces are old's springs at their rest lengths blended
 * with hrest at weight w, gravity, and w times the node forces hf (the
 * view of one solver of the earlier hand-over); fo: scratch, old->n_nodes. */
static void carried_acc(const ts_tissue *old, const ts_handover_map *m, const uint32_t (*parents)[2],
                        const ts_tool *tools, int n_tools, const placed_tool *placed, const double *hrest,
                        const double (*hf)[3], double w, double (*fo)[3], double (*acc)[3]) {
  const uint32_t n0 = m->n0, n = m->n;
  int any = 0;
  for (int k = 0; k < n_tools; k++) any |= tools[k].active;
  node_forces(old, m->nodes, m->n_old_nodes, m->touched, m->old_springs, m->n_old_springs, hrest, hf, w, fo);
  for (uint32_t q = 0; q < m->n_old_nodes; q++) {
    const uint32_t i = m->nodes[q];
    for (int c = 0; c < 3; c++) acc[i][c] = fo[i][c] * old->inv_mass[i];
    double nrm[3], band = 0;
    if (old->inv_mass[i] > 0 && any) {
      double pen = tool_depth(tools, n_tools, placed, old->x[i], nrm, &band);
      double an = acc[i][0] * nrm[0] + acc[i][1] * nrm[1] + acc[i][2] * nrm[2];
      if (pen > -band && an < 0)
        for (int c = 0; c < 3; c++) acc[i][c] -= an * nrm[c];
    }
  }
  for (uint32_t i = n0; i < n; i++) {
    const uint32_t p = parents[i - n0][0], q = parents[i - n0][1];
    for (int c = 0; c < 3; c++) acc[i][c] = 0.5 * (acc[p][c] + acc[q][c]);
  }
  /* an old node keeps its own acceleration before the tool's reaction (the
   * tool reacts on it in the refined tissue as in the unrefined one) */
  for (uint32_t q = 0; q < m->n_old_nodes; q++) {
    const uint32_t i = m->nodes[q];
    for (int c = 0; c < 3; c++) acc[i][c] = fo[i][c] * old->inv_mass[i];
  }
}

/* ts_handover_create's arguments checked. 0 or TS_EINVAL. */
static int create_args(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                       const ts_tool *tools, int n_tools, double duration) {
  if (!old || !nt || nt->n_nodes < old->n_nodes || (nt->n_nodes > old->n_nodes && !parents) ||
      !(duration > 0) || !isfinite(duration) || n_tools < 0 || (n_tools > 0 && !tools))
    return TS_EINVAL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  for (uint32_t i = n0; i < n; i++)
    if (parents[i - n0][0] >= i || parents[i - n0][1] >= i) return TS_EINVAL;
  return 0;
}

/* ts_handover_create with the topologies' map m (made for old and nt; not
 * taken: out->map is NULL). */
static int create_mapped(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                         const ts_handover_map *m, const ts_tool *tools, int n_tools, double duration,
                         ts_handover **out) {
  *out = NULL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  ts_handover *h = calloc(1, sizeof *h);
  /* scratch per node, written and read at the touched nodes only */
  double(*fo)[3] = malloc(sizeof *fo * n);
  double(*acc)[3] = malloc(sizeof *acc * n);
  double(*accx)[3] = malloc(sizeof *accx * n);
  placed_tool *placed = calloc((size_t)n_tools + 1, sizeof *placed);
  if (h) {
    h->f = malloc(sizeof *h->f * n);
    h->f_res = malloc(sizeof *h->f_res * n);
    h->rest = malloc(sizeof *h->rest * (nt->n_springs + 1));
    h->depth = malloc(sizeof *h->depth * n);
  }
  int rc = TS_ENOMEM;
  if (!h || !fo || !acc || !accx || !placed || !h->f || !h->f_res || !h->rest || !h->depth ||
      (rc = place_all(tools, n_tools, placed)) != 0) {
    ts_handover_free(h);
    free(fo);
    free(acc);
    free(accx);
    free(placed);
    return rc;
  }
  /* the unrefined network's accelerations, carried to the new nodes: the
   * mass-spring view (its own springs and the earlier hand-over's node
   * forces) and XPBD's (the earlier hand-over's rest lengths and residual) */
  const ts_handover *oh = old->hand;
  const double w_old = ts_handover_weight(oh, old->time);
  const double *ohrest = oh ? oh->rest : NULL;
  carried_acc(old, m, parents, tools, n_tools, placed, NULL, oh ? (const double(*)[3])oh->f : NULL, w_old, fo,
              acc);
  carried_acc(old, m, parents, tools, n_tools, placed, ohrest, oh ? (const double(*)[3])oh->f_res : NULL, w_old,
              fo, accx);

  /* the springs' hand-over rest lengths: each spring of the refined
   * network keeps the tension it had (a spring that was there) or its
   * parent edge's (a half of a split edge); any other new spring starts
   * unstretched. The tensions are the unrefined tissue's as the XPBD step
   * sees it (rest lengths blended by an earlier hand-over). */
  for (uint32_t j = 0; j < nt->n_springs; j++) {
    const ts_spring *sp = &nt->springs[j];
    const uint32_t k = m->from[j];
    if (k != UINT32_MAX && m->same[j]) {
      h->rest[j] = rest_at(old, k, ohrest, w_old); /* the same spring: as it was */
    } else if (k != UINT32_MAX) {
      const ts_spring *os = &old->springs[k];
      const double told = tension(os, spring_length(old, os), rest_at(old, k, ohrest, w_old));
      h->rest[j] = rest_for(sp, spring_length(nt, sp), told);
    } else {
      const double l = spring_length(nt, sp);
      h->rest[j] = l > 0 ? l : sp->rest;
    }
  }
  int any_tool = 0;
  for (int k = 0; k < n_tools; k++) any_tool |= tools[k].active;
  /* the refined network's forces at the touched nodes, and what makes up
   * the difference: against its own springs (the mass-spring step's term)
   * and against the hand-over rest lengths (XPBD's residual term) */
  node_forces(nt, m->nodes, m->n_nodes, m->touched, m->new_springs, m->n_new_springs, NULL, NULL, 0.0, h->f);
  node_forces(nt, m->nodes, m->n_nodes, m->touched, m->new_springs, m->n_new_springs, h->rest, NULL, 1.0, fo);
  for (uint32_t i = 0; i < n; i++) {
    const double im = nt->inv_mass[i];
    if (im == 0) {
      memset(h->f[i], 0, sizeof h->f[i]);
      memset(h->f_res[i], 0, sizeof h->f_res[i]);
      h->depth[i] = 0;
      continue;
    }
    if (!m->touched[i]) {
      /* untouched (ts_handover.h, "Local"): the earlier hand-over's terms
       * at its weight, none without one */
      for (int c = 0; c < 3; c++) {
        h->f[i][c] = oh && w_old > 0 ? w_old * oh->f[i][c] : 0.0;
        h->f_res[i][c] = oh && w_old > 0 && !any_tool ? w_old * oh->f_res[i][c] : 0.0;
      }
      h->depth[i] = oh && oh->depth ? fmax(0.0, w_old * oh->depth[i]) : 0.0;
      continue;
    }
    for (int c = 0; c < 3; c++) {
      h->f[i][c] = acc[i][c] / im - h->f[i][c];
      h->f_res[i][c] = accx[i][c] / im - fo[i][c];
    }
    /* the allowance: a new node's depth inside a tool; an old node is
     * where the unrefined tissue had it and meets the tools as it did (a
     * node a mesh tool's projection left inside by its last substep is
     * pushed on as in the unrefined tissue: 13 um sideways in one step,
     * measured, which an allowance would hold back) */
    double pen = i >= n0 ? tool_depth(tools, n_tools, placed, nt->x[i], NULL, NULL) : 0.0;
    double d = fmax(pen, 0.0);
    if (any_tool) /* a tool on the tissue: XPBD's rest lengths alone (ts_handover.h) */
      h->f_res[i][0] = h->f_res[i][1] = h->f_res[i][2] = 0;
    if (i < n0 && oh && oh->depth) d = fmax(d, w_old * oh->depth[i]);
    h->depth[i] = d;
  }
  for (int k = 0; k < n_tools; k++) placed_free(&placed[k]);
  free(placed);
  free(fo);
  free(acc);
  free(accx);
  h->start = nt->time;
  h->duration = duration;
  *out = h;
  return 0;
}

int ts_handover_create(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                       const ts_tool *tools, int n_tools, double duration, ts_handover **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  int rc = create_args(old, nt, parents, tools, n_tools, duration);
  if (rc) return rc;
  ts_handover_map *m = NULL;
  rc = map_build(old, nt, parents, &m);
  if (!rc) rc = create_mapped(old, nt, parents, m, tools, n_tools, duration, out);
  if (rc) {
    map_free(m);
    return rc;
  }
  (*out)->map = m;
  return 0;
}

#define FIT_PASSES 12    /* trial steps at most */
#define FIT_TOL 0.5e-6   /* m: the first step's error at which the fit stops */
#define FIT_RING 6       /* spring rings around the new nodes that the trials step */
/* TS_FIT_QUICK: a fit again from corrections close to their answer (see
 * ts_handover.h) takes fewer trials on a smaller region. Measured on the
 * default patch (test_refine.c's async setting, the first step against
 * the twin's): 2 rings instead of 6 change it by 0.1-0.3 um; 3 trials from
 * a full fit's corrections 1-5 steps old leave it 2-7 um above 12 trials'
 * (the chase's rounds each start from the last round's, see ts_handover.h,
 * and end within 0.2-2 um of a full fit at the install, measured). */
#define FIT_QUICK_PASSES 3
#define FIT_QUICK_RING 2
#define FIT_LOCAL_MAX 0.75 /* a region over this share of the nodes: the whole tissue */
#define AUTO_H_OMEGA 0.8 /* ts_xpbd.c's automatic substep: h omega <= 0.8 */

/* A copy of a hand-over (its arrays too), or NULL for h NULL or out of
 * memory (*rc TS_ENOMEM then). */
static ts_handover *copy_hand(const ts_handover *h, uint32_t n, uint32_t ns, int *rc) {
  if (!h) return NULL;
  ts_handover *c = calloc(1, sizeof *c);
  if (c) {
    *c = *h;
    c->map = NULL;
    c->f = malloc(sizeof *c->f * n);
    c->f_res = malloc(sizeof *c->f_res * n);
    c->rest = malloc(sizeof *c->rest * (ns + 1));
    c->depth = malloc(sizeof *c->depth * n);
  }
  if (!c || !c->f || !c->f_res || !c->rest || !c->depth) {
    ts_handover_free(c);
    *rc = TS_ENOMEM;
    return NULL;
  }
  memcpy(c->f, h->f, sizeof *c->f * n);
  memcpy(c->f_res, h->f_res, sizeof *c->f_res * n);
  memcpy(c->rest, h->rest, sizeof *c->rest * ns);
  memcpy(c->depth, h->depth, sizeof *c->depth * n);
  return c;
}

/* The trial steps' tools on the tree-based contact path (as an XPBD
 * session's, server/session_contact.c): each active tool placed at its
 * pose, standing still through the step, with a contact workspace for the
 * trial tissue; no grasp. */
typedef struct trial_tools {
  int n;
  ts_aabb_tree *tree;
  placed_tool pl[TS_FIT_MAX_TOOLS];
  ts_contact_ws ws[TS_FIT_MAX_TOOLS];
  ts_xpbd_tool xt[TS_FIT_MAX_TOOLS];
} trial_tools;

static void trial_tools_free(trial_tools *tt) {
  if (!tt) return;
  for (int k = 0; k < tt->n; k++) {
    placed_free(&tt->pl[k]);
    ts_contact_ws_free(&tt->ws[k]);
  }
  ts_aabb_tree_destroy(tt->tree);
  free(tt);
}

/* The tree-based tools for trial steps of t (NULL tools: none). *out NULL
 * when no tool is active. Returns 0, TS_ENOMEM or a builder's error. */
static int trial_tools_make(const ts_tissue *t, const ts_tool *tools, int n_tools, trial_tools **out) {
  *out = NULL;
  int any = 0;
  for (int k = 0; k < n_tools && k < TS_FIT_MAX_TOOLS; k++) any |= tools[k].active;
  if (!any) return 0;
  trial_tools *tt = calloc(1, sizeof *tt);
  if (!tt) return TS_ENOMEM;
  int rc = ts_aabb_tree_create_tissue(NULL, t, &tt->tree);
  for (int k = 0; !rc && k < n_tools && k < TS_FIT_MAX_TOOLS; k++) {
    const ts_tool *tl = &tools[k];
    if (!tl->active) continue;
    const int q = tt->n;
    rc = placed_make(tl, &tt->pl[q]);
    if (rc) break;
    tt->n++; /* from here on freed with the rest */
    rc = ts_contact_ws_init(&tt->ws[q], NULL, t->n_nodes, t->n_nodes, t->n_tris ? t->n_tris : 1);
    if (rc) {
      memset(&tt->ws[q], 0, sizeof tt->ws[q]);
      break;
    }
    tt->ws[q].def.mu_static = tl->mu_static;
    tt->ws[q].def.mu_kinetic = tl->mu_kinetic;
    ts_xpbd_tool *x = &tt->xt[q];
    x->posed = &tt->pl[q].pt;
    x->pose = tt->pl[q].pt.pose;
    x->prev = x->pose;
    x->contact = &tt->ws[q];
    x->grasp = NULL;
  }
  if (rc) {
    trial_tools_free(tt);
    return rc;
  }
  *out = tt;
  return 0;
}

/* One XPBD step of a copy of t's state with the solver *xs (built from
 * def for t's topology on first use, and again after a diverged step):
 * disp gets each node's displacement, m. Tools: the tree-based ones of tt
 * when posed (NULL: none), else the sphere and capsule tools of `tools`
 * (others left out) on the solver's node-wise path. A solver carries
 * nothing from one such step to the next that the step does not set anew
 * (multipliers, previous positions, the blended rest lengths; the tools
 * stand still), so the trials share one. t is left as it was (the copy
 * has its own state arrays, in ws: 6 per node, and its own hand-over,
 * since a diverged step resets it). Returns 0 or an error of
 * ts_xpbd_build/step. */
static int trial_step(const ts_tissue *t, ts_xpbd **xs, const ts_xpbd_def *def, const ts_tool *tools,
                      int n_tools, int posed, trial_tools *tt, double dt, double (*ws)[3], uint8_t *branch,
                      double (*disp)[3]) {
  const uint32_t n = t->n_nodes;
  ts_tissue c = *t;
  c.x = ws;
  c.v = ws + n;
  c.x_prev = ws + 2 * (size_t)n;
  c.f = ws + 3 * (size_t)n;
  c.acc = ws + 4 * (size_t)n;
  c.acc_prev = ws + 5 * (size_t)n;
  c.branch = branch;
  c.ms = NULL;
  memcpy(c.x, t->x, sizeof *c.x * n);
  memcpy(c.v, t->v, sizeof *c.v * n);
  memcpy(c.x_prev, t->x_prev, sizeof *c.x_prev * n);
  memset(c.f, 0, sizeof *c.f * n);
  memset(c.acc, 0, sizeof *c.acc * n);
  memset(c.acc_prev, 0, sizeof *c.acc_prev * n);
  memset(branch, 0, n);
  int rc = 0;
  c.hand = copy_hand(t->hand, n, t->n_springs, &rc);
  if (rc) return rc;
  ts_tool tl[TS_FIT_MAX_TOOLS];
  int k = 0;
  for (int i = 0; !posed && i < n_tools && k < TS_FIT_MAX_TOOLS; i++)
    if (tools[i].kind == TS_TOOL_SPHERE || tools[i].kind == TS_TOOL_CAPSULE) tl[k++] = tools[i];
  if (!*xs) rc = ts_xpbd_build(&c, def, xs);
  if (!rc && posed && tt)
    rc = ts_xpbd_step_posed(*xs, &c, dt, NULL, 0, tt->tree, tt->xt, tt->n, NULL);
  else if (!rc)
    rc = ts_xpbd_step(*xs, &c, dt, k > 0 ? tl : NULL, k, NULL);
  if (rc == TS_EDIVERGED) { /* built afresh for the next trial */
    ts_xpbd_destroy(*xs);
    *xs = NULL;
  }
  ts_handover_free(c.hand);
  if (rc) return rc;
  for (uint32_t i = 0; i < n; i++)
    for (int q = 0; q < 3; q++) disp[i][q] = c.x[i][q] - t->x[i][q];
  return 0;
}

/* The substep count ts_xpbd_build's automatic rule gives t at step dt
 * (ts_xpbd.c: h omega <= 0.8, omega the mean of sqrt(w / alpha0) over the
 * compliant distance constraints); 0 when the rule cannot be followed here
 * (given compliances, no compliant constraint, an absurd count). */
static uint32_t auto_substeps(const ts_tissue *t, double dt) {
  double osum = 0;
  uint32_t on = 0;
  for (uint32_t j = 0; j < t->n_springs; j++) {
    const ts_spring *sp = &t->springs[j];
    double k = sp->k1 == 0 && sp->k2 == 0 ? sp->k : sp->k1 + sp->k2;
    double w = t->inv_mass[sp->a] + t->inv_mass[sp->b];
    if (!(k > 0) || !isfinite(k)) continue;
    double alpha0 = 1.0 / k;
    if (!(alpha0 > 0) || !(w > 0) || !isfinite(w)) continue;
    osum += sqrt(w / alpha0);
    on++;
  }
  if (!on) return 0;
  double n = ceil(dt * (osum / on) / AUTO_H_OMEGA);
  if (!(n <= 10000)) return 0;
  return n < 1 ? 1 : (uint32_t)n;
}

/* The trials' region: role[i] for each node of nt, 1 stepped (within
 * `ring` springs of a new node, the springs of old and nt both counted),
 * 2 held where it is (the next ring: the region's frame), 0 left out.
 * Returns the stepped count; 0 for the whole tissue (no new node, or a
 * region over FIT_LOCAL_MAX of it: every role 1). -1: out of memory. */
static int64_t fit_region(const ts_tissue *old, const ts_tissue *nt, uint8_t *role, uint32_t ring) {
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  const size_t m = (size_t)old->n_springs + nt->n_springs;
  uint32_t *off = calloc((size_t)n + 1, sizeof *off), *adj = malloc(sizeof *adj * (2 * m + 1));
  uint32_t *depth = malloc(sizeof *depth * n), *queue = malloc(sizeof *queue * n);
  int64_t moving = 0;
  if (!off || !adj || !depth || !queue) {
    moving = -1;
    goto out;
  }
  for (int w = 0; w < 2; w++) {
    const ts_tissue *t = w ? nt : old;
    for (uint32_t j = 0; j < t->n_springs; j++) off[t->springs[j].a + 1]++, off[t->springs[j].b + 1]++;
  }
  for (uint32_t i = 0; i < n; i++) off[i + 1] += off[i];
  for (uint32_t i = 0; i < n; i++) depth[i] = off[i]; /* fill cursors */
  for (int w = 0; w < 2; w++) {
    const ts_tissue *t = w ? nt : old;
    for (uint32_t j = 0; j < t->n_springs; j++) {
      adj[depth[t->springs[j].a]++] = t->springs[j].b;
      adj[depth[t->springs[j].b]++] = t->springs[j].a;
    }
  }
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++) {
    depth[i] = UINT32_MAX;
    if (i >= n0) depth[i] = 0, queue[tail++] = i;
  }
  while (head < tail) {
    uint32_t i = queue[head++];
    if (depth[i] > ring) continue;
    for (uint32_t a = off[i]; a < off[i + 1]; a++)
      if (depth[adj[a]] == UINT32_MAX) depth[adj[a]] = depth[i] + 1, queue[tail++] = adj[a];
  }
  for (uint32_t i = 0; i < n; i++) {
    role[i] = depth[i] <= ring ? 1 : depth[i] == ring + 1 ? 2 : 0;
    moving += role[i] == 1;
  }
  if (n == n0 || moving > FIT_LOCAL_MAX * n) {
    memset(role, 1, n);
    moving = 0;
  }
out:
  free(off);
  free(adj);
  free(depth);
  free(queue);
  return moving;
}

typedef struct colour_key {
  uint32_t colour, first, index;
} colour_key;

static int cmp_colour(const void *pa, const void *pb) {
  const colour_key *a = pa, *b = pb;
  if (a->colour != b->colour) return a->colour < b->colour ? -1 : 1;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* t's springs in the order XPBD sweeps their constraints (ts_xpbd.c: a
 * greedy colouring in spring order, at most 64 colours and a mixed group
 * after them, then by colour, lowest node, index), into ord (n_springs).
 * A part of t handed over in this order keeps it in its interior (the
 * greedy colouring of the colour-sorted springs gives each spring whose
 * neighbours are all there its colour again), which matters: under a
 * tool, XPBD's unconverged sweeps end where their order takes them (4 um
 * apart on the default patch, measured). Returns 0 or TS_ENOMEM. */
static int sweep_order(const ts_tissue *t, uint32_t *ord) {
  uint64_t *used = calloc(t->n_nodes, sizeof *used);
  colour_key *key = malloc(sizeof *key * (t->n_springs + 1));
  if (!used || !key) {
    free(used);
    free(key);
    return TS_ENOMEM;
  }
  for (uint32_t j = 0; j < t->n_springs; j++) {
    const uint32_t a = t->springs[j].a, b = t->springs[j].b;
    uint64_t taken = used[a] | used[b];
    uint32_t c = 64;
    if (~taken) {
      c = 0;
      while (taken >> c & 1) c++;
      used[a] |= (uint64_t)1 << c;
      used[b] |= (uint64_t)1 << c;
    }
    key[j] = (colour_key){c, a < b ? a : b, j};
  }
  qsort(key, t->n_springs, sizeof *key, cmp_colour);
  for (uint32_t j = 0; j < t->n_springs; j++) ord[j] = key[j].index;
  free(used);
  free(key);
  return 0;
}

static int sub_tissue_in(const ts_tissue *t, const uint8_t *role, const uint32_t *ord, ts_tissue **out,
                         uint32_t **node_of, uint32_t **spring_of, uint32_t *loc);

/* The part of t on the region role (indices of t; nodes with role 0 left
 * out, role 2 anchored where they are): its nodes in t's order (so a
 * spring's a < b holds), the springs with both ends in it and one stepped
 * (in XPBD's sweep order of the whole t, sweep_order: ord_made, or made
 * here when NULL),
 * the render triangles with every corner in it, and t's hand-over on them.
 * node_of / spring_of (malloc'd) map its nodes and springs to t's; loc
 * (t->n_nodes) gets t's node -> its node or UINT32_MAX. Returns 0 or
 * TS_ENOMEM (*out NULL). */
static int sub_tissue(const ts_tissue *t, const uint8_t *role, const uint32_t *ord_made, ts_tissue **out,
                      uint32_t **node_of, uint32_t **spring_of, uint32_t *loc) {
  if (ord_made) return sub_tissue_in(t, role, ord_made, out, node_of, spring_of, loc);
  uint32_t *ord = malloc(sizeof *ord * (t->n_springs + 1));
  int rc = ord ? sweep_order(t, ord) : TS_ENOMEM;
  if (!rc) rc = sub_tissue_in(t, role, ord, out, node_of, spring_of, loc);
  free(ord);
  return rc;
}

/* t's sweep order (sweep_order) kept in *slot, made on first use; NULL
 * for out of memory (the caller then makes its own). */
static const uint32_t *kept_order(const ts_tissue *t, uint32_t **slot) {
  if (!*slot) {
    uint32_t *ord = malloc(sizeof *ord * (t->n_springs + 1));
    if (ord && sweep_order(t, ord)) {
      free(ord);
      ord = NULL;
    }
    *slot = ord;
  }
  return *slot;
}

static int sub_tissue_in(const ts_tissue *t, const uint8_t *role, const uint32_t *ord, ts_tissue **out,
                         uint32_t **node_of, uint32_t **spring_of, uint32_t *loc) {
  *out = NULL;
  *node_of = *spring_of = NULL;
  uint32_t nn = 0, ns = 0, ntr = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) loc[i] = role[i] ? nn++ : UINT32_MAX;
  for (uint32_t j = 0; j < t->n_springs; j++) {
    const ts_spring *sp = &t->springs[j];
    ns += role[sp->a] && role[sp->b] && (role[sp->a] == 1 || role[sp->b] == 1);
  }
  for (uint32_t f = 0; f < t->n_tris; f++)
    ntr += role[t->tris[f][0]] && role[t->tris[f][1]] && role[t->tris[f][2]];
  ts_tissue *s = NULL;
  int rc = nn ? ts_tissue_alloc(nn, ns, ntr, &s) : TS_EINVAL;
  if (rc) return rc;
  *node_of = malloc(sizeof **node_of * nn);
  *spring_of = malloc(sizeof **spring_of * (ns + 1));
  int hrc = 0;
  if (t->hand) {
    s->hand = calloc(1, sizeof *s->hand);
    if (s->hand) {
      *s->hand = *t->hand;
      s->hand->map = NULL;
      s->hand->f = malloc(sizeof *s->hand->f * nn);
      s->hand->f_res = malloc(sizeof *s->hand->f_res * nn);
      s->hand->rest = malloc(sizeof *s->hand->rest * (ns + 1));
      s->hand->depth = malloc(sizeof *s->hand->depth * nn);
    }
    hrc = !s->hand || !s->hand->f || !s->hand->f_res || !s->hand->rest || !s->hand->depth;
  }
  if (!*node_of || !*spring_of || hrc) {
    ts_tissue_destroy(s);
    free(*node_of);
    free(*spring_of);
    *node_of = *spring_of = NULL;
    return TS_ENOMEM;
  }
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const uint32_t l = loc[i];
    if (l == UINT32_MAX) continue;
    (*node_of)[l] = i;
    memcpy(s->x[l], t->x[i], sizeof s->x[l]);
    memcpy(s->v[l], t->v[i], sizeof s->v[l]);
    memcpy(s->x_prev[l], t->x_prev[i], sizeof s->x_prev[l]);
    memcpy(s->rest[l], t->rest[i], sizeof s->rest[l]);
    s->inv_mass[l] = role[i] == 1 ? t->inv_mass[i] : 0.0;
    if (s->hand) {
      memcpy(s->hand->f[l], t->hand->f[i], sizeof s->hand->f[l]);
      memcpy(s->hand->f_res[l], t->hand->f_res[i], sizeof s->hand->f_res[l]);
      s->hand->depth[l] = t->hand->depth[i];
    }
  }
  ns = 0;
  for (uint32_t q = 0; q < t->n_springs; q++) {
    const uint32_t j = ord[q];
    const ts_spring *sp = &t->springs[j];
    if (!(role[sp->a] && role[sp->b] && (role[sp->a] == 1 || role[sp->b] == 1))) continue;
    s->springs[ns] = *sp;
    s->springs[ns].a = loc[sp->a];
    s->springs[ns].b = loc[sp->b];
    if (s->hand) s->hand->rest[ns] = t->hand->rest[j];
    (*spring_of)[ns++] = j;
  }
  ntr = 0;
  for (uint32_t f = 0; f < t->n_tris; f++) {
    const uint32_t *tr = t->tris[f];
    if (!(role[tr[0]] && role[tr[1]] && role[tr[2]])) continue;
    for (int k = 0; k < 3; k++) s->tris[ntr][k] = loc[tr[k]];
    ntr++;
  }
  s->n_layers = t->n_layers;
  memcpy(s->layers, t->layers, sizeof s->layers);
  s->n_sheets = t->n_sheets;
  /* the column map when the copy is the whole tissue (bending and volume
   * constraints need it), else no columns (none of either) */
  if (ts_tissue_copy_columns(s, t, loc)) {
    ts_tissue_destroy(s);
    free(*node_of);
    free(*spring_of);
    *node_of = *spring_of = NULL;
    return TS_ENOMEM;
  }
  ts_tissue_copy_settings(s, t);
  *out = s;
  return 0;
}

int ts_handover_fit_xpbd(ts_tissue *nt, const ts_tissue *old, const uint32_t (*parents)[2], const ts_xpbd_def *def,
                         const ts_tool *tools, int n_tools, int flags, double dt, ts_handover_fit_stats *stats) {
  const int posed = (flags & TS_FIT_POSED) != 0, quick = (flags & TS_FIT_QUICK) != 0;
  const int passes = quick ? FIT_QUICK_PASSES : FIT_PASSES;
  if (stats) {
    stats->err = NAN;
    stats->trials = 0;
    stats->nodes = 0;
  }
  if (!nt || !old || !def || !nt->hand || nt->n_nodes < old->n_nodes ||
      (nt->n_nodes > old->n_nodes && !parents) || !(dt > 0) || !(dt <= 1.0) || n_tools < 0 ||
      (n_tools > 0 && !tools))
    return TS_EINVAL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  for (uint32_t i = n0; i < n; i++)
    if (parents[i - n0][0] >= i || parents[i - n0][1] >= i) return TS_EINVAL;
  uint8_t *role = malloc(n);
  uint32_t *loc = malloc(sizeof *loc * n), *lold = malloc(sizeof *lold * n);
  uint32_t *nmap = NULL, *smap = NULL, *omap = NULL, *osmap = NULL;
  ts_tissue *sn = NULL, *so = NULL;
  trial_tools *ttn = NULL, *tto = NULL;
  ts_xpbd *xn = NULL, *xo = NULL;
  double(*ws)[3] = NULL, (*want)[3] = NULL, (*e)[3] = NULL, (*be)[3] = NULL, *best = NULL;
  uint8_t *branch = NULL;
  int rc = TS_ENOMEM, started = 0;
  if (!role || !loc || !lold) goto out;
  /* the trials' region: the refined nodes and FIT_RING rings of springs
   * around them, the next ring held where it is (the step is local: far
   * nodes move alike in both tissues); the whole tissue when the region
   * would be most of it, or when the solver's own constraints need more
   * than the springs (given compliances, bending, volume) */
  int64_t moving = 0;
  /* what the hand-over's map keeps of an earlier fit of these networks */
  ts_handover_map *km = map_fits(nt->hand->map, old, nt) ? nt->hand->map : NULL;
  if (!(flags & TS_FIT_WHOLE) && !def->compliance && !((def->bending || def->volume) && ts_tissue_columns(old) > 0)) {
    if (km && km->role[quick]) {
      memcpy(role, km->role[quick], n);
      moving = km->moving[quick];
    } else {
      moving = fit_region(old, nt, role, quick ? FIT_QUICK_RING : FIT_RING);
      if (moving < 0) goto out;
      if (km && (km->role[quick] = malloc(n)) != NULL) {
        memcpy(km->role[quick], role, n);
        km->moving[quick] = moving;
      }
    }
  } else {
    memset(role, 1, n);
  }
  if (!moving) {
    memset(role, 1, n);
    moving = n;
  }
  rc = sub_tissue(nt, role, km ? kept_order(nt, &km->ord_new) : NULL, &sn, &nmap, &smap, loc);
  if (!rc) rc = sub_tissue(old, role, km ? kept_order(old, &km->ord_old) : NULL, &so, &omap, &osmap, lold);
  if (rc) goto out;
  /* both trials take the full tissues' substep count (a part's own mean
   * stiffness would give another) */
  ts_xpbd_def dn = *def, dold = *def;
  if (def->substeps == 0 && !def->compliance) {
    dn.substeps = auto_substeps(nt, dt);
    dold.substeps = auto_substeps(old, dt);
  }
  if (posed) {
    rc = trial_tools_make(sn, tools, n_tools, &ttn);
    if (!rc) rc = trial_tools_make(so, tools, n_tools, &tto);
    if (rc) goto out;
  }
  const uint32_t ln = sn->n_nodes, lns = sn->n_springs;
  rc = TS_ENOMEM;
  ws = malloc(sizeof *ws * 6 * (size_t)ln);
  branch = malloc(ln);
  want = calloc(n, sizeof *want);
  e = malloc(sizeof *e * ln);
  be = malloc(sizeof *be * ln);
  best = malloc(sizeof *best * (lns + 1));
  if (!ws || !branch || !want || !e || !be || !best) goto out;
  /* the unrefined tissue's step (nt's indices), interpolated onto the new
   * nodes */
  rc = trial_step(so, &xo, &dold, tools, n_tools, posed, tto, dt, ws, branch, e);
  if (rc) goto out;
  for (uint32_t l = 0; l < so->n_nodes; l++) memcpy(want[omap[l]], e[l], sizeof want[0]);
  for (uint32_t i = n0; i < n; i++)
    for (int k = 0; k < 3; k++) want[i][k] = 0.5 * (want[parents[i - n0][0]][k] + want[parents[i - n0][1]][k]);
  double *rest = sn->hand->rest, best_err = INFINITY, step = 1.0;
  memcpy(best, rest, sizeof *best * lns);
  started = 1;
  for (int pass = 0; pass < passes; pass++) {
    rc = trial_step(sn, &xn, &dn, tools, n_tools, posed, ttn, dt, ws, branch, e);
    if (stats) stats->trials++;
    int diverged = 0;
    if (rc == TS_EDIVERGED && pass > 0) { /* a correction too far: shorter */
      rc = 0;
      diverged = 1;
    } else if (rc) {
      goto out;
    }
    double emax = diverged ? INFINITY : 0.0;
    for (uint32_t l = 0; l < ln && !diverged; l++)
      for (int k = 0; k < 3; k++) {
        e[l][k] = sn->inv_mass[l] > 0 ? want[nmap[l]][k] - e[l][k] : 0.0;
        emax = fmax(emax, fabs(e[l][k]));
      }
    if (!(emax == emax)) emax = INFINITY; /* NaN */
    if (emax < best_err) { /* the best so far: correct from here */
      best_err = emax;
      memcpy(best, rest, sizeof *best * lns);
      memcpy(be, e, sizeof *be * ln);
      /* (the step stays: a full one after a shortened one overshoots
         again, measured) */
    } else { /* worse: a step half as long from the best */
      step *= 0.5;
    }
    if (best_err < FIT_TOL || pass + 1 == passes) break;
    /* move the network's equilibrium by step * e: each spring's rest length
       such that it keeps its tension when stretched by that */
    for (uint32_t j = 0; j < lns; j++) {
      const ts_spring *sp = &sn->springs[j];
      double d[3], l = 0, dl = 0;
      for (int k = 0; k < 3; k++) {
        d[k] = sn->x[sp->b][k] - sn->x[sp->a][k];
        l += d[k] * d[k];
      }
      l = sqrt(l);
      rest[j] = best[j];
      if (!(l > 0)) continue;
      for (int k = 0; k < 3; k++) dl += d[k] / l * (be[sp->b][k] - be[sp->a][k]);
      if (dl != 0) rest[j] = rest_for(sp, l + step * dl, tension(sp, l, best[j]));
    }
  }
  if (stats) {
    stats->err = best_err;
    stats->nodes = (uint32_t)moving;
  }
  rc = 0;
out:
  if (started) /* the best met, on the springs the trials stepped */
    for (uint32_t j = 0; j < sn->n_springs; j++) nt->hand->rest[smap[j]] = best[j];
  trial_tools_free(ttn);
  trial_tools_free(tto);
  ts_xpbd_destroy(xn);
  ts_xpbd_destroy(xo);
  ts_tissue_destroy(sn);
  ts_tissue_destroy(so);
  free(nmap);
  free(smap);
  free(omap);
  free(osmap);
  free(role);
  free(loc);
  free(lold);
  free(ws);
  free(branch);
  free(want);
  free(e);
  free(be);
  free(best);
  return rc;
}

/* ---- a hand-over made on a snapshot, renewed at install (server/refine.c) ---- */

int ts_handover_copy(const ts_handover *h, uint32_t n_nodes, uint32_t n_springs, ts_handover **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!h) return 0;
  if (!h->f || !h->f_res || !h->rest || !h->depth) return TS_EINVAL;
  int rc = 0;
  *out = copy_hand(h, n_nodes, n_springs, &rc);
  return rc;
}

int ts_handover_renew(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2], const ts_tool *tools,
                      int n_tools, const double *rest_fix) {
  if (!nt || !cur || nt->n_nodes < cur->n_nodes) return TS_EINVAL;
  if (!nt->hand) return 0; /* refined without a hand-over */
  const double duration = nt->hand->duration;
  int rc = create_args(cur, nt, parents, tools, n_tools, duration);
  if (rc) return rc;
  /* the map made with the snapshot's hand-over, or a new one */
  ts_handover_map *m = map_fits(nt->hand->map, cur, nt) ? nt->hand->map : NULL;
  const int fresh = m == NULL;
  if (fresh) rc = map_build(cur, nt, parents, &m);
  ts_handover *h = NULL;
  if (!rc) rc = create_mapped(cur, nt, parents, m, tools, n_tools, duration, &h);
  if (rc) {
    if (fresh) map_free(m);
    return rc;
  }
  if (!fresh) nt->hand->map = NULL;
  h->map = m;
  if (rest_fix)
    for (uint32_t j = 0; j < nt->n_springs; j++) {
      const double r = h->rest[j] + rest_fix[j];
      if (isfinite(r) && r > 0) h->rest[j] = r;
    }
  ts_handover_free(nt->hand);
  nt->hand = h;
  return 0;
}

int ts_handover_fit_carried(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2],
                            const struct ts_xpbd_def *def, const ts_tool *tools, int n_tools, int flags,
                            double dt, double *rest_fix, ts_handover_fit_stats *stats) {
  if (!nt || !cur || !def || !rest_fix || !nt->hand) return TS_EINVAL;
  int rc = ts_handover_renew(nt, cur, parents, tools, n_tools, NULL);
  if (rc) return rc;
  const uint32_t ns = nt->n_springs;
  double *rest0 = malloc(sizeof *rest0 * (ns + 1));
  if (!rest0) return TS_ENOMEM;
  double *rest = nt->hand->rest;
  memcpy(rest0, rest, sizeof *rest0 * ns);
  for (uint32_t j = 0; j < ns; j++) {
    const double r = rest[j] + rest_fix[j];
    if (isfinite(r) && r > 0) rest[j] = r;
  }
  rc = ts_handover_fit_xpbd(nt, cur, parents, def, tools, n_tools, flags, dt, stats);
  /* what the fit left (its best, or the carried corrections when it could
   * not run) */
  for (uint32_t j = 0; j < ns; j++) rest_fix[j] = rest[j] - rest0[j];
  free(rest0);
  return rc;
}
