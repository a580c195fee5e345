/*
 * ts_tool_proxy.h: the tool the physics steps with is a proxy that follows
 * its controller's commanded pose at a bounded speed, so that no pose a
 * client sends (a teleport deep into the tissue or through it, a jump of
 * metres, opposite extremes every step) reaches the solvers as more than a
 * fast approach, which their contact (the XPBD sweep, the mass-spring
 * projection) resolves. A virtual-coupling idea (Colgate, Stanley and
 * Brown, "Issues in the haptic display of tool use", IROS 1995), here
 * without the spring: the proxy moves straight towards the command by at
 * most max_step per step, and turns towards the commanded orientation by at
 * most max_step / reach radians (no point of the tool moves more than
 * about max_step by the turn); the jaws' opening (0 closed .. 1 open)
 * changes by at most max_step / reach per step, a full stroke moving their
 * tips by about their length.
 */
#ifndef TS_TOOL_PROXY_H
#define TS_TOOL_PROXY_H

#include "ts_tool.h"

/* Largest distance (m) of a point of tool from its tip (pos): the radius
 * for a sphere, length + radius for a capsule or jaws (10 mm jaws when
 * length is 0), the tree's reach for a mesh; at least the radius, and
 * 1e-3 m when nothing finite and positive is known. */
double ts_tool_reach(const ts_tool *tool);

/* Moves proxy's pose (pos, quat) towards the command (pos, quat, jaw): the
 * position along the straight line by at most max_step (m), the orientation
 * along the shortest arc (slerp) by at most max_step / ts_tool_reach(proxy)
 * radians, the opening towards jaw by at most max_step / reach. max_step 0 or INFINITY: the command is taken at
 * once. A zero proxy quaternion counts as the identity. Returns 1 when the
 * proxy reached the command, 0 when it still lags, TS_ENAN (non-finite
 * command, nothing changed) or TS_EINVAL (NULL, negative or NaN max_step). */
int ts_tool_proxy_follow(ts_tool *proxy, const double pos[3], const double quat[4], double jaw,
                         double max_step);

#endif
