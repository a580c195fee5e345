/*
 * ts_tissue.h: the simulated tissue, the core library's central object.
 *
 * A tissue is a set of nodes (hot per-node state in flat arrays, double
 * precision so that convergence and equilibrium tests can be checked against
 * analytic numbers), springs between them, and the render surface (triangles
 * grouped by layer). The nodes are arranged in sheets: sheet 0 is the outer
 * surface (mucosa side); tissue layer i is the slab between sheet i and
 * sheet i+1, so N layers give N+1 sheets. Column j is the extrusion line of
 * surface point j: one node in every sheet. A built tissue has
 * `nodes_per_sheet` nodes in each sheet, node (s, j) at index
 * s*nodes_per_sheet + j (the sheet layout); a refined one keeps its old
 * nodes' indices and appends the new ones (ts_refine.h), so its (sheet,
 * column) -> node map is no longer that formula and is carried in
 * `column_node` (ts_tissue_sheet_node reads either).
 *
 * Builders: ts_tissue_build turns a multi-layer extrusion (ts_extrude.h) into
 * a tissue (masses, springs with FEM-equivalent constants, dampers, anchors;
 * see ts_tissue_build.c); ts_patch_create builds the built-in stomach-wall
 * patch through it (ts_patch.c); ts_tissue_alloc gives a blank tissue for
 * hand-made ones. The material law is in ts_material.h, the step in
 * ts_massspring.h.
 *
 * The core knows nothing of sockets, SQLite or protobuf; the daemon drives it
 * through create, step and query calls (ts_massspring.h, ts_tool.h).
 */
#ifndef TS_TISSUE_H
#define TS_TISSUE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TS_MAX_LAYERS 8
#define TS_NAME_MAX 32

/* The exponential law of soft tissue, sigma = a * exp(b * strain) (Fung's
 * exponential; see ts_material.h for how the springs use it). */
typedef struct ts_law {
  double a; /* Pa, > 0 */
  double b; /* dimensionless, > 0 */
} ts_law;

/* One tissue layer's material. Along the layer's fibre direction the axial
 * law holds, across it the radial law (a spring at angle theta to the fibre
 * gets F = F_axial cos(theta) + F_radial sin(theta), ts_material.h). */
typedef struct ts_layer {
  char name[TS_NAME_MAX]; /* "mucosa" */
  double thickness;       /* m */
  double young;           /* small-strain modulus along the fibre, a * b of the
                             axial law, Pa. Derived: ts_layer_set_law and the
                             defaults keep it, the builders recompute it in the
                             tissue's copy; the laws are what the step uses. */
  double density;         /* kg/m^3 */
  double damping_ratio;   /* Kelvin damper as a fraction of critical, per spring */
  ts_law axial;           /* along the fibre */
  ts_law radial;          /* across the fibre */
  double fibre[3];        /* fibre direction (any length; projected onto the
                             local tangent plane of the surface and normalised
                             per spring). All zero: isotropic, the axial law in
                             every direction. */
  double strain_min;      /* strain limiting range: no spring of the layer is */
  double strain_max;      /* left outside [strain_min, strain_max] after a
                             substep; -1 < min < 0 < max */
} ts_layer;

/* One spring: a Kelvin element (nonlinear spring with a damper in parallel)
 * between nodes a and b. Its tension is
 *   T = (k1 e^(b1 s) + k2 e^(b2 s)) (L - rest) + c dL/dt,   s = max(strain, 0),
 * strain = L / rest - 1: the strain-dependent constant k'(strain) of the
 * exponential law, one term per material direction (already weighted by
 * cos/sin of the fibre angle), see ts_material.h. A spring with k1 = k2 = 0
 * and k > 0 is linear with constant k (hand-made tissues). */
typedef struct ts_spring {
  uint32_t a, b;     /* node indices, a < b */
  double rest;       /* rest length L0, m */
  double k;          /* small-strain stiffness k1 + k2, N/m (informational for
                        built springs; the constant of a linear hand-made one) */
  double k1, b1;     /* first term: N/m, dimensionless */
  double k2, b2;     /* second term (0, 0 when unused) */
  double c;          /* damper eta, N*s/m */
  double strain_min; /* strain limiting range; min == max == 0: not limited */
  double strain_max;
  uint8_t layer;     /* material layer it belongs to */
  uint8_t kind;      /* TS_SPRING_* */
} ts_spring;

enum { TS_SPRING_EDGE = 0, TS_SPRING_INTERLAYER = 1, TS_SPRING_SHEAR = 2 };

struct ts__ms; /* the step's private data (ts_massspring.c) */
struct ts_handover; /* a live refinement's hand-over (ts_handover.h) */

