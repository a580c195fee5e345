/*
 * ctl_args.c: tissuectl's command line (ctl_args.h): the usage text and the
 * parse of the global options, the command and its options, with strict
 * number bounds, the number lists (--layers, --triangles, --ray), model ids
 * and kinds, the mesh file's extension and the options that exclude or need
 * each other checked here, before anything connects; every problem is a
 * message, never a crash or a partial run.
 */
#include "ctl_args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_usage(FILE *out) {
  fprintf(out,
          "usage: tissuectl [--host H] [--port P] [--timeout MS] [--key K | --token T]\n"
          "                 <command> [options]\n"
          "\n"
          "Talks to a running tissued over its TCP protocol port (default %s:%d).\n"
          "Output is one JSON object per line on stdout; errors go to stderr and give a\n"
          "non-zero exit status.\n"
          "\n"
          "commands:\n"
          "  sessions                  list the sessions, one per line\n"
          "  tissues [list]            list the tissues a session can be created of, one\n"
          "                            per line: name (for create --tissue), kind\n"
          "                            (builtin or mesh: an upload), created (unix s);\n"
          "                            needs the key\n"
          "  tissues delete NAME [--with-records]\n"
          "                            delete the stored upload NAME (and its mesh file\n"
          "                            unless another upload has the same bytes); refused\n"
          "                            while a session of it runs, and, unless\n"
          "                            --with-records, when learned models or material\n"
          "                            fits are stored under it (they would go with it:\n"
          "                            export the models first to keep them); prints\n"
          "                            {\"deleted\":NAME}; needs the key\n"
          "  create [--tissue NAME]    create a session (default tissue: stomach-patch);\n"
          "                            prints {\"session_id\":N,...,\"observer_token\":..,\n"
          "                            \"controller_tokens\":[..]} (the tokens that let\n"
          "                            others watch or drive a tool without the key;\n"
          "                            \"step_load\": what the session costs, CPU time\n"
          "                            over simulated time of a few steps from rest\n"
          "                            measured at creation; over 1 it runs in slow\n"
          "                            motion and \"warning\" says so);\n"
          "                            while the daemon builds the tissue, a line a\n"
          "                            second on stderr says what it is doing\n"
          "  create [--tissue NAME] --substeps N\n"
          "                            a haptic-rate mass-spring session: at most N\n"
          "                            (1..1000) substeps per step, the inertia scaled so\n"
          "                            that the step stays stable (statics unchanged; a\n"
          "                            moving tool feels a heavier tissue: README)\n"
          "  create [--tissue NAME] --tool-stiffness N_PER_MM\n"
          "                            the wall two tools of the session feel, newtons per\n"
          "                            mm of overlap (0.1..20; default the daemon's, 1):\n"
          "                            what the controllers' haptic devices can render\n"
          "  create [--tissue NAME] --self-contact\n"
          "                            keep the tissue from passing through itself where\n"
          "                            it folds (mass-spring and XPBD; off by default: it\n"
          "                            costs a walk of the tissue's tree per step; refused\n"
          "                            over the daemon's --self-contact-max-nodes)\n"
          "  create --mesh FILE [--scale S] [--name N] [--layers T1,T2,...]\n"
          "                            upload a surface mesh (.obj, .stl or .ply, by\n"
          "                            extension) and create a session of it: S converts\n"
          "                            file units to metres (default 1; 0.01 for cm), the\n"
          "                            layers are thicknesses in metres, outermost first\n"
          "                            (default: the server's). The server keeps the file\n"
          "                            and the tissue as N (default mesh-<hash>), so later\n"
          "                            sessions need only 'create --tissue N'. Where the\n"
          "                            layers would fold, the server moves pleat vertices\n"
          "                            (up to 1 mm) and thins the layers (to 0.1 at least)\n"
          "                            and says so: \"moved_vertices\",\"max_move\" (m),\n"
          "                            \"thinned_vertices\",\"min_depth_fraction\",\"warning\"\n"
          "  create [--tissue NAME] --name N\n"
          "                            the session's name (at most 63 bytes, unique on the\n"
          "                            daemon; default session-<id>); with --mesh also the\n"
          "                            stored tissue's\n"
          "  create [--layers T1,...] --materials M1,M2,...\n"
          "                            the layers' laws from stored material fits by name,\n"
          "                            one per layer, outermost first: the fits of the\n"
          "                            layer's name in both directions ('materials' lists\n"
          "                            them). The list's length is the number of layers,\n"
          "                            as with --layers (the patch has 3: mucosa,\n"
          "                            submucosa, muscularis); an empty name keeps that\n"
          "                            layer's own law: lab-1,, gives the mucosa lab-1\n"
          "                            alone. The built-in patch or a --mesh upload (a\n"
          "                            stored tissue keeps its own)\n"
          "  create [--tissue NAME] --solver mass-spring|xpbd|quasi-static\n"
          "                            the session's solver (default: the daemon's,\n"
          "                            mass-spring). A quasi-static session learns the\n"
          "                            shortcut (README: the supervised shortcut): it\n"
          "                            starts with the newest stored model of its tissue\n"
          "                            that fits it ('sessions' shows \"learned\")\n"
          "  poke --session N [--depth M] [--seconds S] [--radius M] [--friction MUS,MUK]\n"
          "                            join as a tool controller and drive a sphere\n"
          "                            (radius default 0.005 m; Coulomb friction on the\n"
          "                            tissue static MUS, kinetic MUK, 0 <= MUK <= MUS <= 2,\n"
          "                            default the server's 0.1,0.05; 0,0: none) straight\n"
          "                            down onto the patch centre: approach, press DEPTH\n"
          "                            metres below the surface at y=0 (default 0.004),\n"
          "                            hold, lift, over S seconds (default 3), sending poses\n"
          "                            at %.0f Hz; prints per frame: seq, sim_time,\n"
          "                            keyframe, bytes, vertices, changed (vertices in the\n"
          "                            delta), max_disp_mm (largest displacement since the\n"
          "                            first keyframe), force (N on the tool),\n"
          "                            last_pose_seq, tool_y\n"
          "  refine --session N [--leb | --midpoints] [--triangles I,J,... |\n"
          "         --ray OX,OY,OZ,DX,DY,DZ [--range M]] [--max-edge M]\n"
          "                            refine the session's tissue while it runs (needs the\n"
          "                            key): Loop (default; with its smoothing rules on the\n"
          "                            rest shape, --midpoints: new rest positions at edge\n"
          "                            midpoints) or longest-edge bisection (--leb) on\n"
          "                            the given outer-surface triangles (indices into the\n"
          "                            keyframe topology), or on those within M metres\n"
          "                            (default 0.005) of where the ray meets the surface\n"
          "                            (default: straight down onto the patch centre);\n"
          "                            --max-edge (only with --leb): bisect until the\n"
          "                            region's edges are under M metres (0..1; default\n"
          "                            0: half the region's longest edge); prints\n"
          "                            {\"vertex_count\":..,\"new_vertices\":..,...}\n"
          "  watch --session N [--seconds S] [--frames K] [--frame-rate F]\n"
          "                            join as an observer and print per-frame statistics\n"
          "                            and tool states for S seconds or until K frames\n"
          "                            (1..1000000000) came, whichever is first (default:\n"
          "                            until interrupted)\n"
          "  train --session N [--model KIND]\n"
          "                            join quasi-static session N as a tool controller\n"
          "                            and train its learned shortcut on the presses\n"
          "                            recorded so far (KIND: method, the default, rich,\n"
          "                            spread, spread2 or spread2r); prints each progress\n"
          "                            report (fraction, loss in m^2) and the last one with\n"
          "                            \"done\": samples, iterations, heldout_rmse (m),\n"
          "                            heldout_rel, model_id; then the model answers the\n"
          "                            session's presses. Exit status 1 when training\n"
          "                            failed (its \"error\", e.g. too few samples)\n"
          "  shortcut --session N --use learned|solve [--model-id ID]\n"
          "                            join quasi-static session N as a tool controller\n"
          "                            and switch it between the learned model and the\n"
          "                            quasi-static solve (from the next step on);\n"
          "                            --model-id first installs stored model ID (refused,\n"
          "                            TS_EMISMATCH, when it is of another tissue,\n"
          "                            material or solve)\n"
          "  reset --session N         put session N's tissue back at rest (also restarts\n"
          "                            a session that stopped on divergence); prints\n"
          "                            {\"session_id\":N,\"reset\":true}\n"
          "  end --session N           end session N for every client (what frees a\n"
          "                            --max-sessions-per-key place); prints\n"
          "                            {\"session_id\":N,\"ended\":true}. Both need the\n"
          "                            key (any session, even one whose tools are all\n"
          "                            taken) or a controller token of N (joins N as that\n"
          "                            tool's controller first: the tool must be free)\n"
          "  materials [--tissue NAME] the stored material fits of sigma = a e^(b strain)\n"
          "                            (of one tissue), one per line: id, tissue, layer,\n"
          "                            direction, name, a (Pa), b, rmse (Pa), r2, samples;\n"
          "                            the shipped table's are named \"default\"\n"
          "  fit FILE --layer L --direction axial|radial --name N [--tissue T]\n"
          "                            fit a and b to FILE's \"strain,stress\" lines\n"
          "                            (stress in Pa; '-' reads stdin) and store the fit in\n"
          "                            the daemon's database as N for tissue T (default\n"
          "                            stomach, the built-in patch's) and layer L (needs\n"
          "                            the key); a session takes N for L once both\n"
          "                            directions have it (create --materials). tissuetool\n"
          "                            fit does the same offline\n"
          "  models list [--tissue NAME]\n"
          "                            the stored learned models (of one tissue), one per\n"
          "                            line: model_id, tissue, material, kind, version,\n"
          "                            samples, loss (m^2), heldout_rmse, heldout_max (m),\n"
          "                            created (unix s)\n"
          "  models export ID          model ID's JSON document on stdout, the one\n"
          "                            'tissuetool models export' writes\n"
          "  models import FILE        store an exported document ('-' reads stdin) in\n"
          "                            this daemon's database as a new version; a model\n"
          "                            stored already (same tissue, material, kind and\n"
          "                            theta) is not stored again; prints the stored\n"
          "                            model's line. Its tissue must be known here\n"
          "  models delete ID          delete model ID (sessions using it keep it)\n"
          "                            The models commands need the server key.\n"
          "\n"
          "options:\n"
          "  --host H        daemon address (default %s)\n"
          "  --port P        daemon TCP port (default %d)\n"
          "  --timeout MS    how long a request waits for its reply (default 10000;\n"
          "                  create and refine: 120000, and each progress report\n"
          "                  the daemon sends while it builds the tissue starts it\n"
          "                  again)\n"
          "  --key K         the server key (needed by create, refine, fit and models;\n"
          "                  opens every session);\n"
          "                  default $TISSUED_SERVER_KEY\n"
          "  --token T       a session token (from create) instead of the key: an\n"
          "                  observer token for watch, a controller token for poke,\n"
          "                  reset and end\n"
          "  -h, --help      this text\n",
          DEFAULT_HOST, DEFAULT_PORT, POSE_RATE_HZ, DEFAULT_HOST, DEFAULT_PORT);
}

