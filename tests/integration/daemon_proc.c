/*
 * daemon_proc.c: a real tissued per integration test (see daemon_proc.h):
 * fork/exec with a scratch data directory, wait for the ports file, SIGTERM
 * and reap with a deadline, clean up even when a test fails half-way; and
 * a plain HTTP GET with a Prometheus metric reader for /metrics.
 */
#define _GNU_SOURCE
#include "daemon_proc.h"

#include "ts_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A daemon writes its ports file within a second or so; a sanitizer build
 * opening its database on a machine at load 15-20 can take several times
 * that, so the bound is generous (it costs nothing when the file comes). */
#define START_TIMEOUT_MS 60000

/* Daemons to clean up at exit if a test ends early (an assertion exits the
 * test process). Test-harness state; each entry remembers which process
 * started it so a forked test runner does not clean up its parent's. An
 * entry keeps its own copy of the daemon's pid, directory and log: a test
 * run without fork (CK_NOFORK) that fails leaves its ts_dproc, a local of
 * the failed test's frame, to be overwritten by the next, and the exit
 * would then read (and kill, and remove) whatever is there. */
#define MAX_TRACKED 8
static struct {
  const ts_dproc *d; /* the key: entries are looked up by it while it lives */
  pid_t owner;
  ts_dproc copy; /* pid, dir, log; reaped as ts_dproc_alive saw it */
} tracked[MAX_TRACKED];
static int atexit_done;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void remove_dir(ts_dproc *d) {
  if (d->dir[0]) nftw(d->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  d->dir[0] = '\0';
}

/* Parent of the daemons' directories ("" = /tmp); inherited by forked tests. */
static char scratch[200];

int ts_dproc_scratch_begin(void) {
  snprintf(scratch, sizeof scratch, "/tmp/tissued-itest.XXXXXX");
  if (!mkdtemp(scratch)) {
    scratch[0] = '\0';
    return -1;
  }
  return 0;
}

/* A daemon's log left in the scratch directory: its test failed before
 * stopping it (a forked test that fails exits at once, without its exit
 * handlers; its daemon dies with it). The log is the only account of what
 * the daemon did, and the directory goes next. */
static int dump_left_log(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  if (flag == FTW_F && strcmp(path + ftw->base, "tissued.log") == 0) {
    ts_dproc d;
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s", path);
    fprintf(stderr, "(a test ended before stopping its daemon)\n");
    ts_dproc_dump_log(&d);
  }
  return 0;
}

void ts_dproc_scratch_end(void) {
  if (scratch[0]) nftw(scratch, dump_left_log, 16, FTW_PHYS);
  if (scratch[0]) nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  scratch[0] = '\0';
}

static void untrack(const ts_dproc *d) {
  for (int i = 0; i < MAX_TRACKED; i++)
    if (tracked[i].d == d) tracked[i].d = NULL;
}

static void cleanup_at_exit(void) {
  for (int i = 0; i < MAX_TRACKED; i++) {
    ts_dproc *d = &tracked[i].copy;
    if (!tracked[i].d || tracked[i].owner != getpid()) continue;
    if (d->pid > 0 && !d->reaped) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, NULL, 0);
    }
    remove_dir(d);
    tracked[i].d = NULL;
  }
}

static void track(const ts_dproc *d) {
  if (!atexit_done) {
    atexit(cleanup_at_exit);
    atexit_done = 1;
  }
  /* an entry with this key already is a failed test's, whose ts_dproc this
   * one now occupies: it keeps its copy under a key nothing else has */
  for (int i = 0; i < MAX_TRACKED; i++)
    if (tracked[i].d == d) tracked[i].d = (const ts_dproc *)&tracked[i];
  for (int i = 0; i < MAX_TRACKED; i++) {
    if (!tracked[i].d) {
      tracked[i].d = d;
      tracked[i].owner = getpid();
      tracked[i].copy = *d;
      return;
    }
  }
}

int ts_dproc_log_count(const ts_dproc *d, const char *needle) {
  FILE *f = fopen(d->log, "r");
  if (!f) return -1;
  char line[2048];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  fclose(f);
  return n;
}

