// create_progress.test.mjs: the web page's protocol client (client-web/src/
// connection.js, SessionClient, with the ws package's WebSocket) creating a
// session of a large upload on a real daemon: it asks for progress, each
// CreateProgress reaches the panel's callback in stage order and restarts
// the request's wait, and the panel's words for it (sessions.js
// progressText); and a create whose wait ran out is not joined when its
// SessionCreated comes late. The upload is a flat grid made here, a few
// seconds' build (server/create.c). Run: node --test tests/integration/create_progress.test.mjs
// after deploy/build.sh build.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { startDaemon, loadProtocol, webRequire, SERVER_KEY, waitFor, gridObj } from './daemon_proc.mjs';
import { SessionClient } from '../../client-web/src/connection.js';
import { progressText } from '../../client-web/src/sessions.js';

const WebSocket = webRequire('ws');

async function connected(d, handlers = {}) {
  const c = new SessionClient({
    url: `ws://127.0.0.1:${d.httpPort}/ws`, protocol: loadProtocol(), WebSocket,
    credentials: SERVER_KEY, autoCreate: false, clientName: 'create-progress-test', handlers,
  });
  c.start();
  await waitFor(() => c.state === 'connected', 20000, 'the client connected');
  return c;
}

test('a large upload reports its progress to the page, and a late reply is not joined', async (t) => {
  const d = await startDaemon({ name: 'create_progress' });
  t.after(async () => {
    const s = await d.stop();
    assert.equal(s.code, 0, 'daemon exit ' + JSON.stringify(s) + '\n' + d.log().slice(-3000));
  });
  const data = new TextEncoder().encode(gridObj(130)); // 33,282 triangles

  // the page's create: reports in stage order, each read by the panel
  const joined = [];
  const c = await connected(d, { joined: (j) => joined.push(j) });
  const reports = [];
  const t0 = Date.now();
  const created = await c.createSession({ name: 'grid', mesh: { format: 0, data, scale: 1 } },
    (p) => reports.push({ stage: Number(p.stage), elapsed: Number(p.elapsed), text: progressText(p) }));
  const took = (Date.now() - t0) / 1000;
  console.log(`create_progress: built in ${took.toFixed(1)} s, ${reports.length} reports: ` +
    reports.map((r) => r.text).join(' | '));
  assert.ok(created.sessionId > 0);
  assert.ok(took >= 1.1, `the grid built in ${took} s: too fast to report`);
  assert.ok(reports.length >= 1, 'no progress report');
  for (let i = 1; i < reports.length; i++) {
    assert.ok(reports[i].stage >= reports[i - 1].stage, 'stages out of order');
    assert.ok(reports[i].elapsed > reports[i - 1].elapsed, 'elapsed not increasing');
  }
  for (const r of reports) {
    assert.ok(r.elapsed >= 0.95, 'a report before the first second: ' + r.elapsed);
    assert.match(r.text, /^creating: (reading the mesh|extruding the layers|building the springs and the stable step|setting up the solver|storing the tissue|waiting for .*), \d+ s$/);
  }
  await waitFor(() => joined.length > 0 && c.sessionId === created.sessionId, 20000,
    'the creator joined its session');

  // a wait of 300 ms, without reports, for the same tissue (now stored as
  // "grid"): the request gives up, and its SessionCreated, when it comes,
  // does not move the client from the session it is in
  const before = c.sessionId;
  await assert.rejects(c.request('createSession', { name: 'late', builtin: 'grid' }, 300),
    /no reply in 300 ms/);
  const list = async () => (await c.listSessions()).map((s) => s.name);
  await waitFor(async () => (await list()).includes('late'), 120000, 'the late session built');
  await new Promise((r) => setTimeout(r, 500)); // its reply has been read
  assert.equal(c.sessionId, before, 'the late reply moved the client into its session');
  assert.equal(joined.length, 1, 'joined again');
  c.stop();

  // the page's words for each stage, and for a creation waiting its turn
  assert.equal(progressText({ stage: 0, elapsed: 2.4, ahead: 2 }),
    'creating: waiting for 2 other creations, 2 s');
  assert.equal(progressText({ stage: 0, elapsed: 1, ahead: 1 }),
    'creating: waiting for 1 other creation, 1 s');
  assert.equal(progressText({ stage: 3, elapsed: 12.6, ahead: 0 }),
    'creating: building the springs and the stable step, 13 s');
  assert.equal(progressText({ stage: 9, elapsed: 1 }), 'creating: working, 1 s');
});
