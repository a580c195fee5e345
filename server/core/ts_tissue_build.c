/*
 * ts_tissue_build.c: turns a multi-layer extrusion (ts_extrude.h) into a
 * simulated tissue (ts_tissue.h): node masses, the springs of the first
 * method with constants from finite-element equivalence, Kelvin dampers,
 * anchors and the render surface.
 *
 * Springs (ts_spring.kind), for surface edges (i, j) and vertices j:
 *   EDGE        (s, i)-(s, j) for every sheet s: the triangle edges of each
 *               layer's faces;
 *   INTERLAYER  (l, j)-(l+1, j) for every slab l: corresponding nodes of
 *               adjacent sheets;
 *   SHEAR       both diagonals of every prism side face, (l, i)-(l+1, j)
 *               and (l, j)-(l+1, i). One diagonal per face would make each
 *               prism rigid already, but it couples in-plane stretch to
 *               transverse shear (a stretched face's diagonal relaxes when
 *               the top sheet slides over the bottom one), and that coupling
 *               cost up to half of the in-plane stiffness in the uniaxial
 *               test below (a crossed pair cancels it exactly).
 *
 * Spring constants. Each spring is a link element, k = E A / L with A = V/L,
 * V the volume of material attributed to it (k = E V / L^2, the form Van
 * Gelder derived for membranes: A. Van Gelder, "Approximate simulation of
 * elastic membranes by triangulated spring meshes", J. Graphics Tools
 * 3(2):21-42, 1998, where every triangle lends its whole area times the
 * thickness to each of its three edges). The volumes follow from the same
 * equivalence Van Gelder used, the strain energy under a uniform small strain
 * eps: springs store sum_s (1/2) E V_s (n_s . eps n_s)^2, a continuum
 * (1/2) eps : C : eps V. A network of springs can only represent C of the
 * form E sum_s V_s n_s n_s n_s n_s / V (Cauchy's relations: Poisson's ratio
 * 1/4 when isotropic); the isotropic one with Young's modulus E is
 *   Q = sum_s V_s n_s^4 = (2V/5) (d_ij d_kl + d_ik d_jl + d_il d_jk),
 * i.e. the springs carry six times the volume in all (M. Ostoja-Starzewski,
 * "Lattice models in micromechanics", Appl. Mech. Rev. 55(1):35-60, 2002;
 * Van Gelder's membrane rule is the 2D case, three times the area). Each
 * prism (volume v, thickness t, mid-surface edges of length l_k, local frame
 * with the normal along the extrusion) distributes its v over its springs
 * to approach that Q:
 *   - side diagonals take a fraction alpha of the in-plane part of Q, half
 *     to each of a face's pair: V_k = (8 alpha / 15) v (L_k / l_k)^4,
 *     l_k the in-plane part of the diagonal. They alone give transverse
 *     shear (Q_1n1n), which a thin slab can get only with far too much
 *     in-plane stiffness, so alpha = min(1/2, l^2 / (4 t^2), (3/8) (l/t)^4)
 *     keeps transverse shear and through-thickness stiffness at or below the
 *     isotropic value (exactly the bounds for an equilateral prism); in a
 *     skewed prism l_k counts as at least half the triangle's root-mean-square
 *     edge, so a
 *     diagonal running nearly along the extrusion does not become
 *     arbitrarily stiff;
 *   - the edges of the top and bottom faces share the rest of the in-plane
 *     part (half each): three V_k >= 0 fitted to it (inplane_fit: exact in
 *     the isotropic invariant, then as close as the triangle allows in its
 *     4-theta anisotropy). For an equilateral triangle this is Van Gelder's
 *     rule times 16/15 (1 - alpha);
 *   - the three INTERLAYER springs share what the diagonals leave of Q_nnnn
 *     (at least a quarter of it).
 * Springs shared by prisms add their shares. The result: in-plane and
 * through-thickness Young's moduli close to E whatever the mesh's aspect
 * ratios (tests/unit/test_mechanics.c measures the uniaxial modulus of
 * extruded blocks), transverse shear softer than an isotropic solid's in
 * thin slabs (so the patch bends more easily than a continuum of the same
 * moduli). Every term is floored at 5 % of v so no spring of a prism is left
 * without stiffness.
 *
 * Materials. A spring's volume share from a slab is made of that slab's
 * layer: with its fibre weights (ts_fibre_weights, the fibre projected onto
 * the tangent plane normal to the extrusion direction) it gives the terms
 * cos(theta) V a_a b_a / L^2 with exponent b_a and sin(theta) V a_r b_r / L^2
 * with b_r (ts_material.h). An EDGE spring of a sheet between two slabs gets
 * the terms of both layers; terms with equal exponents merge, and when more
 * than two remain the spring is split into one spring per layer (same ends),
 * so every layer keeps its own law. A spring's strain range is the narrowest
 * of its layers'. Kelvin dampers: c = 2 zeta sqrt(k mu), k the small-strain
 * constant, mu the reduced mass of the two ends (the free end's mass when
 * the other is anchored), zeta the k-weighted damping ratio of its layers.
 * Node masses: density times a sixth of the volume of every prism on the
 * node (the linear wedge's volume, ts_prism_check). Nodes without mass
 * (unused vertices) are anchored. A prism ts_prism_check refuses is refused
 * here too (TS_EMESH), so whatever the extrusion accepts builds.
 */
