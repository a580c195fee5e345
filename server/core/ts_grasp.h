/*
 * ts_grasp.h: grasping tissue with the grasper jaws (TS_SHAPE_JAWS,
 * ts_obb_tree.h; issue 5): when the jaws close on tissue, the vertices they
 * touch attach to the tool's frame and follow it until the jaws open again;
 * pulling then stretches the tissue through its springs.
 *
 * Attachment is a rigid position constraint per held vertex: at the moment
 * of closing (jaw opening falling below close_below) every candidate vertex
 * of the contact step (ts_contact.h, so the same tree query) within `reach`
 * of either jaw box (signed distance, ts_contact_tool_sdf) stores its
 * coordinates in the tool frame, l = R^T (x - p); each projection puts it
 * back at R l + p for the tool's current pose. The jaws must open past
 * open_above (> close_below: hysteresis against a jittering hand) to let
 * go. Held vertices are excluded from the contact projection (pass
 * ts_grasp_held() as its skip flags). The reaction on the tool, like the
 * contact's, is -sum(m dx) / h^2 with its torque about the tool's origin.
 *
 * Memory is allocated once (ts_grasp_init); updates allocate nothing.
 */
#ifndef TS_GRASP_H
#define TS_GRASP_H

#include <stdint.h>

#include "ts_contact.h"
#include "ts_obb_tree.h"

typedef struct ts_grasp_def {
  double close_below; /* jaw opening under which the jaws hold, 0..1 */
  double open_above;  /* opening over which they let go, > close_below */
  double reach;       /* m: vertices this close to a jaw when it closes are held */
} ts_grasp_def;

/* Defaults: hold below 0.2, let go above 0.4, reach 0.5 mm. */
ts_grasp_def ts_default_grasp_def(void);

typedef struct ts_grasp {
  ts_grasp_def def;
  uint32_t n_points;
  uint32_t cap;
  uint32_t n;          /* held vertices */
  uint32_t dropped;    /* vertices not held for want of room at the last closing */
  int closed;          /* the jaws hold (may hold nothing) */
  double last_jaw;     /* opening at the last update */
  uint32_t *node;      /* n: held nodes */
  double (*local)[3];  /* n: their tool-frame coordinates, m */
  double (*imp)[3];    /* n: sum of m dx since ts_grasp_clear_impulses, kg m */
  uint8_t *held;       /* n_points: 1 for a held node */
  double p[3];         /* tool origin at the last projection */
} ts_grasp;

/* Allocates for a tissue of n_points nodes holding up to cap vertices. def
 * NULL means defaults. Returns 0, TS_EINVAL (NULL, zero sizes, bad def) or
 * TS_ENOMEM. */
int ts_grasp_init(ts_grasp *g, const ts_grasp_def *def, uint32_t n_points, uint32_t cap);
void ts_grasp_free(ts_grasp *g);

/* Per node: 1 while held (the contact's skip flags). */
const uint8_t *ts_grasp_held(const ts_grasp *g);

/* Follows the jaw opening of the tool's current pose: closing (passing below
 * close_below, and every further narrowing while closed) takes the
 * candidates of ws (a contact step begun for this tool; the jaws at that
 * pose) within reach of a jaw at positions x; opening past open_above lets
 * all go. A tool
 * that is not a grasper never holds. Returns the number of held vertices,
 * TS_EFULL (some not held for want of room; the first cap are) or
 * TS_EINVAL. */
int ts_grasp_update(ts_grasp *g, const ts_posed_tool *tool, const ts_contact_ws *ws,
                    const double (*x)[3]);

/* Lets every held vertex go (the jaws then count as open). */
void ts_grasp_release(ts_grasp *g);

/* Zeroes the accumulated corrections (at the start of a (sub)step). */
void ts_grasp_clear_impulses(ts_grasp *g);

/* Moves every held vertex to its place in the tool frame at the tool's
 * current pose, accumulating m dx. inv_mass 0 nodes are never held.
 * Returns 0 or TS_EINVAL. */
int ts_grasp_project(ts_grasp *g, const ts_posed_tool *tool, double (*x)[3],
                     const double *inv_mass);

/* Reaction on the tool of the corrections since the last clear: force =
 * -scale * sum(m dx), torque about the tool's origin at the last
 * projection, vertices at x. */
void ts_grasp_reaction(const ts_grasp *g, const double (*x)[3], double scale, double force[3],
                       double torque[3]);

#endif
