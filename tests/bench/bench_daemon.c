/*
 * bench_daemon.c: a real tissued for the daemon benchmarks (bench_daemon.h).
 */
#include "bench_daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void ts_bench_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int read_ports(ts_bench_daemon *d) {
  FILE *f = fopen(d->ports, "r");
  if (!f) return -1;
  char buf[128] = "";
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return sscanf(buf, "{\"tcp\":%d,\"http\":%d}", &d->tcp, &d->http) == 2 ? 0 : -1;
}

int ts_bench_daemon_start(ts_bench_daemon *d, const char *bin, const char *key,
                          const char *const *extra) {
  memset(d, 0, sizeof d[0]);
  snprintf(d->dir, sizeof d->dir, "/tmp/bench-daemon-XXXXXX");
  if (!mkdtemp(d->dir)) return -1;
  snprintf(d->ports, sizeof d->ports, "%s/ports.json", d->dir);
  const char *argv[64];
  int k = 0;
  const char *fixed[] = {"tissued",     "--host",       "127.0.0.1", "--tcp-port", "0",
                         "--http-port", "0",            "--data-dir", d->dir,      "--ports-file",
                         d->ports,      "--log-level",  "warn",      "--server-key", key};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[k++] = fixed[i];
  for (int i = 0; extra && extra[i] && k < 63; i++) argv[k++] = extra[i];
  argv[k] = NULL;
  pid_t pid = fork();
  if (pid < 0) {
    ts_bench_daemon_stop(d);
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  d->pid = pid;
  for (int i = 0; i < 200; i++) { /* 20 s */
    struct stat st;
    if (stat(d->ports, &st) == 0 && st.st_size > 0 && read_ports(d) == 0) return 0;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      d->pid = 0;
      break;
    }
    ts_bench_sleep_ms(100);
  }
  ts_bench_daemon_stop(d);
  return -1;
}

void ts_bench_daemon_stop(ts_bench_daemon *d) {
  if (d->pid > 0) {
    kill(d->pid, SIGTERM);
    int status;
    for (int i = 0; i < 100 && waitpid(d->pid, &status, WNOHANG) == 0; i++) ts_bench_sleep_ms(100);
    if (waitpid(d->pid, &status, WNOHANG) == 0) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &status, 0);
    }
    d->pid = 0;
  }
  if (!d->dir[0]) return;
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
  if (system(cmd) != 0) fprintf(stderr, "bench: could not remove %s\n", d->dir);
  d->dir[0] = '\0';
}

size_t ts_bench_daemon_get(const ts_bench_daemon *d, const char *path, char *page, size_t cap) {
  if (!cap) return 0;
  page[0] = '\0';
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d->http)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                   path);
  if (n < 0 || (size_t)n >= sizeof req || connect(fd, (struct sockaddr *)&a, sizeof a) ||
      write(fd, req, (size_t)n) < 0) {
    close(fd);
    return 0;
  }
  size_t len = 0;
  ssize_t r;
  while (len < cap - 1 && (r = read(fd, page + len, cap - 1 - len)) > 0) len += (size_t)r;
  close(fd);
  page[len] = '\0';
  return len;
}

double ts_bench_metric_sum(const char *page, const char *name) {
  char pat[128];
  snprintf(pat, sizeof pat, "\n%s", name);
  const size_t pl = strlen(pat);
  double sum = 0;
  int seen = 0;
  for (const char *p = page; (p = strstr(p, pat)); p += pl) {
    const char *v = p + pl;
    if (*v == '{') v = strchr(v, '}');
    if (!v || (v[0] != ' ' && v[0] != '}')) continue; /* a longer name */
    if (*v == '}') v++;
    sum += atof(v);
    seen = 1;
  }
  return seen ? sum : -1;
}

int ts_bench_sessions_args(int argc, char **argv, const char *name, int max, int *quick,
                           int *full, int counts[8], int *n) {
  *quick = *full = *n = 0;
  for (int i = 1; i < argc; i++) {
    int k = 0;
    if (strcmp(argv[i], "--quick") == 0) {
      *quick = 1;
    } else if (strcmp(argv[i], "--full") == 0) {
      *full = 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("usage: %s [--quick | --full] [sessions-N ...] (N: 1..%d)\n", name, max);
      return 1;
    } else if (sscanf(argv[i], "sessions-%d", &k) == 1 && k >= 1 && k <= max && *n < 8) {
      counts[(*n)++] = k;
    } else {
      fprintf(stderr, "%s: unknown argument '%s' (sessions-N, N 1..%d)\n", name, argv[i], max);
      return 2;
    }
  }
  return 0;
}