#include "ts_tissue.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_tissue_build_internal.h"

/* Largest tissue built: 4 Mi nodes. */
#define TS__BUILD_MAX_NODES (1u << 22)
#define TS__SHARE_FLOOR 0.05
#define TS__DIAG_MIN_INPLANE 0.5

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
static double norm3(const double a[3]) { return sqrt(dot3(a, a)); }

int ts__spring_sink_alloc(uint32_t L, uint32_t nv, uint32_t E, ts_spring **out, uint32_t *cap) {
  *out = NULL;
  *cap = 0;
  uint64_t cap64 = (uint64_t)(L + 1) * E * 2 + (uint64_t)L * nv + (uint64_t)L * E * 2;
  if (cap64 > UINT32_MAX / 2) return TS_ETOOBIG;
  *out = malloc(sizeof **out * (size_t)(cap64 ? cap64 : 1));
  if (!*out) return TS_ENOMEM;
  *cap = (uint32_t)cap64;
  return 0;
}

int ts__cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* ---- the in-plane least-squares fit ---- */

/* Solves the m x m system G y = r (m <= 3) by Gaussian elimination with
 * partial pivoting; returns -1 when singular. */
static int solve_small(int m, double G[3][3], double r[3], double y[3]) {
  double A[3][4];
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < m; j++) A[i][j] = G[i][j];
    A[i][m] = r[i];
  }
  double scale = 0;
  for (int i = 0; i < m; i++) scale = fmax(scale, fabs(A[i][i]));
  for (int c = 0; c < m; c++) {
    int p = c;
    for (int i = c + 1; i < m; i++)
      if (fabs(A[i][c]) > fabs(A[p][c])) p = i;
    if (!(fabs(A[p][c]) > 1e-12 * scale)) return -1;
    if (p != c)
      for (int j = 0; j <= m; j++) {
        double tmp = A[c][j];
        A[c][j] = A[p][j];
        A[p][j] = tmp;
      }
    for (int i = c + 1; i < m; i++) {
      double q = A[i][c] / A[c][c];
      for (int j = c; j <= m; j++) A[i][j] -= q * A[c][j];
    }
  }
  for (int i = m - 1; i >= 0; i--) {
    double s = A[i][m];
    for (int j = i + 1; j < m; j++) s -= A[i][j] * y[j];
    y[i] = s / A[i][i];
  }
  return 0;
}

/* Non-negative V[3] for the in-plane edges of one triangle, unit in-plane
 * directions (cs[k][0], cs[k][1]), such that sum_k V_k n_k^4 fits the
 * target R, given as its five in-plane components (1111, 2222, 1122, 1112,
 * 1222). The fit is least squares in the harmonic basis of a 2D fully
 * symmetric fourth-order tensor: the isotropic invariant (1111 + 2222 +
 * 2 1122), the cos/sin 4 theta part and the cos/sin 2 theta part, weighted
 * 1e4 : 1e2 : 1 so that the invariant is met first, then the 4-theta
 * anisotropy, which does not cancel between neighbouring triangles (a grid of
 * right triangles is stiffer along its legs than along its diagonals, 28 %
 * with Van Gelder's equal shares), and the 2-theta part last, which mostly
 * does (a right triangle's hypotenuse leans one way, its neighbour's the
 * other). Every active set is tried; the best non-negative one wins. For an
 * equilateral triangle the result is Van Gelder's equal shares. */
