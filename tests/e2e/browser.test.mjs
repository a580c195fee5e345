// browser.test.mjs: the web client in Debian's Chromium against a real
// daemon. The page must create a session, stream and render the tissue, and
// dent it when the left mouse button presses the tool; an observer page on
// the same session must see the dent too. Screenshots go to TS_ARTIFACTS
// (before.png, after.png, observer.png). Frames are decoded in the page's
// worker (src/decode_worker.js), or on the main thread with ?decode=main, to
// exactly the positions a node client (the same codec.js, which
// tests/integration/codec.test.mjs holds to the C decoder's bytes) decodes
// for the same frame. Run:
//   TISSUED_BIN=build/server/tissued TS_ARTIFACTS=/tmp/a node --test tests/e2e/browser.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { SERVER_KEY, startDaemon, artifactsDir, sleep, waitSettled, launchChromium, loadProtocol, waitFor,
  openCheckedPage, BROWSER_DAEMON_ARGS }
  from '../integration/daemon_proc.mjs';
import { WsPeer } from '../integration/ws_peer.mjs';
import { Role } from '../../client-web/src/protocol.js';
import { decodePng, changedFraction, meanColour, SHOT_SCALE } from './png.mjs';

const VIEWPORT = { width: 1280, height: 800 };
const WAIT_MS = 20000;
const HOLD_LIMIT_MS = 30000;

let daemon = null;
let browser = null;
let base = '';
const problems = [];   // console errors and page errors, from every page
let created = null;    // { sessionId, observerLink, observer (its page) } of the first test's session

before(async () => {
  daemon = await startDaemon({ name: 'browser-test-tissued', extraArgs: BROWSER_DAEMON_ARGS });
  base = `http://127.0.0.1:${daemon.httpPort}`;
  browser = await launchChromium(WAIT_MS);
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (daemon && daemon.proc.exitCode === null && daemon.proc.signalCode === null) await daemon.stop();
});

function openPage(url, label, viewport = VIEWPORT) {
  return openCheckedPage(browser, url, label, problems, { viewport, timeoutMs: WAIT_MS, deviceScaleFactor: SHOT_SCALE });
}

const hook = (page) => page.evaluate(() => {
  const t = window.tissued;
  return t && {
    state: t.state, sessionId: t.sessionId, role: t.role, frames: t.frames, vertexCount: t.vertexCount,
    toolId: t.toolId, lastError: t.lastError, errors: t.errors, webgl: t.webgl, force: t.force,
    forceMessages: t.forceMessages, observerLink: t.observerLink, decode: t.decode && { ...t.decode },
  };
});
const positions = (page) => page.evaluate(() => Array.from(window.tissued.positions));
// The tissue geometry's arrays (src/scene.js), kept in the page to compare
// later, with a copy of the positions and the animation frames drawn so far.
const markBuffers = (page) => page.evaluate(() => {
  const t = window.tissued;
  window.__marked = { ...t.tissueBuffers(), copy: Array.from(t.tissueBuffers().position), drawn: t.render().drawn };
});
// Whether they are the same objects now, how many new tissue frames were
// drawn since, and the largest change of a position in them.
const sinceMarked = (page) => page.evaluate(() => {
  const t = window.tissued, b = t.tissueBuffers(), m = window.__marked;
  let moved = 0;
  for (let i = 0; i < m.copy.length; i++) moved = Math.max(moved, Math.abs(b.position[i] - m.copy[i]));
  return { samePosition: b.position === m.position, sameNormal: b.normal === m.normal,
    drawn: t.render().drawn - m.drawn, moved };
});

