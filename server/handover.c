/*
 * handover.c: tool hand-over (see handover.h). The new controller token
 * travels only to the server-key holder who asked; the previous controller
 * keeps watching the session as an observer.
 */
#include "handover.h"

#include <stdlib.h>

#include "auth.h"
#include "core/ts_error.h"
#include "log.h"
#include "server.h"
#include "session.h"

static void send_handed_over(ts_conn *c, uint64_t rid, uint32_t session_id, uint32_t tool_id,
                             char *token, char *observer_token) {
  Tissued__V1__ToolHandedOver r = TISSUED__V1__TOOL_HANDED_OVER__INIT;
  r.session_id = session_id;
  r.tool_id = tool_id;
  if (token) r.controller_token = token;
  if (observer_token) r.observer_token = observer_token;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_HANDED_OVER;
  env.tool_handed_over = &r;
  uint8_t buf[256];
  size_t len = tissued__v1__envelope__get_packed_size(&env);
  if (len > sizeof buf) return; /* cannot happen: two ids and 32 hex digits */
  tissued__v1__envelope__pack(&env, buf);
  ts_conn_send(c, buf, len);
}

void ts_handover_tool(ts_conn *c, uint64_t rid, const Tissued__V1__HandOverTool *m) {
  ts_server *s = c->server;
  if (c->key_index < 0) {
    s->auth_refused++;
    ts_send_error(c, rid, TS_EAUTH, "handing a tool over needs the server key in Hello.credentials");
    return;
  }
  ts_session *se = ts_server_find_session(s, m->session_id);
  if (!se || se->ending) {
    ts_send_error(c, rid, TS_ENOSESSION, "no session %u", m->session_id);
    return;
  }
  int max_tools = s->cfg.max_tools < TS_MAX_TOOLS ? s->cfg.max_tools : TS_MAX_TOOLS;
  if (m->tool_id < 1 || m->tool_id > (uint32_t)max_tools) {
    ts_send_error(c, rid, TS_ETOOL, "tool ids are 1..%d", max_tools);
    return;
  }
  uint32_t t = m->tool_id - 1;
  if (ts_auth_renew_token(se->controller_token[t])) {
    ts_send_error(c, rid, TS_EIO, "no randomness from the kernel for a new token");
    return;
  }
  ts_conn *old = se->tool_owner[t];
  if (old) {
    se->tool_owner[t] = NULL;
    old->role = TISSUED__V1__ROLE__ROLE_OBSERVER;
    old->tool_id = 0;
    ts_session_set_tool(se, m->tool_id, 0, 0, 0, 0);
    if (old != c) send_handed_over(old, 0, se->id, m->tool_id, NULL, se->observer_token);
  }
  ts_log_info("session %u: tool %u handed over by %s%s", se->id, m->tool_id, c->peer,
              old ? " (its controller now observes)" : "");
  send_handed_over(c, rid, se->id, m->tool_id, se->controller_token[t], NULL);
}
