/*
 * ts_massspring.c: the skeleton's explicit mass-spring step (see
 * ts_massspring.h): linear springs with Kelvin dampers, gravity and a
 * mass-proportional drag, integrated by symplectic Euler in substeps, with
 * sphere/capsule tools as projection constraints.
 *
 * Stability. For the damped oscillator x'' = -w^2 x - g x', symplectic Euler
 * with step h is stable iff h^2 w^2 + 2 g h < 4 (and g h < 2), i.e.
 * h < 4 / (g + sqrt(g^2 + 4 w^2)). The tissue's largest w^2 and largest g
 * are bounded separately (the modes of K and C differ, so pairing the two
 * maxima is the usual conservative estimate rather than a proof) with
 * Gershgorin's theorem on the symmetric M^-1/2 K M^-1/2 and M^-1/2 C M^-1/2,
 * which have the eigenvalues of M^-1 K and M^-1 C, over the free degrees of
 * freedom, linearised at rest. ts_massspring_stable_dt sharpens the discs
 * with a diagonal similarity (Collatz-Wielandt, below); a tissue built
 * without it gets plain row sums on its first step. The step then takes
 * ceil(dt / (0.5 h)) substeps, the factor 2 covering the stiffening of
 * stretched springs and the contact projections. For the default patch the
 * bound is within about 25 % of the true largest frequency and the fastest
 * mode is the through-thickness one of the thin layers, about 1e4 rad/s:
 * 14 substeps per 1 ms step.
 *
 * Contact. After each substep every free node inside an active tool is moved
 * along the tool's outward normal onto its surface and loses the velocity
 * component into the tool. What the tissue pushes on the tool with is the sum
 * of the non-contact forces (springs, dampers, gravity, drag) on the nodes in
 * contact: at rest those are exactly what the tool holds back. It is averaged
 * over the substeps of a step. A node inside two tools counts for both.
 *
 * No allocation in the step: the stable substep is cached in the tissue (a
 * tissue without one gets it on its first step, with the force array as
 * scratch).
 */
#include "ts_massspring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

#define TS__MAX_SPEED 100.0        /* m/s: faster than any tissue moves */
#define TS__MAX_SUBSTEPS 1000000u  /* a dt that needs more is refused */
#define TS__MAX_STEP_TOOLS 64
#define TS__MAX_DT 1.0             /* s */

/* ---- stable substep ---- */

/* y = B d, where B = |M^-1/2 A M^-1/2| (entrywise absolute value) over the
 * free degrees of freedom, A the stiffness (damping = 0) or damping matrix of
 * the springs linearised at rest: a spring with unit direction n adds
 * kc*n*n^T to the diagonal blocks of its ends and -kc*n*n^T off the
 * diagonal. d == NULL means d = 1 on every free DOF. Returns -1 when a spring
 * is malformed (an end out of range, a negative or non-finite constant), so
 * that the step never indexes out of bounds on a hand-built tissue. */
static int abs_product(const ts_tissue *t, int damping, const double (*d)[3], double (*y)[3]) {
  const double *im = t->inv_mass;
  memset(y, 0, sizeof *y * t->n_nodes);
  for (uint32_t s = 0; s < t->n_springs; s++) {
    const ts_spring *sp = &t->springs[s];
    if (sp->a >= t->n_nodes || sp->b >= t->n_nodes) return -1;
    if (!(sp->k >= 0 && sp->c >= 0 && sp->rest >= 0) || !isfinite(sp->k + sp->c + sp->rest))
      return -1;
    double ia = im[sp->a] > 0 ? im[sp->a] : 0, ib = im[sp->b] > 0 ? im[sp->b] : 0;
    if (ia == 0 && ib == 0) continue;
    double kc = damping ? sp->c : sp->k;
    double n[3], l2 = 0;
    for (int r = 0; r < 3; r++) {
      n[r] = t->rest[sp->b][r] - t->rest[sp->a][r];
      l2 += n[r] * n[r];
    }
    if (l2 > 0) {
      double il = 1.0 / sqrt(l2);
      for (int r = 0; r < 3; r++) n[r] = fabs(n[r]) * il;
    } else {
      n[0] = n[1] = n[2] = 1.0; /* no direction: an entrywise upper bound */
    }
    double cross = sqrt(ia * ib);
    double da[3] = {1, 1, 1}, db[3] = {1, 1, 1};
    if (d)
      for (int c = 0; c < 3; c++) da[c] = d[sp->a][c], db[c] = d[sp->b][c];
    double pa = 0, pb = 0; /* n . (own d), n . (other end's d) */
    for (int c = 0; c < 3; c++) {
      pa += n[c] * (ia * da[c] + cross * db[c]);
      pb += n[c] * (ib * db[c] + cross * da[c]);
    }
    for (int r = 0; r < 3; r++) {
      if (ia > 0) y[sp->a][r] += kc * n[r] * pa;
      if (ib > 0) y[sp->b][r] += kc * n[r] * pb;
    }
  }
  return 0;
}

