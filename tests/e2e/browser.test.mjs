// browser.test.mjs: the web client in Debian's Chromium against a real
// daemon. The page must create a session, stream and render the tissue, and
// dent it when the left mouse button presses the tool; an observer page on
// the same session must see the dent too. Screenshots go to TS_ARTIFACTS
// (before.png, after.png, observer.png). Run:
//   TISSUED_BIN=build/server/tissued TS_ARTIFACTS=/tmp/a node --test tests/e2e/browser.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { SERVER_KEY, startDaemon, artifactsDir, sleep, waitSettled, launchChromium } from '../integration/daemon_proc.mjs';
import { decodePng, changedFraction, meanColour } from './png.mjs';

const VIEWPORT = { width: 1280, height: 800 };
const WAIT_MS = 20000;
const HOLD_LIMIT_MS = 30000;

let daemon = null;
let browser = null;
let base = '';
const problems = [];   // console errors and page errors, from every page

before(async () => {
  daemon = await startDaemon({ name: 'browser-test-tissued' });
  base = `http://127.0.0.1:${daemon.httpPort}`;
  browser = await launchChromium(WAIT_MS);
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (daemon && daemon.proc.exitCode === null && daemon.proc.signalCode === null) await daemon.stop();
});

async function openPage(url, label, viewport = VIEWPORT) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`${label} console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`${label} page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`${label} request failed: ${r.url()} ${r.failure()?.errorText}`));
  await page.goto(url, { waitUntil: 'load', timeout: WAIT_MS });
  return page;
}

const hook = (page) => page.evaluate(() => {
  const t = window.tissued;
  return t && {
    state: t.state, sessionId: t.sessionId, role: t.role, frames: t.frames, vertexCount: t.vertexCount,
    toolId: t.toolId, lastError: t.lastError, errors: t.errors, webgl: t.webgl, force: t.force,
    forceMessages: t.forceMessages, observerLink: t.observerLink,
  };
});
const positions = (page) => page.evaluate(() => Array.from(window.tissued.positions));

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
  assert.equal(a.width, VIEWPORT.width);
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

test('SIGTERM stops the daemon with exit code 0', async () => {
  await browser.close();
  browser = null;
  const s = await daemon.stop();
  assert.equal(s.timedOut, undefined, 'the daemon exited within the grace period');
  assert.deepEqual({ code: s.code, signal: s.signal }, { code: 0, signal: null }, daemon.log().slice(-2000));
});
