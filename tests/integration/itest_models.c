/*
 * itest_models.c: stored learned models over the protocol (issue 6,
 * "Persistence"), against a real daemon and its SQLite file:
 *   - a quasi-static session's presses are trained into a model, which
 *     ListModels shows with the figures TrainingProgress gave;
 *   - ExportModel gives the JSON document; DeleteModel removes the model
 *     (the list no longer shows it, a second delete and an export are
 *     TS_ENOMODEL); ImportModel of the exported document stores it again with
 *     the same theta (the two documents' theta fields are the same text, and
 *     they are written with 17 significant digits, so the same doubles);
 *     importing it once more stores nothing and answers with that model,
 *     and so does `tissuetool models import` of the same document on the
 *     daemon's file;
 *   - UseShortcut.model_id installs it in a new quasi-static session that had
 *     none (before: UseShortcut learned is refused; after: SessionInfo says
 *     learned and frames carry the learned flag);
 *   - a "spread" model trained on the same samples is stored under its own
 *     kind beside it and installs by id too;
 *   - a session of the same tissue with other layers (another material
 *     identity) refuses it with TS_EMISMATCH naming both identities, as do a
 *     session of another tissue (the shared liver.obj uploaded, quasi-static)
 *     naming both tissues, and a
 *     session of another solve (a model said to have learned the plain solve
 *     in the default, refined, daemon); the offline tool (tissuetool models
 *     import on the daemon's file) builds the uploaded liver as the daemon
 *     does: it stores a liver model of the material the daemon's liver
 *     session has and refuses one of the patch's, naming both; an
 *     unknown id is TS_ENOMODEL;
 *   - a model stored before models recorded their solve (a row written with
 *     sqlite as schema-2 code left it: solve 'unknown') is listed, exported
 *     and deleted, but a new session does not start from it and
 *     UseShortcut refuses it with TS_EMISMATCH naming the model and saying
 *     to retrain or re-import it;
 *   - without the server key every model request is TS_EAUTH; a garbage
 *     document, one for an unknown tissue and one with an unknown kind get
 *     clear errors, and the daemon keeps answering.
 * Presses follow the frames' simulated time (as itest_shortcut.c), so a slow
 * machine runs them slower, not differently.
 */
#include "ts_check.h"
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "binrun.h"
#include "daemon_proc.h"
#include "rawclient.h"
#include "test_util.h"
#include "tissueclient.h"

#define REPLY_MS 60000
typedef Tissued__V1__Envelope Envelope;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the controller saw. */
typedef struct seen {
  double sim_time;
  uint32_t flags; /* of the last frame */
  int done;       /* a done TrainingProgress arrived */
  int64_t model_id;
  uint64_t samples;
  double heldout_rmse;
  char error[256];
  char model[16]; /* kind of the done TrainingProgress */
} seen;

static void handle(seen *s, Envelope *e) {
  if (e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) {
    s->sim_time = e->frame->sim_time;
    s->flags = e->frame->flags;
  } else if (e->body_case == TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS &&
             e->training_progress->done) {
    const Tissued__V1__TrainingProgress *p = e->training_progress;
    s->done = 1;
    s->model_id = p->model_id;
    s->samples = p->samples;
    s->heldout_rmse = p->heldout_rmse;
    snprintf(s->error, sizeof s->error, "%s", p->error ? p->error : "");
    snprintf(s->model, sizeof s->model, "%s", p->model ? p->model : "");
  }
}