function maxDeltaY(a, b) {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 1; i < a.length; i += 3) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test('the page creates a session, renders it, and the mouse dents the tissue', async () => {
  const dir = artifactsDir();
  // The address tissued prints carries the key after '#'; the page keeps it
  // and takes it out of the address bar.
  const page = await openPage(base + '/#key=' + SERVER_KEY, 'controller');
  await page.waitForFunction(() => window.tissued && window.tissued.vertexCount > 0 && window.tissued.frames > 5,
    null, { timeout: WAIT_MS });
  const h = await hook(page);
  assert.equal(h.state, 'connected');
  assert.ok(h.sessionId > 0, 'session ' + h.sessionId);
  assert.equal(h.role, 'controller');
  assert.ok(h.toolId >= 1, 'tool ' + h.toolId);
  assert.equal(h.webgl, true, 'WebGL works: ' + h.lastError);
  assert.equal(h.lastError, null);
  const url = new URL(page.url());
  assert.equal(url.searchParams.get('session'), String(h.sessionId), 'the session is in the URL: ' + page.url());
  assert.equal(url.searchParams.get('role'), 'controller');
  assert.ok(!page.url().includes(SERVER_KEY), 'the key is not left in the address: ' + page.url());
  const link = new URL(h.observerLink);
  assert.equal(link.searchParams.get('role'), 'observer');
  assert.match(link.searchParams.get('token') || '', /^[0-9a-f]{32}$/, 'the watch link has a token: ' + h.observerLink);
  assert.ok(!h.observerLink.includes(SERVER_KEY), 'the watch link does not carry the key');

  // An observer on the same session, from the shared URL.
  // A smaller window: two software-rendered pages share the machine's cores
  // with the daemon.
  // (its own browser context: no stored key, only the link's token)
  const observer = await openPage(h.observerLink, 'observer', { width: 640, height: 400 });
  await observer.waitForFunction(() => window.tissued && window.tissued.frames > 5, null, { timeout: WAIT_MS });
  const ho = await hook(observer);
  assert.equal(ho.role, 'observer');
  assert.equal(ho.sessionId, h.sessionId);
  assert.equal(ho.vertexCount, h.vertexCount);
  assert.equal(ho.toolId, 0);
  created = { sessionId: h.sessionId, observerLink: h.observerLink, observer };

  // Aim at the middle of the canvas (the camera looks at the patch centre).
  const cx = VIEWPORT.width / 2, cy = VIEWPORT.height / 2;
  await page.mouse.move(cx - 40, cy - 20);
  await page.mouse.move(cx, cy, { steps: 8 });
  await sleep(400);
  // The fresh patch sags under gravity for a while; let it come to rest so
  // the comparison below measures the tool's dent, not the sag.
  await waitSettled(() => page.evaluate(() => window.tissued.positions &&
    { simTime: window.tissued.simTime, positions: Array.from(window.tissued.positions) }));
  const before = await positions(page);
  const beforeObserver = await positions(observer);
  const shotBefore = await page.screenshot({ path: path.join(dir, 'before.png') });
  await markBuffers(page);
  await markBuffers(observer);

  // Hold for 1.5 s, and on a loaded machine (physics behind real time) until
  // at least 1 s of simulated time has passed too, bounded.
  const simTime = () => page.evaluate(() => window.tissued.simTime);
  const sim0 = await simTime();
  await page.mouse.down({ button: 'left' });
  const t0 = Date.now();
  for (let i = 0; Date.now() - t0 < 1500 || (await simTime()) - sim0 < 1.0; i++) {
    assert.ok(Date.now() - t0 < HOLD_LIMIT_MS, `simulated time advanced only ${(await simTime()) - sim0} s ` +
      `in ${HOLD_LIMIT_MS} ms of pressing`);
    await page.mouse.move(cx + 6 * Math.sin(i / 3), cy + 4 * Math.cos(i / 3));
    await sleep(50);
  }
  const heldMs = Date.now() - t0;
  const heldSim = (await simTime()) - sim0;
  const held = await hook(page);
  const afterPos = await positions(page);
  const shotAfter = await page.screenshot({ path: path.join(dir, 'after.png') });
  await sleep(200);
  const afterObserver = await positions(observer);
  await observer.screenshot({ path: path.join(dir, 'observer.png') });
  await page.mouse.up({ button: 'left' });
  // Frames update the tissue's GPU arrays in place: the same position and
  // normal arrays (no topology change here), rewritten by the new frames.
  for (const [p, label] of [[page, 'controller'], [observer, 'observer']]) {
    const m = await sinceMarked(p);
    assert.ok(m.samePosition && m.sameNormal, `${label}: the same tissue arrays: ${JSON.stringify(m)}`);
    assert.ok(m.drawn >= 2 && m.moved > 0.001, `${label}: new frames were drawn into them: ${JSON.stringify(m)}`);
  }

  const dy = maxDeltaY(before, afterPos);
  assert.ok(dy > 0.001, `max |dy| over vertices ${(dy * 1000).toFixed(3)} mm`);
  assert.ok(dy < 0.03, `max |dy| ${(dy * 1000).toFixed(3)} mm is plausible`);
  const dyObserver = maxDeltaY(beforeObserver, afterObserver);
  assert.ok(dyObserver > 0.001, `the observer sees the dent: ${(dyObserver * 1000).toFixed(3)} mm`);
  assert.ok(held.force && Math.hypot(held.force.x, held.force.y, held.force.z) > 0,
    'a contact force is reported: ' + JSON.stringify(held.force));
  assert.ok(held.forceMessages > 0, 'the force comes in ToolForce messages');

  // Pixels: the patch is drawn (pinkish mucosa in the middle), and the
  // middle of the view changes while the tool presses.
  const a = decodePng(shotBefore);
  const b = decodePng(shotAfter);
  assert.equal(a.width, VIEWPORT.width * SHOT_SCALE);
  const middle = { x: cx - 160, y: cy - 110, w: 320, h: 220 };
  const [r, g, bl] = meanColour(a, { x: cx - 60, y: cy + 40, w: 120, h: 40 });
  assert.ok(r > g + 15 && r > bl + 15, `the mucosa is drawn pinkish: mean rgb ${[r, g, bl].map(Math.round)}`);
  const changed = changedFraction(a, b, middle);
  assert.ok(changed > 0.01, `the view changes under the tool: ${(changed * 100).toFixed(2)} % of the middle pixels`);
  assert.ok(!shotBefore.equals(shotAfter), 'the screenshots differ');

  const hEnd = await hook(page);
  assert.deepEqual(hEnd.errors, [], 'errors shown by the controller page');
  assert.deepEqual((await hook(observer)).errors, [], 'errors shown by the observer page');
  assert.deepEqual(problems, [], 'console errors');
  fs.writeFileSync(path.join(dir, 'browser-summary.json'), JSON.stringify({
    sessionId: h.sessionId, vertexCount: h.vertexCount, maxDyMm: dy * 1000,
    observerMaxDyMm: dyObserver * 1000, changedMiddle: changed, force: held.force, heldMs, heldSim,
  }, null, 2));
  // The controller page is done (the tests below watch through the
  // observer's link): it closes, so that it does not draw beside them in
  // the one software-rendering GPU process.
  await page.context().close();
});

