/*
 * itest_killtrain.c: kill -9 while the DAEMON trains and stores a learned
 * model (issue 8, "Faults"; issue 6, "Kill the daemon while a model is being
 * saved"), in a bounded loop. itest_killsave.c kills tissuetool's model
 * writes and the daemon's material fits; this kills the daemon's own
 * training job (training.c: gradient descent on the storage worker, then
 * one INSERT of the model, then TrainingProgress done to the clients).
 *
 * Every round (ROUNDS, each bounded by ROUND_LIMIT_MS): start tissued on the
 * test's data directory (a restart on the database the last kill left),
 * create a quasi-static session, switch it to the solve (a new session of
 * the patch starts with the newest stored model, and a learned session
 * records nothing), press twice (the samples), send TrainShortcut, and
 * SIGKILL the daemon at a moment drawn from a seeded generator (seed
 * printed; TS_KILLTRAIN_SEED=N repeats a run), one of:
 *   delay    a delay uniform in [0, 1.5 T] after the Ack, T the Ack-to-done
 *            time of an unkilled calibration round;
 *   progress on the k-th TrainingProgress message (k uniform in 1..P, P the
 *            calibration's count of messages before done);
 *   done     on the done TrainingProgress (the model is committed by then).
 * The first three rounds take the three kinds in that order (so that every
 * run checks a kill at done), the others one drawn at random.
 * The phase a kill landed in is "before done" (no done message had arrived)
 * or "at done". Then, with no process on the file, the test opens the
 * SQLite file itself and checks:
 *   PRAGMA integrity_check is "ok" and foreign_key_check is empty;
 *   every learned_models row is complete: kind "method", "rich", "spread",
 *   "spread2" or "spread2r" with a theta blob of 8 bytes per parameter of
 *   that kind for some sheet count,
 *   decoding to finite values; loss, heldout_rmse, heldout_max finite and
 *   >= 0 stored as REAL; samples > 0; version > 0; a non-empty material;
 *   the model count is the old one or the old one + 1 (never more, never a
 *   partial row), and the old + 1 after a kill at done.
 * At the end an unkilled daemon lists over the protocol exactly the models
 * the file holds and stops with status 0 on SIGTERM. The test prints how
 * many kills landed in each phase and how many of the before-done kills
 * still found the new model (killed between the INSERT and the message).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "rawclient.h"
#include "ts_learn.h"

#define ROUNDS 8
#define REPLY_MS 60000
#define ROUND_LIMIT_MS 30000 /* one round, start to kill */

typedef Tissued__V1__Envelope Envelope;

