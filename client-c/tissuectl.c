/*
 * tissuectl.c: command-line client of a running tissued over its TCP
 * protocol port, built on libtissueclient. Lists and creates sessions, runs a
 * scripted poke as a tool controller, watches a session as an observer,
 * trains a quasi-static session's learned shortcut and switches it between
 * the model and the solve, resets or ends a session, lists the stored
 * tissues, lists and makes material fits, or lists, exports, imports and deletes stored learned
 * models, printing JSON on stdout (messages go to stderr). The command line is parsed
 * and checked in ctl_args.c, and the file a command sends (a mesh, a model
 * document) is read, before anything connects.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../server/core/ts_error.h"
#include "ctl_args.h"
#include "tissueclient.h"

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

static int die(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "tissuectl: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 1;
}

static void json_str(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(o, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(o, "\\u%04x", ch);
    else
      fputc(ch, o);
  }
  fputc('"', o);
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- frame statistics (poke, watch) ---------------------------------------- */

typedef struct stats {
  int32_t (*q0)[3];      /* first keyframe, the displacement reference */
  uint32_t n0;
  uint32_t tool_id;      /* the tool to report (poke), 0 = all (watch) */
  int server_errors;     /* Error messages received */
  int protocol_errors;   /* bad data from the server */
  int left;              /* the session ended under us (or we are in none): stop */
  long frames;
  double max_disp_mm;    /* over the whole run */
} stats;

static double max_displacement_mm(stats *st, const tc_frame *f) {
  if (!st->q0 || st->n0 != f->vertex_count) return 0;
  double m2 = 0;
  for (uint32_t i = 0; i < f->vertex_count; i++) {
    double d2 = 0;
    for (int a = 0; a < 3; a++) {
      double d = (double)f->q[i][a] - (double)st->q0[i][a];
      d2 += d * d;
    }
    if (d2 > m2) m2 = d2;
  }
  return sqrt(m2) * f->quantum * 1e3;
}

static void print_vec(FILE *o, const double v[3], const char *fmt) {
  fputc('[', o);
  for (int a = 0; a < 3; a++) {
    if (a) fputc(',', o);
    fprintf(o, fmt, v[a]);
  }
  fputc(']', o);
}

static void on_frame(void *ud, const tc_frame *f) {
  stats *st = ud;
  if (f->keyframe && (!st->q0 || st->n0 != f->vertex_count)) {
    free(st->q0);
    st->q0 = malloc((f->vertex_count ? f->vertex_count : 1) * sizeof *st->q0);
    if (st->q0) {
      memcpy(st->q0, f->q, f->vertex_count * sizeof *st->q0);
      st->n0 = f->vertex_count;
    }
  }
  double disp = max_displacement_mm(st, f);
  if (disp > st->max_disp_mm) st->max_disp_mm = disp;
  st->frames++;
  FILE *o = stdout;
  fprintf(o,
          "{\"session\":%u,\"seq\":%llu,\"sim_time\":%.6f,\"keyframe\":%s,\"bytes\":%zu,"
          "\"vertices\":%u,\"changed\":%u,\"max_disp_mm\":%.3f,\"flags\":%u",
          f->session, (unsigned long long)f->seq, f->sim_time, f->keyframe ? "true" : "false",
          f->bytes, f->vertex_count, f->changed, disp, f->flags);
  if (st->tool_id) {
    for (uint32_t i = 0; i < f->n_tools; i++) {
      const tc_tool *t = &f->tools[i];
      if (t->tool_id != st->tool_id) continue;
      fprintf(o, ",\"force\":");
      print_vec(o, t->force, "%.5f");
      fprintf(o, ",\"force_n\":%.5f,\"last_pose_seq\":%llu,\"tool_y\":%.6f",
              sqrt(t->force[0] * t->force[0] + t->force[1] * t->force[1] +
                   t->force[2] * t->force[2]),
              (unsigned long long)t->last_pose_seq, t->position[1]);
    }
  } else {
    fprintf(o, ",\"tools\":[");
    for (uint32_t i = 0; i < f->n_tools; i++) {
      const tc_tool *t = &f->tools[i];
      fprintf(o, "%s{\"tool_id\":%u,\"last_pose_seq\":%llu,\"position\":", i ? "," : "",
              t->tool_id, (unsigned long long)t->last_pose_seq);
      print_vec(o, t->position, "%.6f");
      fprintf(o, ",\"radius\":%.5f,\"force\":", t->radius);
      print_vec(o, t->force, "%.5f");
      fputc('}', o);
    }
    fputc(']', o);
  }
  fprintf(o, "}\n");
  fflush(o);
}

