/*
 * thread_self.h: how the daemon's own threads present themselves: a name
 * that top -H and /proc/PID/task/TID/comm show (tissued-phys0,
 * tissued-slow0, tissued-build, ...), and a niceness of their own for the
 * ones that yield to the physics (the builder, the slow physics threads);
 * and the CPU time a thread has used.
 */
#ifndef TS_THREAD_SELF_H
#define TS_THREAD_SELF_H

#include <stdint.h>

/* Names the calling thread (at most 15 characters are kept) and adds nice
 * (1..19; 0 none) to its niceness, which needs no privilege; a failure is
 * logged and the thread keeps the process's priority. */
void ts_thread_self_setup(const char *name, int nice);

/* CPU time the calling thread has used, ns (0 when the clock fails): what
 * the slow-lane meter (lane.h) and a new session's trial
 * (session_trial.h) measure. */
uint64_t ts_thread_self_cpu_ns(void);

#endif