static char dir[256], db[300];
static int failures;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);            \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
      failures++;                                                     \
    }                                                                 \
  } while (0)

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rng;
static uint64_t next_rand(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

/* ---- the database --------------------------------------------------------- */

static int is_real(sqlite3_stmt *st, int col) { return sqlite3_column_type(st, col) == SQLITE_FLOAT; }

/* Checks the file; returns the number of model rows, or -1 when it cannot be
 * read (a failure is recorded). */
static long long check_db(const char *when) {
  sqlite3 *h = NULL;
  int rc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  CHECK(rc == SQLITE_OK, "%s: cannot open %s: %s", when, db, h ? sqlite3_errmsg(h) : "?");
  if (rc != SQLITE_OK) {
    sqlite3_close(h);
    return -1;
  }
  sqlite3_busy_timeout(h, 5000);
  sqlite3_stmt *st = NULL;
  int rows = 0;
  if (sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      const char *t = (const char *)sqlite3_column_text(st, 0);
      CHECK(rows == 0 && t && strcmp(t, "ok") == 0, "%s: integrity_check: %s", when,
            t ? t : "(null)");
      rows++;
    }
    sqlite3_finalize(st);
  }
  CHECK(rows == 1, "%s: integrity_check gave %d rows", when, rows);
  rows = 0;
  if (sqlite3_prepare_v2(h, "PRAGMA foreign_key_check", -1, &st, NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) rows++;
    sqlite3_finalize(st);
  }
  CHECK(rows == 0, "%s: foreign_key_check: %d rows", when, rows);

  long long models = 0;
  rc = sqlite3_prepare_v2(h,
                          "SELECT id, kind, theta, loss, samples, heldout_rmse, heldout_max, "
                          "version, material FROM learned_models",
                          -1, &st, NULL);
  CHECK(rc == SQLITE_OK, "%s: %s", when, sqlite3_errmsg(h));
  while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    long long id = sqlite3_column_int64(st, 0);
    const char *kind = (const char *)sqlite3_column_text(st, 1);
    const void *blob = sqlite3_column_blob(st, 2);
    int bytes = sqlite3_column_bytes(st, 2);
    ts_learn_kind k;
    int known = kind && ts_learn_kind_parse(kind, &k) == 0;
    CHECK(known, "%s: model %lld: kind '%s'", when, id, kind ? kind : "(null)");
    int decoded = 0;
    for (uint32_t ns = 1; known && ns <= TS_MAX_LAYERS + 1 && !decoded; ns++) {
      ts_learn_model m;
      if (8 * (int)ts_learn_n_params(k, ns) == bytes &&
          ts_learn_theta_decode(k, ns, blob, (size_t)bytes, &m) == 0)
        decoded = 1;
    }
    CHECK(decoded, "%s: model %lld: theta of %d bytes is not a whole %s model", when, id, bytes,
          kind ? kind : "?");
    for (int col = 3; col <= 6; col++) {
      if (col == 4) continue;
      double v = sqlite3_column_double(st, col);
      CHECK(is_real(st, col) && isfinite(v) && v >= 0, "%s: model %lld: column %d is %g", when,
            id, col, v);
    }
    CHECK(sqlite3_column_type(st, 4) == SQLITE_INTEGER && sqlite3_column_int64(st, 4) > 0,
          "%s: model %lld: samples %lld", when, id, (long long)sqlite3_column_int64(st, 4));
    CHECK(sqlite3_column_int64(st, 7) > 0, "%s: model %lld: version", when, id);
    const char *mat = (const char *)sqlite3_column_text(st, 8);
    CHECK(mat && mat[0], "%s: model %lld: no material", when, id);
    models++;
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return models;
}

/* ---- the daemon ------------------------------------------------------------- */

