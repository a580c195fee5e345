/*
 * fuzz_client.c: fuzz target for libtissueclient's receive path: whatever a
 * hostile or broken server sends to a haptic client (client-c/tissueclient.c
 * and tc_frames.c: the length-prefixed framing, Envelope decoding, the HelloReply, the reply
 * of every request, frames with their topology, tools and q1/q2 payloads
 * applied to the client's copy of the tissue, force messages, Errors).
 *
 * No daemon and no TCP: the client is made over one end of a socketpair by
 * tc__connect_fd (tissueclient_internal.h), the same Hello exchange that
 * tc_connect_key does after its connect(); the target plays the server on
 * the other end. (The client speaks TCP only; the WebSocket frame decoder
 * is the daemon's, covered by fuzz_framing and fuzz_wshandshake.)
 *
 * Input: bytes 0..2 are a script of six 4-bit operations the client runs
 * after its Hello (request ids: Hello 1, then one per request, 2, 3, ...).
 * The rest is the server's bytes in up to eight segments, each a 16-bit
 * little-endian length and that many bytes (the last may be short): segment
 * 0 is written to the socket before the Hello, segment k before operation
 * k, segment 7 before the final reads; then the server end shuts down for
 * writing, or as soon as the input runs out. So replies can arrive in
 * their request's turn, early, late, split or never. Each request waits
 * 1 ms for its reply: what the server sent is in the socket already, so
 * only a missing reply waits, and the client then gives up as it would on
 * its timeout. Seeds: tests/fuzz/corpus/client/.
 *
 * Checks, besides ASan/UBSan and the leak check: every call returns 0, a
 * count, or a negative code above -1000 (a request answered with an Error
 * gives the negated Error.code, which the client keeps below 1000); the
 * last error is a terminated string; every frame the callback sees and
 * tc_last_frame holds together: a finite positive quantum, positions equal
 * to q * quantum, at most vertex_count changed vertices, every triangle
 * index below vertex_count, layer counts adding up to the triangles, named
 * layers, and every array readable to its end; callbacks may not re-enter
 * (tc_poll from a callback is TS_EINVAL); tool mesh names and session tokens
 * are terminated within their buffers.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "tissueclient.h"
#include "tissueclient_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SERVER_MAX (64u << 10) /* what a socketpair buffer takes without a reader */

static volatile double sink; /* keeps the reads of every array */

static void check_rc(int rc) {
  if (rc < -1000) abort();
}

static void check_frame(const tc_frame *f) {
  if (!(f->quantum > 0) || !isfinite(f->quantum)) abort();
  if (f->changed > f->vertex_count) abort();
  if (f->vertex_count && (!f->q || !f->positions)) abort();
  double s = 0;
  for (uint32_t i = 0; i < f->vertex_count; i++)
    for (int a = 0; a < 3; a++) {
      if (f->positions[i][a] != (double)f->q[i][a] * f->quantum) abort();
      s += f->positions[i][a];
    }
  if (f->n_triangles && !f->triangles) abort();
  for (size_t i = 0; i < 3 * (size_t)f->n_triangles; i++)
    if (f->triangles[i] >= f->vertex_count) abort();
  uint64_t sum = 0;
  for (uint32_t l = 0; l < f->n_layers; l++) {
    sum += f->layer_triangle_counts[l];
    if (!f->layer_names[l]) abort();
    s += (double)strlen(f->layer_names[l]);
  }
  if (f->n_layers && sum != f->n_triangles) abort();
  if (f->n_tools && !f->tools) abort();
  for (uint32_t t = 0; t < f->n_tools; t++)
    s += f->tools[t].force[0] + f->tools[t].position[2] + f->tools[t].orientation[3] +
         f->tools[t].radius + (double)f->tools[t].tool_id;
  sink = s;
}

static void on_frame(void *ud, const tc_frame *f) {
  if (tc_poll(ud, 0) != TS_EINVAL) abort(); /* no re-entry from a callback */
  check_frame(f);
}

static void on_force(void *ud, const tc_force *f) {
  (void)ud;
  sink = f->force[0] + f->torque[2] + f->sim_time + (double)f->contacts;
}

static void on_error(void *ud, int code, const char *name, const char *message,
                     uint64_t request_id) {
  (void)ud;
  (void)request_id;
  if (!name || !message || code == 0) abort();
  sink = (double)(strlen(name) + strlen(message));
}

static void check_text(const char *s, size_t cap) {
  if (strnlen(s, cap) >= cap) abort();
}

/* a cube, for the mesh upload's request (its reply is what is fuzzed) */
static const char cube_obj[] = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\n"
                               "v 1 1 1\nv 0 1 1\nf 1 3 2\nf 1 4 3\nf 5 6 7\nf 5 7 8\n"
                               "f 1 2 6\nf 1 6 5\nf 2 3 7\nf 2 7 6\nf 3 4 8\nf 3 8 7\n"
                               "f 4 1 5\nf 4 5 8\n";