static int bad(ctl_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(ctl_args *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->err, sizeof a->err, fmt, ap);
  va_end(ap);
  return 1;
}

/* Strict number parsing: the whole string, finite, within [lo, hi]. */
static int parse_num(ctl_args *a, const char *flag, const char *s, double lo, double hi,
                     double *out) {
  if (!s) return bad(a, "%s needs a value", flag);
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
    return bad(a, "bad value '%s' for %s (expected a number in [%g, %g])", s, flag, lo, hi);
  *out = v;
  return 0;
}

/* parse_num for whole numbers. */
static int parse_int(ctl_args *a, const char *flag, const char *s, double lo, double hi,
                     double *out) {
  if (parse_num(a, flag, s, lo, hi, out)) return 1;
  if (*out != floor(*out)) return bad(a, "%s needs a whole number, not '%s'", flag, s);
  return 0;
}

/* Comma-separated numbers, strictly: 1..max of them, each finite, no empty
 * element (nor a trailing comma). Their count, or -1. */
static int parse_list(const char *s, double *out, int max) {
  for (int k = 0;;) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (k == max || errno || end == s || !isfinite(v)) return -1;
    out[k++] = v;
    if (*end == '\0') return k;
    if (*end != ',') return -1;
    s = end + 1;
  }
}