static void on_error(void *ud, int code, const char *name, const char *message,
                     uint64_t request_id) {
  stats *st = ud;
  /* the refusals of poses still in flight when the session ended: the end
   * was said already, and the loop stops at it. A refusal carries its
   * pose's request id: one that came in the same read as the end was said
   * (itest_ctl, on a loaded machine) while the check wanted id 0 */
  if (st->left && code == TS_ENOTJOINED) return;
  if (code == TS_EDECODE || code == TS_EPROTOCOL)
    st->protocol_errors += request_id == 0;
  if (request_id != 0 || (code != TS_EDECODE && code != TS_EPROTOCOL)) st->server_errors++;
  /* the session ended ("session N ended: ..."), or a pose found us in none:
   * nothing more will come, and every further pose would be refused */
  if (request_id == 0 && (code == TS_ENOSESSION || code == TS_ENOTJOINED)) st->left = 1;
  fprintf(stderr, "tissuectl: %s from the server%s: %s\n", name,
          request_id == 0 && (code == TS_EDECODE || code == TS_EPROTOCOL) ? " (bad data)" : "",
          message);
}

/* ---- commands ----------------------------------------------------------------- */

static int cmd_sessions(tc_client *c) {
  tc_session_info *v;
  size_t n;
  int rc = tc_list_sessions(c, &v, &n);
  if (rc) return die("listing sessions: %s%s", tc_last_error(c), "");
  for (size_t i = 0; i < n; i++) {
    printf("{\"session_id\":%u,\"name\":", v[i].session_id);
    json_str(stdout, v[i].name);
    printf(",\"tissue\":");
    json_str(stdout, v[i].tissue);
    printf(",\"solver\":%d,\"clients\":%u,\"vertex_count\":%u,\"tool_stiffness\":%.6g,"
           "\"self_contact\":%s,\"self_contacts\":%u,\"asleep\":%s,\"slow_lane\":%s,"
           "\"step_load\":%.3g",
           v[i].solver, v[i].clients, v[i].vertex_count, v[i].tool_stiffness,
           v[i].self_contact ? "true" : "false", v[i].self_contacts,
           v[i].asleep ? "true" : "false", v[i].slow_lane ? "true" : "false", v[i].step_load);
    if (v[i].self_contact || v[i].self_contact_off)
      printf(",\"self_contact_surface_nodes\":%u", v[i].self_contact_surface_nodes);
    if (v[i].self_contact_off)
      printf(",\"self_contact_off\":\"%s\"",
             v[i].self_contact_off == TC_SELF_OFF_OVER_LIMIT ? "over_limit"
             : v[i].self_contact_off == TC_SELF_OFF_FAILED   ? "failed"
                                                             : "unknown");
    if (v[i].solver == TC_SOLVER_QUASI_STATIC)
      printf(",\"learned\":%s,\"samples\":%llu,\"model_answers\":%llu",
             v[i].learned ? "true" : "false", (unsigned long long)v[i].samples,
             (unsigned long long)v[i].model_answers);
    printf("}\n");
  }
  free(v);
  return 0;
}

/* ,"observer_token":"..","controller_tokens":[..] of the session just created */
static void print_tokens(tc_client *c) {
  tc_tokens t;
  if (!tc_session_tokens(c, &t)) return;
  printf(",\"observer_token\":\"%s\",\"controller_tokens\":[", t.observer);
  for (uint32_t i = 0; i < t.n_controller; i++)
    printf("%s\"%s\"", i ? "," : "", t.controller[i]);
  printf("]");
}

/* ,"moved_vertices":..,"warning":".." when the server changed the mesh
 * tissue so that its layers do not fold (nothing otherwise) */
static void print_adjust(tc_client *c) {
  tc_mesh_adjust a;
  if (!tc_session_adjust(c, &a) || (!a.moved_vertices && !a.thinned_vertices && !a.warning[0]))
    return;
  printf(",\"moved_vertices\":%u,\"max_move\":%.6g,\"thinned_vertices\":%u,"
         "\"min_depth_fraction\":%.6g,\"warning\":",
         a.moved_vertices, a.max_move, a.thinned_vertices, a.min_depth_fraction);
  json_str(stdout, a.warning);
}