static void inplane_fit(const double cs[3][2], const double R[5], double V[3]) {
  double w[5] = {1e4, 1e2, 1e2, 1, 1};
  double Rh[5] = {R[0] + R[1] + 2 * R[2], R[0] + R[1] - 6 * R[2], 4 * (R[3] - R[4]), R[0] - R[1],
                  2 * (R[3] + R[4])};
  double phi[3][5];
  for (int k = 0; k < 3; k++) {
    double c = cs[k][0], s = cs[k][1];
    double c2 = c * c - s * s, s2 = 2 * c * s;
    phi[k][0] = 1;
    phi[k][1] = c2 * c2 - s2 * s2;
    phi[k][2] = 2 * c2 * s2;
    phi[k][3] = c2;
    phi[k][4] = s2;
  }
  double best = INFINITY;
  V[0] = V[1] = V[2] = 0;
  for (int mask = 1; mask < 8; mask++) {
    int idx[3], m = 0;
    for (int k = 0; k < 3; k++)
      if (mask & (1 << k)) idx[m++] = k;
    double G[3][3], r[3], y[3];
    for (int i = 0; i < m; i++) {
      r[i] = 0;
      for (int c = 0; c < 5; c++) r[i] += w[c] * phi[idx[i]][c] * Rh[c];
      for (int j = 0; j < m; j++) {
        G[i][j] = 0;
        for (int c = 0; c < 5; c++) G[i][j] += w[c] * phi[idx[i]][c] * phi[idx[j]][c];
      }
    }
    if (solve_small(m, G, r, y)) continue;
    int ok = 1;
    for (int i = 0; i < m; i++) ok &= y[i] >= 0;
    if (!ok) continue;
    double res = 0;
    for (int c = 0; c < 5; c++) {
      double s = -Rh[c];
      for (int i = 0; i < m; i++) s += y[i] * phi[idx[i]][c];
      res += w[c] * s * s;
    }
    if (res < best) {
      best = res;
      V[0] = V[1] = V[2] = 0;
      for (int i = 0; i < m; i++) V[idx[i]] = y[i];
    }
  }
}

/* ---- one prism's shares ---- */

/* P: top nodes, Q: bottom nodes (triangle order). Returns -1 for a prism
 * ts_prism_check refuses (the same test the extrusion counts inverted
 * prisms with, so an extrusion without any builds). */