/* --layers: 1..CTL_MAX_LAYERS thicknesses in metres, each > 0. */
static int parse_layers(ctl_args *o, const char *s) {
  int n = parse_list(s, o->layers, CTL_MAX_LAYERS);
  for (int k = 0; k < n; k++)
    if (!(o->layers[k] > 0)) n = -1;
  if (n < 1)
    return bad(o, "--layers needs 1 to %d thicknesses in metres (> 0), comma-separated, not '%s'",
               CTL_MAX_LAYERS, s);
  o->n_layers = n;
  return 0;
}

/* --materials: 1..CTL_MAX_LAYERS names, comma-separated, each at most 63
 * bytes without a comma; an empty one keeps that layer's law, but not all
 * of them. */
static int parse_materials(ctl_args *o, const char *s) {
  int n = 0, named = 0;
  for (const char *p = s;; n++) {
    const char *e = strchr(p, ',');
    const size_t len = e ? (size_t)(e - p) : strlen(p);
    if (n == CTL_MAX_LAYERS || len > 63)
      return bad(o, "--materials needs 1 to %d fit names of at most 63 bytes, comma-separated, "
                    "not '%s'", CTL_MAX_LAYERS, s);
    memcpy(o->materials[n], p, len);
    o->materials[n][len] = '\0';
    named += len > 0;
    if (!e) break;
    p = e + 1;
  }
  if (!named) return bad(o, "--materials names no fit: '%s'", s);
  o->n_materials = n + 1;
  return 0;
}