static Envelope *request(rc_conn *c, Envelope *env) {
  env->request_id = ++c->next_rid;
  if (rc_send(c, env)) return NULL;
  long long end = now_ms() + REPLY_MS;
  while (now_ms() < end) {
    Envelope *e = rc_recv(c, 50);
    if (!e) {
      if (c->eof) return NULL;
      continue;
    }
    if (e->request_id == env->request_id && e->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME &&
        e->body_case != TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS)
      return e;
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
  return NULL;
}

/* 0 for an Ack, else an error code (or -1000: no reply). */
static int acked(Envelope *r) {
  int rc = !r ? -1000 : r->body_case == TISSUED__V1__ENVELOPE__BODY_ACK ? 0
                       : r->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR ? -(int)r->error->code
                                                                           : -1000;
  if (r) tissued__v1__envelope__free_unpacked(r, NULL);
  return rc;
}

/* A daemon on the test's directory with a quasi-static session joined by a
 * controller that switched it to the solve and pressed twice (following
 * frames' simulated time), ready to train. 0, or -1 with a failure noted. */
static int prepare(ts_dproc *d, rc_conn *c, uint32_t *sid) {
  /* a coarser patch than the default 17: every round builds a quasi-static
   * session, and the kills need only a training job, not resolution */
  const char *extra[] = {"--data-dir", dir, "--physics-threads", "1", "--train-after-samples",
                         "0", "--patch-resolution", "11", NULL};
  char err[256];
  if (ts_dproc_start(d, extra, err, sizeof err)) {
    CHECK(0, "daemon: %s", err);
    return -1;
  }
  uint32_t tool = 0;
  int ok = rc_tcp(c, d->tcp_port) == 0 && rc_hello(c, REPLY_MS) == 0 &&
           rc_create(c, TISSUED__V1__SOLVER__SOLVER_QUASI_STATIC, 0, sid, REPLY_MS) == 0 &&
           rc_join(c, *sid, 1, 0.005, 100, &tool, REPLY_MS) == 0;
  CHECK(ok, "daemon: cannot create and join a quasi-static session");
  if (!ok) return -1;
  Tissued__V1__UseShortcut u = TISSUED__V1__USE_SHORTCUT__INIT;
  u.session_id = *sid;
  u.learned = 0;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_USE_SHORTCUT;
  env.use_shortcut = &u;
  CHECK(acked(request(c, &env)) == 0, "UseShortcut learned=false refused");
  double sim = -1;
  long long deadline = now_ms() + ROUND_LIMIT_MS;
  for (int k = 0; k < 2 && !failures; k++) {
    double x = k ? 0.006 : -0.006, t0 = -1;
    for (;;) {
      Envelope *e = rc_recv(c, 20);
      if (e && e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) sim = e->frame->sim_time;
      if (e) tissued__v1__envelope__free_unpacked(e, NULL);
      if (sim < 0) continue;
      if (t0 < 0) t0 = sim;
      double u01 = (sim - t0) / 0.6;
      if (u01 >= 1) break;
      if (now_ms() > deadline || c->eof) {
        CHECK(0, "presses: simulated time stuck at %g s", sim);
        return -1;
      }
      double depth = u01 < 0.5 ? u01 * 2 : (1 - u01) * 2;
      rc_pose(c, tool, x, 0.011 - 0.009 * depth, 0);
    }
  }
  rc_pose(c, tool, 0, 0.03, 0);
  return failures ? -1 : 0;
}

static int send_train(rc_conn *c, uint32_t sid) {
  Tissued__V1__TrainShortcut m = TISSUED__V1__TRAIN_SHORTCUT__INIT;
  m.session_id = sid;
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TRAIN_SHORTCUT;
  env.train_shortcut = &m;
  return acked(request(c, &env));
}

/* Reads until the k-th progress message (k > 0), the done one (k == 0) or
 * until `until_ms` (absolute, k < 0). *done: a done message arrived;
 * *progress: messages before done. Returns 0, or -1 on a training error. */
static int read_progress(rc_conn *c, int k, long long until_ms, int *done, int *progress,
                         int64_t *model_id) {
  long long limit = now_ms() + ROUND_LIMIT_MS;
  while (now_ms() < limit && !c->eof) {
    if (k < 0 && now_ms() >= until_ms) return 0;
    int wait = k < 0 ? (int)(until_ms - now_ms()) : 50;
    Envelope *e = rc_recv(c, wait < 1 ? 1 : wait > 50 ? 50 : wait);
    if (!e) continue;
    int rc = 1;
    if (e->body_case == TISSUED__V1__ENVELOPE__BODY_TRAINING_PROGRESS) {
      const Tissued__V1__TrainingProgress *p = e->training_progress;
      if (p->done) {
        *done = 1;
        if (model_id) *model_id = p->model_id;
        rc = p->error && p->error[0] ? -1 : 0;
        if (rc) fprintf(stderr, "training failed: %s\n", p->error);
      } else {
        ++*progress;
        if (k > 0 && *progress >= k) rc = 0;
      }
    }
    tissued__v1__envelope__free_unpacked(e, NULL);
    if (rc <= 0) return rc;
  }
  return k < 0 ? 0 : -1;
}

/* SIGKILL and reap; d's directory is removed by ts_dproc_stop. */
static int kill9(ts_dproc *d) {
  kill(d->pid, SIGKILL);
  int st = 0;
  while (waitpid(d->pid, &st, 0) < 0 && errno == EINTR) {
  }
  d->reaped = 1;
  d->status = st;
  char why[128];
  ts_dproc_stop(d, 1000, why, sizeof why);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

int main(void) {
  if (!getenv("TISSUED_BIN")) {
    fprintf(stderr, "TISSUED_BIN is not set\n");
    return 1;
  }
  const char *seed_env = getenv("TS_KILLTRAIN_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10)
                           : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  if (!seed) seed = 1;
  rng = seed;
  printf("itest_killtrain: seed %llu (TS_KILLTRAIN_SEED=%llu repeats it)\n",
         (unsigned long long)seed, (unsigned long long)seed);
  snprintf(dir, sizeof dir, "%s/tissued-killtrain-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  snprintf(db, sizeof db, "%s/tissued.sqlite", dir);
  long long t_start = now_ms();

  /* calibration: one unkilled training */
  ts_dproc d;
  rc_conn c;
  uint32_t sid = 0;
  long long t_train = 0;
  int p_cal = 0, done = 0;
  int64_t model_id = 0;
  if (prepare(&d, &c, &sid) == 0) {
    long long t0 = now_ms();
    CHECK(send_train(&c, sid) == 0, "calibration: TrainShortcut refused");
    CHECK(read_progress(&c, 0, 0, &done, &p_cal, &model_id) == 0 && done && model_id > 0,
          "calibration: training did not finish");
    t_train = now_ms() - t0;
    rc_close(&c);
    char why[256];
    CHECK(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "calibration stop: %s", why);
  }
  long long prev = check_db("after calibration");
  CHECK(prev == 1, "calibration stored %lld models", prev);
  printf("itest_killtrain: unkilled training %lld ms from the Ack to done, %d progress messages "
         "before done\n",
         t_train, p_cal);
  if (failures) {
    fprintf(stderr, "itest_killtrain: database kept in %s\n", dir);
    return 1;
  }

  int before = 0, at_done = 0, before_new = 0, exited = 0;
  int mode_count[3] = {0, 0, 0};
  for (int r = 1; r <= ROUNDS && !failures; r++) {
    /* 0 delay, 1 progress, 2 done; each of them once in the first three
     * rounds, so that a run always has a kill at done to check */
    const int drawn = (int)(next_rand() % 3), mode = r <= 3 ? r - 1 : drawn;
    long long delay = (long long)(next_rand() % (uint64_t)(t_train * 3 / 2 + 1));
    int k = 1 + (int)(next_rand() % (uint64_t)(p_cal > 0 ? p_cal : 1));
    if (prepare(&d, &c, &sid)) break;
    mode_count[mode]++;
    int progress = 0;
    done = 0;
    long long t0 = now_ms();
    CHECK(send_train(&c, sid) == 0, "round %d: TrainShortcut refused", r);
    if (mode == 0)
      read_progress(&c, -1, t0 + delay, &done, &progress, NULL);
    else
      read_progress(&c, mode == 1 ? k : 0, 0, &done, &progress, NULL);
    long long at = now_ms() - t0;
    int killed = kill9(&d);
    rc_close(&c);
    if (!killed) exited++;
    *(done ? &at_done : &before) += 1;
    char when[96];
    snprintf(when, sizeof when, "round %d (%s kill %lld ms after the Ack)", r,
             mode == 0 ? "delay" : mode == 1 ? "progress" : "done", at);
    long long now = check_db(when);
    CHECK(now == prev || now == prev + 1, "%s: %lld models, before %lld", when, now, prev);
    if (done) CHECK(now == prev + 1, "%s: done was sent, but the model is not stored", when);
    if (!done && now == prev + 1) before_new++;
    printf("round %d: %-8s kill after %4lld ms, %2d progress messages, %s: %lld -> %lld models\n",
           r, mode == 0 ? "delay" : mode == 1 ? "progress" : "done", at, progress,
           done ? "at done" : "before done", prev, now);
    prev = now;
  }

  /* the rounds of mode done make the at-done checks above run */
  if (!failures) CHECK(at_done >= 1, "no kill landed at done in %d rounds", ROUNDS);

  /* an unkilled daemon lists what the file holds */
  if (!failures && prepare(&d, &c, &sid) == 0) {
    Tissued__V1__ListModels m = TISSUED__V1__LIST_MODELS__INIT;
    Envelope env = TISSUED__V1__ENVELOPE__INIT;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_LIST_MODELS;
    env.list_models = &m;
    Envelope *rep = request(&c, &env);
    CHECK(rep && rep->body_case == TISSUED__V1__ENVELOPE__BODY_MODEL_LIST &&
              (long long)rep->model_list->n_models == prev,
          "ListModels after the kills: %lld models expected", prev);
    if (rep) tissued__v1__envelope__free_unpacked(rep, NULL);
    rc_close(&c);
    char why[256];
    CHECK(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "final stop: %s", why);
    check_db("at the end");
  }
  printf("itest_killtrain: %d kills (delay %d, progress %d, done %d): %d before done (%d of them "
         "found the new model stored), %d at done; %d exited before the kill; %lld s\n",
         ROUNDS, mode_count[0], mode_count[1], mode_count[2], before, before_new, at_done, exited,
         (now_ms() - t_start) / 1000);
  if (failures) {
    fprintf(stderr, "itest_killtrain: %d failure(s); database kept in %s\n", failures, dir);
    return 1;
  }
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) return 1;
  printf("itest_killtrain: passed\n");
  return 0;
}
