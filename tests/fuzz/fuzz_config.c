/*
 * fuzz_config.c: fuzz target for everything the daemon reads at start-up
 * from its operator: the INI file (inih and server/config.c's handler), the
 * command-line flags, each setting's value parsing (whole numbers, numbers,
 * sizes, "auto", log levels, strings), the server keys (server/auth.c: the
 * server-key setting or $TISSUED_SERVER_KEY, and the first line of
 * <data-dir>/server.key), the allowed-origins list as the WebSocket upgrade
 * reads it, and the tool-mesh list (server/tool_meshes.c: NAME=FILE[@SCALE]).
 *
 * server/config.c is compiled into this target (its setting table is
 * static), so every accepted value can be checked against the table; the
 * rest comes from ts_server (tests/fuzz/CMakeLists.txt).
 *
 * Input: byte 0 chooses what the rest is:
 *   0  INI text (ts_config_load_text, the file reader's parser and handler);
 *   1  a command line: arguments separated by NUL bytes (--help, -h and
 *      --version are left out: they print and stop; --config FILE names a
 *      file that does not exist);
 *   2  KEY NUL VALUE NUL ... pairs given to ts_config_set one by one;
 *   3  the key file's contents (ts_auth_load_keys reading
 *      <dir>/server.key), then the same text as a server-key setting, and
 *      its second half as an Origin against it as an allowed-origins list.
 * After 0 and 1 succeed, the resulting server-key, allowed-origins and
 * tool-mesh settings go through their parsers too. Tool mesh files are
 * looked up in a private directory holding cube.obj (a '/' in the setting
 * becomes '_', so no other file is reachable).
 *
 * Checks: a refusal always has a message and leaves the setting it refused
 * as it was; an accepted value lies in its setting's range, and a number is
 * the number its text says (strtod of the same text: a size written
 * " -18446744073709550592" must not become 1024); a string is stored
 * whole; a loaded configuration passes the cross-checks; parsed keys are
 * 16..128 printable characters without ','; a loaded tool mesh has a valid
 * name and a tree.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/config.c"
#include "auth.h"
#include "tool_meshes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256];
static int ready;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void cleanup(void) { nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS); }

static void setup(void) {
  snprintf(dir, sizeof dir, "%s/tissued-fuzz-config-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) abort();
  char path[300];
  snprintf(path, sizeof path, "%s/cube.obj", dir);
  FILE *f = fopen(path, "w");
  if (!f) abort();
  fputs("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\nv 1 1 1\nv 0 1 1\n"
        "f 1 3 2\nf 1 4 3\nf 5 6 7\nf 5 7 8\nf 1 2 6\nf 1 6 5\nf 2 3 7\nf 2 7 6\n"
        "f 3 4 8\nf 3 8 7\nf 4 1 5\nf 4 5 8\n",
        f);
  fclose(f);
  ts_log_set_level(-1); /* refusals are the point here: no log lines */
  ready = 1;
  atexit(cleanup);
}

/* ---- checks ----------------------------------------------------------------- */

static void check_in_range(const ts_config *c) {
  for (size_t i = 0; i < N_SETTINGS; i++) {
    const setting *s = &settings[i];
    const char *base = (const char *)c + s->off;
    switch (s->type) {
    case T_STR:
      if (strnlen(base, s->size) >= s->size) abort();
      break;
    case T_INT: {
      int v = *(const int *)base;
      if (v < s->lo || v > s->hi) abort();
      break;
    }
    case T_DBL_AUTO:
      if (*(const double *)base == -1) break;
      /* fall through */
    case T_DBL: {
      double v = *(const double *)base;
      if (!isfinite(v) || v < s->lo || v > s->hi) abort();
      break;
    }
    case T_SIZE: {
      size_t v = *(const size_t *)base;
      if ((double)v < s->lo || (double)v > s->hi) abort();
      break;
    }
    case T_LOG: {
      int v = *(const int *)base;
      if (v < TS_LOG_ERROR || v > TS_LOG_DEBUG) abort();
      break;
    }
    }
  }
}

/* One ts_config_set, checked against the setting table. */
static void set_one(ts_config *c, const char *key, const char *value) {
  ts_config before = *c;
  char err[256] = "";
  int rc = ts_config_set(c, key, value, err, sizeof err);
  if (rc) {
    if (rc != -1 || !err[0]) abort();
    if (memcmp(&before, c, sizeof before) != 0) abort(); /* a refusal changes nothing */
    return;
  }
  const setting *s = find_setting(key);
  if (!s) abort(); /* accepted an unknown key */
  const char *base = (const char *)c + s->off;
  double said = strtod(value, NULL);
  switch (s->type) {
  case T_STR:
    if (strcmp(base, value) != 0) abort();
    break;
  case T_INT:
    if (*(const int *)base != said) abort();
    break;
  case T_DBL_AUTO:
    if (strcmp(value, "auto") == 0) {
      if (*(const double *)base != -1) abort();
      break;
    }
    /* fall through */
  case T_DBL:
    if (*(const double *)base != said) abort();
    break;
  case T_SIZE:
    if ((double)*(const size_t *)base != said) abort();
    break;
  default: break;
  }
  check_in_range(c);
}

