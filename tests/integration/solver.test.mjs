// solver.test.mjs: a session can be created with either solver. With the
// position-based solver (XPBD) selected, the session lists it, the patch
// settles, and a pressing tool dents it and feels an upward force, like the
// default mass-spring session. Run:
// TISSUED_BIN=build/server/tissued node --test tests/integration/solver.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { SERVER_KEY, startDaemon, loadProtocol, waitFor, waitSettled } from './daemon_proc.mjs';
import { WsPeer } from './ws_peer.mjs';
import { Role } from '../../client-web/src/protocol.js';

let daemon = null;
let peer = null;

before(async () => {
  daemon = await startDaemon({ name: 'solver-test-tissued' });
  peer = await new WsPeer(loadProtocol(), `ws://127.0.0.1:${daemon.httpPort}/ws`).open();
  const hello = await peer.request('hello', { protocolVersion: 1, clientName: 'solver.test', credentials: SERVER_KEY });
  assert.equal(hello.kind, 'helloReply');
});

after(async () => {
  if (peer) peer.close();
  if (daemon && daemon.proc.exitCode === null && daemon.proc.signalCode === null) {
    const exit = await daemon.stop();
    assert.equal(exit.code, 0, 'exit ' + JSON.stringify(exit));
  }
});

// the highest vertex within 1 mm of the patch axis
function centre(pos, n) {
  let idx = -1;
  for (let i = 0; i < n; i++) {
    if (Math.hypot(pos[3 * i], pos[3 * i + 2]) < 1e-3 && (idx < 0 || pos[3 * i + 1] > pos[3 * idx + 1])) idx = i;
  }
  return idx;
}

test('an XPBD session settles and dents under the tool', async () => {
  const SOLVER_XPBD = 2;
  const sc = await peer.request('createSession', { builtin: 'stomach-patch', solver: SOLVER_XPBD }, 20000);
  assert.equal(sc.kind, 'sessionCreated', JSON.stringify(sc.body));
  const list = await peer.request('listSessions', {});
  const info = list.body.sessions.find((s) => s.sessionId === sc.body.sessionId);
  assert.equal(info.solver, SOLVER_XPBD);

  const j = await peer.request('joinSession', {
    sessionId: sc.body.sessionId, role: Role.CONTROLLER, toolId: 0, tool: { kind: 0, radius: 0.005 },
  });
  assert.equal(j.kind, 'joined', JSON.stringify(j.body));
  const s = peer.stream;
  await waitFor(() => s.vertexCount > 0 && peer.frames.length > 3, 20000, 'frames');
  await waitSettled(() => ({ simTime: s.simTime, positions: Array.from(s.positions) }));
  const n = s.vertexCount;
  const c = centre(s.positions, n);
  assert.ok(c >= 0);
  const rest = s.positions[3 * c + 1];
  assert.ok(Number.isFinite(rest) && rest > -0.01 && rest < 0.003, 'rest centre ' + rest);

  // lower the sphere to 3 mm below the resting surface in small steps
  let seq = 1;
  const t0 = s.simTime;
  for (let k = 0; k <= 40; k++) {
    const y = rest + 0.005 + 0.01 - (0.013 * Math.min(k, 30)) / 30;
    peer.send('toolPose', { toolId: j.body.toolId, seq: seq++, clientTimeUs: Date.now() * 1000,
      position: { x: 0, y, z: 0 }, orientation: { w: 1, x: 0, y: 0, z: 0 }, jaw: 1 });
    const target = t0 + 0.01 * (k + 1);
    await waitFor(() => s.simTime >= target, 20000, 'simulated time');
  }
  await waitFor(() => s.simTime >= t0 + 0.6, 30000, 'hold');
  const dent = rest - s.positions[3 * c + 1];
  assert.ok(dent > 0.0015 && dent < 0.006, 'dent ' + dent);
  const tool = s.tool(j.body.toolId);
  assert.ok(tool && tool.force && tool.force.y > 0, 'upward force ' + JSON.stringify(tool && tool.force));
});

test('an XPBD session can step once per 60 Hz frame with its own substeps; bad settings are refused', async () => {
  const SOLVER_XPBD = 2, SOLVER_MASS_SPRING = 1;
  const bad = [
    [{ solver: SOLVER_MASS_SPRING, dt: 1 / 60 }, /0\.01/],          // only XPBD steps past 10 ms
    [{ solver: SOLVER_XPBD, dt: 0.05 }, /1\/30/],                    // not even XPBD past 1/30 s
    [{ solver: SOLVER_MASS_SPRING, iterations: 4 }, /XPBD sessions only/],
    // a mass-spring session's substeps are a cap (inertia scaling), 1..1000
    [{ solver: SOLVER_MASS_SPRING, substeps: 1001 }, /mass-spring session must be in \[1, 1000\]/],
    [{ solver: SOLVER_XPBD, substeps: 1001 }, /substeps must be in \[1, 1000\]/],
    [{ solver: SOLVER_XPBD, iterations: 101 }, /iterations in \[1, 100\]/],
  ];
  for (const [spec, msg] of bad) {
    const r = await peer.request('createSession', { builtin: 'stomach-patch', ...spec }, 20000);
    assert.equal(r.kind, 'error', JSON.stringify(spec) + ' must be refused: ' + JSON.stringify(r.body));
    assert.match(r.body.message, msg);
  }
  const sc = await peer.request('createSession',
    { builtin: 'stomach-patch', solver: SOLVER_XPBD, dt: 1 / 60, substeps: 4, iterations: 4 }, 20000);
  assert.equal(sc.kind, 'sessionCreated', JSON.stringify(sc.body));
  const live = new WsPeer(loadProtocol(), `ws://127.0.0.1:${daemon.httpPort}/ws`);
  await live.open();
  try {
    await live.request('hello', { protocolVersion: 1, clientName: 'solver.test live', credentials: SERVER_KEY });
    const j = await live.request('joinSession', { sessionId: sc.body.sessionId, role: Role.OBSERVER });
    assert.equal(j.kind, 'joined', JSON.stringify(j.body));
    assert.ok(Math.abs(j.body.dt - 1 / 60) < 1e-6, 'dt ' + j.body.dt);  // float on the wire
    const s = live.stream;
    await waitFor(() => live.frames.length > 5, 20000, 'frames');
    // the session steps 1/60 s at a time: every frame's simulated time is a
    // whole number of steps (the stream's pacing may skip some of them)
    for (let k = 0; k < 5; k++) {
      const f0 = live.frames.length;
      await waitFor(() => live.frames.length > f0, 20000, 'a frame');
      const steps = s.simTime * 60;
      assert.ok(steps > 0 && Math.abs(steps - Math.round(steps)) < 1e-3, 'simulated time ' + s.simTime);
    }
    await waitSettled(() => ({ simTime: s.simTime, positions: Array.from(s.positions) }));
    const c = centre(s.positions, s.vertexCount);
    const rest = s.positions[3 * c + 1];
    // it stays in one piece and hangs below its rest plane; fewer substeps than
    // automatic make it softer than the 1 ms session (README, live sessions)
    assert.ok(Number.isFinite(rest) && rest > -0.05 && rest < 0.003, 'rest centre ' + rest);
  } finally {
    live.close();
  }
});
