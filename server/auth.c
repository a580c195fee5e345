/*
 * auth.c: server keys, session tokens and the WebSocket Origin rule (see
 * auth.h). Randomness comes from the kernel (getrandom); comparisons use
 * OpenSSL's CRYPTO_memcmp over fixed-size buffers so that their time does not
 * depend on the contents.
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ts_error.h"

int ts_auth_random_token(char out[TS_TOKEN_HEX + 1]) {
  unsigned char b[TS_TOKEN_HEX / 2];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return TS_EIO;
    }
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof b; i++) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 15];
  }
  out[TS_TOKEN_HEX] = 0;
  return 0;
}

int ts_auth_renew_token(char token[TS_TOKEN_HEX + 1]) {
  char fresh[TS_TOKEN_HEX + 1];
  int rc = ts_auth_random_token(fresh);
  if (rc) return rc;
  memcpy(token, fresh, sizeof fresh);
  return 0;
}

int ts_auth_equal(const char *a, const char *b) {
  if (!a || !b) return 0;
  size_t la = strnlen(a, TS_KEY_MAX + 1), lb = strnlen(b, TS_KEY_MAX + 1);
  if (la > TS_KEY_MAX || lb > TS_KEY_MAX) return 0;
  char pa[TS_KEY_MAX] = {0}, pb[TS_KEY_MAX] = {0};
  memcpy(pa, a, la);
  memcpy(pb, b, lb);
  int diff = CRYPTO_memcmp(pa, pb, sizeof pa);
  return diff == 0 && la == lb;
}

int ts_auth_key_index(const ts_keyring *k, const char *cred) {
  if (!cred || !cred[0]) return -1;
  int found = -1;
  for (int i = 0; i < k->n; i++)
    if (ts_auth_equal(k->key[i], cred) && found < 0) found = i;
  return found;
}

/* The next entry of a comma-separated list from *p (blanks around it
 * trimmed, empty entries skipped): its start, with its length in *n, and
 * *p moved past it; NULL at the end. */
static const char *list_next(const char **p, size_t *n) {
  const char *q = *p;
  while (*q == ' ' || *q == ',') q++;
  if (!*q) {
    *p = q;
    return NULL;
  }
  const char *e = q;
  while (*e && *e != ',') e++;
  const char *end = e;
  while (end > q && end[-1] == ' ') end--;
  *n = (size_t)(end - q);
  *p = e;
  return q;
}

static int key_char_ok(char ch) { return ch > ' ' && ch < 127 && ch != ','; }

int ts_auth_parse_keys(const char *list, ts_keyring *out, char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  const char *rest = list, *p;
  size_t n;
  while ((p = list_next(&rest, &n)) != NULL) {
    for (size_t i = 0; i < n; i++) {
      if (!key_char_ok(p[i])) {
        snprintf(err, errcap, "server key %d has a character that is not printable ASCII",
                 out->n + 1);
        return -1;
      }
    }
    if (n < TS_KEY_MIN || n > TS_KEY_MAX) {
      snprintf(err, errcap, "server key %d is %zu characters; keys have %d to %d", out->n + 1, n,
               TS_KEY_MIN, TS_KEY_MAX);
      return -1;
    }
    if (out->n == TS_MAX_KEYS) {
      snprintf(err, errcap, "more than %d server keys", TS_MAX_KEYS);
      return -1;
    }
    memcpy(out->key[out->n], p, n);
    out->key[out->n][n] = 0;
    out->n++;
  }
  if (out->n == 0) {
    snprintf(err, errcap, "no server key given");
    return -1;
  }
  return 0;
}

/* Reads the first line of an existing key file into buf. 1 read, 0 missing,
 * -1 error (err set). */
static int read_key_file(const char *path, char *buf, size_t cap, char *err, size_t errcap) {
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  if (!fgets(buf, (int)cap, f)) buf[0] = 0;
  fclose(f);
  buf[strcspn(buf, "\r\n")] = 0;
  return 1;
}

