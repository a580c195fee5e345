/*
 * tissuectl.c: command-line client of a running tissued over its TCP
 * protocol port, built on libtissueclient. Lists and creates sessions, runs a
 * scripted poke as a tool controller, watches a session as an observer, or
 * lists, exports, imports and deletes stored learned models, printing JSON
 * on stdout (messages go to stderr).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../server/core/ts_error.h"
#include "tissueclient.h"

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 7070
#define POSE_RATE_HZ 200.0

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

static void usage(FILE *out) {
  fprintf(out,
          "usage: tissuectl [--host H] [--port P] [--timeout MS] [--key K | --token T]\n"
          "                 <command> [options]\n"
          "\n"
          "Talks to a running tissued over its TCP protocol port (default %s:%d).\n"
          "Output is one JSON object per line on stdout; errors go to stderr and give a\n"
          "non-zero exit status.\n"
          "\n"
          "commands:\n"
          "  sessions                  list the sessions, one per line\n"
          "  create [--tissue NAME]    create a session (default tissue: stomach-patch);\n"
          "                            prints {\"session_id\":N,...,\"observer_token\":..,\n"
          "                            \"controller_tokens\":[..]} (the tokens that let\n"
          "                            others watch or drive a tool without the key)\n"
          "  create [--tissue NAME] --substeps N\n"
          "                            a haptic-rate mass-spring session: at most N\n"
          "                            (1..1000) substeps per step, the inertia scaled so\n"
          "                            that the step stays stable (statics unchanged; a\n"
          "                            moving tool feels a heavier tissue: README)\n"
          "  create --mesh FILE [--scale S] [--name N] [--layers T1,T2,...]\n"
          "                            upload a surface mesh (.obj, .stl or .ply, by\n"
          "                            extension) and create a session of it: S converts\n"
          "                            file units to metres (default 1; 0.01 for cm), the\n"
          "                            layers are thicknesses in metres, outermost first\n"
          "                            (default: the server's). The server keeps the file\n"
          "                            and the tissue as N (default mesh-<hash>), so later\n"
          "                            sessions need only 'create --tissue N'\n"
          "  poke --session N [--depth M] [--seconds S] [--radius M] [--friction MUS,MUK]\n"
          "                            join as a tool controller and drive a sphere\n"
          "                            (radius default 0.005 m; Coulomb friction on the\n"
          "                            tissue static MUS, kinetic MUK, 0 <= MUK <= MUS <= 2,\n"
          "                            default the server's 0.1,0.05; 0,0: none) straight\n"
          "                            down onto the patch centre: approach, press DEPTH\n"
          "                            metres below the surface at y=0 (default 0.004),\n"
          "                            hold, lift, over S seconds (default 3), sending poses\n"
          "                            at %.0f Hz; prints per frame: seq, sim_time,\n"
          "                            keyframe, bytes, vertices, changed (vertices in the\n"
          "                            delta), max_disp_mm (largest displacement since the\n"
          "                            first keyframe), force (N on the tool),\n"
          "                            last_pose_seq, tool_y\n"
          "  refine --session N [--leb] [--triangles I,J,...] [--ray OX,OY,OZ,DX,DY,DZ]\n"
          "         [--range M] [--max-edge M]\n"
          "                            refine the session's tissue while it runs (needs the\n"
          "                            key): Loop (default) or longest-edge bisection on\n"
          "                            the given outer-surface triangles (indices into the\n"
          "                            keyframe topology), or on those within M metres\n"
          "                            (default 0.005) of where the ray meets the surface\n"
          "                            (default: straight down onto the patch centre);\n"
          "                            prints {\"vertex_count\":..,\"new_vertices\":..,...}\n"
          "  watch --session N [--seconds S] [--frame-rate F]\n"
          "                            join as an observer and print per-frame statistics\n"
          "                            and tool states for S seconds (default: until\n"
          "                            interrupted)\n"
          "  models list [--tissue NAME]\n"
          "                            the stored learned models (of one tissue), one per\n"
          "                            line: model_id, tissue, material, kind, version,\n"
          "                            samples, loss (m^2), heldout_rmse, heldout_max (m),\n"
          "                            created (unix s)\n"
          "  models export ID          model ID's JSON document on stdout, the one\n"
          "                            'tissuetool models export' writes\n"
          "  models import FILE        store an exported document ('-' reads stdin) in\n"
          "                            this daemon's database as a new version; a model\n"
          "                            stored already (same tissue, material, kind and\n"
          "                            theta) is not stored again; prints the stored\n"
          "                            model's line. Its tissue must be known here\n"
          "  models delete ID          delete model ID (sessions using it keep it)\n"
          "                            The models commands need the server key.\n"
          "\n"
          "options:\n"
          "  --host H        daemon address (default %s)\n"
          "  --port P        daemon TCP port (default %d)\n"
          "  --timeout MS    how long a request waits for its reply (default 10000)\n"
          "  --key K         the server key (needed by create; opens every session);\n"
          "                  default $TISSUED_SERVER_KEY\n"
          "  --token T       a session token (from create) instead of the key: an\n"
          "                  observer token for watch, a controller token for poke\n"
          "  -h, --help      this text\n",
          DEFAULT_HOST, DEFAULT_PORT, POSE_RATE_HZ, DEFAULT_HOST, DEFAULT_PORT);
}

static int die(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "tissuectl: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 1;
}

/* Strict number parsing: the whole string, finite, within [lo, hi]. */
static int parse_num(const char *flag, const char *s, double lo, double hi, double *out) {
  if (!s) return die("%s needs a value%s", flag, "");
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
    char range[96];
    snprintf(range, sizeof range, " (expected a number in [%g, %g])", lo, hi);
    fprintf(stderr, "tissuectl: bad value '%s' for %s%s\n", s, flag, range);
    return 1;
  }
  *out = v;
  return 0;
}

