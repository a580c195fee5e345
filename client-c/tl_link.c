/*
 * tl_link.c: a tissueload connection, TCP-framed or WebSocket (see
 * tl_link.h). The WebSocket side follows RFC 6455 as a client: section 4.1
 * for the opening handshake, 5.2 for the frame header, 5.3 for masking (a
 * client masks every frame), 5.5 for control frames.
 */
#include "tl_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../server/core/ts_error.h"
#include "ts_framing.h"

#define TL_MAX_MESSAGE (64u << 20)
#define TL_MAX_QUEUED (4u << 20)
#define TL_READ_CHUNK 65536

struct tl_link {
  int fd;
  int transport;
  int broken;
  uint64_t rng;          /* masking keys (RFC 6455 5.3 wants them unpredictable
                            to proxies; on loopback a per-link xorshift does) */
  uint64_t bytes_in;
  /* output queue */
  uint8_t *out;
  size_t out_len, out_off, out_cap;
  /* TCP input */
  ts_framer framer;
  /* WebSocket input: raw bytes not yet parsed, and a message being
   * reassembled from fragments */
  uint8_t *in;
  size_t in_len, in_cap;
  uint8_t *msg;
  size_t msg_len, msg_cap;
  int in_message;        /* a fragmented binary/text message is open */
  int msg_text;
};

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int grow(uint8_t **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 4096;
  while (c < need) c *= 2;
  uint8_t *q = realloc(*p, c);
  if (!q) return TS_ENOMEM;
  *p = q;
  *cap = c;
  return 0;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Loopback only: the load generator never targets anything else. */
static int is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
    return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  }
  return 0;
}

static int connect_loopback(const char *host, int port, int timeout_ms, char *err,
                            size_t errcap) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int g = getaddrinfo(host, ps, &hints, &res);
  if (g) {
    snprintf(err, errcap, "%s: %s", host, gai_strerror(g));
    return -1;
  }
  int fd = -1;
  snprintf(err, errcap, "%s:%d: no loopback address", host, port);
  for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
    if (!is_loopback(ai->ai_addr)) {
      snprintf(err, errcap, "%s is not a loopback address: tissueload only loads 127.0.0.0/8 or ::1",
               host);
      continue;
    }
    int s = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    int e = 0;
    if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
      e = errno;
      if (e == EINPROGRESS) {
        struct pollfd pf = {.fd = s, .events = POLLOUT};
        int pr;
        do pr = poll(&pf, 1, timeout_ms);
        while (pr < 0 && errno == EINTR);
        socklen_t l = sizeof e;
        if (pr == 0)
          e = ETIMEDOUT;
        else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l) != 0)
          e = errno;
      }
    }
    if (e) {
      snprintf(err, errcap, "connecting to %s:%d: %s", host, port, strerror(e));
      close(s);
      continue;
    }
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fd = s;
  }
  freeaddrinfo(res);
  return fd;
}

/* Blocking-with-deadline helpers for the handshake. */
static int send_all(int fd, const char *p, size_t n, int64_t deadline) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      int left = (int)(deadline - mono_ms());
      if (left <= 0) return -1;
      struct pollfd pf = {.fd = fd, .events = POLLOUT};
      poll(&pf, 1, left);
      continue;
    }
    return -1;
  }
  return 0;
}

