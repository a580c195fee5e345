/*
 * itest_mesh.c: sessions from uploaded meshes, end to end against a real
 * tissued and its real SQLite file, through libtissueclient over TCP.
 *   - The shared liver.obj (centimetres; ../shared/data/meshes/SOURCES.md)
 *     uploaded with the default stomach-wall layers (1 + 1.5 + 2 mm) would
 *     fold at its creases: the daemon thins the layers there (down to a
 *     tenth of their depth) and makes a session of 4 sheets, and its
 *     SessionCreated reports the thinned vertices and the least depth kept,
 *     as the same extrusion run here gives them. With one 0.5 mm layer
 *     it is thinned at 3 vertices only (also reported) and becomes a
 *     session (its creases sharper than 90 degrees are offset along the
 *     "most normal" direction).
 *   - spot.obj (closed, genus 0, 2930 vertices, 5856 triangles) at 0.1 m
 *     per unit with one 0.5 mm layer makes a session of 2 sheets x 2930
 *     nodes and 2 x 5856 render triangles (a closed surface has no side
 *     walls); an observer's first keyframe has exactly those counts, the
 *     layer's name and spot's extent.
 *   - A layer's fibre direction is kept in the stored layer spec.
 *   - A second session by the stored tissue's name needs no upload and has
 *     the same counts; uploading the same bytes again under another name
 *     stores them once (counted in the database file); an unknown name is
 *     TS_ENOTISSUE listing the known ones.
 *   - Garbage bytes, a truncated binary STL, a face index out of range, an
 *     oversized upload, NaN and negative scales each give their Error, and
 *     the daemon keeps streaming the first session all along.
 *   - An upload whose client closes before the reply stores its tissue but
 *     starts no session.
 * The tests share one daemon (no fork) and run in order.
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "../../server/core/ts_extrude.h"
#include "../../server/core/ts_mesh_io.h"
#include "../../server/core/ts_mesh_tissue.h"
#include "../../server/core/ts_tissue.h"
#include "daemon_proc.h"
#include "rawclient.h"
#include "test_util.h"
#include "tissueclient.h"

#define SPOT_VERTS 2930u /* SOURCES.md */
#define SPOT_TRIS 5856u
#define MAX_MESH_BYTES 400000 /* --max-mesh-bytes of the daemon under test */
#define WAIT_S 60             /* wall clock; sanitizer builds are slow */

static ts_dproc daemon_;
static int daemon_ok;
static tc_client *watcher; /* observer of the first session, kept to the end */
static uint32_t first_session, first_nv, first_nt;

