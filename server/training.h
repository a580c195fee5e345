/*
 * training.h: training a quasi-static session's learned shortcut (issue 6)
 * off the physics thread: the session's samples (a copy made between two
 * steps) go to the storage worker, which trains theta by gradient descent
 * (ts_learn.h) on four fifths of them, measures the error on the last fifth
 * (held out: the latest presses), stores the model in SQLite under the
 * session's tissue and material, and reports progress to every client of the
 * session as TrainingProgress messages (kept, and replayed to clients that
 * join later). The model then goes into the
 * session's mailbox and answers from the next step on. Loop thread.
 */
#ifndef TS_TRAINING_H
#define TS_TRAINING_H

#include "core/ts_learn.h"
#include "session.h"
#include "tissue.pb-c.h"

/* Takes set (a copy of se's samples) and trains on it: the kind se asked
 * for (TrainShortcut), or the method's model when `automatic` (the session
 * reached train-after-samples). Too few samples end it at once with a
 * TrainingProgress carrying the error. */
void ts_training_start(ts_session *se, ts_learn_set *set, int automatic);

/* Sends a TrainingProgress to every client of se, and keeps it as a report
 * of se's last training (session.h, train_hist). */
void ts_training_send(ts_session *se, const Tissued__V1__TrainingProgress *p);

/* Sends client c (just joined) the reports of se's last training, oldest
 * first, without a request id: a page that joins after a training (or
 * during one) draws its loss and knows its outcome. Nothing when se has not
 * trained. */
void ts_training_replay(ts_session *se, ts_conn *c);

#endif
