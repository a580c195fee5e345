/*
 * ts_grasp.c: grasper jaws holding tissue (ts_grasp.h): attach the touched
 * vertices in the tool frame when the jaws close, hold them there as rigid
 * position constraints, release when the jaws open.
 */
#include "ts_grasp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

ts_grasp_def ts_default_grasp_def(void) {
  ts_grasp_def d = {.close_below = 0.2, .open_above = 0.4, .reach = 5e-4};
  return d;
}

int ts_grasp_init(ts_grasp *g, const ts_grasp_def *def, uint32_t n_points, uint32_t cap) {
  if (!g) return TS_EINVAL;
  memset(g, 0, sizeof *g);
  ts_grasp_def d = def ? *def : ts_default_grasp_def();
  if (!(d.close_below >= 0) || !(d.open_above > d.close_below) || !(d.open_above <= 1) ||
      !(d.reach >= 0) || !isfinite(d.reach) || n_points == 0 || cap == 0)
    return TS_EINVAL;
  g->def = d;
  g->last_jaw = 1;
  g->n_points = n_points;
  g->cap = cap;
  g->node = calloc(cap, sizeof *g->node);
  g->local = calloc(cap, sizeof *g->local);
  g->imp = calloc(cap, sizeof *g->imp);
  g->held = calloc(n_points, sizeof *g->held);
  if (!g->node || !g->local || !g->imp || !g->held) {
    ts_grasp_free(g);
    return TS_ENOMEM;
  }
  return 0;
}

void ts_grasp_free(ts_grasp *g) {
  if (!g) return;
  free(g->node);
  free(g->local);
  free(g->imp);
  free(g->held);
  memset(g, 0, sizeof *g);
}

const uint8_t *ts_grasp_held(const ts_grasp *g) { return g ? g->held : NULL; }

void ts_grasp_release(ts_grasp *g) {
  if (!g || !g->held) return;
  for (uint32_t j = 0; j < g->n; j++) g->held[g->node[j]] = 0;
  g->n = 0;
  g->closed = 0;
  g->last_jaw = 1;
}

int ts_grasp_update(ts_grasp *g, const ts_posed_tool *tool, const ts_contact_ws *ws,
                    const double (*x)[3]) {
  if (!g || !g->held || !tool || !tool->tree || !ws || !x) return TS_EINVAL;
  if (tool->tree->kind != TS_SHAPE_JAWS) {
    if (g->closed) ts_grasp_release(g);
    return 0;
  }
  const double jaw = tool->pose.jaw;
  /* Closed jaws hold what they took until they open past open_above. They
   * take vertices while they close: when they first pass below close_below,
   * and at every further narrowing, so tissue the jaws reach only as they
   * pinch (coarse meshes: the nearest node lies between the jaws) is held
   * too; closed jaws that stay put or move take nothing new. */
  if (g->closed && jaw > g->def.open_above) {
    ts_grasp_release(g);
    g->last_jaw = jaw;
    return 0;
  }
  const int closing = !g->closed ? jaw < g->def.close_below : jaw < g->last_jaw;
  g->last_jaw = jaw;
  if (!closing) return (int)g->n;
  if (!g->closed) g->dropped = 0;
  g->closed = 1;
  for (uint32_t j = 0; j < ws->n; j++) {
    const uint32_t i = ws->v[j].node;
    if (i >= g->n_points || g->held[i]) continue;
    if (!(ts_contact_tool_sdf(tool, x[i], NULL) <= g->def.reach)) continue;
    if (g->n == g->cap) {
      g->dropped++;
      continue;
    }
    double w[3];
    for (int k = 0; k < 3; k++) w[k] = x[i][k] - tool->pose.p[k];
    double *l = g->local[g->n];
    for (int k = 0; k < 3; k++) l[k] = tool->R[0][k] * w[0] + tool->R[1][k] * w[1] + tool->R[2][k] * w[2];
    g->node[g->n] = i;
    memset(g->imp[g->n], 0, sizeof g->imp[g->n]);
    g->held[i] = 1;
    g->n++;
  }
  return g->dropped ? TS_EFULL : (int)g->n;
}

void ts_grasp_clear_impulses(ts_grasp *g) {
  if (g && g->imp) memset(g->imp, 0, sizeof *g->imp * g->cap);
}

int ts_grasp_project(ts_grasp *g, const ts_posed_tool *tool, double (*x)[3],
                     const double *inv_mass) {
  if (!g || !tool || !x || !inv_mass) return TS_EINVAL;
  memcpy(g->p, tool->pose.p, sizeof g->p);
  for (uint32_t j = 0; j < g->n; j++) {
    const uint32_t i = g->node[j];
    if (!(inv_mass[i] > 0)) continue;
    const double *l = g->local[j];
    const double mass = 1.0 / inv_mass[i];
    for (int k = 0; k < 3; k++) {
      const double target =
          tool->R[k][0] * l[0] + tool->R[k][1] * l[1] + tool->R[k][2] * l[2] + tool->pose.p[k];
      g->imp[j][k] += mass * (target - x[i][k]);
      x[i][k] = target;
    }
  }
  return 0;
}

void ts_grasp_reaction(const ts_grasp *g, const double (*x)[3], double scale, double force[3],
                       double torque[3]) {
  double f[3] = {0, 0, 0}, tq[3] = {0, 0, 0};
  if (g && x) {
    for (uint32_t j = 0; j < g->n; j++) {
      double fi[3], r[3];
      for (int k = 0; k < 3; k++) {
        fi[k] = -scale * g->imp[j][k];
        r[k] = x[g->node[j]][k] - g->p[k];
        f[k] += fi[k];
      }
      tq[0] += r[1] * fi[2] - r[2] * fi[1];
      tq[1] += r[2] * fi[0] - r[0] * fi[2];
      tq[2] += r[0] * fi[1] - r[1] * fi[0];
    }
  }
  if (force) memcpy(force, f, sizeof f);
  if (torque) memcpy(torque, tq, sizeof tq);
}
