// proxy.test.mjs: several daemons behind HAProxy (deploy/haproxy.cfg), on
// loopback, over TLS. Two daemons and the proxy start on ephemeral ports with
// a throwaway self-signed certificate; through the proxy (wss://) sessions
// with distinct names are created on /ws?session=NAME and each is joined by a
// second connection on the same URL. Then direct connections to each daemon
// (ListSessions) show that every session lives on exactly one daemon, that
// both daemons host some, and that each joiner reached the daemon hosting its
// session: it joined that session's id, its frames carry that id and that
// session's vertex count and time step, and the daemon counts it as the
// session's one client. Plain HTTP through the proxy: /healthz and the web
// page answered by a daemon, /metrics refused.
// Run: TISSUED_BIN=build/server/tissued node --test tests/integration/proxy.test.mjs
// (needs haproxy and openssl: deploy/install-deps.sh --test).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { SERVER_KEY, startDaemon, loadProtocol, waitFor } from './daemon_proc.mjs';
import { WsPeer } from './ws_peer.mjs';
import { makeCertificate, startHaproxy, httpsGet, TlsWsPeer } from './proxy_proc.mjs';
import { Role, toNumber } from '../../client-web/src/protocol.js';

// SERVER_KEY (every test daemon's --server-key) is sent in Hello.credentials
// on every connection, so creating and joining are allowed.
// Session names: the routing keys. With two daemons on the hash ring this set
// lands on both (checked below), so the test shows real spreading.
const NAMES = ['theatre-a', 'theatre-b', 'ward-3', 'ward-4', 'lab-5', 'lab-6'];
const PATCH_RESOLUTION = 9;  // a light patch: 81 nodes a sheet, six sessions on two cores

let protocol = null;
let tmp = null;
let cert = null;
const daemons = [];
let proxy = null;
const peers = [];

function hello(peer) {
  return peer.request('hello', { protocolVersion: 1, clientName: 'proxy.test', credentials: SERVER_KEY });
}

async function listOn(peer) {
  const r = await peer.request('listSessions', {});
  assert.equal(r.kind, 'sessionList', 'reply to ListSessions: ' + JSON.stringify(r.body));
  return (r.body.sessions || []).map((s) => ({
    id: s.sessionId, name: s.name, clients: s.clients || 0, vertexCount: s.vertexCount,
  }));
}

before(async () => {
  protocol = loadProtocol();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tissued-proxy-'));
  cert = makeCertificate(tmp);
  for (let i = 0; i < 2; i++) {
    daemons.push(await startDaemon({
      name: 'proxy-test-tissued-' + (i + 1),
      extraArgs: ['--patch-resolution', String(PATCH_RESOLUTION), '--physics-threads', '1'],
    }));
  }
  proxy = await startHaproxy({ daemons, cert, name: 'proxy-test-haproxy' });
});