/* --triangles: 1..CTL_MAX_TRIANGLES whole indices 0..2^32-1. */
static int parse_tris(ctl_args *o, const char *s) {
  double v[CTL_MAX_TRIANGLES];
  int n = parse_list(s, v, CTL_MAX_TRIANGLES);
  for (int k = 0; k < n; k++)
    if (v[k] < 0 || v[k] > 4294967295.0 || v[k] != floor(v[k])) n = -1;
  if (n < 1)
    return bad(o, "--triangles needs 1 to %d triangle indices I,J,... (whole numbers >= 0), "
                  "not '%s'", CTL_MAX_TRIANGLES, s);
  for (int k = 0; k < n; k++) o->tris[k] = (uint32_t)v[k];
  o->n_tris = n;
  return 0;
}

/* --ray: six numbers, the origin and the direction. */
static int parse_ray(ctl_args *o, const char *s) {
  if (parse_list(s, o->ray, 6) != 6)
    return bad(o, "--ray needs six numbers OX,OY,OZ,DX,DY,DZ, not '%s'", s);
  return 0;
}

/* The mesh format by the file name's extension (case-insensitive):
 * CTL_MESH_*, or -1. */
static int mesh_format(const char *path) {
  const char *dot = strrchr(path, '.');
  if (!dot) return -1;
  char ext[8] = "";
  for (size_t i = 0; i + 1 < sizeof ext && dot[1 + i]; i++)
    ext[i] = (char)(dot[1 + i] >= 'A' && dot[1 + i] <= 'Z' ? dot[1 + i] - 'A' + 'a' : dot[1 + i]);
  if (!strcmp(ext, "obj")) return CTL_MESH_OBJ;
  if (!strcmp(ext, "stl")) return CTL_MESH_STL;
  if (!strcmp(ext, "ply")) return CTL_MESH_PLY;
  return -1;
}

/* The model kinds train --model takes (the daemon's, ts_learn.c). */
static const char *const model_kinds[] = {"method", "rich", "spread", "spread2", "spread2r"};
#define MODEL_KINDS "method, rich, spread, spread2 or spread2r"

