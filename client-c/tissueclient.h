/*
 * tissueclient.h: libtissueclient, a small blocking C client of the tissued
 * protocol (v1) over TCP, for a haptic station's loop, tissuectl and the
 * integration tests.
 *
 * A tc_client is one TCP connection. tc_connect() says Hello; requests
 * (create, join, list, ping) send one Envelope and block until its reply or
 * Error arrives (frames arriving meanwhile are dispatched to the callbacks);
 * tc_send_pose() does not wait. tc_poll() reads what has arrived and calls
 * the frame and error callbacks. Frames are decoded here: a keyframe sets the
 * client's copy of the tissue, a delta updates it, and the callback sees the
 * whole state (quantized integers bit-exact with the server, and metres).
 *
 * All functions return 0 (or a count) or a negative ts_errno from
 * server/core/ts_error.h; tc_last_error() then holds a message. A request
 * answered with an Error returns the negated Error.code. Bad data from the
 * server is reported (TS_EDECODE, TS_EPROTOCOL), never trusted.
 * One tc_client belongs to one thread at a time; there is no global state.
 */
#ifndef TISSUECLIENT_H
#define TISSUECLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_PROTOCOL_VERSION 1

typedef struct tc_client tc_client;

enum { TC_ROLE_OBSERVER = 0, TC_ROLE_CONTROLLER = 1 };
/* Jaws: a grasper (XPBD and mass-spring sessions); length is the jaw length
 * (0: 10 mm) and ToolPose's jaw (tc_send_pose) opens (1) and closes (0) it.
 * Mesh: one of the server's tool meshes (XPBD and mass-spring sessions). */
enum { TC_TOOL_SPHERE = 0, TC_TOOL_CAPSULE = 1, TC_TOOL_JAWS = 2, TC_TOOL_MESH = 3 };

/* One tool's state as reported in a frame. */
typedef struct tc_tool {
  uint32_t tool_id;
  uint64_t last_pose_seq;        /* last ToolPose the server applied */
  uint64_t last_client_time_us;  /* its client_time_us, for latency */
  double force[3];               /* reaction force on the tool, N */
  double position[3];            /* m */
  double orientation[4];         /* w, x, y, z */
  double radius;                 /* m */
  uint32_t tool_contacts;        /* other tools touching (pushing) it in the frame's last step
                                    (ToolState.tool_contacts; tc_force.tool_contacts) */
} tc_tool;

/* A decoded frame: the client's whole copy of the tissue after applying it.
 * Pointers stay valid until the next tc_poll/request on the client. */
typedef struct tc_frame {
  uint32_t session;
  uint64_t seq;
  uint64_t baseline_seq;        /* deltas: the frame they applied to */
  double sim_time;              /* s */
  int keyframe;
  uint32_t vertex_count;
  double quantum;               /* m per quantization step */
  const int32_t (*q)[3];        /* quantized positions */
  const double (*positions)[3]; /* q * quantum, metres */
  uint32_t changed;             /* vertices the frame changed (all for keyframes) */
  uint32_t n_triangles;         /* current topology */
  const uint32_t *triangles;    /* 3 * n_triangles indices */
  uint32_t n_layers;
  const uint32_t *layer_triangle_counts;
  const char *const *layer_names;
  uint32_t n_tools;
  const tc_tool *tools;
  uint32_t flags;               /* bit 0: physics behind real time */
  size_t bytes;                 /* size of the encoded Envelope */
} tc_frame;

typedef void (*tc_frame_cb)(void *ud, const tc_frame *f);

/* The reaction of the tissue on the client's tool (a controller's
 * ToolForce message): sent every physics step, or at the force_rate asked
 * for on joining, apart from frames; already filtered by the server so that
 * contact changes do not spike it. */
typedef struct tc_force {
  uint32_t session;
  uint32_t tool_id;
  uint64_t step;                /* physics step it was computed in */
  double sim_time;              /* s */
  double force[3];              /* N, on the tool */
  double torque[3];             /* N m, about the tool's tip */
  uint64_t last_pose_seq;       /* the last pose applied before that step */
  uint64_t last_client_time_us; /* its client time (tc_now_us() clock) */
  uint32_t contacts;            /* tissue nodes touching the tool */
  uint32_t tool_contacts;       /* other tools of the session touching (pushing) it in that
                                   step: 0 when its force is the tissue's alone */
} tc_force;