typedef struct ts_tissue {
  /* hot per-node state */
  uint32_t n_nodes;
  double (*x)[3];      /* positions, m */
  double (*v)[3];      /* velocities, m/s */
  double (*f)[3];      /* after a step: spring and damper forces of its last
                          substep, N */
  double (*f_ext)[3];  /* external forces, N, applied every substep (zero
                          unless the caller sets them) */
  double *inv_mass;    /* 1/kg; 0 for anchored nodes */
  double (*rest)[3];   /* rest positions (reset, anchors) */

  /* integrator history (ts_massspring.c; cleared by ts_tissue_reset) */
  double (*x_prev)[3]; /* positions one substep back */
  double (*acc)[3];    /* accelerations of the last substep */
  double (*acc_prev)[3]; /* and of the one before */
  uint8_t *branch;     /* TS_BRANCH_* taken by each node in the last substep */
  double h_prev;       /* last substep, s; 0 = not started (next is Taylor) */

  uint32_t n_springs;
  ts_spring *springs;

  /* render surface: triangles grouped by layer index, in order */
  uint32_t n_tris;
  uint32_t (*tris)[3];
  /* contact surface: the closed boundary of the solid (outer sheet, side
     walls, innermost sheet), the render triangles without the inner layers'
     top sheets, which lie inside the solid where no tool from outside meets
     them first. Tool contact, grasp and the mass-spring thin pass test these
     (ts_tissue_contact_tris): on patch-L the render set is about twice as
     many triangles, and contact time grew with it. The builders and the
     refinement fill it; NULL (hand-made tissues): the render triangles are
     the contact surface. Owned. */
  uint32_t n_contact_tris;
  uint32_t (*contact_tris)[3];
  uint32_t n_layers;                         /* tissue layers */
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t layer_tri_count[TS_MAX_LAYERS + 1]; /* render groups: one per layer */
  uint32_t n_render_groups;
  char render_group_name[TS_MAX_LAYERS + 1][TS_NAME_MAX];

  uint32_t n_sheets;
  uint32_t nodes_per_sheet; /* the sheet layout (node (s, j) = s * nodes_per_sheet
                         + j) when n_sheets * nodes_per_sheet == n_nodes, else 0 */
  uint32_t n_columns;   /* columns of column_node (nodes in each sheet) */
  uint32_t *column_node; /* owned, n_sheets * n_columns entries or NULL: node
                         (s, j) = column_node[s * n_columns + j], every node
                         once. The builders make it (the identity), a
                         refinement extends it (ts_refine.c); NULL: the sheet
                         layout or none (hand-made tissues) */

  double gravity[3];  /* m/s^2 */
  double drag;        /* mass-proportional damping, 1/s: the viscous drag of the
                         surrounding medium that settles the slow bending modes
                         the per-spring dampers hardly touch */
  double beeman_threshold; /* mu, N: a node whose total force changed by more
                         than this since the last substep takes Beeman's
                         step, otherwise Verlet's (ts_massspring.h) */
  uint32_t strain_iterations; /* strain-limiting passes per substep (>= 1) */
  int mass_scaling;   /* 1: selective mass scaling of the motion across the
                         sheets (ts_massspring.c); needs the columns
                         (ts_tissue_columns > 0).
                         ts_tissue_build sets it; hand-made tissues have 0 */
  uint32_t max_substeps; /* inertia scaling (ts_ms_bounds.c): at most this
                         many substeps per step, the inertia scaled up
                         uniformly so that the step stays stable; gravity,
                         drag and external forces keep the physical masses,
                         so statics are unchanged and only the dynamics slow
                         down. 0 (the default): physical masses */
  int guard_tools_only; /* 1: the mass-spring inversion guard
                         (ts_ms_guard.c) looks only under the tools, not for
                         folds elsewhere (a session with self-contact sets it:
                         its settle after the step and the guard's forces
                         fight on a fold thrown onto the tissue); 0 (the
                         default): both */
  int local_mass_scaling; /* 1: local mass scaling of a refined region
                         (ts_ms_local.c): inertia added only to the nodes
                         whose own stability bound a refinement put below
                         the unrefined tissue's, so that the substep count
                         returns to about the unrefined one; statics
                         unchanged. ts_tissue_build sets it; 0: off */
  double lms_ref[3];  /* the unrefined tissue's bounds that the local mass
                         scaling aims at (w^2, 1/s^2, and the damping rate,
                         1/s, of the springs the step leaves at their
                         lumped masses), and its largest node row (1/s^2;
                         ts_ms_local.c): recorded by the first
                         ts_massspring_prepare, kept by every tissue derived
                         from it (ts_tissue_copy_settings). Zeros: not
                         recorded (a caller that changes an unrefined
                         tissue's springs or masses zeroes them before it
                         prepares it again, so that they are recorded anew) */
  int lms_ref_sheet;  /* 1: lms_ref is over the in-sheet springs alone (the
                         unrefined tissue ran with selective mass scaling),
                         0: over every spring */
  double stable_dt;   /* largest stable substep at rest, s (cached by
                         ts_massspring_prepare; 0 = not computed) */
  double time;        /* simulated seconds */
  uint64_t steps;

  struct ts__ms *ms;  /* the step's private data; NULL until prepared */
  struct ts_handover *hand; /* owned; after a live refinement, the extra node
                         forces and contact allowances both steps fade out
                         (ts_handover.h); NULL: none */
  const atomic_int *stop; /* not owned; when set and nonzero, a step under way
                         (mass-spring, XPBD) stops before its next substep with
                         TS_ESHUTDOWN, the tissue left mid-step, and so does
                         ts_massspring_prepare's stability bounds (its tissue
                         left unprepared): a daemon that is stopping does not
                         wait out a step or a build of a huge tissue (server.h's
                         stopping); kept by the tissues derived from this one
                         (ts_tissue_copy_settings); NULL: never */
} ts_tissue;

