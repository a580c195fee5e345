/*
 * tl_opts.c: tissueload's command line: the usage text, the options with
 * their defaults and bounds, and the ports file of a daemon started with
 * --ports-file.
 */
#include "tl_run.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: tissueload [options]\n"
          "\n"
          "Loads a running tissued on this machine (loopback addresses only) with N\n"
          "sessions of the built-in patch, each watched by M observers and driven by\n"
          "K controllers whose tools follow the standard path, for a bounded time, and\n"
          "prints one JSON object: pose-to-frame and pose-to-force latency (p50, p99,\n"
          "max, ms), frame lag across clients, frames per second received, bytes per\n"
          "frame, keyframes after the first (resynchronised clients), frames flagged\n"
          "as physics behind real time, and clients the server dropped. At the end\n"
          "each session's first live controller ends it; a session none could end,\n"
          "or one made before a failure, is ended by the connection that created it.\n"
          "\n"
          "Counts (N, M, K), ports, PIDs and frame rates are whole numbers; the value\n"
          "in parentheses is the default.\n"
          "\n"
          "  --host ADDR              daemon address, loopback only (127.0.0.1)\n"
          "  --tcp-port N             daemon TCP port (for TCP clients)\n"
          "  --http-port N            daemon HTTP port (for WebSocket clients at /ws)\n"
          "  --ports-file FILE        read both ports from tissued's --ports-file\n"
          "  --key K                  the server key (default $TISSUED_SERVER_KEY): every\n"
          "                           client of the run says it in Hello\n"
          "  --sessions N             sessions to create, 1 to %d (1)\n"
          "  --observers M            observers per session, 0 to %d in all (0)\n"
          "  --controllers K          controllers per session, 1 to %d (1)\n"
          "  --transport tcp|ws       transport of every client (tcp)\n"
          "  --observer-transport T   transport of the observers only\n"
          "  --controller-transport T transport of the controllers only\n"
          "  --duration S             measured seconds after the warm-up (10, at most 3600)\n"
          "  --warmup S               seconds before statistics start (1)\n"
          "  --pose-rate HZ           poses per second per controller (1000, at most 10000)\n"
          "  --frame-rate HZ          frame rate observers ask for, at most 1000\n"
          "                           (0 = server default)\n"
          "  --controller-frame-rate HZ  frame rate controllers ask for (0 = default)\n"
          "  --layers L[,L...]        tissue layers of each session (1 to 8), cycled (3)\n"
          "  --substeps N             CreateSession.substeps of every session (0 = the\n"
          "                           daemon's choice; at most 1000)\n"
          "  --decode none|first|all  WebSocket clients that decode payloads: none, the\n"
          "                           first observer of each session (default), all\n"
          "                           (TCP clients always decode: libtissueclient); the\n"
          "                           others read only each frame's header fields\n"
          "  --daemon-pid PID         also report the CPU time of that process (the daemon\n"
          "                           on this machine), per thread, over the measured time\n"
          "  --record FILE            record session 1's frames as received (TCP framing);\n"
          "                           FILE is opened before anything connects, and its old\n"
          "                           content is replaced only once the recorder is joined\n"
          "  --record-start S         join the recorder once session 1 has simulated S s\n"
          "                           (its first controller's clock; 0 = at once)\n"
          "  --record-switch S        after S s of simulated time the recorder joins\n"
          "                           session 2 (needs --sessions 2 or more)\n"
          "  --record-frames N        end the run once N frames are recorded, 1 to 1000000\n"
          "                           (the --record-* options need --record)\n"
          "  --quiet                  no progress on stderr\n"
          "  -h, --help               this text\n"
          "\n"
          "Exit status: 0 the run ended and its JSON object was printed; 1 the run\n"
          "failed (a connection or a client could not be set up, or fewer frames than\n"
          "--record-frames were recorded: the object is still printed); 2 a bad command\n"
          "line, a --daemon-pid it cannot read or a --record FILE it cannot write,\n"
          "before anything connects; 3 the daemon refused CreateSession (a wrong --key,\n"
          "a --substeps it does not take, its session limit, ...): one JSON object\n"
          "{\"refused\":{\"request\":\"CreateSession\",\"code\":..,\"message\":..}} says why.\n"
          "Sessions made before a failure are ended before tissueload exits.\n",
          TL_MAX_SESSIONS, TL_MAX_OBSERVERS, TL_MAX_CONTROLLERS);
}