typedef void (*tc_force_cb)(void *ud, const tc_force *f);
/* An Error from the server that no waiting request claimed, or a problem
 * found in the server's data (then request_id is 0 and name is TS_E...). */
typedef void (*tc_error_cb)(void *ud, int code, const char *name, const char *message,
                            uint64_t request_id);

/* tc_session_info.self_contact_off (SessionInfo.SelfContactOff) */
enum {
  TC_SELF_OFF_NONE = 0,       /* runs, or not asked for */
  TC_SELF_OFF_OVER_LIMIT = 1, /* the tissue is over the daemon's --self-contact-max-nodes */
  TC_SELF_OFF_FAILED = 2,     /* could not be set up for a refined tissue (out of memory) */
};

typedef struct tc_session_info {
  uint32_t session_id;
  char name[64];
  char tissue[64];
  int solver;
  uint32_t clients;
  uint32_t vertex_count;
  double tool_stiffness; /* N/m: the wall its tools feel against each other */
  int self_contact;       /* tissue self-contact runs (CreateSession.self_contact) */
  uint32_t self_contacts; /* its node-triangle pairs in the newest frame's step */
  int self_contact_off;   /* why self_contact is 0 though asked for: TC_SELF_OFF_* */
  uint32_t self_contact_surface_nodes; /* the tissue's contact-surface nodes (its limit's size) */
  int asleep;             /* the tissue is at rest, its steps not computed (--sleep-speed) */
  int slow_lane;          /* a slow thread of the daemon steps it: slower than real time
                             (--slow-lane-load) */
  double step_load;       /* CPU time of its steps over the time they simulate (1: a whole
                             core for real time; -1 not measured yet) */
  /* quasi-static sessions (0 for the others): the learned model answers
   * presses, samples recorded so far, presses the model answered */
  int learned;
  uint64_t samples;
  uint64_t model_answers;
} tc_session_info;

typedef struct tc_join_params {
  uint32_t session_id;
  int role;            /* TC_ROLE_* */
  uint32_t tool_id;    /* 0 = any free tool (controllers) */
  double radius;       /* tool radius, m; 0 = server default */
  int tool_kind;       /* TC_TOOL_SPHERE, TC_TOOL_CAPSULE, TC_TOOL_JAWS or TC_TOOL_MESH */
  double length;       /* capsule: length along the tool axis (local +y from the tip), m */
  uint32_t frame_rate; /* frames per second; 0 = server default */
  uint32_t force_rate; /* controllers: force messages per second; 0 = every physics step */
  const char *token;   /* a token of the session (tc_tokens); NULL or "" when the
                          connection gave the server key or a token at tc_connect_key */
  const char *tool_mesh; /* TC_TOOL_MESH: one of the server's tool meshes by name */
  int friction;        /* nonzero: send mu_static, mu_kinetic; 0: the server's
                          default (steel on wet tissue: 0.1, 0.05) */
  double mu_static;    /* Coulomb coefficients of the tool on the tissue, */
  double mu_kinetic;   /* 0 <= mu_kinetic <= mu_static <= 2 (0, 0: frictionless) */
} tc_join_params;

/* The tokens of a session, from its SessionCreated (only its creator gets
 * them): observer opens the session for watching, controller[i] lets a
 * client drive tool i + 1. 32 hex digits each. */
#define TC_MAX_TOOL_TOKENS 8
typedef struct tc_tokens {
  char observer[33];
  char controller[TC_MAX_TOOL_TOKENS][33];
  uint32_t n_controller;
} tc_tokens;

typedef struct tc_joined {
  uint32_t session_id;
  int role;
  uint32_t tool_id;
  double dt;
  uint32_t frame_rate;
  uint32_t vertex_count;
  uint32_t force_rate; /* controllers: force messages per second of simulated time */
} tc_joined;

/* Connects and exchanges Hello/HelloReply. NULL on failure with a message in
 * err (an Error reply, e.g. TS_EVERSION, is quoted). timeout_ms bounds the
 * connect and the reply (0 = 10 s). */
