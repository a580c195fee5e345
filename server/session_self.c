/*
 * session_self.c: a session's tissue self-contact around each physics step
 * (see session_self.h).
 */
#include "session_self.h"

#include <stdlib.h>

#include "core/ts_error.h"
#include "log.h"
#include "core/ts_xpbd.h"

/* Gauss-Seidel passes of the mass-spring settle: pairs that share nodes
 * (a node under two triangles of the other sheet) need a few; 4 leave
 * under 1 um of violation in test_self_contact's fold. */
#define SETTLE_ITERATIONS 4

uint32_t ts_session_self_surface_nodes(const ts_tissue *t) {
  const uint32_t nt = ts_tissue_n_contact_tris(t);
  const uint32_t (*tris)[3] = (const uint32_t (*)[3])ts_tissue_contact_tris(t);
  uint8_t *mark = calloc(t->n_nodes ? t->n_nodes : 1, 1);
  if (!mark || !tris) {
    free(mark);
    return 0;
  }
  uint32_t n = 0;
  for (uint32_t k = 0; k < nt; k++)
    for (int c = 0; c < 3; c++)
      if (tris[k][c] < t->n_nodes && !mark[tris[k][c]]) mark[tris[k][c]] = 1, n++;
  free(mark);
  return n;
}

int ts_session_self_create(const ts_tissue *t, uint32_t max_nodes, ts_session_self **out,
                           uint32_t *surface_nodes) {
  *out = NULL;
  const uint32_t ns = ts_session_self_surface_nodes(t);
  if (surface_nodes) *surface_nodes = ns;
  if (ns > max_nodes) return TS_ETOOBIG; /* before anything is allocated for it */
  ts_session_self *ss = calloc(1, sizeof *ss);
  if (!ss) return TS_ENOMEM;
  ss->max_nodes = max_nodes;
  ss->surface_nodes = ns;
  int rc = ts_self_contact_init(&ss->sc, NULL);
  if (!rc) rc = ts_aabb_tree_create_tissue(NULL, t, &ss->tree);
  if (!rc) rc = ts_self_contact_bind(&ss->sc, ss->tree, t);
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
  if (ss->tissue != t || ss->n_nodes != t->n_nodes) {
    /* a refinement installed a new tissue: its size against the limit
     * first (a refinement adds surface nodes where it splits) */
    const uint32_t ns = ts_session_self_surface_nodes(t);
    if (ns > ss->max_nodes) {
      if (!ss->over_limit)
        ts_log_warn("self-contact off for a refined tissue: %u surface nodes, more than the "
                    "limit of %u (--self-contact-max-nodes)", ns, ss->max_nodes);
      ts_aabb_tree_destroy(ss->tree);
      ss->tree = NULL;
      ss->over_limit = 1;
      ss->tissue = t;
      ss->n_nodes = t->n_nodes;
      ss->surface_nodes = ns;
    } else {
      ts_aabb_tree *nt = NULL;
      int rc = ts_aabb_tree_create_tissue(NULL, t, &nt);
      if (!rc) rc = ts_self_contact_bind(&ss->sc, nt, t);
      if (rc) { /* tried again next step */
        ts_aabb_tree_destroy(nt);
        if (x) ts_xpbd_set_self_contact(x, NULL, NULL);
        return rc;
      }
      if (ss->over_limit)
        ts_log_info("self-contact on again: the tissue's %u surface nodes are within the limit "
                    "of %u", ns, ss->max_nodes);
      ts_aabb_tree_destroy(ss->tree);
      ss->tree = nt;
      ss->over_limit = 0;
      ss->tissue = t;
      ss->n_nodes = t->n_nodes;
      ss->surface_nodes = ns;
    }
  }
  if (ss->over_limit || !ss->tree) {
    ss->steps_over_limit++;
    if (x) ts_xpbd_set_self_contact(x, NULL, NULL);
    return TS_ETOOBIG;
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