void ts_dproc_dump_log(const ts_dproc *d) {
  FILE *f = fopen(d->log, "r");
  if (!f) return;
  /* its first and last lines: CI shows the head of a failing test's
   * output, and a session diverging for minutes logged hundreds of lines
   * before the one that mattered */
  enum { HEAD = 20, TAIL = 40 };
  char *tail[TAIL] = {0};
  char line[1024];
  long n = 0;
  fprintf(stderr, "---- tissued log (%s) ----\n", d->log);
  while (fgets(line, sizeof line, f)) {
    if (n < HEAD) {
      fputs(line, stderr);
    } else {
      free(tail[n % TAIL]);
      tail[n % TAIL] = strdup(line);
    }
    n++;
  }
  fclose(f);
  if (n > HEAD + TAIL) fprintf(stderr, "[... %ld lines ...]\n", n - HEAD - TAIL);
  for (long i = n > HEAD + TAIL ? n - TAIL : HEAD; i < n; i++) {
    if (tail[i % TAIL]) fputs(tail[i % TAIL], stderr);
  }
  for (int i = 0; i < TAIL; i++) free(tail[i]);
  fprintf(stderr, "---- end of tissued log (%ld lines) ----\n", n);
}

/* Reads {"tcp":N,"http":M}; 0 when both are there and sane. */
static int read_ports(const char *path, int *tcp, int *http) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char buf[256];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  if (!strchr(buf, '}')) return -1; /* not completely written yet */
  const char *t = strstr(buf, "\"tcp\"");
  const char *h = strstr(buf, "\"http\"");
  if (!t || !h) return -1;
  t = strchr(t + 5, ':');
  h = strchr(h + 6, ':');
  if (!t || !h) return -1;
  char *end;
  long tv = strtol(t + 1, &end, 10);
  if (end == t + 1) return -1;
  long hv = strtol(h + 1, &end, 10);
  if (end == h + 1) return -1;
  if (tv <= 0 || tv > 65535 || hv <= 0 || hv > 65535) return -1;
  *tcp = (int)tv;
  *http = (int)hv;
  return 0;
}

int ts_dproc_alive(ts_dproc *d) {
  if (d->pid <= 0 || d->reaped) return 0;
  int st;
  pid_t r = waitpid(d->pid, &st, WNOHANG);
  if (r == d->pid) {
    d->reaped = 1;
    d->status = st;
    for (int i = 0; i < MAX_TRACKED; i++) /* its pid may be another's from now on */
      if (tracked[i].d == d) tracked[i].copy.reaped = 1;
    return 0;
  }
  return 1;
}

int ts_dproc_start(ts_dproc *d, const char *const *extra_args, char *err, size_t errcap) {
  memset(d, 0, sizeof *d);
  const char *bin = getenv("TISSUED_BIN");
  if (!bin || !*bin) {
    snprintf(err, errcap, "TISSUED_BIN is not set (the path of the tissued binary)");
    return -1;
  }
  if (access(bin, X_OK) != 0) {
    snprintf(err, errcap, "TISSUED_BIN=%s is not executable: %s", bin, strerror(errno));
    return -1;
  }
  snprintf(d->dir, sizeof d->dir, "%s/tissued-%s", scratch[0] ? scratch : "/tmp",
           scratch[0] ? "XXXXXX" : "itest.XXXXXX");
  if (!mkdtemp(d->dir)) {
    snprintf(err, errcap, "mkdtemp: %s", strerror(errno));
    d->dir[0] = '\0';
    return -1;
  }
  char ports[300];
  snprintf(ports, sizeof ports, "%s/ports.json", d->dir);
  snprintf(d->log, sizeof d->log, "%s/tissued.log", d->dir);

  const char *argv[64];
  int k = 0;
  argv[k++] = bin;
  argv[k++] = "--host";
  argv[k++] = "127.0.0.1";
  argv[k++] = "--tcp-port";
  argv[k++] = "0";
  argv[k++] = "--http-port";
  argv[k++] = "0";
  argv[k++] = "--data-dir";
  argv[k++] = d->dir;
  argv[k++] = "--ports-file";
  argv[k++] = ports;
  argv[k++] = "--server-key";
  argv[k++] = TS_DPROC_KEY;
  /* Tests' sessions over --slow-lane-load go to the slow physics threads
   * (server/lane.h): an XPBD session of the built-in patch at dt 1 ms in
   * every build (a step load of 1.1), and many more under the sanitizers,
   * which make every step 3 (ASan) to 10 (TSan) times as costly. At their
   * default niceness (10) those threads got a few per cent of a core beside
   * the other tests' daemons that CI runs at the same time, and a session
   * there answered nothing for a minute (itest_refine_async under TSan, and
   * in the normal build once its creation's trial started it there at once,
   * server/session_trial.h). The moves are kept (TSan watches them); the
   * slow threads run at the daemon's priority. A test that checks the
   * niceness passes its own (a later flag wins). */
  argv[k++] = "--slow-lane-nice";
  argv[k++] = "0";
  for (int i = 0; extra_args && extra_args[i] && k < 63; i++) argv[k++] = extra_args[i];
  argv[k] = NULL;

  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errcap, "fork: %s", strerror(errno));
    remove_dir(d);
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* the test is already gone */
    int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, 0);
    signal(SIGPIPE, SIG_DFL);
    execv(bin, (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
    _exit(127);
  }
  d->pid = pid;
  track(d);

  long long deadline = now_ms() + START_TIMEOUT_MS;
  while (now_ms() < deadline) {
    if (read_ports(ports, &d->tcp_port, &d->http_port) == 0) return 0;
    if (!ts_dproc_alive(d)) {
      snprintf(err, errcap, "tissued exited during start-up (status 0x%x)", d->status);
      ts_dproc_dump_log(d);
      untrack(d);
      remove_dir(d);
      return -1;
    }
    sleep_ms(20);
  }
  snprintf(err, errcap, "tissued wrote no ports file within %d ms", START_TIMEOUT_MS);
  ts_dproc_dump_log(d);
  char why[64];
  ts_dproc_stop(d, 2000, why, sizeof why);
  return -1;
}

