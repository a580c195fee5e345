/*
 * training.c: the training job of a quasi-static session (see training.h).
 */
#include "training.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "log.h"
#include "server.h"
#include "shortcut.h"
#include "ts_storage.h"
#include "worker.h"

#define TS_TRAIN_MIN_SAMPLES 64 /* fewer cannot say much about three or more parameters */

typedef struct train_job {
  ts_job job;
  ts_server *server;
  uint32_t session_id;
  uint64_t rid;
  ts_learn_set *set; /* owned */
  ts_learn_kind kind;
  char tissue[64];
  char material[512];
  ts_learn_solve solve; /* the session's, recorded with the model */
  uint64_t intervals, unconverged; /* of the samples' intervals (ts_learn_set) */
  double worst_residual;
  double last_fraction; /* of the last progress report */
  /* results */
  int rc;
  char err[256];
  ts_learn_model model;
  double heldout_rmse, heldout_rel, heldout_max;
  uint64_t heldout_n;
  int64_t model_id;
} train_job;

typedef struct progress_job {
  ts_job job;
  ts_server *server;
  uint32_t session_id;
  uint64_t rid;
  double fraction, loss;
  ts_learn_kind kind;
} progress_job;

/* Keeps p as the latest report of se's training: the first of a training
 * (fraction below the previous report's, or after an end) starts afresh;
 * when the history is full the newest report takes the last place. */
static void keep_report(ts_session *se, const Tissued__V1__TrainingProgress *p) {
  uint32_t n = se->train_hist_n;
  if (n > 0 && (se->train_hist[n - 1].done || p->fraction < se->train_hist[n - 1].fraction)) n = 0;
  if (n == TS_TRAIN_HISTORY) n--;
  ts_train_report *r = &se->train_hist[n];
  r->fraction = p->fraction;
  r->loss = p->loss;
  r->heldout_rmse = p->heldout_rmse;
  r->heldout_rel = p->heldout_rel;
  r->samples = p->samples;
  r->iterations = p->iterations;
  r->model_id = p->model_id;
  r->intervals = p->intervals;
  r->unconverged = p->unconverged_intervals;
  r->worst_residual = p->worst_residual;
  r->model = p->model;
  r->done = p->done;
  if (p->done) snprintf(se->train_hist_error, sizeof se->train_hist_error, "%s", p->error ? p->error : "");
  se->train_hist_n = n + 1;
}

static void send_progress(ts_conn *c, uint64_t rid, const Tissued__V1__TrainingProgress *p) {
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS;
  env.training_progress = (Tissued__V1__TrainingProgress *)p;
  ts_send_envelope(c, &env);
}

void ts_training_replay(ts_session *se, ts_conn *c) {
  for (uint32_t i = 0; i < se->train_hist_n; i++) {
    const ts_train_report *r = &se->train_hist[i];
    Tissued__V1__TrainingProgress p = TISSUED__V1__TRAINING_PROGRESS__INIT;
    p.session_id = se->id;
    p.fraction = r->fraction;
    p.loss = r->loss;
    p.done = r->done;
    p.samples = r->samples;
    p.iterations = r->iterations;
    p.heldout_rmse = r->heldout_rmse;
    p.heldout_rel = r->heldout_rel;
    p.model_id = r->model_id;
    p.intervals = r->intervals;
    p.unconverged_intervals = r->unconverged;
    p.worst_residual = r->worst_residual;
    p.model = (char *)(r->model ? r->model : "");
    if (r->done && se->train_hist_error[0]) p.error = se->train_hist_error;
    send_progress(c, 0, &p);
  }
}

void ts_training_send(ts_session *se, const Tissued__V1__TrainingProgress *p) {
  keep_report(se, p);
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = se->train_rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS;
  env.training_progress = (Tissued__V1__TrainingProgress *)p;
  size_t len = tissued__v1__envelope__get_packed_size(&env);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return;
  tissued__v1__envelope__pack(&env, buf);
  for (ts_conn *c = se->clients; c; c = c->next_in_session) ts_conn_send(c, buf, len);
  free(buf);
}

