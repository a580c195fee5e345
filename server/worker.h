/*
 * worker.h: the daemon's background workers: each one thread that runs jobs
 * in order, so that SQLite (the storage worker owns the handle), building
 * a new session's tissue (the builder, create.c) and live refinements (the
 * refiner, refine.c) never block the loop thread. A job's work()
 * runs on the worker thread; its done() runs afterwards on the loop thread.
 * A job must not touch loop-thread state in work(); connections are named by
 * id in jobs and looked up again in done(), since a client may leave meanwhile.
 */
#ifndef TS_WORKER_H
#define TS_WORKER_H

#include <uv.h>

typedef struct ts_storage ts_storage;
typedef struct ts_job ts_job;

struct ts_job {
  void (*work)(ts_job *j, ts_storage *st);  /* worker thread */
  void (*done)(ts_job *j);                   /* loop thread; frees the job */
  ts_job *next;
};

typedef struct ts_worker {
  uv_thread_t thread;
  uv_mutex_t lock;
  uv_cond_t cond;
  uv_async_t async;
  ts_job *todo_head, *todo_tail;  /* under lock */
  ts_job *done_head, *done_tail;  /* under lock */
  ts_storage *storage;
  int stop;
  int started;
  int nice;         /* the thread's niceness (0: the process's) */
  const char *name; /* for the log */
} ts_worker;

/* Starts the thread. nice (1..19; 0 none) is added to its niceness, so
 * that where the cores are contended it takes what the others leave (a
 * warning is logged if the system refuses; it then runs at the normal
 * priority). name (at most 15 bytes, a literal) is what top -H and
 * /proc/PID/task/TID/comm show. */
int ts_worker_start(ts_worker *w, uv_loop_t *loop, ts_storage *st, int nice, const char *name);
/* Queues a job (any thread: the loop, or a physics thread handing a
 * refinement over, refine.c). */
void ts_worker_submit(ts_worker *w, ts_job *j);
/* Worker thread, from inside a job's work(): hands j (which has no work of
 * its own) to the loop, where its done() runs soon, before the running job
 * ends: progress reports of a long job. */
void ts_worker_post(ts_worker *w, ts_job *j);
/* Loop thread: finishes the queued jobs (their done() runs), joins the
 * thread, and closes the wake-up handle. */
void ts_worker_stop(ts_worker *w);

#endif