int ts__prism_shares(const double P[3][3], const double Q[3][3], ts__prism_share *o) {
  double v;
  if (ts_prism_check(P, Q, &v, NULL)) return -1;
  o->volume = v;

  /* local frame: normal along the mean extrusion vector */
  double n[3] = {0, 0, 0}, M[3][3];
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 3; c++) {
      n[c] += Q[k][c] - P[k][c];
      M[k][c] = 0.5 * (P[k][c] + Q[k][c]);
    }
  double nl = norm3(n);
  if (!(nl > 0)) return -1;
  for (int c = 0; c < 3; c++) n[c] /= nl;
  double e1[3], e2[3], u[3];
  sub3(M[1], M[0], u);
  double un = dot3(u, n);
  for (int c = 0; c < 3; c++) e1[c] = u[c] - un * n[c];
  double e1l = norm3(e1);
  if (!(e1l > 0)) return -1;
  for (int c = 0; c < 3; c++) e1[c] /= e1l;
  cross3(n, e1, e2);

  /* mid-surface edges in the plane, and the thickness v / area */
  double cs[3][2], l2sum = 0, uv[3][2];
  for (int k = 0; k < 3; k++) {
    double d[3];
    sub3(M[(k + 1) % 3], M[k], d);
    uv[k][0] = dot3(d, e1);
    uv[k][1] = dot3(d, e2);
    double l = hypot(uv[k][0], uv[k][1]);
    if (!(l > 0)) return -1;
    cs[k][0] = uv[k][0] / l;
    cs[k][1] = uv[k][1] / l;
    l2sum += l * l;
  }
  double area = 0.5 * fabs(uv[0][0] * uv[1][1] - uv[0][1] * uv[1][0]);
  if (!(area > 0)) return -1;
  double t = v / area, r2 = (l2sum / 3.0) / (t * t); /* (l / t)^2 */
  double lmean = sqrt(l2sum / 3.0);
  double alpha = fmin(0.5, fmin(0.25 * r2, 0.375 * r2 * r2));
  double cd = 16.0 * alpha / 15.0 * v;

  /* targets: the in-plane components (1111, 2222, 1122, 1112, 1222) and
   * nnnn of the isotropic Q, less what the diagonals take */
  double R[5] = {1.2 * v, 1.2 * v, 0.4 * v, 0, 0};
  double Rn = 1.2 * v;
  for (int k = 0; k < 3; k++) {
    for (int fl = 0; fl < 2; fl++) {
      const double *a = fl ? P[(k + 1) % 3] : P[k];
      const double *b = fl ? Q[k] : Q[(k + 1) % 3];
      double D[3];
      sub3(b, a, D);
      double dn = dot3(D, n), d1 = dot3(D, e1), d2 = dot3(D, e2);
      double lp = hypot(d1, d2), L = norm3(D);
      double share = 0.5 * cd;
      double *dst = &o->diag[k][fl];
      if (!(lp > 1e-9 * L)) {
        *dst = 0;
        continue;
      }
      /* a skewed prism's diagonal can run nearly along the extrusion (its
       * in-plane part far shorter than the edge it spans): the in-plane
       * share then asks for a huge volume, a spring stiff enough to set
       * the substep, for what the face edges can carry as well; the
       * in-plane part counts as at least TS__DIAG_MIN_INPLANE of the
       * triangle's root-mean-square edge (regular prisms, whose diagonals
       * span a whole edge, are unaffected) and the diagonal takes
       * correspondingly less of the in-plane target */
      double lpe = fmax(lp, TS__DIAG_MIN_INPLANE * lmean);
      double q = L / lpe, r = lp / lpe, w = share * r * r * r * r;
      *dst = share * q * q * q * q;
      double c = d1 / lp, s = d2 / lp, tn = dn / lp;
      R[0] -= w * c * c * c * c;
      R[1] -= w * s * s * s * s;
      R[2] -= w * c * c * s * s;
      R[3] -= w * c * c * c * s;
      R[4] -= w * c * s * s * s;
      Rn -= w * tn * tn * tn * tn;
    }
  }
  inplane_fit(cs, R, o->face);

  for (int k = 0; k < 3; k++) {
    o->face[k] = fmax(o->face[k], TS__SHARE_FLOOR * v);
    o->diag[k][0] = fmax(o->diag[k][0], 0.5 * TS__SHARE_FLOOR * v);
    o->diag[k][1] = fmax(o->diag[k][1], 0.5 * TS__SHARE_FLOOR * v);
  }
  o->vert = fmax(Rn, 0.3 * v); /* a quarter of 1.2 v at least */
  return 0;
}

void ts__build_add_prism(const uint32_t tr[3], const uint32_t te[3], const ts__prism_share *ps,
                         double *face_l, double *diag_l, double *vert_l) {
  for (int k = 0; k < 3; k++) {
    size_t ei = te[k];
    face_l[2 * ei + 0] += 0.5 * ps->face[k];
    face_l[2 * ei + 1] += 0.5 * ps->face[k];
    int a_slot = tr[k] < tr[(k + 1) % 3] ? 0 : 1; /* P[k]-Q[k+1] is (l, lo)-(l+1, hi) */
    diag_l[2 * ei + a_slot] += ps->diag[k][0];
    diag_l[2 * ei + !a_slot] += ps->diag[k][1];
    vert_l[tr[k]] += ps->vert / 3.0;
  }
}

/* ---- spring assembly ---- */

/* The terms one layer's share gives a spring of direction dir (length L). */
static int layer_terms(const ts_layer *ly, double V, double L, const double dir[3],
                       const double normal[3], double k[2], double b[2]) {
  double wa, wr;
  ts_fibre_weights(dir, ly->fibre, normal, &wa, &wr);
  double g = V / (L * L); /* A / L */
  int n = 0;
  double ka = wa * g * ly->axial.a * ly->axial.b, kr = wr * g * ly->radial.a * ly->radial.b;
  if (ka > 0) k[n] = ka, b[n] = ly->axial.b, n++;
  if (kr > 0) {
    if (n == 1 && b[0] == ly->radial.b)
      k[0] += kr;
    else
      k[n] = kr, b[n] = ly->radial.b, n++;
  }
  return n;
}

