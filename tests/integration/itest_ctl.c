/*
 * itest_ctl.c: the command-line client, end to end. Runs the tissuectl binary
 * ($TISSUECTL_BIN) as a user would, against a real daemon (daemon_proc.h), and
 * checks its exit status, its JSON lines on stdout and its messages on stderr:
 *   - --help names every command (and describes refine --max-edge); usage
 *     errors exit 2 before connecting, naming the argument: bad numbers,
 *     a mesh file name without .obj/.stl/.ply, bad --layers, --triangles,
 *     --ray and model ids, an unknown or empty model kind, an empty
 *     --tissue or --name, --scale/--name/--layers without --mesh and
 *     options that exclude each other;
 *   - a session's life: create (tokens printed), sessions lists it, poke
 *     presses the patch (frames with a tool force and a displacement), watch
 *     with the observer token sees frames, refine (away from the
 *     press: see there) grows the vertex count and a
 *     later watch sees the refined tissue; refine --midpoints refines again;
 *     reset puts it back (refused to its observer token); end ends it (with a
 *     controller token of it: sessions no longer lists it, a second end finds
 *     no session) and so frees the key's place under --max-sessions-per-key;
 *     a poke whose session another client ends stops at once, saying so once;
 *   - material fits: the shipped table (six "default" fits), a fit of
 *     noiseless samples from a file and from stdin (a and b recovered), a
 *     session naming it for the mucosa (three layers kept), a name that has
 *     one direction only and an unknown one refused, naming the layer and
 *     direction; fit refused to a session token and for samples that give
 *     no fit; a session named with create --name, listed by it, a second of
 *     that name refused;
 *   - a mesh upload (the shared liver, centimetres) and a session of the
 *     stored tissue by name; tissues lists the patch and the upload (with the
 *     key only); tissues delete refuses while its sessions run and while a
 *     fit is stored under it, then deletes it with --with-records (the list
 *     and create no longer know it) and refuses the built-in patch;
 *     models list on an empty database;
 *   - the learned shortcut from the command line (issue 6): create --solver
 *     quasi-static, train refused with nothing recorded, poke records
 *     samples (sessions counts them), train prints its progress and the
 *     stored model, sessions shows the session learned, shortcut switches it
 *     to the solve and back, and refuses an unknown model id and a session
 *     that is not quasi-static;
 *   - every refusal (wrong key, wrong token, no such session or model, a
 *     mesh too small for its layers, a file that is no model, no daemon)
 *     exits 1 with the daemon's error code and reason on stderr.
 * Every run of the binary is bounded in time (killed after RUN_LIMIT_MS).
 */
#include "ts_check.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "binrun.h"
#include "daemon_proc.h"

#define RUN_LIMIT_MS 90000 /* generous: a sanitizer build steps far below real time */

typedef ts_binrun ctl_run;

/* Runs tissuectl ($TISSUECTL_BIN) with argv (NULL-ended) and collects its output. */
static void run_ctlv(ctl_run *o, const char *const *args) {
  const char *bin = getenv("TISSUECTL_BIN");
  ck_assert_msg(bin && *bin, "TISSUECTL_BIN is not set");
  ts_binrun_v(o, bin, RUN_LIMIT_MS, args);
}

#define run_ctl(o, ...)                                \
  do {                                                 \
    const char *const a_[] = {__VA_ARGS__, NULL};      \
    run_ctlv((o), a_);                                 \
  } while (0)

#define jnum ts_binrun_jnum
#define jstr ts_binrun_jstr
#define lines ts_binrun_lines

static void expect_refusal(ctl_run *o, int status, const char *what) {
  ck_assert_msg(o->status == status, "exit %d, expected %d; stderr: %s", o->status, status, o->err);
  ck_assert_msg(strstr(o->err, what) != NULL, "stderr lacks '%s': %s", what, o->err);
  ck_assert_msg(strncmp(o->err, "tissuectl: ", 11) == 0, "message not prefixed: %s", o->err);
}

