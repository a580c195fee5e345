/*
 * test_qstatic_refine.c: the quasi-static solve on the contact region copied
 * and refined by longest-edge bisection (ts_qstatic_refine.h; issues 4 and
 * 6), on patch-S (resolution 50, as the benchmarks and test_learn.c).
 *
 *   - the refined copy is conforming and manifold, has no degenerate
 *     triangle, every edge inside the range is at most max_edge, and its
 *     rim (nodes and edges) is the tissue's own;
 *   - without refinement (max_edge = INFINITY) the solve with the old step
 *     (one alpha) equals ts_qstatic_solve_region on the same press, and
 *     the default per-node step (block Jacobi) lands on the same
 *     equilibrium within STEP_TOL;
 *   - on a refined press, the per-node step and the old step agree within
 *     STEP_TOL, the per-node step in fewer sweeps;
 *   - a uniform stretch of the refined copy gives the same total reaction
 *     as the unrefined copy (1 %);
 *   - a fixed press solved at max_edge = h, h/2, h/4: the displacement under
 *     the press converges (differences shrink; the observed order printed);
 *   - the learner trained on refined-solve samples: gradient descent meets
 *     the closed form within 1e-6; the held-out RMS error is printed.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch_fixture.h"
#include "test_util.h"
#include "ts_error.h"
#include "ts_learn.h"
#include "ts_qstatic.h"
#include "ts_qstatic_refine.h"
#include "ts_region.h"
#include "ts_tissue.h"

#define PRESS_RADIUS 0.003 /* m: the outer-sheet nodes the tool holds */
/* m: how far the per-node step's solution may lie from the old step's on the
 * same press. Both stop at max |R| < tol (1e-4 of the heaviest node's
 * weight, 6.6e-9 N here), so each lies within about tol / (the softest
 * mode's stiffness) of the equilibrium, not at the same point; 10 nm is
 * 1e-5 of the 1 mm presses and a fifteenth of the smallest error the
 * learned models are judged by against the solve (spread2's held-out RMS on
 * patch-S, 0.15 um in bench_learn), and over 3 x the largest difference
 * measured here (2.8e-9 m, the refined press) */
#define STEP_TOL 1e-8
#define PRESS_DEPTH 0.0015 /* m */

typedef struct fixture {
  ts_tissue *t;
  ts_qstatic *q;
  double (*x)[3];
} fixture;

static void fixture_init(fixture *f, int gravity) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50; /* patch-S */
  if (!gravity) memset(d.gravity, 0, sizeof d.gravity);
  ck_assert_int_eq(ts_patch_create(&d, &f->t), 0);
  ts_qstatic_params p = ts_qstatic_default_params(f->t);
  if (!gravity) p.tol = 1e-7; /* N: no weight to scale it by; 1e-3 of a spring's force
                                 under the 1e-3 stretch below */
  ck_assert_int_eq(ts_qstatic_create(f->t, &p, &f->q), 0);
  f->x = malloc(sizeof *f->x * f->t->n_nodes);
  ck_assert_ptr_nonnull(f->x);
  memcpy(f->x, f->t->rest, sizeof *f->x * f->t->n_nodes);
}

static void fixture_free(fixture *f) {
  free(f->x);
  ts_qstatic_destroy(f->q);
  ts_tissue_destroy(f->t);
}

/* The outer-sheet node nearest (px, pz) at rest. */
static uint32_t surface_node(const fixture *f, double px, double pz) {
  return fx_surface_node(f->t, px, pz);
}

/* A press at the outer node c: the outer nodes within PRESS_RADIUS of it are
 * held PRESS_DEPTH deeper (-y). Returns the control count. */
static uint32_t press(const fixture *f, uint32_t c, uint32_t *ctrl, double (*pos)[3]) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < f->t->nodes_per_sheet; i++) {
    if (!(f->t->inv_mass[i] > 0)) continue;
    double d[3] = {f->t->rest[i][0] - f->t->rest[c][0], f->t->rest[i][1] - f->t->rest[c][1],
                   f->t->rest[i][2] - f->t->rest[c][2]};
    if (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] > PRESS_RADIUS * PRESS_RADIUS) continue;
    ctrl[n] = i;
    memcpy(pos[n], f->t->rest[i], sizeof pos[n]);
    pos[n][1] -= PRESS_DEPTH;
    n++;
  }
  return n;
}

