/*
 * ts_xpbd.c: the position-based solver (see ts_xpbd.h), extended
 * position-based dynamics after M. Macklin, M. Mueller, N. Chentanez, "XPBD:
 * Position-Based Simulation of Compliant Constrained Dynamics", MIG 2016,
 * substepped as in M. Macklin et al., "Small Steps in Physics Simulation",
 * SCA 2019.
 *
 * Substep (length h, inverse masses w):
 *   v += h g;  x_prev = x;  x += h v                 (free nodes)
 *   the distance constraints linearised at x_prev (the material law,
 *   below); tool contacts gathered at the predicted positions;
 *   lambda = 0; then `iterations` Gauss-Seidel sweeps over the distance,
 *   bending, volume and contact constraints in that order, each one doing
 *     dlambda = (-C - alpha~ lambda - gamma grad C . (x - x_prev))
 *               / ((1 + gamma) sum_i w_i |grad_i C|^2 + alpha~)      (eq. 26)
 *     x_i += w_i grad_i C dlambda;  lambda += dlambda
 *   with alpha~ = alpha / h^2 and gamma = alpha c / h for a damper c in
 *   parallel with the constraint (the paper's alpha~ beta~ / h with beta~ =
 *   h^2 c); a stiffness-proportional damper c = beta k gives gamma = beta / h;
 *   v = (x - x_prev) / h;  v /= 1 + d h              (d: def.damping)
 * The force a constraint exerts on its nodes is grad C lambda / h^2 (eq. 9
 * and 13 of the paper: M (x - x~) = grad C^T lambda). Contacts come last in
 * each sweep, so no node ends a substep inside a tool.
 *
 * Material to compliance. A constraint with energy C^2 / (2 alpha) is a
 * spring of stiffness 1/alpha on C, so each compliance is the inverse of a
 * stiffness that follows from the layers' moduli, never from h or the
 * iteration count:
 *   distance  C = |x_a - x_b| - L, alpha = 1 / k = L / (E A): the inverse of
 *             the spring's link-element constant k = E A / L, A = V / L, V
 *             the volume of material the builder attributed to the spring
 *             (ts_tissue_build.c: Van Gelder's equivalence, extended to
 *             prisms; with a fibre, E is the fibre-weighted mix of the axial
 *             and radial moduli, ts_material.h). Taking the builder's
 *             constants (ts_spring k1 + k2, or k for a hand-made linear
 *             spring) keeps the two solvers on one material: the same
 *             static equilibrium. The exponential law (ts_material.h),
 *             tension (k1 e^(b1 s) + k2 e^(b2 s)) (L - L0) at strain s > 0,
 *             is followed by replacing it with its tangent at the length at
 *             the start of each substep: a constraint of compliance 1 / k_t
 *             and a shifted rest length (linearise_distance, def.nonlinear);
 *             at rest and in compression the compliance is 1 / (k1 + k2);
 *   bending   C = theta - theta0, theta the signed dihedral angle at an
 *             interior sheet edge, alpha = 1 / k_b with the discrete-shells
 *             stiffness k_b = 3 D |e|^2 / A_e (E. Grinspun et al., "Discrete
 *             Shells", SCA 2003; A_e the two triangles' area) and the plate
 *             modulus D = sum_l E_l (t_l / 2)^3 / (12 (1 - nu^2)) over the
 *             sheet's share of each slab beside it (a lone sheet: its whole
 *             layer t): the sheet's own bending, which a layer of springs
 *             lacks (a stack of sheets already resists bending through their
 *             separation, so this matters most for a single sheet);
 *   volume    C = V - V0 of each prism, alpha = V0 / K with the bulk modulus
 *             K = E / (3 (1 - 2 nu)) (energy K (dV)^2 / (2 V0)), on top of
 *             the volume stiffness the springs already give;
 *   contact   C = (distance from the tool's core) - r >= 0, alpha = 0,
 *             lambda >= 0 (a rigid, frictionless tool).
 * E here is the layer's small-strain modulus (ts_layer.young).
 *
 * Substep count (def.substeps = 0). Gauss-Seidel converges in a few sweeps
 * only while h^2 k w is of order 1 or less for the typical constraint (k
 * its stiffness, w = w_a + w_b); stiffer, XPBD acts softer than the
 * material. The automatic count makes h omega <= 0.8, omega the mean over
 * the compliant distance constraints of sqrt(k w), fixed at creation: on
 * the default patch 4 substeps at 1 ms (sag within 0.002 % of converged
 * with 4 iterations), at twice its resolution 7 (within 0.3 %), where 4
 * would be 10 % too soft.
 *
 * After a live refinement the tissue's hand-over (ts_handover.h) blends the
 * distance constraints' rest lengths from its own to the springs' and adds
 * its residual node forces in the prediction; nodes get its contact
 * allowance against the sphere/capsule tools.
 *
 * Tools given as placed OBB trees (ts_xpbd_step_posed) are handled by
 * ts_contact.c and ts_grasp.c instead of the node-wise push below: the
 * tissue's AABB tree is refitted at the predicted positions of every
 * substep, each tool's candidates are taken from it, and the held and the
 * contact vertices are projected after the other constraints in every
 * sweep (the contact swept between the substep's two poses in the first
 * sweep, a mesh tool's triangle pass in every sweep: ts_contact.h); the
 * reaction is their sum(m dx) / h^2 like the multipliers here.
 *
 * Tools move linearly between their previous and current poses over the
 * substeps, so that a tool's motion does not reach the tissue as one jump
 * in the first substep. Contact candidates (free nodes within a margin of a
 * tool) are gathered once per substep into a buffer of 2 entries per node.
 *
 * No allocation in the step: all buffers are sized at creation.
 */
#include "ts_xpbd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover.h"
#include "ts_material.h"

#define TS__MAX_SPEED 100.0 /* m/s: faster than any tissue moves */
#define TS__MAX_DT 1.0      /* s */
#define TS__MAX_TOOLS 64
#define TS__MAX_ITER 1000u
#define TS__MAX_SUB 10000u
#define TS__AUTO_H_OMEGA 0.8 /* h * omega of the automatic substep */
#define TS__PI 3.14159265358979323846

typedef struct ts__dist {
  uint32_t a, b;
  double rest;   /* L0, m */
  double alpha0; /* small-strain compliance 1 / (k1 + k2), m/N; 0 = rigid */
  double w1, b1; /* the law's terms as fractions of k1 + k2: k(s) / (k1 + k2) */
  double w2, b2; /* = w1 e^(b1 s) + w2 e^(b2 s) */
  double c;      /* damper in parallel, N s/m (def.spring_dampers) */
} ts__dist;

typedef struct ts__bend {
  uint32_t p[4]; /* hinge p0-p1, wings p2, p3 */
  double theta0; /* rad */
  double alpha;  /* 1/(N m) */
} ts__bend;

typedef struct ts__vol {
  uint32_t p[6]; /* triangle p0..p2, swept to p3..p5 */
  double v0;     /* m^3, signed */
  double alpha;  /* m^3/Pa */
} ts__vol;

typedef struct ts__contact {
  uint32_t node, tool; /* tool: index into the step's prepared tools */
  double lambda;
  double n[3]; /* outward normal at the last projection */
} ts__contact;

typedef struct ts__prev_tool {
  int valid;
  int kind;
  double a[3], b[3]; /* core segment at the previous step */
} ts__prev_tool;

struct ts_xpbd {
  ts_xpbd_def def; /* compliance pointer cleared */
  uint32_t n_nodes, n_springs;
  double omega;    /* mean sqrt(k w) of the compliant distance constraints, 1/s */

  ts__dist *dist;     /* n_springs, in sweep order (by colour, see below) */
  uint32_t *spring_of; /* n_springs: the tissue spring of each */
  int rest_blended;    /* dist[].rest blended by a refinement's hand-over
                          (ts_handover.h) in the last step */
  double *lam_d, *sum_d;
  /* per substep (linearise_distance), in sweep order: */
  double *rest_now; /* rest length of the constraint, m */
  double *at;       /* alpha~ = alpha / h^2 */
  double *gamma;    /* gamma (all 0 without dampers) */
  double *inv_den;  /* 1 / ((1 + gamma) w + alpha~), 0 if w = 0 */
  int has_gamma;    /* some gamma > 0 */
  uint32_t n_bend;
  ts__bend *bend;
  double *lam_b, *sum_b;
  uint32_t n_vol;
  ts__vol *vol;
  double *lam_v, *sum_v;

  double *compliance; /* n_springs, tissue order: the small-strain alpha0 */
  double *tension;    /* n_springs */
  double force_scale; /* 1 / (h^2 * substeps) of the last step: mean force = sum * scale */

