/*
 * ts_xpbd_internal.h: what the files of the position-based solver share
 * (not a public interface; ts_xpbd.h is): the solver's private data (struct
 * ts_xpbd: its constraints in sweep order, their multipliers and per-substep
 * constants, the contact buffers, the tools' previous segments), a tool as
 * one step sees it, and the functions each file gives the others. The
 * solver is split by concept:
 *   ts_xpbd.c             the method (top comment), creation and the queries;
 *   ts_xpbd_compliance.c  material to compliance: a spring's distance
 *                         constraint and its per-substep tangent;
 *   ts_xpbd_sheets.c      the sheet structure and the bending and volume
 *                         constraints made from it;
 *   ts_xpbd_order.c       the constraints' sweep order (colouring);
 *   ts_xpbd_geom.c        the dihedral angle and the prism volume;
 *   ts_xpbd_sweep.c       the Gauss-Seidel sweeps over the constraints;
 *   ts_xpbd_contact.c     the tools: node-wise contact and the tree-based path;
 *   ts_xpbd_step.c        the step: the substep loop;
 *   ts_xpbd_forces.c      the constraints' forces on the nodes (haptics);
 *   ts_xpbd_guard.c       the inversion guard (layers kept the right way up).
 */
#ifndef TS_XPBD_INTERNAL_H
#define TS_XPBD_INTERNAL_H

#include <stdint.h>

#include "ts_fold_guard.h"
#include "ts_tissue.h"
#include "ts_tool.h"
#include "ts_self_contact.h"
#include "ts_xpbd.h"

#define TS__MAX_SPEED 100.0 /* m/s: faster than any tissue moves */
#define TS__MAX_DT 1.0      /* s */
#define TS__MAX_TOOLS 64
#define TS__MAX_ITER 1000u
#define TS__MAX_SUB 10000u
#define TS__AUTO_H_OMEGA 0.8 /* h * omega of the automatic substep */
#define TS__PI 3.14159265358979323846

typedef struct ts__dist {
  uint32_t a, b;
  double rest;   /* L0, m */
  double alpha0; /* small-strain compliance 1 / (k1 + k2), m/N; 0 = rigid */
  double w1, b1; /* the law's terms as fractions of k1 + k2: k(s) / (k1 + k2) */
  double w2, b2; /* = w1 e^(b1 s) + w2 e^(b2 s) */
  double c;      /* damper in parallel, N s/m (def.spring_dampers) */
} ts__dist;

typedef struct ts__bend {
  uint32_t p[4]; /* hinge p0-p1, wings p2, p3 */
  double theta0; /* rad */
  double alpha;  /* 1/(N m) */
} ts__bend;

typedef struct ts__vol {
  uint32_t p[6]; /* triangle p0..p2, swept to p3..p5 */
  double v0;     /* m^3, signed */
  double alpha;  /* m^3/Pa */
} ts__vol;

typedef struct ts__contact {
  uint32_t node, tool; /* tool: index into the step's prepared tools */
  double lambda;
  double n[3]; /* outward normal at the last projection */
} ts__contact;

typedef struct ts__prev_tool {
  int valid;
  int kind;
  double a[3], b[3]; /* core segment at the previous step */
} ts__prev_tool;

struct ts_xpbd {
  ts_xpbd_def def; /* compliance pointer cleared */
  uint32_t n_nodes, n_springs;
  double omega;    /* mean sqrt(k w) of the compliant distance constraints, 1/s */

  ts__dist *dist;     /* n_springs, in sweep order (by colour, ts_xpbd_order.c) */
  uint32_t *spring_of; /* n_springs: the tissue spring of each */
  int rest_blended;    /* dist[].rest blended by a refinement's hand-over
                          (ts_handover.h) in the last step */
  double *lam_d, *sum_d;
  /* per substep (ts__xpbd_linearise_distance), in sweep order: */
  double *rest_now; /* rest length of the constraint, m */
  double *at;       /* alpha~ = alpha / h^2 */
  double *gamma;    /* gamma (all 0 without dampers) */
  double *inv_den;  /* 1 / ((1 + gamma) w + alpha~), 0 if w = 0 */
  int has_gamma;    /* some gamma > 0 */
  uint32_t n_bend;
  ts__bend *bend;
  double *lam_b, *sum_b;
  uint32_t n_vol;
  ts__vol *vol;
  double *lam_v, *sum_v;

  double *compliance; /* n_springs, tissue order: the small-strain alpha0 */
  double *tension;    /* n_springs */
  double force_scale; /* 1 / (h^2 * substeps) of the last step: mean force = sum * scale */

