/*
 * test_refine_tool.c: Check suite for local refinement under a mesh tool
 * (issue 4 with issue 5's tools): the dental instrument pressed into the
 * built-in patch, the region under it refined, in both solvers (XPBD on
 * the tree-based contact path, as a daemon's XPBD session steps): the
 * carried state and the no-jump bound of issue 4 against an unrefined
 * twin, as test_refine_ms.c does with a sphere.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_contact.h"
#include "ts_mesh_io.h"
#include "ts_obb_tree.h"
#include "refine_fixture.h"

/* The dental instrument (../shared/data/meshes, centimetres), scaled up
 * DENTAL_SCALE times: a handle along its local z with a working end at the
 * +z tip, a spatula 2.6 mm wide (x) and 0.41 mm thick (y) at its own size,
 * 10.5 x 1.6 mm here. At its own size it is thinner than the patch's
 * 3.3 mm triangles and slips between their nodes without touching one
 * (ts_contact.h); scaled, it presses them. Working end down (its local z
 * turned onto -y), the tip `depth` below the patch's top at rest (y = 0 at
 * the centre), the spatula's middle over (x, z) = (2.1, -1.3) mm. */
#define DENTAL_SCALE 4.0
#define DENTAL_TIP (0.0357223 * DENTAL_SCALE) /* m: the tip's local z */
#define DENTAL_MID (0.00067 * DENTAL_SCALE)   /* m: the spatula's middle, local -x */
static ts_tool dental_tool(const ts_obb_tree *tree, double depth) {
  ts_tool tool = {0};
  tool.kind = TS_TOOL_MESH;
  tool.active = 1;
  tool.shape = tree;
  tool.quat[0] = sqrt(0.5); /* +90 degrees about x: local z -> world -y */
  tool.quat[1] = sqrt(0.5);
  tool.pos[0] = 0.0021 + DENTAL_MID;
  tool.pos[1] = DENTAL_TIP - depth;
  tool.pos[2] = -0.0013;
  return tool;
}

/* A patch stepped with a mesh tool: the mass-spring step takes it
 * directly; XPBD on the tree-based path, as a daemon's XPBD session does
 * (server/session_contact.c). */
typedef struct msim {
  sim s;
  ts_aabb_tree *tree;
  ts_posed_tool pt;
  ts_contact_ws ws;
  ts_pose last;
  int have_last;
} msim;

static void msim_contact(msim *m) {
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, m->s.t, &m->tree), 0);
  ck_assert_int_eq(ts_contact_ws_init(&m->ws, NULL, m->s.t->n_nodes, m->s.t->n_nodes, ts_tissue_n_contact_tris(m->s.t)), 0);
}

static void msim_uncontact(msim *m) {
  if (!m->s.x) return;
  ts_aabb_tree_destroy(m->tree);
  ts_contact_ws_free(&m->ws);
}

/* src NULL: a fresh patch; else a copy of src's state (sim_clone) */
static void msim_init(msim *m, int xpbd, const ts_obb_tree *tree, const msim *src) {
  memset(m, 0, sizeof *m);
  if (src) {
    sim_clone(&m->s, &src->s);
    m->last = src->last;
    m->have_last = src->have_last;
  } else {
    sim_init(&m->s, xpbd);
  }
  if (xpbd) {
    ck_assert_int_eq(ts_posed_tool_init(&m->pt, tree), 0);
    msim_contact(m);
  }
}

static void msim_step(msim *m, ts_tool *tool) {
  if (!m->s.x) {
    ck_assert_int_eq(ts_massspring_step(m->s.t, DT, tool, 1, NULL), 0);
    return;
  }
  ts_pose now;
  memcpy(now.p, tool->pos, sizeof now.p);
  memcpy(now.q, tool->quat, sizeof now.q);
  now.jaw = 0;
  ts_xpbd_tool xt;
  memset(&xt, 0, sizeof xt);
  xt.posed = &m->pt;
  xt.prev = m->have_last ? m->last : now;
  xt.pose = now;
  xt.contact = &m->ws;
  ck_assert_int_eq(ts_xpbd_step_posed(m->s.x, m->s.t, DT, NULL, 0, m->tree, &xt, 1, NULL), 0);
  m->last = now;
  m->have_last = 1;
}

static void msim_free(msim *m) {
  msim_uncontact(m);
  if (m->s.x) ts_posed_tool_free(&m->pt);
  sim_free(&m->s);
}

/* The dental instrument pressed 3 mm into the patch, then the region
 * around its tip refined (Loop): with the contact allowance extended to
 * mesh tools (ts_handover.h) the first step after the refinement moves
 * every node as the unrefined twin's (a new node: as its interpolated
 * position) within the quantum, both solvers (the XPBD fit's trials take
 * the tool on the tree-based path, TS_FIT_POSED). Without the hand-over
 * the new nodes that Loop put inside the blade are pushed out at once. */
