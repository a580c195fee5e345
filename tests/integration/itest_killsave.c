/*
 * itest_killsave.c: kill -9 at random moments while processes write the
 * SQLite database (issue 8, "Faults"), in a bounded loop. After every kill
 * the database must pass PRAGMA integrity_check and foreign_key_check and
 * hold complete rows only, and the next process must start and work on it.
 *
 * Writers, in turn (round r: r % 3):
 *   0  tissuetool learn --samples 1: records presses, trains, stores one
 *      learned model (a single INSERT at the end of a ~second of work);
 *   1  tissuetool models import FILE: builds the tissue, stores a model
 *      (the exported model 1 with its theta moved a little each time, so
 *      that it is not one stored already, which the import would skip);
 *   2  tissued with one TCP client that has pipelined FIT_BATCH FitMaterial
 *      requests (distinct names): the storage worker stores fit after fit,
 *      so a kill lands in the middle of a run of writes.
 * Each kind runs once unkilled first (calibration: it must succeed on the
 * fresh database and its duration T sets the kill delays: uniform in
 * [0, T] for the daemon, which writes all along, and in [0.6 T, 1.05 T] for
 * tissuetool, which writes at its end); then ROUNDS rounds kill each writer with SIGKILL after a
 * delay drawn from a seeded generator (seed printed; TS_KILLSAVE_SEED=N
 * repeats a run). The rounds end with one unkilled learn and one unkilled
 * daemon batch that must fully succeed, and the daemon must stop with
 * status 0 on SIGTERM; then `tissuetool models delete 1` removes one row and
 * a second one fails.
 *
 * "Complete rows" (checked with SQL on the file, after each round):
 *   learned_models: a known kind whose theta blob is 8 bytes per parameter
 *     for that kind and some layer count (1..TS_MAX_LAYERS), decodes with
 *     ts_learn_theta_decode (finite values), loss/heldout figures finite and
 *     >= 0 stored as REAL, samples >= 0, version > 0;
 *   material_fits: a, b, rmse finite, r2 finite, samples >= 0; the fits this
 *     test requested (names "k...") have exactly FIT_SAMPLES samples and the
 *     a, b of the same CSV fitted unkilled in calibration (relative 1e-9: the
 *     same solver on the same bytes, any difference is a torn value);
 *   row counts never go down.
 * Non-vacuous: the test asserts that some daemon rounds were killed after
 * some but not all of their fits were stored (a kill inside a run of
 * writes), and that some learn rounds were killed before their model was
 * stored; it prints how many kills landed where.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "daemon_proc.h"
#include "tissue.pb-c.h"
#include "ts_learn.h"
#include "ts_tissue.h"

#define ROUNDS 24
#define FIT_BATCH 300
#define FIT_SAMPLES 10
#define TEST_KEY TS_DPROC_KEY /* every test daemon's --server-key */
#define ROUND_LIMIT_MS 120000 /* one writer, unkilled, must finish within this */

static char dir[256], db[300], tool[600], model_file[300];
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

static void sleep_ms(long long ms) {
  if (ms <= 0) return;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

static uint64_t rng;
static uint64_t next_rand(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

/* ---- child processes ------------------------------------------------------ */

/* Starts argv (NULL-ended) with stdout to out_path (or /dev/null) and stderr
 * to dir/child.log; the child dies with this process. */
static pid_t spawn(char *const argv[], const char *out_path) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char log[320];
  snprintf(log, sizeof log, "%s/child.log", dir);
  int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out >= 0) dup2(out, 1);
  if (err >= 0) dup2(err, 2);
  execv(argv[0], argv);
  _exit(127);
}

/* Waits for pid up to limit_ms; kills it with SIGKILL past the limit. Returns
 * the wait status. */
static int reap(pid_t pid, long long limit_ms) {
  int st = 0;
  long long t0 = now_ms();
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (now_ms() - t0 > limit_ms) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return st;
    }
    sleep_ms(5);
  }
}

static void dump_child_log(void) {
  char log[320];
  snprintf(log, sizeof log, "%s/child.log", dir);
  FILE *f = fopen(log, "r");
  if (!f) return;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f) && n++ < 40) fprintf(stderr, "  | %s", line);
  fclose(f);
}

static pid_t start_learn(void) {
  char *argv[] = {tool, "learn", "--db", db, "--samples", "1", NULL};
  return spawn(argv, NULL);
}

/* Model 1's exported document, read once in calibration. */
static char export_text[1 << 16];