static tc_client *connect_ok(const char *who) {
  char err[256];
  tc_client *c = tc_connect_key(daemon_ok ? "127.0.0.1" : "0.0.0.0", daemon_.tcp_port, who, TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(c != NULL, "connect: %s", err);
  tc_set_timeout(c, WAIT_S * 1000);
  return c;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Polls until a frame with seq > after arrives; returns it. */
static const tc_frame *frame_after(tc_client *c, uint64_t after) {
  double end = now_s() + WAIT_S;
  while (now_s() < end) {
    int rc = tc_poll(c, 100);
    ck_assert_msg(rc >= 0, "poll: %s", tc_last_error(c));
    const tc_frame *f = tc_last_frame(c);
    if (f && f->seq > after) return f;
  }
  ck_abort_msg("no frame within %d s", WAIT_S);
  return NULL;
}

/* Ends a session (as its controller), so that the sessions this test no
 * longer needs stop taking the machine's cores. */
static void end_session(uint32_t id) {
  tc_client *c = connect_ok("itest_mesh-end");
  ck_assert_int_eq(tc_join(c, id, TC_ROLE_CONTROLLER, 0, 0, NULL), 0);
  ck_assert_int_eq(tc_end_session(c, id), 0);
  tc_close(c);
}

/* The extrusion the daemon makes of an upload with its default layers, or
 * with one layer of one_layer metres when that is not 0, by the function
 * the daemon calls (core/ts_mesh_tissue.h: placed with its bounding box
 * centred in x and z and its top at y = 0, pleats relaxed by at most 1 mm,
 * layers thinned to no less than a tenth), run here on the same bytes: the
 * reference for what its SessionCreated reports. */
static ts_extrusion *daemon_extrusion(const char *bytes, size_t len, double scale,
                                      double one_layer) {
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = scale;
  ts_patch_def pd = ts_default_patch_def();
  double thickness[TS_MAX_LAYERS];
  uint32_t n_layers = pd.n_layers;
  for (uint32_t l = 0; l < n_layers; l++) thickness[l] = pd.layers[l].thickness;
  if (one_layer > 0) {
    n_layers = 1;
    thickness[0] = one_layer;
  }
  ts_extrusion *e = NULL;
  char err[512] = "";
  ck_assert_msg(ts_mesh_tissue_extrude((const uint8_t *)bytes, len, TS_MESH_OBJ, &o, thickness,
                                       n_layers, &e, NULL, NULL, NULL, 0, err, sizeof err) == 0,
                "%s", err);
  return e;
}

static const tc_layer half_mm = {"capsule", 0.5e-3, NULL, {0, 0, 0}};
/* the same with a fibre direction, which the stored layer spec keeps */
static const tc_layer half_mm_fibre = {"capsule", 0.5e-3, NULL, {0, 0, 2}};

/* Stored meshes in the daemon's database, by the sqlite3 command-line shell
 * (deploy/install-deps.sh installs it). */
static long count_meshes(void) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "sqlite3 '%s/tissued.sqlite' 'SELECT count(*) FROM meshes'",
           daemon_.dir);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  long n = -1;
  ck_assert_int_eq(fscanf(p, "%ld", &n), 1);
  pclose(p);
  return n;
}

/* The layer spec stored with a tissue, by the sqlite3 shell. */
static void stored_spec(const char *tissue, char *buf, size_t cap) {
  char cmd[800];
  snprintf(cmd, sizeof cmd, "sqlite3 '%s/tissued.sqlite' \"SELECT layer_spec FROM tissues WHERE name = '%s'\"",
           daemon_.dir, tissue);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  buf[0] = 0;
  ck_assert_ptr_nonnull(fgets(buf, (int)cap, p));
  pclose(p);
}

