/*
 * bench_path.h: the standard tool path of every benchmark (DESIGN.md,
 * "Standard scenarios"): the dental instrument
 * (../shared/data/meshes/dental_instrument_light.obj) on a fixed scripted
 * path over 10 s of simulated time: approach, press 8 mm, drag 20 mm, lift.
 *
 * The path is written once here so that every benchmark (mechanics,
 * collision, codec, ...) drives its tissue the same way and the numbers
 * compare. A scenario places it on its tissue with a surface point, the
 * outward surface normal there and a drag direction; the path then only
 * depends on the time.
 *
 * Timeline (s), each segment eased with a smoothstep so that the tip's
 * velocity is continuous and zero where segments meet:
 *   0 - 1   approach: from `clearance` above the surface down to touching it,
 *   1 - 3   press:    straight in along -normal to `press` below the surface,
 *   3 - 8   drag:     `drag_len` along the drag direction at that depth,
 *   8 - 10  lift:     back out to `clearance` above the surface.
 * "The surface" is the undeformed surface's tangent plane at the point the
 * scenario names; the drag is centred on that point.
 *
 * The instrument. Its mesh is in centimetres (like liver-smooth.obj, from
 * the same SOFA scenes); its shaft runs along the mesh's local z axis and
 * its working end (the hooked tip) is at +z. It is held with the shaft along
 * the surface normal, the tip towards the tissue. A benchmark that only
 * needs a point contact puts a sphere on the tip (ts_bench_path_sphere).
 */
#ifndef TS_BENCH_PATH_H
#define TS_BENCH_PATH_H

#include "ts_mesh.h"
#include "ts_tool.h"

#define TS_BENCH_PATH_DURATION 10.0   /* s */
#define TS_BENCH_PATH_PRESS 0.008     /* m */
#define TS_BENCH_PATH_DRAG 0.020      /* m */
#define TS_BENCH_PATH_CLEARANCE 0.005 /* m */
#define TS_BENCH_INSTRUMENT_SCALE 0.01 /* mesh units (cm) to m */
#define TS_BENCH_SPHERE_RADIUS 0.005  /* m: the protocol's default tool radius */

typedef struct ts_bench_path {
  double centre[3];  /* surface point under the middle of the drag, m */
  double normal[3];  /* unit outward surface normal there */
  double drag[3];    /* unit drag direction, perpendicular to normal */
  double clearance;  /* m: tip height above the surface at start and end */
  double press;      /* m: depth below the surface during the drag */
  double drag_len;   /* m */
} ts_bench_path;

/* Sets up the path on a surface: `point` on it, `normal` pointing out of the
 * tissue (normalised here), `drag_hint` any direction not parallel to the
 * normal (its tangential part becomes the drag direction). Standard depths
 * and lengths (the TS_BENCH_PATH_* constants). Returns 0, or -1 when a
 * vector is zero, non-finite or the hint is parallel to the normal. */
int ts_bench_path_init(ts_bench_path *p, const double point[3], const double normal[3],
                       const double drag_hint[3]);

/* The tip's position at time t (s; clamped to [0, TS_BENCH_PATH_DURATION]),
 * m. */
void ts_bench_path_tip(const ts_bench_path *p, double t, double tip[3]);

/* Name of the segment at time t: "approach", "press", "drag", "lift". */
const char *ts_bench_path_phase(double t);

/* A sphere tool of the given radius (m) whose lowest point (along -normal)
 * is the tip at time t: centre = tip + radius * normal. Fills a whole
 * ts_tool (active, identity-like orientation with local +y on the normal). */
void ts_bench_path_sphere(const ts_bench_path *p, double t, double radius, ts_tool *out);

/* Orientation (unit quaternion w, x, y, z) of the instrument held on the
 * path: it maps the mesh's local +z (the direction from the handle to the
 * tip) onto -normal. Constant over the path. */
void ts_bench_path_instrument_quat(const ts_bench_path *p, double quat[4]);

/* The instrument's tip in its own mesh coordinates (mesh units): the vertex
 * with the largest z. Returns 0, or -1 for an empty mesh. */
int ts_bench_instrument_tip(const ts_mesh *instrument, double tip[3]);

/* Places the instrument at time t: world = R * (scale * local) + trans, with
 * R from ts_bench_path_instrument_quat as a row-major 3x3 matrix and trans
 * such that the tip (mesh units, from ts_bench_instrument_tip) lands on the
 * path's tip. scale: mesh units to m (TS_BENCH_INSTRUMENT_SCALE). */
void ts_bench_path_instrument_pose(const ts_bench_path *p, double t, const double tip_local[3],
                                   double scale, double R[3][3], double trans[3]);

#endif