int ts_dproc_stop(ts_dproc *d, int timeout_ms, char *why, size_t whycap) {
  if (whycap) why[0] = '\0';
  int result = -1;
  if (d->pid <= 0) {
    snprintf(why, whycap, "no daemon was started");
    return -1;
  }
  if (!d->reaped) {
    kill(d->pid, SIGTERM);
    long long deadline = now_ms() + timeout_ms;
    while (ts_dproc_alive(d) && now_ms() < deadline) sleep_ms(10);
    if (!d->reaped) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &d->status, 0);
      d->reaped = 1;
      snprintf(why, whycap, "tissued did not exit within %d ms of SIGTERM; killed", timeout_ms);
      ts_dproc_dump_log(d);
      untrack(d);
      remove_dir(d);
      return -1;
    }
  }
  if (WIFEXITED(d->status)) {
    result = WEXITSTATUS(d->status);
    if (result != 0) snprintf(why, whycap, "tissued exited with status %d", result);
  } else if (WIFSIGNALED(d->status)) {
    snprintf(why, whycap, "tissued died from signal %d (%s)", WTERMSIG(d->status),
             strsignal(WTERMSIG(d->status)));
  }
  if (result != 0 || getenv("TS_ITEST_VERBOSE")) ts_dproc_dump_log(d);
  untrack(d);
  remove_dir(d);
  return result;
}

void ts_dproc_shared_mesh(const char *name, char *out, size_t cap) {
  const char *env = getenv("TS_SHARED_DIR");
  if (env && env[0]) {
    snprintf(out, cap, "%s/data/meshes/%s", env, name);
    return;
  }
  char src[1024];
  snprintf(src, sizeof src, "%s", __FILE__);
  char *cut = strstr(src, "/tests/integration/");
  if (cut) *cut = 0;
  snprintf(out, cap, "%s/../shared/data/meshes/%s", src, name);
}

char *ts_dproc_http_get(int port, const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
  if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n) {
    close(fd);
    return NULL;
  }
  size_t cap = 1 << 18, len = 0;
  char *out = malloc(cap + 1);
  ssize_t r;
  while (out && len < cap && (r = read(fd, out + len, cap - len)) > 0) len += (size_t)r;
  close(fd);
  if (out) out[len] = 0;
  return out;
}

double ts_dproc_metric_in(const char *page, const char *name) {
  size_t n = strlen(name);
  for (const char *p = page; (p = strstr(p, name)); p += n)
    if ((p == page || p[-1] == '\n') && p[n] == ' ') return atof(p + n + 1);
  return -1;
}

double ts_dproc_metric(int port, const char *name) {
  char *page = ts_dproc_http_get(port, "/metrics");
  if (!page) return -1;
  double v = ts_dproc_metric_in(page, name);
  free(page);
  return v;
}

int ts_dproc_run_suite(Suite *s) {
  ts_dproc_scratch_begin();
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  ts_dproc_scratch_end();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