START_TEST(test_upload_meshes) {
  ck_assert(daemon_ok);
  char path[1200];
  ts_dproc_shared_mesh("liver.obj", path, sizeof path);
  size_t len;
  char *obj = (char *)tu_read_file(path, &len);
  tc_client *c = connect_ok("itest_mesh");

  /* the default 1 + 1.5 + 2 mm layers would fold this coarse liver (64 mm
   * across) at its creases; the daemon thins them there (down to a tenth)
   * and the liver becomes a session of 4 sheets */
  uint32_t id, nv, nt;
  int rc = tc_create_session_mesh(c, TC_MESH_OBJ, obj, len, 0.01, NULL, 0, "liver-thinned", &id,
                                  &nv, &nt);
  ck_assert_msg(rc == 0, "liver with the default layers: %s", tc_last_error(c));
  ck_assert_uint_eq(nv, 4 * 139);
  ck_assert_uint_eq(nt, 4 * 274); /* every layer's top sheet and the innermost are drawn */
  /* and says so: the same counts as the extrusion run here (exact), the
   * least depth kept to float precision (it is a float on the wire), and
   * the same in words */
  ts_extrusion *ref = daemon_extrusion(obj, len, 0.01, 0);
  tc_mesh_adjust adj;
  ck_assert(tc_session_adjust(c, &adj));
  printf("liver, default layers: %u moved (up to %.3g mm), %u thinned (least %.4g); "
         "reference %u, %.3g mm, %u, %.4g; warning:%s\n",
         adj.moved_vertices, adj.max_move * 1e3, adj.thinned_vertices, adj.min_depth_fraction,
         ref->n_relaxed, ref->max_relaxed * 1e3, ref->n_thinned, ref->min_depth_kept, adj.warning);
  /* 83 of 139 vertices thinned (78 where prisms fold, 5 more where the
   * innermost sheet would cross itself), down to the floor of 0.1, none moved */
  ck_assert_uint_gt(ref->n_thinned, 0); /* else this checks nothing */
  ck_assert_uint_eq(adj.thinned_vertices, ref->n_thinned);
  ck_assert_uint_eq(adj.moved_vertices, ref->n_relaxed);
  ck_assert_double_eq_tol(adj.min_depth_fraction, ref->min_depth_kept, 1e-6);
  ck_assert_double_eq_tol(adj.max_move, ref->max_relaxed, 1e-9);
  ck_assert_double_ge(adj.min_depth_fraction, 0.1 - 1e-6);
  ck_assert_double_lt(adj.min_depth_fraction, 1);
  char want[64];
  snprintf(want, sizeof want, "%u of 139 vertices were offset less", ref->n_thinned);
  ck_assert_msg(strstr(adj.warning, want) != NULL, "'%s' not in the warning: %s", want,
                adj.warning);
  /* the liver is under 9 mm thick in places: at full depth its innermost
   * sheet crossed itself, which the warning reports too */
  ck_assert_uint_gt(ref->n_crossings_thinned, 0);
  ck_assert_uint_eq(ref->n_crossings, 0);
  snprintf(want, sizeof want, "sheets crossed at up to %u triangle pairs", ref->n_crossings_thinned);
  ck_assert_msg(strstr(adj.warning, want) != NULL, "'%s' not in the warning: %s", want,
                adj.warning);
  ts_extrusion_free(ref);
  end_session(id);

  /* a thinner layer folds (almost) nowhere; at the creases sharper than 90 degrees
   * the offset takes the "most normal" direction, so the liver (139 used
   * vertices, 274 triangles) becomes a session of 2 sheets */
  rc = tc_create_session_mesh(c, TC_MESH_OBJ, obj, len, 0.01, &half_mm, 1, "liver-half-mm", &id,
                              &nv, &nt);
  ck_assert_msg(rc == 0, "liver with one 0.5 mm layer: %s", tc_last_error(c));
  ck_assert_uint_eq(nv, 2 * 139);
  ck_assert_uint_eq(nt, 2 * 274); /* one layer: its top sheet and the innermost */
  /* a few vertices are still thinned at this depth (3), and reported as
   * the extrusion run here gives them */
  ref = daemon_extrusion(obj, len, 0.01, half_mm.thickness);
  ck_assert(tc_session_adjust(c, &adj));
  printf("liver, one 0.5 mm layer: %u moved, %u thinned (least %.4g)\n", adj.moved_vertices,
         adj.thinned_vertices, adj.min_depth_fraction);
  ck_assert_uint_lt(ref->n_thinned, 139 / 10); /* far fewer than at the full 4.5 mm */
  ck_assert_uint_eq(adj.thinned_vertices, ref->n_thinned);
  ck_assert_uint_eq(adj.moved_vertices, ref->n_relaxed);
  if (ref->n_thinned)
    ck_assert_double_eq_tol(adj.min_depth_fraction, ref->min_depth_kept, 1e-6);
  else
    ck_assert_double_eq(adj.min_depth_fraction, 0);
  ts_extrusion_free(ref);
  end_session(id);
  free(obj);

  /* spot (closed, genus 0) at 0.1 m per unit with one 0.5 mm layer works */
  ts_dproc_shared_mesh("spot.obj", path, sizeof path);
  obj = (char *)tu_read_file(path, &len);
  rc = tc_create_session_mesh(c, TC_MESH_OBJ, obj, len, 0.1, &half_mm_fibre, 1, "spot-test", &id,
                              &nv, &nt);
  ck_assert_msg(rc == 0, "upload: %s", tc_last_error(c));
  ck_assert_uint_eq(nv, 2 * SPOT_VERTS);
  ck_assert_uint_eq(nt, 2 * SPOT_TRIS); /* one layer: its top sheet and the innermost */
  ck_assert_int_eq(count_meshes(), 2); /* the liver's and spot's */
  /* the layer's fibre is stored with the tissue (a float on the wire:
   * 2 is exact), so sessions by name rebuild it anisotropic; the liver's
   * layer had none and its spec has no fibre key */
  char spec[1024];
  stored_spec("spot-test", spec, sizeof spec);
  ck_assert_msg(strstr(spec, "\"fibre\":[0,0,2]") != NULL, "spot-test's spec: %s", spec);
  stored_spec("liver-half-mm", spec, sizeof spec);
  ck_assert_msg(strstr(spec, "\"thickness\"") && !strstr(spec, "fibre"), "liver's spec: %s", spec);
  first_session = id;
  first_nv = nv;
  first_nt = nt;

  watcher = connect_ok("itest_mesh-watch");
  ck_assert_int_eq(tc_join(watcher, id, TC_ROLE_OBSERVER, 0, 0, NULL), 0);
  const tc_frame *f = frame_after(watcher, 0);
  ck_assert(f->keyframe);
  ck_assert_uint_eq(f->vertex_count, nv);
  ck_assert_uint_eq(f->n_triangles, nt);
  ck_assert_uint_eq(f->n_layers, 1);
  ck_assert_str_eq(f->layer_names[0], "capsule");
  /* placed like the built-in patch: centred in x and z, top at y = 0. Spot
   * is 94.3 mm across in x and 169.0 mm in y (bbox of spot.obj times 0.1,
   * tissuetool mesh info); the anchored support holds it while gravity
   * settles the rest, which moves the extent by far less than 5 mm (a loose
   * bound: this checks placement and scale, not the mechanics) */
  double lo[3] = {1e9, 1e9, 1e9}, hi[3] = {-1e9, -1e9, -1e9};
  for (uint32_t i = 0; i < f->vertex_count; i++)
    for (int a = 0; a < 3; a++) {
      if (f->positions[i][a] < lo[a]) lo[a] = f->positions[i][a];
      if (f->positions[i][a] > hi[a]) hi[a] = f->positions[i][a];
    }
  printf("spot session %u: x [%g, %g] y [%g, %g] z [%g, %g] m\n", id, lo[0], hi[0], lo[1], hi[1],
         lo[2], hi[2]);
  ck_assert_double_eq_tol(hi[0] - lo[0], 0.0943104, 0.005);
  ck_assert_double_eq_tol(hi[1] - lo[1], 0.169043, 0.005);
  ck_assert_double_eq_tol((hi[0] + lo[0]) / 2, 0, 0.005);
  ck_assert_double_eq_tol(hi[1], 0, 0.005);

  tc_session_info *v;
  size_t n;
  ck_assert_int_eq(tc_list_sessions(c, &v, &n), 0);
  int found = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i].session_id == id) {
      found = 1;
      ck_assert_str_eq(v[i].tissue, "spot-test");
      ck_assert_uint_eq(v[i].vertex_count, nv);
    }
  free(v);
  ck_assert(found);
  tc_close(c);
  free(obj);
}
END_TEST

