// firefox.test.mjs: the web client in Debian's Firefox ESR against a real
// daemon (issue 9: "works in a current Chromium and Firefox"). The page
// creates a session, a second page watches it through the shared link, the
// first page's mouse presses the tool into the tissue and the watcher's mesh
// changes; both pages render with WebGL, decode their frames in the worker,
// and log no console errors. Screenshots go to TS_ARTIFACTS (firefox-*.png).
//
// Firefox is driven by playwright-core over WebDriver BiDi; headless it finds
// no GL driver here, so it runs headed on a virtual display. Run:
//   TISSUED_BIN=build/server/tissued TS_ARTIFACTS=/tmp/a xvfb-run -a node --test tests/e2e/firefox.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { SERVER_KEY, startDaemon, artifactsDir, sleep, launchFirefox, openCheckedPage, BROWSER_DAEMON_ARGS } from '../integration/daemon_proc.mjs';

const VIEWPORT = { width: 800, height: 500 };
const WAIT_MS = 30000;
const HOLD_LIMIT_MS = 30000;

let daemon = null;
let browser = null;
let base = '';
const problems = [];   // console errors and page errors, from every page

before(async () => {
  daemon = await startDaemon({ name: 'firefox-test-tissued', extraArgs: BROWSER_DAEMON_ARGS });
  base = `http://127.0.0.1:${daemon.httpPort}`;
  browser = await launchFirefox(WAIT_MS);
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (daemon && daemon.proc.exitCode === null && daemon.proc.signalCode === null) await daemon.stop();
});

function openPage(url, label, viewport = VIEWPORT) {
  return openCheckedPage(browser, url, label, problems, { viewport, timeoutMs: WAIT_MS, requestFailed: false });
}

const hook = (page) => page.evaluate(() => {
  const t = window.tissued;
  return t && {
    state: t.state, sessionId: t.sessionId, role: t.role, frames: t.frames, vertexCount: t.vertexCount,
    toolId: t.toolId, errors: t.errors, webgl: t.webgl, observerLink: t.observerLink, simTime: t.simTime,
    decode: t.decode && { ...t.decode },
  };
});
const positions = (page) => page.evaluate(() => Array.from(window.tissued.positions));

function maxDelta(a, b) {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test('in Firefox: a page creates a session, a watcher follows the tool pressing the tissue', async () => {
  assert.ok(browser, 'Firefox runs: needs /usr/bin/firefox-esr and an X display (run under xvfb-run; ' +
    'deploy/install-deps.sh --test installs both)');
  const dir = artifactsDir();
  const page = await openPage(base + '/#key=' + SERVER_KEY, 'controller');
  await page.waitForFunction(() => window.tissued && window.tissued.vertexCount > 0 && window.tissued.frames > 5,
    null, { timeout: WAIT_MS });
  const h = await hook(page);
  assert.equal(h.state, 'connected');
  assert.equal(h.role, 'controller');
  assert.ok(h.sessionId > 0 && h.toolId >= 1, `session ${h.sessionId}, tool ${h.toolId}`);
  assert.equal(h.webgl, true, 'WebGL works: ' + h.errors.join(' | '));
  assert.match(h.observerLink, /[?&]token=[0-9a-f]{32}/, 'a watch link: ' + h.observerLink);

  const observer = await openPage(h.observerLink, 'observer', { width: 480, height: 300 });
  await observer.waitForFunction(() => window.tissued && window.tissued.frames > 5, null, { timeout: WAIT_MS });
  const ho = await hook(observer);
  assert.equal(ho.role, 'observer');
  assert.equal(ho.sessionId, h.sessionId);
  assert.equal(ho.vertexCount, h.vertexCount);

  // Bring the tool down over the middle of the view, then press and wiggle
  // it for 1.5 s and at least 0.5 s of simulated time (bounded).
  // Frames arriving while the worker loads are decoded on the main thread;
  // once it runs, every frame goes to it.
  const decodeNow = async () => Promise.all([page, observer].map(async (p) => {
    await p.waitForFunction(() => window.tissued.decode?.where === 'worker', null, { timeout: WAIT_MS });
    return (await hook(p)).decode;
  }));
  const decodeBefore = await decodeNow();
  const cx = VIEWPORT.width / 2, cy = VIEWPORT.height / 2;
  await page.mouse.move(cx - 40, cy - 20);
  await page.mouse.move(cx, cy, { steps: 8 });
  await sleep(500);
  const before = await positions(observer);
  await page.screenshot({ path: path.join(dir, 'firefox-before.png') });
  const sim0 = (await hook(page)).simTime;
  await page.mouse.down({ button: 'left' });
  const t0 = Date.now();
  for (let i = 0; Date.now() - t0 < 1500 || (await hook(page)).simTime - sim0 < 0.5; i++) {
    assert.ok(Date.now() - t0 < HOLD_LIMIT_MS, 'simulated time hardly advances while pressing');
    await page.mouse.move(cx + 6 * Math.sin(i / 3), cy + 4 * Math.cos(i / 3));
    await sleep(50);
  }
  await page.screenshot({ path: path.join(dir, 'firefox-pressed.png') });
  await sleep(200);
  const after = await positions(observer);
  await observer.screenshot({ path: path.join(dir, 'firefox-observer.png') });
  await page.mouse.up({ button: 'left' });

  // The watcher's mesh moved: above 1 mm somewhere (the press dents by
  // several mm; sag alone after the first frames is far below), and below
  // 3 cm (a diverged session flies apart).
  const d = maxDelta(before, after);
  assert.ok(d > 0.001 && d < 0.03, `the watcher's mesh changes by ${(d * 1000).toFixed(3)} mm at most`);

  for (const [i, label, p] of [[0, 'controller', page], [1, 'observer', observer]]) {
    const x = await hook(p);
    const was = decodeBefore[i];
    assert.equal(x.decode.where, 'worker', `${label} decodes in the worker: ${JSON.stringify(x.decode)}`);
    assert.ok(x.decode.workerFrames > was.workerFrames + 10 && x.decode.mainFrames === was.mainFrames,
      `${label}: the frames of the press decoded in the worker: ${JSON.stringify([was, x.decode])}`);
    assert.deepEqual(x.errors, [], `errors shown by the ${label} page`);
  }
  assert.deepEqual(problems, [], 'console errors');
});
