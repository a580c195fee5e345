/*
 * proc_threads.h: a daemon's threads by name, read from /proc/PID/task/TID
 * (comm and stat), for the tests that check which threads it runs and at
 * what priority (itest_create.c: the builder; itest_lanes.c: the slow
 * physics thread). The daemon names its threads with prctl(PR_SET_NAME):
 * tissued-phys0, ..., tissued-slow, tissued-build, tissued-store,
 * tissued-refine.
 */
#ifndef TS_PROC_THREADS_H
#define TS_PROC_THREADS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* Field `field` (1-based, proc(5): 14 utime, 15 stime, 19 nice) of the
 * stat line of pid's first thread named name, in *value. Returns 1 when
 * there is such a thread, 0 when there is none, -1 when /proc could not be
 * read. */
static inline int ts_thread_stat(pid_t pid, const char *name, int field, long *value) {
  char dirpath[64];
  snprintf(dirpath, sizeof dirpath, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dirpath);
  if (!d) return -1;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[600], comm[64] = "", stat[1024] = "";
    snprintf(path, sizeof path, "%s/%s/comm", dirpath, e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* the thread ended meanwhile */
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
    fclose(f);
    if (strcmp(comm, name) != 0) continue;
    snprintf(path, sizeof path, "%s/%s/stat", dirpath, e->d_name);
    f = fopen(path, "r");
    const int ok = f && fgets(stat, sizeof stat, f);
    if (f) fclose(f);
    if (!ok) continue;
    /* after "(comm)" comes field 3 */
    const char *p = strrchr(stat, ')');
    if (!p) continue;
    p += 2;
    for (int k = 3; p && k < field; k++) {
      p = strchr(p, ' ');
      if (p) p++;
    }
    if (!p) continue;
    *value = strtol(p, NULL, 10);
    found = 1;
  }
  closedir(d);
  return found;
}

/* The niceness of pid's first thread named name (ts_thread_stat). */
static inline int ts_thread_nice(pid_t pid, const char *name, long *nice) {
  return ts_thread_stat(pid, name, 19, nice);
}

/* Its CPU time so far, in clock ticks (utime + stime). */
static inline int ts_thread_ticks(pid_t pid, const char *name, long *ticks) {
  long u = 0, st = 0;
  int rc = ts_thread_stat(pid, name, 14, &u);
  if (rc == 1) rc = ts_thread_stat(pid, name, 15, &st);
  *ticks = u + st;
  return rc;
}

#endif
