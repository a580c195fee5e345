// deploy_files.test.mjs: the files under deploy/ that no other test runs.
// - deploy/tissued.conf.example: the daemon starts on it (ports, address and
//   data directory overridden by later flags, as the file says they can be),
//   answers /healthz, applies the file's dt, frame rate and clients-per-session
//   limit, and refuses the same file with one unknown key (exit status 2).
// - deploy/Dockerfile (built and run by deploy/docker-check.sh, outside CI): every
//   instruction known, every COPY source present in the repository, every
//   COPY --from an earlier stage, JSON forms valid, the build stage installing
//   deploy/install-deps.sh's build packages, no -dev package at runtime, a
//   numeric non-root USER, the volume, ports and config path of the example.
// - deploy/tissued.service: `systemd-analyze verify` clean (ExecStart pointed
//   at the built daemon) and `systemd-analyze security --offline` exposure.
// - deploy/k8s/*.yaml: parse (python3-yaml), ConfigMap equal to the example,
//   probes on /healthz, resources, non-root read-only root fs, a volume
//   claim at the data directory.
// Run: TISSUED_BIN=build/server/tissued node --test tests/integration/deploy_files.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { repoRoot, loadProtocol, waitFor } from './daemon_proc.mjs';
import { WsPeer } from './ws_peer.mjs';
import { Role } from '../../client-web/src/protocol.js';
import { findProgram } from './proxy_proc.mjs';

const SERVER_KEY = '0a1b2c3d4e5f60718293a4b5c6d7e8f9';
const deployDir = path.join(repoRoot, 'deploy');
const exampleConf = path.join(deployDir, 'tissued.conf.example');

function daemonBin() {
  const bin = process.env.TISSUED_BIN || path.join(repoRoot, 'build', 'server', 'tissued');
  assert.ok(fs.existsSync(bin), 'daemon not found at ' + bin + ' (set TISSUED_BIN)');
  return path.resolve(bin);
}

/** The [server] keys of an INI file as inih reads them (# and ; start comments). */
function readIni(file) {
  const out = {};
  let section = '';
  for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (!line || line[0] === '#' || line[0] === ';') continue;
    const m = /^\[(.+)\]$/.exec(line);
    if (m) { section = m[1]; continue; }
    const kv = /^([^=]+)=(.*)$/.exec(line);
    assert.ok(kv, 'not key = value: ' + line);
    assert.equal(section, 'server', 'key outside [server]: ' + line);
    out[kv[1].trim()] = kv[2].trim();
  }
  return out;
}

/** Runs the daemon on conf with loopback/ephemeral overrides; resolves to a handle. */
async function startOnConfig(conf, dir) {
  const portsFile = path.join(dir, 'ports.json');
  const args = ['--config', conf, '--host', '127.0.0.1', '--tcp-port', '0', '--http-port', '0',
    '--data-dir', path.join(dir, 'data'), '--ports-file', portsFile];
  const proc = spawn(daemonBin(), args, {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TISSUED_SERVER_KEY: SERVER_KEY },
  });
  let output = '';
  proc.stdout.on('data', (c) => { output += c; });
  proc.stderr.on('data', (c) => { output += c; });
  let status = null;
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => { status = { code, signal }; resolve(status); }));
  const reap = () => { if (!status) proc.kill('SIGKILL'); };
  process.once('exit', reap);
  exited.then(() => process.removeListener('exit', reap));
  const d = {
    proc, exited, log: () => output, status: () => status,
    async stop() {
      if (!status) proc.kill('SIGTERM');
      let timer = null;
      const s = await Promise.race([exited, new Promise((r) => { timer = setTimeout(r, 10000, null); })]);
      clearTimeout(timer);
      if (!s) { proc.kill('SIGKILL'); await exited; return { timedOut: true }; }
      return s;
    },
  };
  await waitFor(() => {
    if (status) return true;
    try {
      const j = JSON.parse(fs.readFileSync(portsFile, 'utf8'));
      if (j.http > 0) { d.httpPort = j.http; return true; }
    } catch { /* not yet */ }
    return false;
  }, 20000, 'the daemon on ' + conf);
  return d;
}