tc_client *tc_connect(const char *host, int port, const char *client_name, char *err,
                      size_t errcap);
tc_client *tc_connect_timeout(const char *host, int port, const char *client_name,
                              int timeout_ms, char *err, size_t errcap);
/* The same, sending credentials in Hello: the server key (needed to create
 * sessions; opens every session) or a session token (then tc_join needs no
 * token). NULL or "" sends none. */
tc_client *tc_connect_key(const char *host, int port, const char *client_name,
                          const char *credentials, int timeout_ms, char *err, size_t errcap);
void tc_close(tc_client *c);

/* The socket, for select/poll loops (readable: call tc_poll(c, 0)). */
int tc_fd(const tc_client *c);
/* The client id the server gave in HelloReply. */
uint64_t tc_client_id(const tc_client *c);
/* The server's rigid tool meshes (HelloReply.tool_meshes), for TC_TOOL_MESH:
 * up to cap names into names[] (valid while c is open); returns how many
 * the server has (at most TC_MAX_TOOL_MESHES are kept). */
#define TC_MAX_TOOL_MESHES 16
uint32_t tc_tool_meshes(const tc_client *c, const char **names, uint32_t cap);
/* Message of the last failure ("" if none). A connection the server closed
 * right after an Error of its own (request id 0, e.g. TS_ESHUTDOWN; its last
 * message) names it: "connection closed by the server after TS_ESHUTDOWN: ...",
 * also when a request's send failed on it (TS_ETOOBIG for a request over the
 * server's --max-message, said while the request was still being written). */
const char *tc_last_error(const tc_client *c);
/* Time a request waits for its reply (default 10000 ms). */
void tc_set_timeout(tc_client *c, int timeout_ms);

void tc_set_frame_cb(tc_client *c, tc_frame_cb cb, void *ud);
void tc_set_error_cb(tc_client *c, tc_error_cb cb, void *ud);
/* Called for every force message (from inside tc_poll and requests). For a
 * haptic servo loop at 1 kHz: each tick, tc_poll(c, 0) then
 * tc_latest_force(); neither blocks nor allocates. */
void tc_set_force_cb(tc_client *c, tc_force_cb cb, void *ud);
/* The newest force message received: 1 and *out filled, or 0 when none has
 * arrived since joining. */
int tc_latest_force(const tc_client *c, tc_force *out);

/* CreateSession for a built-in tissue (NULL = "stomach-patch"). Counts may be
 * NULL. */
int tc_create_session(tc_client *c, const char *builtin, uint32_t *session_id,
                      uint32_t *vertex_count, uint32_t *triangle_count);

/* The same with a solver (TC_SOLVER_*; the Solver enum of tissue.proto). */
enum { TC_SOLVER_DEFAULT = 0, TC_SOLVER_MASS_SPRING = 1, TC_SOLVER_XPBD = 2, TC_SOLVER_QUASI_STATIC = 3 };
int tc_create_session_solver(tc_client *c, const char *builtin, int solver,
                             uint32_t *session_id, uint32_t *vertex_count,
                             uint32_t *triangle_count);

/* The same with CreateSession.substeps: for TC_SOLVER_XPBD substeps per
 * step, for TC_SOLVER_MASS_SPRING (and DEFAULT) at most that many per step,
 * the inertia scaled so that the step stays stable (0: physical masses). The
 * server checks the range (1..1000). */
int tc_create_session_substeps(tc_client *c, const char *builtin, int solver, uint32_t substeps,
                               uint32_t *session_id, uint32_t *vertex_count,
                               uint32_t *triangle_count);

/* CreateSession with every setting of a built-in or stored tissue; zeroed
 * fields are the server's defaults. */
