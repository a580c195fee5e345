/*
 * session.h: a live tissue session. Its parts have different owners:
 *   - the loop thread owns the registry fields, the client list, tool
 *     ownership, the newest frame and the topology;
 *   - one physics thread owns `sim` (the tissue and tools) from ts_physics_add
 *     until it reports the session removed;
 *   - `mbox` is the only shared part: the loop writes the latest pose per tool
 *     and commands, the physics thread reads them at the start of a step.
 */
#ifndef TS_SESSION_H
#define TS_SESSION_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "conn.h"
#include "core/ts_force_filter.h"
#include "core/ts_learn.h"
#include "core/ts_massspring.h"
#include "core/ts_tool_contact.h"
#include "core/ts_xpbd.h"
#include "frame.h"
#include "lane.h"
#include "session_sleep.h"
#include "topology.h"


/* Latest request per tool; "latest pose wins". */
typedef struct ts_mailbox_tool {
  int dirty;           /* set by the loop, cleared by physics */
  int active;
  int kind;            /* TS_TOOL_* */
  double radius, length;
  const struct ts_obb_tree *shape; /* TS_TOOL_MESH: the server's tree (tool_meshes.h) */
  double pos[3];
  double quat[4];
  double jaw;
  uint64_t seq;
  uint64_t client_time_us;
  uint32_t force_every;  /* steps between force samples for its controller; 0: none */
  int parked;          /* taken or released: the physics puts the tool at pos at once */
  double mu_static, mu_kinetic; /* Coulomb friction on the tissue (ts_tool.h) */
} ts_mailbox_tool;

typedef struct ts_mailbox {
  uv_mutex_t lock;
  ts_mailbox_tool tool[TS_MAX_TOOLS];
  int reset;           /* put the tissue back at rest */
  /* quasi-static sessions (shortcut.h) */
  int train_request;   /* loop: copy the samples for training */
  int use_learned;     /* loop: -1 keep, 0 solve, 1 the model */
  int model_ready;     /* loop: install `model` (then it answers) */
  ts_learn_model model;
  uint64_t samples;    /* physics: samples recorded so far */
  int learned;         /* physics: the model answers */
  uint64_t model_answers, model_rejected; /* physics: ts_shortcut's counts */
  uint64_t qs_solves, qs_unconverged; /* physics: presses solved, of them at the cap */
  double qs_worst_residual;           /* physics: largest final max |R|, N */
  struct ts_refine_req *refine; /* loop: a RefineRegion to run between two steps (refine.c) */
} ts_mailbox;