/* ,"step_load":.. of the session just created, when the daemon measured it */
static void print_step_load(tc_client *c) {
  const double l = tc_session_step_load(c);
  if (l > 0) printf(",\"step_load\":%.4g", l);
}

/* A creation's progress reports (about once a second after the first
 * second), on stderr: stdout keeps the one JSON line of the result. */
static void on_create_progress(void *ud, const tc_create_progress *p) {
  (void)ud;
  if (p->stage == TC_CREATE_QUEUED && p->ahead)
    fprintf(stderr, "tissuectl: creating: queued behind %u other creation%s, %.0f s\n", p->ahead,
            p->ahead == 1 ? "" : "s", p->elapsed);
  else
    fprintf(stderr, "tissuectl: creating: %s, %.0f s\n", p->stage_name, p->elapsed);
}

/* The layers that create --materials names (and --layers sizes, for an
 * upload) into layers[0..CTL_MAX_LAYERS); their count. */
static size_t ctl_layers(const ctl_args *o, tc_layer *layers) {
  memset(layers, 0, sizeof *layers * CTL_MAX_LAYERS);
  const int n = o->n_layers > o->n_materials ? o->n_layers : o->n_materials;
  for (int k = 0; k < o->n_layers; k++) layers[k].thickness = o->layers[k];
  for (int k = 0; k < o->n_materials; k++) layers[k].material = o->materials[k];
  return (size_t)n;
}

static int cmd_create(tc_client *c, const ctl_args *o) {
  uint32_t id, nv, nt;
  tc_layer layers[CTL_MAX_LAYERS];
  const size_t n_layers = ctl_layers(o, layers);
  const tc_create_params p = {.builtin = o->tissue, .solver = o->solver,
                              .substeps = (uint32_t)o->substeps,
                              .tool_stiffness = o->tool_stiffness * 1000, /* N/m on the wire */
                              .self_contact = o->self_contact,
                              .layers = n_layers ? layers : NULL, .n_layers = n_layers,
                              .name = o->name};
  if (tc_create_session_ex(c, &p, &id, &nv, &nt) != 0)
    return die("creating a session: %s%s", tc_last_error(c), "");
  printf("{\"session_id\":%u,\"vertex_count\":%u,\"triangle_count\":%u", id, nv, nt);
  print_adjust(c);
  print_step_load(c);
  print_tokens(c);
  printf("}\n");
  return 0;
}

/* Reads a whole stream (at most 1 GiB). */
static int read_stream(FILE *f, char **out, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *nb = cap < (1u << 30) ? realloc(buf, cap * 2) : NULL;
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  if (!buf || ferror(f)) {
    free(buf);
    return -1;
  }
  *out = buf;
  *len = n;
  return 0;
}

/* Reads a whole file (at most 1 GiB). */
static int read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  int rc = read_stream(f, out, len);
  fclose(f);
  return rc;
}

/* Reads the file a command sends (create --mesh, models import; '-' is
 * stdin for an import), before connecting. 0, or 1 said on stderr. */
static int load_file(const char *path, int stdin_ok, char **out, size_t *len) {
  errno = 0;
  int rc = stdin_ok && !strcmp(path, "-") ? read_stream(stdin, out, len)
                                          : read_file(path, out, len);
  if (rc) return die("%s: cannot read: %s", path, strerror(errno ? errno : EIO));
  return 0;
}

static int cmd_create_mesh(tc_client *c, const ctl_args *o, const char *bytes, size_t len) {
  static const int format[] = {[CTL_MESH_OBJ] = TC_MESH_OBJ, [CTL_MESH_STL] = TC_MESH_STL,
                               [CTL_MESH_PLY] = TC_MESH_PLY};
  tc_layer layers[CTL_MAX_LAYERS];
  const size_t n_layers = ctl_layers(o, layers);
  uint32_t id, nv, nt;
  if (tc_create_session_mesh(c, format[o->mesh_format], bytes, len, o->scale, layers, n_layers,
                             o->name, &id, &nv, &nt))
    return die("creating a session from %s: %s", o->mesh, tc_last_error(c));
  printf("{\"session_id\":%u,\"vertex_count\":%u,\"triangle_count\":%u,\"bytes\":%zu", id, nv,
         nt, len);
  print_adjust(c);
  print_step_load(c);
  print_tokens(c);
  printf("}\n");
  return 0;
}

