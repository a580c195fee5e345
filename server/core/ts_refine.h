/*
 * ts_refine.h: local refinement of a live tissue (issue 4, "Local
 * refinement": in a running session, refinement carries the physics state
 * over and the tissue does not jump).
 *
 * A tissue built from a multi-layer extrusion (ts_tissue_build) is refined
 * by refining the extrusion's surface on a selection of outer-surface
 * triangles, through every sheet (Loop subdivision, ts_loop_extrusion, with
 * Loop's rules for the rest shape; or longest-edge bisection,
 * ts_leb_extrusion, with an edge bound that applies only on the selected
 * triangles), building a tissue from the refined extrusion, and carrying the
 * state over:
 *   - every existing node keeps its index, its position, velocity and
 *     previous position, bit for bit; new nodes are appended, sheet by sheet
 *     in the refinement's creation order, so clients only grow their buffers;
 *   - a new node's position, velocity and previous position are the midpoint
 *     of its parent edge's current ones (the linear interpolation of the
 *     state: nothing a client sees moves);
 *   - rest positions: LEB's midpoints; for Loop, either Loop's topology
 *     with midpoints (TS_LOOP_LINEAR, smooth_rest 0: what server/refine.c
 *     passes for RefineRegion.midpoint_rest) or Loop's smoothing rules made
 *     fit for a live refinement (smooth_rest 1, the live default,
 *     ts_refine_smooth.h: the offline
 *     `tissuetool mesh subdivide --loop` rest shape, TS_LOOP_SMOOTH of the
 *     same selection through every sheet, where it inverts no prism, turns
 *     no triangle over and makes no sheets cross; a vertex where it does
 *     takes a halved share of its smoothing until none does, counted in
 *     info.smooth_limited; and a blend of at least 1.5 D / smooth_rate for
 *     a largest rest change D, 2.5 mm/s by default: a rest shape moving at
 *     most 2.5 um a 1 ms step, cap 2 s, past which the smoothing is scaled
 *     back alike, info.smooth_scale).
 *     Loop's edge rule puts a new vertex 1/8 (c + d - a - b) off its edge's
 *     midpoint, and on the default patch's union jack both vertices
 *     opposite an axis edge sit over the same end of it (an eighth of the
 *     3.48 mm edge, along it): the new
 *     rest positions sit up to 0.44 mm off the midpoints where the state
 *     puts the nodes, the old inner ones move 20 um (the liver: 0.32 and
 *     0.30 mm), and the new springs start 34-43 % off their rest lengths.
 *     Measured against an unrefined twin (test_refine_smooth's
 *     smooth_live: the default patch, a pick of 24 triangles, the case of
 *     test_refine_ms / _xpbd with smooth_rest 1; load 20 on 2 cores, which
 *     changes no figure), the bound (the quantum of 10 um plus the
 *     twin's motion):
 *       with the blend of the rest change (0.262 s here): mass-spring,
 *       first step 0.005 um sagging, 0.39 um with a sphere pressed 3 mm in;
 *       no step of the blend more than 7.2 um (sagging) and 6.3 um
 *       (pressed) beyond the twin's largest move; a second refinement
 *       (LEB) 40 ms into the blend 4.7 um off in its first step (twin 1.9
 *       um), no later step more than 5.7 um beyond (as measured on
 *       2026-12-07); XPBD (fitted), first
 *       step 0.38 um sagging, 2.0 um pressed, the blend 2.5 and 5.6 um
 *       beyond the twin's: all within the bound. With the blend at 0.1 s
 *       (as before, smooth_rate 1 m/s) the sagging blend is over it (10.6
 *       um at step 32; 12.6 um measured before the hand-over in rest
 *       lengths, 11.6 um pressed);
 *       XPBD's second refinement (LEB) 40 ms into the blend 1.5 um off
 *       after its fit, no later step more than 4.2 um beyond (its fit
 *       ended 71 um off before a spring whose constants change keeps its
 *       strain during a blend, ts_handover.c);
 *     the liver pressed 2 mm and held (test_refine_smooth_liver, the
 *     daemon's build and settings, the 5 mm pick: rest change 0.38 mm, no
 *     vertex limited, blend 0.227 s): first step 6.2 um (mass-spring) and
 *     3.9 um (XPBD, fitted) off, the twin moving 62-68 um, no later step
 *     of the blend more than 6.8 um (mass-spring) and 0.73 um (XPBD)
 *     beyond the twin's largest move.
 *     On the liver's 1,000-triangle top region the unlimited smoothing
 *     inverts 7 prisms under 3 turned-over sliver triangles (which
 *     ts_refine_run would refuse); the limiter takes 6 vertices back, in 2
 *     rounds, and keeps the smoothing elsewhere (rest change up to 0.49
 *     mm, blend 0.29 s). So smooth_rest is the live default (server/refine.c),
 *     midpoints on request (RefineRegion.midpoint_rest);
 *   - springs are rebuilt locally (ts_refine_springs.c), equal to the
 *     whole build (ts_tissue_build on the refined extrusion, renumbered) to
 *     the bit and in its order: a spring with an end on a changed surface
 *     vertex (new, moved, or a corner of a triangle the refinement made or
 *     removed) is computed by the builder's own code from the volume shares
 *     of the ring of prisms around the changed vertices, which it redoes;
 *     every other spring is copied from t through the node map. Local: the
 *     ring's prism shares (about a tenth of the prisms for a 5 mm region on
 *     the liver) and those springs' constants; linear passes over the whole
 *     tissue: the node masses (computed again; changed in the region only), the
 *     sorted edge list and the springs' order, the copy, the render
 *     triangles and the step's preparation (ts_massspring_prepare sorts the
 *     hot rows, and XPBD's ts_xpbd_build colours its constraints, from the
 *     springs: their constants follow; both stay whole passes). When t's
 *     springs are not the builder's for the source (a hand-made tissue),
 *     or with opts.rebuild = TS_REFINE_REBUILD_FULL, the whole tissue is
 *     built again. Measured (tests/bench/run --quick mesh: refine_rebuild_*
 *     lines): see README's refinement paragraph;
 *   - masses: a node whose prisms weigh what they weighed keeps its mass
 *     bit for bit; the region's nodes (new, or with a prism the refinement
 *     changed) share what the region's old nodes weighed, in proportion to
 *     density times a sixth of their prisms' volumes (ts_tissue_build's
 *     rule), so the total (anchored nodes included) is the one before and
 *     the hand-over's map (ts_handover.h, "Local") finds the other nodes
 *     untouched (scaling every mass to the old total, the rule before,
 *     touched them all after Loop's smoothed rest shape); anchored nodes
 *     stay anchored, and a new node on the open boundary between two
 *     anchored nodes of its sheet is anchored;
 *   - the integrator restarts (a Taylor step first, no Beeman history);
 *     external forces stay on the old nodes, zero on the new ones;
 *   - the hand-over (ts_handover.h, unless opts.blend_time < 0): the
 *     refined tissue's springs get rest lengths that keep the unrefined
 *     tissue's tensions, and its nodes extra forces for what those leave,
 *     so that it has the unrefined tissue's accelerations at the
 *     carried-over state (the mass-spring step with opts.handover
 *     TS_HANDOVER_MS_FORCE: node forces alone), and the new nodes
 *     under a tool a contact allowance, both faded out over the blend time
 *     (0.2 s by default) by the steps; so the step after a refinement moves
 *     the old nodes as the unrefined tissue would and the new ones as their
 *     parents' midpoints, and the tissue then moves to the finer network's
 *     equilibrium by at most a few um per 1 ms step. An earlier hand-over
 *     still under way is taken into the new one, whose blend is then at
 *     least as long as the earlier one's (its rest change, taken in, goes
 *     on no faster; a smoothed blend's second refinement otherwise had its
 *     0.26 s of change to do in 0.1 s).
 *
 * LEB's "second search" (issue 4: "then the second search removes refined
 * data that lies outside the model") has nothing to remove here. It belongs
 * to the second method's local solve on a copy of the contact region
 * (ts_qstatic_refine.h): the copy is the model there, the bisections that
 * Rivara's propagation carries past its range make vertices the solve does
 * not own, and the search leaves them out of it (held at their parents'
 * midpoints with the rest of the tissue; n_outside). A live refinement has
 * no copy: ts_leb_extrusion bisects the whole tissue's rest shape and
 * ts_tissue_build rebuilds the whole tissue, so the model is the tissue.
 * The propagation still reaches past the selection (measured: 8 of 50 new
 * surface vertices off the 24 selected triangles of the live cases' pick on
 * the default patch, 10 of 56 for 26 triangles, 5 of 84 on the liver's top
 * region), but those vertices are midpoints of the rest surface's edges,
 * so inside the model, and every node made there is a free, massed node of
 * the running tissue, stepped and handed over as the others (test_refine_checks's
 * leb_outside_selection). Removing them would leave their neighbours'
 * edges split on one side only (T-junctions), or take back the bisections
 * that needed them, and with them the longest-edge rule's angle bound.
 * (`tissuetool mesh refine --leb` has no region: it refines the whole
 * surface to one bound, and the whole surface is its model.)
 *
 * No crossing check (ts_extrude_cross.c: the upload's check that the
 * layers' sheets do not pass through each other) is run again on a live
 * refinement, because it cannot make sheets cross. It puts every new node
 * of sheet s at the midpoint of an edge of sheet s, in the rest shape
 * (LEB always, ts_leb.c; Loop with smooth_rest 0, which server/refine.c
 * passes: TS_LOOP_LINEAR) as in the state, and leaves every old node where
 * it was; it splits triangles only at such midpoints, conformingly
 * (longest-edge bisection, and Loop's red-green closure: no hanging
 * vertex). So each child triangle lies in its parent's plane, inside it,
 * and a parent's children tile it: every refined sheet is the same point
 * set as before, to the rounding of a midpoint (half an ulp of a
 * coordinate). Two refined triangles meet only where their parents did;
 * parents with no column in common did not (the upload's check refused
 * that), and two triangles of one conforming sheet that meet share a node,
 * so one column. What the check skipped before stays uncounted in effect:
 * children of two parents that share only a column (a pleat folded over at
 * a node, a fold between two sheets at a shared column, both also refused
 * as inverted prisms where they matter) may no longer share one, but they
 * lie where their parents lay: no new crossing. Loop's smoothing rules
 * (smooth_rest 1) do move the rest shape and can make sheets cross: with
 * them the check runs on the refined extrusion (ts_refine_smooth.c, the
 * upload's tree refitted for the limited vertices), and a crossing limits
 * the smoothing at its triangles' vertices as an inverted prism does.
 *
 * Keeping old indices breaks the sheet layout node (s, j) = s * nv + j: a
 * refined tissue has nodes_per_sheet = 0. What selective mass scaling
 * (ts_ms_sms.c) and XPBD's bending and volume constraints need is the
 * columns, and these the refinement keeps: the new nodes of a new surface
 * vertex, one per sheet, form a new column, and the tissue's column map
 * (ts_tissue.h, t->column_node) is extended by it, so both work on the
 * refined tissue as on a built one. The extrusion node -> tissue node map
 * lives in the ts_refine_src, which a session keeps from building to the
 * next refinement; the column map is the same numbering, sheet by sheet.
 */