static void run_op(tc_client *c, int op) {
  int rc = 0;
  switch (op) {
  case 1: {
    uint32_t sid, nv, nt;
    rc = tc_create_session(c, NULL, &sid, &nv, &nt);
    tc_tokens t;
    if (tc_session_tokens(c, &t)) {
      check_text(t.observer, sizeof t.observer);
      if (t.n_controller > TC_MAX_TOOL_TOKENS) abort();
      for (uint32_t i = 0; i < t.n_controller; i++)
        check_text(t.controller[i], sizeof t.controller[i]);
    }
    break;
  }
  case 2: {
    tc_join_params p = {.session_id = 1, .role = TC_ROLE_CONTROLLER, .radius = 0.005};
    tc_joined j;
    rc = tc_join_ex(c, &p, &j);
    break;
  }
  case 3: {
    tc_session_info *v;
    size_t n;
    rc = tc_list_sessions(c, &v, &n);
    for (size_t i = 0; i < n; i++) {
      check_text(v[i].name, sizeof v[i].name);
      check_text(v[i].tissue, sizeof v[i].tissue);
    }
    free(v);
    break;
  }
  case 4: {
    uint64_t rtt;
    rc = tc_ping(c, &rtt);
    break;
  }
  case 5: {
    tc_model_info *v;
    size_t n;
    rc = tc_list_models(c, NULL, &v, &n);
    for (size_t i = 0; i < n; i++) {
      check_text(v[i].tissue, sizeof v[i].tissue);
      check_text(v[i].material, sizeof v[i].material);
      check_text(v[i].kind, sizeof v[i].kind);
    }
    free(v);
    break;
  }
  case 6: {
    char *doc;
    tc_model_info mi;
    rc = tc_export_model(c, 1, &doc, &mi);
    if (rc == 0) {
      if (!doc || !doc[0]) abort();
      sink = (double)strlen(doc);
      check_text(mi.kind, sizeof mi.kind);
    } else if (doc) {
      abort();
    }
    free(doc);
    break;
  }
  case 7: {
    tc_model_info mi;
    rc = tc_import_model(c, "{}", &mi);
    if (rc == 0) check_text(mi.material, sizeof mi.material);
    break;
  }
  case 8: {
    tc_refine_params p = {.session_id = 1, .ray_origin = {0, 0.05, 0},
                          .ray_direction = {0, -1, 0}};
    tc_refined r;
    rc = tc_refine(c, &p, &r);
    break;
  }
  case 9: rc = tc_reset_session(c, 1); break;
  case 10: rc = tc_end_session(c, 1); break;
  case 11: rc = tc_delete_model(c, 1); break;
  case 12: rc = tc_use_shortcut(c, 1, 1, 0); break;
  case 13: {
    const double pos[3] = {0, 0.01, 0}, quat[4] = {1, 0, 0, 0};
    rc = tc_send_pose(c, 1, pos, quat, 1);
    break;
  }
  case 14: {
    uint32_t sid;
    rc = tc_create_session_mesh(c, TC_MESH_OBJ, cube_obj, sizeof cube_obj - 1, 0.01, NULL, 0,
                                "cube", &sid, NULL, NULL);
    break;
  }
  default: rc = tc_poll(c, 0); break;
  }
  check_rc(rc);
  check_text(tc_last_error(c), 512);
}

/* Writes the next segment of the server's stream; shuts the server end down
 * for writing after the last one or when the input has run out. */
static void serve(int fd, const uint8_t **data, size_t *size, int last, int *shut) {
  if (*shut) return;
  if (*size >= 2) {
    size_t n = (size_t)(*data)[0] | (size_t)(*data)[1] << 8;
    *data += 2;
    *size -= 2;
    if (n > *size) n = *size;
    for (size_t off = 0; off < n;) {
      ssize_t w = send(fd, *data + off, n - off, MSG_NOSIGNAL);
      if (w <= 0) break; /* the buffer is full: the client sees a shorter stream */
      off += (size_t)w;
    }
    *data += n;
    *size -= n;
  }
  if (last || *size < 2) {
    shutdown(fd, SHUT_WR);
    *shut = 1;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3 || size > SERVER_MAX) return 0;
  uint32_t script = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16;
  data += 3;
  size -= 3;

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) abort();
  /* room for the whole stream and for everything the client sends */
  int big = 1 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  int shut = 0;
  serve(sv[1], &data, &size, 0, &shut);

  char err[256];
  tc_client *c = tc__connect_fd(sv[0], "fuzz", "", 1, err, sizeof err);
  if (!c) {
    check_text(err, sizeof err);
    if (!err[0]) abort(); /* a failed connect says why */
    close(sv[1]);
    return 0;
  }
  const char *names[TC_MAX_TOOL_MESHES];
  uint32_t nm = tc_tool_meshes(c, names, TC_MAX_TOOL_MESHES);
  if (nm > TC_MAX_TOOL_MESHES) abort();
  for (uint32_t i = 0; i < nm; i++) check_text(names[i], 32);
  tc_set_frame_cb(c, on_frame, c);
  tc_set_force_cb(c, on_force, NULL);
  tc_set_error_cb(c, on_error, NULL);
  for (int k = 0; k < 6; k++) {
    serve(sv[1], &data, &size, 0, &shut);
    run_op(c, (int)(script >> (4 * k)) & 15);
  }
  /* then whatever is left of the stream, up to its end */
  serve(sv[1], &data, &size, 1, &shut);
  for (int k = 0; k < 1000; k++) {
    int rc = tc_poll(c, 0);
    check_rc(rc);
    if (rc == TS_EIO) break;
  }
  const tc_frame *f = tc_last_frame(c);
  if (f) check_frame(f);
  tc_force fo;
  if (tc_latest_force(c, &fo)) sink = fo.force[1];
  tc_close(c);
  close(sv[1]);
  return 0;
}
