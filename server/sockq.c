/*
 * sockq.c: the kernel send-queue size of a socket (see sockq.h).
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
