/*
 * models.c: ListModels, ExportModel, ImportModel, DeleteModel and
 * UseShortcut.model_id as worker jobs (see models.h). Each request copies
 * what it needs out of the message into its job, since the message is freed
 * as soon as dispatch returns.
 */
#include "models.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_learn.h"
#include "log.h"
#include "server.h"
#include "shortcut.h"
#include "tool/model_doc.h"
#include "ts_storage.h"
#include "worker.h"

#define TS_MODEL_DOC_MAX (64u << 10) /* bytes: a document is a few hundred */

typedef Tissued__V1__Envelope Envelope;

/* An Error with a message of any length: ts_send_error keeps 255 bytes, and
 * TS_EMISMATCH names two material identities of a few hundred each. */
static void send_error_long(ts_conn *c, uint64_t rid, int code, const char *msg) {
  if (strlen(msg) < 250) {
    ts_send_error(c, rid, code, "%s", msg);
    return;
  }
  Tissued__V1__Error e = TISSUED__V1__ERROR__INIT;
  e.code = -code;
  e.name = (char *)ts_err_name(code);
  e.message = (char *)msg;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_ERROR;
  env.error = &e;
  c->server->errors_sent++;
  ts_log_debug("error to %s: %s %s", c->peer, ts_err_name(code), msg);
  ts_send_envelope(c, &env);
}

/* One model as the job keeps it: the record's numbers and its strings. */
typedef struct model_item {
  int64_t id, version, samples, created;
  double loss, heldout_rmse, heldout_max;
  char tissue[64];
  char *material; /* owned */
  char kind[32];
  char solve[16];
  double refine_edge;
} model_item;

static void fill_info(Tissued__V1__ModelInfo *o, const model_item *m) {
  tissued__v1__model_info__init(o);
  o->model_id = m->id;
  o->tissue = (char *)m->tissue;
  o->material = m->material ? m->material : (char *)"";
  o->kind = (char *)m->kind;
  o->version = m->version;
  o->samples = m->samples > 0 ? (uint64_t)m->samples : 0;
  o->loss = m->loss;
  o->heldout_rmse = m->heldout_rmse;
  o->heldout_max = m->heldout_max;
  o->created = m->created;
  o->solve = (char *)m->solve;
  o->refine_edge = m->refine_edge;
}

/* The name of tissue id (storage ids to names), "" when unknown. */
typedef struct name_find {
  int64_t id;
  char name[64];
} name_find;

static int find_name(void *ud, const ts_tissue_rec *t) {
  name_find *f = ud;
  if (t->id != f->id) return 0;
  snprintf(f->name, sizeof f->name, "%s", t->name);
  return 1;
}

static void tissue_name(ts_storage *st, int64_t id, char *out, size_t cap) {
  name_find f = {id, ""};
  ts_storage_list_tissues(st, find_name, &f);
  snprintf(out, cap, "%s", f.name);
}

static int item_from(model_item *it, const ts_model_rec *m, ts_storage *st) {
  memset(it, 0, sizeof *it);
  it->id = m->id;
  it->version = m->version;
  it->samples = m->samples;
  it->created = m->created;
  it->loss = m->loss;
  it->heldout_rmse = m->heldout_rmse;
  it->heldout_max = m->heldout_max;
  snprintf(it->kind, sizeof it->kind, "%s", m->kind);
  snprintf(it->solve, sizeof it->solve, "%s", m->solve ? m->solve : "unknown");
  it->refine_edge = m->refine_edge;
  tissue_name(st, m->tissue, it->tissue, sizeof it->tissue);
  it->material = strdup(m->material ? m->material : "");
  return it->material ? 0 : TS_ENOMEM;
}

/* Sends a ModelList of n items. */
static void send_list(ts_conn *c, uint64_t rid, const model_item *items, size_t n) {
  Tissued__V1__ModelInfo *infos = calloc(n ? n : 1, sizeof *infos);
  Tissued__V1__ModelInfo **ptrs = calloc(n ? n : 1, sizeof *ptrs);
  if (!infos || !ptrs) {
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
  } else {
    for (size_t i = 0; i < n; i++) {
      fill_info(&infos[i], &items[i]);
      ptrs[i] = &infos[i];
    }
    Tissued__V1__ModelList r = TISSUED__V1__MODEL_LIST__INIT;
    r.n_models = n;
    r.models = ptrs;
    Envelope env = TISSUED__V1__ENVELOPE__INIT;
    env.request_id = rid;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_MODEL_LIST;
    env.model_list = &r;
    ts_send_envelope(c, &env);
  }
  free(infos);
  free(ptrs);
}

