/*
 * tc_materials.c: libtissueclient's requests on stored material fits
 * (tissueclient.h): the list (ListMaterials) and a new fit from
 * stress-strain samples (FitMaterial), both answered by the daemon's
 * storage worker from its SQLite database.
 */
#include "tc_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"

static void take_fit(tc_material_fit *o, const Tissued__V1__MaterialFit *m) {
  memset(o, 0, sizeof *o);
  if (!m) return;
  o->id = m->id;
  snprintf(o->tissue, sizeof o->tissue, "%s", m->tissue ? m->tissue : "");
  snprintf(o->layer, sizeof o->layer, "%s", m->layer ? m->layer : "");
  snprintf(o->direction, sizeof o->direction, "%s", m->direction ? m->direction : "");
  snprintf(o->name, sizeof o->name, "%s", m->name ? m->name : "");
  o->a = m->a;
  o->b = m->b;
  o->rmse = m->rmse;
  o->r2 = m->r2;
  o->samples = m->samples;
}

int tc_list_materials(tc_client *c, const char *tissue, tc_material_fit **out, size_t *n) {
  if (!out || !n) return tc__fail(c, TS_EINVAL, "no place for the list");
  *out = NULL;
  *n = 0;
  Tissued__V1__ListMaterials m = TISSUED__V1__LIST_MATERIALS__INIT;
  m.tissue = (char *)(tissue ? tissue : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_MATERIALS;
  env.list_materials = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_MATERIAL_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__MaterialList *l = r->material_list;
  tc_material_fit *v = calloc(l->n_fits ? l->n_fits : 1, sizeof *v);
  if (!v) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return tc__fail(c, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < l->n_fits; i++) take_fit(&v[i], l->fits[i]);
  *out = v;
  *n = l->n_fits;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_fit_material(tc_client *c, const char *tissue, const char *layer, const char *direction,
                    const char *name, const void *csv, size_t csv_len, tc_material_fit *out) {
  if (!tissue || !layer || !direction || !name || (!csv && csv_len))
    return tc__fail(c, TS_EINVAL, "a fit needs a tissue, layer, direction, name and samples");
  Tissued__V1__FitMaterial m = TISSUED__V1__FIT_MATERIAL__INIT;
  m.tissue = (char *)tissue;
  m.layer = (char *)layer;
  m.direction = (char *)direction;
  m.name = (char *)name;
  m.csv.data = (uint8_t *)csv;
  m.csv.len = csv_len;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_FIT_MATERIAL;
  env.fit_material = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_MATERIAL_FIT, &r);
  if (rc) return rc;
  if (out) take_fit(out, r->material_fit);
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}
