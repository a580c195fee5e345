/*
 * ts_mesh_tissue.c: a surface mesh made into a tissue as the daemon does
 * (ts_mesh_tissue.h says what is chosen and why): import, size check,
 * placement, extrusion, anchors, tissue.
 */
#include "ts_mesh_tissue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_mesh.h"

void ts_mesh_tissue_place(ts_mesh *m) {
  if (!m || m->n_verts == 0) return;
  double lo[3], hi[3];
  for (int a = 0; a < 3; a++) lo[a] = hi[a] = m->v[0][a];
  for (uint32_t i = 1; i < m->n_verts; i++)
    for (int a = 0; a < 3; a++) {
      if (m->v[i][a] < lo[a]) lo[a] = m->v[i][a];
      if (m->v[i][a] > hi[a]) hi[a] = m->v[i][a];
    }
  double shift[3] = {-(lo[0] + hi[0]) / 2, -hi[1], -(lo[2] + hi[2]) / 2};
  for (uint32_t i = 0; i < m->n_verts; i++)
    for (int a = 0; a < 3; a++) m->v[i][a] += shift[a];
}

static double extent(const ts_mesh *m) {
  double lo[3], hi[3], e = 0;
  for (int a = 0; a < 3; a++) lo[a] = hi[a] = m->v[0][a];
  for (uint32_t i = 1; i < m->n_verts; i++)
    for (int a = 0; a < 3; a++) {
      if (m->v[i][a] < lo[a]) lo[a] = m->v[i][a];
      if (m->v[i][a] > hi[a]) hi[a] = m->v[i][a];
    }
  for (int a = 0; a < 3; a++)
    if (hi[a] - lo[a] > e) e = hi[a] - lo[a];
  return e;
}

static const char *format_name(int f) {
  return f == TS_MESH_STL ? "stl" : f == TS_MESH_PLY ? "ply" : "obj";
}

/* Tells o's on_stage (if any) that the build enters stage; returns 0 to go
 * on, or the negative code it returned to stop (err says so). */
static int enter_stage(const ts_mesh_import_opts *o, int stage, char *err, size_t errcap) {
  if (!o || !o->on_stage) return 0;
  int rc = o->on_stage(o->stage_ud, stage);
  if (rc >= 0) return 0;
  snprintf(err, errcap, "the build was stopped: %s", ts_strerror(rc));
  return rc;
}