/* Whether t->stop asks a step under way to stop (ts_tissue.stop). */
static inline int ts_tissue_stop_asked(const ts_tissue *t) {
  return t->stop && atomic_load_explicit(t->stop, memory_order_relaxed);
}

enum { TS_BRANCH_TAYLOR = 0, TS_BRANCH_VERLET = 1, TS_BRANCH_BEEMAN = 2 };

/* Defaults the builders give a new tissue. */
#define TS_DEFAULT_BEEMAN_THRESHOLD 1e-4 /* N */
#define TS_DEFAULT_STRAIN_ITERATIONS 4

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
 * 1.5 mm / muscularis 2.0 mm with the default stomach-wall materials
 * (ts_material.h), gravity -9.81 y. */
ts_patch_def ts_default_patch_def(void);

/* Builds the patch; returns 0 or a negative ts_errno (TS_EINVAL for a bad
 * definition, TS_ETOOBIG over 4 Mi nodes, TS_ENOMEM). */
int ts_patch_create(const ts_patch_def *def, ts_tissue **out);

/* The same, looking at *stop (ts_tissue.stop, set on the tissue before
 * the step's preparation, which is most of a fine patch's build: about 30
 * of 40 s at resolution 512, 20 s of it the stability bounds) in the
 * springs' build and the preparation: TS_ESHUTDOWN, and no tissue, when it
 * turns nonzero. stop may be NULL (never). */
int ts_patch_create_stoppable(const ts_patch_def *def, const atomic_int *stop, ts_tissue **out);

struct ts_extrusion; /* ts_extrude.h */

/* The patch's extrusion alone (what ts_patch_create builds the tissue from;
 * its anchors are the boundary flags on every sheet), for callers that keep
 * it to refine the tissue later (ts_refine.h). Free with
 * ts_extrusion_free. Returns as ts_patch_create. */
int ts_patch_extrusion(const ts_patch_def *def, struct ts_extrusion **out);

/* Turns a multi-layer extrusion into a tissue: node masses from the prisms,
 * springs along every sheet edge, between corresponding nodes of adjacent
 * sheets and across every prism side face, each with the constants of its
 * layer's material (ts_tissue_build.c says how), Kelvin dampers, anchors.
 * `layers` has e->n_layers entries (validated as ts_layer_validate does);
 * `anchored` has one flag per node (n_sheets * nv) or is NULL for none;
 * gravity in m/s^2. The render surface and its groups are copied from the
 * extrusion, the groups named after the layers. Returns 0, TS_EINVAL (bad
 * arguments or layers), TS_EMESH (an index out of range, a degenerate or
 * inverted prism, n_inverted > 0), TS_ETOOBIG (over 4 Mi nodes) or
 * TS_ENOMEM. */
int ts_tissue_build(const struct ts_extrusion *e, const ts_layer *layers,
                    const uint8_t *anchored, const double gravity[3], ts_tissue **out);

/* The same without the step's preparation (ts_massspring_prepare, whose
 * stability bounds are most of a large tissue's build: 5.3 s of CPU time
 * against 1.3 s for the springs, for a 250,000-node one), which the caller
 * then makes: a build that may be stopped between the two
 * (ts_mesh_tissue.h's stages). It looks at *stop (NULL: never) before each
 * layer's prisms and each sheet's springs, and returns TS_ESHUTDOWN (and no
 * tissue) when it is nonzero (ts_tissue.stop). */