/* Smoothstep from a to b as u goes 0..1. */
static double ease(double a, double b, double u) {
  u = u < 0 ? 0 : u > 1 ? 1 : u;
  return a + (b - a) * u * u * (3 - 2 * u);
}

/* The poke script: sphere centre height at time t of T seconds. The top
 * surface centre is at y = 0; the sphere starts 10 mm above touching. */
static double poke_height(double t, double T, double radius, double depth) {
  double up = radius + 0.010, touch = radius, down = radius - depth;
  double q = T / 4;
  if (t < q) return ease(up, touch, t / q);
  if (t < 2 * q) return ease(touch, down, (t - q) / q);
  if (t < 3 * q) return down;
  return ease(down, up, (t - 3 * q) / q);
}

static int run_frames(tc_client *c, stats *st, double seconds, long max_frames, int controller,
                      double radius, double depth) {
  const double quat[4] = {1, 0, 0, 0};
  double t0 = mono_s(), next_pose = t0;
  int rc = 0;
  while (!interrupted && !st->left) {
    double now = mono_s();
    if (seconds > 0 && now - t0 >= seconds) break;
    if (max_frames > 0 && st->frames >= max_frames) break;
    if (controller && now >= next_pose) {
      double pos[3] = {0, poke_height(now - t0, seconds, radius, depth), 0};
      if ((rc = tc_send_pose(c, st->tool_id, pos, quat, 0)) != 0) break;
      next_pose += 1.0 / POSE_RATE_HZ;
      if (next_pose < now) next_pose = now; /* never burst to catch up */
    }
    double wait = controller ? next_pose - mono_s() : 0.05;
    if (seconds > 0 && t0 + seconds - mono_s() < wait) wait = t0 + seconds - mono_s();
    int ms = wait > 0 ? (int)ceil(wait * 1000) : 0;
    int pr = tc_poll(c, ms);
    if (pr == TS_EIO || pr == TS_ETOOBIG || pr == TS_ENOMEM) {
      rc = pr;
      break;
    }
  }
  if (rc) return die("%s%s", tc_last_error(c), "");
  return 0;
}

static int cmd_frames(tc_client *c, uint32_t session, int controller, double seconds,
                      long max_frames, double radius, double depth, uint32_t frame_rate, const double *mu) {
  stats st = {0};
  tc_set_frame_cb(c, on_frame, &st);
  tc_set_error_cb(c, on_error, &st);
  tc_join_params p = {.session_id = session,
                      .role = controller ? TC_ROLE_CONTROLLER : TC_ROLE_OBSERVER,
                      .radius = controller ? radius : 0,
                      .frame_rate = frame_rate,
                      .friction = controller && mu,
                      .mu_static = mu ? mu[0] : 0,
                      .mu_kinetic = mu ? mu[1] : 0};
  tc_joined j;
  if (tc_join_ex(c, &p, &j) != 0) {
    free(st.q0);
    return die("joining session %s: %s", controller ? "as controller" : "as observer",
               tc_last_error(c));
  }
  st.tool_id = controller ? j.tool_id : 0;
  if (controller)
    fprintf(stderr, "tissuectl: joined session %u as controller of tool %u", j.session_id,
            j.tool_id);
  else
    fprintf(stderr, "tissuectl: joined session %u as observer", j.session_id);
  fprintf(stderr, ": %u vertices, dt %g s, %u frames/s\n", j.vertex_count, j.dt, j.frame_rate);
  int rc = run_frames(c, &st, seconds, max_frames, controller, radius, depth);
  fprintf(stderr, "tissuectl: %ld frames, largest displacement %.3f mm, %d server errors\n",
          st.frames, st.max_disp_mm, st.server_errors + st.protocol_errors);
  free(st.q0);
  if (rc) return rc;
  if (st.frames == 0) return die("no frames received%s%s", "", "");
  if (st.server_errors || st.protocol_errors) return 1;
  return 0;
}

/* ---- learned models ----------------------------------------------------------- */

static void print_model(const tc_model_info *m) {
  printf("{\"model_id\":%lld,\"tissue\":", (long long)m->model_id);
  json_str(stdout, m->tissue);
  printf(",\"material\":");
  json_str(stdout, m->material);
  printf(",\"kind\":");
  json_str(stdout, m->kind);
  printf(",\"version\":%lld,\"samples\":%llu,\"loss\":%.17g,\"heldout_rmse\":%.17g,"
         "\"heldout_max\":%.17g,\"created\":%lld}\n",
         (long long)m->version, (unsigned long long)m->samples, m->loss, m->heldout_rmse,
         m->heldout_max, (long long)m->created);
}