static int parse_transport(const char *s, int *out) {
  if (strcmp(s, "tcp") == 0) *out = TL_TCP;
  else if (strcmp(s, "ws") == 0) *out = TL_WS;
  else return -1;
  return 0;
}

static int parse_num(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* A count, port, pid or frame rate: a whole number in [lo, hi] (1.7 is
 * refused, not cut to 1). *out is left alone on failure. */
static int parse_int(const char *s, int lo, int hi, int *out) {
  double v;
  if (parse_num(s, lo, hi, &v) || v != floor(v)) return -1;
  *out = (int)v;
  return 0;
}

static int read_ports_file(const char *path, int *tcp, int *http) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  if (!j) return -1;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "tcp");
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "http");
  /* the daemon writes its two listening ports: whole, 1..65535 (cJSON's
   * valueint would take -5 as is and clamp 1e12 to INT_MAX) */
  int ok = cJSON_IsNumber(t) && cJSON_IsNumber(h) && t->valuedouble >= 1 &&
           t->valuedouble <= 65535 && t->valuedouble == floor(t->valuedouble) &&
           h->valuedouble >= 1 && h->valuedouble <= 65535 && h->valuedouble == floor(h->valuedouble);
  if (ok) {
    *tcp = t->valueint;
    *http = h->valueint;
  }
  cJSON_Delete(j);
  return ok ? 0 : -1;
}

int tl_parse_opts(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->host = "127.0.0.1";
  o->key = getenv("TISSUED_SERVER_KEY");
  o->sessions = 1;
  o->controllers = 1;
  o->obs_transport = o->ctl_transport = TL_TCP;
  o->duration = 10;
  o->warmup = 1;
  o->pose_rate = 1000;
  o->layers[0] = 3;
  o->n_layers = 1;
  o->decode = 1;
  const char *rec_opt = NULL; /* the last --record-* option given */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(a, "--quiet") == 0) {
      o->quiet = 1;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "tissueload: %s needs a value (see --help)\n", a);
      return -1;
    }
    const char *v = argv[++i];
    int bad = 0;
    int lo = 0, hi = 0; /* the range of a whole-number option, for the message */
    int n;
#define TL_INT(LO, HI, DST) (lo = (LO), hi = (HI), bad = parse_int(v, lo, hi, &(DST)))
    if (strcmp(a, "--host") == 0) o->host = v;
    else if (strcmp(a, "--tcp-port") == 0) TL_INT(1, 65535, o->tcp_port);
    else if (strcmp(a, "--http-port") == 0) TL_INT(1, 65535, o->http_port);
    else if (strcmp(a, "--ports-file") == 0) o->ports_file = v;
    else if (strcmp(a, "--key") == 0) o->key = v;
    else if (strcmp(a, "--sessions") == 0) TL_INT(1, TL_MAX_SESSIONS, o->sessions);
    else if (strcmp(a, "--observers") == 0) TL_INT(0, TL_MAX_OBSERVERS, o->observers);
    else if (strcmp(a, "--controllers") == 0) TL_INT(1, TL_MAX_CONTROLLERS, o->controllers);
    else if (strcmp(a, "--transport") == 0) { bad = parse_transport(v, &o->obs_transport); o->ctl_transport = o->obs_transport; }
    else if (strcmp(a, "--observer-transport") == 0) bad = parse_transport(v, &o->obs_transport);
    else if (strcmp(a, "--controller-transport") == 0) bad = parse_transport(v, &o->ctl_transport);
    else if (strcmp(a, "--duration") == 0) bad = parse_num(v, 0.1, 3600, &o->duration);
    else if (strcmp(a, "--warmup") == 0) bad = parse_num(v, 0, 600, &o->warmup);
    else if (strcmp(a, "--pose-rate") == 0) bad = parse_num(v, 1, 10000, &o->pose_rate);
    else if (strcmp(a, "--frame-rate") == 0) TL_INT(0, 1000, o->frame_rate);
    else if (strcmp(a, "--controller-frame-rate") == 0) TL_INT(0, 1000, o->ctl_frame_rate);
    else if (strcmp(a, "--daemon-pid") == 0) TL_INT(1, 4194304, o->daemon_pid);
    else if (strcmp(a, "--substeps") == 0) {
      if (!TL_INT(0, 1000, n)) o->substeps = (uint32_t)n;
    } else if (strcmp(a, "--layers") == 0) {
      /* every element a count: no empty one (strtok took ",,3,," as "3") */
      o->n_layers = 0;
      char buf[256];
      bad = snprintf(buf, sizeof buf, "%s", v) >= (int)sizeof buf;
      for (char *t = buf; !bad && t;) {
        char *c = strchr(t, ',');
        if (c) *c = 0;
        if (o->n_layers == TL_MAX_SESSIONS || parse_int(t, 1, 8, &o->layers[o->n_layers])) bad = 1;
        else o->n_layers++;
        t = c ? c + 1 : NULL;
      }
      if (!o->n_layers) bad = 1;
    } else if (strcmp(a, "--decode") == 0) {
      if (strcmp(v, "none") == 0) o->decode = 0;
      else if (strcmp(v, "first") == 0) o->decode = 1;
      else if (strcmp(v, "all") == 0) o->decode = 2;
      else bad = 1;
    } else if (strcmp(a, "--record") == 0) o->record = v;
    else if (strcmp(a, "--record-switch") == 0) { bad = parse_num(v, 0, 3600, &o->record_switch); rec_opt = a; }
    else if (strcmp(a, "--record-start") == 0) { bad = parse_num(v, 0, 3600, &o->record_start); rec_opt = a; }
    else if (strcmp(a, "--record-frames") == 0) { TL_INT(1, 1000000, o->record_frames); rec_opt = a; }
    else {
      fprintf(stderr, "tissueload: unknown option %s (see --help)\n", a);
      return -1;
    }