START_TEST(test_mesh_tool) {
  const int xpbd = _i;
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts io = ts_mesh_import_opts_default();
  io.scale = 0.01 * DENTAL_SCALE; /* cm */
  ts_mesh *mesh = NULL;
  ck_assert_msg(ts_mesh_import_file(path, TS_MESH_AUTO, &io, &mesh, NULL, NULL, err, sizeof err) == 0, "%s", err);
  ts_tool_shape_def sd = ts_default_tool_shape_def();
  sd.kind = TS_SHAPE_MESH;
  sd.mesh = mesh;
  sd.thin_pass = 0; /* the blade's parts between the nodes slip in: new nodes inside it */
  ts_obb_tree *tree = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&sd, &tree), 0);
  msim a, b, c;
  msim_init(&a, xpbd, tree, NULL);
  /* pressed in over 40 steps, held for 20 */
  for (int i = 1; i <= 60; i++) {
    ts_tool tool = dental_tool(tree, 0.003 * (i < 40 ? i / 40.0 : 1.0));
    msim_step(&a, &tool);
  }
  ts_tool tool = dental_tool(tree, 0.003);
  msim_init(&b, xpbd, tree, &a);
  msim_init(&c, xpbd, tree, &a);
  ts_patch_def pd = ts_default_patch_def();
  const uint32_t n0 = a.s.t->n_nodes;
  uint32_t(*par)[2] = NULL;
  double depth_max = 0;
  for (int k = 0; k < 2; k++) { /* b with the hand-over, c without */
    msim *m = k ? &c : &b;
    ts_refine_src *src = NULL, *nsrc = NULL;
    ck_assert_int_eq(ts_refine_src_patch(&pd, &src), 0);
    uint32_t *sel = NULL, ns = 0;
    const double o[3] = {0.0021, 0.05, -0.0013}, d[3] = {0, -1, 0};
    ck_assert_int_eq(ts_refine_pick(src, m->s.t, o, d, 0.004, &sel, &ns, NULL), 0);
    ts_refine_opts opts = {TS_REFINE_LOOP, 0, 0, 0, k ? -1 : BLEND, &tool, 1, 0, 0, 0};
    ts_refine_info info;
    info.parents = NULL;
    ts_tissue *r = NULL;
    ck_assert_msg(ts_refine_run(src, m->s.t, sel, ns, &opts, &r, &nsrc, &info, err, sizeof err) == 0, "%s", err);
    if (!k) {
      /* Loop's new nodes inside the blade, with their allowance */
      for (uint32_t i = n0; i < r->n_nodes; i++) depth_max = fmax(depth_max, r->hand->depth[i]);
      if (xpbd) {
        ts_xpbd_def xd = ts_xpbd_default_def();
        xd.damping = r->drag;
        ts_handover_fit_stats fs;
        ck_assert_int_eq(ts_handover_fit_xpbd(r, m->s.t, (const uint32_t(*)[2])info.parents, &xd, &tool, 1,
                                              TS_FIT_POSED, DT, &fs), 0);
        printf("mesh tool, xpbd fit: %u trials over %u nodes, %.3g m off\n", fs.trials, fs.nodes, fs.err);
        ck_assert(fs.err < QUANTUM);
      }
      par = info.parents;
    } else {
      free(info.parents);
    }
    if (xpbd) {
      ts_xpbd_def xd = ts_xpbd_default_def();
      xd.damping = r->drag;
      ts_xpbd_destroy(m->s.x);
      m->s.x = NULL;
      ck_assert_int_eq(ts_xpbd_build(r, &xd, &m->s.x), 0);
    }
    msim_uncontact(m);
    ts_tissue_destroy(m->s.t);
    m->s.t = r;
    if (xpbd) msim_contact(m);
    free(sel);
    ts_refine_src_free(src);
    ts_refine_src_free(nsrc);
  }
  double(*x0)[3] = snapshot(a.s.t);
  msim_step(&a, &tool);
  msim_step(&b, &tool);
  msim_step(&c, &tool);
  const uint32_t n = b.s.t->n_nodes;
  double(*ip)[3] = malloc(sizeof *ip * n);
  ck_assert_ptr_nonnull(ip);
  memcpy(ip, a.s.t->x, sizeof *ip * n0);
  for (uint32_t i = n0; i < n; i++)
    for (int q = 0; q < 3; q++) ip[i][q] = 0.5 * (ip[par[i - n0][0]][q] + ip[par[i - n0][1]][q]);
  double jb = 0, jc = 0, moved = max_move(a.s.t, (const double(*)[3])x0, n0);
  for (uint32_t i = 0; i < n; i++)
    for (int q = 0; q < 3; q++) {
      jb = fmax(jb, fabs(b.s.t->x[i][q] - ip[i][q]));
      jc = fmax(jc, fabs(c.s.t->x[i][q] - ip[i][q]));
    }
  printf("mesh tool, %s: %u -> %u nodes, deepest new node %.3g m inside the blade; first step differs by "
         "%.3g m with the hand-over, %.3g m without (the twin moved %.3g m)\n",
         xpbd ? "xpbd" : "mass-spring", n0, n, depth_max, jb, jc, moved);
  /* a new node inside the blade got its allowance (Loop's midpoints under
     the tip, measured 0.1-0.2 mm deep) */
  ck_assert(depth_max > 1e-5);
  /* the bound, as for the sphere (run_case). Measured: XPBD within
     1 um; the mass-spring step 5.5 um, about what the twin itself moved
     (5.4 um): with a shorter press the worst node was the top one under
     the blade, which the twin moved 13 um sideways and the refined tissue
     held where it was */
  ck_assert_msg(jb < QUANTUM + moved, "the first step differs by %.3g m (twin moved %.3g m)", jb, moved);
  free(ip);
  free(x0);
  free(par);
  msim_free(&a);
  msim_free(&b);
  msim_free(&c);
  ts_obb_tree_destroy(tree);
  ts_mesh_free(mesh);
}
END_TEST

static Suite *refine_suite(void) {
  Suite *s = suite_create("refine_tool");
  TCase *tc = tcase_create("live");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_mesh_tool, 0, 2); /* 0 mass-spring, 1 XPBD */
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a failing case's fork keeps what it printed */
  SRunner *sr = srunner_create(refine_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
