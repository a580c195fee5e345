/*
 * ts_layer_spec.c: the JSON text of a stored tissue's layer spec (see
 * ts_layer_spec.h): a writer with JSON string escaping and a strict
 * recursive-descent reader for exactly that shape (RFC 8259 syntax).
 */
#include "ts_layer_spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"

/* ---- writer ---------------------------------------------------------------- */

typedef struct out {
  char *buf;
  size_t cap, len;
  int full;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  if (o->full) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= o->cap - o->len) {
    o->full = 1;
    return;
  }
  o->len += (size_t)n;
}

static void put_string(out *o, const char *s) {
  put(o, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      put(o, "\\%c", *p);
    else if (*p < 0x20)
      put(o, "\\u%04x", *p);
    else
      put(o, "%c", *p);
  }
  put(o, "\"");
}

static int valid_spec(const ts_layer_spec *ls) {
  if (!ls || !isfinite(ls->scale) || ls->scale <= 0) return 0;
  if (ls->n_layers < 1 || ls->n_layers > TS_LAYER_SPEC_MAX) return 0;
  for (uint32_t i = 0; i < ls->n_layers; i++) {
    const ts_layer_spec_layer *l = &ls->layers[i];
    if (!l->name[0] || !memchr(l->name, 0, sizeof l->name)) return 0;
    if (!memchr(l->material, 0, sizeof l->material)) return 0;
    if (!isfinite(l->thickness) || l->thickness <= 0) return 0;
    for (int k = 0; k < 3; k++)
      if (!isfinite(l->fibre[k])) return 0;
  }
  return 1;
}

int ts_layer_spec_format(const ts_layer_spec *ls, char *buf, size_t cap) {
  if (!buf || !cap || !valid_spec(ls)) return TS_EINVAL;
  out o = {buf, cap, 0, 0};
  put(&o, "{\"scale\":%.17g,\"layers\":[", ls->scale);
  for (uint32_t i = 0; i < ls->n_layers; i++) {
    const ts_layer_spec_layer *l = &ls->layers[i];
    put(&o, "%s{\"name\":", i ? "," : "");
    put_string(&o, l->name);
    put(&o, ",\"thickness\":%.17g,\"material\":", l->thickness);
    put_string(&o, l->material);
    if (l->fibre[0] != 0 || l->fibre[1] != 0 || l->fibre[2] != 0)
      put(&o, ",\"fibre\":[%.17g,%.17g,%.17g]", l->fibre[0], l->fibre[1], l->fibre[2]);
    put(&o, "}");
  }
  put(&o, "]}");
  if (o.full) {
    buf[0] = 0;
    return TS_ETOOBIG;
  }
  return (int)o.len;
}

/* ---- reader ---------------------------------------------------------------- */

typedef struct in {
  const char *start, *p;
  char *err;
  size_t errcap;
  int failed;
} in;

static int bad(in *x, const char *what) {
  if (!x->failed && x->err && x->errcap)
    snprintf(x->err, x->errcap, "layer spec, byte %td: %s", x->p - x->start, what);
  x->failed = 1;
  return -1;
}

