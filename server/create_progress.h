/*
 * create_progress.h: what a session's creation is doing, for the client
 * that asked to hear (CreateSession.progress): each creation in flight is
 * tracked on the loop thread in the server's list, in the order they were
 * asked; the threads that build it set its stage; a timer that runs while
 * the list is not empty sends each asking client a CreateProgress once a
 * second, from the first second on (tissue.proto says what it holds).
 */
#ifndef TS_CREATE_PROGRESS_H
#define TS_CREATE_PROGRESS_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct ts_server ts_server;

typedef struct ts_create_track {
  struct ts_create_track *next, *prev; /* the server's list (loop thread) */
  uint64_t conn_id, rid;               /* who asked, and its request */
  uint64_t start_ms;                   /* ts_now_ms when it was taken */
  uint64_t next_ms;                    /* when its next report is due */
  int wants;                           /* CreateSession.progress */
  atomic_int stage;                    /* Tissued__V1__CreateProgress__Stage (any thread) */
} ts_create_track;

/* Loop thread, at the server's start and stop: the reports' timer. */
int ts_create_progress_init(ts_server *s);
void ts_create_progress_close(ts_server *s);
/* Loop thread: t (in a job that outlives it) joins the list at QUEUED. */
void ts_create_track_begin(ts_server *s, ts_create_track *t, uint64_t conn_id, uint64_t rid,
                           int wants);
/* Loop thread: t leaves the list (the creation's reply is being sent). */
void ts_create_track_end(ts_server *s, ts_create_track *t);
/* Any thread: the creation entered `stage`. */
void ts_create_track_set(ts_create_track *t, int stage);

#endif
