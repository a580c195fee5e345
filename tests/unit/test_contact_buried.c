/*
 * test_contact_buried.c: a mesh tool put down deep inside the tissue (its
 * surface wholly inside the tissue's volume, no triangle of it crossing the
 * tissue's surface), and then raised through the surface, on patch-S: what
 * the live contact finds by the descent (ts_contact_begin's candidates,
 * ts__ms_thin_pass through its tree) against the brute force:
 *
 *   - the vertex brute force: every node of the contact surface whose
 *     signed distance from the tool is negative (ts_contact_tool_sdf), each
 *     of which must be among the descent's candidates;
 *   - the root box's candidates (box_candidates: every triangle whose fat
 *     leaf box meets the tool's root box, a superset of what the tool can
 *     reach): the same vertices touching, positions within 1e-12 m (the
 *     same arithmetic in the same order: 0 here) and triangle pushes;
 *   - the mass-spring triangle pass through its tree against the scan of
 *     every surface triangle: bitwise the same positions and marks.
 *
 * The tool is the dental instrument at 0.3 of its size (21 mm long, 1.1 mm
 * wide, 0.12 mm thick: patch-S is 4.5 mm thick and curved, 0.4 mm of sag
 * over the tool's half length), lying flat, its thin axis along the surface
 * normal, its middle from 2.25 mm (mid-thickness) below the top node up to
 * 0.5 mm above it, put down at each height (no travel: the step starts
 * there). Found: buried (0.5 mm and deeper) no vertex is inside the tool by
 * the brute force and neither response moves anything, nor does the
 * triangle pass (the tool is felt by nothing: the contact acts on the
 * surface only); from the surface up the descent finds every vertex the
 * brute force has inside and both responses agree.
 *
 * The other way round, the tissue's surface put down inside a mesh tool
 * (the instrument at 5 and 15 times its size, 2 and 6 mm thick, its middle
 * 3 mm below to 2 mm above the top node): the descent found only the nodes
 * within the boxes' growth (0.5 mm) of the mesh's surface, and 13-26 of the
 * 95-188 nodes inside the 6 mm tool were no candidates (left inside for
 * good, where the root box's candidates push them out). ts_contact_begin
 * now takes the root box's candidates for a mesh tool thick enough to hold
 * a point deeper than that growth (its root box's smallest half extent
 * over it), and this test asserts every node inside is a candidate and the
 * responses equal, for both sizes.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_contact.h"
#include "ts_massspring.h"
#include "ts_mesh_io.h"
#include "ts_ms_internal.h"
#include "ts_obb_tree.h"
#include "ts_tissue.h"

#define POS_TOL 1e-12 /* m: as test_contact_descent */

static ts_tissue *patch_s(void) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 50;
  ts_tissue *t;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  return t;
}

static ts_obb_tree *scaled_instrument(double scale, ts_mesh **out) {
  char path[1024], err[256] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", TS_SHARED_DIR);
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = scale; /* the real size: 0.01 m per file unit */
  ts_mesh *m = NULL;
  ck_assert_msg(ts_mesh_read_file(path, TS_MESH_AUTO, &o, &m, NULL, err, sizeof err) == 0, "%s",
                err);
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  ts_obb_tree *tr = NULL;
  ck_assert_int_eq(ts_obb_tree_create(&d, &tr), 0);
  *out = m;
  return tr;
}