  double (*x_prev)[3];
  ts__contact *contacts;
  uint32_t cap_contacts, n_contacts;
  ts_xpbd_contact *contact_out;
  uint32_t n_contact_out;

  ts__prev_tool prev[TS__MAX_TOOLS];
};

/* ---- small vector helpers ---- */

static void sub3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[0] - b[0];
  o[1] = a[1] - b[1];
  o[2] = a[2] - b[2];
}
static void cross3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}
static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* ---- geometric measures of the constraints ---- */

/* Bending angle and gradient. With e = p1 - p0, nA = e x (p2 - p0) and
 * nB = (p3 - p0) x e (parallel when flat with the wings on opposite sides),
 * theta = atan2((nA x nB) . e/|e|, nA . nB). The gradient is the one of R.
 * Bridson, S. Marino, R. Fedkiw, "Simulation of clothing with folds and
 * wrinkles", SCA 2003 (their u1..u4, with the sign of this theta). */
double ts_xpbd_dihedral(const double p[4][3], double g[4][3]) {
  double e[3], d2[3], d3[3], nA[3], nB[3], c[3];
  sub3(p[1], p[0], e);
  sub3(p[2], p[0], d2);
  sub3(p[3], p[0], d3);
  cross3(e, d2, nA);
  cross3(d3, e, nB);
  double el2 = dot3(e, e), a2 = dot3(nA, nA), b2 = dot3(nB, nB);
  if (!(el2 > 0) || !(a2 > 0) || !(b2 > 0) || !isfinite(el2 + a2 + b2)) return NAN;
  double el = sqrt(el2);
  cross3(nA, nB, c);
  double theta = atan2(dot3(c, e) / el, dot3(nA, nB));
  if (g) {
    double d21[3], d31[3];
    sub3(p[2], p[1], d21);
    sub3(p[3], p[1], d31);
    /* coefficients of nA/|nA|^2 and nB/|nB|^2 in each gradient */
    double ka[4] = {-dot3(d21, e) / el, dot3(d2, e) / el, -el, 0.0};
    double kb[4] = {-dot3(d31, e) / el, dot3(d3, e) / el, 0.0, -el};
    for (int i = 0; i < 4; i++)
      for (int k = 0; k < 3; k++) g[i][k] = ka[i] * nA[k] / a2 + kb[i] * nB[k] / b2;
  }
  return theta;
}

/* Signed volume of tetrahedron (a, b, c, d), (b-a) x (c-a) . (d-a) / 6, and
 * its gradient added into ga..gd. */
static double tet_volume(const double *a, const double *b, const double *c, const double *d,
                         double *ga, double *gb, double *gc, double *gd) {
  double ab[3], ac[3], ad[3], n[3];
  sub3(b, a, ab);
  sub3(c, a, ac);
  sub3(d, a, ad);
  cross3(ab, ac, n);
  double v = dot3(n, ad) / 6.0;
  if (ga) {
    double nb[3], nc[3];
    cross3(ac, ad, nb); /* d/db */
    cross3(ad, ab, nc); /* d/dc */
    for (int k = 0; k < 3; k++) {
      double gdk = n[k] / 6.0, gbk = nb[k] / 6.0, gck = nc[k] / 6.0;
      gb[k] += gbk;
      gc[k] += gck;
      gd[k] += gdk;
      ga[k] -= gbk + gck + gdk;
    }
  }
  return v;
}

double ts_xpbd_prism_volume(const double p[6][3], double g[6][3]) {
  if (g) memset(g, 0, sizeof(double[6][3]));
  double *g0 = g ? g[0] : NULL, *g1 = g ? g[1] : NULL, *g2 = g ? g[2] : NULL;
  double *g3 = g ? g[3] : NULL, *g4 = g ? g[4] : NULL, *g5 = g ? g[5] : NULL;
  return tet_volume(p[0], p[1], p[2], p[3], g0, g1, g2, g3) +
         tet_volume(p[1], p[2], p[3], p[4], g1, g2, g3, g4) +
         tet_volume(p[2], p[3], p[4], p[5], g2, g3, g4, g5);
}

/* ---- creation: the sheet structure ---- */

/* The tissue's sheet triangulation, in column indices (node (s, j) of
 * column j in sheet s is node[s * nps + j], the tissue's column map, so a
 * refined tissue, whose new nodes are appended, has its constraints as a
 * built one), with its unique edges and their per-sheet areas: what the
 * bending and volume constraints are made from. */
typedef struct ts__sheets {
  uint32_t S, nps, T, E;
  uint32_t *node;       /* S * nps: (sheet, column) -> tissue node */
  uint32_t (*tri)[3];   /* T triangles */
  uint32_t (*tri_e)[3]; /* their edges: tri_e[k][i] is edge (tri[k][i], tri[k][i+1]) */
  uint64_t *ekey;       /* E sorted keys lo << 32 | hi */
  uint32_t *ecount;     /* triangles on each edge */
  uint32_t (*eopp)[2];  /* the opposite vertices of the first two */
  double *earea;        /* S * E: area of the sheet triangles on the edge */
} ts__sheets;

static void sheets_free(ts__sheets *sh) {
  free(sh->node);
  free(sh->tri);
  free(sh->tri_e);
  free(sh->ekey);
  free(sh->ecount);
  free(sh->eopp);
  free(sh->earea);
  memset(sh, 0, sizeof *sh);
}

static uint64_t edge_key(uint32_t a, uint32_t b) {
  return a < b ? (uint64_t)a << 32 | b : (uint64_t)b << 32 | a;
}