/* parse_num for whole numbers. */
static int parse_int(const char *flag, const char *s, double lo, double hi, double *out) {
  if (parse_num(flag, s, lo, hi, out)) return 1;
  if (*out != floor(*out)) {
    fprintf(stderr, "tissuectl: %s needs a whole number, not '%s'\n", flag, s);
    return 1;
  }
  return 0;
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
  if (code == TS_EDECODE || code == TS_EPROTOCOL)
    st->protocol_errors += request_id == 0;
  if (request_id != 0 || (code != TS_EDECODE && code != TS_EPROTOCOL)) st->server_errors++;
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
    printf(",\"solver\":%d,\"clients\":%u,\"vertex_count\":%u}\n", v[i].solver, v[i].clients,
           v[i].vertex_count);
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

static int cmd_create(tc_client *c, const char *tissue, uint32_t substeps) {
  uint32_t id, nv, nt;
  if (tc_create_session_substeps(c, tissue, TC_SOLVER_DEFAULT, substeps, &id, &nv, &nt) != 0)
    return die("creating a session: %s%s", tc_last_error(c), "");
  printf("{\"session_id\":%u,\"vertex_count\":%u,\"triangle_count\":%u", id, nv, nt);
  print_tokens(c);
  printf("}\n");
  return 0;
}

/* Mesh format by file extension (case-insensitive): TC_MESH_* or -1. */
static int mesh_format(const char *path) {
  const char *dot = strrchr(path, '.');
  if (!dot) return -1;
  char ext[8] = "";
  for (size_t i = 0; i + 1 < sizeof ext && dot[1 + i]; i++)
    ext[i] = (char)(dot[1 + i] >= 'A' && dot[1 + i] <= 'Z' ? dot[1 + i] - 'A' + 'a' : dot[1 + i]);
  if (!strcmp(ext, "obj")) return TC_MESH_OBJ;
  if (!strcmp(ext, "stl")) return TC_MESH_STL;
  if (!strcmp(ext, "ply")) return TC_MESH_PLY;
  return -1;
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

/* Up to 8 comma-separated thicknesses in metres. Count, or -1. */
static int parse_layers(const char *s, tc_layer *layers) {
  int n = 0;
  while (*s && n < 8) {
    char *end;
    errno = 0;
    double t = strtod(s, &end);
    if (errno || end == s || !isfinite(t) || t <= 0) return -1;
    memset(&layers[n], 0, sizeof layers[n]);
    layers[n++].thickness = t;
    if (*end == ',')
      s = end + 1;
    else if (*end)
      return -1;
    else
      s = end;
  }
  return *s ? -1 : n;
}

static int cmd_create_mesh(tc_client *c, const char *path, double scale, const char *name,
                           const char *layers_s) {
  int format = mesh_format(path);
  if (format < 0) return die("%s: the file name must end in .obj, .stl or .ply%s", path, "");
  tc_layer layers[8];
  int nl = 0;
  if (layers_s && (nl = parse_layers(layers_s, layers)) < 1)
    return die("--layers %s: give 1 to 8 thicknesses in metres, comma-separated%s", layers_s, "");
  char *bytes = NULL;
  size_t len = 0;
  if (read_file(path, &bytes, &len)) return die("%s: cannot read: %s", path, strerror(errno));
  uint32_t id, nv, nt;
  int rc = tc_create_session_mesh(c, format, bytes, len, scale, layers, (size_t)nl, name, &id,
                                  &nv, &nt);
  free(bytes);
  if (rc) return die("creating a session from %s: %s", path, tc_last_error(c));
  printf("{\"session_id\":%u,\"vertex_count\":%u,\"triangle_count\":%u,\"bytes\":%zu", id, nv,
         nt, len);
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

static int run_frames(tc_client *c, stats *st, double seconds, int controller, double radius,
                      double depth) {
  const double quat[4] = {1, 0, 0, 0};
  double t0 = mono_s(), next_pose = t0;
  int rc = 0;
  while (!interrupted) {
    double now = mono_s();
    if (seconds > 0 && now - t0 >= seconds) break;
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
                      double radius, double depth, uint32_t frame_rate, const double *mu) {
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
  int rc = run_frames(c, &st, seconds, controller, radius, depth);
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

/* A model id: a whole number > 0. */
static int parse_model_id(const char *s, int64_t *id) {
  char *end;
  errno = 0;
  long long v = s ? strtoll(s, &end, 10) : 0;
  if (!s || errno || end == s || *end || v <= 0) {
    fprintf(stderr, "tissuectl: '%s' is not a model id (a whole number > 0)\n", s ? s : "");
    return 1;
  }
  *id = v;
  return 0;
}

static int cmd_models(tc_client *c, const char *verb, const char *arg, const char *tissue) {
  if (!strcmp(verb, "list")) {
    tc_model_info *v;
    size_t n;
    if (tc_list_models(c, tissue, &v, &n)) return die("listing models: %s%s", tc_last_error(c), "");
    for (size_t i = 0; i < n; i++) print_model(&v[i]);
    free(v);
    return 0;
  }
  if (!strcmp(verb, "import")) {
    char *text = NULL;
    size_t len = 0;
    errno = 0;
    if ((!strcmp(arg, "-") ? read_stream(stdin, &text, &len) : read_file(arg, &text, &len)) != 0)
      return die("%s: cannot read: %s", arg, strerror(errno ? errno : EIO));
    char *doc = realloc(text, len + 1);
    if (!doc) {
      free(text);
      return die("%s: out of memory%s", arg, "");
    }
    doc[len] = '\0';
    tc_model_info m;
    if (strlen(doc) != len) {
      free(doc);
      return die("%s: the file holds a NUL byte; a model document is JSON text%s", arg, "");
    }
    int rc = tc_import_model(c, doc, &m);
    free(doc);
    if (rc) return die("importing %s: %s", arg, tc_last_error(c));
    print_model(&m);
    return 0;
  }
  int64_t id;
  if (parse_model_id(arg, &id)) return 2;
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

/* Parses n comma-separated numbers (exactly n when exact, else up to n). */
static int parse_list(const char *s, double *out, int n, int exact) {
  int k = 0;
  const char *p = s;
  while (p && *p && k < n) {
    char *end;
    out[k++] = strtod(p, &end);
    if (end == p || !isfinite(out[k - 1])) return -1;
    p = *end == ',' ? end + 1 : (*end ? NULL : end);
    if (!p) return -1;
  }
  if (p && *p) return -1;
  return exact && k != n ? -1 : k;
}

static int cmd_refine(tc_client *c, uint32_t session, int leb, const char *tris_s,
                      const char *ray_s, double range, double max_edge) {
  tc_refine_params p = {.session_id = session, .method = leb ? TC_REFINE_LEB : TC_REFINE_LOOP,
                        .ray_origin = {0, 0.05, 0}, .ray_direction = {0, -1, 0},
                        .range = range, .max_edge = max_edge};
  uint32_t tris[256];
  if (tris_s) {
    double v[256];
    int n = parse_list(tris_s, v, 256, 0);
    if (n <= 0) return die("--triangles wants up to 256 indices I,J,...%s%s", "", "");
    for (int k = 0; k < n; k++) {
      if (v[k] < 0 || v[k] > 4294967295.0 || v[k] != floor(v[k]))
        return die("--triangles: not an index%s%s", "", "");
      tris[k] = (uint32_t)v[k];
    }
    p.triangles = tris;
    p.n_triangles = (uint32_t)n;
  } else if (ray_s) {
    double v[6];
    if (parse_list(ray_s, v, 6, 1) != 6) return die("--ray wants OX,OY,OZ,DX,DY,DZ%s%s", "", "");
    memcpy(p.ray_origin, v, sizeof p.ray_origin);
    memcpy(p.ray_direction, v + 3, sizeof p.ray_direction);
  }
  tc_refined r;
  if (tc_refine(c, &p, &r)) return die("refine: %s%s", tc_last_error(c), "");
  printf("{\"session_id\":%u,\"vertex_count\":%u,\"triangle_count\":%u,\"selected_triangles\":%u,"
         "\"new_vertices\":%u,\"step\":%llu,\"millis\":%.3f}\n",
         session, r.vertex_count, r.triangle_count, r.selected_triangles, r.new_vertices,
         (unsigned long long)r.step, r.millis);
  return 0;
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  const char *host = DEFAULT_HOST;
  const char *cred = getenv("TISSUED_SERVER_KEY");
  double port = DEFAULT_PORT, timeout = 10000;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--host") && i + 1 < argc) {
      host = argv[++i];
    } else if ((!strcmp(a, "--key") || !strcmp(a, "--token")) && i + 1 < argc) {
      cred = argv[++i];
    } else if (!strcmp(a, "--port")) {
      if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, 1, 65535, &port)) return 2;
    } else if (!strcmp(a, "--timeout")) {
      if (parse_num(a, i + 1 < argc ? argv[++i] : NULL, 1, 3600000, &timeout)) return 2;
    } else {
      fprintf(stderr, "tissuectl: unknown or incomplete option '%s' (see --help)\n", a);
      return 2;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[i++];
  const char *tissue = "stomach-patch";
  const char *verb = NULL, *verb_arg = NULL, *model_tissue = NULL;
  if (!strcmp(cmd, "models")) {
    verb = i < argc ? argv[i++] : "list";
    if (!strcmp(verb, "-h") || !strcmp(verb, "--help")) {
      usage(stdout);
      return 0;
    }
    if (strcmp(verb, "list") && strcmp(verb, "export") && strcmp(verb, "import") &&
        strcmp(verb, "delete")) {
      fprintf(stderr, "tissuectl: models: expected list, export ID, import FILE or delete ID\n");
      return 2;
    }
    if (strcmp(verb, "list")) {
      if (i >= argc) {
        fprintf(stderr, "tissuectl: models %s needs %s\n", verb,
                strcmp(verb, "import") ? "a model id" : "a file");
        return 2;
      }
      verb_arg = argv[i++];
    }
  }
  const char *mesh = NULL, *mesh_name = NULL, *layers_s = NULL;
  double scale = 1, substeps = 0;
  double session = -1, depth = 0.004, seconds = -1, radius = 0.005, rate = 0;
  int leb = 0;
  const char *tris_s = NULL, *ray_s = NULL;
  double range = 0, max_edge = 0;
  double mu[2];
  int have_mu = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--tissue") && !strcmp(cmd, "create") && v) {
      tissue = v;
    } else if (!strcmp(a, "--tissue") && verb && !strcmp(verb, "list") && v) {
      model_tissue = v;
    } else if (!strcmp(a, "--mesh") && !strcmp(cmd, "create") && v) {
      mesh = v;
    } else if (!strcmp(a, "--name") && !strcmp(cmd, "create") && v) {
      mesh_name = v;
    } else if (!strcmp(a, "--layers") && !strcmp(cmd, "create") && v) {
      layers_s = v;
    } else if (!strcmp(a, "--substeps") && !strcmp(cmd, "create")) {
      bad = parse_int(a, v, 1, 1000, &substeps);
    } else if (!strcmp(a, "--scale") && !strcmp(cmd, "create")) {
      bad = parse_num(a, v, 1e-6, 1000, &scale);
    } else if (!strcmp(a, "--leb") && !strcmp(cmd, "refine")) {
      leb = 1;
      i--; /* no value */
    } else if (!strcmp(a, "--triangles") && !strcmp(cmd, "refine") && v) {
      tris_s = v;
    } else if (!strcmp(a, "--ray") && !strcmp(cmd, "refine") && v) {
      ray_s = v;
    } else if (!strcmp(a, "--range") && !strcmp(cmd, "refine")) {
      bad = parse_num(a, v, 0, 1, &range);
    } else if (!strcmp(a, "--max-edge") && !strcmp(cmd, "refine")) {
      bad = parse_num(a, v, 0, 1, &max_edge);
    } else if (!strcmp(a, "--session") &&
               (!strcmp(cmd, "poke") || !strcmp(cmd, "watch") || !strcmp(cmd, "refine"))) {
      bad = parse_int(a, v, 1, 4294967295.0, &session);
    } else if (!strcmp(a, "--depth") && !strcmp(cmd, "poke")) {
      bad = parse_num(a, v, 0, 0.05, &depth);
    } else if (!strcmp(a, "--radius") && !strcmp(cmd, "poke")) {
      bad = parse_num(a, v, 0.0005, 0.05, &radius);
    } else if (!strcmp(a, "--friction") && !strcmp(cmd, "poke")) {
      int end = -1;
      if (!v || sscanf(v, "%lf,%lf%n", &mu[0], &mu[1], &end) != 2 || v[end] != '\0' ||
          !isfinite(mu[0]) || !isfinite(mu[1])) {
        fprintf(stderr, "tissuectl: --friction needs MUS,MUK (two numbers), got '%s'\n",
                v ? v : "");
        return 2;
      }
      have_mu = 1;
    } else if (!strcmp(a, "--seconds") && (!strcmp(cmd, "poke") || !strcmp(cmd, "watch"))) {
      bad = parse_num(a, v, 0.01, 86400, &seconds);
    } else if (!strcmp(a, "--frame-rate") && !strcmp(cmd, "watch")) {
      bad = parse_int(a, v, 1, 1000, &rate);
    } else {
      fprintf(stderr, "tissuectl: unknown or incomplete option '%s' for '%s' (see --help)\n", a,
              cmd);
      return 2;
    }
    if (bad) return 2;
    i++;
  }
  int is_poke = !strcmp(cmd, "poke"), is_watch = !strcmp(cmd, "watch");
  int is_refine = !strcmp(cmd, "refine");
  if (strcmp(cmd, "sessions") && strcmp(cmd, "create") && !is_poke && !is_watch && !verb &&
      !is_refine) {
    fprintf(stderr, "tissuectl: unknown command '%s' (see --help)\n", cmd);
    return 2;
  }
  if ((is_poke || is_watch || is_refine) && session < 0) {
    fprintf(stderr, "tissuectl: %s needs --session N\n", cmd);
    return 2;
  }
  if (substeps > 0 && mesh) {
    fprintf(stderr, "tissuectl: --substeps applies to create --tissue, not to a mesh upload\n");
    return 2;
  }
  if (is_poke && seconds < 0) seconds = 3;
  if (is_watch && seconds < 0) seconds = 0; /* until interrupted */

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  char err[512];
  tc_client *c =
      tc_connect_key(host, (int)port, "tissuectl", cred, (int)timeout, err, sizeof err);
  if (!c) return die("cannot connect to %s: %s", host, err);
  int rc;
  if (!strcmp(cmd, "sessions"))
    rc = cmd_sessions(c);
  else if (verb)
    rc = cmd_models(c, verb, verb_arg, model_tissue);
  else if (!strcmp(cmd, "create") && mesh)
    rc = cmd_create_mesh(c, mesh, scale, mesh_name, layers_s);
  else if (!strcmp(cmd, "create"))
    rc = cmd_create(c, tissue, (uint32_t)substeps);
  else if (is_refine)
    rc = cmd_refine(c, (uint32_t)session, leb, tris_s, ray_s, range, max_edge);
  else
    rc = cmd_frames(c, (uint32_t)session, is_poke, seconds, radius, depth, (uint32_t)rate,
                    have_mu ? mu : NULL);
  tc_close(c);
  return rc;
}
