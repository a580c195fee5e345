/*
 * tl_path.c: tissueload's clock and the standard tool path its controllers
 * follow (DESIGN.md: approach, press 8 mm, drag 20 mm, lift; one 10 s cycle
 * of simulated time).
 */
#include "tl_run.h"

#include <math.h>
#include <time.h>

uint64_t tl_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static double smoothstep(double u) {
  u = u < 0 ? 0 : u > 1 ? 1 : u;
  return u * u * (3 - 2 * u);
}

/* The standard path over the patch's top centre (y = 0, outward normal +y),
 * dragged along +x and offset along z per controller: the tip's height and
 * x at time t of the 10 s cycle, then the sphere centre one radius above. */
void tl_path_pose(double t, double z, double pos[3]) {
  const double clear = 0.005, press = 0.008, drag = 0.020;
  t = fmod(t, TL_PATH_PERIOD);
  if (t < 0) t += TL_PATH_PERIOD;
  double y, x = -drag / 2;
  if (t < 1) {
    y = clear - clear * smoothstep(t);
  } else if (t < 3) {
    y = -press * smoothstep((t - 1) / 2);
  } else if (t < 8) {
    y = -press;
    x = -drag / 2 + drag * smoothstep((t - 3) / 5);
  } else {
    y = -press + (press + clear) * smoothstep((t - 8) / 2);
    x = drag / 2;
  }
  pos[0] = x;
  pos[1] = y + TL_RADIUS;
  pos[2] = z;
}