static int cmp_u64(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

/* Index of edge (a, b) in sh->ekey, or UINT32_MAX. */
static uint32_t find_edge(const ts__sheets *sh, uint32_t a, uint32_t b) {
  uint64_t k = edge_key(a, b);
  const uint64_t *hit = bsearch(&k, sh->ekey, sh->E, sizeof k, cmp_u64);
  return hit ? (uint32_t)(hit - sh->ekey) : UINT32_MAX;
}

static double tri_area(const double *a, const double *b, const double *c) {
  double u[3], v[3], n[3];
  sub3(b, a, u);
  sub3(c, a, v);
  cross3(u, v, n);
  return 0.5 * sqrt(dot3(n, n));
}

static int layers_ok(const ts_tissue *t) {
  if (t->n_layers < 1 || t->n_layers > TS_MAX_LAYERS) return 0;
  for (uint32_t l = 0; l < t->n_layers; l++) {
    const ts_layer *L = &t->layers[l];
    if (!(L->thickness > 0) || !isfinite(L->thickness)) return 0;
    if (!(L->young > 0) || !isfinite(L->young)) return 0;
  }
  return 1;
}

/* Reads the sheet structure of t: TS_EINVAL when it has none. */
static int sheets_build(const ts_tissue *t, ts__sheets *sh) {
  memset(sh, 0, sizeof *sh);
  uint32_t S = t->n_sheets, nps = ts_tissue_columns(t);
  if (S < 1 || nps < 3 || (uint64_t)S * nps != t->n_nodes) return TS_EINVAL;
  if (!layers_ok(t)) return TS_EINVAL;
  if (S >= 2 ? t->n_layers != S - 1 : t->n_layers != 1) return TS_EINVAL;
  if (!t->tris || !t->rest) return TS_EINVAL;
  sh->S = S;
  sh->nps = nps;
  /* the map, and its inverse: slot[i] = s * nps + j for node i */
  sh->node = malloc(sizeof *sh->node * t->n_nodes);
  uint32_t *slot = malloc(sizeof *slot * t->n_nodes);
  if (!sh->node || !slot) {
    free(slot);
    sheets_free(sh);
    return TS_ENOMEM;
  }
  for (uint32_t q = 0, k = 0; q < S; q++)
    for (uint32_t j = 0; j < nps; j++, k++) {
      sh->node[k] = ts_tissue_sheet_node(t, q, j);
      slot[sh->node[k]] = k;
    }

  /* the sheet triangles: the render triangles lying in sheet 0, else in
   * the last sheet */
  int rc = 0;
  for (int pass = 0; pass < 2 && sh->T == 0 && !rc; pass++) {
    uint32_t base = pass == 0 ? 0 : (S - 1) * nps;
    uint32_t cnt = 0;
    for (uint32_t i = 0; i < t->n_tris; i++) {
      const uint32_t *tr = t->tris[i];
      int in = 1;
      for (int k = 0; k < 3; k++) in &= tr[k] < t->n_nodes && slot[tr[k]] - base < nps;
      cnt += (uint32_t)in;
    }
    if (cnt == 0) continue;
    sh->tri = malloc(sizeof *sh->tri * cnt);
    if (!sh->tri) {
      rc = TS_ENOMEM;
      break;
    }
    for (uint32_t i = 0; i < t->n_tris; i++) {
      const uint32_t *tr = t->tris[i];
      int in = 1;
      for (int k = 0; k < 3; k++) in &= tr[k] < t->n_nodes && slot[tr[k]] - base < nps;
      if (!in) continue;
      if (tr[0] == tr[1] || tr[1] == tr[2] || tr[0] == tr[2]) {
        rc = TS_EINVAL;
        break;
      }
      for (int k = 0; k < 3; k++) sh->tri[sh->T][k] = slot[tr[k]] - base;
      sh->T++;
    }
  }
  free(slot);
  if (!rc && sh->T == 0) rc = TS_EINVAL;
  if (rc) {
    sheets_free(sh);
    return rc;
  }

  /* unique edges */
  uint32_t T = sh->T;
  uint64_t *keys = malloc(sizeof *keys * 3 * (size_t)T);
  sh->tri_e = malloc(sizeof *sh->tri_e * T);
  if (!keys || !sh->tri_e) {
    free(keys);
    sheets_free(sh);
    return TS_ENOMEM;
  }
  for (uint32_t k = 0; k < T; k++)
    for (int i = 0; i < 3; i++) keys[3 * k + i] = edge_key(sh->tri[k][i], sh->tri[k][(i + 1) % 3]);
  qsort(keys, 3 * (size_t)T, sizeof *keys, cmp_u64);
  uint32_t E = 0;
  for (size_t i = 0; i < 3 * (size_t)T; i++)
    if (i == 0 || keys[i] != keys[i - 1]) keys[E++] = keys[i];
  sh->ekey = keys;
  sh->E = E;
  sh->ecount = calloc(E, sizeof *sh->ecount);
  sh->eopp = malloc(sizeof *sh->eopp * E);
  sh->earea = calloc((size_t)S * E, sizeof *sh->earea);
  if (!sh->ecount || !sh->eopp || !sh->earea) {
    sheets_free(sh);
    return TS_ENOMEM;
  }
  for (uint32_t k = 0; k < T; k++) {
    for (int i = 0; i < 3; i++) {
      uint32_t e = find_edge(sh, sh->tri[k][i], sh->tri[k][(i + 1) % 3]);
      sh->tri_e[k][i] = e;
      if (sh->ecount[e] < 2) sh->eopp[e][sh->ecount[e]] = sh->tri[k][(i + 2) % 3];
      sh->ecount[e]++;
    }
  }
  for (uint32_t s = 0; s < S; s++) {
    const double (*p)[3] = (const double (*)[3])t->rest;
    const uint32_t *nd = sh->node + (size_t)s * nps;
    for (uint32_t k = 0; k < T; k++) {
      const uint32_t *tr = sh->tri[k];
      double A = tri_area(p[nd[tr[0]]], p[nd[tr[1]]], p[nd[tr[2]]]);
      for (int i = 0; i < 3; i++) sh->earea[(size_t)s * E + sh->tri_e[k][i]] += A;
    }
  }
  return 0;
}

/* The sheet's share of slab l's thickness: half of it, or all of it for a
 * tissue of a single sheet. */
static double share(const ts__sheets *sh, uint32_t l, const ts_tissue *t) {
  return sh->S == 1 ? t->layers[l].thickness : 0.5 * t->layers[l].thickness;
}

/* Slabs beside sheet s: [*lo, *hi). */
static void slabs_of(const ts__sheets *sh, uint32_t s, uint32_t *lo, uint32_t *hi) {
  if (sh->S == 1) {
    *lo = 0;
    *hi = 1;
    return;
  }
  *lo = s > 0 ? s - 1 : 0;
  *hi = s < sh->S - 1 ? s + 1 : s;
}

/* Sweep order. Gauss-Seidel projects one constraint after another; when
 * consecutive constraints share a node, each waits for the previous one's
 * write (a chain of square roots and divisions). Sorting the constraints by
 * a greedy colouring of their node graph (no two of a colour share a node)
 * makes runs of independent constraints the processor can overlap; within a
 * colour they go by first node, for locality. The result is still a
 * Gauss-Seidel sweep, in another order. perm gets the constraint indices in
 * sweep order; nodes holds k node indices per constraint. */
typedef struct ts__colour_key {
  uint32_t colour, first, index;
} ts__colour_key;

static int cmp_colour(const void *pa, const void *pb) {
  const ts__colour_key *a = pa, *b = pb;
  if (a->colour != b->colour) return a->colour < b->colour ? -1 : 1;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

static int colour_order(uint32_t n, int k, const uint32_t *nodes, uint32_t n_nodes,
                        uint32_t *perm) {
  uint64_t *used = calloc(n_nodes, sizeof *used); /* colours 0..63 taken at each node */
  ts__colour_key *key = malloc(sizeof *key * (n ? n : 1));
  if (!used || !key) {
    free(used);
    free(key);
    return TS_ENOMEM;
  }
  for (uint32_t j = 0; j < n; j++) {
    const uint32_t *p = nodes + (size_t)j * k;
    uint64_t taken = 0;
    uint32_t first = p[0];
    for (int i = 0; i < k; i++) {
      taken |= used[p[i]];
      if (p[i] < first) first = p[i];
    }
    uint32_t c = 64; /* all 64 taken: a last, mixed group */
    if (~taken) {
      c = 0;
      while (taken >> c & 1) c++;
      for (int i = 0; i < k; i++) used[p[i]] |= (uint64_t)1 << c;
    }
    key[j] = (ts__colour_key){c, first, j};
  }
  qsort(key, n, sizeof *key, cmp_colour);
  for (uint32_t j = 0; j < n; j++) perm[j] = key[j].index;
  free(used);
  free(key);
  return 0;
}

static int def_ok(const ts_xpbd_def *d) {
  if (d->iterations < 1 || d->iterations > TS__MAX_ITER) return 0;
  if (d->substeps > TS__MAX_SUB) return 0; /* 0: automatic */
  if (!isfinite(d->damping) || d->damping < 0 || d->damping > 1e6) return 0;
  if (!isfinite(d->stiffness_damping) || d->stiffness_damping < 0 || d->stiffness_damping > 1e3)
    return 0;
  if (!isfinite(d->poisson) || d->poisson < 0 || d->poisson >= 0.5) return 0;
  return 1;
}

ts_xpbd_def ts_xpbd_default_def(void) {
  ts_xpbd_def d;
  memset(&d, 0, sizeof d);
  d.iterations = 4;
  d.substeps = 0;
  d.damping = 150.0;
  d.stiffness_damping = 0.0;
  d.spring_dampers = 0;
  d.nonlinear = 1;
  d.bending = 0;
  d.volume = 0;
  d.poisson = 0.45;
  d.compliance = NULL;
  return d;
}

void ts_xpbd_destroy(ts_xpbd *s) {
  if (!s) return;
  free(s->dist);
  free(s->spring_of);
  free(s->lam_d);
  free(s->sum_d);
  free(s->inv_den);
  free(s->at);
  free(s->rest_now);
  free(s->gamma);
  free(s->bend);
  free(s->lam_b);
  free(s->sum_b);
  free(s->vol);
  free(s->lam_v);
  free(s->sum_v);
  free(s->compliance);
  free(s->tension);
  free(s->x_prev);
  free(s->contacts);
  free(s->contact_out);
  free(s);
}

/* Bending constraints of every interior sheet edge of every sheet. */
static int add_bending(ts_xpbd *s, const ts_tissue *t, const ts__sheets *sh) {
  uint32_t interior = 0;
  for (uint32_t e = 0; e < sh->E; e++) interior += sh->ecount[e] == 2;
  uint64_t n = (uint64_t)interior * sh->S;
  if (n >= UINT32_MAX) return TS_ETOOBIG;
  s->bend = malloc(sizeof *s->bend * (n ? n : 1));
  if (!s->bend) return TS_ENOMEM;
  double nu = s->def.poisson;
  for (uint32_t sheet = 0; sheet < sh->S; sheet++) {
    uint32_t lo, hi;
    slabs_of(sh, sheet, &lo, &hi);
    double D = 0;
    for (uint32_t l = lo; l < hi; l++) {
      double th = share(sh, l, t);
      D += t->layers[l].young * th * th * th / (12.0 * (1.0 - nu * nu));
    }
    const uint32_t *nd = sh->node + (size_t)sheet * sh->nps; /* column -> node */
    for (uint32_t e = 0; e < sh->E; e++) {
      if (sh->ecount[e] != 2) continue;
      ts__bend *b = &s->bend[s->n_bend];
      b->p[0] = nd[(uint32_t)(sh->ekey[e] >> 32)];
      b->p[1] = nd[(uint32_t)(sh->ekey[e] & 0xffffffffu)];
      b->p[2] = nd[sh->eopp[e][0]];
      b->p[3] = nd[sh->eopp[e][1]];
      double p[4][3];
      for (int i = 0; i < 4; i++) memcpy(p[i], t->rest[b->p[i]], sizeof p[i]);
      double theta0 = ts_xpbd_dihedral((const double (*)[3])p, NULL);
      double Ae = sh->earea[(size_t)sheet * sh->E + e];
      double e2 = 0;
      for (int k = 0; k < 3; k++) e2 += (p[1][k] - p[0][k]) * (p[1][k] - p[0][k]);
      double kb = 3.0 * D * e2 / Ae;
      if (!isfinite(theta0) || !(kb > 0) || !isfinite(kb)) continue; /* degenerate */
      b->theta0 = theta0;
      b->alpha = 1.0 / kb;
      s->n_bend++;
    }
  }
  return 0;
}

/* Volume constraints of every prism of every slab. */
static int add_volume(ts_xpbd *s, const ts_tissue *t, const ts__sheets *sh) {
  if (sh->S < 2) return 0;
  uint64_t n = (uint64_t)sh->T * (sh->S - 1);
  if (n >= UINT32_MAX) return TS_ETOOBIG;
  s->vol = malloc(sizeof *s->vol * n);
  if (!s->vol) return TS_ENOMEM;
  double nu = s->def.poisson;
  for (uint32_t l = 0; l + 1 < sh->S; l++) {
    double K = t->layers[l].young / (3.0 * (1.0 - 2.0 * nu));
    for (uint32_t k = 0; k < sh->T; k++) {
      ts__vol *v = &s->vol[s->n_vol];
      double p[6][3];
      for (int i = 0; i < 3; i++) {
        v->p[i] = sh->node[l * sh->nps + sh->tri[k][i]];
        v->p[i + 3] = sh->node[(l + 1) * sh->nps + sh->tri[k][i]];
      }
      for (int i = 0; i < 6; i++) memcpy(p[i], t->rest[v->p[i]], sizeof p[i]);
      double v0 = ts_xpbd_prism_volume((const double (*)[3])p, NULL);
      if (!(fabs(v0) > 0) || !isfinite(v0)) continue; /* degenerate */
      v->v0 = v0;
      v->alpha = fabs(v0) / K;
      s->n_vol++;
    }
  }
  return 0;
}

/* Puts n constraints of `size` bytes, each starting with k uint32_t node
 * indices, into colour order (see colour_order). */
static int reorder(void *items, uint32_t n, size_t size, int k, uint32_t n_nodes) {
  if (n < 2) return 0;
  uint32_t *nodes = calloc((size_t)n * k, sizeof *nodes);
  uint32_t *perm = malloc(sizeof *perm * n);
  unsigned char *copy = malloc(size * n);
  int rc = TS_ENOMEM;
  if (nodes && perm && copy) {
    memcpy(copy, items, size * n);
    for (uint32_t j = 0; j < n; j++) memcpy(nodes + (size_t)j * k, copy + size * j, sizeof *nodes * k);
    rc = colour_order(n, k, nodes, n_nodes, perm);
    if (!rc)
      for (uint32_t j = 0; j < n; j++) memcpy((unsigned char *)items + size * j, copy + size * perm[j], size);
  }
  free(nodes);
  free(perm);
  free(copy);
  return rc;
}

/* The distance constraints into colour order, remembering their springs. */
static int reorder_distance(ts_xpbd *s) {
  for (uint32_t j = 0; j < s->n_springs; j++) s->spring_of[j] = j;
  if (s->n_springs < 2) return 0;
  uint32_t *nodes = malloc(sizeof *nodes * 2 * (size_t)s->n_springs);
  uint32_t *perm = malloc(sizeof *perm * s->n_springs);
  ts__dist *copy = malloc(sizeof *copy * s->n_springs);
  int rc = TS_ENOMEM;
  if (nodes && perm && copy) {
    memcpy(copy, s->dist, sizeof *copy * s->n_springs);
    for (uint32_t j = 0; j < s->n_springs; j++) {
      nodes[2 * j] = copy[j].a;
      nodes[2 * j + 1] = copy[j].b;
    }
    rc = colour_order(s->n_springs, 2, nodes, s->n_nodes, perm);
    if (!rc) {
      for (uint32_t j = 0; j < s->n_springs; j++) {
        s->dist[j] = copy[perm[j]];
        s->spring_of[j] = perm[j];
      }
    }
  }
  free(nodes);
  free(perm);
  free(copy);
  return rc;
}

/* A spring's distance constraint: compliance and law from its constants
 * (k1, b1, k2, b2 of the exponential law; k alone for a hand-made linear
 * spring, as ts_massspring reads them) or the given compliance. TS_EINVAL
 * for an end out of range, equal ends, a rest length not positive and
 * finite, constants negative, NaN or infinite, exponents over 100, or no
 * stiffness at all. */
static int make_distance(const ts_spring *sp, uint32_t n_nodes, const ts_xpbd_def *def,
                         double given, ts__dist *d) {
  if (sp->a >= n_nodes || sp->b >= n_nodes || sp->a == sp->b) return TS_EINVAL;
  if (!(sp->rest > 0) || !isfinite(sp->rest)) return TS_EINVAL;
  if (!(sp->c >= 0) || !isfinite(sp->c)) return TS_EINVAL;
  memset(d, 0, sizeof *d);
  d->a = sp->a;
  d->b = sp->b;
  d->rest = sp->rest;
  d->c = def->spring_dampers ? sp->c : 0.0;
  d->w1 = 1.0;
  if (def->compliance) {
    if (!(given >= 0) || !isfinite(given)) return TS_EINVAL;
    d->alpha0 = given;
    return 0;
  }
  double k1 = sp->k1, b1 = sp->b1, k2 = sp->k2, b2 = sp->b2;
  double v[5] = {sp->k, k1, k2, b1, b2};
  for (int i = 0; i < 5; i++)
    if (!(v[i] >= 0) || !isfinite(v[i])) return TS_EINVAL;
  if (b1 > 100 || b2 > 100) return TS_EINVAL;
  if (k1 == 0 && k2 == 0) k1 = sp->k, b1 = 0, b2 = 0; /* hand-made linear spring */
  double k = k1 + k2;
  if (!(k > 0) || !isfinite(k)) return TS_EINVAL;
  d->alpha0 = 1.0 / k;
  if (def->nonlinear && (b1 > 0 || b2 > 0)) {
    if (b1 == 0) { /* the exponential term first: sweep_distance tests b1 */
      double tk = k1, tb = b1;
      k1 = k2, b1 = b2, k2 = tk, b2 = tb;
    }
    d->w1 = k1 / k, d->b1 = b1;
    d->w2 = k2 / k, d->b2 = b2;
  }
  return 0;
}

int ts_xpbd_build(const ts_tissue *t, const ts_xpbd_def *def, ts_xpbd **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!t || !def || t->n_nodes == 0 || !t->x || !t->v || !t->inv_mass || !t->rest)
    return TS_EINVAL;
  if (t->n_springs > 0 && !t->springs) return TS_EINVAL;
  if (!def_ok(def)) return TS_EINVAL;
  if (t->n_nodes > UINT32_MAX / 2) return TS_ETOOBIG;

  ts_xpbd *s = calloc(1, sizeof *s);
  if (!s) return TS_ENOMEM;
  s->def = *def;
  s->def.compliance = NULL;
  s->n_nodes = t->n_nodes;
  s->n_springs = t->n_springs;
  size_t ns = t->n_springs ? t->n_springs : 1, nn = t->n_nodes;
  s->cap_contacts = 2 * t->n_nodes;
  if (s->cap_contacts < 16) s->cap_contacts = 16;
  s->dist = malloc(sizeof *s->dist * ns);
  s->spring_of = malloc(sizeof *s->spring_of * ns);
  s->lam_d = calloc(ns, sizeof *s->lam_d);
  s->sum_d = calloc(ns, sizeof *s->sum_d);
  s->inv_den = calloc(ns, sizeof *s->inv_den);
  s->at = calloc(ns, sizeof *s->at);
  s->rest_now = calloc(ns, sizeof *s->rest_now);
  s->gamma = calloc(ns, sizeof *s->gamma);
  s->compliance = calloc(ns, sizeof *s->compliance);
  s->tension = calloc(ns, sizeof *s->tension);
  s->x_prev = calloc(nn, sizeof *s->x_prev);
  s->contacts = malloc(sizeof *s->contacts * s->cap_contacts);
  s->contact_out = malloc(sizeof *s->contact_out * s->cap_contacts);
  int rc = 0;
  ts__sheets sh;
  memset(&sh, 0, sizeof sh);
  if (!s->dist || !s->spring_of || !s->lam_d || !s->sum_d || !s->inv_den || !s->at || !s->rest_now || !s->gamma || !s->compliance || !s->tension || !s->x_prev ||
      !s->contacts || !s->contact_out) {
    rc = TS_ENOMEM;
    goto fail;
  }

  int need_sheets = def->bending || def->volume;
  if (need_sheets) {
    rc = sheets_build(t, &sh);
    if (rc) goto fail;
  }

  /* the distance constraints, in tissue order (reordered below) */
  for (uint32_t i = 0; i < t->n_springs; i++) {
    const ts_spring *sp = &t->springs[i];
    ts__dist *d = &s->dist[i];
    rc = make_distance(sp, t->n_nodes, def, def->compliance ? def->compliance[i] : 0.0, d);
    if (rc) goto fail;
    s->compliance[i] = d->alpha0;
  }
  rc = reorder_distance(s);
  if (rc) goto fail;
  double osum = 0;
  uint32_t on = 0;
  for (uint32_t j = 0; j < s->n_springs; j++) {
    const ts__dist *d = &s->dist[j];
    double w = t->inv_mass[d->a] + t->inv_mass[d->b];
    if (!(d->alpha0 > 0) || !(w > 0) || !isfinite(w)) continue;
    osum += sqrt(w / d->alpha0);
    on++;
  }
  s->omega = on ? osum / on : 0.0;

  if (def->bending) {
    rc = add_bending(s, t, &sh);
    if (!rc) rc = reorder(s->bend, s->n_bend, sizeof *s->bend, 4, t->n_nodes);
    if (rc) goto fail;
    s->lam_b = calloc(s->n_bend ? s->n_bend : 1, sizeof *s->lam_b);
    s->sum_b = calloc(s->n_bend ? s->n_bend : 1, sizeof *s->sum_b);
    if (!s->lam_b || !s->sum_b) {
      rc = TS_ENOMEM;
      goto fail;
    }
  }
  if (def->volume) {
    rc = add_volume(s, t, &sh);
    if (!rc) rc = reorder(s->vol, s->n_vol, sizeof *s->vol, 6, t->n_nodes);
    if (rc) goto fail;
    s->lam_v = calloc(s->n_vol ? s->n_vol : 1, sizeof *s->lam_v);
    s->sum_v = calloc(s->n_vol ? s->n_vol : 1, sizeof *s->sum_v);
    if (!s->lam_v || !s->sum_v) {
      rc = TS_ENOMEM;
      goto fail;
    }
  }
  sheets_free(&sh);
  *out = s;
  return 0;

fail:
  sheets_free(&sh);
  ts_xpbd_destroy(s);
  return rc;
}

ts_xpbd *ts_xpbd_create(const ts_tissue *t, const ts_xpbd_def *def) {
  ts_xpbd_def d = def ? *def : ts_xpbd_default_def();
  ts_xpbd *s = NULL;
  return ts_xpbd_build(t, &d, &s) ? NULL : s;
}

/* ---- queries ---- */

void ts_xpbd_counts(const ts_xpbd *s, uint32_t *distance, uint32_t *bending, uint32_t *volume) {
  if (distance) *distance = s ? s->n_springs : 0;
  if (bending) *bending = s ? s->n_bend : 0;
  if (volume) *volume = s ? s->n_vol : 0;
}

const double *ts_xpbd_compliance(const ts_xpbd *s) { return s ? s->compliance : NULL; }

const double *ts_xpbd_tensions(const ts_xpbd *s) { return s ? s->tension : NULL; }

const ts_xpbd_contact *ts_xpbd_contacts(const ts_xpbd *s, uint32_t *n) {
  if (n) *n = s ? s->n_contact_out : 0;
  return s ? s->contact_out : NULL;
}

int ts_xpbd_node_forces(const ts_xpbd *s, const ts_tissue *t, double (*f)[3]) {
  if (!s || !t || !f || !t->x || t->n_nodes != s->n_nodes) return TS_EINVAL;
  const double (*x)[3] = (const double (*)[3])t->x;
  memset(f, 0, sizeof *f * s->n_nodes);
  const double sc = s->force_scale;
  for (uint32_t j = 0; j < s->n_springs; j++) {
    const ts__dist *c = &s->dist[j];
    double d[3];
    sub3(x[c->a], x[c->b], d);
    double l = sqrt(dot3(d, d)), lam = s->sum_d[j] * sc;
    if (!(l > 0) || lam == 0) continue;
    for (int k = 0; k < 3; k++) {
      double fk = d[k] / l * lam;
      f[c->a][k] += fk;
      f[c->b][k] -= fk;
    }
  }
  for (uint32_t j = 0; j < s->n_bend; j++) {
    const ts__bend *c = &s->bend[j];
    double p[4][3], g[4][3], lam = s->sum_b[j] * sc;
    if (lam == 0) continue;
    for (int i = 0; i < 4; i++) memcpy(p[i], x[c->p[i]], sizeof p[i]);
    if (isnan(ts_xpbd_dihedral((const double (*)[3])p, g))) continue;
    for (int i = 0; i < 4; i++)
      for (int k = 0; k < 3; k++) f[c->p[i]][k] += g[i][k] * lam;
  }
  for (uint32_t j = 0; j < s->n_vol; j++) {
    const ts__vol *c = &s->vol[j];
    double p[6][3], g[6][3], lam = s->sum_v[j] * sc;
    if (lam == 0) continue;
    for (int i = 0; i < 6; i++) memcpy(p[i], x[c->p[i]], sizeof p[i]);
    ts_xpbd_prism_volume((const double (*)[3])p, g);
    for (int i = 0; i < 6; i++)
      for (int k = 0; k < 3; k++) f[c->p[i]][k] += g[i][k] * lam;
  }
  return 0;
}

/* ---- the step: tools ---- */

typedef struct ts__ptool {
  ts_tool *tool;
  uint32_t index;          /* in the caller's array */
  double a0[3], b0[3];     /* core segment at the start of the step */
  double a1[3], b1[3];     /* and at its end */
  double a[3], ab[3];      /* this substep: a + u * ab, u in [0, 1] */
  double inv_len2;         /* 1 / |ab|^2, 0 for a sphere */
  double r;
  double bc[3], reach2;    /* bounding sphere of the tool plus margin: centre, radius^2 */
  double force[3];         /* sum over substeps of the reaction * h^2 */
} ts__ptool;

static int valid_tool(const ts_tool *tl) {
  for (int i = 0; i < 3; i++)
    if (!isfinite(tl->pos[i])) return TS_ENAN;
  for (int i = 0; i < 4; i++)
    if (!isfinite(tl->quat[i])) return TS_ENAN;
  if (!isfinite(tl->radius) || !isfinite(tl->length)) return TS_ENAN;
  if (tl->kind != TS_TOOL_SPHERE && tl->kind != TS_TOOL_CAPSULE) return TS_EINVAL;
  if (!(tl->radius > 0) || tl->radius > 1.0) return TS_EINVAL;
  if (tl->kind == TS_TOOL_CAPSULE && (tl->length < 0 || tl->length > 10.0)) return TS_EINVAL;
  return 0;
}

/* The tool's segment at fraction u of the step. */
static void place_tool(ts__ptool *p, double u) {
  double b[3], l2 = 0;
  for (int k = 0; k < 3; k++) {
    p->a[k] = p->a0[k] + u * (p->a1[k] - p->a0[k]);
    b[k] = p->b0[k] + u * (p->b1[k] - p->b0[k]);
    p->ab[k] = b[k] - p->a[k];
    l2 += p->ab[k] * p->ab[k];
    p->bc[k] = 0.5 * (p->a[k] + b[k]);
  }
  p->inv_len2 = l2 > 0 ? 1.0 / l2 : 0.0;
  /* margin: nodes this close may be pushed in by their neighbours within
   * the substep */
  double reach = p->r * 1.25 + 0.5 * sqrt(l2) + 1e-4;
  p->reach2 = reach * reach;
}

/* Distance from x to the tool's core, and the unit direction away from it
 * (+y when x is on the core). */
static double core_distance(const ts__ptool *p, const double x[3], double n[3]) {
  double ap[3];
  sub3(x, p->a, ap);
  double u = dot3(ap, p->ab) * p->inv_len2;
  u = u < 0 ? 0 : u > 1 ? 1 : u;
  double d[3];
  for (int k = 0; k < 3; k++) d[k] = ap[k] - u * p->ab[k];
  double dl = sqrt(dot3(d, d));
  if (dl > 0) {
    for (int k = 0; k < 3; k++) n[k] = d[k] / dl;
  } else {
    n[0] = 0, n[1] = 1, n[2] = 0;
  }
  return dl;
}

static uint32_t gather_contacts(ts_xpbd *s, const ts_tissue *t, ts__ptool *pt, int np,
                                uint32_t *dropped) {
  const double (*x)[3] = (const double (*)[3])t->x;
  const double *im = t->inv_mass;
  uint32_t n = 0;
  for (int q = 0; q < np; q++) {
    const ts__ptool *p = &pt[q];
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      if (im[i] == 0) continue;
      double d[3];
      sub3(x[i], p->bc, d);
      if (!(dot3(d, d) < p->reach2)) continue;
      if (n == s->cap_contacts) {
        (*dropped)++;
        continue;
      }
      ts__contact *c = &s->contacts[n++];
      c->node = i;
      c->tool = (uint32_t)q;
      c->lambda = 0;
      c->n[0] = 0, c->n[1] = 1, c->n[2] = 0;
    }
  }
  return n;
}

