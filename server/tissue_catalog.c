/*
 * tissue_catalog.c: catalogued tissues read back and built as a session of
 * them is (tissue_catalog.h).
 */
#include "tissue_catalog.h"

#include <stdio.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_material.h"
#include "materials.h"

void ts_catalog_layers(const ts_layer_spec *ls, ts_patch_def *def, char material[][64]) {
  ts_patch_def base = ts_default_patch_def();
  def->n_layers = ls->n_layers;
  for (uint32_t i = 0; i < ls->n_layers; i++) {
    ts_layer *d = &def->layers[i];
    *d = base.layers[i < base.n_layers ? i : base.n_layers - 1];
    snprintf(d->name, sizeof d->name, "%s", ls->layers[i].name);
    d->thickness = ls->layers[i].thickness;
    memcpy(d->fibre, ls->layers[i].fibre, sizeof d->fibre);
    snprintf(material[i], 64, "%s", ls->layers[i].material);
  }
}

int ts_catalog_resolve_materials(ts_storage *st, ts_patch_def *def, char material[][64],
                                 char *err, size_t cap) {
  for (uint32_t i = 0; i < def->n_layers; i++) {
    ts_layer *l = &def->layers[i];
    if (!material[i][0]) continue; /* the built-in law of the layer */
    ts_material ax, ra;
    int rc = ts_materials_resolve(st, "stomach", l->name, "axial", material[i], &ax, err, cap);
    if (!rc) rc = ts_materials_resolve(st, "stomach", l->name, "radial", material[i], &ra, err, cap);
    if (rc) return rc;
    if (ts_layer_set_law(l, TS_DIR_AXIAL, ax.a, ax.b) ||
        ts_layer_set_law(l, TS_DIR_RADIAL, ra.a, ra.b)) {
      snprintf(err, cap, "the stored fit '%s' of layer %s is not usable", ax.name, l->name);
      return TS_EINVAL;
    }
  }
  return 0;
}

typedef struct names {
  char text[400];
  size_t len;
} names;

static int add_name(void *ud, const ts_tissue_rec *t) {
  names *n = ud;
  if (strcmp(t->kind, "mesh") != 0 || n->len >= sizeof n->text - 1) return 0;
  int w = snprintf(n->text + n->len, sizeof n->text - n->len, ", %s", t->name);
  if (w < 0 || (size_t)w >= sizeof n->text - n->len) {
    n->len = sizeof n->text - 1; /* cut: the list is only a hint */
    return 0;
  }
  n->len += (size_t)w;
  return 0;
}

void ts_catalog_free(ts_catalog_tissue *c) {
  if (!c) return;
  ts_storage_mesh_free(&c->mesh);
  memset(c, 0, sizeof *c);
}

int ts_catalog_load(ts_storage *st, const char *name, ts_catalog_tissue *out, char *err,
                    size_t cap) {
  memset(out, 0, sizeof *out);
  ts_tissue_rec rec;
  int rc = ts_storage_get_tissue(st, name, &rec);
  if (rc == 0 && strcmp(rec.kind, "mesh") != 0) {
    ts_storage_tissue_free(&rec);
    rc = TS_ENOTISSUE;
  }
  if (rc) {
    if (rc != TS_ENOTISSUE) {
      snprintf(err, cap, "cannot look up tissue '%s': %s", name, ts_storage_errmsg(st));
      return rc;
    }
    names n;
    snprintf(n.text, sizeof n.text, "stomach-patch");
    n.len = strlen(n.text);
    ts_storage_list_tissues(st, add_name, &n);
    snprintf(err, cap, "no tissue '%s' (available: %s)", name, n.text);
    return rc;
  }
  ts_layer_spec ls;
  char msg[200];
  if (ts_layer_spec_parse(rec.layer_spec, &ls, msg, sizeof msg)) {
    rc = TS_ESTORAGE;
    snprintf(err, cap, "stored tissue '%s' is damaged: %s", name, msg);
  } else if ((rc = ts_storage_get_mesh(st, rec.mesh_hash, &out->mesh))) {
    if (rc == TS_ENOTISSUE) rc = TS_ESTORAGE;
    snprintf(err, cap, "stored tissue '%s': %s", name, ts_storage_errmsg(st));
  }
  ts_storage_tissue_free(&rec);
  if (rc) {
    ts_catalog_free(out);
    return rc;
  }
  out->def = ts_default_patch_def();
  ts_catalog_layers(&ls, &out->def, out->material);
  out->scale = ls.scale;
  out->format = strcmp(out->mesh.format, "stl") == 0   ? TS_MESH_STL
                : strcmp(out->mesh.format, "ply") == 0 ? TS_MESH_PLY
                                                       : TS_MESH_OBJ;
  return 0;
}

int ts_catalog_build(ts_storage *st, const char *name, const ts_mesh_import_opts *o,
                     ts_mesh_tissue *out, ts_patch_def *def, char *err, size_t cap) {
  memset(out, 0, sizeof *out);
  ts_catalog_tissue c;
  int rc = ts_catalog_load(st, name, &c, err, cap);
  if (rc) return rc;
  rc = ts_catalog_resolve_materials(st, &c.def, c.material, err, cap);
  if (!rc) {
    ts_mesh_import_opts opts = o ? *o : ts_mesh_import_opts_default();
    opts.scale = c.scale;
    rc = ts_mesh_tissue_build(c.mesh.bytes, c.mesh.n_bytes, c.format, &opts, c.def.layers,
                              c.def.n_layers, out, err, cap);
  }
  if (!rc && def) *def = c.def;
  ts_catalog_free(&c);
  return rc;
}