static void run(double scale, const double *depth, int n_depth, int thin) {
  ts_tissue *t = patch_s();
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  ts_mesh *m;
  ts_obb_tree *tr = scaled_instrument(scale, &m);
  const uint32_t nn = t->n_nodes, ntri = ts_tissue_n_contact_tris(t);
  const uint32_t(*ctri)[3] = (const uint32_t(*)[3])ts_tissue_contact_tris(t);
  /* the contact surface's nodes */
  uint8_t *on_surface = calloc(nn, 1);
  ck_assert_ptr_nonnull(on_surface);
  for (uint32_t k = 0; k < ntri; k++)
    for (int c = 0; c < 3; c++) on_surface[ctri[k][c]] = 1;
  /* the top node: the highest of the outer sheet (normal +y there) */
  uint32_t n_sheet = t->nodes_per_sheet ? t->nodes_per_sheet : nn, top = 0;
  for (uint32_t i = 1; i < n_sheet; i++)
    if (t->rest[i][1] > t->rest[top][1]) top = i;
  ts_aabb_tree *tree = NULL;
  ck_assert_int_eq(ts_aabb_tree_create_tissue(NULL, t, &tree), 0);
  ts_contact_def cb = ts_default_contact_def(), cd = cb;
  cb.box_candidates = 1;
  ts_contact_ws wb, wd;
  ck_assert_int_eq(ts_contact_ws_init(&wb, &cb, nn, nn, ntri), 0);
  ck_assert_int_eq(ts_contact_ws_init(&wd, &cd, nn, nn, ntri), 0);
  ts_posed_tool pb, pd, pbrute;
  ck_assert_int_eq(ts_posed_tool_init(&pb, tr), 0);
  ck_assert_int_eq(ts_posed_tool_init(&pd, tr), 0);
  ck_assert_int_eq(ts_posed_tool_init(&pbrute, tr), 0);
  double(*x0)[3] = malloc(sizeof *x0 * nn), (*xb)[3] = malloc(sizeof *xb * nn);
  double(*xd)[3] = malloc(sizeof *xd * nn), (*xs)[3] = malloc(sizeof *xs * nn);
  uint8_t *cand = calloc(nn, 1);
  int8_t *tb = calloc(nn, 1), *td = calloc(nn, 1);
  ck_assert(x0 && xb && xd && xs && cand && tb && td);
  memcpy(x0, t->x, sizeof *x0 * nn);
  ck_assert_int_ge(ts_aabb_tree_refit(tree, (const double(*)[3])x0), 0);
  uint32_t inside_total = 0, touching_total = 0, pushes_total = 0, marked_total = 0;
  for (int h = 0; h < n_depth; h++) {
    ts_pose ps;
    memset(&ps, 0, sizeof ps);
    ps.q[0] = 1;
    for (int k = 0; k < 3; k++) ps.p[k] = t->rest[top][k];
    ps.p[1] -= depth[h];
    /* brute force: surface nodes inside the tool */
    ck_assert_int_eq(ts_posed_tool_set_pose(&pbrute, &ps), 0);
    uint32_t inside = 0;
    uint8_t *in = calloc(nn, 1);
    ck_assert_ptr_nonnull(in);
    for (uint32_t i = 0; i < nn; i++) {
      if (!on_surface[i] || !(t->inv_mass[i] > 0)) continue;
      double nrm[3];
      if (ts_contact_tool_sdf(&pbrute, x0[i], nrm) < 0) in[i] = 1, inside++;
    }
    /* the live contact: descent and root box, put down at ps */
    ck_assert_int_eq(ts_contact_begin(&wb, &pb, &ps, &ps, tree, t->inv_mass, NULL), 0);
    ck_assert_int_eq(ts_contact_begin(&wd, &pd, &ps, &ps, tree, t->inv_mass, NULL), 0);
    memset(cand, 0, nn);
    for (uint32_t j = 0; j < wd.n; j++) cand[wd.v[j].node] = 1;
    uint32_t missed = 0;
    for (uint32_t i = 0; i < nn; i++) missed += in[i] && !cand[i];
    ck_assert_msg(!missed, "depth %g mm: %u nodes inside the tool are no candidates",
                    depth[h] * 1e3, missed);
    memcpy(xb, x0, sizeof *x0 * nn);
    memcpy(xd, x0, sizeof *x0 * nn);
    int nb = ts_contact_project(&wb, &pb, xb, (const double(*)[3])x0, t->inv_mass, TS_CONTACT_SWEEP);
    int nd = ts_contact_project(&wd, &pd, xd, (const double(*)[3])x0, t->inv_mass, TS_CONTACT_SWEEP);
    ck_assert_int_eq(nb, nd);
    ck_assert_uint_eq(wb.tri_hits, wd.tri_hits);
    memset(tb, 0, nn);
    memset(td, 0, nn);
    for (uint32_t j = 0; j < wb.n; j++) tb[wb.v[j].node] = (int8_t)wb.v[j].touching;
    for (uint32_t j = 0; j < wd.n; j++) td[wd.v[j].node] = (int8_t)wd.v[j].touching;
    double moved = 0;
    for (uint32_t i = 0; i < nn; i++) {
      ck_assert_msg(tb[i] == td[i], "depth %g mm: node %u touching %d (box) %d (descent)",
                    depth[h] * 1e3, i, tb[i], td[i]);
      double d2 = 0, m2 = 0;
      for (int k = 0; k < 3; k++) {
        d2 += (xb[i][k] - xd[i][k]) * (xb[i][k] - xd[i][k]);
        m2 += (xd[i][k] - x0[i][k]) * (xd[i][k] - x0[i][k]);
      }
      ck_assert_msg(sqrt(d2) <= POS_TOL, "depth %g mm: node %u differs by %g m",
                    depth[h] * 1e3, i, sqrt(d2));
      moved = fmax(moved, sqrt(m2));
    }
    /* the mass-spring triangle pass: tree against scan */
    ts_tool tl;
    memset(&tl, 0, sizeof tl);
    tl.active = 1;
    tl.kind = TS_TOOL_MESH;
    tl.shape = tr;
    memcpy(tl.pos, ps.p, sizeof tl.pos);
    memcpy(tl.quat, ps.q, sizeof tl.quat);
    ts__ptool mp;
    ts__ms_prepare_tool(&mp, &tl);
    const double(*R)[3] = (const double(*)[3])mp.R;
    memcpy(t->x, x0, sizeof *x0 * nn);
    const uint32_t ms_scan = ts__ms_thin_pass(t, t->ms, &mp, R, tl.pos, 0, 1, 0);
    ts__ms_clear_contacts(t->ms);
    memcpy(xs, t->x, sizeof *xs * nn);
    memcpy(t->x, x0, sizeof *x0 * nn);
    const uint32_t ms_tree = ts__ms_thin_pass(t, t->ms, &mp, R, tl.pos, 0, 1, 1);
    ts__ms_clear_contacts(t->ms);
    ck_assert_uint_eq(ms_scan, ms_tree);
    ck_assert_msg(memcmp(xs, t->x, sizeof *xs * nn) == 0, "depth %g mm: the passes differ",
                  depth[h] * 1e3);
    memcpy(t->x, x0, sizeof *x0 * nn);
    fprintf(stderr,
            "test_contact_buried: scale %g depth %6.3f mm: inside (brute) %u, missed %u, "
            "candidates %u (descent) %u (root box), touching %d, triangle pushes %u, moved %.3g "
            "mm, ms pass marks %u\n",
            scale, depth[h] * 1e3, inside, missed, wd.n, wb.n, nd, wd.tri_hits, moved * 1e3,
            ms_tree);
    if (thin && depth[h] >= 0.5e-3) {
      /* buried: nothing of the surface is in reach, by any of them */
      ck_assert_uint_eq(inside, 0);
      ck_assert_int_eq(nd, 0);
      ck_assert_uint_eq(wd.tri_hits, 0);
      ck_assert_uint_eq(ms_tree, 0);
      ck_assert_double_eq(moved, 0);
    }
    inside_total += inside;
    touching_total += (uint32_t)nd;
    pushes_total += wd.tri_hits;
    marked_total += ms_tree;
    free(in);
  }
  /* not vacuous: through the surface the contact acted (the thin tool by
   * the triangle passes too, the thick one on nodes inside it) */
  ck_assert_uint_gt(touching_total + pushes_total, 0);
  if (thin) ck_assert_uint_gt(marked_total, 0);
  else ck_assert_uint_gt(inside_total, 50);
  fprintf(stderr, "test_contact_buried: over %d heights: %u inside, %u touching, %u pushes, %u "
          "marks\n", n_depth, inside_total, touching_total, pushes_total, marked_total);
  free(x0), free(xb), free(xd), free(xs), free(cand), free(tb), free(td), free(on_surface);
  ts_contact_ws_free(&wb);
  ts_contact_ws_free(&wd);
  ts_posed_tool_free(&pb);
  ts_posed_tool_free(&pd);
  ts_posed_tool_free(&pbrute);
  ts_aabb_tree_destroy(tree);
  ts_obb_tree_destroy(tr);
  ts_mesh_free(m);
  ts_tissue_destroy(t);
}