static double reduced_mass(const ts__spring_sink *sk, uint32_t a, uint32_t b) {
  int fa = sk->free_node[a], fb = sk->free_node[b];
  double ma = sk->mass[a], mb = sk->mass[b];
  return fa && fb ? ma * mb / (ma + mb) : fa ? ma : fb ? mb : 0.0;
}

/* Emits the spring(s) between nodes a and b made of the given shares. */
int ts__build_emit(ts__spring_sink *sk, uint32_t a, uint32_t b, const ts__contrib *cb, int ncb,
                   uint8_t kind) {
  double dir[3];
  sub3(sk->x[b], sk->x[a], dir);
  double L = norm3(dir);
  if (!(L > 0)) return -1;
  double nrm[3];
  const double *na = sk->normal[a % sk->nv], *nb = sk->normal[b % sk->nv];
  for (int c = 0; c < 3; c++) nrm[c] = na[c] + nb[c];

  double k[2 * 2 * 2], bb[2 * 2 * 2], lk[2] = {0, 0};
  int nt[2], total = 0;
  for (int i = 0; i < ncb; i++) {
    nt[i] = layer_terms(&sk->layers[cb[i].layer], cb[i].volume, L, dir, nrm, k + 2 * i,
                        bb + 2 * i);
    for (int j = 0; j < nt[i]; j++) lk[i] += k[2 * i + j];
  }
  /* merge equal exponents across the contributions */
  double mk[4], mb[4];
  int nm = 0;
  for (int i = 0; i < ncb; i++)
    for (int j = 0; j < nt[i]; j++) {
      int f = -1;
      for (int m = 0; m < nm; m++)
        if (mb[m] == bb[2 * i + j]) f = m;
      if (f >= 0)
        mk[f] += k[2 * i + j];
      else
        mk[nm] = k[2 * i + j], mb[nm] = bb[2 * i + j], nm++;
    }
  (void)total;
  int groups = nm <= 2 ? 1 : ncb;
  double mu = reduced_mass(sk, a, b);
  for (int g = 0; g < groups; g++) {
    if (sk->n >= sk->cap) return -1;
    ts_spring *s = &sk->s[sk->n];
    memset(s, 0, sizeof *s);
    s->a = a < b ? a : b;
    s->b = a < b ? b : a;
    s->rest = L;
    s->kind = kind;
    int from = groups == 1 ? 0 : g, to = groups == 1 ? ncb : g + 1;
    if (groups == 1) {
      s->k1 = nm > 0 ? mk[0] : 0, s->b1 = nm > 0 ? mb[0] : 0;
      s->k2 = nm > 1 ? mk[1] : 0, s->b2 = nm > 1 ? mb[1] : 0;
    } else {
      s->k1 = nt[g] > 0 ? k[2 * g] : 0, s->b1 = nt[g] > 0 ? bb[2 * g] : 0;
      s->k2 = nt[g] > 1 ? k[2 * g + 1] : 0, s->b2 = nt[g] > 1 ? bb[2 * g + 1] : 0;
    }
    if (s->k2 > 0 && s->k1 == 0) { /* keep the first term the used one */
      s->k1 = s->k2, s->b1 = s->b2, s->k2 = 0, s->b2 = 0;
    }
    s->k = s->k1 + s->k2;
    double kz = 0, kl = 0, smin = -1e300, smax = 1e300;
    uint32_t layer = cb[from].layer;
    double best = -1;
    for (int i = from; i < to; i++) {
      const ts_layer *ly = &sk->layers[cb[i].layer];
      kz += lk[i] * ly->damping_ratio;
      kl += lk[i];
      smin = fmax(smin, ly->strain_min);
      smax = fmin(smax, ly->strain_max);
      if (lk[i] > best) best = lk[i], layer = cb[i].layer;
    }
    double zeta = kl > 0 ? kz / kl : sk->layers[layer].damping_ratio;
    s->c = 2.0 * zeta * sqrt(s->k * mu);
    s->strain_min = smin;
    s->strain_max = smax;
    s->layer = (uint8_t)layer;
    sk->n++;
  }
  return 0;
}

