/*
 * tc_models.c: libtissueclient's requests on stored learned models
 * (tissueclient.h): list, export, import, delete, training a session's
 * shortcut, and switching a session between its solve and a learned
 * shortcut.
 */
#include "tc_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"

static void take_model_info(tc_model_info *o, const Tissued__V1__ModelInfo *m) {
  memset(o, 0, sizeof *o);
  if (!m) return;
  o->model_id = m->model_id;
  snprintf(o->tissue, sizeof o->tissue, "%s", m->tissue ? m->tissue : "");
  snprintf(o->material, sizeof o->material, "%s", m->material ? m->material : "");
  snprintf(o->kind, sizeof o->kind, "%s", m->kind ? m->kind : "");
  o->version = m->version;
  o->samples = m->samples;
  o->loss = m->loss;
  o->heldout_rmse = m->heldout_rmse;
  o->heldout_max = m->heldout_max;
  o->created = m->created;
}

int tc_list_models(tc_client *c, const char *tissue, tc_model_info **out, size_t *n) {
  *out = NULL;
  *n = 0;
  Tissued__V1__ListModels m = TISSUED__V1__LIST_MODELS__INIT;
  m.tissue = (char *)(tissue ? tissue : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_MODELS;
  env.list_models = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_MODEL_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__ModelList *l = r->model_list;
  tc_model_info *v = calloc(l->n_models ? l->n_models : 1, sizeof *v);
  if (!v) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return tc__fail(c, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < l->n_models; i++) take_model_info(&v[i], l->models[i]);
  *out = v;
  *n = l->n_models;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_export_model(tc_client *c, int64_t model_id, char **document, tc_model_info *info) {
  *document = NULL;
  Tissued__V1__ExportModel m = TISSUED__V1__EXPORT_MODEL__INIT;
  m.model_id = model_id;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_EXPORT_MODEL;
  env.export_model = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_MODEL_DOCUMENT, &r);
  if (rc) return rc;
  const Tissued__V1__ModelDocument *d = r->model_document;
  if (!d->document || !d->document[0]) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return tc__fail(c, TS_EPROTOCOL, "ModelDocument without a document");
  }
  *document = strdup(d->document);
  if (info) take_model_info(info, d->info);
  tissued__v1__envelope__free_unpacked(r, NULL);
  return *document ? 0 : tc__fail(c, TS_ENOMEM, "out of memory");
}

int tc_import_model(tc_client *c, const char *document, tc_model_info *info) {
  if (!document) return tc__fail(c, TS_EINVAL, "no document");
  Tissued__V1__ImportModel m = TISSUED__V1__IMPORT_MODEL__INIT;
  m.document = (char *)document;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_IMPORT_MODEL;
  env.import_model = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_MODEL_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__ModelList *l = r->model_list;
  if (l->n_models != 1) {
    size_t n = l->n_models; /* read before the reply is freed (found by fuzz_client) */
    tissued__v1__envelope__free_unpacked(r, NULL);
    return tc__fail(c, TS_EPROTOCOL, "ImportModel answered with %zu models, not 1", n);
  }
  if (info) take_model_info(info, l->models[0]);
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_delete_model(tc_client *c, int64_t model_id) {
  Tissued__V1__DeleteModel m = TISSUED__V1__DELETE_MODEL__INIT;
  m.model_id = model_id;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_DELETE_MODEL;
  env.delete_model = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_use_shortcut(tc_client *c, uint32_t session_id, int learned, int64_t model_id) {
  Tissued__V1__UseShortcut m = TISSUED__V1__USE_SHORTCUT__INIT;
  m.session_id = session_id;
  m.learned = learned ? 1 : 0;
  m.model_id = model_id;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_USE_SHORTCUT;
  env.use_shortcut = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_train_shortcut(tc_client *c, uint32_t session_id, const char *model, uint64_t *request_id) {
  Tissued__V1__TrainShortcut m = TISSUED__V1__TRAIN_SHORTCUT__INIT;
  m.session_id = session_id;
  m.model = (char *)(model ? model : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TRAIN_SHORTCUT;
  env.train_shortcut = &m;
  /* the reply's handler takes the id tc__request gives it (on_message) */
  c->train_rid = 0;
  c->train_acked = 0;
  c->train_waiting = 1;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  c->train_waiting = 0;
  if (rc) {
    c->train_rid = 0;
    c->train_acked = 0;
    return rc;
  }
  if (request_id) *request_id = r->request_id;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}