int ts_mesh_tissue_extrude(const uint8_t *data, size_t len, int format,
                           const ts_mesh_import_opts *o, const double *thickness,
                           uint32_t n_layers, ts_extrusion **out, uint32_t *nv, uint32_t *nt,
                           char *warning, size_t wcap, char *err, size_t errcap) {
  if (warning && wcap) warning[0] = 0;
  if (err && errcap) err[0] = 0;
  if (!out || !err || !errcap) return TS_EINVAL;
  *out = NULL;
  if (!data || !thickness || n_layers == 0 || n_layers > TS_MAX_LAYERS) {
    snprintf(err, errcap, "no mesh or no layers");
    return TS_EINVAL;
  }
  ts_mesh_import_opts opts = o ? *o : ts_mesh_import_opts_default();
  int rc = enter_stage(&opts, TS_MESH_STAGE_READING, err, errcap);
  if (rc) return rc;
  ts_mesh *m = NULL;
  char msg[400] = "";
  rc = ts_mesh_import(data, len, format, &opts, &m, NULL, NULL, msg, sizeof msg);
  if (rc) {
    snprintf(err, errcap, "the %s mesh is refused: %s", format_name(format),
             msg[0] ? msg : ts_strerror(rc));
    return rc;
  }
  if (nv) *nv = m->n_verts;
  if (nt) *nt = m->n_tris;
  double total = 0;
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = n_layers;
  d.mode = TS_EXTRUDE_NORMAL;
  /* a scanned organ has creases and pleats that a full-depth offset would
   * fold: undo pleats by moving vertices at most 1 mm, and thin the layers
   * locally where they would fold, down to a tenth of their depth (both
   * reported); what still folds is refused */
  d.max_relax = TS_MESH_TISSUE_MAX_RELAX;
  d.min_depth_fraction = TS_MESH_TISSUE_MIN_DEPTH;
  d.stop = opts.stop; /* a stopping daemon's (ts_mesh_import_opts.stop) */
  for (uint32_t l = 0; l < n_layers; l++) total += d.thickness[l] = thickness[l];
  double ext = extent(m);
  if (ext > TS_MESH_TISSUE_MAX_EXTENT || ext < TS_MESH_TISSUE_MIN_EXTENT_LAYERS * total) {
    snprintf(err, errcap,
             "the mesh is %.4g mm across after scaling by %g: %s (check the scale: file units "
             "to metres, e.g. 0.01 for centimetres)",
             ext * 1e3, opts.scale,
             ext > TS_MESH_TISSUE_MAX_EXTENT
                 ? "larger than 2 m"
                 : "too small for its layers, which need at least four times their total "
                   "thickness");
    ts_mesh_free(m);
    return TS_ERANGE;
  }
  ts_mesh_tissue_place(m);
  if ((rc = enter_stage(&opts, TS_MESH_STAGE_LAYERS, err, errcap))) {
    ts_mesh_free(m);
    return rc;
  }
  rc = ts_extrude(m, &d, out, msg, sizeof msg);
  ts_mesh_free(m);
  if (rc == TS_EMESH) {
    /* folded prisms, or sheets that cross (a part thinner than twice the
     * depth even at the thinning's floor): the first named in msg */
    const ts_extrusion *e = *out;
    snprintf(err, errcap, "layers of %.3g mm in all %s the surface (give thinner layers): %s",
             total * 1e3, e && e->n_crossings && !e->n_inverted ? "cross inside" : "fold", msg);
  } else if (rc == TS_ESHUTDOWN) {
    snprintf(err, errcap, "the build was stopped: %s", ts_strerror(rc));
  } else if (rc) {
    snprintf(err, errcap, "extrusion failed: %s", msg[0] ? msg : ts_strerror(rc));
  }
  if (rc) { /* ts_extrude hands back the refused extrusion too: nothing on failure */
    ts_extrusion_free(*out);
    *out = NULL;
    return rc;
  }
  if (warning && wcap && strncmp(msg, "warning:", 8) == 0)
    snprintf(warning, wcap, "%s", msg + 9);
  return 0;
}

/* The anchor flags of every node (n_sheets * nv), as the header says. */
static uint8_t *anchors(const ts_extrusion *e) {
  uint32_t nv = e->nv, n = e->n_sheets * nv;
  uint8_t *a = calloc(n, 1);
  if (!a) return NULL;
  int open = 0;
  for (uint32_t j = 0; j < nv; j++) open |= e->boundary[j];
  double ylo = e->x[0][1], yhi = e->x[0][1];
  for (uint32_t j = 1; j < nv; j++) {
    if (e->x[j][1] < ylo) ylo = e->x[j][1];
    if (e->x[j][1] > yhi) yhi = e->x[j][1];
  }
  double cut = ylo + TS_MESH_TISSUE_SUPPORT_FRACTION * (yhi - ylo);
  for (uint32_t j = 0; j < nv; j++) {
    int held = open ? e->boundary[j] : e->x[j][1] <= cut;
    for (uint32_t s = 0; s < e->n_sheets; s++) a[s * nv + j] = (uint8_t)held;
  }
  return a;
}

/* Names the first prism that ts_tissue_build refuses: ts_prism_check, the
 * one test of a sound prism the extrusion and the builder share. */
