/*
 * ts_extrude_relax.c: undoing small pleats of a surface before it is
 * extruded (ts_extrude_def.max_relax, ts_extrude.c).
 *
 * A pleat is a few triangles folded back over their neighbours (edges whose
 * faces turn by more than 90 degrees, often much more): the shared
 * liver-smooth.obj has one of about a millimetre near its vertices 386, 835,
 * 837 and 1535, where the surface nearly touches itself. At a pleat's
 * vertices no offset direction points inwards from all their triangles
 * (ts_extrude_dir.c), so any layer under them is inverted at any depth. Such
 * a defect is undone by moving only the vertices concerned, each by a
 * bounded distance:
 *
 *   a vertex is "folded" when its best direction (ts__vertex_direction)
 *   leans TS__RELAX_DEG degrees or more from one of its triangles. Each
 *   round moves every folded vertex to the centroid of its edge neighbours
 *   (one Jacobi step of umbrella-operator smoothing, the mesh fairing of
 *   G. Taubin, "A signal processing approach to fair surface design",
 *   SIGGRAPH 1995, with lambda = 1 on the folded vertices only), clamped to
 *   lie within max_relax of the vertex's input position; then every vertex
 *   is tested again. At most TS__RELAX_ROUNDS rounds.
 *
 * Only folded vertices move, so a surface without pleats comes out exactly
 * as it went in. What is still folded after the rounds is left
 * to the direction step, which refuses it naming the vertex.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude_internal.h"

#define TS__RELAX_DEG 87.0
#define TS__RELAX_ROUNDS 50

int ts__extrude_relax(ts_mesh *m, const ts_meshtopo *topo, double max_relax, uint32_t *n_moved,
                      double *max_moved) {
  *n_moved = 0;
  *max_moved = 0;
  if (!(max_relax > 0)) return 0;
  uint32_t nv = m->n_verts;
  double(*orig)[3] = malloc(sizeof *orig * nv);
  double(*target)[3] = malloc(sizeof *target * nv);
  uint32_t *folded = malloc(sizeof *folded * nv);
  uint8_t *moved = calloc(nv, 1), *sel = calloc(nv, 1);
  int rc = 0;
  if (!orig || !target || !folded || !moved || !sel) {
    rc = TS_ENOMEM;
    goto out;
  }
  memcpy(orig, m->v, sizeof *orig * nv);
  const double cos_fold = cos(TS__RELAX_DEG * M_PI / 180.0);
  for (int round = 0; round < TS__RELAX_ROUNDS; round++) {
    uint32_t nf = 0;
    for (uint32_t j = 0; j < nv; j++) {
      double dir[3], c;
      int tilted;
      if (topo->vert_tri_off[j + 1] == topo->vert_tri_off[j]) continue; /* unused */
      int r = ts__vertex_direction(m, topo, j, dir, &c, &tilted);
      if (r == TS_EMESH || (r == 0 && c < cos_fold)) folded[nf++] = j;
    }
    if (nf == 0) break;
    for (uint32_t i = 0; i < nf; i++) sel[folded[i]] = 1;
    /* Jacobi: every target from the positions of this round */
    for (uint32_t j = 0; j < nv; j++) {
      if (!sel[j]) continue;
      uint32_t n = 0;
      double c[3] = {0, 0, 0};
      for (uint32_t q = topo->vert_edge_off[j]; q < topo->vert_edge_off[j + 1]; q++) {
        const uint32_t *ed = topo->edges[topo->vert_edges[q]];
        uint32_t k = ed[0] == j ? ed[1] : ed[0];
        for (int a = 0; a < 3; a++) c[a] += m->v[k][a];
        n++;
      }
      double d[3], dl;
      for (int a = 0; a < 3; a++) {
        target[j][a] = n ? c[a] / n : m->v[j][a];
        d[a] = target[j][a] - orig[j][a];
      }
      dl = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      if (dl > max_relax)
        for (int a = 0; a < 3; a++) target[j][a] = orig[j][a] + d[a] * (max_relax / dl);
    }
    int any = 0;
    for (uint32_t j = 0; j < nv; j++)
      if (sel[j]) {
        any |= memcmp(m->v[j], target[j], sizeof target[j]) != 0;
        memcpy(m->v[j], target[j], sizeof target[j]);
        moved[j] = 1;
        sel[j] = 0;
      }
    if (!any) break; /* clamped everywhere: nothing more to gain */
  }
  for (uint32_t j = 0; j < nv; j++) {
    if (!moved[j]) continue;
    double d[3] = {m->v[j][0] - orig[j][0], m->v[j][1] - orig[j][1], m->v[j][2] - orig[j][2]};
    double dl = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (dl > 0) {
      (*n_moved)++;
      *max_moved = fmax(*max_moved, dl);
    }
  }
out:
  free(orig);
  free(target);
  free(folded);
  free(moved);
  free(sel);
  return rc;
}