/* Mean edge length of the region q selected last, m. */
static double region_mean_edge(const ts_qstatic *q) {
  double sum = 0;
  uint32_t n = 0;
  for (uint32_t k = 0; k < q->region->n_tris; k++) {
    const uint32_t *v = q->surf->t[q->region->tris[k]];
    for (int i = 0; i < 3; i++) {
      const double *a = q->surf->v[v[i]], *b = q->surf->v[v[(i + 1) % 3]];
      sum += sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                  (a[2] - b[2]) * (a[2] - b[2]));
      n++;
    }
  }
  return sum / n;
}

static double dist(const double a[3], const double b[3]) {
  return sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
              (a[2] - b[2]) * (a[2] - b[2]));
}

/* ---- the refined copy's mesh ---------------------------------------------- */

typedef struct dedge {
  uint32_t a, b; /* directed, as in a triangle */
} dedge;

static int cmp_dedge(const void *x, const void *y) {
  const dedge *p = x, *q = y;
  uint32_t pa = p->a < p->b ? p->a : p->b, pb = p->a < p->b ? p->b : p->a;
  uint32_t qa = q->a < q->b ? q->a : q->b, qb = q->a < q->b ? q->b : q->a;
  if (pa != qa) return pa < qa ? -1 : 1;
  if (pb != qb) return pb < qb ? -1 : 1;
  return 0;
}

/* Sorted directed edges of n triangles. */
static dedge *edges_of(const uint32_t (*t)[3], uint32_t n) {
  dedge *e = malloc(sizeof *e * 3 * n);
  ck_assert_ptr_nonnull(e);
  for (uint32_t k = 0; k < n; k++)
    for (int i = 0; i < 3; i++) e[3 * k + i] = (dedge){t[k][i], t[k][(i + 1) % 3]};
  qsort(e, 3 * (size_t)n, sizeof *e, cmp_dedge);
  return e;
}

static int cmp_spring_key(const void *x, const void *y) {
  uint64_t a = ((const ts_qsrefine_spring *)x)->key, b = ((const ts_qsrefine_spring *)y)->key;
  return (a > b) - (a < b);
}