/* The job of every model request: one kind of work, one kind of reply. */
enum { OP_LIST, OP_EXPORT, OP_IMPORT, OP_DELETE, OP_USE };

typedef struct model_job {
  ts_job job;
  ts_server *server;
  uint64_t conn_id, rid;
  int op;
  int64_t id;          /* export, delete, use */
  char tissue[64];     /* list: the filter ("" all); use: the session's tissue */
  char *text;          /* import: the document (owned) */
  /* use */
  uint32_t session_id;
  int learned;
  uint32_t n_sheets;
  char material[512];  /* the session's material identity */
  ts_learn_solve solve; /* the session's solve */
  ts_learn_model model;
  /* results */
  int rc;
  char err[1400];
  model_item *items;   /* list, import (one), export (one) */
  size_t n, cap;
  char *document;      /* export: cJSON text (cJSON_free) */
  int existing;        /* import: the model was stored already */
} model_job;

static void free_items(model_job *j) {
  for (size_t i = 0; i < j->n; i++) free(j->items[i].material);
  free(j->items);
  j->items = NULL;
  j->n = j->cap = 0;
}

static int push_item(model_job *j, const ts_model_rec *m, ts_storage *st) {
  if (j->n == j->cap) {
    size_t cap = j->cap ? j->cap * 2 : 8;
    model_item *p = realloc(j->items, cap * sizeof *p);
    if (!p) return TS_ENOMEM;
    j->items = p;
    j->cap = cap;
  }
  int rc = item_from(&j->items[j->n], m, st);
  if (!rc) j->n++;
  return rc;
}

typedef struct list_ud {
  model_job *j;
  ts_storage *st;
} list_ud;

static int collect(void *ud, const ts_model_rec *m) {
  list_ud *u = ud;
  return push_item(u->j, m, u->st);
}

static void list_work(model_job *j, ts_storage *st) {
  int64_t tid = 0;
  if (j->tissue[0]) {
    ts_tissue_rec tr;
    int rc = ts_storage_get_tissue(st, j->tissue, &tr);
    if (rc) {
      j->rc = rc;
      if (rc == TS_ENOTISSUE)
        snprintf(j->err, sizeof j->err, "no tissue '%s'", j->tissue);
      else
        snprintf(j->err, sizeof j->err, "looking up tissue '%s': %s", j->tissue,
                 ts_storage_errmsg(st));
      return;
    }
    tid = tr.id;
    ts_storage_tissue_free(&tr);
  }
  list_ud u = {j, st};
  int rc = ts_storage_list_models(st, tid, collect, &u);
  if (rc < 0) {
    j->rc = rc;
    snprintf(j->err, sizeof j->err, "listing models: %s",
             rc == TS_ENOMEM ? "out of memory" : ts_storage_errmsg(st));
  }
}

/* A job's failure to read or delete model j->id (storage's code rc; doing:
 * "reading" or "deleting"): TS_ENOMODEL names the id, any other code
 * storage's message. */
static void model_failed(model_job *j, ts_storage *st, int rc, const char *doing) {
  j->rc = rc;
  if (rc == TS_ENOMODEL)
    snprintf(j->err, sizeof j->err, "no model %lld", (long long)j->id);
  else
    snprintf(j->err, sizeof j->err, "%s model %lld: %s", doing, (long long)j->id,
             ts_storage_errmsg(st));
}

static void export_work(model_job *j, ts_storage *st) {
  ts_model_rec m;
  int rc = ts_storage_get_model(st, j->id, &m);
  if (rc) {
    model_failed(j, st, rc, "reading");
    return;
  }
  rc = push_item(j, &m, st);
  cJSON *o = rc ? NULL : ts_model_doc_json(&m, j->items[0].tissue);
  j->document = o ? cJSON_Print(o) : NULL;
  cJSON_Delete(o);
  ts_storage_model_free(&m);
  if (!j->document) {
    j->rc = TS_ENOMEM;
    snprintf(j->err, sizeof j->err, "out of memory writing model %lld", (long long)j->id);
  }
}