/* Writes model_file: the exported model with its first theta value moved by
 * n parts in 1e12 (n >= 1). tissuetool stores nothing for a document that
 * repeats a stored model (model_doc.h, as the daemon's ImportModel), so each
 * import gets a theta not stored yet and writes a row unless killed first. */
static int write_model_file(int n) {
  const char *t = strstr(export_text, "\"theta\"");
  const char *b = t ? strchr(t, '[') : NULL;
  if (!b) return -1;
  char *end;
  double v = strtod(b + 1, &end);
  if (end == b + 1) return -1;
  double w = v != 0 ? v * (1 + 1e-12 * n) : 1e-12 * n;
  FILE *f = fopen(model_file, "w");
  if (!f) return -1;
  fprintf(f, "%.*s%.17g%s", (int)(b + 1 - export_text), export_text, w, end);
  return fclose(f) ? -1 : 0;
}

static pid_t start_import(void) {
  static int imports;
  if (write_model_file(++imports)) {
    fprintf(stderr, "itest_killsave: cannot write %s from the exported model\n", model_file);
    exit(1); /* no pid to reap or kill */
  }
  char *argv[] = {tool, "models", "--db", db, "import", model_file, NULL};
  return spawn(argv, NULL);
}

/* Runs a tissuetool command to completion; its exit status or -1. */
static int run_tool(char *const argv[], const char *out_path) {
  int st = reap(spawn(argv, out_path), ROUND_LIMIT_MS);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- the database ------------------------------------------------------- */

typedef struct counts {
  long long models, fits, our_fits;
} counts;

static double ref_a, ref_b; /* the batch CSV's fit, from calibration */

static int is_real(sqlite3_stmt *st, int col) { return sqlite3_column_type(st, col) == SQLITE_FLOAT; }

/* Checks the whole file; fills *c. Returns the number of problems found. */
static int check_db(counts *c, const char *when) {
  int before = failures;
  memset(c, 0, sizeof *c);
  sqlite3 *h = NULL;
  int rc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  CHECK(rc == SQLITE_OK, "%s: cannot open %s: %s", when, db, h ? sqlite3_errmsg(h) : "?");
  if (rc != SQLITE_OK) {
    sqlite3_close(h);
    return failures - before;
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

  rc = sqlite3_prepare_v2(h,
                          "SELECT id, kind, theta, loss, samples, heldout_rmse, heldout_max, "
                          "version FROM learned_models",
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
    for (uint32_t ns = 1; known && ns <= TS_MAX_LAYERS && !decoded; ns++) {
      ts_learn_model m;
      if (8 * (int)ts_learn_n_params(k, ns) == bytes &&
          ts_learn_theta_decode(k, ns, blob, (size_t)bytes, &m) == 0)
        decoded = 1;
    }
    CHECK(decoded, "%s: model %lld: theta of %d bytes does not decode as a %s model", when, id,
          bytes, kind ? kind : "?");
    for (int col = 3; col <= 6; col++) {
      if (col == 4) continue;
      double v = sqlite3_column_double(st, col);
      CHECK(is_real(st, col) && isfinite(v) && v >= 0, "%s: model %lld: column %d is %g", when, id,
            col, v);
    }
    CHECK(sqlite3_column_type(st, 4) == SQLITE_INTEGER && sqlite3_column_int64(st, 4) >= 0,
          "%s: model %lld: samples", when, id);
    CHECK(sqlite3_column_int64(st, 7) > 0, "%s: model %lld: version", when, id);
    c->models++;
  }
  sqlite3_finalize(st);

  rc = sqlite3_prepare_v2(h, "SELECT id, name, a, b, rmse, r2, samples FROM material_fits", -1,
                          &st, NULL);
  CHECK(rc == SQLITE_OK, "%s: %s", when, sqlite3_errmsg(h));
  while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    long long id = sqlite3_column_int64(st, 0);
    const char *name = (const char *)sqlite3_column_text(st, 1);
    double a = sqlite3_column_double(st, 2), b = sqlite3_column_double(st, 3);
    CHECK(is_real(st, 2) && is_real(st, 3) && isfinite(a) && isfinite(b), "%s: fit %lld: a %g b %g",
          when, id, a, b);
    CHECK(isfinite(sqlite3_column_double(st, 4)) && isfinite(sqlite3_column_double(st, 5)),
          "%s: fit %lld: rmse/r2", when, id);
    long long n = sqlite3_column_int64(st, 6);
    CHECK(n >= 0, "%s: fit %lld: samples %lld", when, id, n);
    if (name && name[0] == 'k') {
      CHECK(n == FIT_SAMPLES, "%s: fit %lld (%s): %lld samples, sent %d", when, id, name, n,
            FIT_SAMPLES);
      CHECK(fabs(a - ref_a) <= 1e-9 * fabs(ref_a) && fabs(b - ref_b) <= 1e-9 * fabs(ref_b),
            "%s: fit %lld (%s): a %.17g b %.17g, unkilled %.17g %.17g", when, id, name, a, b,
            ref_a, ref_b);
      c->our_fits++;
    }
    c->fits++;
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return failures - before;
}

/* ---- the daemon and its client -------------------------------------------- */

static const char fit_csv[] =
    "strain,stress\n0.02,722\n0.04,776\n0.06,854\n0.08,914\n0.10,1002\n"
    "0.12,1080\n0.14,1190\n0.16,1270\n0.18,1400\n0.20,1510\n";

static int send_env(int fd, Tissued__V1__Envelope *e) {
  size_t len = tissued__v1__envelope__get_packed_size(e);
  uint8_t *buf = malloc(len + 4);
  if (!buf) return -1;
  buf[0] = (uint8_t)(len >> 24);
  buf[1] = (uint8_t)(len >> 16);
  buf[2] = (uint8_t)(len >> 8);
  buf[3] = (uint8_t)len;
  tissued__v1__envelope__pack(e, buf + 4);
  size_t off = 0;
  while (off < len + 4) {
    ssize_t n = send(fd, buf + off, len + 4 - off, MSG_NOSIGNAL);
    if (n <= 0) {
      free(buf);
      return -1;
    }
    off += (size_t)n;
  }
  free(buf);
  return 0;
}

/* Reads one Envelope (timeout_ms); NULL on EOF, error or timeout. */
static Tissued__V1__Envelope *recv_env(int fd, int timeout_ms) {
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  uint8_t hdr[4];
  size_t got = 0;
  while (got < 4) {
    ssize_t n = recv(fd, hdr + got, 4 - got, 0);
    if (n <= 0) return NULL;
    got += (size_t)n;
  }
  size_t len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
  if (len > (16u << 20)) return NULL;
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return NULL;
  for (got = 0; got < len;) {
    ssize_t n = recv(fd, buf + got, len - got, 0);
    if (n <= 0) {
      free(buf);
      return NULL;
    }
    got += (size_t)n;
  }
  Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, len, buf);
  free(buf);
  return e;
}

static int connect_tcp(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* Starts the daemon on the test's database (a later --data-dir overrides the
 * temporary one daemon_proc gives) and sends Hello. Returns the socket. */
static int start_daemon(ts_dproc *d) {
  const char *extra[] = {"--data-dir", dir, "--physics-threads", "1", NULL};
  char err[256];
  if (ts_dproc_start(d, extra, err, sizeof err)) {
    CHECK(0, "daemon: %s", err);
    return -1;
  }
  int fd = connect_tcp(d->tcp_port);
  CHECK(fd >= 0, "cannot connect to the daemon");
  if (fd < 0) return -1;
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = 1;
  h.client_name = (char *)"itest_killsave";
  h.credentials = (char *)TEST_KEY;
  Tissued__V1__Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.request_id = 1;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  e.hello = &h;
  Tissued__V1__Envelope *r = NULL;
  if (send_env(fd, &e) == 0) r = recv_env(fd, 10000);
  CHECK(r && r->body_case == TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY, "no HelloReply");
  if (r) tissued__v1__envelope__free_unpacked(r, NULL);
  return fd;
}

/* Pipelines FIT_BATCH FitMaterial requests named k<round>-<i>. */
static int send_fits(int fd, int round) {
  for (int i = 0; i < FIT_BATCH; i++) {
    char name[32];
    snprintf(name, sizeof name, "k%d-%d", round, i);
    Tissued__V1__FitMaterial m = TISSUED__V1__FIT_MATERIAL__INIT;
    m.tissue = (char *)"stomach";
    m.layer = (char *)"mucosa";
    m.direction = (char *)"axial";
    m.name = name;
    m.csv.data = (uint8_t *)fit_csv;
    m.csv.len = sizeof fit_csv - 1;
    Tissued__V1__Envelope e = TISSUED__V1__ENVELOPE__INIT;
    e.request_id = 100 + (uint64_t)i;
    e.body_case = TISSUED__V1__ENVELOPE__BODY_FIT_MATERIAL;
    e.fit_material = &m;
    if (send_env(fd, &e)) return -1;
  }
  return 0;
}

/* Reads the replies of a batch; returns how many fits were stored. */
static int read_fit_replies(int fd) {
  int ok = 0;
  for (int i = 0; i < FIT_BATCH; i++) {
    Tissued__V1__Envelope *r = recv_env(fd, 30000);
    if (!r) break;
    if (r->body_case == TISSUED__V1__ENVELOPE__BODY_MATERIAL_FIT) {
      ok++;
      ref_a = r->material_fit->a;
      ref_b = r->material_fit->b;
    } else if (r->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
      fprintf(stderr, "fit refused: %s\n", r->error->message);
    }
    tissued__v1__envelope__free_unpacked(r, NULL);
  }
  return ok;
}

/* ---- main -------------------------------------------------------------------- */

static int rm_tree(const char *path) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  return system(cmd);
}