/* models; import_doc: the document of an import, read before connecting */
static int cmd_models(tc_client *c, const ctl_args *o, const char *import_doc) {
  const char *verb = o->verb, *arg = o->verb_arg, *tissue = o->model_tissue;
  if (!strcmp(verb, "list")) {
    tc_model_info *v;
    size_t n;
    if (tc_list_models(c, tissue, &v, &n)) return die("listing models: %s%s", tc_last_error(c), "");
    for (size_t i = 0; i < n; i++) print_model(&v[i]);
    free(v);
    return 0;
  }
  if (!strcmp(verb, "import")) {
    tc_model_info m;
    if (tc_import_model(c, import_doc, &m)) return die("importing %s: %s", arg, tc_last_error(c));
    print_model(&m);
    return 0;
  }
  int64_t id = o->verb_id; /* checked by ctl_parse_args */
  if (!strcmp(verb, "export")) {
    char *doc;
    if (tc_export_model(c, id, &doc, NULL)) return die("exporting a model: %s%s", tc_last_error(c), "");
    printf("%s\n", doc);
    free(doc);
    return 0;
  }
  if (tc_delete_model(c, id)) return die("deleting a model: %s%s", tc_last_error(c), "");
  printf("{\"deleted\":%lld}\n", (long long)id);
  return 0;
}

static int cmd_refine(tc_client *c, const ctl_args *o) {
  const uint32_t session = (uint32_t)o->session;
  tc_refine_params p = {.session_id = session, .method = o->leb ? TC_REFINE_LEB : TC_REFINE_LOOP,
                        .ray_origin = {0, 0.05, 0}, .ray_direction = {0, -1, 0},
                        .range = o->range, .max_edge = o->max_edge,
                        .midpoint_rest = o->midpoints};
  if (o->n_tris) { /* parsed and checked by ctl_parse_args, as the ray */
    p.triangles = o->tris;
    p.n_triangles = (uint32_t)o->n_tris;
  } else if (o->ray_s) {
    memcpy(p.ray_origin, o->ray, sizeof p.ray_origin);
    memcpy(p.ray_direction, o->ray + 3, sizeof p.ray_direction);
  }
  tc_refined r;
  if (tc_refine(c, &p, &r)) return die("refine: %s%s", tc_last_error(c), "");
  printf("{\"session_id\":%u,\"vertex_count\":%u,\"triangle_count\":%u,\"selected_triangles\":%u,"
         "\"new_vertices\":%u,\"step\":%llu,\"millis\":%.3f}\n",
         session, r.vertex_count, r.triangle_count, r.selected_triangles, r.new_vertices,
         (unsigned long long)r.step, r.millis);
  return 0;
}

/* ---- the learned shortcut (train, shortcut) ----------------------------------- */

/* Joins session as the controller of a free tool (TrainShortcut and
 * UseShortcut are a controller's requests); frames at 1 per second, which
 * these commands do not use. */
static int join_controller(tc_client *c, uint32_t session) {
  tc_join_params p = {.session_id = session, .role = TC_ROLE_CONTROLLER, .frame_rate = 1};
  tc_joined j;
  if (tc_join_ex(c, &p, &j) != 0)
    return die("joining the session as controller: %s%s", tc_last_error(c), "");
  fprintf(stderr, "tissuectl: joined session %u as controller of tool %u\n", j.session_id,
          j.tool_id);
  return 0;
}

typedef struct train_wait {
  int done, failed;
  long reports;
} train_wait;

static void on_progress(void *ud, const tc_training_progress *p) {
  train_wait *w = ud;
  /* only our training's reports: a join replays the session's last one */
  if (!p->mine || w->done) return;
  w->reports++;
  printf("{\"session_id\":%u,\"model\":", p->session_id);
  json_str(stdout, p->model);
  printf(",\"fraction\":%.4g,\"loss\":%.9g", p->fraction, p->loss);
  if (p->done) {
    w->done = 1;
    if (p->error[0]) {
      w->failed = 1;
      printf(",\"done\":true,\"samples\":%llu,\"error\":", (unsigned long long)p->samples);
      json_str(stdout, p->error);
    } else {
      printf(",\"done\":true,\"samples\":%llu,\"iterations\":%llu,\"heldout_rmse\":%.6g,"
             "\"heldout_rel\":%.4g,\"model_id\":%lld,\"intervals\":%llu,"
             "\"unconverged_intervals\":%llu,\"worst_residual\":%.4g",
             (unsigned long long)p->samples, (unsigned long long)p->iterations, p->heldout_rmse,
             p->heldout_rel, (long long)p->model_id, (unsigned long long)p->intervals,
             (unsigned long long)p->unconverged_intervals, p->worst_residual);
    }
  }
  printf("}\n");
  fflush(stdout);
}