START_TEST(test_help_and_usage) {
  static ctl_run o;
  run_ctl(&o, "--help");
  ck_assert_int_eq(o.status, 0);
  const char *cmds[] = {"sessions",      "create",        "poke",          "refine",
                        "watch",         "models list",   "models export", "models import",
                        "models delete", "--token",       "--solver",      "train --session",
                        "shortcut --session", "reset --session", "end --session", "tissues",
                        "materials", "fit FILE", "--materials", "tissues delete NAME",
                        "--with-records"};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    ck_assert_msg(strstr(o.out, cmds[i]) != NULL, "--help does not mention %s", cmds[i]);
  /* --max-edge is described, not only listed in the synopsis */
  const char *me = strstr(o.out, "[--max-edge M]");
  ck_assert_msg(me && strstr(me + 1, "--max-edge") && strstr(o.out, "longest edge"),
                "--help does not describe --max-edge");

  /* usage errors: exit 2, before any connection (port 1 has no daemon) */
  run_ctl(&o, "--port", "1", "bogus");
  expect_refusal(&o, 2, "unknown command 'bogus'");
  run_ctl(&o, "--port", "1", "create", "--substeps", "0");
  expect_refusal(&o, 2, "expected a number in [1, 1000]");
  run_ctl(&o, "--port", "1", "create", "--substeps", "2.5");
  expect_refusal(&o, 2, "whole number");
  run_ctl(&o, "--port", "1", "create", "--solver", "fem");
  expect_refusal(&o, 2, "--solver must be mass-spring, xpbd or quasi-static");
  run_ctl(&o, "--port", "1", "shortcut", "--session", "1");
  expect_refusal(&o, 2, "--use learned or --use solve");
  run_ctl(&o, "--port", "1", "train");
  expect_refusal(&o, 2, "train needs --session N");
  run_ctl(&o, "--port", "1", "end");
  expect_refusal(&o, 2, "end needs --session N");
  run_ctl(&o, "--port", "1", "reset", "--session", "0");
  expect_refusal(&o, 2, "--session");
  run_ctl(&o, "--port", "1", "end", "--session", "1", "--seconds", "1");
  expect_refusal(&o, 2, "unknown or incomplete option '--seconds' for 'end'");
  run_ctl(&o, "--port", "70000", "sessions");
  expect_refusal(&o, 2, "--port");
  run_ctl(&o, "--port", "1", "watch", "--session", "1", "--token");
  ck_assert_int_eq(o.status, 2);

  /* the arguments checked while parsing, not after connecting: each names
   * the argument and exits 2 (port 1 has no daemon: "cannot connect" would
   * mean the check came too late) */
  static const struct {
    const char *args[12], *what;
  } early[] = {
      {{"--key", "k1", "--token", "t1", "sessions"}, "--token after --key: give one credential"},
      {{"create", "--mesh", "noext"}, "--mesh 'noext'"},
      {{"create", "--mesh", "organ.obj.bak"}, "must end in .obj, .stl or .ply"},
      {{"create", "--mesh", "x.obj", "--layers", "abc"}, "--layers"},
      {{"create", "--mesh", "x.obj", "--layers", "0.001,"}, "--layers"},
      {{"create", "--mesh", "x.obj", "--layers", "0.001,0"}, "--layers"},
      {{"create", "--mesh", "x.obj", "--name", ""}, "--name"},
      {{"create", "--mesh", "x.obj", "--tissue", "t"}, "--tissue applies to create without --mesh"},
      {{"create", "--scale", "2"}, "--scale needs --mesh"},
      {{"create", "--name", ""}, "--name needs a name"},
      {{"sessions", "--name", "foo"}, "unknown or incomplete option '--name' for 'sessions'"},
      {{"tissues", "--tissue", "x"}, "unknown or incomplete option '--tissue' for 'tissues'"},
      {{"tissues", "delete"}, "tissues delete needs the name of a stored tissue"},
      {{"tissues", "drop", "x"}, "tissues: expected list or delete NAME, not 'drop'"},
      {{"tissues", "--with-records"}, "unknown or incomplete option '--with-records'"},
      {{"create", "--layers", "0.001"}, "--layers needs --mesh"},
      {{"create", "--tissue", ""}, "--tissue needs a tissue name"},
      {{"models", "list", "--tissue", ""}, "--tissue needs a tissue name"},
      {{"models", "export", "abc"}, "'abc' is not a model id"},
      {{"models", "delete", "0"}, "'0' is not a model id"},
      {{"models", "export", " 5"}, "' 5' is not a model id"},
      {{"refine", "--session", "1", "--ray", "1,2"}, "--ray needs six numbers"},
      {{"refine", "--session", "1", "--triangles", "a,b"}, "--triangles"},
      {{"refine", "--session", "1", "--triangles", "1,2.5"}, "--triangles"},
      {{"refine", "--session", "1", "--triangles", "1", "--ray", "0,0,0,0,-1,0"},
       "--triangles or --ray, not both"},
      {{"refine", "--session", "1", "--triangles", "1", "--range", "0.01"}, "--range"},
      {{"refine", "--session", "1", "--leb", "--midpoints"}, "--midpoints"},
      {{"refine", "--session", "1", "--max-edge", "0.002"}, "--max-edge applies to --leb"},
      {{"train", "--session", "1", "--model", ""}, "--model must be method, rich, spread, "
                                                   "spread2 or spread2r, not ''"},
      {{"train", "--session", "1", "--model", "cubic"}, "--model must be method"},
      {{"fit"}, "fit needs a file"},
      {{"fit", "--layer", "mucosa"}, "fit needs a file"},
      {{"fit", "s.csv", "--layer", "mucosa", "--direction", "up", "--name", "n"},
       "--direction must be axial or radial, not 'up'"},
      {{"fit", "s.csv", "--layer", "mucosa", "--direction", "axial"}, "fit needs --name N"},
      {{"fit", "s.csv", "--direction", "axial", "--name", "n"}, "fit needs --layer L"},
      {{"fit", "s.csv", "--layer", "mucosa", "--direction", "axial", "--name", "n", "--tissue",
        ""},
       "--tissue needs a tissue name"},
      {{"materials", "--tissue", ""}, "--tissue needs a tissue name"},
      {{"materials", "--layer", "mucosa"}, "unknown or incomplete option '--layer'"},
      {{"create", "--materials", ",,"}, "--materials names no fit"},
      {{"create", "--materials", "a,b,c,d,e,f,g,h,i"}, "--materials needs 1 to 8"},
      {{"create", "--tissue", "my-organ", "--materials", "a"}, "--materials applies to the built-in"},
      {{"create", "--mesh", "x.obj", "--layers", "0.001", "--materials", "a,b"},
       "--materials names 2 layers, --layers 1"},
  };
  for (size_t i = 0; i < sizeof early / sizeof early[0]; i++) {
    const char *args[16] = {"--port", "1"};
    size_t n = 2;
    for (size_t k = 0; early[i].args[k]; k++) args[n++] = early[i].args[k];
    args[n] = NULL;
    run_ctlv(&o, args);
    ck_assert_msg(!strstr(o.err, "cannot connect"), "%s %s: checked after connecting: %s",
                  early[i].args[0], early[i].args[1], o.err);
    expect_refusal(&o, 2, early[i].what);
    ck_assert_msg(!strchr(o.err, '\n') || !strchr(o.err, '\n')[1], "not one line: %s", o.err);
  }
  /* a file that cannot be read is said before connecting too (exit 1) */
  run_ctl(&o, "--port", "1", "create", "--mesh", "/nonexistent/organ.obj");
  expect_refusal(&o, 1, "/nonexistent/organ.obj: cannot read");
  const char *const none[] = {NULL};
  run_ctlv(&o, none);
  ck_assert_int_eq(o.status, 2);
  ck_assert_ptr_nonnull(strstr(o.err, "usage: tissuectl"));

  /* no daemon listening: a clear message, exit 1 */
  run_ctl(&o, "--port", "1", "sessions");
  expect_refusal(&o, 1, "cannot connect");
  ck_assert_uint_eq(o.n_out, 0);
}
END_TEST

