/*
 * worker.c: the serial background worker (see worker.h).
 */
#include "worker.h"

#include <string.h>

#include "thread_self.h"

static void push(ts_job **head, ts_job **tail, ts_job *j) {
  j->next = NULL;
  if (*tail)
    (*tail)->next = j;
  else
    *head = j;
  *tail = j;
}

static void worker_main(void *arg) {
  ts_worker *w = arg;
  ts_thread_self_setup(w->name, w->nice);
  uv_mutex_lock(&w->lock);
  for (;;) {
    while (!w->todo_head && !w->stop) uv_cond_wait(&w->cond, &w->lock);
    ts_job *j = w->todo_head;
    if (!j) break; /* stop with nothing left to do */
    w->todo_head = j->next;
    if (!w->todo_head) w->todo_tail = NULL;
    uv_mutex_unlock(&w->lock);
    j->work(j, w->storage);
    uv_mutex_lock(&w->lock);
    push(&w->done_head, &w->done_tail, j);
    uv_async_send(&w->async);
  }
  uv_mutex_unlock(&w->lock);
}

static void run_done(ts_worker *w) {
  uv_mutex_lock(&w->lock);
  ts_job *j = w->done_head;
  w->done_head = w->done_tail = NULL;
  uv_mutex_unlock(&w->lock);
  while (j) {
    ts_job *next = j->next;
    j->done(j);
    j = next;
  }
}

static void on_async(uv_async_t *a) { run_done(a->data); }

int ts_worker_start(ts_worker *w, uv_loop_t *loop, ts_storage *st, int nice,
                    const char *name) {
  memset(w, 0, sizeof *w);
  w->storage = st;
  w->nice = nice;
  w->name = name;
  if (uv_mutex_init(&w->lock)) return -1;
  if (uv_cond_init(&w->cond)) {
    uv_mutex_destroy(&w->lock);
    return -1;
  }
  if (uv_async_init(loop, &w->async, on_async)) {
    uv_cond_destroy(&w->cond);
    uv_mutex_destroy(&w->lock);
    return -1;
  }
  w->async.data = w;
  if (uv_thread_create(&w->thread, worker_main, w)) {
    uv_close((uv_handle_t *)&w->async, NULL);
    uv_cond_destroy(&w->cond);
    uv_mutex_destroy(&w->lock);
    return -1;
  }
  w->started = 1;
  return 0;
}

void ts_worker_submit(ts_worker *w, ts_job *j) {
  uv_mutex_lock(&w->lock);
  push(&w->todo_head, &w->todo_tail, j);
  uv_cond_signal(&w->cond);
  uv_mutex_unlock(&w->lock);
}

void ts_worker_post(ts_worker *w, ts_job *j) {
  uv_mutex_lock(&w->lock);
  push(&w->done_head, &w->done_tail, j);
  uv_async_send(&w->async);
  uv_mutex_unlock(&w->lock);
}

void ts_worker_stop(ts_worker *w) {
  if (!w->started) return;
  uv_mutex_lock(&w->lock);
  w->stop = 1;
  uv_cond_signal(&w->cond);
  uv_mutex_unlock(&w->lock);
  uv_thread_join(&w->thread); /* the queue is drained first: writes finish */
  run_done(w);
  uv_close((uv_handle_t *)&w->async, NULL);
  uv_cond_destroy(&w->cond);
  uv_mutex_destroy(&w->lock);
  w->started = 0;
}
