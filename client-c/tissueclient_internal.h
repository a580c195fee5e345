/*
 * tissueclient_internal.h: what libtissueclient exposes to its own tests and
 * to the fuzz target (tests/fuzz/fuzz_client.c), not to applications.
 */
#ifndef TISSUECLIENT_INTERNAL_H
#define TISSUECLIENT_INTERNAL_H

#include <stddef.h>

#include "tissueclient.h"

/* tc_connect_key over a socket that is already connected (and non-blocking),
 * e.g. one end of a socketpair whose other end plays the server: says Hello
 * and reads the HelloReply exactly as tc_connect_key does after its
 * connect(). The client owns fd from then on (closed by tc_close, or here on
 * failure). NULL on failure with a message in err. */
tc_client *tc__connect_fd(int fd, const char *client_name, const char *credentials,
                          int timeout_ms, char *err, size_t errcap);

#endif
