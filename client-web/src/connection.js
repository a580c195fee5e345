// connection.js: the page's protocol client over one WebSocket at /ws.
//
// It says Hello, then either joins the session it was given or (autoCreate)
// creates a "stomach-patch" session and joins it, feeds every Frame to a
// FrameStream, sends the controller's tool poses (position and grasper jaw),
// pings for the round-trip time, and reconnects (rejoining the same session)
// with a growing delay when the socket closes. Requests that get one reply
// (ListSessions, CreateSession, ResetSession, EndSession) can also be made
// through request(), which resolves with the reply's body. Callers see it
// through the callbacks in `handlers`.
//
// Uses only the standard WebSocket API, so it runs in the browser and, with
// the `ws` package's WebSocket, in node.

import { PROTOCOL_VERSION, Role, nowMicros, toNumber } from './protocol.js';
import { FrameStream } from './stream.js';
import { DecodeStats } from './framedecoder.js';

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 10000;
const PING_INTERVAL_MS = 2000;
const MAX_BUFFERED_BYTES = 256 * 1024;  // poses are dropped above this backlog
const DEFAULT_RADIUS = 0.005;
const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

export class SessionClient {
  /**
   * opts: { url, protocol (Protocol), WebSocket (constructor), sessionId
   * (0 = create one), role (Role.*), clientName, credentials (the server
   * key, said in Hello: needed to create a session), token (a session token
   * from a shared link, sent with JoinSession), frameRate, forceRate
   * (ToolForce messages per second for a controller; 60 by default: a page
   * shows the force, it drives no haptic device), autoCreate (true: create a
   * session when given none; 'ifNone': only when the server has none and the
   * key is known; false: never), handlers:
   * { state(s), session(id, sessionCreated), joined(info), frame(stream, isKeyframe),
   *   force(toolForce), error(text, err), rtt(ms), closed(code, reason),
   *   lobby() (connected, in no session), ended(sessionId, text) (the session
   *   this client was in ended), handedOver(toolHandedOver) (this client's
   *   tool was handed to someone else: it observes now), training(progress)
   *   (TrainingProgress of its session) }, decoder (a FrameDecoder: decode
   * frames in its worker while it is ready; without one, or when it fails,
   * frames are decoded on this thread) }
   */
  constructor(opts) {
    this.url = opts.url;
    this.protocol = opts.protocol;
    this.WebSocket = opts.WebSocket;
    this.sessionId = opts.sessionId || 0;
    this.role = opts.role ?? Role.CONTROLLER;
    this.clientName = opts.clientName || 'web';
    this.credentials = opts.credentials || '';
    this.token = opts.token || '';
    this.frameRate = opts.frameRate || 0;
    this.forceRate = opts.forceRate ?? 60;
    this.handlers = opts.handlers || {};
    this.autoCreate = opts.autoCreate ?? true;
    this.tool = { kind: 0, radius: DEFAULT_RADIUS, length: 0 };  // ToolShape to join with
    this.friction = null;  // ToolShape.friction {muStatic, muKinetic}; null: the server's default
    this.waiters = new Map();    // request id -> {resolve, reject, timer, arm, onProgress}
    this.gaveUp = new Set();     // ids of requests that timed out (their late replies are ignored)
    this.stream = new FrameStream();
    this.decodeStats = new DecodeStats();
    this.decodeInWorker = false;  // the current keyframe chain goes to the worker
    this.decoder = opts.decoder || null;
    if (this.decoder) {
      this.decoder.onResult = (job, positions, ms, error) => this._onDecoded(job, positions, ms, error);
      this.decoder.onFail = (text) => {
        if (!this.decodeInWorker) return;
        this.decodeInWorker = false;
        this._frameRejected(new Error(text + '; decoding on the main thread'));
      };
    }
    this.state = 'idle';
    this.ws = null;
    this.nextRequestId = 1;
    this.pending = new Map();    // request id -> kind, for matching Errors
    this.joined = null;          // the Joined body, or null
    this.toolId = 0;
    this.toolRadius = DEFAULT_RADIUS;
    this.poseSeq = 0;
    this.reconnectDelay = RECONNECT_MIN_MS;
    this.reconnectTimer = 0;
    this.pingTimer = 0;
    this.stopped = false;
    this.fatal = false;          // an error after which reconnecting is pointless
    this.lastError = null;
  }

