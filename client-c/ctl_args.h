/*
 * ctl_args.h: tissuectl's command line, parsed into a struct (ctl_args.c)
 * before anything connects, so that the parse can be tested and fuzzed
 * (tests/fuzz/fuzz_ctlargs.c) apart from main().
 */
#ifndef CTL_ARGS_H
#define CTL_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 7070
#define POSE_RATE_HZ 200.0

/* create --mesh: the file's format by its extension (the order of
 * tissueclient.h's TC_MESH_*, which main() maps them to). */
enum { CTL_MESH_OBJ = 0, CTL_MESH_STL = 1, CTL_MESH_PLY = 2 };

#define CTL_MAX_LAYERS 8      /* create --layers */
#define CTL_MAX_TRIANGLES 256 /* refine --triangles */

/* What ctl_parse_args found. */
enum {
  CTL_RUN = 0,   /* a command to run, in the struct */
  CTL_HELP = 1,  /* -h or --help: print the usage on stdout, exit 0 */
  CTL_USAGE = 2, /* no command: print the usage on stderr, exit 2 */
  CTL_ERROR = 3  /* a usage error, said in err: exit 2 */
};

typedef struct ctl_args {
  const char *host, *cred;   /* cred: --key or --token, else the default given */
  double port, timeout;      /* whole port 1..65535; timeout ms 1..3600000 */
  const char *cmd;           /* sessions, create, poke, watch, refine, models, train,
                                shortcut, reset, end, materials, fit or tissues */
  int is_poke, is_watch, is_refine, is_train, is_shortcut, is_reset, is_end;
  int is_materials, is_fit, is_tissues;
  /* create */
  const char *tissue;        /* default stomach-patch; never "" */
  const char *mesh, *name, *layers_s; /* name: the session's (an upload's stored tissue's
                                too); layers_s only with mesh */
  int mesh_format;           /* of mesh: CTL_MESH_* by its extension (.obj, .stl, .ply) */
  double layers[CTL_MAX_LAYERS]; /* layers_s parsed: thicknesses in m (> 0), outermost first */
  int n_layers;              /* 1..CTL_MAX_LAYERS with layers_s, else 0 */
  double scale, substeps;    /* scale: 1 unless --mesh; substeps 0: the daemon's choice */
  double tool_stiffness;     /* N/mm as given (--tool-stiffness); 0: the daemon's choice */
  int self_contact;          /* --self-contact: CreateSession.self_contact */
  const char *materials_s;   /* --materials as given (create; not with a stored --tissue) */
  char materials[CTL_MAX_LAYERS][64]; /* it parsed: a stored fit's name per layer, outermost
                                first; "" keeps the layer's own law */
  int n_materials;           /* 1..CTL_MAX_LAYERS with materials_s, else 0 */
  int solver;                /* --solver: 0 the daemon's, 1 mass-spring, 2 xpbd,
                                3 quasi-static (TC_SOLVER_*) */
  /* train, shortcut (quasi-static sessions) */
  const char *model_kind;    /* train --model: method, rich, spread, spread2 or spread2r;
                                NULL: the method's */
  int use_learned;           /* shortcut --use: 1 learned, 0 solve, -1 not given */
  double model_id;           /* shortcut --model-id; 0: none */
  /* materials, fit */
  const char *fit_tissue;    /* materials --tissue (NULL: all) and fit --tissue (default
                                "stomach", the tissue whose fits sessions take); never "" */
  const char *fit_file, *fit_layer, *fit_direction, *fit_name; /* fit: all set; direction
                                "axial" or "radial" */
  /* models */
  const char *verb;          /* list, export, import or delete; NULL for other commands */
  const char *verb_arg;      /* the id or file of export, import, delete */
  int64_t verb_id;           /* export, delete: verb_arg as a model id (> 0); else 0 */
  const char *model_tissue;  /* models list --tissue; never "" */
  /* tissues */
  const char *delete_tissue; /* tissues delete NAME: the name (never ""); NULL: list */
  int with_records;          /* tissues delete --with-records */
  /* poke, watch, refine, train, shortcut, reset, end */
  double session;            /* -1 when not given */
  double depth, seconds, radius, rate;
  double frames;             /* watch: stop after this many frames; 0 = no limit */
  int leb, midpoints;        /* refine: at most one of them */
  const char *tris_s, *ray_s; /* at most one of them */
  uint32_t tris[CTL_MAX_TRIANGLES]; /* tris_s parsed: outer-surface triangle indices */
  int n_tris;                /* 1..CTL_MAX_TRIANGLES with tris_s, else 0 */
  double ray[6];             /* ray_s parsed: origin, direction (m); set with ray_s */
  double range, max_edge;    /* max_edge only with leb; range not with tris_s */
  double mu[2];
  int have_mu;
  char err[1024];            /* the message of CTL_ERROR, without the "tissuectl: " */
} ctl_args;

/* tissuectl's usage text. */
void ctl_usage(FILE *out);

/* Parses argv[1..argc) (argv[0] is the program). Strings in *a point into
 * argv or are constants; default_cred is $TISSUED_SERVER_KEY (may be NULL).
 * Returns CTL_RUN, CTL_HELP, CTL_USAGE or CTL_ERROR. */
int ctl_parse_args(int argc, char **argv, const char *default_cred, ctl_args *a);

#endif
