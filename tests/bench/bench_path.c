/*
 * bench_path.c: the standard tool path shared by every benchmark (see
 * bench_path.h for the timeline and the instrument's frame).
 */
#include "bench_path.h"

#include <math.h>
#include <string.h>

/* segment ends, s */
static const double ts__seg[5] = {0.0, 1.0, 3.0, 8.0, TS_BENCH_PATH_DURATION};

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static void cross3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}

static int finite3(const double a[3]) { return isfinite(a[0]) && isfinite(a[1]) && isfinite(a[2]); }

int ts_bench_path_init(ts_bench_path *p, const double point[3], const double normal[3],
                       const double drag_hint[3]) {
  if (!p || !point || !normal || !drag_hint) return -1;
  if (!finite3(point) || !finite3(normal) || !finite3(drag_hint)) return -1;
  memset(p, 0, sizeof *p);
  double nl = sqrt(dot3(normal, normal));
  if (!(nl > 0)) return -1;
  for (int k = 0; k < 3; k++) {
    p->centre[k] = point[k];
    p->normal[k] = normal[k] / nl;
  }
  double hn = dot3(drag_hint, p->normal), hl = sqrt(dot3(drag_hint, drag_hint));
  for (int k = 0; k < 3; k++) p->drag[k] = drag_hint[k] - hn * p->normal[k];
  double dl = sqrt(dot3(p->drag, p->drag));
  if (!(dl > 1e-6 * hl)) return -1;
  for (int k = 0; k < 3; k++) p->drag[k] /= dl;
  p->clearance = TS_BENCH_PATH_CLEARANCE;
  p->press = TS_BENCH_PATH_PRESS;
  p->drag_len = TS_BENCH_PATH_DRAG;
  return 0;
}

/* 0 -> 1 with zero slope at both ends */
static double smoothstep(double u) {
  u = u < 0 ? 0 : u > 1 ? 1 : u;
  return u * u * (3.0 - 2.0 * u);
}

static double seg_u(double t, int i) {
  return smoothstep((t - ts__seg[i]) / (ts__seg[i + 1] - ts__seg[i]));
}

void ts_bench_path_tip(const ts_bench_path *p, double t, double tip[3]) {
  if (!(t >= 0)) t = 0; /* also NaN */
  if (t > TS_BENCH_PATH_DURATION) t = TS_BENCH_PATH_DURATION;
  double height, along; /* along the normal from the surface; along the drag from its start */
  if (t < ts__seg[1]) {
    height = p->clearance * (1.0 - seg_u(t, 0));
    along = 0;
  } else if (t < ts__seg[2]) {
    height = -p->press * seg_u(t, 1);
    along = 0;
  } else if (t < ts__seg[3]) {
    height = -p->press;
    along = p->drag_len * seg_u(t, 2);
  } else {
    height = -p->press + (p->press + p->clearance) * seg_u(t, 3);
    along = p->drag_len;
  }
  along -= 0.5 * p->drag_len; /* centred on p->centre */
  for (int k = 0; k < 3; k++) tip[k] = p->centre[k] + height * p->normal[k] + along * p->drag[k];
}

const char *ts_bench_path_phase(double t) {
  if (t < ts__seg[1]) return "approach";
  if (t < ts__seg[2]) return "press";
  if (t < ts__seg[3]) return "drag";
  return "lift";
}

/* Unit quaternion (w, x, y, z) rotating unit vector u onto unit vector v. */
static void quat_between(const double u[3], const double v[3], double q[4]) {
  double c = dot3(u, v), ax[3];
  if (c < -1.0 + 1e-12) { /* opposite: half a turn about any axis normal to u */
    const double e[3] = {fabs(u[0]) < 0.9 ? 1.0 : 0.0, fabs(u[0]) < 0.9 ? 0.0 : 1.0, 0.0};
    cross3(u, e, ax);
    double l = sqrt(dot3(ax, ax));
    q[0] = 0;
    for (int k = 0; k < 3; k++) q[k + 1] = ax[k] / l;
    return;
  }
  cross3(u, v, ax);
  q[0] = 1.0 + c;
  for (int k = 0; k < 3; k++) q[k + 1] = ax[k];
  double l = sqrt(q[0] * q[0] + dot3(ax, ax));
  for (int k = 0; k < 4; k++) q[k] /= l;
}

void ts_bench_path_sphere(const ts_bench_path *p, double t, double radius, ts_tool *out) {
  memset(out, 0, sizeof *out);
  out->kind = TS_TOOL_SPHERE;
  out->active = 1;
  out->radius = radius;
  double tip[3];
  ts_bench_path_tip(p, t, tip);
  for (int k = 0; k < 3; k++) out->pos[k] = tip[k] + radius * p->normal[k];
  const double up[3] = {0, 1, 0};
  quat_between(up, p->normal, out->quat);
}

void ts_bench_path_instrument_quat(const ts_bench_path *p, double quat[4]) {
  const double z[3] = {0, 0, 1};
  const double in[3] = {-p->normal[0], -p->normal[1], -p->normal[2]};
  quat_between(z, in, quat);
}

int ts_bench_instrument_tip(const ts_mesh *m, double tip[3]) {
  if (!m || m->n_verts == 0 || !m->v) return -1;
  uint32_t best = 0;
  for (uint32_t i = 1; i < m->n_verts; i++)
    if (m->v[i][2] > m->v[best][2]) best = i;
  for (int k = 0; k < 3; k++) tip[k] = m->v[best][k];
  return 0;
}

void ts_bench_path_instrument_pose(const ts_bench_path *p, double t, const double tip_local[3],
                                   double scale, double R[3][3], double trans[3]) {
  double q[4];
  ts_bench_path_instrument_quat(p, q);
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  R[0][0] = 1 - 2 * (y * y + z * z);
  R[0][1] = 2 * (x * y - w * z);
  R[0][2] = 2 * (x * z + w * y);
  R[1][0] = 2 * (x * y + w * z);
  R[1][1] = 1 - 2 * (x * x + z * z);
  R[1][2] = 2 * (y * z - w * x);
  R[2][0] = 2 * (x * z - w * y);
  R[2][1] = 2 * (y * z + w * x);
  R[2][2] = 1 - 2 * (x * x + y * y);
  double tip[3];
  ts_bench_path_tip(p, t, tip);
  for (int r = 0; r < 3; r++)
    trans[r] = tip[r] - scale * (R[r][0] * tip_local[0] + R[r][1] * tip_local[1] +
                                 R[r][2] * tip_local[2]);
}