static void check_keys(const ts_keyring *k) {
  if (k->n < 1 || k->n > TS_MAX_KEYS) abort();
  for (int i = 0; i < k->n; i++) {
    size_t n = strnlen(k->key[i], TS_KEY_MAX + 1);
    if (n < TS_KEY_MIN || n > TS_KEY_MAX) abort();
    for (size_t j = 0; j < n; j++)
      if (k->key[i][j] <= ' ' || k->key[i][j] >= 127 || k->key[i][j] == ',') abort();
    if (ts_auth_key_index(k, k->key[i]) < 0) abort();
  }
}

static void parse_keys(const char *list) {
  ts_keyring k;
  char err[256] = "";
  if (ts_auth_parse_keys(list, &k, err, sizeof err) == 0)
    check_keys(&k);
  else if (!err[0])
    abort();
}

static void load_tool_meshes(const char *list) {
  char *s = strdup(list);
  if (!s) abort();
  for (char *p = s; *p; p++)
    if (*p == '/') *p = '_';
  int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (here < 0 || chdir(dir)) abort();
  ts_tool_meshes tm;
  char err[512] = "";
  int rc = ts_tool_meshes_load(&tm, s, 1000, err, sizeof err);
  if (fchdir(here)) abort();
  close(here);
  if (rc) {
    if (rc > 0 || !err[0] || tm.n) abort();
  } else {
    for (uint32_t i = 0; i < tm.n; i++) {
      if (!tm.name[i][0] || !tm.tree[i] || tm.n_tris[i] != 12) abort();
      if (ts_tool_meshes_find(&tm, tm.name[i]) != tm.tree[i]) abort();
    }
    ts_tool_meshes_free(&tm);
  }
  free(s);
}

/* What the daemon does next with a configuration it accepted. */
static void use_config(const ts_config *c) {
  check_in_range(c);
  if (c->client_timeout <= c->ws_ping_interval) abort();
  if (c->soft_output_limit > c->hard_output_limit) abort();
  if (c->server_key[0]) parse_keys(c->server_key);
  ts_auth_origin_allowed("http://127.0.0.1:8080", c->host, c->allowed_origins);
  if (c->tool_mesh[0]) load_tool_meshes(c->tool_mesh);
}

/* ---- the modes --------------------------------------------------------------- */

static void fuzz_ini(const char *text) {
  ts_config c;
  ts_config_defaults(&c);
  char err[512] = "";
  int rc = ts_config_load_text(&c, text, "fuzz.conf", err, sizeof err);
  if (rc) {
    if (rc != -1 || strncmp(err, "fuzz.conf", 9) != 0) abort();
    return;
  }
  check_in_range(&c);
  /* the file's values go through the same cross-checks as flags */
  char *argv[] = {"tissued", NULL};
  if (ts_config_parse_args(&c, 1, argv, err, sizeof err) == 0) use_config(&c);
}

static void fuzz_args(const char *buf, size_t len) {
  char *argv[65];
  int argc = 0;
  argv[argc++] = "tissued";
  for (size_t off = 0; off < len && argc < 64;) {
    const char *a = buf + off;
    size_t n = strlen(a);
    off += n + 1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--version")) continue;
    argv[argc++] = (char *)a;
  }
  argv[argc] = NULL;
  /* --config FILE: no such file here (the INI text is mode 0's) */
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--config") || !strncmp(argv[i], "--config=", 9))
      argv[i] = "--config=/nonexistent/tissued-fuzz.conf";
  ts_config c;
  ts_config_defaults(&c);
  char err[512] = "";
  int rc = ts_config_parse_args(&c, argc, argv, err, sizeof err);
  if (rc == 1) abort(); /* printed help or version: those were left out */
  if (rc) {
    if (rc != -1 || !err[0]) abort();
    return;
  }
  use_config(&c);
}

static void fuzz_pairs(const char *buf, size_t len) {
  ts_config c;
  ts_config_defaults(&c);
  for (size_t off = 0; off < len;) {
    const char *key = buf + off;
    off += strlen(key) + 1;
    if (off >= len) break;
    const char *value = buf + off;
    off += strlen(value) + 1;
    set_one(&c, key, value);
  }
}

static void fuzz_keys(const char *buf, size_t len) {
  char path[300];
  snprintf(path, sizeof path, "%s/server.key", dir);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (len && fwrite(buf, 1, len, f) != len) abort();
  fclose(f);
  ts_keyring k;
  int generated = 1;
  char source[400], err[512] = "";
  int rc = ts_auth_load_keys(NULL, NULL, dir, &k, &generated, source, sizeof source, err,
                             sizeof err);
  if (generated) abort(); /* the file exists: nothing is generated */
  if (rc == 0)
    check_keys(&k);
  else if (rc != -1 || !err[0])
    abort();
  remove(path);
  parse_keys(buf);
  size_t half = len / 2;
  ts_auth_origin_allowed(buf + half, "127.0.0.1:8080", buf);
  ts_auth_origin_allowed(buf + half, buf + half, "*");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ready) setup();
  if (size < 1 || size > (1u << 16)) return 0;
  int mode = data[0] & 3;
  /* a NUL-terminated copy; the modes that want a list split it at NULs */
  size_t len = size - 1;
  char *buf = malloc(len + 1);
  if (!buf) abort();
  memcpy(buf, data + 1, len);
  buf[len] = 0;
  switch (mode) {
  case 0: fuzz_ini(buf); break;
  case 1: fuzz_args(buf, len); break;
  case 2: fuzz_pairs(buf, len); break;
  default: fuzz_keys(buf, len); break; /* the file whole; the strings stop at a NUL */
  }
  free(buf);
  return 0;
}