START_TEST(test_session_life) {
  ts_dproc d;
  char err[256], port[16];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  snprintf(port, sizeof port, "%d", d.tcp_port);
  static ctl_run o;
  char *v[512];

  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "sessions");
  ck_assert_int_eq(o.status, 0);
  ck_assert_uint_eq(o.n_out, 0);

  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create");
  ck_assert_msg(o.status == 0, "create: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  double sid = jnum(v[0], "session_id"), verts = jnum(v[0], "vertex_count");
  ck_assert(sid >= 1 && verts > 100);
  char observer[64], sid_s[16];
  jstr(v[0], "observer_token", observer, sizeof observer);
  ck_assert_uint_eq(strlen(observer), 32);
  const char *ct = strstr(v[0], "\"controller_tokens\":[\"");
  ck_assert_ptr_nonnull(ct);
  char controller[64]; /* the first tool's token, for end below */
  ct += strlen("\"controller_tokens\":[\"");
  const char *ce = strchr(ct, '"');
  ck_assert_msg(ce && ce - ct == 32, "controller token: %s", v[0]);
  memcpy(controller, ct, 32);
  controller[32] = '\0';
  snprintf(sid_s, sizeof sid_s, "%.0f", sid);

  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "sessions");
  ck_assert_int_eq(o.status, 0);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  ck_assert(jnum(v[0], "session_id") == sid && jnum(v[0], "vertex_count") == verts);
  ck_assert_ptr_nonnull(strstr(v[0], "\"tissue\":\"stomach-patch\""));

  /* poke: a 5 mm sphere pressed 4 mm into the patch and lifted. The patch's
   * top sheet must follow it by millimetres (the tool goes 4 mm below the
   * rest surface) and push back; 5 mN is about a tenth of what the default
   * patch gives at full depth, so a working press clears it by far while a
   * tool that touched nothing reads 0. */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "poke", "--session", sid_s, "--seconds",
          "1.5", "--depth", "0.004");
  ck_assert_msg(o.status == 0, "poke: %s", o.err);
  /* one line per frame received; how many arrive in 1.5 s depends on the
   * machine's load (an ASan build on a busy box has delivered fewer than
   * five), so only two are required: enough to check the sequence grows */
  int n = lines(&o, v, 512);
  ck_assert_int_ge(n, 2);
  double fmax = 0, dmax = 0, last_seq = 0;
  for (int i = 0; i < n; i++) {
    ck_assert(jnum(v[i], "session") == sid && jnum(v[i], "vertices") == verts);
    double f = jnum(v[i], "force_n"), dd = jnum(v[i], "max_disp_mm"), s = jnum(v[i], "seq");
    ck_assert(s > last_seq);
    last_seq = s;
    if (f > fmax) fmax = f;
    if (dd > dmax) dmax = dd;
  }
  fprintf(stderr, "ctl: poke %d frames, largest force %.4f N, displacement %.3f mm\n", n, fmax,
          dmax);
  ck_assert_msg(fmax > 0.005, "largest tool force %g N", fmax);
  ck_assert_msg(dmax > 1.0, "largest displacement %g mm", dmax);
  ck_assert_ptr_nonnull(strstr(o.err, "joined session"));
  fprintf(stderr, "ctl: poke's last frame: sim_time %.3f s, tool_y %.4f m\n",
          jnum(v[n - 1], "sim_time"), jnum(v[n - 1], "tool_y"));

  /* refine (Loop) 28 mm off the patch centre, away from where poke pressed:
   * the vertex count grows by what it says it added. Not under the press:
   * poke's script runs by the wall clock, and where physics runs behind it
   * (a loaded machine, a sanitizer build) poke leaves with its sphere still
   * millimetres deep in the simulated patch, or drives it down faster in
   * simulated time; the top layer's prisms under it can then end up folded
   * through, and stay so after the tool is gone (a spring network's energy
   * does not see a reflection), and a refinement there is rightly refused
   * (TS_EMESH "... inverted in the current shape": its new nodes go to the
   * current midpoints, so the refined prisms would start inverted). Measured
   * on this patch: refining under the centre after a poke of 0.2 s or 0.5 s
   * (the tool released 4 mm deep), even 3 s later, is refused; after a
   * poke of 1.5 s on an idle machine it passes; here, after any of them, it
   * passes. */
  static const char away[] = "0.02,0.05,0.02,0,-1,0"; /* straight down onto (20, 20) mm */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "refine", "--session", sid_s, "--ray", away);
  ck_assert_msg(o.status == 0, "refine: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  double verts2 = jnum(v[0], "vertex_count"), added = jnum(v[0], "new_vertices");
  ck_assert(added > 0 && verts2 == verts + added);

  /* an observer with the session's token sees the refined tissue's keyframe
   * (an idle session sends frames only as it changes, so the keyframe on
   * joining is the one frame guaranteed); it stops at that frame, with time
   * to spare for a loaded machine (0.5 s once was not enough under ASan) */
  run_ctl(&o, "--port", port, "--token", observer, "watch", "--session", sid_s, "--frames", "1",
          "--seconds", "60");
  ck_assert_msg(o.status == 0, "watch: %s", o.err);
  n = lines(&o, v, 512);
  ck_assert_int_ge(n, 1);
  ck_assert_ptr_nonnull(strstr(v[0], "\"keyframe\":true"));
  ck_assert(jnum(v[0], "vertices") == verts2);

  /* Loop again with midpoint rest positions (--midpoints: the smoothing
   * off, RefineRegion.midpoint_rest), during the first one's blend */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "refine", "--session", sid_s, "--midpoints",
          "--ray", away);
  ck_assert_msg(o.status == 0, "refine --midpoints: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  ck_assert(jnum(v[0], "new_vertices") > 0 && jnum(v[0], "vertex_count") == verts2 + jnum(v[0], "new_vertices"));

  /* the observer token opens nothing else */
  run_ctl(&o, "--port", port, "--token", observer, "poke", "--session", sid_s, "--seconds", "0.2");
  expect_refusal(&o, 1, "TS_EAUTH");
  run_ctl(&o, "--port", port, "--token", observer, "create");
  expect_refusal(&o, 1, "TS_EAUTH");
  run_ctl(&o, "--port", port, "--key", "wrong-key-0123456789abcdef", "create");
  expect_refusal(&o, 1, "TS_EAUTH");

  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "poke", "--session", "99", "--seconds", "0.2");
  expect_refusal(&o, 1, "TS_ENOSESSION");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "refine", "--session", "99");
  expect_refusal(&o, 1, "TS_ENOSESSION");

  /* reset and end: a controller's requests. The observer token may do
   * neither; the key resets; a controller token of the session ends it,
   * and it is gone from the list; a second end finds no session */
  run_ctl(&o, "--port", port, "--token", observer, "reset", "--session", sid_s);
  expect_refusal(&o, 1, "TS_EAUTH");
  run_ctl(&o, "--port", port, "--token", observer, "end", "--session", sid_s);
  expect_refusal(&o, 1, "TS_EAUTH");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "reset", "--session", sid_s);
  ck_assert_msg(o.status == 0, "reset: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  ck_assert(jnum(v[0], "session_id") == sid);
  ck_assert_ptr_nonnull(strstr(v[0], "\"reset\":true"));
  run_ctl(&o, "--port", port, "--token", controller, "end", "--session", sid_s);
  ck_assert_msg(o.status == 0, "end: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  ck_assert(jnum(v[0], "session_id") == sid);
  ck_assert_ptr_nonnull(strstr(v[0], "\"ended\":true"));
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "sessions");
  ck_assert_int_eq(o.status, 0);
  ck_assert_uint_eq(o.n_out, 0);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "end", "--session", sid_s);
  expect_refusal(&o, 1, "TS_ENOSESSION");

  char why[256];
  ck_assert_msg(ts_dproc_stop(&d, 5000, why, sizeof why) == 0, "%s", why);
}
END_TEST

