// daemon_proc.mjs: shared helpers for the JavaScript tests (ws.test.mjs,
// tests/e2e/browser.test.mjs): start the built daemon (TISSUED_BIN) on
// ephemeral ports with a scratch data directory, wait for its ports file,
// stop it with SIGTERM and report the exit status; load the npm packages
// from client-web/ (where `npm ci` puts them) and the wire protocol from the
// repository. The twin of daemon_proc.c for the C integration tests.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import { loadProtocolSync } from '../../client-web/src/protocol.js';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const webRequire = createRequire(new URL('../../client-web/package.json', import.meta.url));
export const protoPath = path.join(repoRoot, 'proto', 'tissue.proto');

/** The wire protocol, loaded with the same module the page uses. */
export function loadProtocol() {
  return loadProtocolSync(webRequire('protobufjs'), protoPath);
}

/**
 * The server key every daemon started here gets (--server-key); clients say
 * it in Hello.credentials to create sessions. The twin of TS_DPROC_KEY.
 */
export const SERVER_KEY = 'itest-server-key-5f0c2a9e41d7';

/**
 * Daemon arguments for the browser tests: a page's WebSocket has 60 s, not
 * the default 10 s, from its upgrade to its Hello. A page says Hello in its
 * socket's open handler, but with four pages drawing on SwiftShader beside
 * CI's sanitizer build on two cores, one fresh-clone run (2026-12-05) saw a
 * late-opened page's renderer busy for over 10 s: the daemon closed that
 * socket (1008 "no Hello in time"), the page reconnected and went on, and
 * the test failed on the error the page showed. The timeout itself is
 * checked by itest_faults; these tests check the pages.
 */
export const BROWSER_DAEMON_ARGS = ['--handshake-timeout', '60'];

/** The daemon's /metrics page (Prometheus text) from its HTTP port on loopback. */
export function metricsPage(port) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/metrics' }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

/** A session's gauge in a /metrics page (NaN when it is not there). */
export function sessionMetric(page, name, id) {
  const head = `${name}{session="${id}"} `;
  const line = page.split('\n').find((l) => l.startsWith(head));
  return line ? Number(line.slice(head.length)) : NaN;
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls fn() every `every` ms until it returns a truthy value; throws after timeoutMs. */
export async function waitFor(fn, timeoutMs, what, every = 20) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out after ' + timeoutMs + ' ms waiting for ' + what);
    await sleep(every);
  }
}

/**
 * Debian's chromium through playwright-core, headless, with the project's
 * flags (never a browser download). WebGL without a GPU: ANGLE on
 * SwiftShader, which Chromium only uses for WebGL when told to.
 *
 * A launch gets at least 30 s and up to three attempts. Here a launch takes
 * 0.1-1 s, but in one fresh-clone CI run (2026-12-01) the first two test
 * files' launches each sat 20 s with the browser started and its pipe
 * silent, and the third file's launch worked. Each failed attempt is said on
 * stderr, so a run shows when it happened.
 */
export async function launchChromium(timeoutMs) {
  const { chromium } = webRequire('playwright-core');
  const perAttempt = Math.max(timeoutMs, 30000);
  for (let attempt = 1; ; attempt++) {
    const t0 = Date.now();
    try {
      return await chromium.launch({
        executablePath: process.env.TS_CHROMIUM || '/usr/bin/chromium',
        headless: true,
        timeout: perAttempt,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
          '--disable-component-update', '--disable-quic', '--no-first-run', '--disable-sync',
          '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
      });
    } catch (e) {
      const first = String(e && e.message || e).split('\n')[0];
      process.stderr.write(`launchChromium: attempt ${attempt} failed after ${Date.now() - t0} ms: ${first}\n`);
      if (attempt >= 3) throw e;
    }
  }
}

/**
 * Launches Debian's firefox-esr through WebDriver BiDi (playwright-core's
 * 'moz-firefox' channel). Headless Firefox finds no GL driver here, so it
 * runs headed: the test runs under xvfb-run (or any X display in DISPLAY),
 * where WebGL2 renders on Mesa's llvmpipe. Resolves to null when there is
 * no display or no Firefox (the caller says why it skips).
 */