test('the daemon runs on deploy/tissued.conf.example and applies it', async () => {
  const conf = readIni(exampleConf);
  for (const k of ['host', 'http-port', 'tcp-port', 'data-dir', 'dt', 'frame-rate', 'max-clients-per-session'])
    assert.ok(k in conf, 'the example sets ' + k);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tissued-conf-'));
  const d = await startOnConfig(exampleConf, dir);
  const peers = [];
  try {
    assert.equal(d.status(), null, 'daemon exited on the example config:\n' + d.log());
    const res = await fetch(`http://127.0.0.1:${d.httpPort}/healthz`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).status, 'ok');

    const protocol = loadProtocol();
    const url = `ws://127.0.0.1:${d.httpPort}/ws`;
    const open = async () => {
      const p = await new WsPeer(protocol, url).open();
      peers.push(p);
      const h = await p.request('hello', { protocolVersion: 1, clientName: 'deploy_files.test', credentials: SERVER_KEY });
      assert.equal(h.kind, 'helloReply');
      return p;
    };
    const first = await open();
    const sc = await first.request('createSession', { name: 'conf-check', builtin: 'stomach-patch' });
    assert.equal(sc.kind, 'sessionCreated', JSON.stringify(sc.body));
    const id = sc.body.sessionId;
    const maxClients = Number(conf['max-clients-per-session']);
    assert.ok(maxClients >= 2 && maxClients <= 64, 'a limit this test can reach: ' + maxClients);
    for (let i = 0; i < maxClients; i++) {
      const p = i === 0 ? first : await open();
      const j = await p.request('joinSession', { sessionId: id, role: Role.OBSERVER });
      assert.equal(j.kind, 'joined', `client ${i + 1} of ${maxClients}: ${JSON.stringify(j.body)}`);
      if (i === 0) {
        // float32 on the wire: relative 1e-6 covers its rounding
        assert.ok(Math.abs(j.body.dt - Number(conf.dt)) <= 1e-6 * Number(conf.dt), 'dt ' + j.body.dt);
        assert.equal(j.body.frameRate, Number(conf['frame-rate']));
      }
    }
    const extra = await open();
    const refused = await extra.request('joinSession', { sessionId: id, role: Role.OBSERVER });
    assert.equal(refused.kind, 'error', `client ${maxClients + 1} must be refused: ${JSON.stringify(refused.body)}`);
  } finally {
    for (const p of peers) p.close();
    const s = await d.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(s.code, 0, 'exit after SIGTERM: ' + JSON.stringify(s) + '\n' + d.log().slice(-2000));
  }
});