/* Physics-thread state. */
typedef struct ts_session_sim {
  ts_tissue *tissue;
  ts_xpbd *xpbd;             /* the position-based solver, when chosen */
  ts_xpbd_def xpbd_def;      /* its settings (a refinement rebuilds it with them) */
  struct ts_session_contact *contact; /* its tree-based tool contact (session_contact.h) */
  struct ts_session_self *self; /* tissue self-contact (session_self.h), when
                                   CreateSession.self_contact asked for it; NULL: off */
  struct ts_refine_src *refine_src; /* what the tissue is rebuilt from when refined
                                       (core/ts_refine.h); NULL: not refinable */
  struct ts_shortcut *shortcut; /* quasi-static sessions: solve and learned model (shortcut.h) */
  uint64_t rest_epoch;       /* times the tissue was put back at rest (a reset, a recovery):
                                a refinement made on an earlier state is not installed (refine.c) */
  uint32_t train_after;      /* samples after which training starts by itself; 0: never */
  int auto_trained;          /* that happened */
  ts_learn_set *samples_out; /* a copy of the samples for physics.c to hand to the loop */
  int samples_out_auto;      /* ... because of train_after */
  int samples_full_out;      /* recording just stopped (1 full, 2 out of memory:
                                ts_shortcut_stats): physics.c tells the loop */
  ts_tool tools[TS_MAX_TOOLS];  /* the proxies the solver steps with (ts_tool_proxy.h) */
  ts_tool_contact tool_contact; /* tool against tool (core/ts_tool_contact.h), every solver */
  ts_session_sleep sleep;    /* a tissue at rest is not stepped (session_sleep.h) */
  double cmd_pos[TS_MAX_TOOLS][3];  /* the controllers' latest poses, which they follow */
  double cmd_quat[TS_MAX_TOOLS][4];
  double cmd_jaw[TS_MAX_TOOLS];
  double max_step;           /* m a tool moves at most per step (tool-max-speed * dt); 0: no bound */
  uint64_t last_pose_seq[TS_MAX_TOOLS];
  uint64_t last_client_time_us[TS_MAX_TOOLS];
  uint32_t force_every[TS_MAX_TOOLS];        /* force samples: every k-th step; 0 none */
  ts_force_filter force_filter[TS_MAX_TOOLS];
  double force_out[TS_MAX_TOOLS][3];         /* filtered reaction on each tool, N */
  double torque_out[TS_MAX_TOOLS][3];        /* and its moment about the tip, N m */
  double dt;                 /* s */
  uint64_t dt_ns;
  uint64_t next_step_ns;     /* uv_hrtime deadline of the next step */
  double frame_interval;     /* simulated s between published frames */
  double next_frame_time;
  uint64_t frame_seq;
  int behind;                /* fell behind real time since the last frame */
  int stalling;              /* in a stall episode (physics.c) */
  int stall_flag;            /* a step stalled since the last frame (physics.c) */
  double quantum;
  /* statistics (physics thread writes; read approximately elsewhere) */
  uint64_t steps;
  uint64_t late_events;
  double step_ns_ewma;
  ts_lane_meter lane;        /* CPU time against simulated time (lane.h; physics.c) */
  int slow_lane;             /* stepped by a slow thread (physics.c) */
  int lane_asked;            /* asked the loop for the other lane; cleared when moved */
  uint32_t substeps;
  uint32_t contacts;
  uint32_t tool_contacts;    /* contacts between two tools in the last step */
  uint64_t tool_contact_steps; /* steps in which two tools touched */
  uint32_t self_contacts;    /* tissue self-contact pairs in the last step (session_self.h) */
  double inertia_scale;      /* mass-spring: the inertia scale of the last step
                                (1: physical masses, ts_massspring.h) */
  double added_mass;         /* mass-spring: inertia the local mass scaling of a
                                refined region adds, fraction of the tissue's mass
                                (set at a refinement's install; core/ts_ms_local.c) */
  double verlet_fraction;    /* mass-spring: nodes on each branch, last step */
  double beeman_fraction;
  char diverged_why[256];    /* why the last diverged step diverged, in words
                                (ts_session_step; physics.c sends it to the loop) */
} ts_session_sim;

/* One TrainingProgress report of a session's last training, kept for
 * clients that join later (training.c). model is a static name
 * (ts_learn_kind_name). */
#define TS_TRAIN_HISTORY 24 /* progress comes every sixteenth, then the end */
typedef struct ts_train_report {
  double fraction, loss, heldout_rmse, heldout_rel;
  uint64_t intervals, unconverged; /* the samples' intervals, of them at the cap */
  double worst_residual;           /* N */
  uint64_t samples, iterations;
  int64_t model_id;
  const char *model;
  int done;
} ts_train_report;

