/*
 * worker.h: the daemon's background worker: one thread that runs jobs in
 * order, so that SQLite (whose handle it owns) and slow set-up work (building
 * a tissue, fitting a material) never block the loop thread. A job's work()
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
} ts_worker;

int ts_worker_start(ts_worker *w, uv_loop_t *loop, ts_storage *st);
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