export async function launchFirefox(timeoutMs) {
  const exe = process.env.TS_FIREFOX || '/usr/bin/firefox-esr';
  if (!process.env.DISPLAY || !fs.existsSync(exe)) return null;
  const { firefox } = webRequire('playwright-core');
  return firefox.launch({
    executablePath: exe,
    channel: 'moz-firefox',
    headless: false,
    timeout: timeoutMs,
    firefoxUserPrefs: { 'webgl.force-enabled': true },
  });
}

/**
 * Opens url in a new context of `browser` and records into `problems` what
 * a page must not do: console errors, page errors, failed requests
 * (requestFailed, default on) and, with onlyFrom (an origin URL), loads
 * from anywhere else. label names the page in those lines. Options:
 * viewport, timeoutMs (default 60 s: the page's default timeout and the
 * load's), deviceScaleFactor, hasTouch, init (a script run before the
 * page's own). Returns the page once it is loaded and its test hook
 * (window.tissued) is there.
 */
export async function openCheckedPage(browser, url, label, problems, {
  viewport, timeoutMs = 60000, deviceScaleFactor, hasTouch = false, init = null,
  onlyFrom = null, requestFailed = true,
} = {}) {
  const opts = { viewport, hasTouch };
  if (deviceScaleFactor !== undefined) opts.deviceScaleFactor = deviceScaleFactor;
  const context = await browser.newContext(opts);
  const page = await context.newPage();
  page.setDefaultTimeout(timeoutMs);
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`${label} console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`${label} page error: ${e.message}`));
  if (requestFailed) {
    page.on('requestfailed', (r) => problems.push(`${label} request failed: ${r.url()} ${r.failure()?.errorText}`));
  }
  if (onlyFrom) {
    const host = new URL(onlyFrom).host;
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.protocol.startsWith('http') && u.host !== host) problems.push(`${label} loads ${r.url()}`);
    });
  }
  if (init) await page.addInitScript(init);
  await page.goto(url, { waitUntil: 'load', timeout: timeoutMs });
  // The page's test hook (window.tissued) is set by its module script, which
  // a loaded page may not have run yet: on a busy machine the load event
  // came first once, and a check that read window.tissued.role threw.
  await page.waitForFunction(() => window.tissued !== undefined, null, { timeout: timeoutMs });
  return page;
}

/** Where tests leave screenshots and logs. */
export function artifactsDir() {
  const dir = process.env.TS_ARTIFACTS || path.join(os.tmpdir(), 'tissued-artifacts');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

function daemonBin() {
  const bin = process.env.TISSUED_BIN || path.join(repoRoot, 'build', 'server', 'tissued');
  if (!fs.existsSync(bin)) throw new Error('daemon not found at ' + bin + ' (set TISSUED_BIN)');
  return bin;
}

/**
 * Starts the daemon on 127.0.0.1 with ephemeral ports. Resolves to
 * { proc, tcpPort, httpPort, dir, log(), stop() } once the ports file holds
 * JSON with both ports. Its stdout and stderr are kept (log()) for failure
 * messages and written to the artifacts directory when it stops.
 */
export async function startDaemon({ name = 'tissued', timeoutMs = 20000, extraArgs = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tissued-js-'));
  const dataDir = path.join(dir, 'data');
  fs.mkdirSync(dataDir);
  const portsFile = path.join(dir, 'ports.json');
  // The slow physics threads keep their default niceness (10) here, unlike
  // daemon_proc.c's: the browser tests' XPBD sessions of the built-in patch
  // at dt 1 ms (a step load of 1.1) run there, a whole core's worth each,
  // and Chromium needs its share: in a fresh-clone CI run with them at 0,
  // the classroom test's instructor page did not end its session (ending
  // takes two presses within 5 s; no EndSession reached the daemon).
  const args = ['--host', '127.0.0.1', '--tcp-port', '0', '--http-port', '0',
    '--data-dir', dataDir, '--ports-file', portsFile, '--server-key', SERVER_KEY, ...extraArgs];
  const proc = spawn(daemonBin(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk) => {
    output += chunk.toString();
    if (output.length > 200000) output = output.slice(-100000);
  };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  let exitStatus = null;
  exited.then((s) => { exitStatus = s; });
  proc.on('error', (err) => { output += '\nspawn error: ' + err.message; });
  // Never leave a daemon behind if the test process dies first.
  const reap = () => { if (!exitStatus) proc.kill('SIGKILL'); };
  process.once('exit', reap);
  exited.then(() => process.removeListener('exit', reap));

  const d = {
    proc,
    dir,
    tcpPort: 0,
    httpPort: 0,
    log: () => output,
    exited,
    /** SIGTERM, then waits (bounded) for the exit; resolves to {code, signal}. */
    async stop(graceMs = 10000) {
      if (!exitStatus) proc.kill('SIGTERM');
      let timer = null;  // cleared, so that a finished test does not wait out the grace
      const timeout = new Promise((resolve) => { timer = setTimeout(resolve, graceMs, 'timeout'); });
      let s = await Promise.race([exited, timeout]);
      clearTimeout(timer);
      if (s === 'timeout') {
        proc.kill('SIGKILL');
        s = await exited;
        s = { ...s, timedOut: true };
      }
      try {
        fs.writeFileSync(path.join(artifactsDir(), name + '.log'), output);
      } catch { /* the log is a convenience */ }
      fs.rmSync(dir, { recursive: true, force: true });
      return s;
    },
  };

  try {
    const ports = await waitFor(() => {
      if (exitStatus) throw new Error('daemon exited early (' + JSON.stringify(exitStatus) + '):\n' + output);
      try {
        const j = JSON.parse(fs.readFileSync(portsFile, 'utf8'));
        return j && j.http > 0 && j.tcp > 0 ? j : null;
      } catch {
        return null;
      }
    }, timeoutMs, 'the ports file ' + portsFile);
    d.tcpPort = ports.tcp;
    d.httpPort = ports.http;
  } catch (err) {
    await d.stop(2000);
    throw err;
  }
  return d;
}

/**
 * Waits until the tissue is at rest: sample() returns { simTime, positions }
 * (or null while there is nothing yet); settled means that over `simGap`
 * seconds of simulated time no vertex moved vertically by more than `tol`
 * metres. Gravity makes a fresh patch sag for a while, and a test that
 * measures a dent must not mistake that sag for it. Returns the last sample.
 */
export async function waitSettled(sample, { timeoutMs = 30000, simGap = 0.2, tol = 1e-4 } = {}) {
  let ref = null;
  let last = null;
  let moved = Infinity;
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const s = await sample();
    if (s && s.positions) {
      last = s;
      if (!ref || s.positions.length !== ref.positions.length) {
        ref = { simTime: s.simTime, positions: Array.from(s.positions) };
      } else if (s.simTime - ref.simTime >= simGap) {
        moved = 0;
        for (let i = 1; i < s.positions.length; i += 3) moved = Math.max(moved, Math.abs(s.positions[i] - ref.positions[i]));
        if (moved <= tol) return last;
        ref = { simTime: s.simTime, positions: Array.from(s.positions) };
      }
    }
    await sleep(50);
  }
  throw new Error(`the tissue did not settle within ${timeoutMs} ms (last move ${(moved * 1000).toFixed(3)} mm ` +
    `over ${simGap} s of simulated time, sim time ${last ? last.simTime : '?'} s)`);
}

/**
 * The OBJ text of a flat grid of n x n vertices, 10 cm across in metres,
 * gently curved: n = 130 (33,282 triangles) builds for a few seconds, long
 * enough for the daemon's progress reports (CreateProgress, once a second;
 * tests/integration/itest_create.c makes the same grid in C).
 */
export function gridObj(n) {
  const lines = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const x = 0.1 * i / (n - 1) - 0.05, z = 0.1 * j / (n - 1) - 0.05;
      lines.push(`v ${x.toFixed(6)} ${(0.4 * (x * x + z * z)).toFixed(6)} ${z.toFixed(6)}`);
    }
  }
  for (let i = 0; i + 1 < n; i++) {
    for (let j = 0; j + 1 < n; j++) {
      const a = i * n + j + 1, b = a + 1, c = a + n, d = c + 1;
      lines.push(`f ${a} ${b} ${d}`, `f ${a} ${d} ${c}`);
    }
  }
  return lines.join('\n') + '\n';
}
