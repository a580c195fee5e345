/*
 * ts_handover_tools.c: the tools as a live refinement's hand-over sees
 * them: each placed at its pose as a tree where it has no closed form
 * (meshes, jaws), and how deep a point is inside the active tools with the
 * outward normal there (the new nodes' contact allowances, and the tool's
 * reaction taken out of the carried accelerations).
 */
#include <math.h>
#include <string.h>

#include "ts_contact.h"
#include "ts_error.h"
#include "ts_handover_internal.h"
#include "ts_tool_tree.h"

void ts__handover_placed_free(ts__placed_tool *p) {
  if (!p->ok) return;
  ts_posed_tool_free(&p->pt);
  ts_obb_tree_destroy(p->own);
  memset(p, 0, sizeof *p);
}

/* Places tool tl. Returns 0, TS_EINVAL (a mesh tool without its tree), or
 * an error of the tree's builders (p then unset). */
int ts__handover_placed_make(const ts_tool *tl, ts__placed_tool *p) {
  memset(p, 0, sizeof *p);
  ts_obb_tree *tree;
  int owns;
  int rc = ts_tool_tree_make(tl, &tree, &owns); /* the session's own mapping */
  if (rc) return rc;
  if (owns) p->own = tree;
  rc = ts_posed_tool_init(&p->pt, tree);
  if (rc) {
    ts_obb_tree_destroy(p->own);
    p->own = NULL;
    return rc;
  }
  const ts_pose pose = ts_tool_pose(tl);
  rc = ts_posed_tool_set_pose(&p->pt, &pose);
  p->ok = 1;
  if (rc) ts__handover_placed_free(p);
  return rc;
}

/* The active tools of a hand-over: the meshes and jaws placed (placed[k]
 * for tool k; primitives need none). Returns 0 or a placing error (every
 * placed one freed). */
int ts__handover_place_all(const ts_tool *tools, int n_tools, ts__placed_tool *placed) {
  for (int k = 0; k < n_tools; k++) {
    memset(&placed[k], 0, sizeof placed[k]);
    const ts_tool *tl = &tools[k];
    if (!tl->active || tl->kind == TS_TOOL_SPHERE || tl->kind == TS_TOOL_CAPSULE) continue;
    int rc = ts__handover_placed_make(tl, &placed[k]);
    if (rc) {
      for (int q = 0; q < k; q++) ts__handover_placed_free(&placed[q]);
      return rc;
    }
  }
  return 0;
}

/* The contact band: a node this close to a tool's surface (relative to its
 * size: a primitive's radius, a tree's reach) is held by it in either
 * solver (the mass-spring step's skin is 1e-4 of it; XPBD ends its
 * substeps on the surface) */
#define CONTACT_BAND 1e-3

/* How deep x is inside the active tools (the deepest), m (negative:
 * outside, by the distance to the nearest); n (may be NULL) gets that
 * tool's outward normal at x, band (may be NULL) its contact band (m).
 * Spheres and capsules by their core segment, meshes and jaws by their
 * placed tree (placed[k]; a tool not placed is left out). */
double ts__handover_tool_depth(const ts_tool *tools, int n_tools, const ts__placed_tool *placed, const double x[3],
                               double n[3], double *band) {
  double depth = -INFINITY;
  for (int k = 0; k < n_tools; k++) {
    const ts_tool *tl = &tools[k];
    if (!tl->active) continue;
    if (tl->kind != TS_TOOL_SPHERE && tl->kind != TS_TOOL_CAPSULE) {
      if (!placed || !placed[k].ok) continue;
      double nn[3], pen = -ts_contact_tool_sdf(&placed[k].pt, x, nn);
      if (pen > depth) {
        depth = pen;
        if (n) memcpy(n, nn, sizeof nn);
        if (band) band[0] = CONTACT_BAND * placed[k].pt.tree->reach;
      }
      continue;
    }
    double a[3], b[3], ab[3], ap[3], l2 = 0, u = 0;
    ts_tool_segment(tl, a, b);
    for (int c = 0; c < 3; c++) {
      ab[c] = b[c] - a[c];
      ap[c] = x[c] - a[c];
      l2 += ab[c] * ab[c];
      u += ap[c] * ab[c];
    }
    u = l2 > 0 ? u / l2 : 0.0;
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double d[3], d2 = 0;
    for (int c = 0; c < 3; c++) {
      d[c] = ap[c] - u * ab[c];
      d2 += d[c] * d[c];
    }
    double dl = sqrt(d2), pen = tl->radius - dl;
    if (pen > depth) {
      depth = pen;
      if (n)
        for (int c = 0; c < 3; c++) n[c] = dl > 0 ? d[c] / dl : c == 1;
      if (band) band[0] = CONTACT_BAND * tl->radius;
    }
  }
  return depth;
}