/* ---- the step: constraint sweeps ---- */

/* Per-substep constants of the distance constraints, from the positions at
 * the start of the substep (x_prev): the rest length and compliance of the
 * constraint (for a stretched spring with the exponential law, its tangent
 * at the start length, see below), alpha~ = alpha / h^2, gamma, and the inverse of eq.
 * 26's denominator (1 + gamma) (w_a + w_b) + alpha~ (0 for a constraint
 * between two anchored nodes, which never moves). beta: the stiffness-
 * proportional damping (s).
 *
 * The law's tension is T(L) = k0 f(s) (L - L0), s = L / L0 - 1 > 0, f(s) =
 * w1 e^(b1 s) + w2 e^(b2 s), k0 = 1 / alpha0. Around the start length Lp it
 * is replaced by its tangent, T(Lp) + kt (L - Lp) with kt = k0 (f + s f'):
 * a linear constraint of compliance 1 / kt and rest length Lp - T(Lp) / kt.
 * Each substep is then one Newton step on the law, and at rest (L = Lp) the
 * constraint's tension is exactly the law's (around the predicted length
 * instead, h^2 g away from the rest state, the static state would be off
 * by O(h^4)). (Taking the secant k0 f(s) as
 * the constraint's stiffness instead is a fixed-point iteration that
 * oscillates wherever b s > 1 once the sweeps converge.) */
