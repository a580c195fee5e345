/*
 * tc_connect.c: making and closing a libtissueclient connection: the TCP
 * connect with its timeout, the Hello and its HelloReply (protocol version,
 * client id, tool meshes), the internal tc__connect_fd over a connected
 * socket (tissueclient_internal.h), tc_close, and the client's accessors
 * and callback setters.
 */
#include "tc_priv.h"
#include "tissueclient_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../server/core/ts_error.h"

static int connect_to(tc_client *c, const char *host, int port, int timeout_ms) {
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(host, portstr, &hints, &res);
  if (gai != 0) return tc__fail(c, TS_EIO, "%s: %s", host, gai_strerror(gai));
  int rc = tc__fail(c, TS_EIO, "%s:%d: no address", host, port);
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
      rc = tc__fail(c, TS_EIO, "socket: %s", strerror(errno));
      continue;
    }
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int pr;
        do pr = poll(&pf, 1, timeout_ms);
        while (pr < 0 && errno == EINTR);
        if (pr == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t l = sizeof err;
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
        }
      }
    }
    if (err == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      c->fd = fd;
      rc = 0;
      break;
    }
    close(fd);
    rc = tc__fail(c, TS_EIO, "connecting to %s:%d: %s", host, port, strerror(err));
  }
  freeaddrinfo(res);
  return rc;
}

tc_client *tc_connect_timeout(const char *host, int port, const char *client_name,
                              int timeout_ms, char *err, size_t errcap) {
  return tc_connect_key(host, port, client_name, NULL, timeout_ms, err, errcap);
}

static tc_client *client_new(int timeout_ms) {
  tc_client *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fd = -1;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : TC_DEFAULT_TIMEOUT_MS;
  ts_framer_init(&c->framer, TC_MAX_MESSAGE);
  return c;
}

/* Hello and its HelloReply on c's connected socket. Returns c, ready, or
 * NULL (c closed) with the reason in err. */
static tc_client *say_hello(tc_client *c, const char *client_name, const char *credentials,
                            char *err, size_t errcap) {
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = TC_PROTOCOL_VERSION;
  h.client_name = (char *)(client_name ? client_name : "libtissueclient");
  h.credentials = (char *)(credentials ? credentials : "");
  Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  Envelope *r = NULL;
  if (tc__request(c, &env, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY, &r) != 0) goto fail;
  uint32_t v = r->hello_reply->protocol_version;
  c->client_id = r->hello_reply->client_id;
  for (size_t i = 0; i < r->hello_reply->n_tool_meshes && c->n_tool_meshes < TC_MAX_TOOL_MESHES; i++)
    snprintf(c->tool_meshes[c->n_tool_meshes++], sizeof c->tool_meshes[0], "%s",
             r->hello_reply->tool_meshes[i]);
  tissued__v1__envelope__free_unpacked(r, NULL);
  if (v != TC_PROTOCOL_VERSION) {
    tc__fail(c, TS_EVERSION, "the server speaks protocol version %u, this client %d", v,
         TC_PROTOCOL_VERSION);
    goto fail;
  }
  return c;
fail:
  if (errcap) snprintf(err, errcap, "%s", c->err);
  tc_close(c);
  return NULL;
}

tc_client *tc_connect_key(const char *host, int port, const char *client_name,
                          const char *credentials, int timeout_ms, char *err, size_t errcap) {
  if (errcap) err[0] = '\0';
  if (!host || port <= 0 || port > 65535) {
    if (errcap) snprintf(err, errcap, "bad address %s:%d", host ? host : "(null)", port);
    return NULL;
  }
  tc_client *c = client_new(timeout_ms);
  if (!c) {
    if (errcap) snprintf(err, errcap, "out of memory");
    return NULL;
  }
  if (connect_to(c, host, port, c->timeout_ms) != 0) {
    if (errcap) snprintf(err, errcap, "%s", c->err);
    tc_close(c);
    return NULL;
  }
  return say_hello(c, client_name, credentials, err, errcap);
}

tc_client *tc__connect_fd(int fd, const char *client_name, const char *credentials,
                          int timeout_ms, char *err, size_t errcap) {
  if (errcap) err[0] = '\0';
  tc_client *c = client_new(timeout_ms);
  if (!c) {
    close(fd);
    if (errcap) snprintf(err, errcap, "out of memory");
    return NULL;
  }
  c->fd = fd;
  return say_hello(c, client_name, credentials, err, errcap);
}

tc_client *tc_connect(const char *host, int port, const char *client_name, char *err,
                      size_t errcap) {
  return tc_connect_timeout(host, port, client_name, 0, err, errcap);
}

void tc_close(tc_client *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  ts_framer_free(&c->framer);
  if (c->reply) tissued__v1__envelope__free_unpacked(c->reply, NULL);
  free(c->q);
  free(c->scratch);
  free(c->pos);
  tc__free_topology(c);
  free(c->tools);
  ts_codec_ctx_free(c->codec);
  free(c);
}

int tc_fd(const tc_client *c) { return c->fd; }
uint32_t tc_tool_meshes(const tc_client *c, const char **names, uint32_t cap) {
  for (uint32_t i = 0; i < c->n_tool_meshes && i < cap; i++) names[i] = c->tool_meshes[i];
  return c->n_tool_meshes;
}

uint64_t tc_client_id(const tc_client *c) { return c->client_id; }
const char *tc_last_error(const tc_client *c) { return c ? c->err : "no client"; }
void tc_set_timeout(tc_client *c, int timeout_ms) {
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : TC_DEFAULT_TIMEOUT_MS;
}
uint64_t tc_pose_seq(const tc_client *c) { return c->pose_seq; }

void tc_set_force_cb(tc_client *c, tc_force_cb cb, void *ud) {
  c->force_cb = cb;
  c->force_ud = ud;
}

int tc_latest_force(const tc_client *c, tc_force *out) {
  if (!c->have_force) return 0;
  *out = c->force;
  return 1;
}

void tc_set_frame_cb(tc_client *c, tc_frame_cb cb, void *ud) {
  c->frame_cb = cb;
  c->frame_ud = ud;
}

void tc_set_error_cb(tc_client *c, tc_error_cb cb, void *ud) {
  c->error_cb = cb;
  c->error_ud = ud;
}

void tc_set_progress_cb(tc_client *c, tc_progress_cb cb, void *ud) {
  c->progress_cb = cb;
  c->progress_ud = ud;
}

void tc_set_create_progress_cb(tc_client *c, tc_create_progress_cb cb, void *ud) {
  c->create_cb = cb;
  c->create_ud = ud;
}

const tc_frame *tc_last_frame(const tc_client *c) {
  return c->have_state && !c->desync ? &c->frame : NULL;
}