/* ---- validation ---- */

static int check_extrusion(const ts_extrusion *e) {
  if (e->n_layers < 1 || e->n_layers > TS_MAX_LAYERS || e->n_sheets != e->n_layers + 1)
    return TS_EINVAL;
  if (e->nv < 3 || e->n_surface_tris < 1 || !e->x || !e->surface_tris) return TS_EINVAL;
  if ((uint64_t)e->n_sheets * e->nv > TS__BUILD_MAX_NODES) return TS_ETOOBIG;
  if (e->n_tris > 0 && !e->tris) return TS_EINVAL;
  if (e->n_groups != e->n_layers) return TS_EINVAL;
  uint64_t sum = 0;
  for (uint32_t g = 0; g < e->n_groups; g++) sum += e->group_tri_count[g];
  if (sum != e->n_tris) return TS_EINVAL;
  if (e->n_inverted) return TS_EMESH;
  uint64_t nodes = (uint64_t)e->n_sheets * e->nv;
  for (uint64_t i = 0; i < nodes; i++)
    for (int c = 0; c < 3; c++)
      if (!isfinite(e->x[i][c]) || fabs(e->x[i][c]) > 1e3) return TS_EMESH;
  for (uint32_t i = 0; i < e->n_surface_tris; i++) {
    const uint32_t *t = e->surface_tris[i];
    if (t[0] >= e->nv || t[1] >= e->nv || t[2] >= e->nv) return TS_EMESH;
    if (t[0] == t[1] || t[1] == t[2] || t[0] == t[2]) return TS_EMESH;
  }
  for (uint32_t i = 0; i < e->n_tris; i++)
    for (int c = 0; c < 3; c++)
      if (e->tris[i][c] >= nodes) return TS_EMESH;
  return 0;
}

/* ---- builder ---- */

/* Whether *stop (NULL: never) asks the build to stop (ts_tissue.stop). */
static int build_stop(const atomic_int *stop) {
  return stop && atomic_load_explicit(stop, memory_order_relaxed);
}

/* The builder; prepare: ts_massspring_prepare the tissue before returning
 * it (ts_tissue_build) or not (ts_tissue_build_unprepared, which looks at
 * stop between its passes: TS_ESHUTDOWN). */