/* The key's place under --max-sessions-per-key comes back when tissuectl
 * ends one of its sessions: the daemon's refusal says how, and after the end
 * a create passes again. A poke whose session is ended stops; a fit over
 * --max-message says the daemon's reason. */
START_TEST(test_end_frees_a_place) {
  ts_dproc d;
  char err[256], port[16];
  /* one tool a session: the poke below holds it while end, with the key,
   * ends the session without joining (before, end joined as a controller
   * and a session whose tools were all taken could not be ended: TS_ETOOL) */
  const char *args[] = {"--max-sessions-per-key", "1", "--max-message", "65536", "--max-tools", "1",
                        NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  snprintf(port, sizeof port, "%d", d.tcp_port);
  static ctl_run o;
  char *v[16], sid_s[16];

  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create");
  ck_assert_msg(o.status == 0, "create: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 16), 1);
  snprintf(sid_s, sizeof sid_s, "%.0f", jnum(v[0], "session_id"));
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create");
  expect_refusal(&o, 1, "TS_EFULL");
  ck_assert_ptr_nonnull(strstr(o.err, "tissuectl end --session N"));
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "end", "--session", sid_s);
  ck_assert_msg(o.status == 0, "end: %s", o.err);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create");
  ck_assert_msg(o.status == 0, "create after end: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 16), 1);
  ck_assert(jnum(v[0], "session_id") > 0);

  /* a poke whose session another client ends stops there, with the
   * daemon's word once (before, it kept sending poses to the end of its
   * 60 s, each refused with TS_ENOTJOINED and said on stderr; the refusals
   * of poses already in flight when the end came are not said either: an
   * ASan build's run said one) */
  snprintf(sid_s, sizeof sid_s, "%.0f", jnum(v[0], "session_id"));
  char script[512];
  snprintf(script, sizeof script,
           "\"$0\" --port %s --key %s poke --session %s --seconds 60 >/dev/null & p=$!; sleep 1; "
           "\"$0\" --port %s --key %s end --session %s >/dev/null 2>&1 || echo 'end failed' >&2; "
           "wait $p",
           port, TS_DPROC_KEY, sid_s, port, TS_DPROC_KEY, sid_s);
  const char *const sh[] = {"-c", script, getenv("TISSUECTL_BIN"), NULL};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ts_binrun_v(&o, "/bin/sh", RUN_LIMIT_MS, sh);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  expect_refusal(&o, 1, "TS_ENOSESSION from the server: session");
  ck_assert_msg(!strstr(o.err, "end failed"), "end refused with the session's only tool taken: %s",
                o.err);
  int said = 0;
  for (const char *q = o.err; (q = strstr(q, "from the server")) != NULL; q++) said++;
  ck_assert_msg(said == 1, "%d errors said: %s", said, o.err);
  ck_assert_msg(took < 40, "poke went on for %.1f s after its session ended", took);

  /* a request over the daemon's --max-message, larger than the socket
   * buffers take: the daemon says TS_ETOOBIG and closes while tissuectl
   * still writes; the failed write reads and says why (before: "send:
   * Broken pipe") */
  char big[sizeof d.dir + 16];
  snprintf(big, sizeof big, "%s/big.csv", d.dir);
  FILE *f = fopen(big, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "strain,stress\n");
  for (int i = 0; i < 400000; i++) fprintf(f, "%.9f,%.9f\n", 1e-7 * i, 1000 + 1e-3 * i);
  ck_assert_int_eq(fclose(f), 0);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "fit", big, "--layer", "mucosa", "--direction",
          "axial", "--name", "big");
  expect_refusal(&o, 1, "TS_ETOOBIG");

  char why[256];
  ck_assert_msg(ts_dproc_stop(&d, 5000, why, sizeof why) == 0, "%s", why);
}
END_TEST

/* Material fits through the daemon: tissuectl materials, fit, create
 * --materials. */
START_TEST(test_materials) {
  ts_dproc d;
  char err[256], port[16];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  snprintf(port, sizeof port, "%d", d.tcp_port);
  static ctl_run o;
  char *v[64], s[64];

  /* the shipped table: both directions of the three layers, "default" */
  run_ctl(&o, "--port", port, "materials");
  ck_assert_msg(o.status == 0, "materials: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 6);
  for (int i = 0; i < 6; i++) {
    jstr(v[i], "name", s, sizeof s);
    ck_assert_str_eq(s, "default");
    jstr(v[i], "tissue", s, sizeof s);
    ck_assert_str_eq(s, "stomach");
    ck_assert(jnum(v[i], "a") > 0 && jnum(v[i], "b") > 0);
  }

  /* noiseless samples of sigma = 988050 e^(2.55 eps): the fit gives a and b
   * back (the least-squares optimum of exact data, to rounding: 1e-9) */
  char csv[sizeof d.dir + 16]; /* in the daemon's directory, removed with it */
  snprintf(csv, sizeof csv, "%s/stiff.csv", d.dir);
  FILE *f = fopen(csv, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "strain,stress\n");
  for (int i = 0; i <= 20; i++) fprintf(f, "%.17g,%.17g\n", 0.01 * i, 988050 * exp(2.55 * 0.01 * i));
  ck_assert_int_eq(fclose(f), 0);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "fit", csv, "--layer", "mucosa",
          "--direction", "axial", "--name", "lab-stiff");
  ck_assert_msg(o.status == 0, "fit: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  ck_assert_msg(fabs(jnum(v[0], "a") / 988050 - 1) < 1e-9 && fabs(jnum(v[0], "b") / 2.55 - 1) < 1e-9,
                "fit %s", v[0]);
  ck_assert(jnum(v[0], "samples") == 21 && jnum(v[0], "id") > 6);
  jstr(v[0], "direction", s, sizeof s);
  ck_assert_str_eq(s, "axial");

  /* the name has the mucosa's axial fit only: a session naming it is
   * refused, and the daemon says which fit is missing */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--materials", "lab-stiff,,");
  expect_refusal(&o, 1, "'lab-stiff' for stomach/mucosa/radial");

  /* the radial one from stdin ('-') */
  const char *bin = getenv("TISSUECTL_BIN");
  char script[sizeof csv + 32];
  snprintf(script, sizeof script, "exec \"$0\" \"$@\" < \"%s\"", csv);
  const char *const sh[] = {"-c", script, bin, "--port", port, "--key", TS_DPROC_KEY, "fit", "-",
                            "--layer", "mucosa", "--direction", "radial", "--name", "lab-stiff",
                            NULL};
  ts_binrun_v(&o, "/bin/sh", RUN_LIMIT_MS, sh);
  ck_assert_msg(o.status == 0, "fit -: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  jstr(v[0], "direction", s, sizeof s);
  ck_assert_str_eq(s, "radial");
  ck_assert(fabs(jnum(v[0], "a") / 988050 - 1) < 1e-9);

  run_ctl(&o, "--port", port, "materials", "--tissue", "stomach");
  ck_assert_int_eq(o.status, 0);
  ck_assert_int_eq(lines(&o, v, 64), 8);

  /* a session with it for the mucosa keeps the patch's three layers (the
   * same vertex count as the default create); an unknown name for the
   * submucosa is refused naming that layer */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create");
  ck_assert_msg(o.status == 0, "create: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  const double verts = jnum(v[0], "vertex_count");
  char observer[64];
  jstr(v[0], "observer_token", observer, sizeof observer);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--materials", "lab-stiff,,");
  ck_assert_msg(o.status == 0, "create --materials: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  ck_assert(jnum(v[0], "vertex_count") == verts);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--materials", "lab-stiff,nosuch");
  expect_refusal(&o, 1, "'nosuch' for stomach/submucosa/axial");

  /* a session named from the command line is listed by its name, which
   * no second session may take */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--name", "room-1");
  ck_assert_msg(o.status == 0, "create --name: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  const double named = jnum(v[0], "session_id");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "sessions");
  ck_assert_int_eq(o.status, 0);
  int found = 0;
  for (int i = 0, n = lines(&o, v, 64); i < n; i++) {
    jstr(v[i], "name", s, sizeof s);
    if (jnum(v[i], "session_id") == named) found = !strcmp(s, "room-1");
  }
  ck_assert_msg(found, "session %.0f not listed as room-1", named);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--name", "room-1");
  expect_refusal(&o, 1, "TS_EEXISTS");

  /* fitting needs the key; samples that give no fit are refused with the reason */
  run_ctl(&o, "--port", port, "--token", observer, "fit", "/dev/null", "--layer", "mucosa",
          "--direction", "axial", "--name", "x");
  expect_refusal(&o, 1, "TS_EAUTH");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "fit", "/dev/null", "--layer", "mucosa",
          "--direction", "axial", "--name", "x");
  expect_refusal(&o, 1, "TS_EINVAL");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "fit", "/nonexistent/s.csv", "--layer",
          "mucosa", "--direction", "axial", "--name", "x");
  expect_refusal(&o, 1, "/nonexistent/s.csv: cannot read");

  char why[256];
  ck_assert_msg(ts_dproc_stop(&d, 5000, why, sizeof why) == 0, "%s", why);
}
END_TEST

START_TEST(test_meshes_and_models) {
  ts_dproc d;
  char err[256], port[16], liver[512];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  snprintf(port, sizeof port, "%d", d.tcp_port);
  ts_dproc_shared_mesh("liver.obj", liver, sizeof liver);
  static ctl_run o;
  char *v[64];

  /* millimetres instead of centimetres: far too small for the layers */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--mesh", liver, "--scale",
          "0.001");
  expect_refusal(&o, 1, "TS_ERANGE");
  ck_assert_ptr_nonnull(strstr(o.err, "check the scale"));

  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--mesh", liver, "--scale", "0.01",
          "--name", "ctl-liver");
  ck_assert_msg(o.status == 0, "create --mesh: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  double verts = jnum(v[0], "vertex_count");
  char sid1[16];
  snprintf(sid1, sizeof sid1, "%.0f", jnum(v[0], "session_id"));
  ck_assert(verts > 139 && jnum(v[0], "bytes") > 8000);
  /* the default layers are thinned at the liver's creases (itest_mesh has
   * the counts): said in the output, in numbers and in words */
  double thinned = jnum(v[0], "thinned_vertices"), least = jnum(v[0], "min_depth_fraction");
  ck_assert_msg(thinned > 0 && thinned < 139 && least >= 0.1 - 1e-6 && least < 1, "%s", v[0]);
  ck_assert_msg(strstr(v[0], "\"warning\":\"") && strstr(v[0], "offset less"), "%s", v[0]);

  /* the stored tissue by name: same tissue, a second session */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--tissue", "ctl-liver");
  ck_assert_msg(o.status == 0, "create --tissue: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  ck_assert(jnum(v[0], "vertex_count") == verts);
  char sid2[16];
  snprintf(sid2, sizeof sid2, "%.0f", jnum(v[0], "session_id"));
  ck_assert(jnum(v[0], "thinned_vertices") == thinned); /* rebuilt the same way */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "sessions");
  ck_assert_int_eq(lines(&o, v, 64), 2);
  for (int i = 0; i < 2; i++) ck_assert_ptr_nonnull(strstr(v[i], "\"tissue\":\"ctl-liver\""));
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--tissue", "no-such-tissue");
  ck_assert_int_eq(o.status, 1);

  /* tissues: the built-in patch, then the upload (the material table's
   * tissue, "stomach", is no session's and not listed); the key's alone */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues");
  ck_assert_msg(o.status == 0, "tissues: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 2);
  char nm[64], kind[16];
  jstr(v[0], "name", nm, sizeof nm);
  jstr(v[0], "kind", kind, sizeof kind);
  ck_assert_str_eq(nm, "stomach-patch");
  ck_assert_str_eq(kind, "builtin");
  jstr(v[1], "name", nm, sizeof nm);
  jstr(v[1], "kind", kind, sizeof kind);
  ck_assert_str_eq(nm, "ctl-liver");
  ck_assert_str_eq(kind, "mesh");
  ck_assert(jnum(v[1], "created") > 1.7e9);
  run_ctl(&o, "--port", port, "tissues");
  expect_refusal(&o, 1, "TS_EAUTH");

  /* tissues delete: refused while its sessions run (naming them), then
   * while a material fit is stored under it, then deleted with it; the
   * upload is then gone from the list and from create; the built-in patch,
   * an unknown name and a client without the key are refused */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues", "delete", "ctl-liver");
  expect_refusal(&o, 1, "TS_EBUSY");
  const char *busy = strstr(o.err, "in use by 2 sessions (");
  ck_assert_msg(busy && strstr(busy, sid1) && strstr(busy, sid2), "sessions not named: %s", o.err);
  char csv[sizeof d.dir + 16];
  snprintf(csv, sizeof csv, "%s/liver.csv", d.dir);
  FILE *f = fopen(csv, "w");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i <= 10; i++) fprintf(f, "%.17g,%.17g\n", 0.01 * i, 2e4 * exp(3 * 0.01 * i));
  ck_assert_int_eq(fclose(f), 0);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "fit", csv, "--tissue", "ctl-liver",
          "--layer", "mucosa", "--direction", "axial", "--name", "liver-lab");
  ck_assert_msg(o.status == 0, "fit --tissue ctl-liver: %s", o.err);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "end", "--session", sid1);
  ck_assert_msg(o.status == 0, "end: %s", o.err);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues", "delete", "ctl-liver");
  expect_refusal(&o, 1, "in use by 1 session (");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "end", "--session", sid2);
  ck_assert_msg(o.status == 0, "end: %s", o.err);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues", "delete", "ctl-liver");
  expect_refusal(&o, 1, "0 learned models and 1 material fit stored with it");
  ck_assert_msg(strstr(o.err, "TS_EBUSY") && strstr(o.err, "--with-records"), "%s", o.err);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "materials", "--tissue", "ctl-liver");
  ck_assert_int_eq(o.status, 0);
  ck_assert_int_eq(lines(&o, v, 64), 1); /* nothing deleted */
  run_ctl(&o, "--port", port, "tissues", "delete", "ctl-liver", "--with-records");
  expect_refusal(&o, 1, "TS_EAUTH");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues", "delete", "ctl-liver",
          "--with-records");
  ck_assert_msg(o.status == 0, "tissues delete: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  ck_assert_str_eq(v[0], "{\"deleted\":\"ctl-liver\"}");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues");
  ck_assert_int_eq(o.status, 0);
  ck_assert_int_eq(lines(&o, v, 64), 1);
  ck_assert_ptr_nonnull(strstr(v[0], "\"stomach-patch\""));
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "materials", "--tissue", "ctl-liver");
  ck_assert_uint_eq(o.n_out, 0);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--tissue", "ctl-liver");
  expect_refusal(&o, 1, "TS_ENOTISSUE");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues", "delete", "ctl-liver");
  expect_refusal(&o, 1, "TS_ENOTISSUE");
  /* (with a session of it running: refused as built-in, not as in use) */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create");
  ck_assert_msg(o.status == 0, "create: %s", o.err);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "tissues", "delete", "stomach-patch");
  expect_refusal(&o, 1, "only uploads can be deleted");

  /* models: none stored yet; refusals name the problem */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "models", "list");
  ck_assert_msg(o.status == 0, "models list: %s", o.err);
  ck_assert_uint_eq(o.n_out, 0);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "models", "export", "12345");
  expect_refusal(&o, 1, "no model 12345");
  ck_assert_msg(strstr(o.err, "TS_ENOMODEL") != NULL, "not the not-found code: %s", o.err);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "models", "import", liver);
  expect_refusal(&o, 1, "refused");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "models", "import", "/nonexistent/model.json");
  ck_assert_int_ne(o.status, 0);
  ck_assert_ptr_nonnull(strstr(o.err, "/nonexistent/model.json"));

  char why[256];
  ck_assert_msg(ts_dproc_stop(&d, 5000, why, sizeof why) == 0, "%s", why);
}
END_TEST