// The page's frame seq and positions, then the node client's positions for
// that seq (kept per seq as they arrive), compared exactly: both are the
// same int32 grid positions times the quantum, rounded once to float32.
async function samePositionsAsNode(page, peerBySeq, label) {
  let compared = 0;
  for (let i = 0; i < 200 && compared < 3; i++) {
    const s = await page.evaluate(() => ({ seq: window.tissued.seq, positions: Array.from(window.tissued.positions) }));
    const newest = () => Math.max(0, ...peerBySeq.keys());
    // a frame from before the node client joined, or already forgotten: skip
    if (!peerBySeq.has(s.seq) && newest() >= s.seq) continue;
    const want = await waitFor(() => peerBySeq.get(s.seq) || (newest() > s.seq ? 'gone' : null), 5000,
      `${label}: frame ${s.seq} at the node client`);
    if (want === 'gone') continue;
    assert.equal(s.positions.length, want.length, `${label}: vertex count`);
    let bad = -1;
    for (let k = 0; k < want.length && bad < 0; k++) if (s.positions[k] !== want[k]) bad = k;
    assert.equal(bad, -1, `${label}: frame ${s.seq} value ${bad}: page ${s.positions[bad]}, node ${want[bad]}`);
    compared++;
    await sleep(150);
  }
  assert.equal(compared, 3, `${label}: frames compared with the node client`);
}

test('frames are decoded in a worker (or, asked to, on the main thread) to the positions node decodes', async () => {
  assert.ok(created, 'the first test created a session');
  const link = new URL(created.observerLink);
  const peer = await new WsPeer(loadProtocol(), `ws://127.0.0.1:${daemon.httpPort}/ws`).open();
  const peerBySeq = new Map();
  peer.onFrame = (stream) => {
    peerBySeq.set(stream.seq, Float32Array.from(stream.positions));
    if (peerBySeq.size > 600) peerBySeq.delete(peerBySeq.keys().next().value);
  };
  try {
    const hello = await peer.request('hello', { protocolVersion: 1, clientName: 'browser.test' });
    assert.equal(hello.kind, 'helloReply');
    const j = await peer.request('joinSession', { sessionId: created.sessionId, role: Role.OBSERVER,
      token: link.searchParams.get('token') }, 10000);
    assert.equal(j.kind, 'joined', JSON.stringify(j.body));

    // the first test's observer page decodes in its worker
    // (frames that arrive while the worker loads are decoded on the main
    // thread; then the worker takes the chain over, and every frame after)
    const inWorker = created.observer;
    await inWorker.waitForFunction(() => window.tissued.decode?.where === 'worker', null, { timeout: WAIT_MS });
    const dw0 = (await hook(inWorker)).decode;
    await samePositionsAsNode(inWorker, peerBySeq, 'worker');
    const dw = (await hook(inWorker)).decode;
    assert.equal(dw.where, 'worker');
    assert.ok(dw.workerFrames > dw0.workerFrames && dw.mainFrames === dw0.mainFrames,
      'the frames compared were decoded in the worker: ' + JSON.stringify([dw0, dw]));
    assert.ok(dw.workerMs > 0, 'the worker reports its decode time');
    await inWorker.context().close();

    const onMain = await openPage(created.observerLink + '&decode=main', 'main-thread decoding',
      { width: 480, height: 300 });
    await onMain.waitForFunction(() => window.tissued && window.tissued.frames > 10, null, { timeout: WAIT_MS });
    await samePositionsAsNode(onMain, peerBySeq, 'main thread');
    const dm = (await hook(onMain)).decode;
    assert.equal(dm.where, 'main');
    assert.equal(dm.workerFrames, 0);
    assert.ok(dm.mainFrames > 10, JSON.stringify(dm));
    await onMain.context().close();
    assert.equal(peer.frameError, null, 'the node client decoded every frame');
    assert.deepEqual(problems, [], 'console errors');
  } finally {
    peer.close();
  }
});

