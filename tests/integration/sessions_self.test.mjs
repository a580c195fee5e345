// sessions_self.test.mjs: the web page's session list words for tissue
// self-contact (client-web/src/sessions.js selfContactText) on SessionInfo
// as the page decodes it from a SessionList (proto/tissue.proto through
// protobufjs): on, off over the node limit, off because it could not be set
// up, and nothing for a session that did not ask. Checks that the field
// names the page reads are the proto's. No daemon.
// Run: node --test tests/integration/sessions_self.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { loadProtocol } from './daemon_proc.mjs';
import { selfContactText } from '../../client-web/src/sessions.js';

test('session list: self-contact on, off and why', () => {
  const p = loadProtocol();
  const sessions = [
    { sessionId: 1, selfContact: true, selfContactSurfaceNodes: 5392 },
    { sessionId: 2, selfContactOff: 1, selfContactSurfaceNodes: 7000 },  // OVER_LIMIT
    { sessionId: 3, selfContactOff: 2, selfContactSurfaceNodes: 5400 },  // FAILED
    { sessionId: 4 },
  ];
  const m = p.decode(p.encode('sessionList', { sessions }, 7));
  assert.equal(m.kind, 'sessionList');
  const got = m.body.sessions.map((s) => [s.sessionId, selfContactText(s), s.selfContactSurfaceNodes]);
  assert.deepEqual(got, [
    [1, 'self-contact', 5392],
    [2, 'self-contact off: over the node limit', 7000],
    [3, 'self-contact off: could not be set up', 5400],
    [4, '', 0],
  ]);
  // the enum's names, as the proto says them
  const Off = { ...p.root.lookupEnum('tissued.v1.SessionInfo.SelfContactOff').values };
  assert.deepEqual(Off, { NONE: 0, OVER_LIMIT: 1, FAILED: 2 });
});