static void ws(in *x) {
  while (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r') x->p++;
}

static int expect(in *x, char c) {
  ws(x);
  if (*x->p != c) {
    char what[32];
    snprintf(what, sizeof what, "expected '%c'", c);
    return bad(x, what);
  }
  x->p++;
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A JSON string into buf (cap bytes with the NUL). \u escapes are accepted
 * for code points below 0x80 (all the writer produces). */
static int string(in *x, char *buf, size_t cap) {
  if (expect(x, '"')) return -1;
  size_t n = 0;
  for (;;) {
    unsigned char c = (unsigned char)*x->p;
    if (c == 0) return bad(x, "unterminated string");
    if (c < 0x20) return bad(x, "control character in a string");
    x->p++;
    if (c == '"') break;
    if (c == '\\') {
      char e = *x->p++;
      switch (e) {
      case '"': case '\\': case '/': c = (unsigned char)e; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u': {
        int v = 0;
        for (int i = 0; i < 4; i++) {
          int h = hexval(x->p[i]);
          if (h < 0) return bad(x, "bad \\u escape");
          v = v * 16 + h;
        }
        if (v == 0 || v >= 0x80) return bad(x, "\\u escape outside 1..0x7f");
        x->p += 4;
        c = (unsigned char)v;
        break;
      }
      default: return bad(x, "bad escape in a string");
      }
    }
    if (n + 1 >= cap) return bad(x, "string too long");
    buf[n++] = (char)c;
  }
  buf[n] = 0;
  return 0;
}

static int number(in *x, double *v) {
  ws(x);
  const char *s = x->p;
  if (!(*s == '-' || (*s >= '0' && *s <= '9'))) return bad(x, "expected a number");
  char *end;
  *v = strtod(s, &end);
  if (end == s || !isfinite(*v)) return bad(x, "bad number");
  x->p = end;
  return 0;
}

static int key(in *x, char *buf, size_t cap) {
  if (string(x, buf, cap)) return -1;
  return expect(x, ':');
}

/* , or the closing c: 1 for more, 0 at the end, -1 on error */
static int more(in *x, char c) {
  ws(x);
  if (*x->p == ',') {
    x->p++;
    return 1;
  }
  if (*x->p == c) {
    x->p++;
    return 0;
  }
  char what[40];
  snprintf(what, sizeof what, "expected ',' or '%c'", c);
  return bad(x, what);
}

static int layer(in *x, ts_layer_spec_layer *l) {
  if (expect(x, '{')) return -1;
  int have = 0, m;
  do {
    char k[16];
    if (key(x, k, sizeof k)) return -1;
    if (strcmp(k, "name") == 0) {
      if (string(x, l->name, sizeof l->name)) return -1;
      if (!l->name[0]) return bad(x, "empty layer name");
      have |= 1;
    } else if (strcmp(k, "thickness") == 0) {
      if (number(x, &l->thickness)) return -1;
      if (l->thickness <= 0) return bad(x, "layer thickness must be > 0");
      have |= 2;
    } else if (strcmp(k, "material") == 0) {
      if (string(x, l->material, sizeof l->material)) return -1;
      have |= 4;
    } else if (strcmp(k, "fibre") == 0) {
      if (have & 8) return bad(x, "fibre given twice");
      if (expect(x, '[')) return -1;
      for (int i = 0; i < 3; i++) {
        if (i && expect(x, ',')) return -1;
        if (number(x, &l->fibre[i])) return -1;
      }
      if (expect(x, ']')) return -1;
      have |= 8;
    } else {
      return bad(x, "unknown key in a layer");
    }
  } while ((m = more(x, '}')) == 1);
  if (m < 0) return -1;
  if ((have & 7) != 7) return bad(x, "a layer needs name, thickness and material");
  return 0;
}

int ts_layer_spec_parse(const char *text, ts_layer_spec *out_spec, char *err, size_t errcap) {
  if (!text || !out_spec) return TS_EINVAL;
  ts_layer_spec ls;
  memset(&ls, 0, sizeof ls);
  in x = {text, text, err, errcap, 0};
  int have = 0, m;
  if (expect(&x, '{')) return TS_EINVAL;
  do {
    char k[16];
    if (key(&x, k, sizeof k)) return TS_EINVAL;
    if (strcmp(k, "scale") == 0) {
      if (number(&x, &ls.scale)) return TS_EINVAL;
      if (ls.scale <= 0) return bad(&x, "scale must be > 0"), TS_EINVAL;
      have |= 1;
    } else if (strcmp(k, "layers") == 0) {
      if (expect(&x, '[')) return TS_EINVAL;
      ls.n_layers = 0;
      int lm;
      do {
        if (ls.n_layers == TS_LAYER_SPEC_MAX) return bad(&x, "too many layers"), TS_EINVAL;
        if (layer(&x, &ls.layers[ls.n_layers++])) return TS_EINVAL;
      } while ((lm = more(&x, ']')) == 1);
      if (lm < 0) return TS_EINVAL;
      have |= 2;
    } else {
      return bad(&x, "unknown key"), TS_EINVAL;
    }
  } while ((m = more(&x, '}')) == 1);
  if (m < 0) return TS_EINVAL;
  ws(&x);
  if (*x.p) return bad(&x, "text after the object"), TS_EINVAL;
  if (have != 3) return bad(&x, "the spec needs scale and layers"), TS_EINVAL;
  *out_spec = ls;
  if (err && errcap) err[0] = 0;
  return 0;
}
