// web_render.mjs: the page rendering a live stream of the `liver` scenario
// (DESIGN.md: liver-smooth.obj, the default three layers), as a watcher, in
// Debian's Chromium. Issue 9: "a 60 Hz stream of `liver` renders at 60 fps on
// integrated graphics (update buffers in place, no per-frame allocation)".
// Chromium here renders WebGL in software (SwiftShader, --disable-gpu), slower
// than any integrated GPU, so a rate reached here bounds that case.
//
// For each scenario (liver, then the reference patch-S: the built-in patch
// at resolution 50, DESIGN.md), a daemon is started on 127.0.0.1 with
// ephemeral ports and a session made with the page's "XPBD live" setting
// (client-web/src/sessions.js LIVE_XPBD: one 1/60 s XPBD step per frame, the
// only way this 2-core machine steps the liver in real time; README "Live
// sessions of large meshes"). A node controller (tests/integration/ws_peer.mjs)
// joins it and moves a sphere in a circle pressing the top of the tissue,
// sending a pose every 1/60 s; the page joins through the watch link
// (?session=..&role=observer&token=..). Over SECONDS (10 s) of wall time it
// measures:
//   frames_received_per_s   frames the page's stream took (window.tissued.frames),
//                           beside the frames the controller received: what the
//                           daemon published at the stream's rate; with the
//                           simulated seconds the session advanced per wall
//                           second (1 when the physics keeps up);
//   frames_drawn_per_s      animation frames that drew a new tissue frame
//                           (src/scene.js stats.drawn; frames arriving between
//                           two animation frames are drawn once, the latest),
//                           with the page's requestAnimationFrame rate;
//   main_thread_ms_per_frame  main-thread busy time (CDP Performance
//                           TaskDuration) per frame received, with its parts:
//                           decode (in the worker; main-thread decode when it
//                           runs there), upload (copy into the geometry's array,
//                           normals, bounds) and render call per drawn frame;
//   js_alloc_bytes_per_frame  bytes the main thread's JS allocated per frame
//                           received (CDP HeapProfiler sampling, collected
//                           objects included), with the top allocation sites
//                           and those in the page's own code (client-web/src);
//   js_heap_growth_bytes    used JS heap after minus before (both after a GC);
//   buffers_in_place        1 when the tissue's position and normal arrays
//                           are the same objects at the end as at the start
//                           (no topology change in between), else 0.
// Every line also carries the 1-minute load average at the end of each
// window and the core count: on a shared 2-core machine the daemon, the
// controller, Chromium's renderer and its software GPU compete, and the frame
// rates then measure that load more than the page.
// Each liver line carries the patch-S figure as ref_value (the same page and
// settings on a smaller mesh), except frames_received_per_s, whose ref is the
// daemon's rate. Prints JSON lines. Run (after deploy/build.sh build, with
// client-web/node_modules from npm ci):
//   node tests/bench/web_render.mjs            (TS_WEB_RENDER_SECONDS=10)

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { SERVER_KEY, startDaemon, launchChromium, loadProtocol, waitFor, sleep, repoRoot }
  from '../integration/daemon_proc.mjs';
import { WsPeer } from '../integration/ws_peer.mjs';
import { Role } from '../../client-web/src/protocol.js';
import { LIVE_XPBD } from '../../client-web/src/sessions.js';

const SECONDS = Number(process.env.TS_WEB_RENDER_SECONDS || 10);
const shared = process.env.TS_SHARED_DIR || path.join(repoRoot, '..', 'shared');
const VIEWPORT = { width: 960, height: 600 };