typedef struct tc_create_params {
  const char *builtin;   /* NULL: "stomach-patch" */
  int solver;            /* TC_SOLVER_* */
  uint32_t substeps;     /* as tc_create_session_substeps */
  double tool_stiffness; /* N/m: the wall two tools of the session feel (CreateSession.
                            tool_stiffness); 0: the server's (1000, 1 N/mm); else the server
                            takes 100..20000 */
  int self_contact;      /* nonzero: tissue self-contact (CreateSession.self_contact;
                            TS_ETOOBIG over the server's --self-contact-max-nodes);
                            0: the server's default (off unless its --self-contact) */
  const struct tc_layer *layers; /* the built-in patch's layers, outermost first (tc_layer
                            below: e.g. a stored material fit by name for each); NULL
                            and n_layers 0: the server's default layers. A stored
                            tissue keeps its own (the server refuses layers for it) */
  size_t n_layers;       /* at most 64; the server takes at most 8 */
  const char *name;      /* the session's name (CreateSession.name: at most 63 bytes, unique
                            on the server, TS_EEXISTS); NULL or "": session-<id> */
} tc_create_params;
int tc_create_session_ex(tc_client *c, const tc_create_params *p, uint32_t *session_id,
                         uint32_t *vertex_count, uint32_t *triangle_count);

/* What the daemon changed in a mesh tissue so that its layers do not fold,
 * from the SessionCreated of the last session this client created (all
 * zero and "" when the surface and layers were used as given, and for the
 * built-in patch): surface vertices of small pleats moved (the largest move
 * in metres, at most 1 mm), vertices offset less than the full depth and the
 * least fraction of it kept (0.1 to 1; 0 when none was thinned), and the same
 * in words; the words also say when the session will run in slow motion
 * (tc_session_step_load over 1), for any tissue. */
typedef struct tc_mesh_adjust {
  uint32_t moved_vertices;
  double max_move;
  uint32_t thinned_vertices;
  double min_depth_fraction;
  char warning[800]; /* the server's, which may also say the session runs in slow motion
                       (tc_session_step_load) */
} tc_mesh_adjust;

/* The mesh adjustments of the last session this client created: 1 and
 * *out filled, or 0 when it created none. */
int tc_session_adjust(const tc_client *c, tc_mesh_adjust *out);

/* What the last session this client created costs on the server, measured
 * at its creation (SessionCreated.step_load): CPU time over simulated time
 * of a few steps with no tool touching it; over 1 the session runs in slow
 * motion (its warning, tc_session_adjust, says so). 0 when not measured (a
 * quasi-static session) or before any creation. */
double tc_session_step_load(const tc_client *c);

/* The tokens of the last session this client created: 1 and *out filled, or
 * 0 before any. */
int tc_session_tokens(const tc_client *c, tc_tokens *out);

/* JoinSession. A controller gets a tool (tool_id 0 = any free one). */
int tc_join(tc_client *c, uint32_t session_id, int role, uint32_t tool_id, double radius,
            uint32_t *assigned_tool_id);
int tc_join_ex(tc_client *c, const tc_join_params *p, tc_joined *out);

/* Sends a ToolPose (no reply; errors come later through tc_poll). pos in
 * metres, quat = w, x, y, z. The library numbers poses (tc_pose_seq()) and
 * stamps them with a monotonic client time. */
/* Local refinement of a running session's tissue (RefineRegion): by
 * triangle indices into the keyframe topology's triangle list (outer-surface
 * triangles only), or, with n_triangles 0, by a ray pick (the outer-surface
 * triangles within `range` of the hit). Old vertices keep their indices, new
 * ones are appended; the next frame is a keyframe with the new topology. */
enum { TC_REFINE_LOOP = 0, TC_REFINE_LEB = 1 };
typedef struct tc_refine_params {
  uint32_t session_id;
  int method;                   /* TC_REFINE_* */
  const uint32_t *triangles;    /* or NULL with n_triangles 0: by ray */
  uint32_t n_triangles;
  double ray_origin[3];         /* m */
  double ray_direction[3];
  double range;                 /* m; 0 = the server's default (5 mm) */
  double max_edge;              /* LEB: m; 0 = half the region's longest edge */
  int midpoint_rest;            /* LOOP: 1 = rest positions at edge midpoints (no
                                   smoothing); 0 = Loop's smoothing rules (the default) */
} tc_refine_params;
typedef struct tc_refined {
  uint32_t vertex_count, triangle_count, selected_triangles, new_vertices;
  uint64_t step;                /* the physics step after which it applies */
  double millis;                /* time it took on the physics thread */
} tc_refined;
/* 0 and *out (may be NULL), or a negative ts_errno: TS_EROLE (an observer
 * without the server key), TS_EINVAL (bad indices, a side-wall triangle, a
 * ray that misses), TS_EUNSUPPORTED (a quasi-static session), TS_EFULL (over
 * the vertex limit, or a refinement under way), TS_EMESH (inverted prisms). */