static void progress_done(ts_job *jb) {
  progress_job *j = (progress_job *)jb;
  ts_session *se = ts_server_find_session(j->server, j->session_id);
  if (se && !se->ending && !j->server->shutting_down) {
    Tissued__V1__TrainingProgress p = TISSUED__V1__TRAINING_PROGRESS__INIT;
    p.session_id = j->session_id;
    p.fraction = j->fraction;
    p.loss = j->loss;
    p.model = (char *)ts_learn_kind_name(j->kind);
    ts_training_send(se, &p);
  }
  free(j);
}

/* Gradient descent's progress (worker thread): a report to the loop every
 * sixteenth of the way. */
static void on_progress(void *ud, double fraction, double loss) {
  train_job *j = ud;
  if (fraction < j->last_fraction + 1.0 / 16 && fraction < 1) return;
  j->last_fraction = fraction;
  progress_job *p = calloc(1, sizeof *p);
  if (!p) return; /* a lost report; the next one or the end follows */
  p->job.done = progress_done;
  p->server = j->server;
  p->session_id = j->session_id;
  p->rid = j->rid;
  p->fraction = fraction;
  p->loss = loss;
  p->kind = j->kind;
  ts_worker_post(&j->server->worker, &p->job);
}

static void train_work(ts_job *jb, ts_storage *st) {
  train_job *j = (train_job *)jb;
  ts_learn_set *all = j->set;
  /* the first four fifths train, the last fifth (the latest presses) is
   * held out: the error reported is on samples the model never saw */
  ts_learn_set train = *all, held = *all;
  train.n = train.cap = train.room = all->n - all->n / 5;
  held.s = all->s + train.n;
  held.n = held.cap = held.room = all->n - train.n;
  ts_learn_train_opts o = ts_learn_train_defaults();
  o.progress = on_progress;
  o.progress_ud = j;
  j->rc = ts_learn_train_gd(&train, j->kind, &o, &j->model);
  if (j->rc) {
    snprintf(j->err, sizeof j->err, "training failed: %s (the samples cannot determine theta)",
             ts_strerror(j->rc));
    return;
  }
  double e2 = 0, d2 = 0, emax = 0;
  for (uint32_t i = 0; i < held.n; i++) {
    const ts_learn_sample *s = &held.s[i];
    double x1[3];
    ts_learn_predict_sample(&j->model, s, x1);
    double e = 0, d = 0;
    for (int c = 0; c < 3; c++) {
      e += (x1[c] - s->x1[c]) * (x1[c] - s->x1[c]);
      d += (s->x1[c] - s->x0[c]) * (s->x1[c] - s->x0[c]);
    }
    e2 += e;
    d2 += d;
    emax = fmax(emax, sqrt(e));
  }
  j->heldout_n = held.n;
  j->heldout_rmse = held.n ? sqrt(e2 / held.n) : 0;
  j->heldout_rel = d2 > 0 ? sqrt(e2 / d2) : 0;
  j->heldout_max = emax;
  ts_tissue_rec tr;
  if (ts_storage_get_tissue(st, j->tissue, &tr)) {
    j->rc = TS_ESTORAGE;
    snprintf(j->err, sizeof j->err, "tissue '%s' is not in the catalog", j->tissue);
    return;
  }
  uint8_t blob[8 * TS_LEARN_MAX_PARAMS];
  size_t nb = ts_learn_theta_encode(&j->model, blob, sizeof blob);
  ts_model_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.tissue = tr.id;
  rec.material = j->material;
  rec.kind = ts_learn_kind_name(j->kind);
  rec.theta = blob;
  rec.theta_bytes = nb;
  rec.loss = j->model.loss;
  rec.samples = (int64_t)j->model.samples;
  rec.heldout_rmse = j->heldout_rmse;
  rec.heldout_max = j->heldout_max;
  rec.solve = ts_learn_solve_name(j->solve.kind);
  rec.refine_edge = j->solve.kind == TS_LEARN_SOLVE_REFINED ? j->solve.refine_edge : 0;
  ts_storage_tissue_free(&tr);
  j->model_id = ts_storage_put_model(st, &rec, NULL);
  if (j->model_id <= 0) {
    j->rc = TS_ESTORAGE;
    snprintf(j->err, sizeof j->err, "the model could not be stored: %s", ts_storage_errmsg(st));
  }
}