/** Runs one scenario; returns its figures. */
async function measure(scenario) {
  const extraArgs = scenario === 'patch-S' ? ['--patch-resolution', '50'] : [];
  const daemon = await startDaemon({ name: 'web-render-bench', extraArgs, timeoutMs: 60000 });
  let browser = null;
  let peer = null;
  let timer = null;
  try {
    peer = await new WsPeer(loadProtocol(), `ws://127.0.0.1:${daemon.httpPort}/ws`).open();
    await peer.request('hello', { protocolVersion: 1, clientName: 'web_render', credentials: SERVER_KEY });
    const spec = { name: scenario, ...LIVE_XPBD };
    if (scenario === 'liver') {
      const data = fs.readFileSync(path.join(shared, 'data', 'meshes', 'liver-smooth.obj'));
      spec.mesh = { format: 0, data, scale: 0.01 };
    } else {
      spec.builtin = 'stomach-patch';
    }
    const sc = await peer.request('createSession', spec, 120000);
    if (sc.kind !== 'sessionCreated') throw new Error('createSession: ' + JSON.stringify(sc.body));
    const id = sc.body.sessionId;
    const j = await peer.request('joinSession',
      { sessionId: id, role: Role.CONTROLLER, toolId: 0, tool: { kind: 0, radius: 0.005 } }, 20000);
    if (j.kind !== 'joined') throw new Error('joinSession: ' + JSON.stringify(j.body));
    const s = peer.stream;
    await waitFor(() => s.vertexCount > 0, 60000, 'the first frame');
    // the tool circles 10 mm around the top of the tissue, 3 mm into it
    let top = 0;
    for (let i = 1; i < s.vertexCount; i++) if (s.positions[3 * i + 1] > s.positions[3 * top + 1]) top = i;
    const cx = s.positions[3 * top], cy = s.positions[3 * top + 1] - 0.003, cz = s.positions[3 * top + 2];
    let seq = 1;
    const t0 = Date.now();
    timer = setInterval(() => {
      const a = ((Date.now() - t0) / 1000) * Math.PI;  // half a turn a second
      peer.send('toolPose', { toolId: j.body.toolId, seq: seq++, clientTimeUs: Date.now() * 1000,
        position: { x: cx + 0.01 * Math.cos(a), y: cy, z: cz + 0.01 * Math.sin(a) },
        orientation: { w: 1, x: 0, y: 0, z: 0 }, jaw: 1 });
    }, 1000 / 60);

    browser = await launchChromium(60000);
    const page = await (await browser.newContext({ viewport: VIEWPORT, deviceScaleFactor: 1 })).newPage();
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`http://127.0.0.1:${daemon.httpPort}/?session=${id}&role=observer&token=${sc.body.observerToken}`);
    await page.waitForFunction(() => window.tissued && window.tissued.frames > 10 && window.tissued.render(),
      null, { timeout: 120000 });
    await sleep(1000);  // past the first keyframe's upload

    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    await cdp.send('HeapProfiler.enable');
    const metrics = async () => Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics
      .map((m) => [m.name, m.value]));
    await cdp.send('HeapProfiler.collectGarbage');
    const m0 = await metrics();
    const p0 = await page.evaluate(() => {
      const t = window.tissued;
      window.__bench = { buffers: t.tissueBuffers(), raf: 0, run: true };
      const tick = () => { window.__bench.raf++; if (window.__bench.run) requestAnimationFrame(tick); };
      requestAnimationFrame(tick);
      return { frames: t.frames, render: t.render(), decode: { ...t.decode } };
    });
    const c0 = peer.frames.length, sim0 = s.simTime;
    await cdp.send('HeapProfiler.startSampling',
      { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    const w0 = performance.now();
    await sleep(SECONDS * 1000);
    const load = os.loadavg()[0];
    const { profile } = await cdp.send('HeapProfiler.stopSampling');
    const wall = (performance.now() - w0) / 1000;
    const c1 = peer.frames.length, sim1 = s.simTime;
    const p1 = await page.evaluate(() => {
      const t = window.tissued, b = t.tissueBuffers();
      window.__bench.run = false;
      return {
        frames: t.frames, render: t.render(), decode: { ...t.decode }, raf: window.__bench.raf,
        samePosition: b.position === window.__bench.buffers.position,
        sameNormal: b.normal === window.__bench.buffers.normal,
      };
    });
    const m1 = await metrics();
    await cdp.send('HeapProfiler.collectGarbage');
    const m2 = await metrics();

    // allocations: the samples' sizes, by the function that allocated
    const sites = new Map();
    const pageSites = new Map();  // the page's own code (client-web/src)
    let allocated = 0;
    const bySelf = new Map();
    (function walk(node) {
      bySelf.set(node.id, node);
      for (const c of node.children) walk(c);
    })(profile.head);
    for (const smp of profile.samples) {
      allocated += smp.size;
      const cf = bySelf.get(smp.nodeId)?.callFrame;
      const key = cf ? `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\//, '')}:${cf.lineNumber + 1}` : '?';
      sites.set(key, (sites.get(key) || 0) + smp.size);
      if (cf && cf.url.includes('/src/')) pageSites.set(key, (pageSites.get(key) || 0) + smp.size);
    }
    const frames = p1.frames - p0.frames;
    const drawn = p1.render.drawn - p0.render.drawn;
    const renders = p1.render.renders - p0.render.renders;
    const dWorker = p1.decode.workerFrames - p0.decode.workerFrames;
    const dMain = p1.decode.mainFrames - p0.decode.mainFrames;
    return {
      scenario, vertices: s.vertexCount, wall, errors, load,
      published_per_s: (c1 - c0) / wall,
      sim_per_wall: (sim1 - sim0) / wall,
      received_per_s: frames / wall,
      drawn_per_s: drawn / wall,
      raf_per_s: p1.raf / wall,
      main_ms_per_frame: frames ? ((m1.TaskDuration - m0.TaskDuration) * 1000) / frames : NaN,
      script_ms_per_frame: frames ? ((m1.ScriptDuration - m0.ScriptDuration) * 1000) / frames : NaN,
      decode_where: dWorker >= dMain ? 'worker' : 'main',
      decode_ms: dWorker >= dMain
        ? (dWorker ? (p1.decode.workerMs - p0.decode.workerMs) / dWorker : NaN)
        : (dMain ? (p1.decode.mainMs - p0.decode.mainMs) / dMain : NaN),
      upload_ms: drawn ? (p1.render.uploadMs - p0.render.uploadMs) / drawn : NaN,
      render_ms: renders ? (p1.render.renderMs - p0.render.renderMs) / renders : NaN,
      alloc_per_frame: frames ? allocated / frames : NaN,
      top_sites: [...sites.entries()].sort((a, b) => b[1] - a[1]).slice(0, 5)
        .map(([k, v]) => ({ site: k, bytes_per_frame: Math.round(v / Math.max(frames, 1)) })),
      // the page's own code (client-web/src), where a per-frame buffer would show
      page_sites: [...pageSites.entries()].sort((a, b) => b[1] - a[1]).slice(0, 5)
        .map(([k, v]) => ({ site: k, bytes_per_frame: Math.round(v / Math.max(frames, 1)) })),
      renders_per_s: renders / wall,
      heap_growth: m2.JSHeapUsedSize - m0.JSHeapUsedSize,
      in_place: p1.samePosition && p1.sameNormal ? 1 : 0,
    };
  } finally {
    if (timer) clearInterval(timer);
    peer?.close();
    if (browser) await browser.close().catch(() => {});
    await daemon.stop();
  }
}