#ifndef TS_REFINE_H
#define TS_REFINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ts_extrude.h"
#include "ts_tissue.h"
#include "ts_tool.h"

/* What a tissue is rebuilt from: its extrusion (the rest shape), layers,
 * gravity, anchor flags and node masses per extrusion node, and the map
 * between extrusion nodes and tissue nodes. */
typedef struct ts_refine_src {
  ts_extrusion *e;          /* owned; node (s, j) at s * e->nv + j */
  ts_layer layers[TS_MAX_LAYERS];
  double gravity[3];        /* m/s^2 */
  uint8_t *anchored;        /* per extrusion node */
  double *mass;             /* per extrusion node, kg (anchored ones too) */
  uint32_t *node_of;        /* extrusion node -> tissue node */
  uint32_t *ext_of;         /* tissue node -> extrusion node */
  atomic_int shares;        /* holders besides the first (ts_refine_src_share);
                               0 from calloc */
} ts_refine_src;

enum { TS_REFINE_LOOP = 0, TS_REFINE_LEB = 1 };

typedef struct ts_refine_opts {
  int method;          /* TS_REFINE_LOOP or TS_REFINE_LEB */
  double max_edge;     /* LEB: edge bound on the selected triangles, m; 0 = half
                          the selection's longest edge (rest shape) */
  uint32_t max_nodes;  /* refuse (TS_EFULL) a result over this many nodes; 0 = none */
  int smooth_rest;     /* LOOP: 1 = Loop's smoothing rules on the rest shape, limited
                          where they would invert, turn over or cross, with a blend as
                          long as their rest change needs (ts_refine_smooth.h); 0 = Loop's
                          topology with new rest positions at edge midpoints and old ones
                          kept (TS_LOOP_LINEAR). A live session uses 1 unless asked for
                          midpoints (server/refine.c; measured figures at the top). */
  double blend_time;   /* the hand-over's blend time (ts_handover.h), s: 0 = the
                          default TS_HANDOVER_DEFAULT_TIME (0.2 s), longer when Loop's
                          smoothing needs it (smooth_rest) or an earlier blend under way
                          is longer (info.blend_time: what was taken); < 0 = no hand-over
                          (the finer network's own forces at once: the tissue jumps to
                          its equilibrium in the first step) */
  const ts_tool *tools; /* the tools of the step (n_tools, NULL for none; inactive ones
                          ignored): new nodes inside one get a contact allowance */
  int n_tools;
  int rebuild;         /* how the springs are made: TS_REFINE_REBUILD_LOCAL (0, the
                          default: the changed ones computed, the rest copied),
                          TS_REFINE_REBUILD_FULL (the whole tissue built again: the
                          reference; the result is the same to the bit) or
                          TS_REFINE_REBUILD_NARROW (for the tests only: the local
                          rebuild with its ring one prism too narrow, which is wrong) */
  int handover;        /* the mass-spring step's form of the hand-over (ts_handover.h):
                          TS_HANDOVER_MS_DEFAULT (0), _REST or _FORCE */
  double smooth_rate;  /* smooth_rest: the rest shape's largest speed during the blend,
                          m/s (ts_refine_smooth.h); 0 = TS_REFINE_SMOOTH_RATE */
} ts_refine_opts;

