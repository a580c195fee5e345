/*
 * sockq.c: the kernel send-queue size of a socket, read at most as often as
 * sockq.h says.
 */
#include "sockq.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>

size_t ts_socket_unsent(const uv_stream_t *stream) {
  uv_os_fd_t fd;
  if (uv_fileno((const uv_handle_t *)stream, &fd) != 0) return 0;
  int n = 0;
  if (ioctl(fd, SIOCOUTQ, &n) != 0 || n < 0) return 0;
  return (size_t)n;
}

int ts_sockq_due(const ts_sockq *q, uint64_t now_ms) {
  if (!q->valid || q->unsent > 0 || now_ms < q->read_ms) return 1;
  return now_ms - q->read_ms >= TS_SOCKQ_QUIET_MS;
}

size_t ts_sockq_unsent(ts_sockq *q, const uv_stream_t *stream) {
  uint64_t now = uv_now(stream->loop);
  if (ts_sockq_due(q, now)) {
    q->unsent = ts_socket_unsent(stream);
    q->read_ms = now;
    q->valid = 1;
  }
  return q->unsent;
}
