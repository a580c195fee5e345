/*
 * ts_csv.c: the record reader and the strain,stress sample reader declared
 * in ts_csv.h (format, limits and error codes are described there).
 *
 * Design: one pass over the caller's buffer, no copy of the input; a record
 * is located (line end, comment, fields) before anything is converted, so a
 * message can always name the line. Numbers are checked against the decimal
 * syntax before strtod sees them, so strtod's extensions (hex floats, "nan",
 * "infinity", leading junk) never slip through.
 */
#include "ts_csv.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

/* Longest number text accepted (digits of a double need far fewer). */
#define TS__CSV_NUM_MAX 128
/* How much of a bad field an error message quotes. */
#define TS__CSV_QUOTE 40

static int csv_fail(char *err, size_t cap, int code, const char *fmt, ...) {
  if (err && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return code;
}

ts_csv_limits ts_csv_default_limits(void) {
  ts_csv_limits l = {TS_CSV_DEFAULT_MAX_BYTES, TS_CSV_DEFAULT_MAX_LINE, TS_CSV_DEFAULT_MAX_ROWS};
  return l;
}

static ts_csv_limits resolve_limits(const ts_csv_limits *lim) {
  ts_csv_limits l = ts_csv_default_limits();
  if (lim) {
    if (lim->max_bytes) l.max_bytes = lim->max_bytes;
    if (lim->max_line) l.max_line = lim->max_line;
    if (lim->max_rows) l.max_rows = lim->max_rows;
  }
  return l;
}

/* ---- records -------------------------------------------------------------- */

void ts_csv_reader_init(ts_csv_reader *r, const char *buf, size_t len, size_t max_line) {
  if (!buf) {
    buf = "";
    len = 0;
  }
  r->p = buf;
  r->end = buf + len;
  r->max_line = max_line ? max_line : TS_CSV_DEFAULT_MAX_LINE;
  r->line = 0;
  r->next = 1;
  if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) r->p += 3; /* UTF-8 BOM */
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

static void trim(const char **b, const char **e) {
  while (*b < *e && is_blank(**b)) (*b)++;
  while (*e > *b && is_blank((*e)[-1])) (*e)--;
}

int ts_csv_next(ts_csv_reader *r, ts_csv_field *fields, int max_fields, char *err, size_t errcap) {
  if (!r || (max_fields > 0 && !fields) || max_fields < 0)
    return csv_fail(err, errcap, TS_EINVAL, "bad arguments to the CSV reader");
  while (r->p < r->end) {
    const char *line = r->p, *eol = line;
    while (eol < r->end && *eol != '\n' && *eol != '\r') eol++;
    r->p = eol;
    if (r->p < r->end) {
      if (*r->p == '\r' && r->p + 1 < r->end && r->p[1] == '\n') r->p++;
      r->p++;
    }
    uint32_t lineno = r->next;
    if (r->next < UINT32_MAX) r->next++;
    size_t len = (size_t)(eol - line);
    if (len > r->max_line)
      return csv_fail(err, errcap, TS_ETOOBIG, "line %u: longer than %zu bytes", lineno,
                      r->max_line);
    if (memchr(line, '\0', len))
      return csv_fail(err, errcap, TS_EINVAL, "line %u: contains a NUL byte", lineno);
    const char *hash = memchr(line, '#', len);
    const char *b = line, *e = hash ? hash : eol;
    trim(&b, &e);
    if (b == e) continue; /* blank or comment only */

    int count = 0;
    const char *fb = b;
    for (;;) {
      const char *fe = fb;
      while (fe < e && *fe != ',') fe++;
      const char *tb = fb, *te = fe;
      trim(&tb, &te);
      count++;
      if (tb == te)
        return csv_fail(err, errcap, TS_EINVAL, "line %u: field %d is empty", lineno, count);
      if (count <= max_fields) {
        fields[count - 1].p = tb;
        fields[count - 1].len = (size_t)(te - tb);
      }
      if (fe == e) break;
      fb = fe + 1;
    }
    r->line = lineno;
    return count;
  }
  return 0;
}

static int lower(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

/* Case-insensitive: does s[0..len) equal the lowercase word w? */
static int equals_word(const char *s, size_t len, const char *w) {
  size_t n = strlen(w);
  if (len != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (lower(s[i]) != w[i]) return 0;
  return 1;
}

/* Case-insensitive: does s[0..len) contain the lowercase word w? */
static int contains_word(const char *s, size_t len, const char *w) {
  size_t n = strlen(w);
  for (size_t i = 0; i + n <= len; i++)
    if (equals_word(s + i, n, w)) return 1;
  return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int ts_csv_parse_double(const ts_csv_field *f, double *out) {
  if (!f || !f->p || !out) return TS_EINVAL;
  const char *s = f->p;
  size_t n = f->len, i = 0;
  if (n == 0 || n > TS__CSV_NUM_MAX) return TS_EINVAL;
  if (s[i] == '+' || s[i] == '-') i++;
  /* spelled-out non-finite values are a distinct, clearer error */
  if (equals_word(s + i, n - i, "nan") || equals_word(s + i, n - i, "inf") ||
      equals_word(s + i, n - i, "infinity"))
    return TS_ENAN;
  size_t int_digits = 0, frac_digits = 0;
  while (i < n && is_digit(s[i])) i++, int_digits++;
  if (i < n && s[i] == '.') {
    i++;
    while (i < n && is_digit(s[i])) i++, frac_digits++;
  }
  if (int_digits + frac_digits == 0) return TS_EINVAL;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t exp_digits = 0;
    while (i < n && is_digit(s[i])) i++, exp_digits++;
    if (exp_digits == 0) return TS_EINVAL;
  }
  if (i != n) return TS_EINVAL;
  char buf[TS__CSV_NUM_MAX + 1];
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *endp = NULL;
  errno = 0;
  double v = strtod(buf, &endp);
  if (endp != buf + n) return TS_EINVAL;
  /* ERANGE with a finite result is an underflow towards 0: acceptable */
  if (!isfinite(v)) return TS_ENAN; /* overflow to infinity */
  *out = v;
  return 0;
}

/* ---- samples -------------------------------------------------------------- */

void ts_samples_free(ts_samples *s) {
  if (!s) return;
  free(s->strain);
  free(s->stress);
  free(s->line);
  memset(s, 0, sizeof *s);
}

static int grow(ts_samples *s, uint32_t *cap) {
  uint32_t nc = *cap ? *cap * 2 : 64;
  double *e = realloc(s->strain, nc * sizeof *e);
  if (!e) return TS_ENOMEM;
  s->strain = e;
  double *t = realloc(s->stress, nc * sizeof *t);
  if (!t) return TS_ENOMEM;
  s->stress = t;
  uint32_t *l = realloc(s->line, nc * sizeof *l);
  if (!l) return TS_ENOMEM;
  s->line = l;
  *cap = nc;
  return 0;
}

static int quote_len(const ts_csv_field *f) {
  return (int)(f->len < TS__CSV_QUOTE ? f->len : TS__CSV_QUOTE);
}

static int number_error(char *err, size_t cap, int rc, uint32_t line, const char *what,
                        const ts_csv_field *f) {
  if (rc == TS_ENAN)
    return csv_fail(err, cap, TS_ENAN, "line %u: %s '%.*s' is not a finite number", line, what,
                    quote_len(f), f->p);
  return csv_fail(err, cap, TS_EINVAL, "line %u: %s '%.*s' is not a number", line, what,
                  quote_len(f), f->p);
}

/* The first record has a non-numeric first field: it must be a proper
 * header (returns 0) or it is an error. */
static int check_header(const ts_csv_field *f, uint32_t line, char *err, size_t cap) {
  double tmp;
  int rc2 = ts_csv_parse_double(&f[1], &tmp);
  if (rc2 != TS_EINVAL) /* second field is numeric: a data row with a bad strain */
    return number_error(err, cap, TS_EINVAL, line, "strain", &f[0]);
  int s0 = contains_word(f[0].p, f[0].len, "strain");
  int t1 = contains_word(f[1].p, f[1].len, "stress");
  if (s0 && t1) return 0;
  if (contains_word(f[0].p, f[0].len, "stress") && contains_word(f[1].p, f[1].len, "strain"))
    return csv_fail(err, cap, TS_EINVAL,
                    "line %u: the columns are stress,strain; samples must be strain,stress", line);
  return csv_fail(err, cap, TS_EINVAL,
                  "line %u: a header must name the columns strain,stress (found '%.*s','%.*s')",
                  line, quote_len(&f[0]), f[0].p, quote_len(&f[1]), f[1].p);
}

int ts_csv_read_samples(const char *buf, size_t len, const ts_csv_limits *lim, ts_samples *out,
                        char *err, size_t errcap) {
  if (!out) return csv_fail(err, errcap, TS_EINVAL, "no output given");
  memset(out, 0, sizeof *out);
  if (!buf && len) return csv_fail(err, errcap, TS_EINVAL, "no input given");
  ts_csv_limits l = resolve_limits(lim);
  if (len > l.max_bytes)
    return csv_fail(err, errcap, TS_ETOOBIG, "input is %zu bytes, over the limit of %zu", len,
                    l.max_bytes);
  ts_csv_reader r;
  ts_csv_reader_init(&r, buf, len, l.max_line);
  ts_samples s = {0};
  uint32_t cap = 0;
  int first = 1, rc = 0;
  for (;;) {
    ts_csv_field f[2];
    int k = ts_csv_next(&r, f, 2, err, errcap);
    if (k < 0) {
      rc = k;
      break;
    }
    if (k == 0) break;
    if (k != 2) {
      rc =
          csv_fail(err, errcap, TS_EINVAL, "line %u: expected 2 fields (strain,stress), found %d%s",
                   r.line, k, k > 2 ? " (decimal commas are not supported; use '.')" : "");
      break;
    }
    double e = 0.0, t = 0.0;
    int re = ts_csv_parse_double(&f[0], &e);
    if (first && re == TS_EINVAL) {
      first = 0;
      if ((rc = check_header(f, r.line, err, errcap))) break;
      continue;
    }
    first = 0;
    if (re) {
      rc = number_error(err, errcap, re, r.line, "strain", &f[0]);
      break;
    }
    int rt = ts_csv_parse_double(&f[1], &t);
    if (rt) {
      rc = number_error(err, errcap, rt, r.line, "stress", &f[1]);
      break;
    }
    if (s.n >= l.max_rows) {
      rc = csv_fail(err, errcap, TS_ETOOBIG, "line %u: more than %u samples", r.line, l.max_rows);
      break;
    }
    if (s.n == cap && (rc = grow(&s, &cap))) {
      csv_fail(err, errcap, rc, "out of memory after %u samples", s.n);
      break;
    }
    s.strain[s.n] = e;
    s.stress[s.n] = t;
    s.line[s.n] = r.line;
    s.n++;
  }
  if (!rc && s.n == 0)
    rc = csv_fail(err, errcap, TS_EINVAL, "no samples (expected lines of strain,stress)");
  if (rc) {
    ts_samples_free(&s);
    return rc;
  }
  *out = s;
  if (err && errcap) err[0] = '\0';
  return 0;
}

int ts_csv_read_samples_file(const char *path, const ts_csv_limits *lim, ts_samples *out, char *err,
                             size_t errcap) {
  if (!out) return csv_fail(err, errcap, TS_EINVAL, "no output given");
  memset(out, 0, sizeof *out);
  if (!path || !*path) return csv_fail(err, errcap, TS_EINVAL, "no file name given");
  ts_csv_limits l = resolve_limits(lim);
  FILE *f = fopen(path, "rb");
  if (!f) return csv_fail(err, errcap, TS_EIO, "cannot open: %s", strerror(errno));
  size_t cap = 0, n = 0;
  char *buf = NULL;
  int rc = 0;
  for (;;) {
    if (n == cap) {
      if (cap > l.max_bytes) { /* read max_bytes + 1: over the limit */
        rc = csv_fail(err, errcap, TS_ETOOBIG, "more than %zu bytes", l.max_bytes);
        break;
      }
      size_t nc = cap ? cap * 2 : 65536;
      if (nc > l.max_bytes + 1) nc = l.max_bytes + 1;
      char *nb = realloc(buf, nc);
      if (!nb) {
        rc = csv_fail(err, errcap, TS_ENOMEM, "out of memory reading %zu bytes", nc);
        break;
      }
      buf = nb;
      cap = nc;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) rc = csv_fail(err, errcap, TS_EIO, "cannot read: %s", strerror(errno));
      break;
    }
  }
  fclose(f);
  if (!rc && n > l.max_bytes)
    rc = csv_fail(err, errcap, TS_ETOOBIG, "more than %zu bytes", l.max_bytes);
  if (!rc) rc = ts_csv_read_samples(buf, n, &l, out, err, errcap);
  free(buf);
  return rc;
}