int main(void) {
  const char *bin = getenv("TISSUED_BIN");
  if (!bin) {
    fprintf(stderr, "TISSUED_BIN is not set\n");
    return 1;
  }
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s", bin);
  snprintf(tool, sizeof tool, "%s/tissuetool", dirname(tmp));
  if (access(tool, X_OK)) {
    fprintf(stderr, "no tissuetool beside tissued: %s\n", tool);
    return 1;
  }
  const char *seed_env = getenv("TS_KILLSAVE_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10)
                           : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  if (!seed) seed = 1;
  rng = seed;
  printf("itest_killsave: seed %llu (TS_KILLSAVE_SEED=%llu repeats it)\n",
         (unsigned long long)seed, (unsigned long long)seed);
  snprintf(dir, sizeof dir, "%s/tissued-killsave-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  snprintf(db, sizeof db, "%s/tissued.sqlite", dir);
  snprintf(model_file, sizeof model_file, "%s/model.json", dir);
  long long t_start = now_ms();
  counts c, prev;

  /* calibration: each writer once, unkilled, on the fresh database */
  long long t0 = now_ms();
  int st = reap(start_learn(), ROUND_LIMIT_MS);
  long long t_learn = now_ms() - t0;
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "calibration learn failed");
  if (failures) dump_child_log();
  char *exp_argv[] = {tool, "models", "--db", db, "export", "1", NULL};
  CHECK(run_tool(exp_argv, model_file) == 0, "models export 1 failed");
  {
    FILE *ef = fopen(model_file, "r");
    size_t en = ef ? fread(export_text, 1, sizeof export_text - 1, ef) : 0;
    if (ef) fclose(ef);
    export_text[en] = '\0';
    CHECK(en > 0 && en < sizeof export_text - 1, "reading the exported model (%zu bytes)", en);
  }
  t0 = now_ms();
  st = reap(start_import(), ROUND_LIMIT_MS);
  long long t_import = now_ms() - t0;
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "calibration import failed");
  ts_dproc d;
  int fd = start_daemon(&d);
  if (fd < 0 || failures) {
    dump_child_log();
    rm_tree(dir);
    return 1;
  }
  t0 = now_ms();
  CHECK(send_fits(fd, 0) == 0, "sending fits");
  int stored = read_fit_replies(fd);
  long long t_batch = now_ms() - t0;
  CHECK(stored == FIT_BATCH, "calibration batch: %d of %d fits stored", stored, FIT_BATCH);
  close(fd);
  char why[256];
  CHECK(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "daemon stop: %s", why);
  check_db(&prev, "after calibration");
  CHECK(prev.models == 2 && prev.our_fits == FIT_BATCH, "calibration stored %lld models, %lld fits",
        prev.models, prev.our_fits);
  printf("itest_killsave: unkilled learn %lld ms, import %lld ms, %d fits %lld ms\n", t_learn,
         t_import, FIT_BATCH, t_batch);
  if (failures) {
    rm_tree(dir);
    return 1;
  }

  /* the rounds */
  int learn_before = 0, learn_after = 0, import_before = 0, import_after = 0;
  int batch_mid = 0, batch_none = 0, batch_all = 0, exited = 0;
  /* each writer's run time, from its unkilled run; shortened whenever a
   * writer turns out to have exited before its kill (later runs find warm
   * caches and go faster, which left every kill after the write) */
  long long spans[3] = {t_learn, t_import, t_batch};
  for (int r = 1; r <= ROUNDS && !failures; r++) {
    int kind = r % 3;
    long long span = spans[kind];
    /* tissuetool writes at its very end: its kills are drawn from [0.6 T,
     * 1.05 T] to land around the write; the daemon writes all along: [0, T] */
    long long lo = kind == 2 ? 0 : span * 6 / 10, hi = kind == 2 ? span : span * 105 / 100;
    long long delay = lo + (long long)(next_rand() % (uint64_t)(hi - lo + 1));
    pid_t pid;
    if (kind == 2) {
      fd = start_daemon(&d);
      if (fd < 0) break;
      send_fits(fd, r);
      pid = d.pid;
    } else {
      pid = kind == 0 ? start_learn() : start_import();
    }
    sleep_ms(delay);
    kill(pid, SIGKILL);
    st = reap(pid, ROUND_LIMIT_MS);
    if (kind == 2) {
      d.reaped = 1;
      d.status = st;
      close(fd);
      ts_dproc_stop(&d, 1000, why, sizeof why); /* removes its own temp dir only */
    }
    int killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    if (!killed) exited++;
    if (!killed && kind != 2 && delay > 10) spans[kind] = delay * 9 / 10; /* it ran under delay */
    char when[64];
    snprintf(when, sizeof when, "round %d (writer %d, kill after %lld ms)", r, kind, delay);
    check_db(&c, when);
    CHECK(c.models >= prev.models && c.fits >= prev.fits, "%s: rows went down", when);
    long long added_models = c.models - prev.models, added_fits = c.our_fits - prev.our_fits;
    if (kind == 0) *(added_models ? &learn_after : &learn_before) += 1;
    if (kind == 1) *(added_models ? &import_after : &import_before) += 1;
    if (kind == 2) {
      if (added_fits == 0)
        batch_none++;
      else if (added_fits < FIT_BATCH)
        batch_mid++;
      else
        batch_all++;
    }
    printf("round %2d: writer %d killed after %4lld ms%s: +%lld models, +%lld fits\n", r, kind,
           delay, killed ? "" : " (had exited)", added_models, added_fits);
    /* the next process works on this database */
    char *list_argv[] = {tool, "models", "--db", db, "list", NULL};
    CHECK(run_tool(list_argv, NULL) == 0, "%s: tissuetool models list fails afterwards", when);
    prev = c;
  }

  /* afterwards: a full learn and a full daemon batch succeed */
  if (!failures) {
    st = reap(start_learn(), ROUND_LIMIT_MS);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "learn after the kills failed");
    fd = start_daemon(&d);
    if (fd >= 0) {
      CHECK(send_fits(fd, ROUNDS + 1) == 0, "sending fits");
      stored = read_fit_replies(fd);
      CHECK(stored == FIT_BATCH, "after the kills: %d of %d fits stored", stored, FIT_BATCH);
      close(fd);
      CHECK(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "daemon stop: %s", why);
    }
    check_db(&c, "at the end");
    CHECK(c.models == prev.models + 1 && c.our_fits == prev.our_fits + FIT_BATCH,
          "the final writes are not all there (%lld models, %lld fits)", c.models, c.our_fits);
    /* the offline tool's delete on this database (issue 6: models are
     * deleted through the protocol, itest_models, and the offline tool):
     * model 1 (calibration's learn) goes, a second delete is refused */
    char *del_argv[] = {tool, "models", "--db", db, "delete", "1", NULL};
    CHECK(run_tool(del_argv, NULL) == 0, "tissuetool models delete 1 failed");
    prev = c;
    check_db(&c, "after tissuetool models delete 1");
    CHECK(c.models == prev.models - 1, "models delete 1: %lld models before, %lld after",
          prev.models, c.models);
    CHECK(run_tool(del_argv, NULL) == 1, "a second tissuetool models delete 1 did not fail");
  }
  printf("itest_killsave: learn killed before/after its write %d/%d, import %d/%d; daemon "
         "batches killed with none/some/all fits stored %d/%d/%d; %d exited before the kill; "
         "%lld s\n",
         learn_before, learn_after, import_before, import_after, batch_none, batch_mid, batch_all,
         exited, (now_ms() - t_start) / 1000);
  /* not vacuous: kills landed inside runs of writes, and before writes */
  CHECK(failures || batch_mid >= 2, "only %d daemon kills landed between stored fits", batch_mid);
  CHECK(failures || learn_before + import_before >= 1, "no tissuetool kill landed before its write");
  if (failures) {
    fprintf(stderr, "itest_killsave: %d failure(s); database kept in %s\n", failures, dir);
    return 1;
  }
  rm_tree(dir);
  printf("itest_killsave: passed\n");
  return 0;
}