static void train_done(ts_job *jb) {
  train_job *j = (train_job *)jb;
  ts_session *se = ts_server_find_session(j->server, j->session_id);
  if (se && !se->ending && !j->server->shutting_down) {
    se->training = 0;
    Tissued__V1__TrainingProgress p = TISSUED__V1__TRAINING_PROGRESS__INIT;
    p.session_id = se->id;
    p.done = 1;
    p.model = (char *)ts_learn_kind_name(j->kind);
    if (j->rc) {
      p.error = j->err;
      ts_log_warn("session %u: %s", se->id, j->err);
    } else {
      p.fraction = 1;
      p.loss = j->model.loss;
      p.samples = j->model.samples;
      p.iterations = j->model.iterations;
      p.heldout_rmse = j->heldout_rmse;
      p.heldout_rel = j->heldout_rel;
      p.model_id = j->model_id;
      p.intervals = j->intervals;
      p.unconverged_intervals = j->unconverged;
      p.worst_residual = j->worst_residual;
      uv_mutex_lock(&se->mbox.lock);
      se->mbox.model = j->model;
      se->mbox.model_ready = 1;
      uv_mutex_unlock(&se->mbox.lock);
      se->has_model = 1;
      ts_log_info("session %u: %s model %lld trained on %llu samples, held-out RMS %.3g mm "
                  "(%.0f %% of the displacement); it answers from now on",
                  se->id, p.model, (long long)j->model_id, (unsigned long long)p.samples,
                  j->heldout_rmse * 1e3, j->heldout_rel * 100);
    }
    ts_training_send(se, &p);
  }
  ts_learn_set_free(j->set);
  free(j);
}

void ts_training_start(ts_session *se, ts_learn_set *set, int automatic) {
  ts_server *s = se->server;
  ts_learn_kind kind = automatic ? TS_LEARN_METHOD : (ts_learn_kind)se->train_kind;
  if (automatic) {
    if (se->training) { /* a request is already under way */
      ts_learn_set_free(set);
      return;
    }
    se->training = 1;
    se->train_rid = 0;
  }
  if (set->n < TS_TRAIN_MIN_SAMPLES) {
    se->training = 0;
    char why[160];
    snprintf(why, sizeof why,
             "%u samples recorded; training needs at least %d: press the tissue with a tool first",
             set->n, TS_TRAIN_MIN_SAMPLES);
    Tissued__V1__TrainingProgress p = TISSUED__V1__TRAINING_PROGRESS__INIT;
    p.session_id = se->id;
    p.done = 1;
    p.samples = set->n;
    p.error = why;
    p.model = (char *)ts_learn_kind_name(kind);
    ts_training_send(se, &p);
    ts_learn_set_free(set);
    return;
  }
  train_job *j = calloc(1, sizeof *j);
  if (!j) {
    se->training = 0;
    ts_learn_set_free(set);
    return;
  }
  j->job.work = train_work;
  j->job.done = train_done;
  j->server = s;
  j->session_id = se->id;
  j->rid = se->train_rid;
  j->set = set;
  j->kind = kind;
  snprintf(j->tissue, sizeof j->tissue, "%s", se->tissue_name);
  snprintf(j->material, sizeof j->material, "%s", se->material);
  j->solve = se->sim.shortcut->solve;
  j->intervals = set->intervals;
  j->unconverged = set->unconverged;
  j->worst_residual = set->worst_residual;
  ts_log_info("session %u: training the %s model on %u samples%s", se->id,
              ts_learn_kind_name(kind), set->n, automatic ? " (train-after-samples)" : "");
  ts_worker_submit(&s->worker, &j->job);
}
