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

int ts_session_self_surface_nodes(const ts_tissue *t, uint32_t *n) {
  *n = 0;
  const uint32_t nt = ts_tissue_n_contact_tris(t);
  const uint32_t (*tris)[3] = (const uint32_t (*)[3])ts_tissue_contact_tris(t);
  if (!tris || !nt) return 0;
  uint8_t *mark = calloc(t->n_nodes ? t->n_nodes : 1, 1);
  if (!mark) return TS_ENOMEM;
  uint32_t c = 0;
  for (uint32_t k = 0; k < nt; k++)
    for (int v = 0; v < 3; v++)
      if (tris[k][v] < t->n_nodes && !mark[tris[k][v]]) mark[tris[k][v]] = 1, c++;
  free(mark);
  *n = c;
  return 0;
}

int ts_session_self_create(const ts_tissue *t, uint32_t max_nodes, ts_session_self **out,
                           uint32_t *surface_nodes) {
  *out = NULL;
  uint32_t ns = 0;
  int rc = ts_session_self_surface_nodes(t, &ns);
  if (surface_nodes) *surface_nodes = ns;
  if (rc) return rc;
  if (ns > max_nodes) return TS_ETOOBIG; /* before anything is allocated for it */
  ts_session_self *ss = calloc(1, sizeof *ss);
  if (!ss) return TS_ENOMEM;
  ss->max_nodes = max_nodes;
  ss->surface_nodes = ns;
  rc = ts_self_contact_init(&ss->sc, NULL);
  if (!rc) rc = ts_aabb_tree_create_tissue(NULL, t, &ss->tree);
  if (!rc) rc = ts_self_contact_bind(&ss->sc, ss->tree, t);
  if (rc) {
    ts_session_self_destroy(ss);
    return rc;
  }
  ss->tissue = t;
  ss->n_nodes = t->n_nodes;
  ss->state = TS_SELF_ON;
  *out = ss;
  return 0;
}

void ts_session_self_destroy(ts_session_self *ss) {
  if (!ss) return;
  ts_self_contact_free(&ss->sc);
  ts_aabb_tree_destroy(ss->tree);
  free(ss);
}

int ts_session_self_build(const ts_tissue *t, uint32_t max_nodes, ts_aabb_tree **tree,
                          uint32_t *surface_nodes) {
  *tree = NULL;
  int rc = ts_session_self_surface_nodes(t, surface_nodes);
  if (!rc && *surface_nodes <= max_nodes) rc = ts_aabb_tree_create_tissue(NULL, t, tree);
  return rc;
}

void ts_session_self_install(ts_session_self *ss, const ts_tissue *t, ts_aabb_tree *tree,
                             uint32_t surface_nodes, struct ts_xpbd *x) {
  if (x) ts_xpbd_set_self_contact(x, NULL, NULL); /* off the old tree before it goes */
  const ts_self_state was = ss->state;
  ts_self_state now = TS_SELF_ON;
  int rc = 0;
  if (!tree) {
    now = TS_SELF_OVER_LIMIT;
  } else if ((rc = ts_self_contact_bind(&ss->sc, tree, t)) != 0) {
    ts_aabb_tree_destroy(tree);
    tree = NULL;
    now = TS_SELF_FAILED;
  }
  ts_aabb_tree_destroy(ss->tree);
  ss->tree = tree;
  ss->tissue = t;
  ss->n_nodes = t->n_nodes;
  ss->surface_nodes = surface_nodes;
  ss->state = now;
  ss->contacts = 0;
  if (now == TS_SELF_FAILED) {
    ss->failures++;
    ts_log_warn("self-contact off for a refined tissue (%u surface nodes): its workspace: %s",
                surface_nodes, ts_strerror(rc));
  } else if (now == TS_SELF_OVER_LIMIT && was != TS_SELF_OVER_LIMIT) {
    ts_log_warn("self-contact off for a refined tissue: %u surface nodes, more than the "
                "limit of %u (--self-contact-max-nodes)", surface_nodes, ss->max_nodes);
  } else if (now == TS_SELF_ON && was != TS_SELF_ON) {
    ts_log_info("self-contact on again: the refined tissue's %u surface nodes are within the "
                "limit of %u", surface_nodes, ss->max_nodes);
  }
}

int ts_session_self_prepare(ts_session_self *ss, ts_tissue *t, struct ts_xpbd *x) {
  if ((ss->tissue != t || ss->n_nodes != t->n_nodes) && ss->state != TS_SELF_FAILED) {
    /* a tissue its tree was not made for: a refinement hands the pass
     * over at its install (ts_session_self_install), so never; off rather
     * than a walk over a tree of another tissue */
    ts_log_warn("self-contact off: the session's tissue changed without it");
    ts_aabb_tree_destroy(ss->tree);
    ss->tree = NULL;
    ss->state = TS_SELF_FAILED;
    ss->failures++;
  }
  /* the mass-spring step's inversion guard under the tools only while the
   * settle below runs after it (ts_tissue.h) */
  t->guard_tools_only = !x && ss->state == TS_SELF_ON;
  if (ss->state != TS_SELF_ON) {
    if (ss->state == TS_SELF_OVER_LIMIT) ss->steps_over_limit++;
    if (x) ts_xpbd_set_self_contact(x, NULL, NULL);
    return ss->state == TS_SELF_OVER_LIMIT ? TS_ETOOBIG : TS_ENOMEM;
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