static void import_work(model_job *j, ts_storage *st) {
  ts_model_doc *d = malloc(sizeof *d);
  if (!d) {
    j->rc = TS_ENOMEM;
    snprintf(j->err, sizeof j->err, "out of memory");
    return;
  }
  char why[300];
  int rc = ts_model_doc_parse(j->text, d, why, sizeof why);
  if (rc) {
    j->rc = rc;
    snprintf(j->err, sizeof j->err, "the model document is refused: %s", why);
    goto out;
  }
  if (!ts_model_doc_count_ok(d)) {
    j->rc = TS_EINVAL;
    snprintf(j->err, sizeof j->err,
             "the model document is refused: a %s model cannot have %u parameters",
             ts_learn_kind_name(d->kind), d->n_theta);
    goto out;
  }
  ts_tissue_rec tr;
  rc = ts_storage_get_tissue(st, d->tissue, &tr);
  if (rc) {
    j->rc = rc;
    if (rc == TS_ENOTISSUE)
      snprintf(j->err, sizeof j->err,
               "the model is for tissue '%.200s', which this server does not know (upload its "
               "mesh under that name first)",
               d->tissue);
    else
      snprintf(j->err, sizeof j->err, "looking up tissue '%.200s': %s", d->tissue,
               ts_storage_errmsg(st));
    goto out;
  }
  int64_t tid = tr.id;
  ts_storage_tissue_free(&tr);
  uint8_t blob[8 * TS_LEARN_MAX_PARAMS];
  size_t nb = ts_model_doc_theta_bytes(d, blob, sizeof blob);
  int64_t id = ts_model_doc_find_stored(st, tid, d);
  if (id < 0) {
    j->rc = (int)id;
    snprintf(j->err, sizeof j->err, "listing models: %s", ts_storage_errmsg(st));
    goto out;
  }
  if (id > 0) {
    j->existing = 1;
  } else {
    ts_model_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.tissue = tid;
    rec.material = d->material;
    rec.kind = ts_learn_kind_name(d->kind);
    rec.theta = blob;
    rec.theta_bytes = nb;
    rec.loss = d->loss;
    rec.samples = d->samples;
    rec.heldout_rmse = d->heldout_rmse;
    rec.heldout_max = d->heldout_max;
    rec.solve = ts_learn_solve_name(d->solve.kind);
    rec.refine_edge = d->solve.kind == TS_LEARN_SOLVE_REFINED ? d->solve.refine_edge : 0;
    id = ts_storage_put_model(st, &rec, NULL);
    if (id <= 0) {
      j->rc = id < 0 ? (int)id : TS_ESTORAGE;
      snprintf(j->err, sizeof j->err, "storing the model: %s", ts_storage_errmsg(st));
      goto out;
    }
  }
  ts_model_rec m;
  if ((rc = ts_storage_get_model(st, id, &m)) == 0) {
    rc = push_item(j, &m, st);
    ts_storage_model_free(&m);
  }
  if (rc) {
    j->rc = rc;
    snprintf(j->err, sizeof j->err, "model %lld was stored but cannot be read back: %s",
             (long long)id, rc == TS_ENOMEM ? "out of memory" : ts_storage_errmsg(st));
  }
out:
  free(d);
}

static void delete_work(model_job *j, ts_storage *st) {
  int rc = ts_storage_delete_model(st, j->id);
  if (rc) {
    model_failed(j, st, rc, "deleting");
  }
}

/* 1 when stored model m (id) may run on the session's solve; else 0 and
 * a message naming both solves in err. A model stored before the solve was
 * recorded (schema 3: "unknown") runs on none: the session cannot verify
 * that it learned its solve, and a model of the other solve settles
 * differently (ts_learn.h); the message says how to get one that runs. */
static int solve_fits(const ts_model_rec *m, ts_learn_solve session, char *err, size_t cap,
                      int64_t id, uint32_t session_id) {
  ts_learn_solve ms;
  if (ts_learn_solve_parse(m->solve ? m->solve : "unknown", m->refine_edge, &ms)) {
    snprintf(err, cap, "model %lld records a solve this server does not know ('%.32s')",
             (long long)id, m->solve ? m->solve : "");
    return 0;
  }
  if (ts_learn_solve_matches(ms, session)) return 1;
  char a[64], b[64];
  if (ms.kind == TS_LEARN_SOLVE_UNKNOWN) {
    ts_learn_solve_describe(session, b, sizeof b);
    snprintf(err, cap,
             "model %lld was stored before models recorded the solve they learned, so session "
             "%u cannot verify that it learned its %s solve: retrain the model in a session, "
             "or export it and re-import it with its \"solve\" (\"plain\", or \"refined\" "
             "with \"refine_edge\") named",
             (long long)id, session_id, b);
    return 0;
  }
  ts_learn_solve_describe(ms, a, sizeof a);
  ts_learn_solve_describe(session, b, sizeof b);
  snprintf(err, cap,
           "model %lld learned another solve: the model learned the %s solve; session %u runs "
           "the %s solve (--qs-refine-edge)",
           (long long)id, a, session_id, b);
  return 0;
}

