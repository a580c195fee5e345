// sessions_rest.test.mjs: the web page's session list on a session whose
// tissue is at rest (SessionInfo.asleep, server/session_sleep.h): the field
// as the page decodes it from a SessionList (proto/tissue.proto through
// protobufjs) and the note the page shows for it (client-web/src/sessions.js
// restTitle; the row's "at rest" comes from the at-rest class in style.css).
// No daemon. Run: node --test tests/integration/sessions_rest.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { loadProtocol } from './daemon_proc.mjs';
import { restTitle } from '../../client-web/src/sessions.js';

test('session list: a session at rest and one stepping', () => {
  const p = loadProtocol();
  const m = p.decode(p.encode('sessionList', { sessions: [{ sessionId: 1, asleep: true },
    { sessionId: 2 }] }, 3));
  assert.equal(m.kind, 'sessionList');
  const [a, b] = m.body.sessions;
  assert.equal(a.asleep, true);
  assert.equal(b.asleep, false);
  assert.match(restTitle(a), /^at rest: /);
  assert.equal(restTitle(b), '');
  // the style the row's class turns on
  const css = fs.readFileSync(new URL('../../client-web/style.css', import.meta.url), 'utf8');
  assert.match(css, /tr\.at-rest \.ss-solver::after \{ content: " · at rest"; \}/);
});