enum { TS_REFINE_REBUILD_LOCAL = 0, TS_REFINE_REBUILD_FULL = 1, TS_REFINE_REBUILD_NARROW = 2 };

typedef struct ts_refine_info {
  uint32_t selected;   /* distinct surface triangles selected */
  uint32_t new_verts;  /* new surface vertices */
  uint32_t new_nodes;  /* new tissue nodes (new_verts per sheet) */
  uint32_t n_nodes;    /* after refinement */
  uint32_t n_tris;     /* render triangles after refinement */
  uint32_t (*parents)[2]; /* when not NULL on input to ts_refine_run... see there */
  uint32_t n_springs;  /* springs after refinement */
  uint32_t springs_computed; /* of them computed anew (all of them when built whole) */
  uint32_t prisms_computed;  /* prisms whose volume shares were computed (all when whole) */
  int local;           /* 1: the springs were rebuilt locally; 0: whole */
  uint32_t smooth_limited; /* smooth_rest: surface vertices whose smoothing was scaled
                          back (inverted prisms, turned triangles, crossings) */
  double smooth_scale; /* smooth_rest: the smoothing's global scale (1: whole; below 1
                          when the change would need more than TS_REFINE_SMOOTH_MAX_BLEND) */
  double rest_move;    /* m: the largest rest change against midpoints (0 without smoothing) */
  double blend_time;   /* s: the hand-over's blend time taken (0: none) */
} ts_refine_info;

