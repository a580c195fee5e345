/*
 * requests.c: worker-backed protocol requests (see requests.h). Each request
 * copies what it needs out of the message into its job, since the message is
 * freed as soon as dispatch returns.
 */
#include "requests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "log.h"
#include "materials.h"
#include "server.h"
#include "ts_storage.h"
#include "worker.h"

typedef Tissued__V1__Envelope Envelope;

/* ---- materials ----------------------------------------------------------- */

typedef struct list_job {
  ts_job job;
  ts_server *server;
  uint64_t conn_id, rid;
  char tissue[64];
  int rc;
  char err[256];
  ts_material *items;
  size_t n, cap;
} list_job;

static int collect(void *ud, const ts_material *m) {
  list_job *j = ud;
  if (j->n == j->cap) {
    size_t cap = j->cap ? j->cap * 2 : 16;
    ts_material *p = realloc(j->items, cap * sizeof *p);
    if (!p) return TS_ENOMEM;
    j->items = p;
    j->cap = cap;
  }
  j->items[j->n++] = *m;
  return 0;
}

static void list_work(ts_job *jb, ts_storage *st) {
  list_job *j = (list_job *)jb;
  int rc = ts_materials_list(st, j->tissue[0] ? j->tissue : NULL, collect, j, j->err,
                             sizeof j->err);
  j->rc = rc < 0 ? rc : 0;
}

static void fill_fit(Tissued__V1__MaterialFit *f, ts_material *m) {
  tissued__v1__material_fit__init(f);
  f->id = m->id;
  f->tissue = m->tissue;
  f->layer = m->layer;
  f->direction = m->direction;
  f->name = m->name;
  f->a = m->a;
  f->b = m->b;
  f->rmse = m->rmse;
  f->r2 = m->r2;
  f->samples = (uint32_t)(m->samples < 0 ? 0 : m->samples);
}

static void list_done(ts_job *jb) {
  list_job *j = (list_job *)jb;
  ts_conn *c = ts_server_find_conn(j->server, j->conn_id);
  if (c && j->rc) {
    ts_send_error(c, j->rid, j->rc, "%s", j->err);
  } else if (c) {
    Tissued__V1__MaterialFit *fits = calloc(j->n ? j->n : 1, sizeof *fits);
    Tissued__V1__MaterialFit **ptrs = calloc(j->n ? j->n : 1, sizeof *ptrs);
    if (!fits || !ptrs) {
      ts_send_error(c, j->rid, TS_ENOMEM, "out of memory");
    } else {
      for (size_t i = 0; i < j->n; i++) {
        fill_fit(&fits[i], &j->items[i]);
        ptrs[i] = &fits[i];
      }
      Tissued__V1__MaterialList r = TISSUED__V1__MATERIAL_LIST__INIT;
      r.n_fits = j->n;
      r.fits = ptrs;
      Envelope env = TISSUED__V1__ENVELOPE__INIT;
      env.request_id = j->rid;
      env.body_case = TISSUED__V1__ENVELOPE__BODY_MATERIAL_LIST;
      env.material_list = &r;
      ts_send_envelope(c, &env);
    }
    free(fits);
    free(ptrs);
  }
  free(j->items);
  free(j);
}

void ts_request_list_materials(ts_conn *c, uint64_t rid, const char *tissue) {
  if (tissue && strlen(tissue) > 63) {
    ts_send_error(c, rid, TS_ERANGE, "tissue name longer than 63 bytes");
    return;
  }
  list_job *j = calloc(1, sizeof *j);
  if (!j) {
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return;
  }
  j->job.work = list_work;
  j->job.done = list_done;
  j->server = c->server;
  j->conn_id = c->id;
  j->rid = rid;
  snprintf(j->tissue, sizeof j->tissue, "%s", tissue ? tissue : "");
  ts_worker_submit(&c->server->worker, &j->job);
}

typedef struct fit_job {
  ts_job job;
  ts_server *server;
  uint64_t conn_id, rid;
  char tissue[64], layer[64], direction[64], name[64];
  char *csv;
  size_t csv_len;
  int rc;
  char err[256];
  ts_material out;
} fit_job;

static void fit_work(ts_job *jb, ts_storage *st) {
  fit_job *j = (fit_job *)jb;
  j->rc = ts_materials_fit_csv(st, j->tissue, j->layer, j->direction, j->name, j->csv,
                               j->csv_len, &j->out, NULL, j->err, sizeof j->err);
  if (j->rc > 0) j->rc = 0;
}

static void fit_done(ts_job *jb) {
  fit_job *j = (fit_job *)jb;
  ts_conn *c = ts_server_find_conn(j->server, j->conn_id);
  if (c && j->rc) {
    ts_send_error(c, j->rid, j->rc, "%s", j->err);
  } else if (c) {
    Tissued__V1__MaterialFit f;
    fill_fit(&f, &j->out);
    Envelope env = TISSUED__V1__ENVELOPE__INIT;
    env.request_id = j->rid;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_MATERIAL_FIT;
    env.material_fit = &f;
    ts_send_envelope(c, &env);
    ts_log_info("material fit %s/%s/%s '%s' stored: a %g Pa, b %g, rmse %g Pa", j->out.tissue,
                j->out.layer, j->out.direction, j->out.name, j->out.a, j->out.b, j->out.rmse);
  }
  free(j->csv);
  free(j);
}

void ts_request_fit_material(ts_conn *c, uint64_t rid, const Tissued__V1__FitMaterial *m) {
  const char *fields[4] = {m->tissue, m->layer, m->direction, m->name};
  for (int i = 0; i < 4; i++) {
    if (fields[i] && strlen(fields[i]) > 63) {
      ts_send_error(c, rid, TS_ERANGE, "tissue, layer, direction and name are at most 63 bytes");
      return;
    }
  }
  fit_job *j = calloc(1, sizeof *j);
  char *csv = j ? malloc(m->csv.len + 1) : NULL;
  if (!j || !csv) {
    free(j);
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return;
  }
  if (m->csv.len) memcpy(csv, m->csv.data, m->csv.len); /* an empty field has no data */
  csv[m->csv.len] = 0;
  j->job.work = fit_work;
  j->job.done = fit_done;
  j->server = c->server;
  j->conn_id = c->id;
  j->rid = rid;
  snprintf(j->tissue, sizeof j->tissue, "%s", m->tissue ? m->tissue : "");
  snprintf(j->layer, sizeof j->layer, "%s", m->layer ? m->layer : "");
  snprintf(j->direction, sizeof j->direction, "%s", m->direction ? m->direction : "");
  snprintf(j->name, sizeof j->name, "%s", m->name ? m->name : "");
  j->csv = csv;
  j->csv_len = m->csv.len;
  ts_worker_submit(&c->server->worker, &j->job);
}