int tc_refine(tc_client *c, const tc_refine_params *p, tc_refined *out);

/* Puts a session's tissue back at rest (also restarts a session stopped by
 * divergence), or ends the session for everyone. A client connected with
 * the server key may name any session, joined or not; one connected with a
 * session token must be a controller joined to it. 0 or a negative
 * ts_errno (TS_ENOSESSION; with a token: TS_EROLE for observers,
 * TS_ENOTJOINED). */
int tc_reset_session(tc_client *c, uint32_t session_id);
int tc_end_session(tc_client *c, uint32_t session_id);

int tc_send_pose(tc_client *c, uint32_t tool_id, const double pos[3], const double quat[4],
                 double jaw);
/* Seq of the last pose sent (0 before the first). */
uint64_t tc_pose_seq(const tc_client *c);
/* The clock poses are stamped with (CLOCK_MONOTONIC, microseconds): now
 * minus a frame's or force's last_client_time_us is its pose-to-output
 * latency. */
uint64_t tc_now_us(void);

/* ListSessions: *out is malloc'd (free with free()), *n its length. */
int tc_list_sessions(tc_client *c, tc_session_info **out, size_t *n);

/* Ping: round-trip time in microseconds. */
int tc_ping(tc_client *c, uint64_t *rtt_us);

/* Waits up to timeout_ms (0 = just look, -1 = forever) for data, reads all
 * that has arrived and dispatches it. Returns the number of messages handled
 * (0 on timeout), TS_EIO when the connection is closed or broken, or
 * TS_EDECODE/TS_EPROTOCOL when the server sent something undecodable (also
 * reported to the error callback; the client stays usable when it can). */
int tc_poll(tc_client *c, int timeout_ms);

/* Decoded state: the last frame (NULL before the first keyframe). */
const tc_frame *tc_last_frame(const tc_client *c);

/* Mesh file formats of an upload (MeshUpload.Format). */
enum { TC_MESH_OBJ = 0, TC_MESH_STL = 1, TC_MESH_PLY = 2 };

/* One tissue layer of a mesh upload or of the built-in patch
 * (tc_create_params.layers), outermost first. */
typedef struct tc_layer {
  const char *name;      /* NULL or "" = the server's default name for that layer */
  double thickness;      /* m; 0 = the server's default for that layer */
  const char *material;  /* a stored material fit by name (tc_list_materials: the fits of
                            the layer's name, axial and radial); NULL or "" = the layer's
                            own law */
  double fibre[3];       /* the layer's fibre direction (any length); zero = the server's
                            default direction for that layer */
} tc_layer;

/* CreateSession from an uploaded mesh file (format TC_MESH_*, the file's
 * bytes, scale: file units to metres, 0 = 1). n_layers 0 takes the server's
 * default layers. name (NULL = none) names both the session and the stored
 * tissue, which later sessions can create with tc_create_session(c, name,
 * ...) without uploading again; with no name the server calls the tissue
 * "mesh-" plus the first 12 hex digits of the file's SHA-256. Counts may be
 * NULL. Errors: the server's (TS_EMESH for a file it refuses, TS_ETOOBIG,
 * TS_ERANGE, TS_ENAN, ...) with its message in tc_last_error(), or TS_EINVAL
 * for bad arguments. */
int tc_create_session_mesh(tc_client *c, int format, const void *bytes, size_t len, double scale,
                           const tc_layer *layers, size_t n_layers, const char *name,
                           uint32_t *session_id, uint32_t *vertex_count,
                           uint32_t *triangle_count);

/* One CreateProgress: what the creation this client waits for is doing
 * (tissue.proto). Reports come about once a second from the first second
 * on, only while a cb is set (tc_set_create_progress_cb). */
