/*
 * ws_handshake.c: validation of WebSocket upgrade requests and the
 * Sec-WebSocket-Accept computation (RFC 6455 section 4.2.1-4.2.2), with
 * OpenSSL's libcrypto for SHA-1 and base64. See ws.h.
 */
#include "ws.h"

#include <openssl/evp.h>
#include <string.h>
#include <strings.h>

#include "../core/ts_error.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int ts_ws_accept_key(const char *key, char out[TS_WS_ACCEPT_LEN + 1]) {
  if (!key || !out) return TS_EINVAL;
  size_t klen = strlen(key);
  if (klen == 0 || klen > 128) return TS_EINVAL;
  char buf[128 + sizeof ws_guid];
  memcpy(buf, key, klen);
  memcpy(buf + klen, ws_guid, sizeof ws_guid - 1);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (EVP_Digest(buf, klen + sizeof ws_guid - 1, md, &mdlen, EVP_sha1(), NULL) != 1 ||
      mdlen != 20)
    return TS_EINTERNAL;
  unsigned char enc[TS_WS_ACCEPT_LEN + 4];
  int n = EVP_EncodeBlock(enc, md, 20);
  if (n != TS_WS_ACCEPT_LEN) return TS_EINTERNAL;
  memcpy(out, enc, TS_WS_ACCEPT_LEN);
  out[TS_WS_ACCEPT_LEN] = '\0';
  return 0;
}

static int b64char(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
         (ch >= '0' && ch <= '9') || ch == '+' || ch == '/';
}

int ts_ws_key_valid(const char *key) {
  /* 16 bytes encode to 22 base64 characters and "==" (24 in all). */
  if (!key || strlen(key) != 24) return 0;
  for (int i = 0; i < 22; i++)
    if (!b64char(key[i])) return 0;
  if (key[22] != '=' || key[23] != '=') return 0;
  unsigned char raw[24];
  int n = EVP_DecodeBlock(raw, (const unsigned char *)key, 24);
  return n == 18; /* EVP_DecodeBlock counts the two padding bytes */
}

int ts_ws_list_has_token(const char *list, const char *token) {
  if (!list || !token) return 0;
  size_t tlen = strlen(token);
  const char *p = list;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    const char *start = p;
    while (*p && *p != ',') p++;
    const char *end = p;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
    if ((size_t)(end - start) == tlen && strncasecmp(start, token, tlen) == 0) return 1;
  }
  return 0;
}

const char *ts_ws_check_upgrade(int is_get, int http_1_1_or_later,
                                const char *upgrade, const char *connection,
                                const char *version, const char *key) {
  if (!is_get) return "WebSocket upgrade needs GET";
  if (!http_1_1_or_later) return "WebSocket upgrade needs HTTP/1.1";
  if (!ts_ws_list_has_token(upgrade, "websocket")) return "missing Upgrade: websocket";
  if (!ts_ws_list_has_token(connection, "upgrade")) return "missing Connection: upgrade";
  if (!version || strcmp(version, "13") != 0) return "Sec-WebSocket-Version must be 13";
  if (!key) return "missing Sec-WebSocket-Key";
  if (!ts_ws_key_valid(key)) return "Sec-WebSocket-Key is not 16 bytes of base64";
  return NULL;
}