START_TEST(test_stored_tissue) {
  ck_assert(watcher != NULL);
  tc_client *c = connect_ok("itest_mesh-stored");
  uint32_t id, nv, nt;
  int rc = tc_create_session(c, "spot-test", &id, &nv, &nt);
  ck_assert_msg(rc == 0, "stored: %s", tc_last_error(c));
  ck_assert_uint_ne(id, first_session);
  ck_assert_uint_eq(nv, first_nv);
  ck_assert_uint_eq(nt, first_nt);
  ck_assert_uint_eq(tc_join(c, id, TC_ROLE_OBSERVER, 0, 0, NULL), 0);
  const tc_frame *f = frame_after(c, 0);
  ck_assert(f->keyframe);
  ck_assert_uint_eq(f->vertex_count, nv);
  ck_assert_uint_eq(f->n_triangles, nt);
  ck_assert_str_eq(f->layer_names[0], "capsule");
  end_session(id);

  /* the same bytes under another name: stored once */
  char path[1200];
  ts_dproc_shared_mesh("spot.obj", path, sizeof path);
  size_t len;
  char *obj = (char *)tu_read_file(path, &len);
  tc_client *u = connect_ok("itest_mesh-again");
  rc = tc_create_session_mesh(u, TC_MESH_OBJ, obj, len, 0.1, &half_mm, 1, "spot-again", &id,
                              &nv, &nt);
  ck_assert_msg(rc == 0, "%s", tc_last_error(u));
  ck_assert_uint_eq(nv, first_nv);
  ck_assert_int_eq(count_meshes(), 2);
  free(obj);
  tc_close(u);
  end_session(id);

  rc = tc_create_session(c, "no-such-tissue", &id, NULL, NULL);
  ck_assert_int_eq(rc, TS_ENOTISSUE);
  const char *msg = tc_last_error(c);
  ck_assert_msg(strstr(msg, "no-such-tissue") && strstr(msg, "stomach-patch") &&
                    strstr(msg, "spot-test") && strstr(msg, "spot-again") &&
                    strstr(msg, "liver-half-mm") && !strstr(msg, "liver-folds"),
                "%s", msg);
  tc_close(c);
}
END_TEST

