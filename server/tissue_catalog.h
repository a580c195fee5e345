/*
 * tissue_catalog.h: a catalogued tissue (a mesh tissue stored in SQLite: its
 * mesh by hash, its layer spec) read back and built the way a session of it
 * is, shared by the daemon (requests.c: CreateSession by a stored name) and
 * the offline tool (tissuetool models import, tool/cmd_learn.c), so that a
 * model's material identity computed offline is the daemon's.
 *
 * The layers are those a CreateSession naming them would give (dispatch.c):
 * each starts as the built-in patch's layer of its index (the last one for
 * deeper layers) and takes the stored name, thickness and fibre; a layer
 * that names a material takes the stored fits of that name (axial and
 * radial sigma = a*e^(b*eps)) as its laws, a layer that names none keeps
 * the core's built-in law. The tissue is then core/ts_mesh_tissue.h's.
 */
#ifndef TS_TISSUE_CATALOG_H
#define TS_TISSUE_CATALOG_H

#include <stddef.h>

#include "core/ts_mesh_tissue.h"
#include "core/ts_tissue.h"
#include "ts_layer_spec.h"
#include "ts_storage.h"

/* What a catalogued tissue is made of. */
typedef struct ts_catalog_tissue {
  ts_patch_def def;                   /* its layers (n_layers, layers[]) */
  char material[TS_MAX_LAYERS][64];   /* per layer: the stored fit name, "" = built-in law */
  double scale;                       /* the mesh's units to metres */
  int format;                         /* TS_MESH_* */
  ts_mesh_rec mesh;                   /* the stored mesh (bytes owned) */
} ts_catalog_tissue;

/* The layers of a stored layer spec into def->n_layers, def->layers and
 * material[] (see above; the laws not yet resolved). */
void ts_catalog_layers(const ts_layer_spec *ls, ts_patch_def *def, char material[][64]);

/* Resolves the named materials of def's layers from the stored fits (the
 * tissue "stomach"; the shipped table is stored under "default"). Returns
 * 0, or a ts_errno with the reason in err. */
int ts_catalog_resolve_materials(ts_storage *st, ts_patch_def *def, char material[][64],
                                 char *err, size_t cap);

/* Reads the mesh tissue `name`: its layer spec and mesh. Returns 0 (free
 * out with ts_catalog_free), TS_ENOTISSUE when there is no mesh tissue of
 * that name (err lists the known ones after "stomach-patch"), TS_ESTORAGE
 * for a damaged record, or another storage error; the reason in err. */
int ts_catalog_load(ts_storage *st, const char *name, ts_catalog_tissue *out, char *err,
                    size_t cap);
void ts_catalog_free(ts_catalog_tissue *c);

/* ts_catalog_load, ts_catalog_resolve_materials and ts_mesh_tissue_build
 * (import limits o; NULL = the importer's defaults, with the stored scale
 * in either case): the tissue a session of `name` runs on. def (may be
 * NULL) gets its layers. Returns 0 (free out with ts_mesh_tissue_free) or a
 * ts_errno with the reason in err. */
int ts_catalog_build(ts_storage *st, const char *name, const ts_mesh_import_opts *o,
                     ts_mesh_tissue *out, ts_patch_def *def, char *err, size_t cap);

#endif
