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

/* The niceness of pid's first thread named name in *nice. Returns 1 when
 * there is one, 0 when there is none, -1 when /proc could not be read. */
static inline int ts_thread_nice(pid_t pid, const char *name, long *nice) {
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
    /* after "(comm)": state is field 3, nice field 19 */
    const char *p = strrchr(stat, ')');
    if (!p) continue;
    p += 2;
    for (int field = 3; p && field < 19; field++) {
      p = strchr(p, ' ');
      if (p) p++;
    }
    if (!p) continue;
    *nice = strtol(p, NULL, 10);
    found = 1;
  }
  closedir(d);
  return found;
}

#endif
