/*
 * tissue_delete.c: the DeleteTissue request (tissue_delete.h). The loop
 * refuses the name of a running session's tissue (the session keeps its
 * tissue in memory, but its training and its model lookups name the
 * stored record); the storage worker deletes the record with its models,
 * fits and unused mesh files in one transaction (the storage layer refuses
 * built-in tissues, unknown names, and records kept without with_records).
 * A session whose creation read the tissue before the deletion and starts
 * after it runs on; its training then cannot store a model, and says that
 * the tissue is not in the catalog.
 */
#include "tissue_delete.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "tissue.pb-c.h"
#include "ts_storage.h"
#include "worker.h"

typedef struct delete_job {
  ts_job job;
  ts_server *server;
  uint64_t conn_id, rid;
  char name[64];
  int with_records;
  int rc;
  char err[400];
  ts_tissue_deletion d;
} delete_job;

static void delete_work(ts_job *jb, ts_storage *st) {
  delete_job *j = (delete_job *)jb;
  j->rc = ts_storage_delete_mesh_tissue(st, j->name, j->with_records, &j->d);
  if (j->rc == TS_EBUSY)
    snprintf(j->err, sizeof j->err,
             "%s; ask again with with_records set (tissuectl tissues delete --with-records) to "
             "delete them too, after exporting the models you want to keep (tissuectl models "
             "export ID)",
             ts_storage_errmsg(st));
  else if (j->rc)
    snprintf(j->err, sizeof j->err, "%s", ts_storage_errmsg(st));
}

static void delete_done(ts_job *jb) {
  delete_job *j = (delete_job *)jb;
  if (!j->rc)
    ts_log_info("tissue '%s' deleted, with %lld learned models, %lld material fits and %lld "
                "mesh files",
                j->name, (long long)j->d.models, (long long)j->d.fits, (long long)j->d.meshes);
  ts_conn *c = ts_server_find_conn(j->server, j->conn_id);
  if (c && j->rc)
    ts_send_error(c, j->rid, j->rc, "%s", j->err);
  else if (c)
    ts_send_ack(c, j->rid, "delete-tissue");
  free(j);
}

void ts_request_delete_tissue(ts_conn *c, uint64_t rid, const Tissued__V1__DeleteTissue *m) {
  const char *name = m->name ? m->name : "";
  if (!*name || strlen(name) >= sizeof ((delete_job *)0)->name) {
    ts_send_error(c, rid, TS_EINVAL, "DeleteTissue.name must be 1 to %zu bytes",
                  sizeof ((delete_job *)0)->name - 1);
    return;
  }
  /* the built-in patch is refused as storage refuses every built-in
   * tissue, but before its sessions are counted: "end them first" would
   * promise a deletion that cannot come */
  if (strcmp(name, TS_BUILTIN_TISSUE) == 0) {
    ts_send_error(c, rid, TS_EINVAL,
                  "\"" TS_BUILTIN_TISSUE "\" is a built-in tissue; only uploads can be deleted");
    return;
  }
  /* the sessions of it, by id, for the message */
  char ids[160] = "";
  size_t len = 0;
  uint32_t n = 0, listed = 0;
  for (ts_session *se = c->server->sessions; se; se = se->next) {
    if (se->ending || strcmp(se->tissue_name, name) != 0) continue;
    if (len + 16 < sizeof ids) {
      len += (size_t)snprintf(ids + len, sizeof ids - len, "%s%u", n ? ", " : "", se->id);
      listed++;
    }
    n++;
  }
  if (n) {
    ts_send_error(c, rid, TS_EBUSY,
                  "tissue '%s' is in use by %u session%s (%s%s): end %s first (tissuectl end "
                  "--session N)",
                  name, n, n == 1 ? "" : "s", ids, listed < n ? ", ..." : "",
                  n == 1 ? "it" : "them");
    return;
  }
  delete_job *j = calloc(1, sizeof *j);
  if (!j) {
    ts_send_error(c, rid, TS_ENOMEM, "out of memory");
    return;
  }
  j->job.work = delete_work;
  j->job.done = delete_done;
  j->server = c->server;
  j->conn_id = c->id;
  j->rid = rid;
  snprintf(j->name, sizeof j->name, "%s", name);
  j->with_records = m->with_records;
  ts_worker_submit(&c->server->worker, &j->job);
}
