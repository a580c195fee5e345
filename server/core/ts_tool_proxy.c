/*
 * ts_tool_proxy.c: a tool proxy that follows the commanded pose at a bounded
 * speed (see ts_tool_proxy.h): a straight-line step of at most max_step and
 * a spherical linear interpolation (Shoemake, "Animating rotation with
 * quaternion curves", SIGGRAPH 1985) of at most max_step / reach radians.
 */
#include "ts_tool_proxy.h"

#include <math.h>
#include <string.h>

#include "ts_error.h"
#include "ts_obb_tree.h"

#define TS__JAW_DEFAULT_LENGTH 0.01 /* m: the jaws' length when the tool says 0 */

double ts_tool_reach(const ts_tool *tool) {
  double r = tool && isfinite(tool->radius) && tool->radius > 0 ? tool->radius : 0.0;
  double reach = r;
  if (!tool) return 1e-3;
  switch (tool->kind) {
  case TS_TOOL_CAPSULE:
    if (isfinite(tool->length) && tool->length > 0) reach = tool->length + r;
    break;
  case TS_TOOL_JAWS:
    reach = (isfinite(tool->length) && tool->length > 0 ? tool->length : TS__JAW_DEFAULT_LENGTH) + r;
    break;
  case TS_TOOL_MESH:
    if (tool->shape && isfinite(tool->shape->reach) && tool->shape->reach > reach)
      reach = tool->shape->reach;
    break;
  default: break;
  }
  return reach > 0 ? reach : 1e-3;
}

/* q normalised into out (the identity for a zero or non-finite q). */
static void unit_quat(const double q[4], double out[4]) {
  double n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
  if (!(n2 > 0) || !isfinite(n2)) {
    out[0] = 1, out[1] = out[2] = out[3] = 0;
    return;
  }
  double s = 1.0 / sqrt(n2);
  for (int k = 0; k < 4; k++) out[k] = q[k] * s;
}

int ts_tool_proxy_follow(ts_tool *proxy, const double pos[3], const double quat[4], double jaw,
                         double max_step) {
  if (!proxy || !pos || !quat || !(max_step >= 0)) return TS_EINVAL;
  for (int k = 0; k < 3; k++)
    if (!isfinite(pos[k])) return TS_ENAN;
  for (int k = 0; k < 4; k++)
    if (!isfinite(quat[k])) return TS_ENAN;
  if (!isfinite(jaw)) return TS_ENAN;
  if (!isfinite(proxy->pos[0] + proxy->pos[1] + proxy->pos[2])) /* never placed: jump */
    memcpy(proxy->pos, pos, sizeof proxy->pos);
  const int bounded = max_step > 0 && isfinite(max_step);
  int reached = 1;
  /* position: straight towards the command */
  double d[3], l2 = 0;
  for (int k = 0; k < 3; k++) {
    d[k] = pos[k] - proxy->pos[k];
    l2 += d[k] * d[k];
  }
  const double l = sqrt(l2);
  if (!bounded || l <= max_step) {
    memcpy(proxy->pos, pos, sizeof proxy->pos);
  } else {
    const double s = max_step / l;
    for (int k = 0; k < 3; k++) proxy->pos[k] += s * d[k];
    reached = 0;
  }
  /* orientation: along the shortest arc, by at most max_step / reach */
  double a[4], b[4];
  unit_quat(proxy->quat, a);
  unit_quat(quat, b);
  double c = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
  if (c < 0) { /* q and -q are the same rotation: take the near one */
    for (int k = 0; k < 4; k++) b[k] = -b[k];
    c = -c;
  }
  if (c > 1) c = 1;
  const double half = acos(c);  /* half the rotation angle between them */
  const double max_angle = bounded ? max_step / ts_tool_reach(proxy) : INFINITY;
  if (2 * half <= max_angle || !(half > 1e-12)) {
    memcpy(proxy->quat, quat, sizeof proxy->quat);
  } else {
    const double u = max_angle / (2 * half), sh = sin(half);
    const double wa = sin((1 - u) * half) / sh, wb = sin(u * half) / sh;
    for (int k = 0; k < 4; k++) proxy->quat[k] = wa * a[k] + wb * b[k];
    reached = 0;
  }
  /* the jaws' opening (0..1, the tips' travel about the tool's length for
   * a full stroke): by at most max_step / reach per step */
  const double dj = jaw - (isfinite(proxy->jaw) ? proxy->jaw : jaw);
  if (!bounded || fabs(dj) <= max_angle) {
    proxy->jaw = jaw;
  } else {
    proxy->jaw += dj > 0 ? max_angle : -max_angle;
    reached = 0;
  }
  return reached;
}