START_TEST(refined_mesh_is_sound) {
  fixture f;
  fixture_init(&f, 1);
  uint32_t c = surface_node(&f, 0, 0);
  const double range = 0.006;
  ck_assert_int_eq(ts_qstatic_select_region(f.q, (const double(*)[3])f.x, f.x[c], range), 0);
  double h = region_mean_edge(f.q);
  ts_qsrefine_def d = {.max_edge = h / 4};
  ts_qsrefine *r = NULL;
  ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &d, &r), 0);
  ck_assert_int_eq(ts_qsrefine_build(r, f.x, f.x[c], range, NULL, NULL, 0, NULL), 0);
  const ts_region *reg = f.q->region;
  printf("refined copy: %u region triangles, %u vertices -> %u triangles, %u vertices "
         "(max_edge %.3f mm = h/4, %u propagated bisections, %u new vertices out of range)\n",
         reg->n_tris, r->nv0, r->nt, r->nv, d.max_edge * 1e3, r->n_forced, r->n_outside);
  ck_assert_uint_gt(r->nv, r->nv0);

  /* manifold, consistently wound, conforming: every directed edge once,
   * every undirected edge on one or two triangles, and the edges on one
   * triangle (the copy's boundary) exactly the region's own boundary */
  dedge *e = edges_of((const uint32_t(*)[3])r->tris, r->nt);
  uint32_t n_bound = 0;
  for (uint32_t k = 0; k < 3 * r->nt;) {
    uint32_t m = k + 1;
    while (m < 3 * r->nt && cmp_dedge(&e[k], &e[m]) == 0) m++;
    ck_assert_uint_le(m - k, 2);
    if (m - k == 2) ck_assert(e[k].a == e[k + 1].b && e[k].b == e[k + 1].a);
    if (m - k == 1) {
      n_bound++;
      /* a boundary edge of the copy joins two of the tissue's vertices that
       * the region's triangles also leave on one side */
      ck_assert_uint_lt(e[k].a, r->nv0);
      ck_assert_uint_lt(e[k].b, r->nv0);
    }
    k = m;
  }
  uint32_t(*t0)[3] = malloc(sizeof *t0 * reg->n_tris);
  for (uint32_t k = 0; k < reg->n_tris; k++)
    for (int i = 0; i < 3; i++) t0[k][i] = r->lmap[f.q->surf->t[reg->tris[k]][i]];
  dedge *e0 = edges_of((const uint32_t(*)[3])t0, reg->n_tris);
  uint32_t n_bound0 = 0, n_rim0 = 0, n_rim = 0;
  for (uint32_t k = 0; k < 3 * reg->n_tris;) {
    uint32_t m = k + 1;
    while (m < 3 * reg->n_tris && cmp_dedge(&e0[k], &e0[m]) == 0) m++;
    int rim = !r->in_range[e0[k].a] && !r->in_range[e0[k].b];
    if (m - k == 1) {
      n_bound0++;
      /* the region's boundary edge is still an edge of the copy, same direction */
      dedge *hit = bsearch(&e0[k], e, 3 * (size_t)r->nt, sizeof *e, cmp_dedge);
      ck_assert_ptr_nonnull(hit);
    }
    if (rim) {
      n_rim0++;
      ck_assert_ptr_nonnull(bsearch(&e0[k], e, 3 * (size_t)r->nt, sizeof *e, cmp_dedge));
    }
    k = m;
  }
  for (uint32_t k = 0; k < 3 * r->nt;) {
    uint32_t m = k + 1;
    while (m < 3 * r->nt && cmp_dedge(&e[k], &e[m]) == 0) m++;
    if (e[k].a < r->nv0 && e[k].b < r->nv0 && !r->in_range[e[k].a] && !r->in_range[e[k].b])
      n_rim++;
    k = m;
  }
  ck_assert_uint_eq(n_bound, n_bound0);
  ck_assert_uint_eq(n_rim, n_rim0);
  printf("  %u boundary edges (as the region's), %u rim edges kept\n", n_bound, n_rim);

  /* rim nodes where the tissue has them, on every sheet; new nodes at their
   * parents' midpoints */
  uint32_t nv = r->nv;
  for (uint32_t s = 0; s < r->n_sheets; s++)
    for (uint32_t v = 0; v < nv; v++) {
      const double *p = r->x[s * nv + v];
      if (v < r->nv0) {
        const double *o = f.x[s * f.t->nodes_per_sheet + r->vmap[v]];
        ck_assert(p[0] == o[0] && p[1] == o[1] && p[2] == o[2]);
        if (!r->in_range[v]) ck_assert_int_ne(r->role[s * nv + v], TS_QS_FREE);
      } else {
        const double *a = r->x[s * nv + r->parents[v][0]], *b = r->x[s * nv + r->parents[v][1]];
        for (int k = 0; k < 3; k++) ck_assert(fabs(p[k] - 0.5 * (a[k] + b[k])) < 1e-15);
      }
    }

  /* no degenerate triangle (longest-edge bisection keeps the smallest angle
   * at least half the initial one; the patch's right triangles have 45
   * degrees, so the area is well above 1 % of the longest edge squared), the
   * surface area unchanged (midpoints lie on the old triangles), every edge
   * whose midpoint is in range at most max_edge (rim edges excepted) */
  double area = 0, area0 = 0, worst = 0;
  for (uint32_t k = 0; k < reg->n_tris; k++) {
    const uint32_t *v = f.q->surf->t[reg->tris[k]];
    const double *a = f.x[v[0]], *b = f.x[v[1]], *cc = f.x[v[2]];
    double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, w[3] = {cc[0] - a[0], cc[1] - a[1], cc[2] - a[2]};
    double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
    area0 += 0.5 * sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  }
  for (uint32_t k = 0; k < r->nt; k++) {
    const uint32_t *v = r->tris[k];
    const double *a = r->x[v[0]], *b = r->x[v[1]], *cc = r->x[v[2]];
    double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, w[3] = {cc[0] - a[0], cc[1] - a[1], cc[2] - a[2]};
    double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
    double A = 0.5 * sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    double Lmax = fmax(dist(a, b), fmax(dist(b, cc), dist(cc, a)));
    ck_assert(A > 0.01 * Lmax * Lmax);
    area += A;
    int on_rim = 0; /* a triangle on a rim edge keeps its shape (ts_leb.h) */
    for (int i = 0; i < 3; i++) {
      uint32_t p = v[i], q2 = v[(i + 1) % 3];
      if (p < r->nv0 && q2 < r->nv0 && !r->in_range[p] && !r->in_range[q2]) on_rim = 1;
    }
    for (int i = 0; i < 3 && !on_rim; i++) {
      uint32_t p = v[i], q2 = v[(i + 1) % 3];
      double mid[3];
      for (int k2 = 0; k2 < 3; k2++) mid[k2] = 0.5 * (r->x[p][k2] + r->x[q2][k2]);
      if (dist(mid, f.x[c]) > range) continue;
      double L = dist(r->x[p], r->x[q2]);
      if (L > worst) worst = L;
      ck_assert(L <= d.max_edge * (1 + 1e-12));
    }
  }
  printf("  area %.9g vs %.9g m^2; longest edge in range %.4f mm (bound %.4f mm)\n", area, area0,
         worst * 1e3, d.max_edge * 1e3);
  ck_assert(fabs(area - area0) < 1e-12 * area0);

  /* the springs sorted by their ends and merged (ts_qsrefine_build's two
   * counting passes): every pair of nodes once, so the keys strictly
   * increase, ends inside the copy, and each sheet's copy of every surface
   * edge found among them by binary search (one pass alone, or a merge that
   * missed equal keys, breaks the order) */
  for (uint32_t k = 0; k < r->n_springs; k++) {
    uint32_t a = (uint32_t)(r->spr[k].key >> 32), b = (uint32_t)r->spr[k].key;
    ck_assert_uint_lt(a, b);
    ck_assert_uint_lt(b, r->n_nodes);
    ck_assert(r->spr[k].K > 0);
    if (k) ck_assert(r->spr[k - 1].key < r->spr[k].key);
  }
  uint32_t n_found = 0;
  for (uint32_t k = 0; k < 3 * r->nt; k++)
    for (uint32_t s = 0; s < r->n_sheets; s++) {
      uint32_t a = s * nv + e[k].a, b = s * nv + e[k].b;
      ts_qsrefine_spring key = {.key = (uint64_t)(a < b ? a : b) << 32 | (a < b ? b : a)};
      ck_assert_ptr_nonnull(bsearch(&key, r->spr, r->n_springs, sizeof *r->spr, cmp_spring_key));
      n_found++;
    }
  printf("  %u springs, sorted and merged; %u sheet edges found among them\n", r->n_springs,
         n_found);
  free(e);
  free(e0);
  free(t0);
  ts_qsrefine_destroy(r);
  fixture_free(&f);
}
END_TEST