/* A source from an extrusion (copied), its layers (e->n_layers), the anchor
 * flags (one per node, NULL for none) and gravity (NULL for none), for the
 * tissue ts_tissue_build makes from the same arguments (tissue node =
 * extrusion node). Returns 0, TS_EINVAL (NULL or inconsistent extrusion),
 * TS_EMESH (a prism ts_prism_check refuses) or TS_ENOMEM. */
int ts_refine_src_create(const ts_extrusion *e, const ts_layer *layers, const uint8_t *anchored,
                         const double gravity[3], ts_refine_src **out);

/* The source of the built-in patch (ts_patch_create's tissue). Returns as
 * ts_patch_create. */
int ts_refine_src_patch(const ts_patch_def *def, ts_refine_src **out);

/* Lets go of s (frees it when no other holder shares it:
 * ts_refine_src_share); NULL is ignored. */
void ts_refine_src_free(ts_refine_src *s);

/* The surface triangle of render triangle `tri` of t (each render group
 * opens with its layer's top sheet in surface order, the outer sheet
 * first): a pick on any layer's top sheet (the one a client sees when the
 * layers above are hidden) selects the column under it. Returns 0 and
 * *surf; TS_EINVAL when tri is out of range or not a top-sheet triangle (a
 * side wall or the innermost sheet). */
int ts_refine_surface_tri(const ts_refine_src *s, const ts_tissue *t, uint32_t tri, uint32_t *surf);

/* A selection by ray pick: the first outer-surface triangle that the ray
 * origin + u dir (u >= 0) meets at t's current positions, and every surface
 * triangle edge-connected to it within `range` (m) of the hit point
 * (ts_region.h). *tris (malloc'd, caller frees) gets *n surface triangle
 * indices; hit (may be NULL) the point. Returns 0, TS_ERANGE (the ray
 * misses), TS_EINVAL, TS_ENAN (non-finite input) or TS_ENOMEM. */
int ts_refine_pick(const ts_refine_src *s, const ts_tissue *t, const double origin[3],
                   const double dir[3], double range, uint32_t **tris, uint32_t *n, double hit[3]);

/* info->parents: set it to NULL before the call; on success ts_refine_run
 * stores there (malloc'd, the caller frees) the two parent nodes of every
 * new node: new node n_nodes - new_nodes + i is the midpoint of parents[i]
 * (tissue indices, same sheet, both created before it). */