const liver = await measure('liver');
const patch = await measure('patch-S');
const r3 = (x) => (Number.isFinite(x) ? +x.toPrecision(4) : null);
const line = (metric, value, unit, ref, refValue, extra = {}) => console.log(JSON.stringify({
  bench: 'web_render', scenario: 'liver', browser: 'chromium', metric, value: r3(value), unit, ref,
  ref_value: r3(refValue), ratio: refValue ? r3(value / refValue) : null, ...extra,
  load_avg_1min: r3(liver.load), patch_s_load_avg_1min: r3(patch.load), cores: os.cpus().length,
}));
line('frames_received_per_s', liver.received_per_s, '1/s', 'daemon_published_per_s', liver.published_per_s,
  { vertices: liver.vertices, seconds: r3(liver.wall), patch_s_received_per_s: r3(patch.received_per_s),
    sim_s_per_wall_s: r3(liver.sim_per_wall), patch_s_sim_s_per_wall_s: r3(patch.sim_per_wall) });
line('frames_drawn_per_s', liver.drawn_per_s, '1/s', 'patch-S', patch.drawn_per_s,
  { animation_frames_per_s: r3(liver.raf_per_s), patch_s_animation_frames_per_s: r3(patch.raf_per_s) });
line('main_thread_ms_per_frame', liver.main_ms_per_frame, 'ms', 'patch-S', patch.main_ms_per_frame, {
  script_ms: r3(liver.script_ms_per_frame), decode_where: liver.decode_where, decode_ms: r3(liver.decode_ms),
  upload_ms: r3(liver.upload_ms), render_call_ms: r3(liver.render_ms),
  patch_s: { decode_ms: r3(patch.decode_ms), upload_ms: r3(patch.upload_ms), render_call_ms: r3(patch.render_ms) },
});
line('js_alloc_bytes_per_frame', liver.alloc_per_frame, 'B', 'patch-S', patch.alloc_per_frame,
  { renders_per_s: r3(liver.renders_per_s), top_sites: liver.top_sites, page_sites: liver.page_sites,
    patch_s_renders_per_s: r3(patch.renders_per_s) });
line('js_heap_growth_bytes', liver.heap_growth, 'B', 'patch-S', patch.heap_growth, { seconds: r3(liver.wall) });
line('buffers_in_place', liver.in_place, 'bool', 'patch-S', patch.in_place,
  { console_errors: liver.errors.length + patch.errors.length, errors: [...liver.errors, ...patch.errors].slice(0, 5) });