START_TEST(unrefined_equals_region_solve) {
  fixture f;
  fixture_init(&f, 1);
  uint32_t n = f.t->n_nodes, c = surface_node(&f, 0.004, -0.003);
  uint32_t *ctrl = malloc(sizeof *ctrl * n);
  double(*pos)[3] = malloc(sizeof *pos * n), (*x2)[3] = malloc(sizeof *x2 * n);
  uint32_t nc = press(&f, c, ctrl, pos);
  ck_assert_uint_gt(nc, 0);
  const double range = 0.008;
  double point[3];
  memcpy(point, f.x[c], sizeof point);
  memcpy(x2, f.x, sizeof *x2 * n);
  ts_qstatic_stats s1, s2;
  ck_assert_int_eq(ts_qstatic_select_region(f.q, (const double(*)[3])f.x, point, range), 0);
  ck_assert_int_eq(ts_qstatic_solve_region(f.q, f.x, ctrl, (const double(*)[3])pos, nc, NULL, &s1), 0);
  /* the old step: one alpha for every node, as ts_qstatic.c */
  ts_qsrefine_def d = {.max_edge = INFINITY, .step = TS_QSREFINE_STEP_GLOBAL};
  ts_qsrefine *r = NULL;
  ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &d, &r), 0);
  ck_assert_int_eq(ts_qsrefine_solve(r, x2, point, range, ctrl, (const double(*)[3])pos, nc, NULL, &s2), 0);
  ck_assert(s1.converged && s2.converged);
  ck_assert_uint_eq(r->nv, r->nv0);
  ck_assert_uint_eq(s1.n_free, s2.n_free);
  double worst = 0, disp = 0;
  for (uint32_t i = 0; i < n; i++) {
    worst = fmax(worst, dist(f.x[i], x2[i]));
    disp = fmax(disp, dist(f.x[i], f.t->rest[i]));
  }
  printf("no refinement: %u free, %u vs %u iterations, residual %.3g vs %.3g N (tol %.3g); "
         "largest difference %.3g m (largest displacement %.3g m)\n",
         s1.n_free, s1.iterations, s2.iterations, s1.residual, s2.residual, f.q->p.tol, worst, disp);
  /* Same springs, masses, free nodes and step: the sweeps are the same up to
   * the order of summation (rounding, 1e-16 relative), so the two stop
   * within a sweep of each other; a sweep moves a node by at most
   * alpha * tol, far below 1e-9 m here */
  ck_assert(worst < 1e-9);
  /* the default per-node step (block Jacobi) on the same press: the same
   * equilibrium, to the solve's tolerance (STEP_TOL below) */
  double(*x3)[3] = malloc(sizeof *x3 * n);
  memcpy(x3, f.t->rest, sizeof *x3 * n);
  ts_qsrefine_def db = {.max_edge = INFINITY};
  ts_qsrefine *rb = NULL;
  ts_qstatic_stats s3;
  ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &db, &rb), 0);
  ck_assert_int_eq(
      ts_qsrefine_solve(rb, x3, point, range, ctrl, (const double(*)[3])pos, nc, NULL, &s3), 0);
  ck_assert(s3.converged);
  double worst_b = 0;
  for (uint32_t i = 0; i < n; i++) worst_b = fmax(worst_b, dist(f.x[i], x3[i]));
  printf("  per-node step: %u iterations (%.1f x fewer), residual %.3g N; largest difference "
         "from the region solve %.3g m\n",
         s3.iterations, (double)s1.iterations / s3.iterations, s3.residual, worst_b);
  ck_assert(worst_b < STEP_TOL);
  ck_assert_uint_lt(s3.iterations, s1.iterations);
  ts_qsrefine_destroy(rb);
  free(x3);
  /* bad input */
  ts_qsrefine_def bad_step = {.max_edge = INFINITY, .step = (ts_qsrefine_step)3};
  ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &bad_step, &rb), TS_EINVAL);
  ck_assert_int_eq(ts_qsrefine_solve(r, x2, point, -1, ctrl, (const double(*)[3])pos, nc, NULL, NULL), TS_EINVAL);
  ctrl[1] = ctrl[0];
  ck_assert_int_eq(ts_qsrefine_solve(r, x2, point, range, ctrl, (const double(*)[3])pos, nc, NULL, NULL), TS_EINVAL);
  ctrl[1] = n;
  ck_assert_int_eq(ts_qsrefine_solve(r, x2, point, range, ctrl, (const double(*)[3])pos, nc, NULL, NULL), TS_EINVAL);
  pos[0][0] = NAN;
  ck_assert_int_eq(ts_qsrefine_build(r, x2, point, range, ctrl, (const double(*)[3])pos, 1, NULL), TS_ENAN);
  ts_qsrefine_def tiny = {.max_edge = 1e-5, .max_verts = 500};
  ts_qsrefine *rt = NULL;
  ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &tiny, &rt), 0);
  ck_assert_int_eq(ts_qsrefine_solve(rt, x2, point, range, NULL, NULL, 0, NULL, NULL), TS_EFULL);
  ts_qsrefine_destroy(rt);
  ts_qsrefine_def bad = {.max_edge = -1};
  ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &bad, &rt), TS_EINVAL);
  ts_qsrefine_destroy(r);
  free(ctrl);
  free(pos);
  free(x2);
  fixture_free(&f);
}
END_TEST