typedef struct ts_session {
  uint32_t id;
  char name[64];
  char tissue_name[64];
  int solver;
  ts_server *server;
  ts_session *next;          /* registry list */

  ts_topology *topo;
  ts_conn *clients;
  uint32_t n_clients;
  ts_conn *tool_owner[TS_MAX_TOOLS];
  /* access (issue 8): 32 hex digits each, from the OS's randomness */
  char observer_token[33];
  char controller_token[TS_MAX_TOOLS][33];
  int creator_key;           /* index of the server key that created it */
  int self_refused;          /* set at creation: only the daemon's --self-contact asked
                                for self-contact and the tissue was over the limit, so
                                the session runs without it */
  /* tissue self-contact (sim.self) as the newest frame said, kept when a
   * refinement drops `latest`; before the first frame, as created */
  int self_state;            /* ts_self_state (session_self.h) */
  uint32_t self_surface_nodes; /* the tissue's contact-surface nodes (also when refused) */
  uint64_t self_steps_over_limit; /* steps it was off over --self-contact-max-nodes */
  uint64_t self_failures;    /* refined tissues it could not be set up for */
  ts_frame_ref *latest;  /* the newest frame (clients hold their own baselines) */
  /* Shared, like mbox: the loop writes, the physics thread reads. The
   * uv_hrtime microsecond from which one of the clients is due a frame
   * (session.c's schedule; 0: at once, or no clients: every frame as
   * before); a step before it quantizes no frame (ts_session_step). */
  _Atomic uint64_t frames_wanted_us;
  uint64_t idle_since_ms;    /* when the last client left; 0 with clients */
  int ending;                /* removal requested */
  uint64_t frames_sent, frames_skipped, clients_dropped, clients_resynced, diverged_count;
  uint64_t forces_sent, forces_skipped; /* ToolForce messages */
  /* divergence reports (server.c): one a second at most, logged and sent
   * to the clients; those in between only counted, and said in the next */
  uint64_t diverged_report_due_ms; /* loop time from which the next is reported; 0 at once */
  uint64_t diverged_unreported;    /* divergences since the last report */

  /* quasi-static sessions, loop thread */
  char material[512];        /* what its models are kept under (ts_learn_material_id) */
  int training;              /* a training request or job is under way */
  int has_model;             /* a model was installed or is on its way (loop's view) */
  int train_kind;            /* ts_learn_kind of the requested training */
  uint64_t train_rid;        /* request id of the TrainShortcut, echoed in progress */
  /* the last training's TrainingProgress reports, replayed to a client that
   * joins later so its page can draw the loss (training.c) */
  ts_train_report train_hist[TS_TRAIN_HISTORY];
  uint32_t train_hist_n;
  char train_hist_error[256]; /* the error of its final report, if any */

  int refine_pending;        /* a RefineRegion is with the physics thread (refine.c) */

  int physics_thread;        /* index of the owning thread */
  int moving;                /* between two physics threads (physics.c: detached from
                                one, not yet added to the other) */
  int move_to_slow;          /* where it goes: 1 a slow thread, 0 a real-time one */
  int move_target;           /* the thread's index; -1 the least loaded of the kind */
  uint64_t balanced_ms;      /* when ts_physics_balance last moved it (loop ms; 0 never) */
  ts_mailbox mbox;
  ts_session_sim sim;
} ts_session;

/* Creates the built-in tissue session (loop thread), not yet stepping.
 * Returns 0 or a negative ts_errno with a message in err. */
int ts_session_create(ts_server *s, const char *name, const ts_patch_def *def, double dt,
                      int frame_rate, ts_session **out, char *err, size_t errcap);

/* The same around a tissue built elsewhere (an uploaded mesh), called
 * tissue_name in session lists; takes t over, also on failure. */
int ts_session_create_with_tissue(ts_server *s, const char *name, const char *tissue_name,
                                  ts_tissue *t, double dt, int frame_rate, ts_session **out,
                                  char *err, size_t errcap);

/* The solver a new session asks for: CreateSession.solver
 * (Tissued__V1__Solver, never DEFAULT here) and, for XPBD, its substeps per
 * step and sweeps per substep (0: the solver's defaults, ts_xpbd.h). */
#define TS_XPBD_MAX_DT (1.0 / 30.0) /* s: the longest step of an XPBD session */
#define TS_XPBD_MAX_SUBSTEPS 1000
#define TS_XPBD_MAX_ITERATIONS 100
#define TS_MS_MAX_SUBSTEPS 1000 /* a mass-spring session's cap (CreateSession.substeps) */
typedef struct ts_solver_opts {
  int solver;
  uint32_t substeps, iterations; /* mass-spring: substeps is the tissue's max_substeps
                                    (0: physical masses); iterations 0 */
  double tool_stiffness;         /* N/m, tool against tool (core/ts_tool_contact.h),
                                    resolved (> 0) and range-checked; every solver */
  int self_contact;              /* tissue self-contact (session_self.h), mass-spring
                                    and XPBD: 1 asked by the CreateSession (refused on a
                                    tissue over --self-contact-max-nodes), 2 only the
                                    daemon's --self-contact (off there, logged); 0 off */
} ts_solver_opts;

