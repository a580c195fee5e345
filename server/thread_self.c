/*
 * thread_self.c: a daemon thread's name and niceness (see thread_self.h).
 */
#include "thread_self.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

void ts_thread_self_setup(const char *name, int nice) {
  prctl(PR_SET_NAME, name, 0, 0, 0);
  /* this thread only (Linux: a thread id names one thread) */
  if (nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice) != 0)
    ts_log_warn("the %s thread keeps the normal priority: setpriority: %s", name,
                strerror(errno));
}

uint64_t ts_thread_self_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
