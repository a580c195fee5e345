/*
 * session_self.c: a session's tissue self-contact around each physics step
 * (see session_self.h).
 */
#include "session_self.h"

#include <stdlib.h>

#include "core/ts_error.h"
#include "core/ts_xpbd.h"

/* Gauss-Seidel passes of the mass-spring settle: pairs that share nodes
 * (a node under two triangles of the other sheet) need a few; 4 leave
 * under 1 um of violation in test_self_contact's fold. */
#define SETTLE_ITERATIONS 4

int ts_session_self_create(const ts_tissue *t, ts_session_self **out) {
  *out = NULL;
  ts_session_self *ss = calloc(1, sizeof *ss);
  if (!ss) return TS_ENOMEM;
  int rc = ts_self_contact_init(&ss->sc, NULL);
  if (!rc) rc = ts_aabb_tree_create_tissue(NULL, t, &ss->tree);
  if (rc) {
    ts_session_self_destroy(ss);
    return rc;
  }
  ss->tissue = t;
  ss->n_nodes = t->n_nodes;
  *out = ss;
  return 0;
}

void ts_session_self_destroy(ts_session_self *ss) {
  if (!ss) return;
  ts_self_contact_free(&ss->sc);
  ts_aabb_tree_destroy(ss->tree);
  free(ss);
}

int ts_session_self_prepare(ts_session_self *ss, ts_tissue *t, struct ts_xpbd *x) {
  if (ss->tissue != t || ss->n_nodes != t->n_nodes || !ss->tree) {
    ts_aabb_tree *nt = NULL;
    int rc = ts_aabb_tree_create_tissue(NULL, t, &nt);
    if (rc) {
      if (x) ts_xpbd_set_self_contact(x, NULL, NULL);
      return rc;
    }
    ts_aabb_tree_destroy(ss->tree);
    ss->tree = nt;
    ss->tissue = t;
    ss->n_nodes = t->n_nodes;
  }
  return x ? ts_xpbd_set_self_contact(x, &ss->sc, ss->tree) : 0;
}

void ts_session_self_after(ts_session_self *ss, ts_tissue *t, int xpbd_pairs) {
  if (xpbd_pairs >= 0) {
    ss->contacts = (uint32_t)xpbd_pairs;
  } else if (ts_aabb_tree_refit(ss->tree, (const double (*)[3])t->x) >= 0) {
    ts_self_contact_detect(&ss->sc, ss->tree, t, (const double (*)[3])t->x);
    ts_self_contact_settle(&ss->sc, t, SETTLE_ITERATIONS);
    ss->contacts = ss->sc.n;
  } else {
    ss->contacts = 0;
  }
  if (ss->contacts) ss->steps_touching++;
}