/* Refines t on the surface triangles sel (n_sel, duplicates allowed) into a
 * new tissue *out and the source that describes it, *src_out (t and s are
 * left as they were: the caller swaps both, or neither). See the top of this file for what carries over. Returns 0;
 * TS_EINVAL (empty selection, an index out of range, bad options, t not the
 * tissue of s), TS_EFULL (over o->max_nodes or the refinement's own vertex
 * limit), TS_EMESH (a prism inverted in the refined rest shape, or a prism
 * the refinement builds anew, on a surface triangle with a new vertex or
 * one that is not a triangle of s, inverted in the current shape, named in
 * err; a prism elsewhere keeps its nodes and is not checked), TS_ETOOBIG,
 * TS_ENOMEM. err gets a message on failure. */
int ts_refine_run(const ts_refine_src *s, const ts_tissue *t, const uint32_t *sel, uint32_t n_sel,
                  const ts_refine_opts *o, ts_tissue **out, ts_refine_src **src_out,
                  ts_refine_info *info, char *err, size_t errcap);

/* Total mass of the source's nodes, anchored ones included (kg). */
double ts_refine_total_mass(const ts_refine_src *s);

/* A live refinement off the stepping thread (server/refine.c): the
 * stepping thread takes a snapshot (ts_refine_snapshot_into a tissue
 * ts_refine_snapshot_reserve made off that thread, and a share of its
 * source, ts_refine_src_share) between two steps, another thread runs
 * ts_refine_run (and, for XPBD, ts_handover_fit_xpbd) on the snapshot
 * while the session steps on, and the stepping thread installs the result
 * between two later steps: ts_refine_restate gives it the tissue's current
 * state by the same rule as ts_refine_run (info.parents carries each new
 * node's parent edge: the interpolation weights are 1/2, 1/2), then
 * ts_handover_renew (ts_handover.h) makes the hand-over again there.
 *
 * ts_refine_snapshot: a deep copy of t (nodes, springs, surface, settings,
 * integrator history and its hand-over; not the step's private data, which
 * the copy's first step prepares again). Returns 0, TS_EINVAL or TS_ENOMEM.
 *
 * ts_refine_snapshot_reserve: a tissue to take a snapshot into: n_nodes
 * nodes, n_springs springs, n_tris render triangles and, when hand, a
 * hand-over's arrays, every page of them written once, so that the copy
 * does not meet them first (a first touch costs the copy about 2.6 ms a
 * megabyte on these machines: a resolution-200 patch's 166 MB snapshot
 * took 340-440 ms on the stepping thread, nearly all of it page faults).
 * Returns 0, TS_EINVAL (no nodes) or TS_ENOMEM.
 *
 * ts_refine_snapshot_into: ts_refine_snapshot into dst (a reserved tissue
 * or an earlier snapshot: no step data), reusing its arrays. Returns 0,
 * TS_EINVAL, TS_EMISMATCH (dst's node, spring or triangle count is not
 * t's: dst unchanged) or TS_ENOMEM (dst then holds part of t).
 *
 * ts_refine_src_copy: a deep copy of s. Returns 0, TS_EINVAL or TS_ENOMEM.
 *
 * ts_refine_src_share: s for one more holder (s itself; no copy: a source
 * is never changed once made); each holder lets go with
 * ts_refine_src_free, the last one frees it, on any thread.
 *
 * ts_refine_restate: nt (a refinement of an earlier copy of cur, made by
 * ts_refine_run with info.parents = parents) takes cur's current state:
 * cur's nodes (nt's first cur->n_nodes) their positions, velocities,
 * previous positions and external forces, bit for bit; node i >=
 * cur->n_nodes the midpoint of parents[i - cur->n_nodes]'s (zero external
 * force); cur's step settings and clock (ts_tissue_copy_settings); the
 * integrator restarts (a Taylor step first). Returns 0 or TS_EINVAL (NULL,
 * nt smaller than cur, a parent not below its node). */
int ts_refine_snapshot(const ts_tissue *t, ts_tissue **out);
int ts_refine_snapshot_reserve(uint32_t n_nodes, uint32_t n_springs, uint32_t n_tris, int hand, ts_tissue **out);
int ts_refine_snapshot_into(const ts_tissue *t, ts_tissue *dst);
int ts_refine_src_copy(const ts_refine_src *s, ts_refine_src **out);
ts_refine_src *ts_refine_src_share(ts_refine_src *s);
int ts_refine_restate(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2]);

#endif