/* max_i y_i / d_i over free DOFs (d == NULL: d = 1). */
static double max_ratio(const ts_tissue *t, const double (*d)[3], const double (*y)[3]) {
  double m = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (!(t->inv_mass[i] > 0)) continue;
    for (int r = 0; r < 3; r++) {
      double q = d ? (d[i][r] > 0 ? y[i][r] / d[i][r] : INFINITY) : y[i][r];
      if (q > m) m = q;
    }
  }
  return m;
}

/* Largest stable step for the bounds w2 (on w^2) and g (on the damping
 * rate), see the top of the file. */
static double step_bound(const ts_tissue *t, double w2, double g) {
  g += t->drag > 0 ? t->drag : 0.0;
  double den = g + sqrt(g * g + 4.0 * w2);
  return den > 0 ? 4.0 / den : INFINITY;
}

/* Plain Gershgorin (row sums, d = 1), needing only one scratch array. */
static double gershgorin_dt(const ts_tissue *t, double (*scratch)[3]) {
  if (abs_product(t, 0, NULL, scratch)) return -1.0;
  double w2 = max_ratio(t, NULL, (const double (*)[3])scratch);
  if (abs_product(t, 1, NULL, scratch)) return -1.0;
  double g = max_ratio(t, NULL, (const double (*)[3])scratch);
  return step_bound(t, w2, g);
}

/* Gershgorin's theorem on D^-1 B D for a positive diagonal D = diag(d) bounds
 * the spectral radius of B by max_i (B d)_i / d_i (Collatz-Wielandt), and
 * rho(B) bounds the eigenvalues of M^-1 A. d = 1 gives the row sums; a few
 * power iterations on B tighten the bound towards rho(B). Every iterate is
 * a valid bound; the smallest is kept. */
static double scaled_bound(const ts_tissue *t, int damping, double (*d)[3], double (*y)[3]) {
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int r = 0; r < 3; r++) d[i][r] = t->inv_mass[i] > 0 ? 1.0 : 0.0;
  double best = INFINITY;
  for (int it = 0; it < 20; it++) {
    if (abs_product(t, damping, (const double (*)[3])d, y)) return -1.0;
    double b = max_ratio(t, (const double (*)[3])d, (const double (*)[3])y);
    if (b < best) best = b;
    double ymax = 0;
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int r = 0; r < 3; r++)
        if (y[i][r] > ymax) ymax = y[i][r];
    if (!(ymax > 0)) break;
    /* the small shift keeps every free d_i positive */
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int r = 0; r < 3; r++)
        d[i][r] = t->inv_mass[i] > 0 ? y[i][r] / ymax + 1e-9 : 0.0;
  }
  return best;
}

double ts_massspring_stable_dt(const ts_tissue *t) {
  if (!t || t->n_nodes == 0 || !t->rest || !t->inv_mass) return 0.0;
  if (t->stable_dt > 0) return t->stable_dt;
  double (*d)[3] = malloc(sizeof *d * t->n_nodes);
  double (*y)[3] = malloc(sizeof *y * t->n_nodes);
  double h = 0.0;
  if (d && y) {
    double w2 = scaled_bound(t, 0, d, y);
    double g = scaled_bound(t, 1, d, y);
    if (w2 >= 0 && g >= 0) h = step_bound(t, w2, g);
  }
  free(d);
  free(y);
  return h > 0 ? h : 0.0;
}

/* ---- tools ---- */

typedef struct ts__ptool {
  ts_tool *tool;
  double a[3], ab[3]; /* core segment a + u*ab, u in [0,1] */
  double inv_len2;    /* 1/|ab|^2, 0 for a sphere */
  double r;
  double bc[3], br2;  /* bounding sphere of the tool: centre, radius^2 */
  double force[3];    /* sum over substeps */
  uint32_t contacts;  /* in the last substep */
} ts__ptool;

static int valid_tool(const ts_tool *tl) {
  if (tl->kind != TS_TOOL_SPHERE && tl->kind != TS_TOOL_CAPSULE) return TS_EINVAL;
  for (int i = 0; i < 3; i++)
    if (!isfinite(tl->pos[i])) return TS_ENAN;
  for (int i = 0; i < 4; i++)
    if (!isfinite(tl->quat[i])) return TS_ENAN;
  if (!isfinite(tl->radius) || !isfinite(tl->length)) return TS_ENAN;
  if (!(tl->radius > 0) || tl->radius > 1.0) return TS_EINVAL;
  if (tl->kind == TS_TOOL_CAPSULE && (tl->length < 0 || tl->length > 10.0)) return TS_EINVAL;
  return 0;
}