test('without the server key the page creates no session and says why', async () => {
  const page = await openPage(base + '/', 'keyless');
  await page.waitForFunction(() => window.tissued && window.tissued.errors.length > 0, null, { timeout: WAIT_MS });
  const h = await hook(page);
  assert.match(h.errors.join(' | '), /server key/, 'the page explains what is missing');
  assert.equal(h.sessionId, 0, 'no session was created');
  assert.equal(h.frames, 0);
  await page.context().close();
});

// The page's modules are some 2.5 MB, three.js most of it: the daemon sends
// them gzip-compressed (server/net/http_gzip.h: compressed in the background
// after a first request, which the earlier tests' pages made; asked here
// too until it is), and a reload costs a 304 a file.
test('the page\'s scripts come gzip-compressed, and a reload revalidates them', async () => {
  for (const t0 = Date.now(); ;) {
    const r = await fetch(base + '/vendor/three/build/three.core.js', { headers: { 'Accept-Encoding': 'gzip' } });
    await r.arrayBuffer();
    if (r.headers.get('content-encoding') === 'gzip') break;
    assert.ok(Date.now() - t0 < WAIT_MS, 'three.core.js compressed within the wait');
    await sleep(100);
  }
  const context = await browser.newContext({ viewport: VIEWPORT });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', (e) => problems.push(`gzip page error: ${e.message}`));
  const core = (r) => r.url().includes('/vendor/three/build/three.core.js');
  const first = page.waitForResponse(core, { timeout: WAIT_MS });
  await page.goto(base + '/', { waitUntil: 'load', timeout: WAIT_MS });
  await page.waitForFunction(() => window.tissued !== undefined, null, { timeout: WAIT_MS });
  const r1 = await first;
  const sizes = await page.evaluate(() => performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/vendor/three/build/three.core.js'))
    .map((e) => ({ encoded: e.encodedBodySize, decoded: e.decodedBodySize })));
  assert.deepEqual({ status: r1.status(), encoding: (await r1.allHeaders())['content-encoding'] },
    { status: 200, encoding: 'gzip' }, 'three.core.js on a fresh load');
  assert.equal(sizes.length, 1);
  assert.ok(sizes[0].encoded * 3 < sizes[0].decoded, `compressed ${JSON.stringify(sizes[0])}`);
  const second = page.waitForResponse(core, { timeout: WAIT_MS });
  await page.reload({ waitUntil: 'load', timeout: WAIT_MS });
  await page.waitForFunction(() => window.tissued !== undefined, null, { timeout: WAIT_MS });
  assert.equal((await second).status(), 304, 'three.core.js on a reload');
  await context.close();
  // the daemon counts them (/metrics)
  const metrics = await (await fetch(base + '/metrics')).text();
  const metric = (name) => Number((metrics.match(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\d+)$`, 'm')) ?? [])[1]);
  assert.ok(metric('tissued_http_files_total{response="gzip"}') >= 1, metrics);
  assert.ok(metric('tissued_http_files_total{response="not_modified"}') >= 1, metrics);
  const gzBytes = metric('tissued_http_file_bytes_total{encoding="gzip"}');
  assert.ok(gzBytes >= sizes[0].encoded, `gzip bytes ${gzBytes}`);
  assert.deepEqual(problems, [], 'console errors');
});

test('SIGTERM stops the daemon with exit code 0', async () => {
  await browser.close();
  browser = null;
  const s = await daemon.stop();
  assert.equal(s.timedOut, undefined, 'the daemon exited within the grace period');
  assert.deepEqual({ code: s.code, signal: s.signal }, { code: 0, signal: null }, daemon.log().slice(-2000));
});