  double (*x_prev)[3];
  ts__contact *contacts;
  uint32_t cap_contacts, n_contacts;
  ts_xpbd_contact *contact_out;
  uint32_t n_contact_out;
  /* self-contact (ts_xpbd_set_self_contact): the caller's workspace and the
   * tree it detects through; NULL: none */
  ts_self_contact *self;
  ts_aabb_tree *self_tree;

  ts__prev_tool prev[TS__MAX_TOOLS];

  /* the inversion guard (ts_xpbd_guard.c; NULL: a tissue without layers or
   * def.fold_guard 0): its prisms and list, the multipliers of the listed
   * prisms' corner tetrahedra (6 a prism, in list order), the nodes near
   * the tools at the end of this step (touched, for the next one), and
   * those of the last step's end (near_list, and a mark per node), whose
   * prisms the guard leaves to the tools */
  ts_fold_guard *guard;
  double *lam_g;
  uint32_t *touched, *near_list;
  uint32_t n_touched, n_near;
  uint8_t *near;
};

/* A sphere or capsule tool (ts_tool) as one step sees it. */
typedef struct ts__ptool {
  ts_tool *tool;
  uint32_t index;          /* in the caller's array */
  double a0[3], b0[3];     /* core segment at the start of the step */
  double a1[3], b1[3];     /* and at its end */
  double a[3], ab[3];      /* this substep: a + u * ab, u in [0, 1] */
  double inv_len2;         /* 1 / |ab|^2, 0 for a sphere */
  double r;
  double bc[3], reach2;    /* bounding sphere of the tool plus margin: centre, radius^2 */
  double force[3];         /* sum over substeps of the reaction * h^2 */
} ts__ptool;

/* ---- small vector helpers ---- */

static inline void ts__xpbd_sub3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[0] - b[0];
  o[1] = a[1] - b[1];
  o[2] = a[2] - b[2];
}
static inline void ts__xpbd_cross3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}
static inline double ts__xpbd_dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* ---- creation (ts_xpbd_sheets.c, ts_xpbd_order.c, ts_xpbd_compliance.c) ---- */

/* The tissue's sheet triangulation, in column indices (node (s, j) of
 * column j in sheet s is node[s * nps + j], the tissue's column map, so a
 * refined tissue, whose new nodes are appended, has its constraints as a
 * built one), with its unique edges and their per-sheet areas: what the
 * bending and volume constraints are made from. */
typedef struct ts__sheets {
  uint32_t S, nps, T, E;
  uint32_t *node;       /* S * nps: (sheet, column) -> tissue node */
  uint32_t (*tri)[3];   /* T triangles */
  uint32_t (*tri_e)[3]; /* their edges: tri_e[k][i] is edge (tri[k][i], tri[k][i+1]) */
  uint64_t *ekey;       /* E sorted keys lo << 32 | hi */
  uint32_t *ecount;     /* triangles on each edge */
  uint32_t (*eopp)[2];  /* the opposite vertices of the first two */
  double *earea;        /* S * E: area of the sheet triangles on the edge */
} ts__sheets;

/* Reads the sheet structure of t: TS_EINVAL when it has none. */
int ts__xpbd_sheets_build(const ts_tissue *t, ts__sheets *sh);
void ts__xpbd_sheets_free(ts__sheets *sh);

/* Bending constraints of every interior sheet edge of every sheet. */
int ts__xpbd_add_bending(ts_xpbd *s, const ts_tissue *t, const ts__sheets *sh);

/* Volume constraints of every prism of every slab. */
int ts__xpbd_add_volume(ts_xpbd *s, const ts_tissue *t, const ts__sheets *sh);

/* Puts n constraints of `size` bytes, each starting with k uint32_t node
 * indices, into colour order (ts_xpbd_order.c). */
int ts__xpbd_reorder(void *items, uint32_t n, size_t size, int k, uint32_t n_nodes);

/* The distance constraints into colour order, remembering their springs. */
int ts__xpbd_reorder_distance(ts_xpbd *s);

/* A spring's distance constraint (ts_xpbd_compliance.c). TS_EINVAL for a
 * spring the solver cannot take. */
int ts__xpbd_make_distance(const ts_spring *sp, uint32_t n_nodes, const ts_xpbd_def *def,
                           double given, ts__dist *d);

/* ---- the step (ts_xpbd_compliance.c, ts_xpbd_sweep.c, ts_xpbd_contact.c) ---- */

/* Per-substep constants of the distance constraints, from the positions at
 * the start of the substep (x_prev). */
void ts__xpbd_linearise_distance(ts_xpbd *s, const ts_tissue *t, double h, double beta);

/* One sweep over the distance constraints; returns the largest |C +
 * alpha~ lambda| met. */