/* One refused upload: its code, and a phrase of its message. */
static void refused(tc_client *c, int format, const void *bytes, size_t len, double scale,
                    int code, const char *phrase) {
  uint32_t id;
  int rc = tc_create_session_mesh(c, format, bytes, len, scale, &half_mm, 1, NULL, &id, NULL, NULL);
  ck_assert_msg(rc == code, "expected %d, got %d: %s", code, rc, tc_last_error(c));
  ck_assert_msg(strstr(tc_last_error(c), phrase), "'%s' not in: %s", phrase, tc_last_error(c));
}

START_TEST(test_bad_uploads) {
  ck_assert(watcher != NULL);
  tc_client *c = connect_ok("itest_mesh-bad");
  /* garbage: pseudo-random bytes (fixed seed) */
  size_t glen = 4096;
  unsigned char *g = malloc(MAX_MESH_BYTES + 1);
  ck_assert_ptr_nonnull(g);
  uint32_t x = 12345;
  for (size_t i = 0; i < MAX_MESH_BYTES + 1; i++) {
    x = x * 1103515245u + 12345u;
    g[i] = (unsigned char)(x >> 16);
  }
  refused(c, TC_MESH_OBJ, g, glen, 0.01, TS_EMESH, "obj mesh is refused");
  refused(c, TC_MESH_STL, g, glen, 0.01, TS_EMESH, "stl mesh is refused");
  refused(c, TC_MESH_PLY, g, glen, 0.01, TS_EMESH, "ply mesh is refused");

  /* a binary STL whose header promises 100 facets but holds 60 */
  size_t slen = 84 + 60 * 50;
  unsigned char *stl = calloc(1, slen);
  ck_assert_ptr_nonnull(stl);
  stl[80] = 100;
  for (int k = 0; k < 60; k++) {
    float v[9] = {0, 0, 0, 1, 0, 0, 0, (float)k, 1}; /* facets are not 4-byte aligned */
    memcpy(stl + 84 + 50 * k + 12, v, sizeof v);
  }
  refused(c, TC_MESH_STL, stl, slen, 0.01, TS_EMESH, "truncated");
  free(stl);

  /* a face index past the vertices, named by its line */
  const char *bad_obj = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\nf 1 2 9\n";
  refused(c, TC_MESH_OBJ, bad_obj, strlen(bad_obj), 0.01, TS_EMESH, "line 5");

  /* too big: refused before any work */
  refused(c, TC_MESH_OBJ, g, MAX_MESH_BYTES + 1, 0.01, TS_ETOOBIG, "at most 400000");
  /* bad scales */
  refused(c, TC_MESH_OBJ, bad_obj, strlen(bad_obj), NAN, TS_ENAN, "NaN");
  refused(c, TC_MESH_OBJ, bad_obj, strlen(bad_obj), -0.01, TS_ERANGE, "scale");
  /* a scale that makes the liver 0.6 mm across: a units mistake, said so */
  char path[1200];
  ts_dproc_shared_mesh("liver.obj", path, sizeof path);
  size_t len;
  char *obj = (char *)tu_read_file(path, &len);
  refused(c, TC_MESH_OBJ, obj, len, 0.0001, TS_ERANGE, "check the scale");
  free(obj);
  free(g);
  /* nothing was stored by any of them */
  ck_assert_int_eq(count_meshes(), 2);

  /* the first session streams on */
  const tc_frame *f = tc_last_frame(watcher);
  ck_assert_ptr_nonnull(f);
  uint64_t seq = f->seq;
  f = frame_after(watcher, seq);
  ck_assert_uint_gt(f->seq, seq);
  ck_assert_uint_eq(f->vertex_count, first_nv);
  for (uint32_t i = 0; i < f->vertex_count; i++)
    for (int a = 0; a < 3; a++) ck_assert(isfinite(f->positions[i][a]));
  uint64_t rtt;
  ck_assert_int_eq(tc_ping(c, &rtt), 0);
  tc_close(c);
  tc_close(watcher);
  watcher = NULL;
  end_session(first_session);
}
END_TEST

