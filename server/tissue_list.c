/*
 * tissue_list.c: the ListTissues request (tissue_list.h): the storage
 * worker lists the tissues table; the reply keeps the built-in patch and the
 * uploads ("mesh"), and leaves out the other built-in rows (the material
 * table's tissue, "stomach", which no session is made of).
 */
#include "tissue_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "server.h"
#include "tissue.pb-c.h"
#include "ts_storage.h"
#include "worker.h"

typedef struct tissue_item {
  char name[64], kind[16];
  int64_t created;
} tissue_item;

typedef struct tissues_job {
  ts_job job;
  ts_server *server;
  uint64_t conn_id, rid;
  int rc;
  char err[256];
  tissue_item *items;
  size_t n, cap;
} tissues_job;

static int collect(void *ud, const ts_tissue_rec *t) {
  tissues_job *j = ud;
  const int builtin = !strcmp(t->kind, "builtin");
  if (builtin ? strcmp(t->name, TS_BUILTIN_TISSUE) != 0 : strcmp(t->kind, "mesh") != 0) return 0;
  if (j->n == j->cap) {
    size_t cap = j->cap ? j->cap * 2 : 16;
    tissue_item *p = realloc(j->items, cap * sizeof *p);
    if (!p) return TS_ENOMEM;
    j->items = p;
    j->cap = cap;
  }
  tissue_item *it = &j->items[j->n++];
  snprintf(it->name, sizeof it->name, "%s", t->name);
  snprintf(it->kind, sizeof it->kind, "%s", t->kind);
  it->created = t->created;
  return 0;
}

static void list_work(ts_job *jb, ts_storage *st) {
  tissues_job *j = (tissues_job *)jb;
  int rc = ts_storage_list_tissues(st, collect, j);
  if (rc < 0) {
    snprintf(j->err, sizeof j->err, "listing the stored tissues: %s",
             rc == TS_ENOMEM ? "out of memory" : ts_storage_errmsg(st));
    j->rc = rc;
  }
}

static void list_done(ts_job *jb) {
  tissues_job *j = (tissues_job *)jb;
  ts_conn *c = ts_server_find_conn(j->server, j->conn_id);
  if (c && j->rc) {
    ts_send_error(c, j->rid, j->rc, "%s", j->err);
  } else if (c) {
    Tissued__V1__TissueInfo *infos = calloc(j->n ? j->n : 1, sizeof *infos);
    Tissued__V1__TissueInfo **ptrs = calloc(j->n ? j->n : 1, sizeof *ptrs);
    if (!infos || !ptrs) {
      ts_send_error(c, j->rid, TS_ENOMEM, "out of memory");
    } else {
      /* the built-in patch first, then the uploads in the table's (id) order */
      size_t k = 0;
      for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < j->n; i++) {
          if ((strcmp(j->items[i].kind, "builtin") == 0) != (pass == 0)) continue;
          tissued__v1__tissue_info__init(&infos[k]);
          infos[k].name = j->items[i].name;
          infos[k].kind = j->items[i].kind;
          infos[k].created = j->items[i].created;
          ptrs[k] = &infos[k];
          k++;
        }
      Tissued__V1__TissueList r = TISSUED__V1__TISSUE_LIST__INIT;
      r.n_tissues = k;
      r.tissues = ptrs;
      Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
      env.request_id = j->rid;
      env.body_case = TISSUED__V1__ENVELOPE__BODY_TISSUE_LIST;
      env.tissue_list = &r;
      ts_send_envelope(c, &env);
    }
    free(infos);
    free(ptrs);
  }
  free(j->items);
  free(j);
}

void ts_request_list_tissues(ts_conn *c, uint64_t rid) {
  tissues_job *j = calloc(1, sizeof *j);
  if (!j) {
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return;
  }
  j->job.work = list_work;
  j->job.done = list_done;
  j->server = c->server;
  j->conn_id = c->id;
  j->rid = rid;
  ts_worker_submit(&c->server->worker, &j->job);
}
