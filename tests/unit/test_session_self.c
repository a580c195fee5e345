/*
 * test_session_self.c: a session's tissue self-contact across a refinement's
 * install (server/session_self.h), without a daemon: the pass set up on one
 * patch, then handed a new tissue the way refine.c does it (the count and
 * the tree made by ts_session_self_build, the bind by
 * ts_session_self_install):
 *   - within the limit it runs on the new tree (prepare 0, the mass-spring
 *     pass detects on it after a step);
 *   - over the limit no tree is built and the pass is off for that tissue:
 *     TS_SELF_OVER_LIMIT, prepare TS_ETOOBIG on every step, each counted
 *     in steps_over_limit, the surface nodes said; a later tissue within
 *     the limit turns it on again;
 *   - a tree the workspace cannot take (here: one made for a larger
 *     tissue, which ts_self_contact_bind refuses as it would refuse its
 *     allocation) turns it off once (TS_SELF_FAILED, failures 1, the tree
 *     freed), prepare fails every step after without trying again, and
 *     failures stays 1;
 *   - a tissue the pass was not handed (never in the daemon) is not walked
 *     with the old tree: off, TS_SELF_FAILED.
 * The surface counts are checked against a brute count of the patches'
 * contact-triangle nodes. While the pass runs (and only then) prepare
 * sets the tissue's guard_tools_only: the mass-spring inversion guard
 * looks under the tools only (server/core/ts_ms_guard.c says why).
 */
#include "ts_check.h"
#include <stdint.h>
#include <stdlib.h>

#include "../../server/core/ts_error.h"
#include "../../server/session_self.h"

static ts_tissue *patch(uint32_t resolution) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = resolution;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

/* the contact surface's nodes, counted apart from the code under test */
static uint32_t brute_surface(const ts_tissue *t) {
  const uint32_t nt = ts_tissue_n_contact_tris(t);
  const uint32_t *tri = &ts_tissue_contact_tris(t)[0][0];
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    int used = 0;
    for (uint32_t k = 0; k < 3 * nt && !used; k++) used = tri[k] == i;
    n += (uint32_t)used;
  }
  return n;
}

START_TEST(test_install) {
  ts_tissue *a = patch(9), *b = patch(13), *c = patch(9);
  const uint32_t na = brute_surface(a), nb = brute_surface(b);
  ck_assert_uint_gt(nb, na);
  uint32_t n = 0;
  ck_assert_int_eq(ts_session_self_surface_nodes(a, &n), 0);
  ck_assert_uint_eq(n, na);

  /* the limit between the two patches: a runs, b is over it */
  const uint32_t limit = na + (nb - na) / 2;
  ts_session_self *ss = NULL;
  uint32_t ns = 0;
  ck_assert_int_eq(ts_session_self_create(b, limit, &ss, &ns), TS_ETOOBIG);
  ck_assert_ptr_null(ss);
  ck_assert_uint_eq(ns, nb);
  ck_assert_int_eq(ts_session_self_create(a, limit, &ss, &ns), 0);
  ck_assert_int_eq(ss->state, TS_SELF_ON);
  ck_assert_int_eq(ts_session_self_prepare(ss, a, NULL), 0);
  ck_assert_int_eq(a->guard_tools_only, 1); /* the settle runs: the guard under the tools */

  /* b over the limit: no tree built, off for b, every step counted */
  ts_aabb_tree *tree = (ts_aabb_tree *)1;
  ck_assert_int_eq(ts_session_self_build(b, limit, &tree, &ns), 0);
  ck_assert_ptr_null(tree);
  ck_assert_uint_eq(ns, nb);
  ts_session_self_install(ss, b, tree, ns, NULL);
  ck_assert_int_eq(ss->state, TS_SELF_OVER_LIMIT);
  ck_assert_ptr_null(ss->tree);
  ck_assert_uint_eq(ss->surface_nodes, nb);
  b->guard_tools_only = 1;
  for (int k = 0; k < 3; k++) ck_assert_int_eq(ts_session_self_prepare(ss, b, NULL), TS_ETOOBIG);
  ck_assert_int_eq(b->guard_tools_only, 0); /* no settle: the guard's sweep too */
  ck_assert_uint_eq(ss->steps_over_limit, 3);
  ck_assert_uint_eq(ss->failures, 0);

  /* c within it: on again on its own tree, and the pass runs on it */
  ck_assert_int_eq(ts_session_self_build(c, limit, &tree, &ns), 0);
  ck_assert_ptr_nonnull(tree);
  ts_session_self_install(ss, c, tree, ns, NULL);
  ck_assert_int_eq(ss->state, TS_SELF_ON);
  ck_assert_ptr_eq(ss->tree, tree);
  ck_assert_int_eq(ts_session_self_prepare(ss, c, NULL), 0);
  ck_assert_int_eq(c->guard_tools_only, 1);
  ts_session_self_after(ss, c, -1);
  ck_assert_uint_eq(ss->contacts, 0); /* a flat patch at rest touches itself nowhere */
  ck_assert_uint_eq(ss->steps_over_limit, 3);

  /* a tree the workspace refuses (b's, larger than c): off once, freed,
   * not tried again */
  ck_assert_int_eq(ts_session_self_build(b, UINT32_MAX, &tree, &ns), 0);
  ck_assert_ptr_nonnull(tree);
  ts_session_self_install(ss, c, tree, na, NULL); /* ASan: the refused tree is freed */
  ck_assert_int_eq(ss->state, TS_SELF_FAILED);
  ck_assert_ptr_null(ss->tree);
  ck_assert_uint_eq(ss->failures, 1);
  for (int k = 0; k < 3; k++) ck_assert_int_eq(ts_session_self_prepare(ss, c, NULL), TS_ENOMEM);
  ck_assert_int_eq(c->guard_tools_only, 0);
  ck_assert_uint_eq(ss->failures, 1);
  ck_assert_uint_eq(ss->steps_over_limit, 3);

  /* on again on c's own tree, then a tissue it was not handed: off */
  ck_assert_int_eq(ts_session_self_build(c, limit, &tree, &ns), 0);
  ts_session_self_install(ss, c, tree, ns, NULL);
  ck_assert_int_eq(ss->state, TS_SELF_ON);
  ck_assert_int_eq(ts_session_self_prepare(ss, a, NULL), TS_ENOMEM);
  ck_assert_int_eq(ss->state, TS_SELF_FAILED);
  ck_assert_ptr_null(ss->tree);
  ck_assert_uint_eq(ss->failures, 2);

  ts_session_self_destroy(ss);
  ts_tissue_destroy(a);
  ts_tissue_destroy(b);
  ts_tissue_destroy(c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("session_self");
  TCase *tc = tcase_create("install");
  tcase_add_test(tc, test_install);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