int ts_auth_load_keys(const char *configured, const char *env, const char *data_dir,
                      ts_keyring *out, int *generated, char *source, size_t srccap, char *err,
                      size_t errcap) {
  *generated = 0;
  if (configured && configured[0]) {
    snprintf(source, srccap, "the server-key setting");
    return ts_auth_parse_keys(configured, out, err, errcap);
  }
  if (env && env[0]) {
    snprintf(source, srccap, "$TISSUED_SERVER_KEY");
    return ts_auth_parse_keys(env, out, err, errcap);
  }
  char path[1100];
  snprintf(path, sizeof path, "%s/server.key", data_dir);
  snprintf(source, srccap, "%s", path);
  char line[TS_MAX_KEYS * (TS_KEY_MAX + 1) + 8];
  int r = read_key_file(path, line, sizeof line, err, errcap);
  if (r < 0) return -1;
  if (r == 1) {
    char why[200];
    if (ts_auth_parse_keys(line, out, why, sizeof why)) {
      snprintf(err, errcap, "%s: %s", path, why);
      return -1;
    }
    return 0;
  }
  char tok[TS_TOKEN_HEX + 1];
  if (ts_auth_random_token(tok)) {
    snprintf(err, errcap, "no randomness from the kernel for a server key");
    return -1;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    snprintf(err, errcap, "cannot create %s: %s", path, strerror(errno));
    return -1;
  }
  char buf[TS_TOKEN_HEX + 2];
  memcpy(buf, tok, TS_TOKEN_HEX);
  buf[TS_TOKEN_HEX] = '\n';
  ssize_t w = write(fd, buf, TS_TOKEN_HEX + 1);
  int sync_rc = fsync(fd);
  close(fd);
  if (w != TS_TOKEN_HEX + 1 || sync_rc != 0) {
    unlink(path);
    snprintf(err, errcap, "cannot write %s", path);
    return -1;
  }
  memset(out, 0, sizeof *out);
  memcpy(out->key[0], tok, sizeof tok);
  out->n = 1;
  *generated = 1;
  return 0;
}

/* "scheme://host[:port]" without the scheme, or the whole string. */
static const char *after_scheme(const char *s, size_t *n) {
  const char *p = strstr(s, "://");
  const char *h = p ? p + 3 : s;
  *n = strlen(h);
  while (*n > 0 && h[*n - 1] == '/') (*n)--;
  return h;
}

int ts_auth_origin_allowed(const char *origin, const char *host, const char *allowed) {
  if (!origin || !origin[0]) return 1;
  size_t on;
  const char *oh = after_scheme(origin, &on);
  if (host && host[0] && strlen(host) == on && strncasecmp(oh, host, on) == 0) return 1;
  if (!allowed) return 0;
  const char *rest = allowed, *p;
  size_t n, olen = strlen(origin);
  while ((p = list_next(&rest, &n)) != NULL) {
    if (n == 1 && *p == '*') return 1;
    if (n == olen && strncasecmp(p, origin, n) == 0) return 1;
  }
  return 0;
}

static int is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

int ts_auth_origins_check(const char *allowed, char *err, size_t errcap) {
  const char *rest = allowed, *p;
  size_t len;
  while ((p = list_next(&rest, &len)) != NULL) {
    const char *end = p + len;
    const int n = (int)len;
    if (!(n == 1 && *p == '*')) {
      /* scheme: a letter, then letters, digits, + - . (RFC 3986) */
      const char *q = p;
      int ok = q < end && is_letter(*q);
      while (ok && q < end && (is_letter(*q) || (*q >= '0' && *q <= '9') || *q == '+' || *q == '-' ||
                               *q == '.'))
        q++;
      ok = ok && end - q > 3 && q[0] == ':' && q[1] == '/' && q[2] == '/';
      const char *h = ok ? q + 3 : end, *bad = NULL;
      for (const char *r = h; ok && r < end; r++)
        if (*r == '/' || *r == '?' || *r == '#' || *r == ' ' || *r == '\t') {
          bad = r;
          break;
        }
      if (ok && bad && bad > h && *bad == '/' && bad == end - 1) {
        snprintf(err, errcap,
                 "allowed-origins: '%.*s' has a path; an origin ends at the host or port "
                 "(drop the final '/')",
                 n, p);
        return -1;
      }
      if (!ok || bad) {
        snprintf(err, errcap,
                 "allowed-origins: '%.*s' is not an origin: give scheme://host[:port] as a browser "
                 "sends it (e.g. https://sim.example.org), or *",
                 n, p);
        return -1;
      }
    }
  }
  return 0;
}