static void pump(rc_conn *c, seen *s, int ms) {
  long long end = now_ms() + ms;
  while (now_ms() < end) {
    Envelope *e = rc_recv(c, 20);
    if (!e) continue;
    handle(s, e);
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
}

/* n presses of the sphere (r = 5 mm) at x over +-8 mm, from 6 mm above the
 * surface to 3 mm into it and back, 0.6 s of simulated time each. */
static void presses(rc_conn *c, seen *s, uint32_t tool, int n) {
  for (int k = 0; k < n; k++) {
    double x = n > 1 ? -0.008 + 0.016 * k / (n - 1) : 0;
    pump(c, s, 50);
    double t0 = s->sim_time;
    long long deadline = now_ms() + 60000;
    for (;;) {
      double u = (s->sim_time - t0) / 0.6;
      if (u >= 1) break;
      ck_assert_msg(now_ms() < deadline, "simulated time stuck at %g s", s->sim_time);
      double depth = u < 0.5 ? u * 2 : (1 - u) * 2;
      ck_assert_int_eq(rc_pose(c, tool, x, 0.011 - 0.009 * depth, 0), 0);
      Envelope *e = rc_recv(c, 20);
      if (e) {
        handle(s, e);
        tissued__v1__envelope__free_unpacked(e, NULL);
      }
    }
  }
  ck_assert_int_eq(rc_pose(c, tool, 0, 0.03, 0), 0);
}

/* Sends env and returns its reply (frames and progress on the way go to s). */
static Envelope *request(rc_conn *c, Envelope *env, seen *s) {
  env->request_id = ++c->next_rid;
  ck_assert_int_eq(rc_send(c, env), 0);
  long long end = now_ms() + REPLY_MS;
  while (now_ms() < end) {
    Envelope *e = rc_recv(c, 50);
    if (!e) continue;
    if (e->request_id == env->request_id && e->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME &&
        e->body_case != TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS)
      return e;
    handle(s, e);
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
  ck_abort_msg("no reply to request body %d within %d ms", (int)env->body_case, REPLY_MS);
  return NULL;
}

/* 0 for an Ack, else the negative code of the Error (its message to msg). */
static int ack_or_error(Envelope *r, char *msg, size_t cap) {
  int rc = r->body_case == TISSUED__V1__ENVELOPE__BODY_ACK ? 0 : -1000;
  if (r->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
    rc = -(int)r->error->code;
    if (msg) snprintf(msg, cap, "%s", r->error->message ? r->error->message : "");
  }
  tissued__v1__envelope__free_unpacked(r, NULL);
  return rc;
}

/* TrainShortcut of a model kind (NULL: the default, the method's). */
static int train(rc_conn *c, uint32_t sid, const char *kind, seen *s) {
  Tissued__V1__TrainShortcut m = TISSUED__V1__TRAIN_SHORTCUT__INIT;
  m.session_id = sid;
  if (kind) m.model = (char *)kind;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TRAIN_SHORTCUT;
  env.train_shortcut = &m;
  return ack_or_error(request(c, &env, s), NULL, 0);
}

static int use_model(rc_conn *c, uint32_t sid, int learned, int64_t model_id, seen *s,
                     char *msg, size_t cap) {
  Tissued__V1__UseShortcut m = TISSUED__V1__USE_SHORTCUT__INIT;
  m.session_id = sid;
  m.learned = learned;
  m.model_id = model_id;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_USE_SHORTCUT;
  env.use_shortcut = &m;
  return ack_or_error(request(c, &env, s), msg, cap);
}

/* A quasi-static session of the built-in patch; with thickness > 0 its three
 * layers all have that thickness (another material identity). */
static uint32_t create_qs(rc_conn *c, seen *s, double thickness) {
  Tissued__V1__LayerSpec specs[3];
  Tissued__V1__LayerSpec *ptrs[3];
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = (char *)"stomach-patch";
  m.solver = TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC;
  if (thickness > 0) {
    for (int i = 0; i < 3; i++) {
      tissued__v1__layer_spec__init(&specs[i]);
      specs[i].thickness = (float)thickness;
      ptrs[i] = &specs[i];
    }
    m.n_layers = 3;
    m.layers = ptrs;
  }
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  env.create_session = &m;
  Envelope *r = request(c, &env, s);
  ck_assert_msg(r->body_case == TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, "create: %s",
                r->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR ? r->error->message : "?");
  uint32_t sid = r->session_created->session_id;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return sid;
}

/* A quasi-static session of the shared liver.obj uploaded (10 mm per unit,
 * the daemon's default layers): another tissue than the built-in patch, about
 * 560 nodes, so cheap to create. */
static uint32_t create_qs_liver(rc_conn *c, seen *s) {
  char path[1200];
  ts_dproc_shared_mesh("liver.obj", path, sizeof path);
  size_t len = 0;
  uint8_t *obj = tu_read_file(path, &len);
  Tissued__V1__MeshUpload up = TISSUED__V1__MESH_UPLOAD__INIT;
  up.format = TISSUED__V1__MESH_UPLOAD__FORMAT__OBJ;
  up.data.data = obj;
  up.data.len = (size_t)len;
  up.scale = 0.01f;
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_MESH;
  m.mesh = &up;
  m.solver = TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  env.create_session = &m;
  Envelope *r = request(c, &env, s);
  free(obj);
  ck_assert_msg(r->body_case == TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, "create liver: %s",
                r->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR ? r->error->message : "?");
  uint32_t sid = r->session_created->session_id;
  tissued__v1__envelope__free_unpacked(r, NULL);
  return sid;
}

/* SessionInfo.learned of sid. */
static int learned_of(rc_conn *c, uint32_t sid, seen *s) {
  Tissued__V1__ListSessions m = TISSUED__V1__LIST_SESSIONS__INIT;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_SESSIONS;
  env.list_sessions = &m;
  Envelope *r = request(c, &env, s);
  ck_assert_int_eq(r->body_case, TISSUED__V1__ENVELOPE__BODY_SESSION_LIST);
  int learned = -1;
  for (size_t i = 0; i < r->session_list->n_sessions; i++)
    if (r->session_list->sessions[i]->session_id == sid)
      learned = r->session_list->sessions[i]->learned;
  tissued__v1__envelope__free_unpacked(r, NULL);
  ck_assert_int_ge(learned, 0);
  return learned;
}

/* The text of the document's "theta" array without white space, in out. */
static void theta_text(const char *doc, char *out, size_t cap) {
  const char *p = strstr(doc, "\"theta\"");
  ck_assert_msg(p != NULL, "no theta in %s", doc);
  p = strchr(p, '[');
  ck_assert(p != NULL);
  size_t n = 0;
  for (; *p && *p != ']' && n + 2 < cap; p++)
    if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') out[n++] = *p;
  ck_assert_int_eq(*p, ']');
  out[n++] = ']';
  out[n] = 0;
}

/* Replaces the first `from` in doc by `to` (into out). */
static void replace(const char *doc, const char *from, const char *to, char *out, size_t cap) {
  const char *p = strstr(doc, from);
  ck_assert(p != NULL);
  snprintf(out, cap, "%.*s%s%s", (int)(p - doc), doc, to, p + strlen(from));
}

/* doc (an exported model) said to have learned the plain solve: "refined"
 * becomes "plain" and refine_edge 0 (malloc'd, or NULL). */
static char *as_plain(const char *doc) {
  const char *r = strstr(doc, "\"refined\"");
  const char *e = strstr(doc, "\"refine_edge\"");
  if (!r || !e || e < r) return NULL;
  const char *colon = strchr(e, ':');
  if (!colon) return NULL;
  const char *end = colon + 1 + strcspn(colon + 1, ",}");
  size_t n = strlen(doc) + 16;
  char *o = malloc(n);
  if (!o) return NULL;
  snprintf(o, n, "%.*s\"plain\"%.*s: 0%s", (int)(r - doc), doc, (int)(colon - (r + 9)), r + 9,
           end);
  return o;
}

START_TEST(test_models_over_the_protocol) {
  char dir[] = "/tmp/tissued-models-XXXXXX";
  ck_assert(mkdtemp(dir) != NULL);
  char data[300];
  snprintf(data, sizeof data, "%s/data", dir);
  const char *args[] = {"--data-dir", data, "--train-after-samples", "0", "--physics-threads",
                        "1", NULL};
  ts_dproc d;
  char err[512];
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  rc_conn c;
  seen s;
  memset(&s, 0, sizeof s);
  ck_assert_int_eq(rc_tcp(&c, d.tcp_port), 0);
  ck_assert_int_eq(rc_hello(&c, REPLY_MS), 0);
  tc_client *k = tc_connect_key("127.0.0.1", d.tcp_port, "itest-models", TS_DPROC_KEY, 0, err,
                                sizeof err);
  ck_assert_msg(k != NULL, "%s", err);
  tc_set_timeout(k, REPLY_MS);
  tc_model_info *list = NULL;
  size_t n = 9;
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 0);
  free(list);

  /* train a model in a quasi-static session */
  uint32_t sid = create_qs(&c, &s, 0), tool = 0;
  ck_assert_int_eq(rc_join(&c, sid, 1, 0.005, 200, &tool, REPLY_MS), 0);
  presses(&c, &s, tool, 2);
  ck_assert_int_eq(train(&c, sid, NULL, &s), 0);
  long long deadline = now_ms() + 60000;
  while (!s.done && now_ms() < deadline) pump(&c, &s, 50);
  ck_assert_msg(s.done && !s.error[0], "training: done %d, '%s'", s.done, s.error);
  ck_assert_int_gt(s.model_id, 0);
  const int64_t trained = s.model_id;
  printf("models: trained model %lld on %llu samples, held-out RMS %.4f mm\n", (long long)trained,
         (unsigned long long)s.samples, s.heldout_rmse * 1e3);

  /* listed with the figures training reported (stored doubles: exact) */
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(list[0].model_id, trained);
  ck_assert_str_eq(list[0].tissue, "stomach-patch");
  ck_assert_str_eq(list[0].kind, "method");
  ck_assert_int_eq(list[0].version, 1);
  ck_assert_uint_eq(list[0].samples, s.samples);
  ck_assert(list[0].heldout_rmse == s.heldout_rmse);
  ck_assert(isfinite(list[0].loss) && list[0].loss >= 0);
  ck_assert(strstr(list[0].material, "qs:E=") != NULL);
  char material[512];
  snprintf(material, sizeof material, "%s", list[0].material);
  free(list);
  ck_assert_int_eq(tc_list_models(k, "stomach-patch", &list, &n), 0);
  ck_assert_uint_eq(n, 1);
  free(list);
  ck_assert_int_eq(tc_list_models(k, "no-such-organ", &list, &n), TS_ENOTISSUE);

  /* export, delete */
  char *doc1 = NULL;
  tc_model_info info;
  ck_assert_int_eq(tc_export_model(k, trained, &doc1, &info), 0);
  ck_assert_int_eq(info.model_id, trained);
  ck_assert_str_eq(info.material, material);
  ck_assert(strstr(doc1, "\"tissued-learned-model\"") != NULL);
  {
    /* the offline tool builds the built-in patch as a default daemon does
     * (--patch-resolution 17): the daemon's patch model is its own material
     * there, so the import is taken; the document is the stored model's
     * own, so the tool stores nothing and names that model, as ImportModel
     * does (model_doc.h, ts_model_doc_find_stored) */
    static ts_binrun pr; /* large buffers */
    char pdb[400], pdoc[400];
    snprintf(pdb, sizeof pdb, "%s/tissued.sqlite", data);
    snprintf(pdoc, sizeof pdoc, "%s/patch.json", dir);
    FILE *pf = fopen(pdoc, "w");
    ck_assert_ptr_nonnull(pf);
    fputs(doc1, pf);
    fclose(pf);
    const char *tbin = getenv("TISSUETOOL_BIN");
    ck_assert_msg(tbin && *tbin, "TISSUETOOL_BIN is not set");
    const char *pargs[] = {"models", "--db", pdb, "import", pdoc, NULL};
    ts_binrun_v(&pr, tbin, 120000, pargs);
    ck_assert_msg(pr.status == 0, "tissuetool import of the daemon's patch model: %s", pr.err);
    double pid = ts_binrun_jnum(pr.out, "id");
    ck_assert_msg((int64_t)pid == trained, "tissuetool import: %s", pr.out);
    ck_assert_msg(strstr(pr.err, "stored already"), "%s", pr.err);
    ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
    ck_assert_uint_eq(n, 1);
    free(list);
    /* a patch of another resolution is another material: refused */
    const char *rargs[] = {"models", "--db", pdb, "--patch-resolution", "24", "import", pdoc, NULL};
    ts_binrun_v(&pr, tbin, 120000, rargs);
    ck_assert_int_eq(pr.status, 1);
    ck_assert_msg(strstr(pr.err, "another material of stomach-patch"), "%s", pr.err);
  }
  char theta1[1024], theta2[1024];
  theta_text(doc1, theta1, sizeof theta1);
  printf("models: exported theta %s\n", theta1);
  ck_assert_int_eq(tc_delete_model(k, trained), 0);
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 0);
  free(list);
  ck_assert_int_eq(tc_delete_model(k, trained), TS_ENOMODEL);
  char *none = NULL;
  ck_assert_int_eq(tc_export_model(k, trained, &none, NULL), TS_ENOMODEL);
  ck_assert(none == NULL);

  /* the training session keeps answering with its own copy */
  pump(&c, &s, 200);
  ck_assert_uint_eq(s.flags & 4u, 4u);
  ck_assert_int_eq(learned_of(&c, sid, &s), 1);

  /* a new session now starts without a model: learned is refused */
  uint32_t sid2 = create_qs(&c, &s, 0);
  ck_assert_int_eq(rc_join(&c, sid2, 1, 0.005, 200, &tool, REPLY_MS), 0);
  ck_assert_int_eq(use_model(&c, sid2, 1, 0, &s, NULL, 0), TS_EINVAL);
  ck_assert_int_eq(learned_of(&c, sid2, &s), 0);

  /* import: stored again with the same theta; a second import adds nothing */
  ck_assert_int_eq(tc_import_model(k, doc1, &info), 0);
  const int64_t imported = info.model_id;
  ck_assert_int_gt(imported, 0);
  ck_assert_str_eq(info.material, material);
  ck_assert_uint_eq(info.samples, s.samples);
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(list[0].model_id, imported);
  free(list);
  char *doc2 = NULL;
  ck_assert_int_eq(tc_export_model(k, imported, &doc2, NULL), 0);
  theta_text(doc2, theta2, sizeof theta2);
  ck_assert_str_eq(theta1, theta2);
  ck_assert_int_eq(tc_import_model(k, doc2, &info), 0);
  ck_assert_int_eq(info.model_id, imported);
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 1);
  free(list);

  /* installed by id in the new session */
  ck_assert_int_eq(use_model(&c, sid2, 1, 99999, &s, NULL, 0), TS_ENOMODEL);
  ck_assert_int_eq(use_model(&c, sid2, 1, imported, &s, NULL, 0), 0);
  pump(&c, &s, 300);
  ck_assert_int_eq(learned_of(&c, sid2, &s), 1);
  ck_assert_uint_eq(s.flags & 4u, 4u);
  ck_assert_int_eq(use_model(&c, sid2, 0, 0, &s, NULL, 0), 0); /* and back to the solve */
  pump(&c, &s, 300);
  ck_assert_int_eq(learned_of(&c, sid2, &s), 0);

  /* the model records the solve it learned (the daemon's default: refined
   * to the mean edge); the same theta said to have learned the plain solve
   * is refused by this session, with both solves named */
  ck_assert_msg(strstr(doc1, "\"refined\"") != NULL, "%s", doc1);
  char *plain_doc = as_plain(doc1);
  ck_assert_ptr_nonnull(plain_doc);
  ck_assert_int_eq(tc_import_model(k, plain_doc, &info), 0);
  const int64_t plain_id = info.model_id;
  ck_assert(plain_id > 0 && plain_id != imported);
  char smsg[1500] = "";
  ck_assert_int_eq(use_model(&c, sid2, 1, plain_id, &s, smsg, sizeof smsg), TS_EMISMATCH);
  printf("models: TS_EMISMATCH (solve): %s\n", smsg);
  ck_assert_msg(strstr(smsg, "plain") && strstr(smsg, "refined (edge"), "'%s'", smsg);
  ck_assert_int_eq(tc_delete_model(k, plain_id), 0);
  free(plain_doc);

  /* refused by a session of other layers (2 mm each): another material */
  uint32_t sid3 = create_qs(&c, &s, 0.002);
  ck_assert_int_eq(rc_join(&c, sid3, 1, 0.005, 200, &tool, REPLY_MS), 0);
  char msg[1500] = "";
  ck_assert_int_eq(use_model(&c, sid3, 1, imported, &s, msg, sizeof msg), TS_EMISMATCH);
  printf("models: TS_EMISMATCH: %s\n", msg);
  ck_assert_msg(strstr(msg, material) != NULL, "'%s'", msg);
  ck_assert_msg(strstr(msg, ":0.002,") != NULL, "'%s'", msg); /* the session's layers */
  ck_assert_int_eq(learned_of(&c, sid3, &s), 0);

  /* refused by a quasi-static session of another tissue (an uploaded liver) */
  uint32_t sid4 = create_qs_liver(&c, &s);
  ck_assert_int_eq(rc_join(&c, sid4, 1, 0.005, 200, &tool, REPLY_MS), 0);
  char tmsg[1500] = "";
  ck_assert_int_eq(use_model(&c, sid4, 1, imported, &s, tmsg, sizeof tmsg), TS_EMISMATCH);
  printf("models: TS_EMISMATCH (tissue): %s\n", tmsg);
  ck_assert_msg(strstr(tmsg, "the model is for tissue 'stomach-patch'") != NULL, "'%s'", tmsg);
  ck_assert_msg(strstr(tmsg, "is tissue '") && !strstr(tmsg, "is tissue 'stomach-patch'"), "'%s'",
                tmsg);
  ck_assert_int_eq(learned_of(&c, sid4, &s), 0);
  /* the liver's material identity differs too (its springs give another E),
   * so the refusal above would stand on the material alone; the tissue check
   * itself: the patch model's document said to belong to the liver's tissue
   * (its material the patch's, which ImportModel does not check) is refused
   * by the patch session, whose material and solve it matches */
  const char *tn = strstr(tmsg, "is tissue '");
  ck_assert_ptr_nonnull(tn);
  tn += strlen("is tissue '");
  char liver_tissue[64], quoted[80];
  snprintf(liver_tissue, sizeof liver_tissue, "%.*s", (int)strcspn(tn, "'"), tn);
  snprintf(quoted, sizeof quoted, "\"%s\"", liver_tissue);
  size_t lcap = strlen(doc1) + 128;
  char *ldoc = malloc(lcap);
  ck_assert_ptr_nonnull(ldoc);
  replace(doc1, "\"stomach-patch\"", quoted, ldoc, lcap);
  /* the offline tool on the daemon's file builds the catalogued liver as
   * the daemon did (tissue_catalog.h): a liver model of the daemon's liver
   * session's material is stored, one of the patch's refused naming both */
  const char *tm = strstr(tn, "material '");
  ck_assert_ptr_nonnull(tm);
  tm += strlen("material '");
  char liver_mat[600], qmat[620], qlmat[620];
  snprintf(liver_mat, sizeof liver_mat, "%.*s", (int)(strrchr(tm, '\'') - tm), tm);
  ck_assert_str_ne(liver_mat, material);
  snprintf(qmat, sizeof qmat, "\"%s\"", material);
  snprintf(qlmat, sizeof qlmat, "\"%s\"", liver_mat);
  char *tdoc = malloc(lcap + sizeof qlmat);
  ck_assert_ptr_nonnull(tdoc);
  replace(ldoc, qmat, qlmat, tdoc, lcap + sizeof qlmat);
  char dbfile_t[400], docfile[400];
  snprintf(dbfile_t, sizeof dbfile_t, "%s/tissued.sqlite", data);
  const char *toolbin = getenv("TISSUETOOL_BIN");
  ck_assert_msg(toolbin && *toolbin, "TISSUETOOL_BIN is not set");
  static ts_binrun tr; /* large buffers */
  for (int pass = 0; pass < 2; pass++) {
    snprintf(docfile, sizeof docfile, "%s/liver-%d.json", dir, pass);
    FILE *df = fopen(docfile, "w");
    ck_assert_ptr_nonnull(df);
    fputs(pass == 0 ? tdoc : ldoc, df);
    fclose(df);
    const char *targs[] = {"models", "--db", dbfile_t, "import", docfile, NULL};
    ts_binrun_v(&tr, toolbin, 120000, targs);
    if (pass == 0) { /* the daemon's liver material: stored */
      ck_assert_msg(tr.status == 0, "tissuetool import: %s", tr.err);
      double tid = ts_binrun_jnum(tr.out, "id");
      ck_assert(tid > 0);
      printf("models: tissuetool stored a %s model of the daemon's liver material (%lld)\n",
             liver_tissue, (long long)tid);
      ck_assert_int_eq(tc_delete_model(k, (int64_t)tid), 0);
    } else { /* the patch's material for the liver: refused */
      ck_assert_int_eq(tr.status, 1);
      printf("models: tissuetool refusal: %s", tr.err);
      ck_assert_msg(strstr(tr.err, "another material of") && strstr(tr.err, liver_tissue) &&
                        strstr(tr.err, material) && strstr(tr.err, liver_mat),
                    "%s", tr.err);
    }
  }
  free(tdoc);
  ck_assert_msg(tc_import_model(k, ldoc, &info) == 0, "%s", tc_last_error(k));
  const int64_t liver_id = info.model_id;
  ck_assert(liver_id > 0 && liver_id != imported);
  ck_assert_str_eq(info.material, material);
  ck_assert_int_eq(rc_join(&c, sid2, 1, 0.005, 200, &tool, REPLY_MS), 0);
  ck_assert_int_eq(use_model(&c, sid2, 1, liver_id, &s, tmsg, sizeof tmsg), TS_EMISMATCH);
  printf("models: TS_EMISMATCH (tissue, same material): %s\n", tmsg);
  char want[128];
  snprintf(want, sizeof want, "the model is for tissue '%s'", liver_tissue);
  ck_assert_msg(strstr(tmsg, want) && strstr(tmsg, "is tissue 'stomach-patch'"), "'%s'", tmsg);
  ck_assert_int_eq(learned_of(&c, sid2, &s), 0);
  ck_assert_int_eq(tc_delete_model(k, liver_id), 0);
  free(ldoc);

  /* the spread model (ts_learn.h) on the first session's samples: stored
   * under its own kind, beside the method's, and installed by id */
  const double method_rmse = s.heldout_rmse;
  ck_assert_int_eq(rc_join(&c, sid, 1, 0.005, 200, &tool, REPLY_MS), 0);
  s.done = 0; /* the join replays the method's training report: wait for the spread one */
  s.model[0] = 0;
  ck_assert_int_eq(train(&c, sid, "spread", &s), 0);
  deadline = now_ms() + 60000;
  while (!(s.done && strcmp(s.model, "spread") == 0) && now_ms() < deadline) pump(&c, &s, 50);
  ck_assert_msg(s.done && !s.error[0], "spread training: done %d, '%s'", s.done, s.error);
  const int64_t spread = s.model_id;
  ck_assert(spread > 0 && spread != imported);
  printf("models: spread model %lld, held-out RMS %.4f mm (the method's %.4f mm)\n",
         (long long)spread, s.heldout_rmse * 1e3, method_rmse * 1e3);
  /* measured 0.0013 mm against 0.043 mm (test_learn.c states the
   * figures on held-out presses); asserted at a quarter */
  ck_assert(isfinite(s.heldout_rmse) && s.heldout_rmse > 0);
  ck_assert(s.heldout_rmse < method_rmse / 4);
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 2);
  int found = 0;
  for (size_t i = 0; i < n; i++)
    if (list[i].model_id == spread) {
      found = 1;
      ck_assert_str_eq(list[i].kind, "spread");
      ck_assert_int_eq(list[i].version, 1);
      ck_assert(list[i].heldout_rmse == s.heldout_rmse);
    }
  ck_assert(found);
  free(list);
  ck_assert_int_eq(rc_join(&c, sid2, 1, 0.005, 200, &tool, REPLY_MS), 0);
  ck_assert_int_eq(use_model(&c, sid2, 1, spread, &s, NULL, 0), 0);
  pump(&c, &s, 300);
  ck_assert_int_eq(learned_of(&c, sid2, &s), 1);
  ck_assert_uint_eq(s.flags & 4u, 4u);
  ck_assert_int_eq(use_model(&c, sid2, 0, 0, &s, NULL, 0), 0);

  /* without the key */
  tc_client *nk = tc_connect_key("127.0.0.1", d.tcp_port, "itest-models-nokey", NULL, 0, err,
                                 sizeof err);
  ck_assert_msg(nk != NULL, "%s", err);
  ck_assert_int_eq(tc_list_models(nk, NULL, &list, &n), TS_EAUTH);
  ck_assert_int_eq(tc_export_model(nk, imported, &none, NULL), TS_EAUTH);
  ck_assert_int_eq(tc_import_model(nk, doc1, NULL), TS_EAUTH);
  ck_assert_int_eq(tc_delete_model(nk, imported), TS_EAUTH);
  tc_close(nk);

  /* bad documents */
  ck_assert_int_eq(tc_import_model(k, "{\"format\": [1, 2", NULL), TS_EINVAL);
  printf("models: garbage: %s\n", tc_last_error(k));
  ck_assert_msg(strstr(tc_last_error(k), "not JSON"), "%s", tc_last_error(k));
  ck_assert_int_eq(tc_import_model(k, "", NULL), TS_EINVAL);
  size_t cap = strlen(doc1) + 64;
  char *bad = malloc(cap);
  ck_assert(bad != NULL);
  replace(doc1, "\"stomach-patch\"", "\"no-such-organ\"", bad, cap);
  ck_assert_int_eq(tc_import_model(k, bad, NULL), TS_ENOTISSUE);
  printf("models: unknown tissue: %s\n", tc_last_error(k));
  replace(doc1, "\"method\"", "\"cubic\"", bad, cap);
  ck_assert_int_eq(tc_import_model(k, bad, NULL), TS_EINVAL);
  ck_assert_msg(strstr(tc_last_error(k), "cubic"), "%s", tc_last_error(k));
  replace(doc1, "\"theta\":", "\"theta\": [1, 2], \"x\":", bad, cap);
  ck_assert_int_eq(tc_import_model(k, bad, NULL), TS_EINVAL);
  printf("models: two parameters: %s\n", tc_last_error(k));
  free(bad);
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 2); /* nothing stored by any of them */
  free(list);
  uint64_t rtt;
  ck_assert_int_eq(tc_ping(k, &rtt), 0);
  ck_assert(ts_dproc_alive(&d));

  /* a model as code before schema 3 stored it: the imported model's row
   * written again, next version, without the solve columns (they take
   * their migration defaults, 'unknown' and 0), straight into the daemon's
   * file; then the models that record their solve are deleted */
  char dbfile[400];
  snprintf(dbfile, sizeof dbfile, "%s/tissued.sqlite", data);
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(dbfile, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  char sql[600];
  snprintf(sql, sizeof sql,
           "INSERT INTO learned_models (tissue, material, kind, version, theta, loss, samples, "
           "heldout_rmse, heldout_max) SELECT tissue, material, kind, version + 1, theta, loss, "
           "samples, heldout_rmse, heldout_max FROM learned_models WHERE id = %lld",
           (long long)imported);
  char *sqlerr = NULL;
  ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &sqlerr) == SQLITE_OK, "%s", sqlerr);
  ck_assert_int_eq(sqlite3_changes(db), 1);
  const int64_t legacy = sqlite3_last_insert_rowid(db);
  sqlite3_close(db);
  ck_assert_int_eq(tc_delete_model(k, imported), 0);
  ck_assert_int_eq(tc_delete_model(k, spread), 0);
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0); /* listed */
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(list[0].model_id, legacy);
  ck_assert_str_eq(list[0].material, material);
  free(list);
  char *ldoc2 = NULL; /* exported, saying its solve is unknown */
  ck_assert_int_eq(tc_export_model(k, legacy, &ldoc2, NULL), 0);
  ck_assert_msg(strstr(ldoc2, "\"unknown\"") != NULL, "%s", ldoc2);
  free(ldoc2);
  /* a new session of its tissue, material and kind does not start from it
   * (it did before: an unknown solve matched any) */
  uint32_t sid5 = create_qs(&c, &s, 0);
  ck_assert_int_eq(rc_join(&c, sid5, 1, 0.005, 200, &tool, REPLY_MS), 0);
  ck_assert_int_eq(learned_of(&c, sid5, &s), 0);
  char lmsg[1500] = "";
  ck_assert_int_eq(use_model(&c, sid5, 1, legacy, &s, lmsg, sizeof lmsg), TS_EMISMATCH);
  printf("models: TS_EMISMATCH (unknown solve): %s\n", lmsg);
  char lwant[64];
  snprintf(lwant, sizeof lwant, "model %lld ", (long long)legacy);
  ck_assert_msg(strstr(lmsg, lwant) && strstr(lmsg, "retrain") && strstr(lmsg, "re-import"),
                "'%s'", lmsg);
  ck_assert_int_eq(learned_of(&c, sid5, &s), 0);
  ck_assert_int_eq(tc_delete_model(k, legacy), 0); /* deleted */
  ck_assert_int_eq(tc_list_models(k, NULL, &list, &n), 0);
  ck_assert_uint_eq(n, 0);
  free(list);

  free(doc1);
  free(doc2);
  tc_close(k);
  rc_close(&c);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("models");
  TCase *tc = tcase_create("protocol");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_models_over_the_protocol);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