/* The "sessions" line of session sid_s (into line), or 0 when not listed. */
static int session_line(const char *port, const char *sid_s, char *line, size_t cap) {
  static ctl_run o;
  char *v[64], key[32];
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "sessions");
  ck_assert_msg(o.status == 0, "sessions: %s", o.err);
  snprintf(key, sizeof key, "\"session_id\":%s,", sid_s);
  int n = lines(&o, v, 64);
  for (int i = 0; i < n; i++)
    if (strstr(v[i], key)) {
      snprintf(line, cap, "%s", v[i]);
      return 1;
    }
  return 0;
}

/* Waits (bounded: 60 s, the session's next step is all it takes) until
 * session sid_s's line says "learned":want. */
static void wait_learned(const char *port, const char *sid_s, int want) {
  char line[1024], pat[32];
  snprintf(pat, sizeof pat, "\"learned\":%s", want ? "true" : "false");
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    ck_assert(session_line(port, sid_s, line, sizeof line));
    if (strstr(line, pat)) return;
    clock_gettime(CLOCK_MONOTONIC, &t);
    ck_assert_msg(t.tv_sec - t0.tv_sec < 60, "session %s never said %s: %s", sid_s, pat, line);
    struct timespec pause = {0, 100000000};
    nanosleep(&pause, NULL);
  }
}