static void linearise_distance(ts_xpbd *s, const ts_tissue *t, double h, double beta) {
  const double *im = t->inv_mass;
  const double (*x)[3] = (const double (*)[3])s->x_prev;
  const double ih = 1.0 / h, ih2 = ih * ih;
  int has_gamma = 0;
  for (uint32_t j = 0; j < s->n_springs; j++) {
    const ts__dist *c = &s->dist[j];
    double alpha = c->alpha0, rest = c->rest;
    if (c->b1 > 0) {
      double d[3];
      sub3(x[c->a], x[c->b], d);
      const double lp = sqrt(dot3(d, d)), st = lp / rest - 1.0;
      if (st > 0) { /* stretched: the tangent (NaN skips it; the step catches it) */
        const double e1 = c->w1 * ts_exp_pos(c->b1 * st);
        const double e2 = c->w2 > 0 ? c->w2 * ts_exp_pos(c->b2 * st) : 0.0;
        const double f = e1 + e2, ft = f + st * (c->b1 * e1 + c->b2 * e2); /* kt / k0 */
        alpha /= ft;
        rest = lp - f * st * rest / ft; /* Lp - T(Lp) / kt */
      }
    }
    /* gamma = alpha c / h for the damper c = beta k + c_spring */
    const double gamma = alpha > 0 ? (beta + alpha * c->c) * ih : 0.0;
    const double w = im[c->a] + im[c->b];
    s->rest_now[j] = rest;
    s->at[j] = alpha * ih2;
    s->gamma[j] = gamma;
    s->inv_den[j] = w > 0 ? 1.0 / ((1.0 + gamma) * w + s->at[j]) : 0.0;
    has_gamma |= gamma > 0;
  }
  s->has_gamma = has_gamma;
}

