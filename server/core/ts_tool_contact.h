/*
 * ts_tool_contact.h: tool against tool in a session (issue 5: "Tool against
 * tool uses OBB against OBB"). Every physics step each pair of active tools
 * is tested by ts_collide_tool_tool: the root boxes first, and only where
 * they overlap both OBB trees are descended (15-axis separating-axis test)
 * down to exact feature tests (sphere/capsule cores, jaw boxes, mesh
 * triangles), giving contact points, normals and depths.
 *
 * Response: tools are kinematic (their poses come from the controllers), so
 * neither is moved; each gets a penalty force from the other, equal and
 * opposite, with its moment about the tool's tip (pos). The caller adds it
 * to the tissue's reaction (ts_tool force and torque) in front of the
 * tool's haptic filter (ts_force_filter.h), so that touching or parting
 * does not reach the hand as a spike. (Kept apart rather than added into
 * ts_tool.force: the quasi-static solve leaves a tool's force as it was
 * between its solves, where an addition would pile up.) Per pair of tools one penalty:
 *   F (on the second tool) = k * d_max * n,  F (on the first) = -F,
 * d_max the deepest contact's depth, n the depth-weighted mean of the
 * contacts' unit normals (from the first tool into the second) normalised,
 * applied at the depth-weighted mean of the contact points. Summing k d over
 * every leaf contact instead would make two meshes push harder the finer
 * they are triangulated; the deepest depth is what a penalty on the
 * overlapping volume's extent gives for two convex shapes (two spheres: the
 * one contact, k (r_a + r_b - |c_b - c_a|) along the centre line).
 *
 * Not swept: the tissue contact sweeps a tool between its last two poses so
 * that it cannot pass through a sheet of tissue unseen, since the tissue is
 * then pushed out on the wrong side for good. Between two tools nothing is
 * moved and nothing is kept: the force is a function of the poses the step
 * ends at. Two proxies approach each other by at most 2 tool-max-speed dt
 * per step (2 mm at the defaults, 1 m/s and 1 ms), less than the thickness
 * of the default tools (10 mm spheres, the jaws 3 mm closed), so these
 * cannot cross between two steps without a step of overlap; two thinner
 * parts (a dental probe's tip) driven through each other at full speed can,
 * and a sweep would then report a contact for the one step they crossed
 * in: a single step's push, of which the 30 Hz filter passes a sixth,
 * nothing a hand feels, at the price of up to 64 descents per pair and
 * step. So the test is at the step's poses only.
 *
 * Tools put down together: a session parks every tool it takes, releases or
 * puts back at rest at one spot above the tissue, so two such tools
 * overlap completely until their controllers move them apart. A tool
 * parked there (ts_tool_contact_park) feels no other tool it overlaps from
 * then on until the two have been found apart once; afterwards they meet
 * as any pair. Without this, two controllers that just joined would be
 * pushed with k (r_a + r_b) (10 N for two 5 mm spheres) before touching
 * anything.
 *
 * No allocation per step: a tool's tree and placed copy are built when its
 * shape changes (a join), as the session's tissue contact does.
 */
#ifndef TS_TOOL_CONTACT_H
#define TS_TOOL_CONTACT_H

#include <stdint.h>

#include "ts_collide.h"
#include "ts_obb_tree.h"
#include "ts_tool.h"

/* Default penalty stiffness, N/m: 1 N per mm of overlap. Two steel
 * instruments are far stiffer than anything a desk haptic device can show;
 * such devices render walls stably up to about 1-2 N/mm (Geomagic Touch
 * 1.26 N/mm on its x axis, Touch X 1.86 N/mm, manufacturers' figures), so
 * the harder wall is the device's limit, not the metal's. The tissue as a
 * tool feels it is 15 to 60 times softer (a 5 mm sphere 3 mm into the
 * patch: 0.047 N, itest_force; the dental probe 2 mm in: 0.13-0.14 N,
 * README), so the other instrument is felt as the hard thing it is, not as
 * more tissue. A proxy moving at tool-max-speed (1 m/s at the default, 1 mm
 * per 1 ms step) into another changes the raw force by at most 1 N a step,
 * of which the 30 Hz filter passes a sixth. */
#define TS_TOOL_CONTACT_STIFFNESS_DEFAULT 1000.0