/* Waits for the training's last report; gives up when none came for the
 * longer of the request timeout and 60 s (gradient descent reports every
 * sixteenth of its way, so a silent minute means a lost daemon). */
static int cmd_train(tc_client *c, uint32_t session, const char *model, int timeout_ms) {
  if (join_controller(c, session)) return 1;
  train_wait w = {0};
  tc_set_progress_cb(c, on_progress, &w);
  if (tc_train_shortcut(c, session, model, NULL) != 0)
    return die("training: %s%s", tc_last_error(c), "");
  const double quiet_s = timeout_ms > 60000 ? timeout_ms / 1000.0 : 60;
  double last = mono_s();
  long seen = 0;
  while (!w.done && !interrupted) {
    int rc = tc_poll(c, 200);
    if (rc < 0 && rc != TS_EDECODE && rc != TS_EPROTOCOL)
      return die("training: %s%s", tc_last_error(c), "");
    if (w.reports != seen) {
      seen = w.reports;
      last = mono_s();
    } else if (mono_s() - last > quiet_s) {
      char s[32];
      snprintf(s, sizeof s, "%.0f", quiet_s);
      return die("training: no progress report for %s s%s", s, "");
    }
  }
  if (!w.done) return die("interrupted before the training ended%s%s", "", "");
  return w.failed ? 1 : 0;
}

static int cmd_shortcut(tc_client *c, uint32_t session, int learned, int64_t model_id) {
  if (join_controller(c, session)) return 1;
  if (tc_use_shortcut(c, session, learned, model_id) != 0)
    return die("switching session to the %s: %s", learned ? "learned model" : "solve",
               tc_last_error(c));
  printf("{\"session_id\":%u,\"learned\":%s", session, learned ? "true" : "false");
  if (model_id) printf(",\"model_id\":%lld", (long long)model_id);
  printf("}\n");
  return 0;
}

/* ---- session control (reset, end) --------------------------------------------------- */

/* ResetSession and EndSession are a controller's requests: joins session as
 * the controller of a free tool (parked away from the tissue until a pose
 * comes, which none does), then asks. */
/* reset and end: with the server key the daemon takes them for any session
 * without a join (so they need no free tool); a session token's holder is
 * refused that (TS_ENOTJOINED) and joins as a controller first */
static int cmd_control(tc_client *c, uint32_t session, int end) {
  int rc = end ? tc_end_session(c, session) : tc_reset_session(c, session);
  if (rc == TS_ENOTJOINED) {
    if (join_controller(c, session)) return 1;
    rc = end ? tc_end_session(c, session) : tc_reset_session(c, session);
  }
  if (rc != 0)
    return die("%s: %s", end ? "ending the session" : "resetting the session", tc_last_error(c));
  printf("{\"session_id\":%u,\"%s\":true}\n", session, end ? "ended" : "reset");
  return 0;
}

/* ---- stored tissues (tissues) ------------------------------------------------------- */

static int cmd_tissues(tc_client *c, const ctl_args *o) {
  if (o->delete_tissue) {
    if (tc_delete_tissue(c, o->delete_tissue, o->with_records))
      return die("deleting tissue '%s': %s", o->delete_tissue, tc_last_error(c));
    printf("{\"deleted\":");
    json_str(stdout, o->delete_tissue);
    printf("}\n");
    return 0;
  }
  tc_tissue_info *v;
  size_t n;
  if (tc_list_tissues(c, &v, &n) != 0)
    return die("listing the tissues: %s%s", tc_last_error(c), "");
  for (size_t i = 0; i < n; i++) {
    printf("{\"name\":");
    json_str(stdout, v[i].name);
    printf(",\"kind\":");
    json_str(stdout, v[i].kind);
    printf(",\"created\":%lld}\n", (long long)v[i].created);
  }
  free(v);
  return 0;
}

/* ---- material fits (materials, fit) -------------------------------------------------- */