/* One sweep over the distance constraints; returns the largest |C +
 * alpha~ lambda| met. */
static double sweep_distance(ts_xpbd *s, ts_tissue *t) {
  double (*restrict x)[3] = t->x;
  const double (*restrict xp)[3] = (const double (*)[3])s->x_prev;
  const double *restrict im = t->inv_mass;
  const ts__dist *restrict c = s->dist;
  const double *restrict inv_den = s->inv_den, *restrict at = s->at, *restrict gam = s->gamma;
  const double *restrict rest = s->rest_now;
  double *restrict lam = s->lam_d;
  const uint32_t n = s->n_springs;
  const int damped = s->has_gamma;
  double res = 0;
  for (uint32_t j = 0; j < n; j++) {
    if (inv_den[j] == 0) continue;
    const uint32_t a = c[j].a, b = c[j].b;
    const double dx = x[a][0] - x[b][0], dy = x[a][1] - x[b][1], dz = x[a][2] - x[b][2];
    const double l2 = dx * dx + dy * dy + dz * dz;
    if (!(l2 > 1e-24)) continue; /* coincident ends have no direction */
    const double l = sqrt(l2), il = 1.0 / l;
    const double r = l - rest[j] + at[j] * lam[j]; /* C + alpha~ lambda */
    double num = -r;
    if (damped) { /* gamma grad C . (x - x_prev) */
      const double dv = dx * (x[a][0] - xp[a][0] - x[b][0] + xp[b][0]) +
                        dy * (x[a][1] - xp[a][1] - x[b][1] + xp[b][1]) +
                        dz * (x[a][2] - xp[a][2] - x[b][2] + xp[b][2]);
      num -= gam[j] * dv * il;
    }
    if (fabs(r) > res) res = fabs(r);
    const double dl = num * inv_den[j];
    lam[j] += dl;
    const double sa = im[a] * dl * il, sb = im[b] * dl * il;
    x[a][0] += sa * dx, x[a][1] += sa * dy, x[a][2] += sa * dz;
    x[b][0] -= sb * dx, x[b][1] -= sb * dy, x[b][2] -= sb * dz;
  }
  return res;
}

/* The XPBD update of a constraint over np nodes with value C, gradient g,
 * compliance alpha and multiplier *lam; bh = beta / h, the stiffness-
 * proportional damper's gamma. */
static void solve_general(ts_tissue *t, const double (*xp)[3], const uint32_t *idx, int np,
                          double C, double (*g)[3], double alpha, double *lam, double ih2,
                          double bh) {
  const double *im = t->inv_mass;
  double (*x)[3] = t->x;
  double wsum = 0, dv = 0;
  for (int i = 0; i < np; i++) {
    wsum += im[idx[i]] * dot3(g[i], g[i]);
    if (bh > 0)
      for (int k = 0; k < 3; k++) dv += g[i][k] * (x[idx[i]][k] - xp[idx[i]][k]);
  }
  if (!(wsum > 0)) return;
  const double at = alpha * ih2, gamma = alpha > 0 ? bh : 0.0;
  const double dl = (-C - at * *lam - gamma * dv) / ((1.0 + gamma) * wsum + at);
  *lam += dl;
  for (int i = 0; i < np; i++) {
    const double w = im[idx[i]] * dl;
    if (w == 0) continue;
    for (int k = 0; k < 3; k++) x[idx[i]][k] += w * g[i][k];
  }
}

static void sweep_bending(ts_xpbd *s, ts_tissue *t, double ih2, double bh) {
  const double (*xp)[3] = (const double (*)[3])s->x_prev;
  for (uint32_t j = 0; j < s->n_bend; j++) {
    const ts__bend *c = &s->bend[j];
    double p[4][3], g[4][3];
    for (int i = 0; i < 4; i++) memcpy(p[i], t->x[c->p[i]], sizeof p[i]);
    double th = ts_xpbd_dihedral((const double (*)[3])p, g);
    if (isnan(th)) continue;
    /* the angle difference on the circle, in (-pi, pi] */
    double C = remainder(th - c->theta0, 2.0 * TS__PI);
    solve_general(t, xp, c->p, 4, C, g, c->alpha, &s->lam_b[j], ih2, bh);
  }
}