/* A client that uploads and closes before the reply (one that gave up
 * waiting): the daemon builds the tissue and stores it, but starts no
 * session nobody can reach. A later creation's reply may come before the
 * abandoned one's store (the builder and the storage worker are two
 * threads: server/create.c), so the test waits for its word in the log. */
START_TEST(test_abandoned_upload) {
  char path[1200];
  ts_dproc_shared_mesh("liver-smooth.obj", path, sizeof path);
  size_t len;
  uint8_t *obj = tu_read_file(path, &len);
  ck_assert_ptr_nonnull(obj);
  rc_conn rc;
  ck_assert_int_eq(rc_tcp(&rc, daemon_.tcp_port), 0);
  ck_assert_int_eq(rc_hello(&rc, WAIT_S * 1000), 0);
  ck_assert_int_eq(rc_send_obj_upload(&rc, 7, "abandoned", obj, len, 0.01f,
                                      TISSUED__V1__SOLVER__SOLVER_MASS_SPRING, 0),
                   0);
  rc_close(&rc);
  free(obj);

  tc_client *c = connect_ok("itest_mesh-after");
  uint32_t id;
  ck_assert_int_eq(tc_create_session(c, "stomach-patch", &id, NULL, NULL), 0);
  tc_session_info *ss = NULL;
  size_t n = 0;
  ck_assert_int_eq(tc_list_sessions(c, &ss, &n), 0);
  int found_new = 0;
  for (size_t i = 0; i < n; i++) {
    ck_assert_msg(strcmp(ss[i].name, "abandoned") != 0, "the abandoned upload's session %u runs",
                  ss[i].session_id);
    found_new |= ss[i].session_id == id;
  }
  ck_assert(found_new); /* the listing is of the sessions that run */
  free(ss);
  /* the daemon's word that it did not start it, within 60 s */
  int said = 0;
  for (int k = 0; k < 600 && !said; k++) {
    size_t llen;
    char *log = (char *)tu_read_file(daemon_.log, &llen);
    ck_assert_ptr_nonnull(log);
    said = strstr(log, "session 'abandoned' not started: the connection that asked for it "
                       "closed before it was ready") != NULL;
    free(log);
    if (!said) {
      struct timespec pause = {0, 100 * 1000000};
      nanosleep(&pause, NULL);
    }
  }
  ck_assert_msg(said, "no word of it in the daemon's log");
  /* the tissue was built and stored (before that word): liver.obj's and
   * spot's, then this one */
  ck_assert_int_eq(count_meshes(), 3);
  tc_close(c);
  end_session(id);
}
END_TEST

int main(void) {
  char err[256];
  ts_dproc_scratch_begin();
  const char *args[] = {"--max-mesh-bytes", "400000", NULL};
  daemon_ok = ts_dproc_start(&daemon_, args, err, sizeof err) == 0;
  if (!daemon_ok) fprintf(stderr, "itest_mesh: %s\n", err);

  Suite *su = suite_create("mesh");
  TCase *tc = tcase_create("upload");
  tcase_add_test(tc, test_upload_meshes);
  tcase_add_test(tc, test_stored_tissue);
  tcase_add_test(tc, test_bad_uploads);
  tcase_add_test(tc, test_abandoned_upload);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (daemon_ok) {
    char why[256];
    int st = ts_dproc_stop(&daemon_, 5000, why, sizeof why);
    if (st != 0) {
      fprintf(stderr, "itest_mesh: daemon exit %d %s\n", st, why);
      failed++;
    }
  }
  ts_dproc_scratch_end();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