int ts_tissue_build_unprepared(const struct ts_extrusion *e, const ts_layer *layers,
                               const uint8_t *anchored, const double gravity[3],
                               const atomic_int *stop, ts_tissue **out);

/* Allocates a zeroed tissue with room for n_nodes nodes, n_springs springs and
 * n_tris triangles (counts set, arrays zeroed, threshold and iteration
 * defaults set), for builders and hand-made test tissues. Returns 0, TS_EINVAL
 * for n_nodes == 0, or TS_ENOMEM. */
int ts_tissue_alloc(uint32_t n_nodes, uint32_t n_springs, uint32_t n_tris, ts_tissue **out);

void ts_tissue_destroy(ts_tissue *t);

/* Copies src's step settings and clock into dst (gravity, drag, the Beeman
 * threshold, strain-limiting passes, mass scaling, the substep cap, local
 * mass scaling and its reference bounds, time and step count): what a
 * tissue derived from another (a refinement, a region copy) keeps. Nodes, springs, layers and sheets are the caller's. */
void ts_tissue_copy_settings(ts_tissue *dst, const ts_tissue *src);

/* The contact surface's triangles (t->contact_tris, or the render
 * triangles when there is none) and their count. */
static inline uint32_t (*ts_tissue_contact_tris(const ts_tissue *t))[3] {
  return t->contact_tris ? t->contact_tris : t->tris;
}
static inline uint32_t ts_tissue_n_contact_tris(const ts_tissue *t) {
  return t->contact_tris ? t->n_contact_tris : t->n_tris;
}

/* Sets t's contact surface from e's render surface (e->n_tris triangles,
 * the ones ts_extrusion_tri_inner calls inner left out), its nodes through
 * map (extrusion node -> tissue node; NULL: the identity), replacing any
 * that t had. Returns 0, TS_EINVAL (e NULL or without triangles' array),
 * TS_ENOMEM (t unchanged). ts_tissue_contact.c. */
int ts_tissue_set_contact_extrusion(ts_tissue *t, const struct ts_extrusion *e, const uint32_t *map);

/* Sets dst's contact surface to src's triangles whose three nodes loc maps
 * (loc[i] != UINT32_MAX; loc NULL: every triangle, nodes as they are), in
 * dst's numbering: for copies of a tissue or of a region of it. When src
 * has none (its render triangles are its contact surface) dst gets none
 * either. Returns 0 or TS_ENOMEM (dst unchanged). */
int ts_tissue_copy_contact(ts_tissue *dst, const ts_tissue *src, const uint32_t *loc);

/* The number of columns of t when it has a consistent column structure:
 * n_columns with a column map (n_sheets * n_columns == n_nodes), else
 * nodes_per_sheet with the sheet layout (n_sheets * nodes_per_sheet ==
 * n_nodes), else 0 (no columns: hand-made tissues). */
uint32_t ts_tissue_columns(const ts_tissue *t);

/* The node of sheet s in column j (s < n_sheets, j < ts_tissue_columns(t),
 * which must be > 0; not checked). */
static inline uint32_t ts_tissue_sheet_node(const ts_tissue *t, uint32_t s, uint32_t j) {
  return t->column_node ? t->column_node[(size_t)s * t->n_columns + j] : s * t->nodes_per_sheet + j;
}

/* Sets t's column map to a copy of map (n_sheets * n_columns entries, node
 * (s, j) at map[s * n_columns + j]); map NULL: the identity (node (s, j) =
 * s * n_columns + j). Returns 0; TS_EINVAL when n_sheets * n_columns !=
 * n_nodes or map is not a permutation of the nodes (t's map is then left
 * as it was); TS_ENOMEM. */
int ts_tissue_set_columns(ts_tissue *t, uint32_t n_columns, const uint32_t *map);

/* Gives dst (a copy of part of src: node i of src is node loc[i] of dst,
 * UINT32_MAX when src's node is not in dst) src's column map, when src has
 * columns and every one of its nodes is in dst (a whole-tissue copy, e.g.
 * the hand-over's region copy of a whole tissue); otherwise dst gets none
 * (column_node NULL, nodes_per_sheet 0). loc NULL: the same numbering.
 * Returns 0 or TS_ENOMEM (dst then has no columns). */
int ts_tissue_copy_columns(ts_tissue *dst, const ts_tissue *src, const uint32_t *loc);

/* Puts every node back at rest with zero velocity and restarts the
 * integrator (the next substep is a Taylor step); ends a refinement's
 * hand-over. External forces stay. */
void ts_tissue_reset(ts_tissue *t);

/* Axis-aligned bounds of the current positions. */
void ts_tissue_bounds(const ts_tissue *t, double lo[3], double hi[3]);

#endif
