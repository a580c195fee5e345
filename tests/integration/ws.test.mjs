// ws.test.mjs: the daemon over WebSocket at /ws, end to end with the web
// client's own protocol and frame decoding modules: Hello, CreateSession,
// JoinSession as controller, a keyframe and a chain of deltas decoded with
// client-web/src/codec.js, a pressing tool pose that dents the tissue, a NaN
// pose and a wrong protocol version answered with Errors, and a clean exit
// on SIGTERM; a daemon without the page's files (--web-root, --proto-file)
// warns, does not print a page to open, and still serves the protocol.
// Run: TISSUED_BIN=build/server/tissued node --test tests/integration/ws.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { SERVER_KEY, startDaemon, loadProtocol, waitFor, waitSettled, sleep } from './daemon_proc.mjs';
import { WsPeer } from './ws_peer.mjs';
import { Role, toNumber } from '../../client-web/src/protocol.js';

const HALF_EXTENT = 0.041;  // |x|, |z| bound of the 80 mm patch, m
const Y_MIN = -0.02;
const Y_MAX = 0.01;
const RADIUS = 0.005;       // tool sphere radius asked for, m

let daemon = null;
let protocol = null;
let peer = null;            // the controller connection, shared by the tests in order
let created = null;         // SessionCreated body
let joined = null;          // Joined body

before(async () => {
  protocol = loadProtocol();
  daemon = await startDaemon({ name: 'ws-test-tissued' });
});

after(async () => {
  if (peer) peer.close();
  if (daemon && daemon.proc.exitCode === null && daemon.proc.signalCode === null) await daemon.stop();
});

// The top-surface vertex nearest the patch centre: the vertex with the
// smallest horizontal distance to (0, 0), the highest of that column.
function centreTopVertex(pos, n) {
  let best = Infinity;
  for (let i = 0; i < n; i++) best = Math.min(best, Math.hypot(pos[3 * i], pos[3 * i + 2]));
  let idx = -1;
  for (let i = 0; i < n; i++) {
    const d = Math.hypot(pos[3 * i], pos[3 * i + 2]);
    if (d <= best + 1e-4 && (idx < 0 || pos[3 * i + 1] > pos[3 * idx + 1])) idx = i;
  }
  return idx;
}

test('hello, create a session, join as controller', async () => {
  peer = await new WsPeer(protocol, `ws://127.0.0.1:${daemon.httpPort}/ws`).open();

  const hello = await peer.request('hello', { protocolVersion: 1, clientName: 'ws.test', credentials: SERVER_KEY });
  assert.equal(hello.kind, 'helloReply', 'reply to Hello: ' + JSON.stringify(hello.body));
  assert.equal(hello.body.protocolVersion, 1);

  const sc = await peer.request('createSession', { builtin: 'stomach-patch' });
  assert.equal(sc.kind, 'sessionCreated', 'reply to CreateSession: ' + JSON.stringify(sc.body));
  created = sc.body;
  assert.ok(created.sessionId > 0, 'session id ' + created.sessionId);
  assert.ok(created.vertexCount > 100, 'vertex count ' + created.vertexCount);
  assert.ok(created.triangleCount > 100, 'triangle count ' + created.triangleCount);

  const j = await peer.request('joinSession', {
    sessionId: created.sessionId, role: Role.CONTROLLER, toolId: 0,
    tool: { kind: 0, radius: RADIUS }, frameRate: 0,
  });
  assert.equal(j.kind, 'joined', 'reply to JoinSession: ' + JSON.stringify(j.body));
  joined = j.body;
  assert.equal(joined.sessionId, created.sessionId);
  assert.equal(joined.role, Role.CONTROLLER);
  assert.ok(joined.toolId >= 1, 'tool id ' + joined.toolId);
  assert.equal(joined.vertexCount, created.vertexCount);
  assert.ok(joined.dt > 0 && joined.dt <= 0.01, 'dt ' + joined.dt);
  assert.ok(joined.frameRate > 0, 'frame rate ' + joined.frameRate);
  // Park the tool well above the tissue until the press test moves it.
  peer.send('toolPose', {
    toolId: joined.toolId, seq: 1, clientTimeUs: Date.now() * 1000,
    position: { x: 0, y: 0.03, z: 0 }, orientation: { w: 1, x: 0, y: 0, z: 0 }, jaw: 1,
  });
});

