/*
 * ts_tissue.h: the simulated tissue, the core library's central object.
 *
 * A tissue is a set of nodes (hot per-node state in flat arrays, double
 * precision so that convergence and equilibrium tests can be checked against
 * analytic numbers), springs between them, and the render surface (triangles
 * grouped by layer). The nodes are arranged in sheets: sheet 0 is the outer
 * surface (mucosa side); tissue layer i is the slab between sheet i and
 * sheet i+1, so N layers give N+1 sheets of `nodes_per_sheet` nodes each,
 * node (s, j) at index s*nodes_per_sheet + j.
 *
 * The core knows nothing of sockets, SQLite or protobuf; the daemon drives it
 * through create, step and query calls (ts_massspring.h, ts_tool.h).
 */
#ifndef TS_TISSUE_H
#define TS_TISSUE_H

#include <stddef.h>
#include <stdint.h>

#define TS_MAX_LAYERS 8
#define TS_NAME_MAX 32

/* One tissue layer's material, linear for now (issue 3 brings the exponential,
 * anisotropic law). */
typedef struct ts_layer {
  char name[TS_NAME_MAX]; /* "mucosa" */
  double thickness;       /* m */
  double young;           /* E, Pa */
  double density;         /* kg/m^3 */
  double damping_ratio;   /* Kelvin damper as a fraction of critical, per spring */
} ts_layer;

typedef struct ts_spring {
  uint32_t a, b;   /* node indices, a < b */
  double rest;     /* rest length L, m */
  double k;        /* stiffness E*A/L, N/m */
  double c;        /* damper eta, N*s/m */
  uint8_t layer;   /* material layer it belongs to */
  uint8_t kind;    /* TS_SPRING_* */
} ts_spring;

enum { TS_SPRING_EDGE = 0, TS_SPRING_INTERLAYER = 1, TS_SPRING_SHEAR = 2 };

typedef struct ts_tissue {
  /* hot per-node state */
  uint32_t n_nodes;
  double (*x)[3];     /* positions, m */
  double (*v)[3];     /* velocities, m/s */
  double (*f)[3];     /* force accumulator, N */
  double *inv_mass;   /* 1/kg; 0 for anchored nodes */
  double (*rest)[3];  /* rest positions (reset, anchors) */

  uint32_t n_springs;
  ts_spring *springs;

  /* render surface: triangles grouped by layer index, in order */
  uint32_t n_tris;
  uint32_t (*tris)[3];
  uint32_t n_layers;                         /* tissue layers */
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t layer_tri_count[TS_MAX_LAYERS + 1]; /* render groups: one per layer */
  uint32_t n_render_groups;
  char render_group_name[TS_MAX_LAYERS + 1][TS_NAME_MAX];

  uint32_t n_sheets;
  uint32_t nodes_per_sheet;

  double gravity[3];  /* m/s^2 */
  double drag;        /* mass-proportional damping, 1/s: the viscous drag of the
                         surrounding medium that settles the slow bending modes
                         the per-spring dampers hardly touch */
  double stable_dt;   /* cached ts_massspring_stable_dt (s), set by the
                         builders; 0 = not computed (the first step then uses
                         the plain, looser Gershgorin bound). Set it back to 0
                         after changing springs, masses or drag. */
  double time;        /* simulated seconds */
  uint64_t steps;
} ts_tissue;

/* The built-in stomach-wall patch: a gently curved square sheet, three layers,
 * boundary anchored. The outer surface faces +y; layers stack towards -y. */
typedef struct ts_patch_def {
  double size;            /* edge length of the square, m (0.08) */
  uint32_t resolution;    /* nodes along an edge per sheet (24) */
  double curvature_radius;/* radius of the gentle dome, m (0.15); 0 = flat */
  uint32_t n_layers;      /* 3 */
  ts_layer layers[TS_MAX_LAYERS];
  double gravity[3];
  double drag;            /* mass-proportional damping, 1/s (>= 0) */
} ts_patch_def;

/* Defaults: 80 mm patch, 24x24 nodes per sheet, mucosa 1.0 mm / submucosa
 * 1.5 mm / muscularis 2.0 mm with soft-tissue moduli, gravity -9.81 y. */
ts_patch_def ts_default_patch_def(void);

/* Builds the patch; returns 0 or a negative ts_errno. */
int ts_patch_create(const ts_patch_def *def, ts_tissue **out);

/* Allocates a zeroed tissue with room for n_nodes nodes, n_springs springs and
 * n_tris triangles (counts set, arrays zeroed), for builders other than the
 * patch (hand-made test tissues, mesh import). Returns 0, TS_EINVAL for
 * n_nodes == 0, or TS_ENOMEM. */
int ts_tissue_alloc(uint32_t n_nodes, uint32_t n_springs, uint32_t n_tris, ts_tissue **out);

void ts_tissue_destroy(ts_tissue *t);

/* Puts every node back at rest with zero velocity. */
void ts_tissue_reset(ts_tissue *t);

/* Axis-aligned bounds of the current positions. */
void ts_tissue_bounds(const ts_tissue *t, double lo[3], double hi[3]);

#endif