/* Uniform stretch eps about the contact point c of the copy r built at rest:
 * every node moved to c + (1 + eps)(X - c). Returns the total reaction to
 * it, the work-conjugate of the stretch: -sum_i f_i . (X_i - c) over every
 * node (= sum over springs of tension times length, N m), which is
 * eps (1 + eps) sum_s K_s L0_s^2 for linear springs: the stiffness volume
 * refinement must keep. With relax != 0 the free nodes are first relaxed
 * with the rest held, and the reaction is summed over the held nodes only
 * (what the rim and the anchors carry; printed, not asserted: see below). */
static double stretch_reaction(ts_qsrefine *r, const double c[3], double eps, int relax) {
  for (uint32_t i = 0; i < r->n_nodes; i++)
    for (int k = 0; k < 3; k++) r->x[i][k] = c[k] + (1 + eps) * (r->X[i][k] - c[k]);
  if (relax) {
    ts_qstatic_stats st;
    ck_assert_int_eq(ts_qsrefine_relax(r, &st), 0);
    ck_assert(st.converged);
  }
  double(*fr)[3] = malloc(sizeof *fr * r->n_nodes);
  ts_qsrefine_forces(r, fr);
  double sum = 0;
  for (uint32_t i = 0; i < r->n_nodes; i++) {
    if (relax && r->role[i] == TS_QS_FREE) continue;
    double d[3] = {r->X[i][0] - c[0], r->X[i][1] - c[1], r->X[i][2] - c[2]};
    sum -= fr[i][0] * d[0] + fr[i][1] * d[1] + fr[i][2] * d[2];
  }
  free(fr);
  return sum;
}