static void print_fit(const tc_material_fit *f) {
  printf("{\"id\":%lld,\"tissue\":", (long long)f->id);
  json_str(stdout, f->tissue);
  printf(",\"layer\":");
  json_str(stdout, f->layer);
  printf(",\"direction\":");
  json_str(stdout, f->direction);
  printf(",\"name\":");
  json_str(stdout, f->name);
  printf(",\"a\":%.9g,\"b\":%.9g,\"rmse\":%.6g,\"r2\":%.9g,\"samples\":%u}\n", f->a, f->b,
         f->rmse, f->r2, f->samples);
}

static int cmd_materials(tc_client *c, const char *tissue) {
  tc_material_fit *v;
  size_t n;
  if (tc_list_materials(c, tissue, &v, &n) != 0)
    return die("listing the material fits: %s%s", tc_last_error(c), "");
  for (size_t i = 0; i < n; i++) print_fit(&v[i]);
  free(v);
  return 0;
}

static int cmd_fit(tc_client *c, const ctl_args *o, const char *csv, size_t len) {
  tc_material_fit f;
  if (tc_fit_material(c, o->fit_tissue, o->fit_layer, o->fit_direction, o->fit_name, csv, len,
                      &f) != 0)
    return die("fitting %s: %s", o->fit_file, tc_last_error(c));
  print_fit(&f);
  return 0;
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  ctl_args o;
  switch (ctl_parse_args(argc, argv, getenv("TISSUED_SERVER_KEY"), &o)) {
  case CTL_RUN: break;
  case CTL_HELP: ctl_usage(stdout); return 0;
  case CTL_USAGE: ctl_usage(stderr); return 2;
  default: fprintf(stderr, "tissuectl: %s\n", o.err); return 2;
  }
  const char *cmd = o.cmd;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  /* the file the command sends, read (and a model document checked) before connecting */
  char *file = NULL;
  size_t file_len = 0;
  if (o.mesh && load_file(o.mesh, 0, &file, &file_len)) return 1;
  if (o.fit_file && load_file(o.fit_file, 1, &file, &file_len)) return 1;
  if (o.verb && !strcmp(o.verb, "import")) {
    if (load_file(o.verb_arg, 1, &file, &file_len)) return 1;
    char *doc = realloc(file, file_len + 1);
    if (!doc) {
      free(file);
      return die("%s: out of memory%s", o.verb_arg, "");
    }
    file = doc;
    file[file_len] = '\0';
    if (strlen(file) != file_len) {
      free(file);
      return die("%s: the file holds a NUL byte; a model document is JSON text%s", o.verb_arg, "");
    }
  }

  char err[512];
  tc_client *c =
      tc_connect_key(o.host, (int)o.port, "tissuectl", o.cred, (int)o.timeout, err, sizeof err);
  if (!c) {
    free(file);
    return die("cannot connect to %s: %s", o.host, err);
  }
  int rc;
  if (!strcmp(cmd, "create")) tc_set_create_progress_cb(c, on_create_progress, NULL);
  if (!strcmp(cmd, "sessions"))
    rc = cmd_sessions(c);
  else if (o.verb)
    rc = cmd_models(c, &o, file);
  else if (!strcmp(cmd, "create") && o.mesh)
    rc = cmd_create_mesh(c, &o, file, file_len);
  else if (!strcmp(cmd, "create"))
    rc = cmd_create(c, &o);
  else if (o.is_tissues)
    rc = cmd_tissues(c, &o);
  else if (o.is_materials)
    rc = cmd_materials(c, o.fit_tissue);
  else if (o.is_fit)
    rc = cmd_fit(c, &o, file, file_len);
  else if (o.is_train)
    rc = cmd_train(c, (uint32_t)o.session, o.model_kind, (int)o.timeout);
  else if (o.is_shortcut)
    rc = cmd_shortcut(c, (uint32_t)o.session, o.use_learned, (int64_t)o.model_id);
  else if (o.is_refine)
    rc = cmd_refine(c, &o);
  else if (o.is_reset || o.is_end)
    rc = cmd_control(c, (uint32_t)o.session, o.is_end);
  else
    rc = cmd_frames(c, (uint32_t)o.session, o.is_poke, o.seconds, (long)o.frames, o.radius,
                    o.depth, (uint32_t)o.rate, o.have_mu ? o.mu : NULL);
  tc_close(c);
  free(file);
  return rc;
}