START_TEST(test_buried_mesh_tool) {
  /* heights of the tool's middle below the top node, m (negative: above) */
  const double depth[] = {2.25e-3, 1.5e-3, 1.0e-3, 0.5e-3, 0.25e-3, 0.1e-3,
                          0.03e-3, 0.0,    -0.03e-3, -0.1e-3, -0.5e-3};
  run(0.003, depth, (int)(sizeof depth / sizeof depth[0]), 1);
}
END_TEST

START_TEST(test_swallowing_mesh_tool) {
  /* 5 and 15 times the size (2 and 6 mm thick; root boxes 1 and 3 mm in
   * half extent, over the 0.5 mm the boxes grow at rest): the root box's
   * candidates */
  const double depth[] = {1.0e-3, 0.5e-3, 0.0, -0.5e-3, -1.0e-3};
  run(0.05, depth, (int)(sizeof depth / sizeof depth[0]), 0);
  const double deep[] = {3e-3, 2e-3, 1.0e-3, 0.0, -1e-3, -2e-3};
  run(0.15, deep, (int)(sizeof deep / sizeof deep[0]), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("contact_buried");
  TCase *tc = tcase_create("buried");
  tcase_add_test(tc, test_buried_mesh_tool);
  tcase_add_test(tc, test_swallowing_mesh_tool);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
