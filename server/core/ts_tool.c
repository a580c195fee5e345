/*
 * ts_tool.c: the skeleton's narrow phase for rigid tools: signed distance from
 * a point to a sphere or a capsule (see ts_tool.h). The mass-spring step
 * (ts_massspring.c) uses the core segment directly so that it can reject far
 * nodes cheaply before computing a distance. And the check of a tool's
 * friction coefficients (ts_tool_friction_valid).
 */
#include "ts_tool.h"

#include <math.h>

#include "ts_error.h"

int ts_tool_friction_valid(double mu_static, double mu_kinetic) {
  if (!isfinite(mu_static) || !isfinite(mu_kinetic)) return TS_EINVAL;
  if (!(mu_kinetic >= 0) || !(mu_kinetic <= mu_static) || !(mu_static <= TS_TOOL_MU_MAX))
    return TS_EINVAL;
  return 0;
}

void ts_tool_segment(const ts_tool *tool, double a[3], double b[3]) {
  for (int i = 0; i < 3; i++) a[i] = b[i] = tool->pos[i];
  if (tool->kind != TS_TOOL_CAPSULE || !(tool->length > 0)) return;
  double w = tool->quat[0], x = tool->quat[1], y = tool->quat[2], z = tool->quat[3];
  double n2 = w * w + x * x + y * y + z * z;
  double axis[3] = {0.0, 1.0, 0.0};
  if (n2 > 0 && isfinite(n2)) {
    /* local +y rotated by the (normalised) quaternion: the second column of
     * its rotation matrix */
    double s = 2.0 / n2;
    axis[0] = s * (x * y - w * z);
    axis[1] = 1.0 - s * (x * x + z * z);
    axis[2] = s * (y * z + w * x);
  }
  for (int i = 0; i < 3; i++) b[i] = a[i] + tool->length * axis[i];
}

double ts_tool_distance(const ts_tool *tool, const double p[3], double normal_out[3]) {
  double a[3], b[3];
  ts_tool_segment(tool, a, b);
  /* closest point c on the segment [a, b] to p */
  double ab[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  double ap[3] = {p[0] - a[0], p[1] - a[1], p[2] - a[2]};
  double len2 = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
  double u = 0.0;
  if (len2 > 0) {
    u = (ap[0] * ab[0] + ap[1] * ab[1] + ap[2] * ab[2]) / len2;
    u = u < 0 ? 0 : u > 1 ? 1 : u;
  }
  double d[3] = {ap[0] - u * ab[0], ap[1] - u * ab[1], ap[2] - u * ab[2]};
  double r = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (normal_out) {
    if (r > 0) {
      for (int i = 0; i < 3; i++) normal_out[i] = d[i] / r;
    } else {
      /* p on the core itself: any direction is a shortest way out; +y (up,
       * away from the tissue) is the useful one */
      normal_out[0] = 0.0;
      normal_out[1] = 1.0;
      normal_out[2] = 0.0;
    }
  }
  return r - tool->radius;
}