enum {
  TC_CREATE_QUEUED = 0,  /* waiting for the daemon's builder: `ahead` creations first */
  TC_CREATE_READING = 1, /* the mesh parsed and repaired */
  TC_CREATE_LAYERS = 2,  /* extruded into layers, checked for folds and crossings */
  TC_CREATE_SPRINGS = 3, /* springs and masses, and the stable step */
  TC_CREATE_SOLVER = 4,  /* the session and its solver set up */
  TC_CREATE_STORING = 5  /* an upload stored, a stored model loaded */
};
typedef struct tc_create_progress {
  uint64_t request_id;   /* the CreateSession's */
  int stage;             /* TC_CREATE_* (an unknown one from a newer daemon as it came) */
  const char *stage_name; /* "queued", "reading", "layers", "springs", "solver", "storing",
                             "unknown" */
  double elapsed;        /* s since the daemon took the request */
  uint32_t ahead;        /* TC_CREATE_QUEUED: creations to be built first */
} tc_create_progress;
typedef void (*tc_create_progress_cb)(void *ud, const tc_create_progress *p);

/* With cb set (NULL: none, the default), every tc_create_session* call asks
 * for progress reports and calls cb for each while it waits; each report
 * also restarts the wait's timeout (tc_set_timeout), so that a long build
 * that keeps reporting is waited for, and a daemon that goes quiet is not. */
void tc_set_create_progress_cb(tc_client *c, tc_create_progress_cb cb, void *ud);

/* ---- stored tissues ------------------------------------------------------ */

/* A tissue a session can be created of (TissueInfo): its name for
 * tc_create_session / tc_create_params.builtin. */
typedef struct tc_tissue_info {
  char name[64];
  char kind[16];     /* "builtin" (the patch) or "mesh" (an upload) */
  int64_t created;   /* unix seconds: when the daemon first stored it */
} tc_tissue_info;

/* ListTissues: the built-in patch, then the stored uploads; *out is
 * malloc'd (free with free()), *n its length. Needs the server key
 * (TS_EAUTH). */
int tc_list_tissues(tc_client *c, tc_tissue_info **out, size_t *n);

/* DeleteTissue: deletes the stored upload `name` (its record, and its mesh
 * file unless another stored tissue has the same bytes). Its learned models
 * and material fits go with it, so a tissue that has any is deleted only
 * with with_records set: else TS_EBUSY, the message saying how many. Also
 * TS_EBUSY while a session of it runs, TS_ENOTISSUE for an unknown name,
 * TS_EINVAL for the built-in tissue, TS_EAUTH without the server key. */
int tc_delete_tissue(tc_client *c, const char *name, int with_records);

/* ---- material fits (issue 3) --------------------------------------------- */

/* One stored fit of sigma = a e^(b strain) (MaterialFit): the tissue, layer
 * and direction ("axial" or "radial") it is for, its name (the shipped
 * table's are "default"), and how well it fits its samples. */
typedef struct tc_material_fit {
  int64_t id;
  char tissue[64], layer[64], direction[16], name[64];
  double a;          /* Pa */
  double b;
  double rmse;       /* Pa */
  double r2;
  uint32_t samples;
} tc_material_fit;

/* ListMaterials: the fits of tissue (NULL or "" = all); *out is malloc'd
 * (free with free()), *n its length. Needs no key. */
int tc_list_materials(tc_client *c, const char *tissue, tc_material_fit **out, size_t *n);

/* FitMaterial: fits (a, b) to csv[0..csv_len) ("strain,stress" lines, stress
 * in Pa) and stores the fit under name (out, may be NULL, gets it). A session
 * names it per layer (tc_layer.material), and needs both directions of the
 * layer under that name. Needs the server key (TS_EAUTH); TS_EINVAL with the
 * reason for samples that give no fit. */
int tc_fit_material(tc_client *c, const char *tissue, const char *layer, const char *direction,
                    const char *name, const void *csv, size_t csv_len, tc_material_fit *out);

/* ---- learned models (issue 6; every call needs the server key) ---------- */

/* One stored learned model of a quasi-static tissue (ModelInfo). */
typedef struct tc_model_info {
  int64_t model_id;
  char tissue[64];
  char material[512];  /* material identity (layers and solve parameters) */
  char kind[32];       /* "method", "rich", "spread", "spread2" or "spread2r" */
  int64_t version;     /* per tissue, material and kind */
  uint64_t samples;    /* training samples */
  double loss;         /* m^2 */
  double heldout_rmse; /* m */
  double heldout_max;  /* m */
  int64_t created;     /* unix seconds */
} tc_model_info;