after(async () => {
  for (const p of peers) p.close();
  if (proxy) await proxy.stop();
  for (const d of daemons) {
    if (d.proc.exitCode === null && d.proc.signalCode === null) await d.stop();
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test('plain HTTP through the proxy: /healthz and the page from a daemon, /metrics refused', async () => {
  const base = `https://127.0.0.1:${proxy.port}`;
  const h = await httpsGet(base + '/healthz', cert.certPem);
  assert.equal(h.status, 200, 'GET /healthz: ' + h.body);
  assert.equal(JSON.parse(h.body).status, 'ok');
  assert.match(String(h.headers['set-cookie']), /TISSUED_NODE=tissued-[12]/, 'sticky cookie');

  const page = await httpsGet(base + '/', cert.certPem);
  assert.equal(page.status, 200);
  assert.match(page.body, /<html/i);

  const m = await httpsGet(base + '/metrics', cert.certPem);
  assert.equal(m.status, 403, '/metrics must not be reachable through the proxy');

  // the proxy trusts nothing but TLS: a client without the certificate fails
  await assert.rejects(httpsGet(base + '/healthz', undefined), /self[- ]signed|certificate/i);
});

test('every connection of a session reaches the daemon that hosts it', async () => {
  const url = (name) => `wss://127.0.0.1:${proxy.port}/ws?session=${encodeURIComponent(name)}`;
  const created = new Map();  // name -> { id, vertexCount, dt }

  // Create each session through the proxy, on a connection naming it.
  for (let i = 0; i < NAMES.length; i++) {
    const name = NAMES[i];
    const creator = await new TlsWsPeer(protocol, url(name), cert.certPem).open();
    peers.push(creator);
    assert.equal((await hello(creator)).kind, 'helloReply');
    const layers = Array.from({ length: 1 + (i % 3) }, (_, k) => ({ name: 'layer' + k, thickness: 0.002 }));
    const dt = 0.001 - 0.0001 * i;  // distinct per session: Joined.dt tells them apart
    const r = await creator.request('createSession', { name, builtin: 'stomach-patch', layers, dt });
    assert.equal(r.kind, 'sessionCreated', name + ': reply to CreateSession: ' + JSON.stringify(r.body));
    assert.equal(r.body.name, name);
    assert.equal(r.body.vertexCount, PATCH_RESOLUTION * PATCH_RESOLUTION * (layers.length + 1),
      name + ': one sheet of nodes per layer boundary');
    created.set(name, { id: r.body.sessionId, vertexCount: r.body.vertexCount, dt });
    // The name is the routing key: a second session of that name is refused
    // by the daemon the name leads to.
    const again = await creator.request('createSession', { name, builtin: 'stomach-patch' });
    assert.equal(again.kind, 'error', name + ': a second session of the same name');
    assert.equal(again.body.name, 'TS_EEXISTS');
  }

  // Join each through the proxy on a second connection with the same URL:
  // find the id by name on whichever daemon the proxy chose, join, get frames.
  // In reverse order, so that a proxy alternating between the daemons
  // (round robin) would send every joiner to the other daemon and fail here.
  const joiners = new Map();  // name -> { listed, frameIds, peer }
  for (const name of [...NAMES].reverse()) {
    const want = created.get(name);
    const peer = new TlsWsPeer(protocol, url(name), cert.certPem);
    const frameIds = new Set();
    peer.onFrame = (stream, f) => frameIds.add(toNumber(f.sessionId));
    await peer.open();
    peers.push(peer);
    assert.equal((await hello(peer)).kind, 'helloReply');
    const listed = await listOn(peer);
    const mine = listed.filter((s) => s.name === name);
    assert.equal(mine.length, 1, `${name}: the joiner's daemon lists it once: ${JSON.stringify(listed)}`);
    assert.equal(mine[0].id, want.id, `${name}: same session id as at creation`);
    const j = await peer.request('joinSession', { sessionId: mine[0].id, role: Role.OBSERVER });
    assert.equal(j.kind, 'joined', name + ': reply to JoinSession: ' + JSON.stringify(j.body));
    assert.equal(j.body.sessionId, want.id);
    assert.equal(j.body.vertexCount, want.vertexCount, name + ': vertex count of the session created');
    // float on the wire: 1e-9 s is far below the 1e-4 s between sessions' steps
    assert.ok(Math.abs(j.body.dt - want.dt) < 1e-9, `${name}: dt ${j.body.dt}, created with ${want.dt}`);
    joiners.set(name, { listed, peer, frameIds });
  }
  for (const name of NAMES) {
    const { peer, frameIds } = joiners.get(name);
    const want = created.get(name);
    await waitFor(() => peer.stream.vertexCount > 0 && peer.frames.length >= 3, 15000, name + ': three frames');
    assert.equal(peer.frameError, null, name + ': frames decode');
    assert.equal(peer.stream.vertexCount, want.vertexCount, name + ': frames carry the vertex count');
    assert.deepEqual([...frameIds], [want.id], name + ': frames of this session only');
  }

  // Ask each daemon directly (no proxy; the query string is accepted there too).
  const direct = [];
  for (const d of daemons) {
    const p = await new WsPeer(protocol, `ws://127.0.0.1:${d.httpPort}/ws?session=direct-check`).open();
    peers.push(p);
    assert.equal((await hello(p)).kind, 'helloReply');
    direct.push(await listOn(p));
  }
  const where = new Map();
  for (const name of NAMES) {
    const hosts = direct.map((l, k) => (l.some((s) => s.name === name) ? k : -1)).filter((k) => k >= 0);
    assert.equal(hosts.length, 1, `${name} lives on exactly one daemon (found on ${JSON.stringify(hosts)})`);
    where.set(name, hosts[0]);
    const s = direct[hosts[0]].find((x) => x.name === name);
    const want = created.get(name);
    assert.equal(s.id, want.id);
    assert.equal(s.vertexCount, want.vertexCount);
    assert.equal(s.clients, 1, `${name}: the hosting daemon counts the joiner as its client`);
  }
  const counts = [0, 1].map((k) => NAMES.filter((n) => where.get(n) === k).length);
  assert.ok(counts[0] > 0 && counts[1] > 0, 'both daemons host sessions: ' + JSON.stringify(counts));
  assert.equal(direct[0].length + direct[1].length, NAMES.length, 'no session elsewhere');

  // The joiner's ListSessions came from the hosting daemon: same names and ids.
  const key = (l) => l.map((s) => s.name + '#' + s.id).sort().join(',');
  for (const name of NAMES) {
    const { listed } = joiners.get(name);
    const host = direct[where.get(name)];
    assert.equal(key(listed), key(host), `${name}: the joiner saw the hosting daemon's sessions`);
  }
  console.log(JSON.stringify({ sessions_per_daemon: counts, placement: Object.fromEntries(where) }));
});

test('the daemons stop cleanly behind the proxy', async () => {
  for (const p of peers) p.close();
  for (const d of daemons) {
    const s = await d.stop();
    assert.equal(s.code, 0, 'exit status: ' + JSON.stringify(s) + '\n' + d.log().slice(-2000));
  }
});
