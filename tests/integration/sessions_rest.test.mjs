// sessions_rest.test.mjs: the web page's session list on a session whose
// tissue is at rest (SessionInfo.asleep, server/session_sleep.h): the field
// as the page decodes it from a SessionList (proto/tissue.proto through
// protobufjs) and the note the page shows for it (client-web/src/sessions.js
// restTitle; the row's "at rest" comes from the at-rest class in style.css),
// and on one the slow thread steps (SessionInfo.slow_lane, server/lane.h).
// No daemon. Run: node --test tests/integration/sessions_rest.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { loadProtocol } from './daemon_proc.mjs';
import { laneTitle, restTitle } from '../../client-web/src/sessions.js';

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

test('session list: a session on the slow thread', () => {
  const p = loadProtocol();
  const m = p.decode(p.encode('sessionList', { sessions: [
    { sessionId: 1, slowLane: true, stepLoad: 2.75 }, { sessionId: 2, stepLoad: 0.4 }] }, 4));
  const [a, b] = m.body.sessions;
  assert.equal(a.slowLane, true);
  assert.equal(b.slowLane, false);
  assert.equal(a.stepLoad, 2.75);
  assert.match(laneTitle(a), /^slower than real time: .*\(2\.75x\)/);
  assert.equal(laneTitle(b), '');
  const css = fs.readFileSync(new URL('../../client-web/style.css', import.meta.url), 'utf8');
  assert.match(css, /tr\.slow-lane \.ss-solver::after \{ content: " · slow motion"; \}/);
});
