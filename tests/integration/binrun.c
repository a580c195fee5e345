/*
 * binrun.c: runs a command-line binary for the integration tests (binrun.h).
 */
#include "binrun.h"

#include "ts_check.h"
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drain(int fd, char *buf, size_t cap, size_t *n, int *open, int *truncated) {
  char tmp[4096];
  ssize_t r = read(fd, tmp, sizeof tmp);
  if (r <= 0) {
    if (r == 0 || (errno != EINTR && errno != EAGAIN)) *open = 0;
    return;
  }
  size_t take = (size_t)r;
  if (*n + take >= cap) {
    take = cap - 1 - *n;
    *truncated = 1;
  }
  memcpy(buf + *n, tmp, take);
  *n += take;
  buf[*n] = 0;
}

void ts_binrun_v(ts_binrun *o, const char *bin, long limit_ms, const char *const *args) {
  ck_assert_msg(bin && *bin, "no binary to run");
  const char *argv[TS_BINRUN_MAX_ARGS + 2];
  int n = 0;
  argv[n++] = bin;
  for (; args[n - 1] && n <= TS_BINRUN_MAX_ARGS; n++) argv[n] = args[n - 1];
  ck_assert_msg(!args[n - 1], "more than %d arguments", TS_BINRUN_MAX_ARGS);
  argv[n] = NULL;
  memset(o, 0, sizeof *o);
  o->status = -1;
  int po[2], pe[2];
  ck_assert_int_eq(pipe(po), 0);
  ck_assert_int_eq(pipe(pe), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(po[1]);
    close(pe[0]);
    close(pe[1]);
    unsetenv("TISSUED_SERVER_KEY");
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  int open_o = 1, open_e = 1;
  long long deadline = now_ms() + limit_ms;
  while ((open_o || open_e) && now_ms() < deadline) {
    struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int r = poll(p, 2, 200);
    if (r < 0 && errno != EINTR) break;
    if (open_o && (p[0].revents & (POLLIN | POLLHUP)))
      drain(po[0], o->out, sizeof o->out, &o->n_out, &open_o, &o->truncated);
    if (open_e && (p[1].revents & (POLLIN | POLLHUP)))
      drain(pe[0], o->err, sizeof o->err, &o->n_err, &open_e, &o->truncated);
  }
  int st = 0;
  if (open_o || open_e) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    ck_abort_msg("%s %s ran longer than %ld ms; stderr: %s", bin, args[0] ? args[0] : "",
                 limit_ms, o->err);
  }
  close(po[0]);
  close(pe[0]);
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  o->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  ck_assert_msg(!o->truncated, "%s: output longer than the test's buffer", bin);
}

double ts_binrun_jnum(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  if (!p) return NAN;
  return strtod(p + strlen(pat), NULL);
}

void ts_binrun_jstr(const char *line, const char *key, char *out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = strstr(line, pat);
  out[0] = 0;
  if (!p) return;
  p += strlen(pat);
  size_t n = 0;
  while (p[n] && p[n] != '"' && n + 1 < cap) n++;
  memcpy(out, p, n);
  out[n] = 0;
}

int ts_binrun_lines(ts_binrun *o, char **v, int cap) {
  int n = 0;
  char *save = NULL;
  for (char *l = strtok_r(o->out, "\n", &save); l && n < cap; l = strtok_r(NULL, "\n", &save)) {
    size_t len = strlen(l);
    ck_assert_msg(len >= 2 && l[0] == '{' && l[len - 1] == '}', "not a JSON object: %s", l);
    v[n++] = l;
  }
  return n;
}
