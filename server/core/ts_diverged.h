/*
 * ts_diverged.h: the divergence tests a solver's step reports (which one
 * fired), shared by the mass-spring step (ts_ms_diverge.c) and the XPBD
 * step (ts_xpbd_diverge.c), so that the daemon's log and its Error to the
 * clients can name the reason whatever the solver.
 */
#ifndef TS_DIVERGED_H
#define TS_DIVERGED_H

enum {
  TS_DIVERGED_NONE = 0,
  TS_DIVERGED_POSITION = 1, /* a node's position is not finite */
  TS_DIVERGED_VELOCITY = 2, /* a node's velocity is not finite */
  TS_DIVERGED_SPEED = 3,    /* a node is faster than any tissue moves */
  TS_DIVERGED_GROWTH = 4    /* the kinetic energy grew geometrically (mass-spring) */
};

#endif