static void prepare_tool(ts__ptool *p, ts_tool *tl) {
  double b[3];
  memset(p, 0, sizeof *p);
  p->tool = tl;
  ts_tool_segment(tl, p->a, b);
  double l2 = 0;
  for (int i = 0; i < 3; i++) {
    p->ab[i] = b[i] - p->a[i];
    l2 += p->ab[i] * p->ab[i];
    p->bc[i] = 0.5 * (p->a[i] + b[i]);
  }
  p->inv_len2 = l2 > 0 ? 1.0 / l2 : 0.0;
  p->r = tl->radius;
  double br = tl->radius + 0.5 * sqrt(l2);
  p->br2 = br * br;
}

/* Projects the free nodes inside tool p onto its surface; adds their
 * non-contact forces to p->force. h: the substep just taken. */
static void contact(ts_tissue *t, ts__ptool *p, double h) {
  double (*x)[3] = t->x, (*v)[3] = t->v, (*f)[3] = t->f;
  const double *im = t->inv_mass;
  const double *g = t->gravity, drag = t->drag;
  uint32_t hits = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double ex = x[i][0] - p->bc[0], ey = x[i][1] - p->bc[1], ez = x[i][2] - p->bc[2];
    if (!(ex * ex + ey * ey + ez * ez < p->br2) || im[i] == 0) continue;
    double ap[3] = {x[i][0] - p->a[0], x[i][1] - p->a[1], x[i][2] - p->a[2]};
    double u = (ap[0] * p->ab[0] + ap[1] * p->ab[1] + ap[2] * p->ab[2]) * p->inv_len2;
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double c[3], d[3];
    for (int k = 0; k < 3; k++) {
      c[k] = p->a[k] + u * p->ab[k];
      d[k] = x[i][k] - c[k];
    }
    double dl = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (!(dl < p->r)) continue;
    double n[3] = {0, 1, 0};
    if (dl > 0)
      for (int k = 0; k < 3; k++) n[k] = d[k] / dl;
    /* the non-contact force of this substep: springs and dampers (in f) plus
     * m*(g - drag*v_old), v_old recovered from v = v_old + h*(im*f + g -
     * drag*v_old) */
    double m = 1.0 / im[i], den = 1.0 - h * drag;
    for (int k = 0; k < 3; k++) {
      double vold = den > 1e-9 ? (v[i][k] - h * (im[i] * f[i][k] + g[k])) / den : v[i][k];
      p->force[k] += f[i][k] + m * (g[k] - drag * vold);
    }
    for (int k = 0; k < 3; k++) x[i][k] = c[k] + p->r * n[k];
    double vn = v[i][0] * n[0] + v[i][1] * n[1] + v[i][2] * n[2];
    if (vn < 0)
      for (int k = 0; k < 3; k++) v[i][k] -= vn * n[k];
    hits++;
  }
  p->contacts = hits;
}

/* ---- forces and integration ---- */

static void spring_forces(ts_tissue *t) {
  const double (*restrict x)[3] = (const double (*)[3])t->x;
  const double (*restrict v)[3] = (const double (*)[3])t->v;
  double (*restrict f)[3] = t->f;
  const ts_spring *restrict sp = t->springs;
  const uint32_t ns = t->n_springs;
  memset(f, 0, sizeof *f * t->n_nodes);
  for (uint32_t s = 0; s < ns; s++) {
    const uint32_t a = sp[s].a, b = sp[s].b;
    const double dx = x[b][0] - x[a][0], dy = x[b][1] - x[a][1], dz = x[b][2] - x[a][2];
    const double l2 = dx * dx + dy * dy + dz * dz;
    if (!(l2 > 1e-24)) continue; /* coincident ends have no direction */
    const double il = 1.0 / sqrt(l2);
    const double dvx = v[b][0] - v[a][0], dvy = v[b][1] - v[a][1], dvz = v[b][2] - v[a][2];
    /* tension (N) over length: spring k*(L - L0) plus damper c * dL/dt */
    const double fs =
        (sp[s].k * (l2 * il - sp[s].rest) + sp[s].c * (dvx * dx + dvy * dy + dvz * dz) * il) * il;
    const double fx = fs * dx, fy = fs * dy, fz = fs * dz;
    f[a][0] += fx;
    f[a][1] += fy;
    f[a][2] += fz;
    f[b][0] -= fx;
    f[b][1] -= fy;
    f[b][2] -= fz;
  }
}