#undef TL_INT
    if (bad && lo < hi) {
      fprintf(stderr, "tissueload: bad value '%s' for %s: a whole number from %d to %d (see --help)\n",
              v, a, lo, hi);
      return -1;
    }
    if (bad) {
      fprintf(stderr, "tissueload: bad value '%s' for %s (see --help)\n", v, a);
      return -1;
    }
  }
  if (rec_opt && !o->record) { /* it would be ignored without a word */
    fprintf(stderr, "tissueload: %s needs --record FILE (see --help)\n", rec_opt);
    return -1;
  }
  if (o->ports_file && read_ports_file(o->ports_file, &o->tcp_port, &o->http_port)) {
    fprintf(stderr, "tissueload: cannot read ports from %s\n", o->ports_file);
    return -1;
  }
  /* every session has a controller (at least 1); observers may be 0 */
  int need_tcp = (o->observers && o->obs_transport == TL_TCP) || o->ctl_transport == TL_TCP ||
                 o->record;
  int need_ws = (o->observers && o->obs_transport == TL_WS) || o->ctl_transport == TL_WS;
  if (need_tcp && !o->tcp_port) {
    fprintf(stderr, "tissueload: TCP clients need --tcp-port or --ports-file\n");
    return -1;
  }
  if (need_ws && !o->http_port) {
    fprintf(stderr, "tissueload: WebSocket clients need --http-port or --ports-file\n");
    return -1;
  }
  if (!o->tcp_port && !o->http_port) {
    fprintf(stderr, "tissueload: give --tcp-port, --http-port or --ports-file\n");
    return -1;
  }
  if (o->daemon_pid) { /* a wrong pid would otherwise only leave the figures out */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", o->daemon_pid);
    DIR *d = opendir(path);
    if (!d) {
      fprintf(stderr, "tissueload: --daemon-pid %d: cannot read %s: %s\n", o->daemon_pid, path,
              strerror(errno));
      return -1;
    }
    closedir(d);
  }
  if ((long)o->observers * o->sessions > TL_MAX_OBSERVERS) {
    fprintf(stderr, "tissueload: at most %d observers in all\n", TL_MAX_OBSERVERS);
    return -1;
  }
  if (o->record_switch > 0 && o->sessions < 2) {
    fprintf(stderr, "tissueload: --record-switch needs --sessions 2 or more\n");
    return -1;
  }
  return 0;
}
