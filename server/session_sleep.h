/*
 * session_sleep.h: a session's tissue at rest is not stepped.
 *
 * A tissue left alone settles: the default patch's fastest node is under
 * 1e-6 m/s about 0.6 s after a start and at rounding noise (1e-13 m/s)
 * after 2 s, yet each of its steps costs as much as a step under a tool (a
 * fifth to a third of a core at 1 kHz). A classroom's sessions spend most
 * of their time so, waiting for the trainee. As Box2D's bodies sleep once
 * their speed has stayed under a tolerance for half a second, a session's
 * tissue falls asleep when every node has stayed under --sleep-speed for
 * TS_SLEEP_TIME of simulated time with no tool contact and no tool near it;
 * asleep, its steps only advance the simulated time, while its tools still
 * follow their poses, push each other and get their (zero) tissue force,
 * and frames still go out at the frame rate (with the tools' poses and
 * nothing moved).
 *
 * It wakes before a step in which an active tool's box comes within the
 * margin of the box the tissue had when it fell asleep (TS_SLEEP_MARGIN plus
 * two steps of the tool's speed bound, so that a tool moving at
 * tool-max-speed wakes it while still outside), when the tissue is another
 * one (a refinement's install) or is handing over, and on a reset or a
 * pending refinement (ts_session_sleep_wake). Its state is kept as it was,
 * so the step that wakes it goes on from where the tissue stopped; the
 * tools' last poses are forgotten, since they are from before the sleep (a
 * remembered one would look like a tool crossing the whole distance in one
 * step and be swept along it).
 *
 * What sleeping changes: the motion the tissue still had (under the speed
 * on every node for half a second: for the default 1e-6 m/s, a decaying
 * remainder of about 0.1 um) is stopped. tests/unit/test_session_sleep.c
 * checks a press after a sleep against the same press without one.
 * Mass-spring and XPBD sessions sleep (the XPBD patch is under 1e-9 m/s
 * after 0.25 s); quasi-static sessions (a solve to rest per press, not a
 * motion) and sessions with self-contact are stepped as before.
 */
#ifndef TS_SESSION_SLEEP_H
#define TS_SESSION_SLEEP_H

#include <stdint.h>

#include "core/ts_tissue.h"
#include "core/ts_tool.h"
#include "core/ts_tool_contact.h"

#define TS_SLEEP_SPEED_DEFAULT 1e-6 /* m/s, --sleep-speed */
#define TS_SLEEP_TIME 0.5           /* simulated s every node stays under it */
#define TS_SLEEP_MARGIN 0.002       /* m around the tissue's box a tool wakes it within */
#define TS_SLEEP_EVERY 8            /* steps between two looks at the speeds */

typedef struct ts_session_sleep {
  double speed;            /* m/s: fall asleep under it; 0: never */
  double margin;           /* m: TS_SLEEP_MARGIN + 2 steps of the tool speed bound */
  double still;            /* simulated s under the speed with nothing near */
  uint32_t count;          /* steps since the last look */
  int asleep;
  int woke;                /* woken by ts_session_sleep_wake, not yet told */
  const ts_tissue *tissue; /* the tissue that fell asleep */
  uint32_t n_nodes;
  double lo[3], hi[3];     /* its box then, grown by margin */
  uint64_t slept_steps;    /* steps not computed */
  uint64_t sleeps;         /* times it fell asleep */
} ts_session_sleep;

/* speed: m/s (0: never sleep); max_step: m a tool may move in a step (0: no
 * bound). */
void ts_session_sleep_init(ts_session_sleep *s, double speed, double max_step);

/* Before a step, with this step's tool poses placed in tc
 * (ts_tool_contact_step run): TS_SLEEP_ASLEEP when the tissue stays asleep
 * through it (the caller then does not step it: ts_session_sleep_skip_step),
 * TS_SLEEP_AWAKE when it was awake, TS_SLEEP_WOKE when it wakes now or
 * ts_session_sleep_wake woke it since the last check: the caller steps it
 * after making its solver forget the tools' last poses
 * (ts_massspring_carry_tools(t, NULL); an XPBD session's
 * ts_session_contact_reset). Call it before every step of a session that
 * may sleep (tc needs placing only while s->asleep). */
enum { TS_SLEEP_AWAKE = 0, TS_SLEEP_ASLEEP = 1, TS_SLEEP_WOKE = 2 };
int ts_session_sleep_check(ts_session_sleep *s, const ts_tissue *t, ts_tool_contact *tc,
                           const ts_tool *tools, uint32_t n);

/* The step of a sleeping tissue: the time advances by dt, the active tools
 * feel no tissue. */
void ts_session_sleep_skip_step(ts_session_sleep *s, ts_tissue *t, ts_tool *tools, uint32_t n,
                                double dt);

/* After a step that was taken (tc placed for it, contacts the tissue's
 * contacts in it): counts the time the tissue stayed still and puts it to
 * sleep after TS_SLEEP_TIME. */
void ts_session_sleep_after(ts_session_sleep *s, const ts_tissue *t, ts_tool_contact *tc,
                            const ts_tool *tools, uint32_t n, uint32_t contacts, double dt);

/* Something else moves the tissue (a reset, a refinement): awake, and the
 * still time starts again; the next ts_session_sleep_check says
 * TS_SLEEP_WOKE when it was asleep. */
void ts_session_sleep_wake(ts_session_sleep *s);

#endif