test('a keyframe with the topology, then at least 10 deltas, decode to the patch', async () => {
  assert.ok(joined, 'joined');
  await waitFor(() => peer.frameError || peer.frames.length >= 11, 5000, 'a keyframe and 10 deltas');
  if (peer.frameError) throw peer.frameError;

  const [first, ...rest] = peer.frames;
  assert.equal(first.keyframe, true, 'the first frame is a keyframe');
  const topo = first.topology;
  assert.ok(topo, 'the keyframe carries the topology');
  assert.equal(topo.vertexCount, created.vertexCount);
  assert.equal(peer.stream.vertexCount, created.vertexCount);
  assert.equal(topo.triangles.length, 3 * created.triangleCount);
  const layerSum = topo.layerTriangleCounts.reduce((a, b) => a + b, 0);
  assert.equal(layerSum, created.triangleCount, 'layer triangle counts add up');
  for (const name of ['mucosa', 'submucosa', 'muscularis']) {
    assert.ok(topo.layerNames.includes(name), 'layer ' + name + ' in ' + topo.layerNames);
  }
  assert.equal(rest.length >= 10, true);
  let prev = first.seq;
  for (const f of rest.slice(0, 10)) {
    assert.equal(f.keyframe, false, 'frame ' + f.seq + ' is a delta');
    assert.equal(f.baselineSeq, prev, 'delta ' + f.seq + ' applies to the frame before it');
    assert.ok(f.seq > prev, 'seq increases');
    prev = f.seq;
  }

  const n = peer.stream.vertexCount;
  const pos = peer.stream.positions;
  let minY = Infinity, maxY = -Infinity, maxXZ = 0;
  for (let i = 0; i < n; i++) {
    const x = pos[3 * i], y = pos[3 * i + 1], z = pos[3 * i + 2];
    assert.ok(Number.isFinite(x) && Number.isFinite(y) && Number.isFinite(z), 'vertex ' + i + ' finite');
    maxXZ = Math.max(maxXZ, Math.abs(x), Math.abs(z));
    minY = Math.min(minY, y);
    maxY = Math.max(maxY, y);
  }
  assert.ok(maxXZ <= HALF_EXTENT, 'max |x|,|z| ' + maxXZ);
  assert.ok(maxXZ > 0.035, 'the patch spans about 80 mm, max |x|,|z| ' + maxXZ);
  assert.ok(minY > Y_MIN && maxY < Y_MAX, `y range ${minY} .. ${maxY}`);
  assert.ok(maxY - minY > 0.003, 'the three layers give some thickness: ' + (maxY - minY));
});

test('a pose pressing the centre moves the top centre vertex down by more than 1 mm', async (t) => {
  // Let the gravity sag finish first, so that only the tool can move the vertex.
  await waitSettled(() => {
    if (peer.frameError) throw peer.frameError;
    return { simTime: peer.stream.simTime, positions: peer.stream.positions };
  });
  const n = peer.stream.vertexCount;
  const idx = centreTopVertex(peer.stream.positions, n);
  assert.ok(idx >= 0);
  const y0 = peer.stream.positions[3 * idx + 1];
  const x0 = peer.stream.positions[3 * idx];
  const z0 = peer.stream.positions[3 * idx + 2];
  assert.ok(Math.hypot(x0, z0) < 0.005, `centre vertex at (${x0}, ${z0})`);

  // Approach from above and descend at 30 mm/s (0.5 mm every 16 ms) to a
  // centre 6 mm below surface + radius, as a hand would.
  let seq = 1;
  const start = y0 + RADIUS + 0.002;
  const goal = y0 + RADIUS - 0.006;
  const pose = (y) => peer.send('toolPose', {
    toolId: joined.toolId, seq: ++seq, clientTimeUs: Date.now() * 1000,
    position: { x: 0, y, z: 0 }, orientation: { w: 1, x: 0, y: 0, z: 0 }, jaw: 1,
  });
  for (let y = start; y > goal; y -= 0.0005) {
    pose(y);
    await sleep(16);
  }
  pose(goal);

  let lowest = y0;
  try {
    await waitFor(() => {
      if (peer.frameError) throw peer.frameError;
      lowest = Math.min(lowest, peer.stream.positions[3 * idx + 1]);
      return y0 - lowest > 0.001;
    }, 10000, 'the centre vertex to move down by 1 mm');
  } catch (err) {
    err.message += `; it moved ${((y0 - lowest) * 1000).toFixed(3)} mm, tool state ` +
      JSON.stringify(peer.stream.tool(joined.toolId));
    throw err;
  }
  const dent = y0 - lowest;
  assert.ok(dent > 0.001, 'dent ' + dent);
  // the sphere's lowest point is 6 mm below the rest surface: the vertex under
  // it cannot go deeper than that and the contact's allowance (0.5 mm, with room)
  assert.ok(dent < 0.0065, 'dent ' + dent + ' deeper than the tool reaches');

  // The frames report our tool where we put it, with the last pose applied
  // and a reaction force pushing it up.
  await waitFor(() => {
    const t = peer.stream.tool(joined.toolId);
    return t && toNumber(t.lastPoseSeq) === seq;
  }, 10000, 'a frame that applied pose ' + seq);
  const tool = peer.stream.tool(joined.toolId);
  t.diagnostic(`dent ${(dent * 1000).toFixed(2)} mm, force ${JSON.stringify(tool.force)}`);
  assert.ok(Math.abs(tool.position.y - goal) < 1e-4, `tool y ${tool.position.y} vs ${goal}`);
  assert.ok(Math.abs(tool.radius - RADIUS) < 1e-6, 'tool radius ' + tool.radius);
  assert.ok(tool.force && tool.force.y > 0, 'upward reaction force: ' + JSON.stringify(tool.force));

  // Lift the tool again so later tests start from rest.
  pose(y0 + 0.02);
});