/* Symplectic Euler for the free nodes; returns 0, or 1 when a speed is over
 * the limit or not a number (checked here, on every substep, so that a
 * runaway is caught before it spreads). */
static int integrate(ts_tissue *t, double h) {
  double (*restrict x)[3] = t->x;
  double (*restrict v)[3] = t->v;
  const double (*restrict f)[3] = (const double (*)[3])t->f;
  const double *restrict im = t->inv_mass;
  const double gx = t->gravity[0], gy = t->gravity[1], gz = t->gravity[2];
  const double drag = t->drag;
  const uint32_t n = t->n_nodes;
  int bad = 0;
  for (uint32_t i = 0; i < n; i++) {
    const double w = im[i];
    if (w == 0) continue; /* anchored */
    double vx = v[i][0] + h * (w * f[i][0] + gx - drag * v[i][0]);
    double vy = v[i][1] + h * (w * f[i][1] + gy - drag * v[i][1]);
    double vz = v[i][2] + h * (w * f[i][2] + gz - drag * v[i][2]);
    v[i][0] = vx;
    v[i][1] = vy;
    v[i][2] = vz;
    x[i][0] += h * vx;
    x[i][1] += h * vy;
    x[i][2] += h * vz;
    double v2 = vx * vx + vy * vy + vz * vz;
    bad |= !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED);
  }
  return bad;
}

/* ---- step ---- */

int ts_massspring_step(ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                       ts_step_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (!t || t->n_nodes == 0 || !t->x || !t->v || !t->f || !t->inv_mass) return TS_EINVAL;
  if (!isfinite(dt)) return TS_ENAN;
  if (!(dt > 0) || dt > TS__MAX_DT) return TS_EINVAL;
  if (n_tools < 0 || n_tools > TS__MAX_STEP_TOOLS || (n_tools > 0 && !tools)) return TS_EINVAL;
  for (int i = 0; i < 3; i++)
    if (!isfinite(t->gravity[i])) return TS_ENAN;
  if (!isfinite(t->drag) || t->drag < 0) return TS_EINVAL;

  ts__ptool pt[TS__MAX_STEP_TOOLS];
  int np = 0;
  for (int i = 0; i < n_tools; i++) {
    tools[i].force[0] = tools[i].force[1] = tools[i].force[2] = 0;
    tools[i].contacts = 0;
    if (!tools[i].active) continue;
    int rc = valid_tool(&tools[i]);
    if (rc) return rc;
    prepare_tool(&pt[np++], &tools[i]);
  }

  if (!(t->stable_dt > 0)) {
    double hs = gershgorin_dt(t, t->f);
    memset(t->f, 0, sizeof *t->f * t->n_nodes);
    if (!(hs > 0)) return TS_EINVAL;
    t->stable_dt = hs;
  }
  double nsub = ceil(dt / (0.5 * t->stable_dt));
  if (!(nsub <= TS__MAX_SUBSTEPS)) return TS_ERANGE; /* also catches NaN */
  uint32_t n = nsub < 1 ? 1 : (uint32_t)nsub;
  double h = dt / n;

  int bad = 0;
  for (uint32_t k = 0; k < n; k++) {
    spring_forces(t);
    bad = integrate(t, h);
    if (bad) break;
    for (int j = 0; j < np; j++) contact(t, &pt[j], h);
  }
  t->time += dt;
  t->steps++;

  /* health and statistics */
  double vmax2 = 0, ke = 0;
  for (uint32_t i = 0; i < t->n_nodes && !bad; i++) {
    const double *x = t->x[i], *v = t->v[i];
    double v2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if (!isfinite(x[0] + x[1] + x[2]) || !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED)) {
      bad = 1;
      break;
    }
    if (v2 > vmax2) vmax2 = v2;
    if (t->inv_mass[i] > 0) ke += 0.5 * v2 / t->inv_mass[i];
  }
  if (bad) {
    ts_tissue_reset(t);
    if (stats) {
      stats->substeps = n;
      stats->diverged = 1;
    }
    return TS_EDIVERGED;
  }

  uint32_t contacts = 0;
  for (int j = 0; j < np; j++) {
    for (int k = 0; k < 3; k++) pt[j].tool->force[k] = pt[j].force[k] / n;
    pt[j].tool->contacts = pt[j].contacts;
    contacts += pt[j].contacts;
  }
  if (stats) {
    stats->substeps = n;
    stats->contacts = contacts;
    stats->max_speed = sqrt(vmax2);
    stats->kinetic_energy = ke;
  }
  return 0;
}
