/*
 * fuzz_tllink.c: fuzz target for tissueload's own connection code
 * (client-c/tl_link.c), what it reads from a daemon that is broken or
 * hostile: the WebSocket handshake answer (status line, headers,
 * Sec-WebSocket-Accept, bytes after the head), its hand-written RFC 6455
 * frame parser (lengths, masks, fragments, control frames, close) and the
 * TCP length-prefixed framing.
 *
 * tl_link.c is compiled into this target (tests/fuzz/CMakeLists.txt links
 * only ts_proto and libcrypto), so the link is set up as tl_link_open does
 * but over one end of a socketpair, with a fixed masking-key seed: the
 * target can then answer the handshake with the right accept value itself.
 *
 * Input: byte 0: bit 0 TCP (else WebSocket); bit 1 the target answers the
 * handshake correctly (else the first segment is the answer); bits 2..7 the
 * most tl_link_read may read at a time (1 + 16 * (byte 0 >> 2) bytes), so
 * frames arrive cut anywhere. The rest is the server's bytes in segments,
 * each a 16-bit little-endian length and that many bytes: segment 0 before
 * the handshake, every further one followed by reads until nothing is
 * left; then the server end shuts down and the link is read to its end.
 * Seeds: tests/fuzz/corpus/tllink/.
 *
 * Checks: tl_link_read returns a count or one of TS_EIO, TS_EPROTOCOL,
 * TS_ETOOBIG, TS_ENOMEM or the callback's own code; a message is at most
 * 64 MiB and readable to its end; a failed handshake says why; over TCP,
 * once reading reached the end of the stream, the bytes counted in equal
 * the bytes the server wrote.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../client-c/tl_link.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SERVER_MAX (64u << 10) /* what a socketpair buffer takes without a reader */
#define SEED 0x9e3779b97f4a7c15ull
#define CB_STOP 12345 /* a message starting 0xEE makes the callback stop reading */

static volatile unsigned sink;

static int on_msg(void *ud, const uint8_t *msg, size_t len) {
  (void)ud;
  if (len > TL_MAX_MESSAGE) abort();
  unsigned s = 0;
  for (size_t i = 0; i < len; i++) s += msg[i];
  sink = s;
  return len && msg[0] == 0xEE ? CB_STOP : 0;
}

/* The 101 answer to the key ws_handshake sends with l->rng == SEED. */
static size_t good_answer(char *out, size_t cap) {
  uint64_t rng = SEED;
  uint8_t nonce[16];
  for (int i = 0; i < 16; i += 8) {
    uint64_t r = xorshift(&rng);
    memcpy(nonce + i, &r, 8);
  }
  char key[32], cat[128], acc[64];
  base64(nonce, 16, key);
  snprintf(cat, sizeof cat, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
  uint8_t sha[SHA_DIGEST_LENGTH];
  SHA1((const unsigned char *)cat, strlen(cat), sha);
  base64(sha, sizeof sha, acc);
  return (size_t)snprintf(out, cap,
                          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                          acc);
}

static size_t put(int fd, const uint8_t *p, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
    if (w <= 0) break; /* the buffer is full: the link sees a shorter stream */
    off += (size_t)w;
  }
  return off;
}

/* The next segment: its bytes and length, or 0 when the input has run out. */
static int next_segment(const uint8_t **data, size_t *size, const uint8_t **seg, size_t *n) {
  if (*size < 2) return 0;
  *n = (size_t)(*data)[0] | (size_t)(*data)[1] << 8;
  *data += 2;
  *size -= 2;
  if (*n > *size) *n = *size;
  *seg = *data;
  *data += *n;
  *size -= *n;
  return 1;
}

static void check_read(int rc) {
  if (rc >= 0 || rc == TS_EIO || rc == TS_EPROTOCOL || rc == TS_ETOOBIG || rc == TS_ENOMEM ||
      rc == CB_STOP)
    return;
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > SERVER_MAX) return 0;
  int transport = data[0] & 1 ? TL_TCP : TL_WS;
  int answer = (data[0] >> 1) & 1;
  size_t max_read = 1 + 16 * (size_t)(data[0] >> 2);
  data++;
  size--;

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) abort();
  int big = 1 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);

  /* as tl_link_open, over sv[0] and with a fixed seed */
  tl_link *l = calloc(1, sizeof *l);
  if (!l) abort();
  l->rng = SEED;
  l->transport = transport;
  ts_framer_init(&l->framer, TL_MAX_MESSAGE);
  l->fd = sv[0];

  uint64_t written = 0;
  if (transport == TL_WS && answer) {
    char a[256];
    size_t n = good_answer(a, sizeof a);
    if (put(sv[1], (const uint8_t *)a, n) != n) abort();
  }
  const uint8_t *seg;
  size_t n;
  int more = next_segment(&data, &size, &seg, &n);
  if (more) written += put(sv[1], seg, n);
  if (!more) shutdown(sv[1], SHUT_WR);
  if (transport == TL_WS) {
    char err[256] = "";
    if (ws_handshake(l, "127.0.0.1", 8080, 1, err, sizeof err)) {
      if (!err[0] || strnlen(err, sizeof err) >= sizeof err) abort();
      tl_link_close(l);
      close(sv[1]);
      return 0;
    }
  }
  int dead = 0;
  for (int k = 0; more && !dead; k++) {
    for (int j = 0; j < 1000; j++) {
      int rc = tl_link_read(l, max_read, on_msg, NULL);
      check_read(rc);
      if (rc < 0) dead = rc != CB_STOP;
      if (rc <= 0) break;
    }
    more = next_segment(&data, &size, &seg, &n);
    if (more) written += put(sv[1], seg, n);
  }
  shutdown(sv[1], SHUT_WR);
  int eof = 0;
  for (int j = 0; j < 100000 && !dead; j++) {
    int rc = tl_link_read(l, max_read, on_msg, NULL);
    check_read(rc);
    if (rc == TS_EIO) eof = 1;
    if (rc < 0 && rc != CB_STOP) break;
  }
  /* every byte the server wrote was read once, handshake bytes aside */
  if (eof && transport == TL_TCP && tl_link_bytes_in(l) != written) abort();
  tl_link_close(l);
  close(sv[1]);
  return 0;
}