/* The range a session may choose (CreateSession.tool_stiffness, the
 * daemon's --tool-stiffness), N/m: 0.1 to 20 N/mm. Below 0.1 N/mm the other
 * instrument is hardly harder than the tissue (0.016-0.07 N/mm above) and
 * two default 5 mm spheres would overlap their whole diameter before
 * pushing 1 N; above 20 N/mm, ten times the stiffest desk device quoted
 * above, the wall is one no such device renders stably at a 1 kHz servo
 * rate (it buzzes at contact), and a proxy at top speed changes the raw
 * force by 20 N a step. ts_tool_contact_init itself takes any k > 0. */
#define TS_TOOL_CONTACT_STIFFNESS_MIN 100.0
#define TS_TOOL_CONTACT_STIFFNESS_MAX 20000.0

/* 0 when k is 0 (the default) or within [MIN, MAX], else TS_ERANGE (NaN and
 * infinities included). */
int ts_tool_contact_stiffness_check(double k);

/* Contacts kept per pair of tools (two meshes crossing may touch at many
 * triangle pairs; more are counted, the first this many decide the force). */
#define TS_TOOL_CONTACT_CAP 4096

typedef struct ts_tool_contact_slot {
  ts_obb_tree *tree;        /* NULL: not built */
  int owns_tree;            /* built here (primitives); a mesh tool's tree is its shape */
  int kind;                 /* TS_TOOL_* the tree was built for */
  double radius, length;
  const ts_obb_tree *shape;
  ts_posed_tool pt;
  int placed;               /* active and placed at its pose this step */
  double force[3];          /* out: the other tools' push on it in the last step, N */
  double torque[3];         /* out: its moment about the tool's tip (pos), N m */
  uint32_t touching;        /* out: other tools pushing it in the last step (pairs in
                               contact and not left out; ToolForce.tool_contacts) */
} ts_tool_contact_slot;

typedef struct ts_tool_contact {
  double stiffness;         /* k, N/m (> 0) */
  uint32_t n_slots;
  ts_tool_contact_slot *slot;
  ts_contacts buf;          /* the contacts of the last pair tested */
  uint8_t *parked;          /* n_slots^2: pair (i, j) left out until found apart */
  /* the last step */
  uint32_t pairs;           /* pairs of tools in contact */
  uint32_t contacts;        /* their contacts (leaf pairs that touch, all counted) */
  uint32_t parked_pairs;    /* pairs in contact but left out (ts_tool_contact_park) */
  uint64_t box_tests;       /* OBB pair tests (1 per pair of tools when all are apart) */
} ts_tool_contact;

/* Room for tools 0..n_tools-1, stiffness k (N/m; 0 means the default).
 * Returns 0, TS_EINVAL (NULL, n_tools 0, k negative or not finite) or
 * TS_ENOMEM. */
int ts_tool_contact_init(ts_tool_contact *tc, uint32_t n_tools, double k);
void ts_tool_contact_free(ts_tool_contact *tc);

/* Tool i was put at the parking spot: every pair it is in is left out
 * until found apart (see above). i out of range is ignored. */
void ts_tool_contact_park(ts_tool_contact *tc, uint32_t i);

/* One step: every pair of active tools among tools[0..n-1] (n <= n_slots)
 * at their current poses (pos, quat, jaw) is tested, and each slot's force
 * and torque become the sum of the penalties of the pairs it is in (0 for a
 * tool touching none, inactive, or left out), its `touching` the number of
 * those pairs. tools[] is only read. A tool
 * whose shape changed gets its tree first. Returns 0, TS_EINVAL (NULL, n over n_slots, a mesh tool
 * without its shape), TS_ENOMEM (building a tree), or an error of placing a
 * tool (TS_ENAN, TS_EQUAT: a bad pose; that tool is then left out). The
 * forces stay finite whatever the poses (coincident tools included). */
int ts_tool_contact_step(ts_tool_contact *tc, const ts_tool *tools, uint32_t n);

/* The penalty of one pair from its contacts (normals from a into b): f_b
 * on the second tool, f_a = -f_b on the first, and their moments about
 * tip_a and tip_b (m). Contacts with a non-finite field are left out.
 * Returns 1 when there was a force (some contact), 0 otherwise (all set to
 * 0). */
int ts_tool_contact_penalty(const ts_contact *c, uint32_t n, double k, const double tip_a[3],
                            const double tip_b[3], double f_a[3], double t_a[3], double f_b[3],
                            double t_b[3]);

#endif