START_TEST(uniform_stretch_same_reaction) {
  fixture f;
  fixture_init(&f, 0);
  uint32_t c = surface_node(&f, 0, 0);
  const double range = 0.0045, eps = 1e-3;
  ck_assert_int_eq(ts_qstatic_select_region(f.q, (const double(*)[3])f.x, f.x[c], range), 0);
  double h = region_mean_edge(f.q);
  double react[3][2];
  const double edges[3] = {INFINITY, h / 2, h / 4};
  for (int k = 0; k < 3; k++) {
    ts_qsrefine_def d = {.max_edge = edges[k]};
    ts_qsrefine *r = NULL;
    ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &d, &r), 0);
    ck_assert_int_eq(ts_qsrefine_build(r, f.x, f.x[c], range, NULL, NULL, 0, NULL), 0);
    react[k][0] = stretch_reaction(r, f.x[c], eps, 0);
    react[k][1] = stretch_reaction(r, f.x[c], eps, 1);
    printf("uniform stretch %.0e, max_edge %.3f mm (%u surface vertices, %u springs): total "
           "reaction %.9g N m; with the free nodes relaxed, the held nodes carry %.6g N m\n",
           eps, edges[k] * 1e3, r->nv, r->n_springs, react[k][0], react[k][1]);
    ts_qsrefine_destroy(r);
  }
  for (int k = 1; k < 3; k++) {
    double ra = fabs(react[k][0] / react[0][0] - 1), rr = fabs(react[k][1] / react[0][1] - 1);
    printf("  refined / unrefined - 1: uniform stretch %.3g, relaxed %.3g\n", ra, rr);
    /* the 1 %: the same material whatever the refinement (the
     * construction keeps sum K L^2 exactly, so this is rounding) */
    ck_assert(ra < 0.01);
  }
  fixture_free(&f);
}
END_TEST

START_TEST(press_converges_under_refinement) {
  fixture f;
  fixture_init(&f, 1);
  uint32_t n = f.t->n_nodes, c = surface_node(&f, 0, 0), ns = f.t->nodes_per_sheet;
  uint32_t under = (f.t->n_sheets - 1) * ns + c; /* the innermost node under the press */
  uint32_t *ctrl = malloc(sizeof *ctrl * n);
  double(*pos)[3] = malloc(sizeof *pos * n);
  uint32_t nc = press(&f, c, ctrl, pos);
  const double range = 0.0045;
  double point[3];
  memcpy(point, f.x[c], sizeof point);
  ck_assert_int_eq(ts_qstatic_select_region(f.q, (const double(*)[3])f.x, point, range), 0);
  double h = region_mean_edge(f.q);
  double disp[4];
  const double edges[4] = {INFINITY, h, h / 2, h / 4};
  for (int k = 0; k < 4; k++) {
    memcpy(f.x, f.t->rest, sizeof *f.x * n);
    ts_qsrefine_def d = {.max_edge = edges[k]};
    ts_qsrefine *r = NULL;
    ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &d, &r), 0);
    ts_qstatic_stats st;
    ck_assert_int_eq(ts_qsrefine_solve(r, f.x, point, range, ctrl, (const double(*)[3])pos, nc, NULL, &st), 0);
    ck_assert(st.converged);
    disp[k] = f.t->rest[under][1] - f.x[under][1];
    printf("press %.1f mm, max_edge %.3f mm: %u surface vertices, %u free nodes, %u iterations, "
           "residual %.3g N (tol %.3g); innermost node under the press moves %.6f mm\n",
           PRESS_DEPTH * 1e3, edges[k] * 1e3, r->nv, st.n_free, st.iterations, st.residual,
           f.q->p.tol, disp[k] * 1e3);
    ts_qsrefine_destroy(r);
  }
  double d1 = fabs(disp[2] - disp[1]), d2 = fabs(disp[3] - disp[2]);
  printf("  differences h -> h/2: %.4g mm, h/2 -> h/4: %.4g mm; observed order %.2f\n", d1 * 1e3,
         d2 * 1e3, log2(d1 / d2));
  /* (the press is deeper than the 1 mm mucosa: the method's springs let its
   * prisms fold, and the innermost node moves up, as the unrefined region
   * and whole-mesh solves give too) */
  for (int k = 0; k < 4; k++) ck_assert(isfinite(disp[k]));
  ck_assert(d2 < d1);
  free(ctrl);
  free(pos);
  fixture_free(&f);
}
END_TEST