static void name_twisted(const ts_extrusion *e, char *buf, size_t cap) {
  snprintf(buf, cap, "a prism is degenerate");
  for (uint32_t l = 0; l < e->n_layers; l++)
    for (uint32_t i = 0; i < e->n_surface_tris; i++) {
      const uint32_t *t = e->surface_tris[i];
      double P[3][3], Q[3][3];
      for (int k = 0; k < 3; k++)
        for (int c = 0; c < 3; c++) {
          P[k][c] = e->x[l * e->nv + t[k]][c];
          Q[k][c] = e->x[(l + 1) * e->nv + t[k]][c];
        }
      double vol, jac;
      if (ts_prism_check((const double(*)[3])P, (const double(*)[3])Q, &vol, &jac)) {
        snprintf(buf, cap, "layer %u's prism under surface triangle %u (%u,%u,%u) is inverted",
                 l, i, t[0], t[1], t[2]);
        return;
      }
    }
}

void ts_mesh_tissue_free(ts_mesh_tissue *m) {
  if (!m) return;
  ts_tissue_destroy(m->t);
  ts_extrusion_free(m->e);
  free(m->anchors);
  memset(m, 0, sizeof *m);
}

int ts_mesh_tissue_build(const uint8_t *data, size_t len, int format,
                         const ts_mesh_import_opts *o, const ts_layer *layers, uint32_t n_layers,
                         ts_mesh_tissue *out, char *err, size_t errcap) {
  if (!out || !err || !errcap) return TS_EINVAL;
  memset(out, 0, sizeof *out);
  err[0] = 0;
  if (!layers || n_layers == 0 || n_layers > TS_MAX_LAYERS) {
    snprintf(err, errcap, "no layers");
    return TS_EINVAL;
  }
  double thickness[TS_MAX_LAYERS];
  for (uint32_t l = 0; l < n_layers; l++) thickness[l] = layers[l].thickness;
  int rc = ts_mesh_tissue_extrude(data, len, format, o, thickness, n_layers, &out->e,
                                  &out->n_verts, &out->n_tris, out->warning,
                                  sizeof out->warning, err, errcap);
  if (rc) return rc;
  out->anchors = anchors(out->e);
  if (!out->anchors) {
    snprintf(err, errcap, "out of memory");
    ts_mesh_tissue_free(out);
    return TS_ENOMEM;
  }
  ts_patch_def pd = ts_default_patch_def();
  if ((rc = enter_stage(o, TS_MESH_STAGE_SPRINGS, err, errcap))) {
    ts_mesh_tissue_free(out);
    return rc;
  }
  /* the springs, then (a stage of its own, so that a stop need not wait
   * for both) the step's preparation with its stability bounds, as
   * ts_tissue_build makes them: before the drag is set */
  rc = ts_tissue_build_unprepared(out->e, layers, out->anchors, pd.gravity, o ? o->stop : NULL,
                                  &out->t);
  if (!rc && (rc = enter_stage(o, TS_MESH_STAGE_BOUNDS, err, errcap))) {
    ts_mesh_tissue_free(out); /* the springs' tissue too; err says why */
    return rc;
  }
  if (!rc) {
    out->t->stop = o ? o->stop : NULL;
    rc = ts_massspring_prepare(out->t);
  }
  if (rc == TS_ESHUTDOWN) {
    snprintf(err, errcap, "the build was stopped: %s", ts_strerror(rc));
  } else if (rc == TS_EMESH) {
    char msg[200];
    name_twisted(out->e, msg, sizeof msg);
    snprintf(err, errcap,
             "%s: a vertex normal leans over 90 degrees from a face at a sharp crease; smooth or "
             "remesh the surface there",
             msg);
  } else if (rc) {
    snprintf(err, errcap, "cannot build the tissue: %s", ts_strerror(rc));
  }
  if (rc) {
    ts_mesh_tissue_free(out); /* the tissue too, when the springs were built */
    return rc;
  }
  out->t->drag = pd.drag;
  out->t->stable_dt = ts_massspring_stable_dt(out->t); /* with the drag */
  return 0;
}