test('the daemon refuses the example with an unknown key', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tissued-conf-'));
  try {
    const bad = path.join(dir, 'bad.conf');
    fs.writeFileSync(bad, fs.readFileSync(exampleConf, 'utf8') + 'no-such-setting = 1\n');
    const r = spawnSync(daemonBin(), ['--config', bad, '--http-port', '0', '--tcp-port', '0',
      '--data-dir', path.join(dir, 'data')], { encoding: 'utf8', timeout: 10000 });
    assert.equal(r.status, 2, 'exit status; stderr: ' + r.stderr);
    assert.match(r.stderr, /no-such-setting/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** Dockerfile instructions: [{ line, op, args }] with continuations joined. */
function dockerInstructions(file) {
  const out = [];
  let cur = null;
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    if (!cur && (/^\s*#/.test(raw) || !raw.trim())) continue;
    if (cur && /^\s*#/.test(raw)) continue;  // comment lines inside a continuation
    const text = raw.replace(/\\$/, '');
    if (cur) cur.args += ' ' + text.trim();
    else {
      const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(text);
      assert.ok(m, `${file}:${i + 1}: not an instruction: ${raw}`);
      cur = { line: i + 1, op: m[1].toUpperCase(), args: m[2].trim() };
    }
    if (!/\\$/.test(raw)) { out.push(cur); cur = null; }
  }
  assert.equal(cur, null, 'the Dockerfile ends inside a continuation');
  return out;
}

test('deploy/Dockerfile: instructions, COPY sources, stages, user, ports, volume', () => {
  const file = path.join(deployDir, 'Dockerfile');
  const ins = dockerInstructions(file);
  const known = new Set(['FROM', 'RUN', 'CMD', 'LABEL', 'EXPOSE', 'ENV', 'ADD', 'COPY', 'ENTRYPOINT',
    'VOLUME', 'USER', 'WORKDIR', 'ARG', 'ONBUILD', 'STOPSIGNAL', 'HEALTHCHECK', 'SHELL']);
  const stages = [];
  const conf = readIni(exampleConf);
  let confDest = null;
  const stageRuns = new Map();
  for (const x of ins) {
    assert.ok(known.has(x.op), `line ${x.line}: unknown instruction ${x.op}`);
    if (x.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(x.args);
      assert.ok(m, `line ${x.line}: FROM image [AS name]`);
      stages.push(m[2] || String(stages.length));
      stageRuns.set(stages.at(-1), '');
    }
    if (x.op === 'RUN') stageRuns.set(stages.at(-1), stageRuns.get(stages.at(-1)) + ' ' + x.args);
    if (['CMD', 'ENTRYPOINT'].includes(x.op) || (x.op === 'HEALTHCHECK' && /\bCMD\s+\[/.test(x.args))) {
      const json = x.op === 'HEALTHCHECK' ? x.args.slice(x.args.indexOf('[')) : x.args;
      assert.doesNotThrow(() => JSON.parse(json), `line ${x.line}: ${x.op} JSON form`);
    }
    if (x.op === 'COPY' || x.op === 'ADD') {
      const words = x.args.split(/\s+/);
      const flags = words.filter((w) => w.startsWith('--'));
      const rest = words.filter((w) => !w.startsWith('--'));
      assert.ok(rest.length >= 2, `line ${x.line}: COPY needs a source and a destination`);
      const from = flags.find((f) => f.startsWith('--from='));
      const srcs = rest.slice(0, -1);
      const dest = rest.at(-1);
      if (srcs.length > 1) assert.ok(dest.endsWith('/'), `line ${x.line}: several sources need a directory destination`);
      if (from) {
        assert.ok(stages.slice(0, -1).includes(from.slice(7)), `line ${x.line}: ${from} names no earlier stage`);
      } else {
        for (const s of srcs) {
          assert.ok(!/[*?[]/.test(s), `line ${x.line}: no globs, so that this check is exact`);
          assert.ok(fs.existsSync(path.join(repoRoot, s)), `line ${x.line}: COPY source ${s} is not in the repository`);
        }
        if (srcs.includes('deploy/tissued.conf.example')) confDest = dest;
      }
    }
  }
  assert.ok(stages.length >= 2, 'multi-stage');
  const [buildRuns, runtimeRuns] = [stageRuns.get(stages[0]), stageRuns.get(stages.at(-1))];

  // the build stage installs install-deps.sh's build packages (less the test
  // framework and the sqlite3 shell); the runtime stage no -dev package
  const deps = fs.readFileSync(path.join(deployDir, 'install-deps.sh'), 'utf8');
  const pkgs = /BUILD_PKGS=\(([^)]*)\)/.exec(deps)[1].split(/\s+/).filter(Boolean);
  for (const p of pkgs.filter((q) => !['check', 'sqlite3'].includes(q)))
    assert.ok(new RegExp('\\s' + p.replace(/[+.]/g, '\\$&') + '(\\s|$)').test(buildRuns), 'build stage installs ' + p);
  assert.ok(!/-dev\b/.test(runtimeRuns), 'no -dev package in the runtime stage');

  const last = (op) => ins.filter((x) => x.op === op).at(-1);
  const user = last('USER');
  assert.ok(user && /^[1-9]\d*(:\d+)?$/.test(user.args), 'numeric non-root USER: ' + (user && user.args));
  assert.ok(ins.indexOf(user) > ins.findLastIndex((x) => x.op === 'FROM'), 'USER in the runtime stage');
  assert.match(last('HEALTHCHECK').args, /\/healthz/);
  const exposed = ins.filter((x) => x.op === 'EXPOSE').flatMap((x) => x.args.split(/\s+/));
  assert.ok(exposed.includes(conf['http-port']) && exposed.includes(conf['tcp-port']), 'EXPOSE ' + exposed);
  assert.equal(last('VOLUME').args, conf['data-dir']);
  assert.ok(confDest, 'the example config is copied into the image');
  assert.ok(last('ENTRYPOINT').args.includes('--config ' + confDest), 'the entrypoint reads ' + confDest);
  for (const k of ['web-root', 'proto-file']) {
    const rel = path.relative('/opt/tissued', conf[k]);
    assert.ok(!rel.startsWith('..'), `${k} ${conf[k]} under /opt/tissued`);
    assert.ok(fs.existsSync(path.join(repoRoot, rel)), `${k}: ${rel} exists in the repository`);
  }
});

test('deploy/tissued.service: systemd-analyze verify and security', (t) => {
  const sa = findProgram('systemd-analyze');
  if (!sa) {
    t.skip('systemd-analyze not installed (deploy/install-deps.sh --test installs systemd)');
    return;
  }
  const text = fs.readFileSync(path.join(deployDir, 'tissued.service'), 'utf8');
  for (const k of ['DynamicUser=yes', 'StateDirectory=tissued', 'ProtectSystem=strict', 'ProtectHome=yes',
    'PrivateTmp=yes', 'PrivateDevices=yes', 'NoNewPrivileges=yes', 'SystemCallFilter=@system-service',
    'MemoryDenyWriteExecute=yes', 'CapabilityBoundingSet=\n', 'Restart=on-failure'])
    assert.ok(text.includes(k), 'unit sets ' + k.trim());
  assert.match(text, /^RestrictAddressFamilies=.*AF_INET/m);
  assert.match(text, /^LimitNOFILE=\d{5,}$/m);
  // the daemon's own bound (itest_shutdown) is 5 s; the unit must wait longer
  const stop = Number(/^TimeoutStopSec=(\d+)s?$/m.exec(text)[1]);
  assert.ok(stop > 5 && stop <= 30, 'TimeoutStopSec ' + stop);

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tissued-unit-'));
  try {
    const unit = path.join(dir, 'tissued.service');
    assert.ok(text.includes('ExecStart=/opt/tissued/bin/tissued '));
    fs.writeFileSync(unit, text.replace('ExecStart=/opt/tissued/bin/tissued ', `ExecStart=${daemonBin()} `));
    const v = spawnSync(sa, ['verify', unit], { encoding: 'utf8', timeout: 30000 });
    assert.equal(v.status, 0, 'systemd-analyze verify: ' + v.stderr);
    // verify only warns about unknown or malformed keys: any output fails
    assert.equal((v.stdout + v.stderr).trim(), '', 'systemd-analyze verify output');
    const s = spawnSync(sa, ['security', '--offline=true', unit], { encoding: 'utf8', timeout: 30000 });
    const m = /Overall exposure level for tissued\.service: ([\d.]+)/.exec(s.stdout + s.stderr);
    assert.ok(m, 'systemd-analyze security output: ' + s.stdout + s.stderr);
    // 0 is fully locked down, 10 unprotected; 1.1 measured: the daemon needs
    // the network and the host's root file system read-only
    console.log(JSON.stringify({ systemd_exposure: Number(m[1]) }));
    assert.ok(Number(m[1]) <= 2.0, 'exposure ' + m[1]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('deploy/k8s: manifests parse and hold probes, resources, security, volume', () => {
  const k8s = path.join(deployDir, 'k8s');
  const files = fs.readdirSync(k8s).filter((f) => f.endsWith('.yaml')).sort();
  const py = spawnSync(findProgram('python3') || 'python3', ['-c',
    'import json, sys, yaml\n' +
    'print(json.dumps({f: list(yaml.safe_load_all(open(f))) for f in sys.argv[1:]}))',
    ...files.map((f) => path.join(k8s, f))], { encoding: 'utf8', timeout: 30000 });
  assert.equal(py.status, 0, 'python3-yaml: ' + py.stderr);
  const docs = Object.values(JSON.parse(py.stdout)).flat().filter(Boolean);
  const byKind = (k) => docs.filter((d) => d.kind === k);
  const conf = readIni(exampleConf);

  const [cm] = byKind('ConfigMap');
  assert.equal(cm.data['tissued.conf'], fs.readFileSync(exampleConf, 'utf8'), 'ConfigMap = the example');
  const kust = byKind('Kustomization')[0];
  assert.deepEqual([...kust.resources].sort(), files.filter((f) => f !== 'kustomization.yaml'));

  const [sts] = byKind('StatefulSet');
  const pod = sts.spec.template.spec;
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.ok(pod.securityContext.runAsUser > 0);
  assert.ok(pod.terminationGracePeriodSeconds > 5, 'longer than the daemon\'s 5 s shutdown');
  const c = pod.containers.find((x) => x.name === 'tissued');
  const http = c.ports.find((p) => p.name === 'http');
  assert.equal(String(http.containerPort), conf['http-port']);
  assert.equal(String(c.ports.find((p) => p.name === 'tcp').containerPort), conf['tcp-port']);
  for (const probe of [c.livenessProbe, c.readinessProbe]) {
    assert.equal(probe.httpGet.path, '/healthz');
    assert.equal(probe.httpGet.port, 'http');
  }
  for (const k of ['cpu', 'memory']) {
    assert.ok(c.resources.requests[k], 'requests.' + k);
    assert.ok(c.resources.limits[k], 'limits.' + k);
  }
  assert.equal(c.securityContext.readOnlyRootFilesystem, true);
  assert.equal(c.securityContext.allowPrivilegeEscalation, false);
  assert.deepEqual(c.securityContext.capabilities.drop, ['ALL']);
  const mounts = Object.fromEntries(c.volumeMounts.map((m) => [m.mountPath, m.name]));
  const claim = sts.spec.volumeClaimTemplates.find((v) => v.metadata.name === mounts[conf['data-dir']]);
  assert.ok(claim, 'a PersistentVolumeClaim mounted at ' + conf['data-dir']);
  assert.ok(claim.spec.resources.requests.storage);
  const cfgVol = pod.volumes.find((v) => v.name === mounts['/etc/tissued']);
  assert.equal(cfgVol.configMap.name, cm.metadata.name);
  const env = Object.fromEntries(c.env.map((e) => [e.name, e]));
  assert.equal(env.TISSUED_HTTP_PORT.value, conf['http-port']);
  assert.equal(env.TISSUED_SERVER_KEY.valueFrom.secretKeyRef.optional, true);

  const services = byKind('Service');
  assert.ok(services.some((s) => s.spec.clusterIP === 'None' && s.metadata.name === sts.spec.serviceName),
    'the headless Service the StatefulSet names');
  for (const s of services) {
    for (const [k, v] of Object.entries(s.spec.selector)) assert.equal(sts.spec.template.metadata.labels[k], v);
  }
});

