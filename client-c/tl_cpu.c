/*
 * tl_cpu.c: the CPU time tissueload reports with --daemon-pid: its own and
 * the daemon's per thread, over the measured time.
 */
#include "tl_run.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* CPU seconds (user + system) of this process. */
static double self_cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru)) return 0;
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

void tl_cpu_take(int pid, cpu_snap *c) {
  c->self_s = self_cpu_s();
  c->n = 0;
  if (pid <= 0) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return;
  long tick = sysconf(_SC_CLK_TCK);
  struct dirent *de;
  while ((de = readdir(d)) && c->n < TL_MAX_THREADS) {
    int tid = atoi(de->d_name);
    if (tid <= 0) continue;
    char sp[96], buf[1024];
    snprintf(sp, sizeof sp, "/proc/%d/task/%d/stat", pid, tid);
    FILE *f = fopen(sp, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* fields after the command name, which is in parentheses and may hold spaces */
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
      continue;
    c->tid[c->n] = tid;
    c->s[c->n++] = (double)(ut + st) / (double)(tick > 0 ? tick : 100);
  }
  closedir(d);
}

/* Adds {"load_cpu_cores":.., "daemon_cpu_cores":{"total":..,"loop":..,"threads":[..]}}:
 * cores used between the two snapshots (the daemon's main thread is its
 * network loop; the others, busiest first, its physics threads and worker). */
void tl_cpu_report(cJSON *j, int pid, const cpu_snap *a, const cpu_snap *b, double secs) {
  if (!(secs > 0)) return;
  cJSON_AddNumberToObject(j, "load_cpu_cores", (b->self_s - a->self_s) / secs);
  if (pid <= 0) return;
  if (!a->n || !b->n) { /* checked at the start: the process went away meanwhile */
    cJSON_AddStringToObject(j, "daemon_cpu_error", "the --daemon-pid process could not be read");
    return;
  }
  double use[TL_MAX_THREADS], total = 0, loop = 0;
  int n = 0;
  for (int i = 0; i < b->n; i++) {
    double was = 0;
    for (int k = 0; k < a->n; k++)
      if (a->tid[k] == b->tid[i]) was = a->s[k];
    double u = (b->s[i] - was) / secs;
    total += u;
    if (b->tid[i] == pid) loop = u;
    else use[n++] = u;
  }
  for (int i = 1; i < n; i++) /* busiest first */
    for (int k = i; k > 0 && use[k] > use[k - 1]; k--) {
      double t = use[k];
      use[k] = use[k - 1];
      use[k - 1] = t;
    }
  cJSON *d = cJSON_AddObjectToObject(j, "daemon_cpu_cores");
  cJSON_AddNumberToObject(d, "total", total);
  cJSON_AddNumberToObject(d, "loop", loop);
  cJSON *t = cJSON_AddArrayToObject(d, "threads");
  for (int i = 0; i < n; i++)
    if (use[i] >= 0.005) cJSON_AddItemToArray(t, cJSON_CreateNumber(use[i]));
}
