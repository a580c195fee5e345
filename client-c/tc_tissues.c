/*
 * tc_tissues.c: libtissueclient's ListTissues (tissueclient.h): the
 * tissues a session can be created of, by name; and DeleteTissue.
 */
#include "tc_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"

int tc_list_tissues(tc_client *c, tc_tissue_info **out, size_t *n) {
  if (!out || !n) return tc__fail(c, TS_EINVAL, "no place for the list");
  *out = NULL;
  *n = 0;
  Tissued__V1__ListTissues m = TISSUED__V1__LIST_TISSUES__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_TISSUES;
  env.list_tissues = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_TISSUE_LIST, &r);
  if (rc) return rc;
  const Tissued__V1__TissueList *l = r->tissue_list;
  tc_tissue_info *v = calloc(l->n_tissues ? l->n_tissues : 1, sizeof *v);
  if (!v) {
    tissued__v1__envelope__free_unpacked(r, NULL);
    return tc__fail(c, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < l->n_tissues; i++) {
    const Tissued__V1__TissueInfo *t = l->tissues[i];
    snprintf(v[i].name, sizeof v[i].name, "%s", t->name ? t->name : "");
    snprintf(v[i].kind, sizeof v[i].kind, "%s", t->kind ? t->kind : "");
    v[i].created = t->created;
  }
  *out = v;
  *n = l->n_tissues;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}

int tc_delete_tissue(tc_client *c, const char *name, int with_records) {
  if (!name || !*name) return tc__fail(c, TS_EINVAL, "no tissue name");
  Tissued__V1__DeleteTissue m = TISSUED__V1__DELETE_TISSUE__INIT;
  m.name = (char *)name;
  m.with_records = with_records ? 1 : 0;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_DELETE_TISSUE;
  env.delete_tissue = &m;
  Envelope *r;
  int rc = tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_ACK, &r);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return 0;
}