START_TEST(test_shortcut) {
  ts_dproc d;
  char err[256], port[16], line[1024], sid_s[16];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  snprintf(port, sizeof port, "%d", d.tcp_port);
  static ctl_run o;
  char *v[512];

  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create", "--solver", "quasi-static");
  ck_assert_msg(o.status == 0, "create --solver quasi-static: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  snprintf(sid_s, sizeof sid_s, "%.0f", jnum(v[0], "session_id"));
  ck_assert(session_line(port, sid_s, line, sizeof line));
  ck_assert_msg(jnum(line, "solver") == 3 && strstr(line, "\"learned\":false") &&
                    jnum(line, "samples") == 0,
                "%s", line);

  /* nothing recorded: the training ends at once with the reason, exit 1 */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "train", "--session", sid_s);
  ck_assert_msg(o.status == 1, "train with no samples: exit %d, %s", o.status, o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  ck_assert_msg(strstr(v[0], "\"done\":true") && strstr(v[0], "training needs at least"), "%s",
                v[0]);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "shortcut", "--session", sid_s, "--use",
          "learned");
  expect_refusal(&o, 1, "no trained model yet");

  /* presses record samples; on a slow (sanitizer) build a poke may end
   * before a press was solved, so poke until some are counted (bounded) */
  double samples = 0;
  for (int k = 0; k < 10 && samples < 64; k++) {
    run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "poke", "--session", sid_s, "--seconds",
            "2", "--depth", "0.003");
    ck_assert_msg(o.status == 0, "poke: %s", o.err);
    ck_assert(session_line(port, sid_s, line, sizeof line));
    samples = jnum(line, "samples");
  }
  ck_assert_msg(samples >= 64, "samples after the pokes: %s", line);

  /* training: progress lines, the last one done with the stored model */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "train", "--session", sid_s);
  ck_assert_msg(o.status == 0, "train: %s", o.err);
  int n = lines(&o, v, 512);
  ck_assert_int_ge(n, 2); /* at least one report before the end */
  const char *last = v[n - 1];
  fprintf(stderr, "ctl: train %d reports, last %s\n", n, last);
  for (int i = 0; i + 1 < n; i++) ck_assert_ptr_null(strstr(v[i], "\"done\""));
  ck_assert_msg(strstr(last, "\"done\":true") && !strstr(last, "\"error\"") &&
                    strstr(last, "\"model\":\"method\"") && jnum(last, "model_id") >= 1 &&
                    jnum(last, "samples") > 0 && jnum(last, "samples") <= samples &&
                    jnum(last, "heldout_rmse") > 0 && jnum(last, "fraction") == 1,
                "%s", last);
  wait_learned(port, sid_s, 1);

  /* switch to the solve and back */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "shortcut", "--session", sid_s, "--use",
          "solve");
  ck_assert_msg(o.status == 0, "shortcut --use solve: %s", o.err);
  ck_assert_ptr_nonnull(strstr(o.out, "\"learned\":false"));
  wait_learned(port, sid_s, 0);
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "shortcut", "--session", sid_s, "--use",
          "learned");
  ck_assert_msg(o.status == 0, "shortcut --use learned: %s", o.err);
  wait_learned(port, sid_s, 1);

  /* refusals: an unknown model, a session that does not learn (an unknown
   * kind is a usage error: test_help_and_usage) */
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "shortcut", "--session", sid_s, "--use",
          "learned", "--model-id", "4242");
  expect_refusal(&o, 1, "TS_ENOMODEL");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "create");
  ck_assert_msg(o.status == 0, "create: %s", o.err);
  ck_assert_int_eq(lines(&o, v, 512), 1);
  char ms_s[16];
  snprintf(ms_s, sizeof ms_s, "%.0f", jnum(v[0], "session_id"));
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "train", "--session", ms_s);
  expect_refusal(&o, 1, "TS_EUNSUPPORTED");
  run_ctl(&o, "--port", port, "--key", TS_DPROC_KEY, "shortcut", "--session", ms_s, "--use",
          "solve");
  expect_refusal(&o, 1, "TS_EUNSUPPORTED");

  char why[256];
  ck_assert_msg(ts_dproc_stop(&d, 5000, why, sizeof why) == 0, "%s", why);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ctl");
  TCase *tc = tcase_create("ctl");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_help_and_usage);
  tcase_add_test(tc, test_session_life);
  tcase_add_test(tc, test_end_frees_a_place);
  tcase_add_test(tc, test_materials);
  tcase_add_test(tc, test_meshes_and_models);
  tcase_add_test(tc, test_shortcut);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