static void base64(const uint8_t *in, size_t n, char *out) {
  EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* RFC 6455 4.1: GET /ws with a random key; the answer must be 101 with
 * Sec-WebSocket-Accept = base64(SHA-1(key + GUID)). Bytes after the header
 * (a first message sent at once) stay in l->in. */
static int ws_handshake(tl_link *l, const char *host, int port, int timeout_ms, char *err,
                        size_t errcap) {
  int64_t deadline = mono_ms() + timeout_ms;
  uint8_t nonce[16];
  for (int i = 0; i < 16; i += 8) {
    uint64_t r = xorshift(&l->rng);
    memcpy(nonce + i, &r, 8);
  }
  char key[32];
  base64(nonce, 16, key);
  char req[512];
  int rl = snprintf(req, sizeof req,
                    "GET /ws HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                    "Sec-WebSocket-Version: 13\r\nUser-Agent: tissueload\r\n\r\n",
                    host, port, key);
  if (send_all(l->fd, req, (size_t)rl, deadline)) {
    snprintf(err, errcap, "WebSocket handshake: sending failed");
    return -1;
  }
  char hdr[4096];
  size_t hl = 0;
  char *end = NULL;
  while (!end) {
    int left = (int)(deadline - mono_ms());
    if (left <= 0 || hl >= sizeof hdr - 1) {
      snprintf(err, errcap, "WebSocket handshake: no complete answer within %d ms", timeout_ms);
      return -1;
    }
    struct pollfd pf = {.fd = l->fd, .events = POLLIN};
    if (poll(&pf, 1, left) <= 0) continue;
    ssize_t r = recv(l->fd, hdr + hl, sizeof hdr - 1 - hl, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      snprintf(err, errcap, "WebSocket handshake: connection closed");
      return -1;
    }
    if (r < 0) continue;
    hl += (size_t)r;
    hdr[hl] = '\0';
    end = strstr(hdr, "\r\n\r\n");
  }
  size_t head = (size_t)(end + 4 - hdr);
  if (strncmp(hdr, "HTTP/1.1 101", 12) != 0) {
    char *eol = strstr(hdr, "\r\n");
    if (eol) *eol = '\0';
    snprintf(err, errcap, "WebSocket handshake refused: %.200s", hdr);
    return -1;
  }
  /* expected accept value */
  char cat[128];
  snprintf(cat, sizeof cat, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
  uint8_t sha[SHA_DIGEST_LENGTH];
  SHA1((const unsigned char *)cat, strlen(cat), sha);
  char want[64];
  base64(sha, sizeof sha, want);
  int ok = 0;
  for (char *line = strstr(hdr, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
    const char *f = line + 2;
    if (strncasecmp(f, "Sec-WebSocket-Accept:", 21) == 0) {
      f += 21;
      while (*f == ' ') f++;
      ok = strncmp(f, want, strlen(want)) == 0;
    }
  }
  if (!ok) {
    snprintf(err, errcap, "WebSocket handshake: missing or wrong Sec-WebSocket-Accept");
    return -1;
  }
  if (hl > head) {
    if (grow(&l->in, &l->in_cap, hl - head)) return -1;
    memcpy(l->in, hdr + head, hl - head);
    l->in_len = hl - head;
  }
  return 0;
}

tl_link *tl_link_open(int transport, const char *host, int port, int timeout_ms, char *err,
                      size_t errcap) {
  if (transport != TL_TCP && transport != TL_WS) {
    snprintf(err, errcap, "unknown transport %d", transport);
    return NULL;
  }
  if (port <= 0 || port > 65535) {
    snprintf(err, errcap, "bad port %d", port);
    return NULL;
  }
  tl_link *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, errcap, "out of memory");
    return NULL;
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  l->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uintptr_t)l ^ 0x9e3779b97f4a7c15ull;
  l->transport = transport;
  ts_framer_init(&l->framer, TL_MAX_MESSAGE);
  l->fd = connect_loopback(host, port, timeout_ms, err, errcap);
  if (l->fd < 0 || (transport == TL_WS && ws_handshake(l, host, port, timeout_ms, err, errcap))) {
    tl_link_close(l);
    return NULL;
  }
  return l;
}

void tl_link_close(tl_link *l) {
  if (!l) return;
  if (l->fd >= 0) close(l->fd);
  ts_framer_free(&l->framer);
  free(l->out);
  free(l->in);
  free(l->msg);
  free(l);
}

int tl_link_fd(const tl_link *l) { return l->fd; }
int tl_link_transport(const tl_link *l) { return l->transport; }
size_t tl_link_pending(const tl_link *l) { return l->out_len - l->out_off; }
uint64_t tl_link_bytes_in(const tl_link *l) { return l->bytes_in; }

int tl_link_flush(tl_link *l) {
  if (l->broken) return TS_EIO;
  while (l->out_off < l->out_len) {
    ssize_t w = send(l->fd, l->out + l->out_off, l->out_len - l->out_off, MSG_NOSIGNAL);
    if (w > 0) {
      l->out_off += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    l->broken = 1;
    return TS_EIO;
  }
  l->out_off = l->out_len = 0;
  return 0;
}

/* Appends one WebSocket frame (RFC 6455 5.2), masked. */
static int queue_ws_frame(tl_link *l, int opcode, const uint8_t *p, size_t n) {
  uint8_t h[14];
  size_t hl = 0;
  h[hl++] = (uint8_t)(0x80 | opcode);
  if (n < 126) {
    h[hl++] = (uint8_t)(0x80 | n);
  } else if (n <= 0xFFFF) {
    h[hl++] = 0x80 | 126;
    h[hl++] = (uint8_t)(n >> 8);
    h[hl++] = (uint8_t)n;
  } else {
    h[hl++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--) h[hl++] = (uint8_t)((uint64_t)n >> (8 * i));
  }
  uint32_t mk = (uint32_t)xorshift(&l->rng);
  uint8_t mask[4] = {(uint8_t)mk, (uint8_t)(mk >> 8), (uint8_t)(mk >> 16), (uint8_t)(mk >> 24)};
  memcpy(h + hl, mask, 4);
  hl += 4;
  if (grow(&l->out, &l->out_cap, l->out_len + hl + n)) return TS_ENOMEM;
  memcpy(l->out + l->out_len, h, hl);
  uint8_t *d = l->out + l->out_len + hl;
  for (size_t i = 0; i < n; i++) d[i] = p[i] ^ mask[i & 3];
  l->out_len += hl + n;
  return 0;
}

int tl_link_send(tl_link *l, const uint8_t *msg, size_t len) {
  if (l->broken) return TS_EIO;
  if (tl_link_pending(l) > TL_MAX_QUEUED) return TS_EFULL;
  if (l->out_off && l->out_off == l->out_len) l->out_off = l->out_len = 0;
  int rc;
  if (l->transport == TL_WS) {
    rc = queue_ws_frame(l, 0x2, msg, len);
  } else {
    rc = grow(&l->out, &l->out_cap, l->out_len + 4 + len);
    if (!rc) {
      ts_frame_header(l->out + l->out_len, (uint32_t)len);
      memcpy(l->out + l->out_len + 4, msg, len);
      l->out_len += 4 + len;
    }
  }
  if (rc) return rc;
  return tl_link_flush(l);
}

/* Parses whole WebSocket frames out of l->in; returns messages delivered or
 * an error. */
static int ws_parse(tl_link *l, tl_msg_cb cb, void *ud) {
  size_t o = 0;
  int count = 0, rc = 0;
  while (l->in_len - o >= 2) {
    const uint8_t *p = l->in + o;
    size_t avail = l->in_len - o;
    int fin = p[0] & 0x80, op = p[0] & 0x0F, masked = p[1] & 0x80;
    if (p[0] & 0x70) return TS_EPROTOCOL; /* no extensions were negotiated */
    uint64_t n = p[1] & 0x7F;
    size_t hl = 2;
    if (n == 126) {
      if (avail < 4) break;
      n = ((uint64_t)p[2] << 8) | p[3];
      hl = 4;
    } else if (n == 127) {
      if (avail < 10) break;
      n = 0;
      for (int i = 0; i < 8; i++) n = (n << 8) | p[2 + i];
      hl = 10;
    }
    if (n > TL_MAX_MESSAGE) return TS_ETOOBIG;
    size_t mh = masked ? 4 : 0;
    if (avail < hl + mh + n) break;
    uint8_t *d = l->in + o + hl + mh;
    if (masked) /* servers do not mask (5.1), but unmasking costs nothing */
      for (uint64_t i = 0; i < n; i++) d[i] ^= p[hl + (i & 3)];
    o += hl + mh + (size_t)n;
    if (op & 0x8) { /* control frame */
      if (!fin || n > 125) return TS_EPROTOCOL;
      if (op == 0x8) { /* close: answer it and report the end */
        queue_ws_frame(l, 0x8, d, n >= 2 ? 2 : 0);
        tl_link_flush(l);
        l->broken = 1;
        rc = TS_EIO;
        break;
      }
      if (op == 0x9) {
        queue_ws_frame(l, 0xA, d, (size_t)n);
        tl_link_flush(l);
      }
      continue;
    }
    if (op == 0x1 || op == 0x2) {
      if (l->in_message) return TS_EPROTOCOL;
      if (fin) {
        count++;
        if (op == 0x2) {
          int r = cb(ud, d, (size_t)n);
          if (r) {
            rc = r;
            break;
          }
        }
        continue;
      }
      l->in_message = 1;
      l->msg_text = op == 0x1;
      l->msg_len = 0;
    } else if (op != 0x0 || !l->in_message) {
      return TS_EPROTOCOL;
    }
    if (l->msg_len + n > TL_MAX_MESSAGE) return TS_ETOOBIG;
    /* at least one byte: after an empty first fragment l->msg must still be
     * a buffer (NULL + 0 is undefined; found by fuzz_tllink), and the
     * callback gets a real pointer for an empty message */
    size_t need = l->msg_len + (size_t)n;
    if (grow(&l->msg, &l->msg_cap, need ? need : 1)) return TS_ENOMEM;
    memcpy(l->msg + l->msg_len, d, (size_t)n);
    l->msg_len += (size_t)n;
    if (fin) {
      l->in_message = 0;
      count++;
      if (!l->msg_text) {
        int r = cb(ud, l->msg, l->msg_len);
        if (r) {
          rc = r;
          break;
        }
      }
    }
  }
  if (o) {
    memmove(l->in, l->in + o, l->in_len - o);
    l->in_len -= o;
  }
  return rc ? rc : count;
}

typedef struct tcp_count {
  tl_msg_cb cb;
  void *ud;
  int count;
} tcp_count;

static int tcp_cb(void *ud, const uint8_t *m, size_t n) {
  tcp_count *t = ud;
  t->count++;
  return t->cb(t->ud, m, n);
}

int tl_link_read(tl_link *l, size_t max_bytes, tl_msg_cb cb, void *ud) {
  if (l->broken) return TS_EIO;
  if (!max_bytes) max_bytes = 1u << 20;
  int total = 0;
  /* a WebSocket message that arrived with the handshake answer */
  if (l->transport == TL_WS && l->in_len) {
    int r = ws_parse(l, cb, ud);
    if (r < 0) return r;
    total += r;
  }
  size_t got = 0;
  while (got < max_bytes) {
    uint8_t *dst;
    size_t room;
    uint8_t stack[TL_READ_CHUNK];
    if (l->transport == TL_WS) {
      if (grow(&l->in, &l->in_cap, l->in_len + TL_READ_CHUNK)) return TS_ENOMEM;
      dst = l->in + l->in_len;
      room = TL_READ_CHUNK;
    } else {
      dst = stack;
      room = sizeof stack;
    }
    ssize_t r = recv(l->fd, dst, room, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (r <= 0) {
      l->broken = 1;
      return TS_EIO;
    }
    got += (size_t)r;
    l->bytes_in += (uint64_t)r;
    if (l->transport == TL_WS) {
      l->in_len += (size_t)r;
      int m = ws_parse(l, cb, ud);
      if (m < 0) {
        l->broken = 1;
        return m;
      }
      total += m;
    } else {
      tcp_count t = {cb, ud, 0};
      int fr = ts_framer_feed(&l->framer, dst, (size_t)r, tcp_cb, &t);
      total += t.count;
      if (fr) {
        l->broken = 1;
        return fr;
      }
    }
    if ((size_t)r < room) break;
  }
  return total;
}