/* Switches a new session (before physics owns it) to the XPBD solver
 * (Tissued__V1__Solver SOLVER_XPBD) with sv's substeps and iterations
 * (checked by the caller). 0 or a negative ts_errno. */
int ts_session_use_xpbd(ts_session *se, const ts_solver_opts *sv, char *err, size_t errcap);

/* Makes a new session (before physics owns it) quasi-static: the shortcut
 * of shortcut.h with a quasi-static interval (s), a sample cap and the
 * sample count that starts training by itself (0: never). 0 or a negative
 * ts_errno with a message in err. */
int ts_session_use_shortcut(ts_session *se, double interval, uint32_t sample_cap,
                            uint32_t train_after, char *err, size_t errcap);

/* Frees a session the physics no longer owns. */
void ts_session_free(ts_session *se);

void ts_session_attach(ts_session *se, ts_conn *c);
void ts_session_detach(ts_session *se, ts_conn *c);

/* Loop thread: a new frame arrived from physics; send it to the clients that
 * are due, sharing encodings. A client gets min(its frame rate, the
 * session's) on average and never more than two frames back to back (the
 * schedule in session.c). now_ms: the loop's clock (soft-limit grace). */
void ts_session_on_frame(ts_session *se, ts_frame_ref *f, uint64_t now_ms);

/* Mailbox writes (loop thread). */
void ts_session_set_tool(ts_session *se, uint32_t tool_id, int active, int kind, double radius,
                         double length);
/* The same with a mesh tool's tree (TS_TOOL_MESH; the server's, which
 * outlives every physics thread; NULL for primitives). */
void ts_session_set_tool_shape(ts_session *se, uint32_t tool_id, int active, int kind,
                               double radius, double length, const struct ts_obb_tree *shape);
/* Tool tool_id's Coulomb coefficients on the tissue (validated by the
 * caller: ts_tool_friction_valid), used by both solvers from the next step. */
void ts_session_set_tool_friction(ts_session *se, uint32_t tool_id, double mu_static,
                                  double mu_kinetic);
void ts_session_post_pose(ts_session *se, uint32_t tool_id, const double pos[3],
                          const double quat[4], double jaw, uint64_t seq, uint64_t client_time_us);

/* Force samples for tool_id's controller every `every` physics steps (0:
 * none). */
void ts_session_set_force_every(ts_session *se, uint32_t tool_id, uint32_t every);

/* Asks the physics thread to put the tissue back at rest, and every tool
 * at its parking spot (from where it approaches its controller's pose at
 * tool-max-speed), before its next step. */
void ts_session_request_reset(ts_session *se);

/* Physics thread: one step of dt; publishes a frame when one is due on the
 * session's clock and one of its clients is due one (frames_wanted_us).
 * Returns the frame to publish (or NULL), and sets *diverged when the step
 * diverged (a non-finite or runaway state, or one off the frames' grid):
 * the session then recovers by itself, the tissue back at rest and the
 * tools parked as after a reset, and keeps stepping; no such state is ever
 * published. */
ts_frame_ref *ts_session_step(ts_session *se, int *diverged);

/* One step of sim's moving solver alone (XPBD, through the tree-based tool
 * contact when it has one, or mass-spring; not a quasi-static session's):
 * the tools as they are, no frame, no statistics kept. xs gets XPBD's
 * figures, st mass-spring's. Returns the solver's 0 or ts_errno. Used by
 * ts_session_step and by a new session's trial (session_trial.h). */
int ts_session_solver_step(ts_session_sim *sim, ts_step_stats *st, ts_xpbd_stats *xs);

#endif
