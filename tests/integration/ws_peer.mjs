// ws_peer.mjs: a scripted WebSocket client for the JavaScript tests. It
// speaks the wire protocol through client-web's own modules (protocol.js,
// stream.js with codec.js), applies every Frame to a FrameStream as it
// arrives so no frame is missed, and queues every other message for the
// test to take in order with a bounded wait.

import { FrameStream } from '../../client-web/src/stream.js';
import { toNumber } from '../../client-web/src/protocol.js';
import { webRequire, waitFor } from './daemon_proc.mjs';

export class WsPeer {
  constructor(protocol, url) {
    this.protocol = protocol;
    this.url = url;
    this.nextId = 1;
    this.queue = [];          // non-frame messages not yet taken
    this.stream = new FrameStream();
    this.frames = [];         // { seq, keyframe, baselineSeq, changed, tools, at }
    this.frameError = null;   // first frame the stream rejected
    this.onFrame = null;      // optional callback(stream, frame)
    this.closed = null;       // { code, reason } once closed
  }

  open(timeoutMs = 5000) {
    const WebSocket = webRequire('ws');
    this.ws = new WebSocket(this.url, { perMessageDeflate: false });
    this.ws.binaryType = 'arraybuffer';
    this.ws.on('message', (data, isBinary) => this._onMessage(data, isBinary));
    this.ws.on('close', (code, reason) => { this.closed = { code, reason: reason.toString() }; });
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('WebSocket open timed out: ' + this.url)), timeoutMs);
      this.ws.once('open', () => { clearTimeout(t); resolve(this); });
      this.ws.once('error', (err) => { clearTimeout(t); reject(err); });
    });
  }

  _onMessage(data, isBinary) {
    if (!isBinary) {
      this.queue.push({ kind: 'text', body: data.toString() });
      return;
    }
    const msg = this.protocol.decode(new Uint8Array(data));
    if (msg.kind !== 'frame') {
      this.queue.push(msg);
      return;
    }
    const f = msg.body;
    if (this.frameError) return;
    try {
      const key = this.stream.apply(f);
      this.frames.push({
        seq: toNumber(f.seq), keyframe: key, baselineSeq: toNumber(f.baselineSeq),
        changed: this.stream.lastChanged, tools: f.tools, topology: f.topology, at: Date.now(),
      });
      if (this.onFrame) this.onFrame(this.stream, f);
    } catch (err) {
      this.frameError = err;
    }
  }

  /** Sends one Envelope; returns its request id. */
  send(kind, body) {
    const id = this.nextId++;
    this.ws.send(this.protocol.encode(kind, body, id));
    return id;
  }

  /** Takes the first queued message matching pred (default: any), waiting up to timeoutMs. */
  async take(pred = () => true, timeoutMs = 5000, what = 'a message') {
    return waitFor(() => {
      const i = this.queue.findIndex(pred);
      if (i >= 0) return this.queue.splice(i, 1)[0];
      if (this.closed) throw new Error('connection closed (' + this.closed.code + ') while waiting for ' + what);
      return null;
    }, timeoutMs, what, 5);
  }

  /** Sends a request and waits for the reply or Error echoing its request id. */
  async request(kind, body, timeoutMs = 5000) {
    const id = this.send(kind, body);
    return this.take((m) => m.requestId === id, timeoutMs, 'the reply to ' + kind + ' #' + id);
  }

  close() {
    if (this.ws && this.ws.readyState <= 1) this.ws.close(1000);
  }

  waitClosed(timeoutMs = 5000) {
    return waitFor(() => this.closed, timeoutMs, 'the server to close the connection');
  }
}