static void sweep_volume(ts_xpbd *s, ts_tissue *t, double ih2, double bh) {
  const double (*xp)[3] = (const double (*)[3])s->x_prev;
  for (uint32_t j = 0; j < s->n_vol; j++) {
    const ts__vol *c = &s->vol[j];
    double p[6][3], g[6][3];
    for (int i = 0; i < 6; i++) memcpy(p[i], t->x[c->p[i]], sizeof p[i]);
    double C = ts_xpbd_prism_volume((const double (*)[3])p, g) - c->v0;
    solve_general(t, xp, c->p, 6, C, g, c->alpha, &s->lam_v[j], ih2, bh);
  }
}

/* Rigid, frictionless contact: lambda >= 0 pushes the node out along the
 * normal until it is on the tool's surface, and no further. */
static void sweep_contacts(ts_xpbd *s, ts_tissue *t, const ts__ptool *pt, const double *depth,
                           double wh) {
  double (*x)[3] = t->x;
  const double *im = t->inv_mass;
  for (uint32_t j = 0; j < s->n_contacts; j++) {
    ts__contact *c = &s->contacts[j];
    const ts__ptool *p = &pt[c->tool];
    const uint32_t i = c->node;
    double n[3];
    /* a refinement's contact allowance shrinks the tool for this node */
    const double C = core_distance(p, x[i], n) - (depth ? p->r - wh * depth[i] : p->r);
    double lam = c->lambda - C / im[i];
    if (lam < 0) lam = 0;
    const double dl = lam - c->lambda;
    c->lambda = lam;
    if (dl == 0) continue;
    memcpy(c->n, n, sizeof n);
    for (int k = 0; k < 3; k++) x[i][k] += im[i] * dl * n[k];
  }
}

/* ---- the step ---- */

/* Checks the tree-based tools and places each at its start pose. */
static int valid_posed(const ts_tissue *t, ts_aabb_tree *tree, ts_xpbd_tool *pt, int n) {
  if (n < 0 || n > TS__MAX_TOOLS || (n > 0 && (!pt || !tree))) return TS_EINVAL;
  if (n > 0 && tree->n_points != t->n_nodes) return TS_EINVAL;
  for (int i = 0; i < n; i++) {
    const ts_xpbd_tool *p = &pt[i];
    if (!p->posed || !p->posed->tree || !p->contact || !p->contact->v) return TS_EINVAL;
    if (p->contact->n_points != t->n_nodes) return TS_EINVAL;
    if (p->grasp && (!p->grasp->held || p->grasp->n_points != t->n_nodes)) return TS_EINVAL;
    int rc = ts_posed_tool_set_pose(pt[i].posed, &p->pose);
    if (!rc) rc = ts_posed_tool_set_pose(pt[i].posed, &p->prev);
    if (rc) return rc;
  }
  return 0;
}

/* Substep k of nsub of the tree-based tools: their poses over the substep,
 * candidates and grasps. Returns the candidates dropped. */
static uint32_t begin_posed(ts_tissue *t, ts_aabb_tree *tree, ts_xpbd_tool *pt, int n,
                            uint32_t k, uint32_t nsub) {
  uint32_t dropped = 0;
  if (n > 0) ts_aabb_tree_refit(tree, (const double (*)[3])t->x);
  for (int q = 0; q < n; q++) {
    ts_xpbd_tool *p = &pt[q];
    ts_pose a, b;
    ts_pose_lerp(&p->prev, &p->pose, (double)k / nsub, &a);
    ts_pose_lerp(&p->prev, &p->pose, (double)(k + 1) / nsub, &b);
    const uint8_t *skip = p->grasp ? ts_grasp_held(p->grasp) : NULL;
    ts_contact_begin(p->contact, p->posed, &a, &b, tree, t->inv_mass, skip);
    if (p->grasp) {
      const uint32_t before = p->grasp->n;
      ts_grasp_update(p->grasp, p->posed, p->contact, (const double (*)[3])t->x);
      ts_grasp_clear_impulses(p->grasp);
      if (p->grasp->n != before) /* newly held: not contact candidates too */
        ts_contact_begin(p->contact, p->posed, &a, &b, tree, t->inv_mass, skip);
    }
    dropped += p->contact->dropped;
  }
  return dropped;
}

static void sweep_posed(ts_xpbd *s, ts_tissue *t, ts_xpbd_tool *pt, int n, int sweep,
                        const double *hdepth, double wh) {
  for (int q = 0; q < n; q++) {
    ts_xpbd_tool *p = &pt[q];
    if (p->grasp) ts_grasp_project(p->grasp, p->posed, t->x, t->inv_mass);
    p->contact->allow = hdepth; /* a refinement's contact allowances */
    p->contact->allow_w = wh;
    ts_contact_project(p->contact, p->posed, t->x, (const double (*)[3])s->x_prev, t->inv_mass,
                       sweep);
  }
}

int ts_xpbd_step(ts_xpbd *s, ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                 ts_xpbd_stats *stats) {
  return ts_xpbd_step_posed(s, t, dt, tools, n_tools, NULL, NULL, 0, stats);
}

