/*
 * http_cond.c: Accept-Encoding and If-None-Match as the static file server
 * reads them, and the entity tags it names file versions by (see
 * http_cond.h). The grammar is RFC 9110's: a list of elements separated by
 * commas with optional white space around them, empty elements allowed;
 * anything that does not parse is taken as the safe answer (no gzip, no
 * match: the whole file is sent).
 */
#include "http_cond.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void ts_http_etag(const ts_file_tag *t, int gzip, char *out) {
  snprintf(out, TS_HTTP_ETAG_MAX, "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64 "%s\"", t->dev,
           t->ino, t->size, t->mtime_ns, gzip ? "-gz" : "");
}

static const char *skip_ows(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* One token (up to a separator or white space); its length. */
static const char *token_end(const char *p) {
  while (*p && *p != ',' && *p != ';' && *p != '=' && *p != ' ' && *p != '\t') p++;
  return p;
}

/* A qvalue (RFC 9110 12.4.2: "0" ["." 0*3DIGIT] or "1" ["." 0*3"0"]): 0
 * when it is zero, 1 when it is not, -1 when malformed. */
static int qvalue(const char *v, size_t n) {
  if (n == 0 || (v[0] != '0' && v[0] != '1')) return -1;
  if (n == 1) return v[0] == '1';
  if (v[1] != '.' || n > 5) return -1;
  int nonzero = v[0] == '1';
  for (size_t i = 2; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    if (v[i] != '0') {
      if (v[0] == '1') return -1; /* over 1 */
      nonzero = 1;
    }
  }
  return nonzero;
}

int ts_http_accepts_gzip(const char *value) {
  if (!value) return 0;
  int gzip = -1, star = -1; /* -1 not listed; else whether accepted */
  const char *p = value;
  while (*p) {
    p = skip_ows(p);
    const char *tok = p;
    p = token_end(p);
    size_t tlen = (size_t)(p - tok);
    int accepted = 1, bad = 0;
    p = skip_ows(p);
    while (*p == ';' && !bad) { /* parameters: only q counts */
      p = skip_ows(p + 1);
      const char *name = p;
      p = token_end(p);
      size_t nlen = (size_t)(p - name);
      p = skip_ows(p);
      if (*p != '=') {
        bad = 1;
        break;
      }
      p = skip_ows(p + 1);
      const char *val = p;
      p = token_end(p);
      size_t vlen = (size_t)(p - val);
      p = skip_ows(p);
      if (nlen == 1 && (name[0] == 'q' || name[0] == 'Q')) {
        int q = qvalue(val, vlen);
        if (q < 0)
          bad = 1;
        else
          accepted = q;
      }
    }
    if (*p && *p != ',') bad = 1;
    while (*p && *p != ',') p++; /* the rest of a malformed element */
    if (*p == ',') p++;
    if (tlen == 0 && !bad) continue; /* an empty element */
    int ok = accepted && !bad;
    if ((tlen == 4 && strncasecmp(tok, "gzip", 4) == 0) ||
        (tlen == 6 && strncasecmp(tok, "x-gzip", 6) == 0))
      gzip = gzip == 1 ? 1 : ok; /* any gzip element that accepts it */
    else if (tlen == 1 && tok[0] == '*')
      star = star == 1 ? 1 : ok;
  }
  return gzip >= 0 ? gzip : star == 1;
}

int ts_http_etag_listed(const char *value, const char *tag) {
  if (!value || !tag) return 0;
  size_t tag_len = strlen(tag);
  const char *p = value;
  while (*p) {
    p = skip_ows(p);
    if (*p == ',') {
      p++;
      continue;
    }
    int matched = 0, bad = 0;
    if (*p == '*') {
      matched = 1;
      p++;
    } else {
      if (p[0] == 'W' && p[1] == '/') p += 2;
      if (*p != '"') {
        bad = 1;
      } else {
        const char *q = strchr(p + 1, '"');
        if (!q) return 0; /* unterminated: nothing after it can be read */
        size_t n = (size_t)(q - p) + 1;
        matched = n == tag_len && memcmp(p, tag, n) == 0;
        p = q + 1;
      }
    }
    p = skip_ows(p);
    if (*p && *p != ',') bad = 1;
    if (matched && !bad) return 1;
    while (*p && *p != ',') p++;
  }
  return 0;
}