double ts__xpbd_sweep_distance(ts_xpbd *s, ts_tissue *t);
void ts__xpbd_sweep_bending(ts_xpbd *s, ts_tissue *t, double ih2, double bh);
void ts__xpbd_sweep_volume(ts_xpbd *s, ts_tissue *t, double ih2, double bh);

/* A sphere or capsule tool: TS_ENAN / TS_EINVAL for one the step refuses. */
int ts__xpbd_valid_tool(const ts_tool *tl);

/* The tool's segment at fraction u of the step. */
void ts__xpbd_place_tool(ts__ptool *p, double u);

/* The contact candidates of the node-wise tools, into s->contacts;
 * returns their count, *dropped counts those over the buffer. */
uint32_t ts__xpbd_gather_contacts(ts_xpbd *s, const ts_tissue *t, ts__ptool *pt, int np,
                                  uint32_t *dropped);

/* Rigid, frictionless contact with the node-wise tools; depth: a
 * refinement's contact allowances at weight wh (NULL: none). */
void ts__xpbd_sweep_contacts(ts_xpbd *s, ts_tissue *t, const ts__ptool *pt, const double *depth,
                             double wh);

/* The tree-based tools: checked and placed at their start pose; their
 * candidates and grasps at substep k of nsub (returns the candidates
 * dropped); their grasps and contacts projected in a sweep. */
int ts__xpbd_valid_posed(const ts_tissue *t, ts_aabb_tree *tree, ts_xpbd_tool *pt, int n);
/* Their surface tree refitted for t->x at a substep's start: watched
 * (ts_aabb_tree_refit_watched) when slack > 0 and moved, a bound on every
 * node's move since the last full refit, is within it; else in full (with
 * the list of points within slack of their escape when slack > 0).
 * Returns 1 when the bound restarts at t->x (a full refit or a rebuild),
 * 0 when it goes on, -1 when the refit was refused (a position not finite:
 * the tree is unchanged, and the next refit must be full). */
int ts__xpbd_refit_posed(const ts_tissue *t, ts_aabb_tree *tree, double moved, double slack);
uint32_t ts__xpbd_begin_posed(ts_tissue *t, ts_aabb_tree *tree, ts_xpbd_tool *pt, int n,
                              uint32_t k, uint32_t nsub);
/* Their candidates' plan (ts_contact_plan) after the refit of substep k
 * of nsub that returned rb: made from that substep's pose to the step's
 * end when the bound restarts (rb 1) and is watched (slack > 0), kept
 * while it goes on (rb 0), dropped otherwise (and by n_sub 0: the step's
 * end). */
void ts__xpbd_plan_posed(ts_aabb_tree *tree, ts_xpbd_tool *pt, int n, uint32_t k, uint32_t nsub,
                         int rb, double slack);
void ts__xpbd_sweep_posed(ts_xpbd *s, ts_tissue *t, ts_xpbd_tool *pt, int n, int sweep,
                          const double *hdepth, double wh);

/* ---- the inversion guard (ts_xpbd_guard.c) ---- */

/* Its prisms for t (s->guard stays NULL for a tissue without layers):
 * 0 or TS_ENOMEM (the caller frees with ts__xpbd_guard_free). */
int ts__xpbd_guard_make(ts_xpbd *s, const ts_tissue *t);
void ts__xpbd_guard_free(ts_xpbd *s);
/* A node near a tool at the step's end (a contact candidate, a held
 * node), which the next step's guard leaves alone. */
void ts__xpbd_guard_touch(ts_xpbd *s, uint32_t node);
/* The step's list at t->x, and its nodes near the tools (the ones noted
 * since the last call); returns the list's length. */
uint32_t ts__xpbd_guard_watch(ts_xpbd *s, const ts_tissue *t);
/* Lists nothing (the tissue was reset). */
void ts__xpbd_guard_forget(ts_xpbd *s);
/* One sweep over the listed corner tetrahedra of the prisms with no node
 * near a tool (first: the substep's first sweep, which starts the
 * multipliers at 0); returns how many were under r_min. */
uint32_t ts__xpbd_sweep_guard(ts_xpbd *s, ts_tissue *t, double ih2, int first);

/* Why a step went bad (ts_xpbd_diverge.c): the first node found. */
typedef struct ts__xpbd_why {
  int why;          /* TS_DIVERGED_* (ts_diverged.h), 0 none */
  uint32_t node;
  double speed;     /* m/s */
  uint32_t substep; /* 1-based */
} ts__xpbd_why;
/* Notes node's test: a non-finite position, else velocity (v2 its speed
 * squared), else a speed over TS__MAX_SPEED; only the first call counts. */
void ts__xpbd_why_note(ts__xpbd_why *w, const double x[3], double v2, uint32_t node, uint32_t substep);

#endif