/* The same refined press solved with the old step (one alpha, limited by the
 * stiffest node) and the default per-node step (block Jacobi): the same
 * equilibrium within STEP_TOL, in fewer sweeps. */
START_TEST(per_node_step_same_solution) {
  fixture f;
  fixture_init(&f, 1);
  uint32_t n = f.t->n_nodes, c = surface_node(&f, 0.004, -0.003);
  uint32_t *ctrl = malloc(sizeof *ctrl * n);
  double(*pos)[3] = malloc(sizeof *pos * n), (*xs[2])[3];
  uint32_t nc = press(&f, c, ctrl, pos);
  for (uint32_t k = 0; k < nc; k++) pos[k][1] += PRESS_DEPTH - 0.001; /* 1 mm, as the bench */
  const double range = 0.006;
  double point[3];
  memcpy(point, f.x[c], sizeof point);
  ck_assert_int_eq(ts_qstatic_select_region(f.q, (const double(*)[3])f.x, point, range), 0);
  double h = region_mean_edge(f.q);
  const ts_qsrefine_step steps[2] = {TS_QSREFINE_STEP_GLOBAL, TS_QSREFINE_STEP_BLOCK};
  ts_qstatic_stats st[2];
  uint32_t n_refresh = 0, nv = 0;
  for (int k = 0; k < 2; k++) {
    xs[k] = malloc(sizeof *xs[k] * n);
    ck_assert_ptr_nonnull(xs[k]);
    memcpy(xs[k], f.t->rest, sizeof *xs[k] * n);
    ts_qsrefine_def d = {.max_edge = h / 2, .step = steps[k]};
    ts_qsrefine *r = NULL;
    ck_assert_int_eq(ts_qsrefine_create(f.q, f.t, &d, &r), 0);
    ck_assert_int_eq(
        ts_qsrefine_solve(r, xs[k], point, range, ctrl, (const double(*)[3])pos, nc, NULL, &st[k]), 0);
    ck_assert(st[k].converged);
    if (k == 1) n_refresh = r->n_refresh;
    nv = r->nv;
    ts_qsrefine_destroy(r);
  }
  double worst = 0, disp = 0;
  for (uint32_t i = 0; i < n; i++) {
    worst = fmax(worst, dist(xs[0][i], xs[1][i]));
    disp = fmax(disp, dist(xs[0][i], f.t->rest[i]));
  }
  printf("refined press 1 mm (max_edge %.3f mm = h/2, %u surface vertices, %u free nodes): old "
         "step %u iterations, per-node step %u (%.1f x fewer; blocks taken %u times), residuals "
         "%.3g / %.3g N (tol %.3g); largest difference %.3g m (largest displacement %.3g m)\n",
         h / 2 * 1e3, nv, st[1].n_free, st[0].iterations, st[1].iterations,
         (double)st[0].iterations / st[1].iterations, n_refresh, st[0].residual, st[1].residual,
         f.q->p.tol, worst, disp);
  ck_assert_uint_eq(st[0].n_free, st[1].n_free);
  ck_assert(worst < STEP_TOL);
  ck_assert_uint_lt(st[1].iterations, st[0].iterations);
  free(xs[0]);
  free(xs[1]);
  free(ctrl);
  free(pos);
  fixture_free(&f);
}
END_TEST

/* ---- the learner on refined-solve samples -------------------------------- */

#define LEARN_RANGE 0.006
static const double train_pts[][2] = {{0, 0}, {0.012, 0}, {-0.010, 0.008}};
static const double held_pts[][2] = {{0.007, 0.009}, {-0.013, 0.015}};

