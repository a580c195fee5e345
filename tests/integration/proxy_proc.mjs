// proxy_proc.mjs: helpers for proxy.test.mjs: a throwaway self-signed
// certificate made with the openssl CLI, a free loopback port, HAProxy
// (Debian's haproxy) started in the foreground on deploy/haproxy.cfg with its
// placeholders filled from the environment, HTTPS requests that trust only
// that certificate, and a WsPeer that connects over wss:// the same way.

import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';

import { repoRoot, webRequire, waitFor, artifactsDir } from './daemon_proc.mjs';
import { WsPeer } from './ws_peer.mjs';

export const haproxyConfig = path.join(repoRoot, 'deploy', 'haproxy.cfg');

/** Finds an executable on PATH (or in /usr/sbin, where Debian puts haproxy); null if none. */
export function findProgram(name) {
  const dirs = (process.env.PATH || '').split(':').concat(['/usr/sbin', '/sbin']);
  for (const d of dirs) {
    const p = path.join(d || '.', name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch { /* next */ }
  }
  return null;
}

/**
 * A self-signed certificate for 127.0.0.1 and localhost, valid one day, in
 * dir: returns { cert, key, pem } paths (pem = certificate then key, the form
 * HAProxy's "crt" takes) and certPem, the certificate text to trust.
 */
export function makeCertificate(dir) {
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync(findProgram('openssl') || 'openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes',
    '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const pem = path.join(dir, 'haproxy.pem');
  const certPem = fs.readFileSync(cert, 'utf8');
  fs.writeFileSync(pem, certPem + fs.readFileSync(key, 'utf8'), { mode: 0o600 });
  return { cert, key, pem, certPem };
}

/** A loopback TCP port that was free a moment ago (bound to port 0, then released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** GET over HTTPS trusting only ca; resolves to { status, headers, body }. */
export function httpsGet(url, ca, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { ca, agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { if (body.length < 1e6) body += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('HTTPS request timed out: ' + url)));
    req.on('error', reject);
  });
}

/**
 * Starts haproxy -db (foreground) on deploy/haproxy.cfg in front of the two
 * daemons' HTTP ports, TLS with certificate pem, on a free loopback port.
 * Resolves once a request for /healthz through it succeeds, to
 * { proc, port, log(), stop() }. The config is checked with haproxy -c first
 * so a broken file fails with HAProxy's own message.
 */
export async function startHaproxy({ daemons, cert, name = 'haproxy', timeoutMs = 15000 }) {
  const bin = findProgram('haproxy');
  if (!bin) throw new Error('haproxy not found (deploy/install-deps.sh --test installs it)');
  if (daemons.length !== 2) throw new Error('deploy/haproxy.cfg names two daemons');
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const env = {
      ...process.env,
      TISSUED_PROXY_BIND: '127.0.0.1:' + port,
      TISSUED_PROXY_CERT: cert.pem,
      TISSUED_DAEMON_1: '127.0.0.1:' + daemons[0].httpPort,
      TISSUED_DAEMON_2: '127.0.0.1:' + daemons[1].httpPort,
    };
    execFileSync(bin, ['-c', '-q', '-f', haproxyConfig], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const proc = spawn(bin, ['-db', '-f', haproxyConfig], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (c) => { output += c.toString(); if (output.length > 100000) output = output.slice(-50000); };
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
    let exitStatus = null;
    const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
    exited.then((s) => { exitStatus = s; });
    proc.on('error', (err) => { output += '\nspawn error: ' + err.message; });
    const reap = () => { if (!exitStatus) proc.kill('SIGKILL'); };
    process.once('exit', reap);
    exited.then(() => process.removeListener('exit', reap));

    const h = {
      proc,
      port,
      log: () => output,
      async stop(graceMs = 5000) {
        if (!exitStatus) proc.kill('SIGTERM');
        let timer = null;
        const s = await Promise.race([exited, new Promise((resolve) => { timer = setTimeout(resolve, graceMs, null); })]);
        clearTimeout(timer);
        if (!s) {
          proc.kill('SIGKILL');
          await exited;
        }
        try {
          fs.writeFileSync(path.join(artifactsDir(), name + '.log'), output);
        } catch { /* the log is a convenience */ }
        return exitStatus;
      },
    };
    try {
      await waitFor(async () => {
        if (exitStatus) throw new Error('haproxy exited (' + JSON.stringify(exitStatus) + '):\n' + output);
        try {
          const r = await httpsGet(`https://127.0.0.1:${port}/healthz`, cert.certPem, 1000);
          return r.status === 200;
        } catch {
          return false;
        }
      }, timeoutMs, 'haproxy to answer on port ' + port, 100);
      return h;
    } catch (err) {
      await h.stop(1000);
      // someone else took the port between freePort() and haproxy's bind
      if (attempt < 3 && /cannot bind|Address already in use/i.test(output)) continue;
      throw err;
    }
  }
}

/** A WsPeer over wss:// that trusts only the given certificate. */
export class TlsWsPeer extends WsPeer {
  constructor(protocol, url, ca) {
    super(protocol, url);
    this.ca = ca;
  }

  open(timeoutMs = 5000) {
    const WebSocket = webRequire('ws');
    this.ws = new WebSocket(this.url, { perMessageDeflate: false, ca: this.ca });
    this.ws.binaryType = 'arraybuffer';
    this.ws.on('message', (data, isBinary) => this._onMessage(data, isBinary));
    this.ws.on('close', (code, reason) => { this.closed = { code, reason: reason.toString() }; });
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('WebSocket open timed out: ' + this.url)), timeoutMs);
      this.ws.once('open', () => { clearTimeout(t); resolve(this); });
      this.ws.once('error', (err) => { clearTimeout(t); reject(err); });
    });
  }
}