/* ListModels: the models of tissue (NULL or "" = all) in id order; *out is
 * malloc'd (free with free()), *n its length. TS_ENOTISSUE for an unknown
 * tissue, TS_EAUTH without the server key. */
int tc_list_models(tc_client *c, const char *tissue, tc_model_info **out, size_t *n);

/* ExportModel: *document (malloc'd, NUL-terminated; free with free()) gets
 * the model's JSON document, the one `tissuetool models export` writes;
 * info (may be NULL) its ModelInfo. TS_ENOMODEL when there is no such model. */
int tc_export_model(tc_client *c, int64_t model_id, char **document, tc_model_info *info);

/* ImportModel: stores a document as ExportModel gives it (or tissuetool
 * writes); info (may be NULL) gets the stored model. A document whose
 * model is stored already (same tissue, material, kind and theta) stores
 * nothing and gives that model. Errors: TS_EINVAL (malformed, with the
 * reason in tc_last_error), TS_ENOTISSUE, TS_ETOOBIG. */
int tc_import_model(tc_client *c, const char *document, tc_model_info *info);

/* DeleteModel. TS_ENOMODEL when there is no such model. Sessions using it keep
 * their copy. */
int tc_delete_model(tc_client *c, int64_t model_id);

/* UseShortcut (a controller of quasi-static session_id): the learned model
 * answers (learned = 1) or the quasi-static solve (0). model_id != 0 first
 * installs that stored model; TS_ENOMODEL when there is no such model,
 * TS_EMISMATCH when it belongs to another tissue or material,
 * TS_EUNSUPPORTED for a kind the server cannot run. */
int tc_use_shortcut(tc_client *c, uint32_t session_id, int learned, int64_t model_id);

/* One TrainingProgress of a quasi-static session's training (issue 6):
 * reports while gradient descent runs, then one with done set. request_id
 * is the TrainShortcut's (tc_train_shortcut gives it); 0 for a training the
 * session started by itself (train-after-samples) and for the reports of
 * an earlier training replayed to a client that joins. */
typedef struct tc_training_progress {
  uint64_t request_id;
  int mine;              /* the report is of this client's last TrainShortcut: it
                            carries that request's id and came after its
                            acknowledgement (a report of another client's training
                            that ended just before ours began may carry the same
                            number, and comes before it) */
  uint32_t session_id;
  double fraction;       /* 0..1 */
  double loss;           /* J(theta) so far, m^2 */
  int done;
  char error[512];       /* done without a model: why ("" otherwise) */
  char model[32];        /* the kind trained */
  uint64_t samples;      /* done: samples trained on */
  uint64_t iterations;   /* done: gradient-descent iterations */
  double heldout_rmse;   /* done: m, against the solve on held-out samples */
  double heldout_rel;    /* done: heldout_rmse / their RMS displacement */
  int64_t model_id;      /* done: stored as this model */
  uint64_t intervals;    /* done: presses behind the samples, */
  uint64_t unconverged_intervals; /* those the iteration cap stopped, */
  double worst_residual; /* and their largest final max |R|, N */
} tc_training_progress;
typedef void (*tc_progress_cb)(void *ud, const tc_training_progress *p);

/* Calls cb (from tc_poll and while a request waits) for every
 * TrainingProgress that arrives. */
void tc_set_progress_cb(tc_client *c, tc_progress_cb cb, void *ud);

/* TrainShortcut (a controller of quasi-static session_id): trains the model
 * kind ("method", "rich", "spread", "spread2" or "spread2r"; NULL or "": the
 * method's) on the samples recorded so far, off the physics thread. Returns
 * once the server acknowledged; the progress arrives later (tc_set_progress_cb,
 * tc_poll), the last report with done set, each with `mine` set (they may
 * come with the acknowledgement, during this call). *request_id (may be
 * NULL) gets the request's id, which its reports carry. Errors: TS_EUNSUPPORTED (not
 * quasi-static), TS_EFULL (training already), TS_EINVAL (unknown kind),
 * TS_ENOTJOINED, TS_EROLE. */
int tc_train_shortcut(tc_client *c, uint32_t session_id, const char *model, uint64_t *request_id);

#ifdef __cplusplus
}
#endif

#endif