  start() {
    this.stopped = false;
    this._open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.pingTimer);
    if (this.ws) this.ws.close(1000, 'bye');
  }

  _setState(s) {
    if (this.state === s) return;
    this.state = s;
    this.handlers.state?.(s);
  }

  _open() {
    this._setState(this.state === 'idle' ? 'connecting' : 'reconnecting');
    let ws;
    try {
      ws = new this.WebSocket(this.url);
    } catch (err) {
      this._fail('cannot open ' + this.url + ': ' + err.message, err);
      this._scheduleReconnect();
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => {
      this._send('hello', { protocolVersion: PROTOCOL_VERSION, clientName: this.clientName,
        credentials: this.credentials });
    };
    ws.onmessage = (ev) => this._onMessage(ev.data);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.joined = null;
      this._rejectWaiters('the connection closed');
      clearInterval(this.pingTimer);
      this._setState('closed');
      if (ev && ev.code && ev.code !== 1000 && ev.code !== 1005) {
        this.handlers.closed?.(ev.code, ev.reason);
      }
      if (!this.stopped && !this.fatal) this._scheduleReconnect();
    };
    ws.onerror = () => { /* onclose follows and carries the outcome */ };
  }

  _scheduleReconnect() {
    clearTimeout(this.reconnectTimer);
    const delay = this.reconnectDelay;
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, RECONNECT_MAX_MS);
    this.reconnectTimer = setTimeout(() => this._open(), delay);
    this._setState('reconnecting');
  }

  _send(kind, body) {
    const ws = this.ws;
    if (!ws || ws.readyState !== 1) return 0;
    const id = this.nextRequestId++;
    // Requests that get a reply are remembered until it comes, so an Error
    // can say what failed; poses and pings (no reply unless they fail) are not.
    if (kind !== 'toolPose' && kind !== 'ping') {
      this.pending.set(id, kind);
      if (this.pending.size > 64) this.pending.delete(this.pending.keys().next().value);
    }
    ws.send(this.protocol.encode(kind, body, id));
    return id;
  }

  _fail(text, err) {
    this.lastError = text;
    this.handlers.error?.(text, err);
  }

  _onMessage(data) {
    let msg;
    try {
      msg = this.protocol.decode(new Uint8Array(data));
    } catch (err) {
      this._fail('message from the server does not decode: ' + err.message, err);
      return;
    }
    const b = msg.body;
    switch (msg.kind) {
      case 'helloReply':
        this.reconnectDelay = RECONNECT_MIN_MS;
        this._setState('connected');
        clearInterval(this.pingTimer);
        this.pingTimer = setInterval(() => this._send('ping', { clientTimeUs: nowMicros() }), PING_INTERVAL_MS);
        if (this.sessionId) this._join();
        else this._lobby();
        break;
      case 'createProgress': {
        const w = this.waiters.get(toNumber(b.requestId));
        if (w && w.arm) {
          clearTimeout(w.timer);
          w.timer = w.arm();
          w.onProgress?.(b);
        }
        break;
      }
      case 'sessionCreated':
        if (this.gaveUp.has(msg.requestId)) {
          // its request timed out and the page said so: not joined
          this.gaveUp.delete(msg.requestId);
          break;
        }
        // its creator drives a tool in it (leaving the session it was in)
        this.sessionId = b.sessionId;
        this.role = Role.CONTROLLER;
        this.token = '';
        this.joined = null;
        this.tool = { kind: 0, radius: DEFAULT_RADIUS, length: 0 };
        this.handlers.session?.(b.sessionId, b);
        this._join();
        break;
      case 'joined':
        this.joined = b;
        this.toolId = b.toolId;
        this.role = b.role;
        this.stream.reset();
        this.handlers.joined?.(b);
        break;
      case 'frame':
        this._onFrame(b);
        break;
      case 'toolForce':
        if (this.joined && b.sessionId === this.sessionId && b.toolId === this.toolId)
          this.handlers.force?.(b);
        break;
      case 'error':
        this._onError(msg.requestId, b);
        break;
      case 'toolHandedOver':
        // this client's tool went to someone else (told without a token, or
        // in the reply when it handed over its own tool): the server made it
        // an observer of the session
        if (this.joined && b.sessionId === this.sessionId &&
            b.toolId === this.toolId && this.role === Role.CONTROLLER) {
          this.role = Role.OBSERVER;
          this.toolId = 0;
          // its controller token is dead: rejoin after a reconnect as a watcher
          if (b.observerToken) this.token = b.observerToken;
          this.joined = { ...this.joined, role: Role.OBSERVER, toolId: 0 };
          this.handlers.handedOver?.(b);
        }
        break;
      case 'trainingProgress':
        if (this.joined && b.sessionId === this.sessionId) this.handlers.training?.(b);
        break;
      case 'sessionList':
      case 'ack':
        break; // answers to request()
      case 'pong':
        this.handlers.rtt?.((nowMicros() - toNumber(b.clientTimeUs)) / 1000);
        break;
      default:
        break; // replies this page does not use and future bodies
    }
    if (msg.requestId) {
      this.pending.delete(msg.requestId);
      const w = this.waiters.get(msg.requestId);
      if (w) {
        this.waiters.delete(msg.requestId);
        clearTimeout(w.timer);
        if (msg.kind === 'error') w.reject(new Error((b.name || 'TS_E?') + (b.message ? ': ' + b.message : '')));
        else w.resolve(b);
      }
    }
  }

  _rejectWaiters(why) {
    for (const w of this.waiters.values()) {
      clearTimeout(w.timer);
      w.reject(new Error(why));
    }
    this.waiters.clear();
  }

  /**
   * Sends a request and resolves with the body of its reply (SessionList,
   * SessionCreated, Ack...); rejects with the server's Error, when the
   * connection is not open or closes, or after timeoutMs.
   */
  request(kind, body, timeoutMs = 15000, onProgress = null) {
    return new Promise((resolve, reject) => {
      const id = this._send(kind, body);
      if (!id) {
        reject(new Error('not connected'));
        return;
      }
      // (re)armed by each progress report of the request: the timeout is
      // for a server that has gone quiet, not for long work it reports on
      const arm = () => setTimeout(() => {
        this.waiters.delete(id);
        // a reply that comes after all is not acted on: the page has
        // reported the failure (a late SessionCreated does not join)
        this.gaveUp.add(id);
        if (this.gaveUp.size > 64) this.gaveUp.delete(this.gaveUp.values().next().value);
        reject(new Error(kind + ': no reply in ' + timeoutMs + ' ms'));
      }, timeoutMs);
      this.waiters.set(id, { resolve, reject, timer: arm(), arm, onProgress });
    });
  }

  /** The server's sessions: resolves with SessionInfo[]. */
  async listSessions() {
    const r = await this.request('listSessions', {});
    return r.sessions || [];
  }

  // Connected without a session: create one if asked to, else wait for the
  // page to create or join one.
  _lobby() {
    if (this.autoCreate === true) {
      this._create();
      return;
    }
    if (this.autoCreate === 'ifNone' && this.credentials) {
      this.listSessions().then((list) => {
        if (!list.length && !this.sessionId && this.state === 'connected') this._create();
        else this.handlers.lobby?.();
      }, () => this.handlers.lobby?.());
      return;
    }
    this.handlers.lobby?.();
  }

  /**
   * Creates a session from a CreateSession body ({name, builtin | mesh,
   * solver}) and joins it as controller when it is made; resolves with the
   * SessionCreated body, rejects with the server's error.
   */
  async createSession(spec, onProgress = null) {
    // progress: the server reports once a second while it builds the
    // tissue (CreateProgress: stage, elapsed seconds, creations ahead),
    // each report restarting the 30 s wait
    const created = await this.request('createSession', { ...spec, progress: true }, 30000, onProgress);
    return created;  // the 'sessionCreated' case has joined it already
  }

  /** Leaves the current session (if any) and joins session `id` in `role`. */
  joinSession(id, role, token = '') {
    this.sessionId = id;
    this.role = role;
    this.token = token;
    this.joined = null;
    this.tool = { kind: 0, radius: DEFAULT_RADIUS, length: 0 };
    this._join();
  }

  /**
   * Drives a tool of another shape (ToolShape.Kind: 0 sphere, 1 capsule, 2
   * jaws) in the current session: joins it again keeping the tool id.
   */
  setTool(kind) {
    this.tool = { kind, radius: DEFAULT_RADIUS, length: kind === 1 ? 0.02 : 0 };
    if (this.joined && this.role === Role.CONTROLLER) this._join(this.toolId);
  }

  /**
   * Coulomb friction of this page's tool on the tissue ({muStatic,
   * muKinetic}, 0 <= muKinetic <= muStatic <= 2; null: the server's default,
   * a steel instrument on wet tissue); kept for every later join, and applied
   * now by joining again with the same tool id.
   */
  setFriction(friction) {
    this.friction = friction ? { muStatic: friction.muStatic, muKinetic: friction.muKinetic } : null;
    if (this.joined && this.role === Role.CONTROLLER) this._join(this.toolId);
  }

  /**
   * HandOverTool (server key): resolves with ToolHandedOver, whose
   * controllerToken opens the tool from now on.
   */
  handOverTool(toolId) { return this.request('handOverTool', { sessionId: this.sessionId, toolId }); }

  /**
   * TrainShortcut ("method", "rich", "spread", "spread2" or "spread2r") and UseShortcut
   * (controllers of a quasi-static session).
   */
  trainShortcut(model) { return this.request('trainShortcut', { sessionId: this.sessionId, model }); }
  useShortcut(learned) { return this.request('useShortcut', { sessionId: this.sessionId, learned }); }

  /**
   * RefineRegion for the current session: {method (0 Loop, 1 LEB),
   * rayOrigin, rayDirection ({x, y, z}), range (m)}; resolves with Refined.
   */
  refineRegion(spec) { return this.request('refineRegion', { sessionId: this.sessionId, ...spec }, 30000); }

  /** ResetSession / EndSession for the current session (controllers). */
  resetSession() { return this.request('resetSession', { sessionId: this.sessionId }); }
  endSession() { return this.request('endSession', { sessionId: this.sessionId }); }

  _create() {
    if (!this.credentials) {
      if (this.autoCreate === true) this.fatal = true;
      this._fail('creating a session needs the server key: open the address tissued printed ' +
        '(it ends in #key=...), or a link to a session');
      return;
    }
    this._send('createSession', { builtin: 'stomach-patch' });
  }

  _join(toolId = 0) {
    this._send('joinSession', {
      token: this.token,
      sessionId: this.sessionId,
      role: this.role,
      toolId,
      tool: this.friction ? { ...this.tool, friction: this.friction } : this.tool,
      frameRate: this.frameRate,
      forceRate: this.forceRate,
    });
  }

  _onFrame(f) {
    if (!this.joined || f.sessionId !== this.sessionId) return;
    // A keyframe starts a chain; it and its deltas are decoded in one place.
    // A chain started here before the worker was ready moves to it, q and all.
    if (f.keyframe) this.decodeInWorker = !!(this.decoder && this.decoder.ready);
    else if (!this.decodeInWorker && this.decoder && this.decoder.ready && this.stream.q) {
      this.decoder.seed(this.stream);
      this.decodeInWorker = true;
    }
    if (this.decodeInWorker) {
      let job;
      try {
        job = this.stream.check(f);
      } catch (err) {
        this._frameRejected(err);
        return;
      }
      this.stream.advance(job);
      this.decoder.submit(job);
      return;
    }
    let key;
    const t0 = now();
    try {
      key = this.stream.apply(f);
    } catch (err) {
      this._frameRejected(err);
      return;
    }
    this.decodeStats.add('main', now() - t0);
    this._shown(key);
  }

  // The worker's answer to a job; frames of a stream reset since are dropped.
  _onDecoded(job, positions, ms, error) {
    if (!this.joined || job.generation !== this.stream.generation) {
      this.decoder.recycle(positions);
      return;
    }
    if (error) {
      this._frameRejected(new Error(error));
      return;
    }
    const old = this.stream.positions;
    try {
      this.stream.show(job, positions);
    } catch (err) {
      this._frameRejected(err);
      return;
    }
    this.decodeStats.add('worker', ms);
    this._shown(job.keyframe);
    // the view points at the new array now (handlers.frame)
    if (old && old !== positions) this.decoder.recycle(old);
  }

  _shown(key) {
    const own = this.stream.tool(this.toolId);
    if (own && own.radius > 0) this.toolRadius = own.radius;
    this.handlers.frame?.(this.stream, key);
  }

  // The held frame no longer matches the stream: join again for a keyframe.
  _frameRejected(err) {
    this._fail('frame rejected: ' + err.message, err);
    this.joined = null;
    this._send('leaveSession', { sessionId: this.sessionId });
    this._join();
  }

  _onError(requestId, e) {
    const kind = this.pending.get(requestId);
    const text = (e.name || 'TS_E?') + (e.message ? ': ' + e.message : '') + (kind ? ' (' + kind + ')' : '');
    if (e.name === 'TS_EVERSION' || (e.name === 'TS_EAUTH' && kind !== 'createSession')) this.fatal = true;
    if (!requestId && e.name === 'TS_ENOSESSION' && this.joined) {
      // The session this client was in ended (a controller ended it).
      const id = this.sessionId;
      this.joined = null;
      this.sessionId = 0;
      this.token = '';
      this.handlers.ended?.(id, text);
      return;
    }
    if (kind === 'joinSession' && e.name === 'TS_ENOSESSION' && this.role === Role.CONTROLLER &&
        this.credentials) {
      // The session is gone (daemon restarted): start a new one.
      this._fail(text + '; creating a new session', e);
      this.sessionId = 0;
      this.token = '';
      this._create();
      return;
    }
    this._fail(text, e);
  }

  /**
   * Sends a ToolPose for this client's tool (position in metres, jaw 0
   * closed .. 1 open); false when it could not.
   */
  sendPose(position, jaw = 1) {
    const ws = this.ws;
    if (!this.joined || this.role !== Role.CONTROLLER || !ws || ws.readyState !== 1) return false;
    if (ws.bufferedAmount > MAX_BUFFERED_BYTES) return false;
    this._send('toolPose', {
      toolId: this.toolId,
      seq: ++this.poseSeq,
      clientTimeUs: nowMicros(),
      position,
      orientation: { w: 1, x: 0, y: 0, z: 0 },
      jaw,
    });
    return true;
  }
}