test('a NaN pose is answered with TS_ENAN', async () => {
  const id = peer.send('toolPose', {
    toolId: joined.toolId, seq: 100000, clientTimeUs: Date.now() * 1000,
    position: { x: NaN, y: 0.01, z: 0 }, orientation: { w: 1, x: 0, y: 0, z: 0 }, jaw: 1,
  });
  const e = await peer.take((m) => m.kind === 'error', 3000, 'an Error for the NaN pose');
  assert.equal(e.body.name, 'TS_ENAN', JSON.stringify(e.body));
  assert.equal(e.body.code, 4);
  assert.equal(e.requestId, id, 'the Error echoes the request id');
  // The connection stays usable after one bad message.
  const pong = await peer.request('ping', { clientTimeUs: 123456789 });
  assert.equal(pong.kind, 'pong');
  assert.equal(toNumber(pong.body.clientTimeUs), 123456789);
});

test('ListSessions includes the session', async () => {
  const r = await peer.request('listSessions', {});
  assert.equal(r.kind, 'sessionList', JSON.stringify(r.body));
  const s = (r.body.sessions || []).find((x) => x.sessionId === created.sessionId);
  assert.ok(s, 'session ' + created.sessionId + ' listed');
  assert.equal(s.vertexCount, created.vertexCount);
});

test('a wrong protocol version is refused with TS_EVERSION and the connection closed', async () => {
  const other = await new WsPeer(protocol, `ws://127.0.0.1:${daemon.httpPort}/ws`).open();
  try {
    const r = await other.request('hello', { protocolVersion: 99, clientName: 'ws.test-old' });
    assert.equal(r.kind, 'error', JSON.stringify(r.body));
    assert.equal(r.body.name, 'TS_EVERSION');
    assert.equal(r.body.code, 7);
    await other.waitClosed(5000);
  } finally {
    other.close();
  }
  // The controller's stream is unaffected.
  const before = peer.frames.length;
  await waitFor(() => peer.frames.length > before + 3, 3000, 'frames to keep coming');
  if (peer.frameError) throw peer.frameError;
});

test('SIGTERM stops the daemon with exit code 0, closing the connected client', async () => {
  const s = await daemon.stop();
  await peer.waitClosed(2000);
  assert.notEqual(peer.closed.code, 1006, 'the client got a close frame: ' + JSON.stringify(peer.closed));
  assert.equal(s.timedOut, undefined, 'the daemon exited within the grace period');
  assert.deepEqual({ code: s.code, signal: s.signal }, { code: 0, signal: null }, daemon.log().slice(-2000));
});

test('without the page\'s files the daemon warns, does not offer the page, and still serves /ws', async () => {
  const bare = await startDaemon({
    name: 'ws-test-bare-tissued',
    extraArgs: ['--web-root', '/nonexistent-web-root', '--proto-file', '/nonexistent.proto'],
  });
  try {
    await waitFor(() => /listening: TCP protocol on port/.test(bare.log()), 10000, 'the listening line');
    const log = bare.log();
    assert.match(log, /warning: no web client in --web-root \/nonexistent-web-root/);
    assert.match(log, /warning: --proto-file \/nonexistent.proto cannot be read/);
    assert.doesNotMatch(log, /in a browser/, 'no page offered:\n' + log);
    const other = await new WsPeer(protocol, `ws://127.0.0.1:${bare.httpPort}/ws`).open();
    try {
      const r = await other.request('hello', { protocolVersion: 1, clientName: 'ws.test-bare', credentials: SERVER_KEY });
      assert.equal(r.kind, 'helloReply', JSON.stringify(r.body));
    } finally {
      other.close();
    }
  } finally {
    const s = await bare.stop();
    assert.deepEqual({ code: s.code, signal: s.signal }, { code: 0, signal: null }, bare.log().slice(-2000));
  }
});