static void use_work(model_job *j, ts_storage *st) {
  ts_model_rec m;
  int rc = ts_storage_get_model(st, j->id, &m);
  if (rc) {
    model_failed(j, st, rc, "reading");
    return;
  }
  char tname[64];
  tissue_name(st, m.tissue, tname, sizeof tname);
  ts_learn_kind kind;
  if (strcmp(tname, j->tissue) != 0 || strcmp(m.material, j->material) != 0) {
    j->rc = TS_EMISMATCH;
    snprintf(j->err, sizeof j->err,
             "model %lld belongs to another tissue or material: the model is for tissue '%s', "
             "material '%.500s'; session %u is tissue '%s', material '%.500s'",
             (long long)j->id, tname, m.material, j->session_id, j->tissue, j->material);
  } else if (!solve_fits(&m, j->solve, j->err, sizeof j->err, j->id, j->session_id)) {
    j->rc = TS_EMISMATCH;
  } else if (ts_learn_kind_parse(m.kind, &kind)) {
    j->rc = TS_EUNSUPPORTED;
    snprintf(j->err, sizeof j->err,
             "model %lld is of kind '%.64s', which this server cannot run (method, rich, "
             "spread, spread2, spread2r)",
             (long long)j->id, m.kind);
  } else if ((rc = ts_learn_theta_decode(kind, j->n_sheets, m.theta, m.theta_bytes,
                                         &j->model)) != 0) {
    j->rc = TS_ESTORAGE;
    snprintf(j->err, sizeof j->err,
             "stored model %lld is damaged: %zu bytes of theta do not make a %s model of %u "
             "sheets (%s)",
             (long long)j->id, m.theta_bytes, m.kind, j->n_sheets, ts_strerror(rc));
  } else {
    j->model.loss = m.loss;
    j->model.samples = m.samples > 0 ? (uint64_t)m.samples : 0;
    rc = push_item(j, &m, st);
    if (rc) {
      j->rc = rc;
      snprintf(j->err, sizeof j->err, "out of memory");
    }
  }
  ts_storage_model_free(&m);
}

static void model_work(ts_job *jb, ts_storage *st) {
  model_job *j = (model_job *)jb;
  switch (j->op) {
  case OP_LIST: list_work(j, st); break;
  case OP_EXPORT: export_work(j, st); break;
  case OP_IMPORT: import_work(j, st); break;
  case OP_DELETE: delete_work(j, st); break;
  default: use_work(j, st); break;
  }
}

/* UseShortcut's model reached the loop: into the session's mailbox, which
 * its physics thread reads at the start of the next step. */
static int use_install(model_job *j, ts_conn *c) {
  ts_session *se = ts_server_find_session(j->server, j->session_id);
  if (!se || se->ending || !se->sim.shortcut) {
    j->rc = TS_ENOSESSION;
    snprintf(j->err, sizeof j->err, "session %u ended before model %lld could be installed",
             j->session_id, (long long)j->id);
    return -1;
  }
  uv_mutex_lock(&se->mbox.lock);
  se->mbox.model = j->model;
  se->mbox.model_ready = 1;
  se->mbox.use_learned = j->learned ? 1 : 0;
  uv_mutex_unlock(&se->mbox.lock);
  se->has_model = 1;
  ts_log_info("session %u: stored %s model %lld installed by %s; the %s answers", se->id,
              j->items[0].kind, (long long)j->id, c ? c->peer : "a client that left",
              j->learned ? "model" : "solve");
  return 0;
}