int ts_xpbd_step_posed(ts_xpbd *s, ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                       ts_aabb_tree *tree, ts_xpbd_tool *posed, int n_posed,
                       ts_xpbd_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (!s || !t || !t->x || !t->v || !t->inv_mass || !t->rest) return TS_EINVAL;
  if (t->n_nodes != s->n_nodes || t->n_springs != s->n_springs) return TS_EINVAL;
  if (!isfinite(dt)) return TS_ENAN;
  if (!(dt > 0) || dt > TS__MAX_DT) return TS_EINVAL;
  if (n_tools < 0 || n_tools > TS__MAX_TOOLS || (n_tools > 0 && !tools)) return TS_EINVAL;
  for (int k = 0; k < 3; k++)
    if (!isfinite(t->gravity[k])) return TS_ENAN;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (!(t->inv_mass[i] >= 0) || !isfinite(t->inv_mass[i])) return TS_EINVAL;
  for (int i = 0; i < n_tools; i++) {
    if (!tools[i].active) continue;
    int rc = valid_tool(&tools[i]);
    if (rc) return rc;
  }
  {
    int rc = valid_posed(t, tree, posed, n_posed);
    if (rc) return rc;
  }

  uint32_t nsub = s->def.substeps;
  const uint32_t nit = s->def.iterations;
  if (nsub == 0) {
    double n = ceil(dt * s->omega / TS__AUTO_H_OMEGA);
    if (!(n <= TS__MAX_SUB)) return TS_ERANGE; /* also catches NaN */
    nsub = n < 1 ? 1 : (uint32_t)n;
  }

  ts__ptool pt[TS__MAX_TOOLS];
  int np = 0;
  for (int i = 0; i < n_tools; i++) {
    ts_tool *tl = &tools[i];
    tl->force[0] = tl->force[1] = tl->force[2] = 0;
    tl->contacts = 0;
    ts__prev_tool *pv = &s->prev[i];
    if (!tl->active) {
      pv->valid = 0;
      continue;
    }
    ts__ptool *p = &pt[np++];
    memset(p, 0, sizeof *p);
    p->tool = tl;
    p->index = (uint32_t)i;
    p->r = tl->radius;
    ts_tool_segment(tl, p->a1, p->b1);
    if (pv->valid && pv->kind == tl->kind) {
      memcpy(p->a0, pv->a, sizeof p->a0);
      memcpy(p->b0, pv->b, sizeof p->b0);
    } else {
      memcpy(p->a0, p->a1, sizeof p->a0);
      memcpy(p->b0, p->b1, sizeof p->b0);
    }
    pv->valid = 1;
    pv->kind = tl->kind;
    memcpy(pv->a, p->a1, sizeof pv->a);
    memcpy(pv->b, p->b1, sizeof pv->b);
  }
  for (int i = n_tools; i < TS__MAX_TOOLS; i++) s->prev[i].valid = 0;
  for (int q = 0; q < n_posed; q++) {
    ts_xpbd_tool *p = &posed[q];
    memset(p->force, 0, sizeof p->force);
    memset(p->torque, 0, sizeof p->torque);
    p->contacts = 0;
    p->held = p->grasp ? p->grasp->n : 0;
  }

  const double h = dt / nsub, ih2 = 1.0 / (h * h);
  const double bh = s->def.stiffness_damping / h; /* gamma of a damper beta k */
  const double damp = 1.0 / (1.0 + s->def.damping * h);
  const double gx = t->gravity[0], gy = t->gravity[1], gz = t->gravity[2];
  const uint32_t nn = t->n_nodes;
  double (*restrict x)[3] = t->x;
  double (*restrict v)[3] = t->v;
  double (*restrict xp)[3] = s->x_prev;
  const double *restrict im = t->inv_mass;

  memset(s->sum_d, 0, sizeof *s->sum_d * s->n_springs);
  if (s->n_bend) memset(s->sum_b, 0, sizeof *s->sum_b * s->n_bend);
  if (s->n_vol) memset(s->sum_v, 0, sizeof *s->sum_v * s->n_vol);
  s->n_contact_out = 0;

  /* a refinement's hand-over (ts_handover.h), weighted at the middle of
   * the step: extra forces in the prediction, contact allowances */
  const double wh = ts_handover_weight(t->hand, t->time + 0.5 * dt);
  const double(*hf)[3] = wh > 0 ? (const double(*)[3])t->hand->f_res : NULL;
  const double *hdepth = wh > 0 ? t->hand->depth : NULL;
  if (wh > 0 || s->rest_blended) { /* the constraints' rest lengths, blended */
    const double *hr = wh > 0 ? t->hand->rest : NULL;
    for (uint32_t j = 0; j < s->n_springs; j++) {
      const uint32_t q = s->spring_of[j];
      const double L0 = t->springs[q].rest;
      s->dist[j].rest = hr ? L0 + wh * (hr[q] - L0) : L0;
    }
    s->rest_blended = wh > 0;
  }

  int bad = 0;
  uint32_t dropped = 0;
  double residual = 0;
  for (uint32_t k = 0; k < nsub && !bad; k++) {
    /* predict */
    for (uint32_t i = 0; i < nn; i++) {
      xp[i][0] = x[i][0], xp[i][1] = x[i][1], xp[i][2] = x[i][2];
      if (im[i] == 0) continue;
      v[i][0] += h * gx, v[i][1] += h * gy, v[i][2] += h * gz;
      if (hf) {
        const double hw = h * wh * im[i];
        v[i][0] += hw * hf[i][0], v[i][1] += hw * hf[i][1], v[i][2] += hw * hf[i][2];
      }
      x[i][0] += h * v[i][0], x[i][1] += h * v[i][1], x[i][2] += h * v[i][2];
    }
    for (int q = 0; q < np; q++) place_tool(&pt[q], (double)(k + 1) / nsub);
    s->n_contacts = np ? gather_contacts(s, t, pt, np, &dropped) : 0;
    dropped += begin_posed(t, tree, posed, n_posed, k, nsub);
    linearise_distance(s, t, h, s->def.stiffness_damping);

    /* solve */
    memset(s->lam_d, 0, sizeof *s->lam_d * s->n_springs);
    if (s->n_bend) memset(s->lam_b, 0, sizeof *s->lam_b * s->n_bend);
    if (s->n_vol) memset(s->lam_v, 0, sizeof *s->lam_v * s->n_vol);
    for (uint32_t it = 0; it < nit; it++) {
      residual = sweep_distance(s, t);
      if (s->n_bend) sweep_bending(s, t, ih2, bh);
      if (s->n_vol) sweep_volume(s, t, ih2, bh);
      if (s->n_contacts) sweep_contacts(s, t, pt, hdepth, wh);
      if (n_posed)
        sweep_posed(s, t, posed, n_posed, it == 0 ? TS_CONTACT_SWEEP : TS_CONTACT_SWEEP_THIN,
                    hdepth, wh);
    }

    /* velocities, damping, health */
    for (uint32_t i = 0; i < nn; i++) {
      if (im[i] == 0) continue;
      double vx = (x[i][0] - xp[i][0]) / h * damp;
      double vy = (x[i][1] - xp[i][1]) / h * damp;
      double vz = (x[i][2] - xp[i][2]) / h * damp;
      v[i][0] = vx, v[i][1] = vy, v[i][2] = vz;
      bad |= !(vx * vx + vy * vy + vz * vz <= TS__MAX_SPEED * TS__MAX_SPEED);
    }

    /* forces: multipliers summed over the substeps; contacts per tool */
    for (uint32_t j = 0; j < s->n_springs; j++) s->sum_d[j] += s->lam_d[j];
    for (uint32_t j = 0; j < s->n_bend; j++) s->sum_b[j] += s->lam_b[j];
    for (uint32_t j = 0; j < s->n_vol; j++) s->sum_v[j] += s->lam_v[j];
    int last = k + 1 == nsub;
    for (int q = 0; q < n_posed; q++) {
      ts_xpbd_tool *p = &posed[q];
      double f[3], tq[3], fg[3], tg[3];
      ts_contact_reaction(p->contact, (const double (*)[3])x, 1.0, f, tq);
      ts_grasp_reaction(p->grasp, (const double (*)[3])x, 1.0, fg, tg);
      for (int c = 0; c < 3; c++) {
        p->force[c] += f[c] + fg[c];
        p->torque[c] += tq[c] + tg[c];
      }
      if (last) {
        p->contacts = p->contact->touching;
        p->held = p->grasp ? p->grasp->n : 0;
      }
    }
    for (uint32_t j = 0; j < s->n_contacts; j++) {
      const ts__contact *c = &s->contacts[j];
      if (!(c->lambda > 0)) continue;
      ts__ptool *p = &pt[c->tool];
      for (int q = 0; q < 3; q++) p->force[q] -= c->lambda * c->n[q];
      if (last) {
        ts_xpbd_contact *o = &s->contact_out[s->n_contact_out++];
        o->node = c->node;
        o->tool = p->index;
        for (int q = 0; q < 3; q++) o->force[q] = -c->lambda * c->n[q] * ih2;
        p->tool->contacts++;
      }
    }
  }
  t->time += dt;
  t->steps++;
  ts_handover_expire(t, t->time);

  /* health and statistics */
  double vmax2 = 0, ke = 0;
  for (uint32_t i = 0; i < nn && !bad; i++) {
    double v2 = dot3(v[i], v[i]);
    if (!isfinite(x[i][0] + x[i][1] + x[i][2]) || !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED)) {
      bad = 1;
      break;
    }
    if (im[i] == 0) continue;
    if (v2 > vmax2) vmax2 = v2;
    ke += 0.5 * v2 / im[i];
  }
  if (bad) {
    ts_tissue_reset(t);
    memset(s->sum_d, 0, sizeof *s->sum_d * s->n_springs);
    memset(s->tension, 0, sizeof *s->tension * s->n_springs);
    if (s->n_bend) memset(s->sum_b, 0, sizeof *s->sum_b * s->n_bend);
    if (s->n_vol) memset(s->sum_v, 0, sizeof *s->sum_v * s->n_vol);
    s->n_contact_out = 0;
    s->force_scale = 0;
    for (int i = 0; i < TS__MAX_TOOLS; i++) s->prev[i].valid = 0;
    for (int q = 0; q < np; q++) pt[q].tool->contacts = 0;
    for (int q = 0; q < n_posed; q++) {
      memset(posed[q].force, 0, sizeof posed[q].force);
      memset(posed[q].torque, 0, sizeof posed[q].torque);
      posed[q].contacts = 0;
      if (posed[q].grasp) ts_grasp_release(posed[q].grasp);
      ts_contact_forget(posed[q].contact); /* the tissue is back at rest */
      posed[q].held = 0;
    }
    if (n_posed) ts_aabb_tree_rebuild(tree, (const double (*)[3])t->x);
    if (stats) {
      stats->substeps = nsub;
      stats->iterations = nit;
      stats->diverged = 1;
    }
    return TS_EDIVERGED;
  }

  /* mean forces over the substeps: lambda / h^2 each */
  s->force_scale = ih2 / nsub;
  for (uint32_t j = 0; j < s->n_springs; j++)
    s->tension[s->spring_of[j]] = -s->sum_d[j] * s->force_scale;
  uint32_t contacts = 0;
  for (int q = 0; q < np; q++) {
    for (int k = 0; k < 3; k++) pt[q].tool->force[k] = pt[q].force[k] * s->force_scale;
    contacts += pt[q].tool->contacts;
  }
  for (int q = 0; q < n_posed; q++) {
    for (int k = 0; k < 3; k++) {
      posed[q].force[k] *= s->force_scale;
      posed[q].torque[k] *= s->force_scale;
    }
    contacts += posed[q].contacts;
  }
  if (stats) {
    stats->substeps = nsub;
    stats->iterations = nit;
    stats->contacts = contacts;
    stats->contacts_dropped = dropped;
    stats->max_speed = sqrt(vmax2);
    stats->kinetic_energy = ke;
    stats->residual = residual;
  }
  return 0;
}