static int tissue_build(const ts_extrusion *e, const ts_layer *layers, const uint8_t *anchored,
                        const double gravity[3], int prepare, const atomic_int *stop,
                        ts_tissue **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!e || !layers) return TS_EINVAL;
  int rc = check_extrusion(e);
  if (rc) return rc;
  for (uint32_t l = 0; l < e->n_layers; l++)
    if (ts_layer_validate(&layers[l])) return TS_EINVAL;
  if (gravity)
    for (int c = 0; c < 3; c++)
      if (!isfinite(gravity[c]) || fabs(gravity[c]) > 1e3) return TS_EINVAL;

  const uint32_t L = e->n_layers, S = e->n_sheets, nv = e->nv, NT = e->n_surface_tris;
  const uint32_t n_nodes = S * nv;
  const double (*x)[3] = (const double (*)[3])e->x;

  uint64_t *keys = malloc(sizeof *keys * 3 * (size_t)NT);
  uint32_t (*tri_edge)[3] = malloc(sizeof *tri_edge * NT);
  double (*normal)[3] = calloc(nv, sizeof *normal);
  double *mass = calloc(n_nodes, sizeof *mass);
  uint8_t *free_node = calloc(n_nodes, 1);
  double *face = NULL, *diag = NULL, *vert = NULL;
  ts_spring *springs = NULL;
  ts_tissue *t = NULL;
  if (!keys || !tri_edge || !normal || !mass || !free_node) {
    rc = TS_ENOMEM;
    goto done;
  }

  /* unique edges, and each triangle's three */
  for (uint32_t i = 0; i < NT; i++)
    for (int k = 0; k < 3; k++) {
      uint32_t p = e->surface_tris[i][k], q = e->surface_tris[i][(k + 1) % 3];
      keys[3 * (size_t)i + k] = p < q ? (uint64_t)p << 32 | q : (uint64_t)q << 32 | p;
    }
  qsort(keys, 3 * (size_t)NT, sizeof *keys, ts__cmp_u64);
  uint32_t E = 0;
  for (size_t i = 0; i < 3 * (size_t)NT; i++)
    if (i == 0 || keys[i] != keys[E - 1]) keys[E++] = keys[i];
  for (uint32_t i = 0; i < NT; i++)
    for (int k = 0; k < 3; k++) {
      uint32_t p = e->surface_tris[i][k], q = e->surface_tris[i][(k + 1) % 3];
      uint64_t key = p < q ? (uint64_t)p << 32 | q : (uint64_t)q << 32 | p;
      const uint64_t *hit = bsearch(&key, keys, E, sizeof *keys, ts__cmp_u64);
      tri_edge[i][k] = (uint32_t)(hit - keys);
    }

  /* extrusion direction per surface vertex (for the fibre's tangent plane) */
  for (uint32_t j = 0; j < nv; j++) {
    double d[3];
    sub3(x[nv + j], x[j], d);
    double l = norm3(d);
    if (l > 0)
      for (int c = 0; c < 3; c++) normal[j][c] = d[c] / l;
  }

  face = calloc((size_t)L * E * 2, sizeof *face); /* [l][e][0 top, 1 bottom] */
  diag = calloc((size_t)L * E * 2, sizeof *diag); /* [l][e][0: (l,lo)-(l+1,hi), 1: (l,hi)-(l+1,lo)] */
  vert = calloc((size_t)L * nv, sizeof *vert);
  if (!face || !diag || !vert) {
    rc = TS_ENOMEM;
    goto done;
  }

  /* prisms: masses and volume shares */
  for (uint32_t l = 0; l < L; l++) {
    if (build_stop(stop)) {
      rc = TS_ESHUTDOWN;
      goto done;
    }
    for (uint32_t i = 0; i < NT; i++) {
      const uint32_t *tr = e->surface_tris[i];
      double P[3][3], Q[3][3];
      for (int k = 0; k < 3; k++) {
        memcpy(P[k], x[l * nv + tr[k]], sizeof P[k]);
        memcpy(Q[k], x[(l + 1) * nv + tr[k]], sizeof Q[k]);
      }
      ts__prism_share ps;
      if (ts__prism_shares((const double (*)[3])P, (const double (*)[3])Q, &ps)) {
        rc = TS_EMESH;
        goto done;
      }
      double dm = layers[l].density * ps.volume / 6.0;
      for (int k = 0; k < 3; k++) {
        mass[l * nv + tr[k]] += dm;
        mass[(l + 1) * nv + tr[k]] += dm;
      }
      ts__build_add_prism(tr, tri_edge[i], &ps, face + 2 * (size_t)l * E, diag + 2 * (size_t)l * E,
                          vert + (size_t)l * nv);
    }
  }
  for (uint32_t i = 0; i < n_nodes; i++)
    free_node[i] = mass[i] > 0 && !(anchored && anchored[i]);

  /* springs */
  uint32_t cap = 0;
  rc = ts__spring_sink_alloc(L, nv, E, &springs, &cap);
  if (rc) goto done;
  ts__spring_sink sk = {springs, 0, cap, x, (const double (*)[3])normal, nv,
                    layers, mass, free_node};
  for (uint32_t s = 0; s < S; s++) {
    if (build_stop(stop)) { /* a sheet's springs: 0.7 s on a 1,048,576-node patch */
      rc = TS_ESHUTDOWN;
      goto done;
    }
    for (uint32_t ei = 0; ei < E; ei++) {
      uint32_t p = (uint32_t)(keys[ei] >> 32), q = (uint32_t)keys[ei];
      ts__contrib cb[2];
      int n = 0;
      if (s > 0 && face[2 * ((size_t)(s - 1) * E + ei) + 1] > 0)
        cb[n++] = (ts__contrib){s - 1, face[2 * ((size_t)(s - 1) * E + ei) + 1]};
      if (s < L && face[2 * ((size_t)s * E + ei) + 0] > 0)
        cb[n++] = (ts__contrib){s, face[2 * ((size_t)s * E + ei) + 0]};
      if (n && ts__build_emit(&sk, s * nv + p, s * nv + q, cb, n, TS_SPRING_EDGE)) {
        rc = TS_EMESH;
        goto done;
      }
    }
    if (s == L) break;
    for (uint32_t j = 0; j < nv; j++) {
      double V = vert[(size_t)s * nv + j];
      if (!(V > 0)) continue; /* a vertex of no triangle */
      ts__contrib cb = {s, V};
      if (ts__build_emit(&sk, s * nv + j, (s + 1) * nv + j, &cb, 1, TS_SPRING_INTERLAYER)) {
        rc = TS_EMESH;
        goto done;
      }
    }
    for (uint32_t ei = 0; ei < E; ei++) {
      uint32_t p = (uint32_t)(keys[ei] >> 32), q = (uint32_t)keys[ei];
      for (int fl = 0; fl < 2; fl++) {
        double V = diag[2 * ((size_t)s * E + ei) + fl];
        if (!(V > 0)) continue;
        uint32_t a = s * nv + (fl ? q : p), b = (s + 1) * nv + (fl ? p : q);
        ts__contrib cb = {s, V};
        if (ts__build_emit(&sk, a, b, &cb, 1, TS_SPRING_SHEAR)) {
          rc = TS_EMESH;
          goto done;
        }
      }
    }
  }

  rc = ts_tissue_alloc(n_nodes, 0, e->n_tris, &t);
  if (rc) goto done;
  /* the sink's array becomes the tissue's, trimmed to its springs, instead
   * of a copy: on a 1,048,576-node patch the copy into a fresh array took
   * 3 s, nearly all of it the new pages' first touch */
  ts_spring *trimmed = realloc(springs, sizeof *springs * (sk.n ? sk.n : 1));
  if (trimmed) springs = trimmed;
  free(t->springs);
  t->springs = springs;
  t->n_springs = sk.n;
  springs = NULL;
  memcpy(t->rest, x, sizeof *t->rest * n_nodes);
  memcpy(t->x, x, sizeof *t->x * n_nodes);
  memcpy(t->x_prev, x, sizeof *t->x_prev * n_nodes);
  for (uint32_t i = 0; i < n_nodes; i++) t->inv_mass[i] = free_node[i] ? 1.0 / mass[i] : 0.0;
  if (e->n_tris) memcpy(t->tris, e->tris, sizeof *t->tris * e->n_tris);
  rc = ts_tissue_set_contact_extrusion(t, e, NULL);
  if (rc) goto done;
  t->n_layers = L;
  t->n_sheets = S;
  t->nodes_per_sheet = nv;
  for (uint32_t l = 0; l < L; l++) {
    t->layers[l] = layers[l];
    t->layers[l].young = layers[l].axial.a * layers[l].axial.b;
    t->layer_tri_count[l] = e->group_tri_count[l];
    memcpy(t->render_group_name[l], layers[l].name, TS_NAME_MAX);
    t->render_group_name[l][TS_NAME_MAX - 1] = 0;
  }
  t->n_render_groups = L;
  if (gravity)
    for (int c = 0; c < 3; c++) t->gravity[c] = gravity[c];
  t->mass_scaling = 1;
  t->local_mass_scaling = 1;
  rc = ts_tissue_set_columns(t, nv, NULL); /* column j: extrusion node j's line, the identity */
  if (!rc && prepare) rc = ts_massspring_prepare(t);

done:
  free(keys);
  free(tri_edge);
  free(normal);
  free(mass);
  free(free_node);
  free(face);
  free(diag);
  free(vert);
  free(springs);
  if (rc) {
    ts_tissue_destroy(t);
    return rc;
  }
  *out = t;
  return 0;
}

int ts_tissue_build(const ts_extrusion *e, const ts_layer *layers, const uint8_t *anchored,
                    const double gravity[3], ts_tissue **out) {
  return tissue_build(e, layers, anchored, gravity, 1, NULL, out);
}

int ts_tissue_build_unprepared(const ts_extrusion *e, const ts_layer *layers,
                               const uint8_t *anchored, const double gravity[3],
                               const atomic_int *stop, ts_tissue **out) {
  return tissue_build(e, layers, anchored, gravity, 0, stop, out);
}