static void model_done(ts_job *jb) {
  model_job *j = (model_job *)jb;
  ts_conn *c = ts_server_find_conn(j->server, j->conn_id);
  if (!j->rc && j->op == OP_USE && !j->server->shutting_down) use_install(j, c);
  if (c && j->rc) {
    send_error_long(c, j->rid, j->rc, j->err);
  } else if (c && !j->server->shutting_down) {
    switch (j->op) {
    case OP_LIST: send_list(c, j->rid, j->items, j->n); break;
    case OP_IMPORT:
      send_list(c, j->rid, j->items, j->n);
      ts_log_info("model %lld (%s, tissue '%s') %s by %s", (long long)j->items[0].id,
                  j->items[0].kind, j->items[0].tissue,
                  j->existing ? "was stored already: import changed nothing" : "imported",
                  c->peer);
      break;
    case OP_EXPORT: {
      Tissued__V1__ModelInfo info;
      fill_info(&info, &j->items[0]);
      Tissued__V1__ModelDocument r = TISSUED__V1__MODEL_DOCUMENT__INIT;
      r.info = &info;
      r.document = j->document;
      Envelope env = TISSUED__V1__ENVELOPE__INIT;
      env.request_id = j->rid;
      env.body_case = TISSUED__V1__ENVELOPE__BODY_MODEL_DOCUMENT;
      env.model_document = &r;
      ts_send_envelope(c, &env);
      break;
    }
    case OP_DELETE:
      ts_send_ack(c, j->rid, "delete");
      ts_log_info("model %lld deleted by %s", (long long)j->id, c->peer);
      break;
    default: ts_send_ack(c, j->rid, j->learned ? "learned" : "solve"); break;
    }
  }
  free_items(j);
  cJSON_free(j->document);
  free(j->text);
  free(j);
}

static model_job *new_job(ts_conn *c, uint64_t rid, int op) {
  model_job *j = calloc(1, sizeof *j);
  if (!j) {
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return NULL;
  }
  j->job.work = model_work;
  j->job.done = model_done;
  j->server = c->server;
  j->conn_id = c->id;
  j->rid = rid;
  j->op = op;
  return j;
}

void ts_models_list(ts_conn *c, uint64_t rid, const char *tissue) {
  if (tissue && strlen(tissue) > 63) {
    ts_send_error(c, rid, TS_ENOTISSUE, "no tissue '%.64s...' (names are at most 63 bytes)",
                  tissue);
    return;
  }
  model_job *j = new_job(c, rid, OP_LIST);
  if (!j) return;
  snprintf(j->tissue, sizeof j->tissue, "%s", tissue ? tissue : "");
  ts_worker_submit(&c->server->worker, &j->job);
}

static int check_id(ts_conn *c, uint64_t rid, int64_t id) {
  if (id > 0) return 0;
  ts_send_error(c, rid, TS_EINVAL, "model_id must be a stored model's id (> 0), not %lld",
                (long long)id);
  return -1;
}

void ts_models_export(ts_conn *c, uint64_t rid, int64_t id) {
  if (check_id(c, rid, id)) return;
  model_job *j = new_job(c, rid, OP_EXPORT);
  if (!j) return;
  j->id = id;
  ts_worker_submit(&c->server->worker, &j->job);
}

void ts_models_import(ts_conn *c, uint64_t rid, const char *document) {
  size_t len = document ? strlen(document) : 0;
  if (len == 0) {
    ts_send_error(c, rid, TS_EINVAL, "ImportModel without a document (the JSON that "
                                     "ExportModel or `tissuetool models export` gives)");
    return;
  }
  if (len > TS_MODEL_DOC_MAX) {
    ts_send_error(c, rid, TS_ETOOBIG, "a model document of %zu bytes; at most %u", len,
                  TS_MODEL_DOC_MAX);
    return;
  }
  model_job *j = new_job(c, rid, OP_IMPORT);
  if (!j) return;
  j->text = strdup(document);
  if (!j->text) {
    free(j);
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return;
  }
  ts_worker_submit(&c->server->worker, &j->job);
}

void ts_models_delete(ts_conn *c, uint64_t rid, int64_t id) {
  if (check_id(c, rid, id)) return;
  model_job *j = new_job(c, rid, OP_DELETE);
  if (!j) return;
  j->id = id;
  ts_worker_submit(&c->server->worker, &j->job);
}

void ts_models_use(ts_conn *c, uint64_t rid, ts_session *se, int64_t model_id, int learned) {
  if (check_id(c, rid, model_id)) return;
  model_job *j = new_job(c, rid, OP_USE);
  if (!j) return;
  j->id = model_id;
  j->session_id = se->id;
  j->learned = learned ? 1 : 0;
  /* fixed when the session was made quasi-static, before physics owned it */
  j->n_sheets = se->sim.shortcut->q->n_sheets;
  snprintf(j->tissue, sizeof j->tissue, "%s", se->tissue_name);
  snprintf(j->material, sizeof j->material, "%s", se->material);
  j->solve = se->sim.shortcut->solve;
  ts_worker_submit(&c->server->worker, &j->job);
}