static void apply(fixture *f, ts_learner *l, double px, double pz, int mode, ts_learn_error *err) {
  memcpy(f->x, f->t->rest, sizeof *f->x * f->t->n_nodes);
  uint32_t node = surface_node(f, px, pz);
  for (int k = 0; k < 2; k++) {
    ts_learn_press p = {{0, 0, 0}, {0, -1, 0}, PRESS_RADIUS, 0.001};
    memcpy(p.point, f->x[node], sizeof p.point);
    if (mode == 0) {
      ts_learn_step_stats st;
      ck_assert_int_eq(ts_learner_step(l, f->x, &p, 1, &st), 0);
      ck_assert(st.qs.converged);
      ck_assert(st.n_ctrl > 0 && st.n_free > 0);
    } else {
      ck_assert_int_eq(ts_learner_compare(l, f->x, &p, err), 0);
    }
  }
}

START_TEST(learner_on_refined_samples) {
  fixture f;
  fixture_init(&f, 1);
  ts_learner *l = NULL;
  ck_assert_int_eq(ts_learner_create(f.q, LEARN_RANGE, 100000, &l), 0);
  ck_assert_int_eq(ts_qstatic_select_region(f.q, (const double(*)[3])f.x, f.x[0], LEARN_RANGE), 0);
  double h = region_mean_edge(f.q);
  ck_assert_int_eq(ts_learner_set_refine(l, f.t, -1), TS_EINVAL);
  ck_assert_int_eq(ts_learner_set_refine(l, f.t, h / 2), 0);
  for (size_t i = 0; i < sizeof train_pts / sizeof train_pts[0]; i++)
    apply(&f, l, train_pts[i][0], train_pts[i][1], 0, NULL);
  ck_assert_uint_gt(l->set->n, 0);
  ts_learn_model cf, gd;
  ck_assert_int_eq(ts_learn_train_closed(l->set, TS_LEARN_METHOD, &cf), 0);
  ts_learn_train_opts o = ts_learn_train_defaults();
  ck_assert_int_eq(ts_learn_train_gd(l->set, TS_LEARN_METHOD, &o, &gd), 0);
  ck_assert(gd.converged);
  double worst = 0;
  for (uint32_t a = 0; a < cf.n_params; a++)
    worst = fmax(worst, fabs(gd.theta[a] - cf.theta[a]) / fabs(cf.theta[a]));
  printf("refined samples (max_edge %.3f mm = h/2): %u samples, gradient descent %llu iterations, "
         "largest relative difference from the closed form %.3g\n",
         h / 2 * 1e3, l->set->n, (unsigned long long)gd.iterations, worst);
  ck_assert(worst < 1e-6); /* the figure, as test_learn.c */
  ck_assert_int_eq(ts_learner_set_model(l, &cf), 0);
  ts_learn_error e;
  memset(&e, 0, sizeof e);
  for (size_t i = 0; i < sizeof held_pts / sizeof held_pts[0]; i++)
    apply(&f, l, held_pts[i][0], held_pts[i][1], 1, &e);
  ck_assert(e.n > 0);
  double rms = sqrt(e.sum_err2 / e.n), drms = sqrt(e.sum_disp2 / e.n);
  printf("  held-out against the refined solve: %llu positions, RMS error %.4f mm (%.1f %% of the "
         "RMS displacement %.4f mm), max %.4f mm\n",
         (unsigned long long)e.n, rms * 1e3, 100 * rms / drms, drms * 1e3, e.max_err * 1e3);
  ck_assert(isfinite(rms) && rms < drms); /* better than not moving at all */
  ck_assert_int_eq(ts_learner_set_refine(l, f.t, 0), 0);
  ck_assert_ptr_null(l->rq);
  ts_learner_destroy(l);
  fixture_free(&f);
}
END_TEST

int main(void) {
  const tu_case cases[] = {{"mesh", refined_mesh_is_sound},
                            {"equal", unrefined_equals_region_solve},
                            {"stretch", uniform_stretch_same_reaction},
                            {"press", press_converges_under_refinement},
                            {"step", per_node_step_same_solution},
                            {"learn", learner_on_refined_samples}};
  return tu_run_suite(
      tu_suite_of_cases("qstatic_refine", cases, sizeof cases / sizeof cases[0], 600));
}