/* A model id of models export and delete: a whole number > 0. */
static int parse_model_id(ctl_args *o, const char *verb, const char *s) {
  char *end = NULL;
  errno = 0;
  /* digits only, as tissuetool's: strtoll would take blanks and a sign */
  long long v = *s >= '0' && *s <= '9' ? strtoll(s, &end, 10) : 0;
  if (errno || !end || end == s || *end || v <= 0)
    return bad(o, "models %s: '%s' is not a model id (a whole number > 0)", verb, s);
  o->verb_id = (int64_t)v;
  return 0;
}

int ctl_parse_args(int argc, char **argv, const char *default_cred, ctl_args *o) {
  memset(o, 0, sizeof *o);
  o->host = DEFAULT_HOST;
  o->cred = default_cred;
  o->port = DEFAULT_PORT;
  o->timeout = 10000;
  const char *cred_flag = NULL; /* the --key or --token given, one at most */
  int timeout_given = 0;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      return CTL_HELP;
    } else if (!strcmp(a, "--host") && i + 1 < argc) {
      o->host = argv[++i];
    } else if ((!strcmp(a, "--key") || !strcmp(a, "--token")) && i + 1 < argc) {
      if (cred_flag) { /* the last one won silently */
        bad(o, "%s after %s: give one credential, --key K or --token T", a, cred_flag);
        return CTL_ERROR;
      }
      cred_flag = a;
      o->cred = argv[++i];
    } else if (!strcmp(a, "--port")) {
      if (parse_int(o, a, i + 1 < argc ? argv[++i] : NULL, 1, 65535, &o->port)) return CTL_ERROR;
    } else if (!strcmp(a, "--timeout")) {
      if (parse_num(o, a, i + 1 < argc ? argv[++i] : NULL, 1, 3600000, &o->timeout))
        return CTL_ERROR;
      timeout_given = 1;
    } else {
      bad(o, "unknown or incomplete option '%s' (see --help)", a);
      return CTL_ERROR;
    }
  }
  if (i >= argc) return CTL_USAGE;
  const char *cmd = o->cmd = argv[i++];
  /* a mesh tissue of 90,000 vertices in three layers took 17.5 s to build
   * (a 2-core machine), and a client that gives up leaves the server's
   * work for nothing (it then starts no session) */
  /* a refinement rebuilds and prepares the whole tissue: at
   * --patch-resolution 200 (160,000 nodes) 9.9 s from request to reply, so
   * the 10 s default said "no reply" while the refinement went on and was
   * installed */
  if (!timeout_given && (!strcmp(cmd, "create") || !strcmp(cmd, "refine"))) o->timeout = 120000;
  o->tissue = "stomach-patch";
  if (!strcmp(cmd, "models")) {
    const char *verb = o->verb = i < argc ? argv[i++] : "list";
    if (!strcmp(verb, "-h") || !strcmp(verb, "--help")) return CTL_HELP;
    if (strcmp(verb, "list") && strcmp(verb, "export") && strcmp(verb, "import") &&
        strcmp(verb, "delete")) {
      bad(o, "models: expected list, export ID, import FILE or delete ID");
      return CTL_ERROR;
    }
    if (strcmp(verb, "list")) {
      if (i >= argc) {
        bad(o, "models %s needs %s", verb, strcmp(verb, "import") ? "a model id" : "a file");
        return CTL_ERROR;
      }
      o->verb_arg = argv[i++];
      if (strcmp(verb, "import") && parse_model_id(o, verb, o->verb_arg)) return CTL_ERROR;
    }
  }
  if (!strcmp(cmd, "tissues") && i < argc && argv[i][0] != '-') {
    const char *tv = argv[i++];
    if (!strcmp(tv, "delete")) {
      if (i >= argc || argv[i][0] == '-' || !argv[i][0]) {
        bad(o, "tissues delete needs the name of a stored tissue");
        return CTL_ERROR;
      }
      o->delete_tissue = argv[i++];
    } else if (strcmp(tv, "list")) {
      bad(o, "tissues: expected list or delete NAME, not '%s'", tv);
      return CTL_ERROR;
    }
  }
  if (!strcmp(cmd, "fit")) {
    if (i >= argc || (argv[i][0] == '-' && argv[i][1])) { /* "-": standard input */
      if (i < argc && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))) return CTL_HELP;
      bad(o, "fit needs a file of \"strain,stress\" lines first (fit FILE --layer L ...)");
      return CTL_ERROR;
    }
    o->fit_file = argv[i++];
    o->fit_tissue = "stomach";
  }
  const char *verb = o->verb;
  o->scale = 1;
  o->session = -1;
  o->depth = 0.004;
  o->seconds = -1;
  o->radius = 0.005;
  o->use_learned = -1;
  int tissue_given = 0, scale_given = 0, range_given = 0, max_edge_given = 0;
  while (i < argc) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int b = 0, used = 2; /* the option and its value */
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      return CTL_HELP;
    } else if (!strcmp(a, "--tissue") && v && !*v &&
               (!strcmp(cmd, "create") || (verb && !strcmp(verb, "list")))) {
      bad(o, "--tissue needs a tissue name, not ''");
      return CTL_ERROR;
    } else if (!strcmp(a, "--tissue") && v && (!strcmp(cmd, "materials") || !strcmp(cmd, "fit"))) {
      if (!*v) {
        bad(o, "--tissue needs a tissue name, not ''");
        return CTL_ERROR;
      }
      o->fit_tissue = v;
    } else if (!strcmp(a, "--layer") && !strcmp(cmd, "fit") && v && *v) {
      o->fit_layer = v;
    } else if (!strcmp(a, "--direction") && !strcmp(cmd, "fit") && v) {
      if (strcmp(v, "axial") && strcmp(v, "radial")) {
        bad(o, "--direction must be axial or radial, not '%s'", v);
        return CTL_ERROR;
      }
      o->fit_direction = v;
    } else if (!strcmp(a, "--name") && !strcmp(cmd, "fit") && v && *v) {
      o->fit_name = v;
    } else if (!strcmp(a, "--materials") && !strcmp(cmd, "create") && v) {
      o->materials_s = v;
      b = parse_materials(o, v);
    } else if (!strcmp(a, "--tissue") && !strcmp(cmd, "create") && v) {
      o->tissue = v;
      tissue_given = 1;
    } else if (!strcmp(a, "--tissue") && verb && !strcmp(verb, "list") && v) {
      o->model_tissue = v;
    } else if (!strcmp(a, "--mesh") && !strcmp(cmd, "create") && v) {
      o->mesh = v;
      if ((o->mesh_format = mesh_format(v)) < 0) {
        bad(o, "--mesh '%s': the file name must end in .obj, .stl or .ply", v);
        return CTL_ERROR;
      }
    } else if (!strcmp(a, "--name") && !strcmp(cmd, "create") && v) {
      if (!*v) {
        bad(o, "--name needs a name, not ''");
        return CTL_ERROR;
      }
      o->name = v;
    } else if (!strcmp(a, "--layers") && !strcmp(cmd, "create") && v) {
      o->layers_s = v;
      b = parse_layers(o, v);
    } else if (!strcmp(a, "--substeps") && !strcmp(cmd, "create")) {
      b = parse_int(o, a, v, 1, 1000, &o->substeps);
    } else if (!strcmp(a, "--tool-stiffness") && !strcmp(cmd, "create")) {
      b = parse_num(o, a, v, 0.1, 20, &o->tool_stiffness);
    } else if (!strcmp(a, "--self-contact") && !strcmp(cmd, "create")) {
      o->self_contact = 1;
      used = 1; /* no value */
    } else if (!strcmp(a, "--solver") && !strcmp(cmd, "create") && v) {
      if (!strcmp(v, "mass-spring"))
        o->solver = 1;
      else if (!strcmp(v, "xpbd"))
        o->solver = 2;
      else if (!strcmp(v, "quasi-static"))
        o->solver = 3;
      else {
        bad(o, "--solver must be mass-spring, xpbd or quasi-static, not '%s'", v);
        return CTL_ERROR;
      }
    } else if (!strcmp(a, "--model") && !strcmp(cmd, "train") && v) {
      size_t k = 0, nk = sizeof model_kinds / sizeof model_kinds[0];
      while (k < nk && strcmp(v, model_kinds[k])) k++;
      if (k == nk) {
        bad(o, "--model must be " MODEL_KINDS ", not '%s'", v);
        return CTL_ERROR;
      }
      o->model_kind = v;
    } else if (!strcmp(a, "--use") && !strcmp(cmd, "shortcut") && v) {
      if (!strcmp(v, "learned"))
        o->use_learned = 1;
      else if (!strcmp(v, "solve"))
        o->use_learned = 0;
      else {
        bad(o, "--use must be learned or solve, not '%s'", v);
        return CTL_ERROR;
      }
    } else if (!strcmp(a, "--model-id") && !strcmp(cmd, "shortcut")) {
      b = parse_int(o, a, v, 1, 9007199254740992.0, &o->model_id);
    } else if (!strcmp(a, "--scale") && !strcmp(cmd, "create")) {
      b = parse_num(o, a, v, 1e-6, 1000, &o->scale);
      scale_given = 1;
    } else if (!strcmp(a, "--with-records") && o->delete_tissue) {
      o->with_records = 1;
      used = 1; /* no value */
    } else if (!strcmp(a, "--leb") && !strcmp(cmd, "refine")) {
      o->leb = 1;
      used = 1; /* no value */
    } else if (!strcmp(a, "--midpoints") && !strcmp(cmd, "refine")) {
      o->midpoints = 1;
      used = 1; /* no value */
    } else if (!strcmp(a, "--triangles") && !strcmp(cmd, "refine") && v) {
      o->tris_s = v;
      b = parse_tris(o, v);
    } else if (!strcmp(a, "--ray") && !strcmp(cmd, "refine") && v) {
      o->ray_s = v;
      b = parse_ray(o, v);
    } else if (!strcmp(a, "--range") && !strcmp(cmd, "refine")) {
      b = parse_num(o, a, v, 0, 1, &o->range);
      range_given = 1;
    } else if (!strcmp(a, "--max-edge") && !strcmp(cmd, "refine")) {
      b = parse_num(o, a, v, 0, 1, &o->max_edge);
      max_edge_given = 1;
    } else if (!strcmp(a, "--session") &&
               (!strcmp(cmd, "poke") || !strcmp(cmd, "watch") || !strcmp(cmd, "refine") ||
                !strcmp(cmd, "train") || !strcmp(cmd, "shortcut") || !strcmp(cmd, "reset") ||
                !strcmp(cmd, "end"))) {
      b = parse_int(o, a, v, 1, 4294967295.0, &o->session);
    } else if (!strcmp(a, "--depth") && !strcmp(cmd, "poke")) {
      b = parse_num(o, a, v, 0, 0.05, &o->depth);
    } else if (!strcmp(a, "--radius") && !strcmp(cmd, "poke")) {
      b = parse_num(o, a, v, 0.0005, 0.05, &o->radius);
    } else if (!strcmp(a, "--friction") && !strcmp(cmd, "poke")) {
      int end = -1;
      if (!v || sscanf(v, "%lf,%lf%n", &o->mu[0], &o->mu[1], &end) != 2 || v[end] != '\0' ||
          !isfinite(o->mu[0]) || !isfinite(o->mu[1])) {
        bad(o, "--friction needs MUS,MUK (two numbers), got '%s'", v ? v : "");
        return CTL_ERROR;
      }
      o->have_mu = 1;
    } else if (!strcmp(a, "--seconds") && (!strcmp(cmd, "poke") || !strcmp(cmd, "watch"))) {
      b = parse_num(o, a, v, 0.01, 86400, &o->seconds);
    } else if (!strcmp(a, "--frames") && !strcmp(cmd, "watch")) {
      b = parse_int(o, a, v, 1, 1e9, &o->frames);
    } else if (!strcmp(a, "--frame-rate") && !strcmp(cmd, "watch")) {
      b = parse_int(o, a, v, 1, 1000, &o->rate);
    } else {
      bad(o, "unknown or incomplete option '%s' for '%s' (see --help)", a, cmd);
      return CTL_ERROR;
    }
    if (b) return CTL_ERROR;
    i += used;
  }
  o->is_poke = !strcmp(cmd, "poke");
  o->is_watch = !strcmp(cmd, "watch");
  o->is_refine = !strcmp(cmd, "refine");
  o->is_train = !strcmp(cmd, "train");
  o->is_shortcut = !strcmp(cmd, "shortcut");
  o->is_reset = !strcmp(cmd, "reset");
  o->is_end = !strcmp(cmd, "end");
  o->is_materials = !strcmp(cmd, "materials");
  o->is_fit = !strcmp(cmd, "fit");
  o->is_tissues = !strcmp(cmd, "tissues");
  if (strcmp(cmd, "sessions") && strcmp(cmd, "create") && !o->is_poke && !o->is_watch && !verb &&
      !o->is_refine && !o->is_train && !o->is_shortcut && !o->is_reset && !o->is_end &&
      !o->is_materials && !o->is_fit && !o->is_tissues) {
    bad(o, "unknown command '%s' (see --help)", cmd);
    return CTL_ERROR;
  }
  if ((o->is_poke || o->is_watch || o->is_refine || o->is_train || o->is_shortcut ||
       o->is_reset || o->is_end) &&
      o->session < 0) {
    bad(o, "%s needs --session N", cmd);
    return CTL_ERROR;
  }
  if (o->is_fit && (!o->fit_layer || !o->fit_direction || !o->fit_name)) {
    bad(o, "fit needs --%s", !o->fit_layer ? "layer L" : !o->fit_direction ? "direction axial|radial"
                                                                           : "name N");
    return CTL_ERROR;
  }
  if (o->materials_s && tissue_given && strcmp(o->tissue, "stomach-patch")) {
    bad(o, "--materials applies to the built-in patch or a --mesh upload (a stored --tissue "
           "keeps the materials it was uploaded with)");
    return CTL_ERROR;
  }
  if (o->materials_s && o->layers_s && o->n_materials > o->n_layers) {
    bad(o, "--materials names %d layers, --layers %d", o->n_materials, o->n_layers);
    return CTL_ERROR;
  }
  if (o->is_shortcut && o->use_learned < 0) {
    bad(o, "shortcut needs --use learned or --use solve");
    return CTL_ERROR;
  }
  if (o->solver && o->mesh) {
    bad(o, "--solver applies to create --tissue, not to a mesh upload (upload it once, then "
           "create --tissue NAME --solver ...)");
    return CTL_ERROR;
  }
  if (o->substeps > 0 && o->mesh) {
    bad(o, "--substeps applies to create --tissue, not to a mesh upload");
    return CTL_ERROR;
  }
  if (o->tool_stiffness > 0 && o->mesh) {
    bad(o, "--tool-stiffness applies to create --tissue, not to a mesh upload");
    return CTL_ERROR;
  }
  if (o->self_contact && o->mesh) {
    bad(o, "--self-contact applies to create --tissue, not to a mesh upload");
    return CTL_ERROR;
  }
  if (tissue_given && o->mesh) {
    bad(o, "--tissue applies to create without --mesh (--name names an upload's tissue)");
    return CTL_ERROR;
  }
  if (!o->mesh && (scale_given || o->layers_s)) {
    bad(o, "%s needs --mesh FILE (it applies to a mesh upload only)",
        scale_given ? "--scale" : "--layers");
    return CTL_ERROR;
  }
  if (o->tris_s && o->ray_s) {
    bad(o, "refine takes --triangles or --ray, not both");
    return CTL_ERROR;
  }
  if (o->tris_s && range_given) {
    bad(o, "--range applies to a ray pick, not to --triangles");
    return CTL_ERROR;
  }
  if (o->leb && o->midpoints) {
    bad(o, "--midpoints applies to Loop refinement, not to --leb");
    return CTL_ERROR;
  }
  if (max_edge_given && !o->leb) {
    bad(o, "--max-edge applies to --leb only");
    return CTL_ERROR;
  }
  if (o->is_poke && o->seconds < 0) o->seconds = 3;
  if (o->is_watch && o->seconds < 0) o->seconds = 0; /* until interrupted */
  return CTL_RUN;
}
