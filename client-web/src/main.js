// main.js: the page's entry point. Loads the protocol from the daemon, opens
// the session client (joining ?session=N&role=observer|controller, or
// creating a session and joining it as controller), builds the three.js view
// on the first keyframe and updates it on every frame, lets a controller
// drive its tool with the mouse, and keeps the overlay and the test hook
// (window.tissued) current.

import { loadProtocol, Role } from './protocol.js';
import { SessionClient } from './connection.js';
import { Overlay } from './overlay.js';

// Read by the tests instead of pixels.
const hook = {
  state: 'connecting',
  sessionId: 0,
  role: '',
  frames: 0,
  keyframes: 0,
  vertexCount: 0,
  positions: null,
  simTime: 0,
  toolId: 0,
  force: null,
  forceMessages: 0,
  observerLink: '',             // the watch link this page hands out ('' if none)
  fps: 0,
  lastError: null,
  errors: [],
  webgl: true,
};
window.tissued = hook;

const overlay = new Overlay();

function showError(text) {
  hook.lastError = text;
  hook.errors.push(text);
  if (hook.errors.length > 50) hook.errors.shift();
  overlay.error(text);
}

const KEY_STORE = 'tissued.serverKey';

// The server key: from the address tissued printed (#key=..., then kept in
// this browser and taken out of the address bar so it is not shared by
// accident), else what this browser kept. '' when neither.
function serverKey() {
  const m = /(?:^#|&)key=([^&]+)/.exec(location.hash);
  let key = '';
  try {
    if (m) {
      key = decodeURIComponent(m[1]);
      localStorage.setItem(KEY_STORE, key);
    } else {
      key = localStorage.getItem(KEY_STORE) || '';
    }
  } catch {
    // storage refused (private mode): the key lives only in this page
  }
  if (m) history.replaceState(null, '', location.pathname + location.search);
  return key;
}

function parseQuery() {
  const q = new URLSearchParams(location.search);
  const sessionId = Number.parseInt(q.get('session') || '0', 10);
  const role = q.get('role') === 'observer' ? Role.OBSERVER : Role.CONTROLLER;
  if (q.has('session') && !(sessionId > 0)) showError('ignoring bad ?session=' + q.get('session'));
  return { sessionId: sessionId > 0 ? sessionId : 0, role, token: q.get('token') || '' };
}

// This page's own address: the session, the role and the token it joined
// with (never the server key).
function pageUrl(sessionId, role, token) {
  const u = new URL(location.href);
  u.hash = '';
  u.searchParams.set('session', String(sessionId));
  u.searchParams.set('role', role === Role.OBSERVER ? 'observer' : 'controller');
  if (token) u.searchParams.set('token', token);
  else u.searchParams.delete('token');
  return u;
}

async function loadView() {
  // Loaded lazily so that a browser without WebGL still connects, decodes
  // and reports through the overlay and the hook.
  try {
    const [{ TissueView }, { ToolPointer }] = await Promise.all([
      import('./scene.js'), import('./pointer.js')]);
    const view = new TissueView(document.getElementById('view'));
    return { view, ToolPointer };
  } catch (err) {
    hook.webgl = false;
    showError('3D view unavailable: ' + err.message);
    return { view: null, ToolPointer: null };
  }
}

async function start() {
  overlay.state('connecting');
  if (typeof protobuf === 'undefined') throw new Error('protobuf.min.js did not load');
  const protocol = await loadProtocol(protobuf, '/proto/tissue.proto');
  const { view, ToolPointer } = await loadView();

  const { sessionId, role, token } = parseQuery();
  const credentials = serverKey();
  // The link to hand out: watch this session (the observer token), set once
  // the session's creator has its tokens.
  let observerLink = '';
  const wsUrl = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
  let builtFor = -1;            // topologyVersion the view's mesh was built for
  let pointer = null;
  const fpsWindow = [];          // receive times of the last second's frames

  const client = new SessionClient({
    url: wsUrl, protocol, WebSocket, sessionId, role, clientName: 'web', credentials, token,
    handlers: {
      state(s) {
        hook.state = s;
        overlay.state(s);
        if (s !== 'connected') pointer?.setEnabled(false);
      },
      session(id, created) {
        hook.sessionId = id;
        if (created && created.observerToken)
          observerLink = pageUrl(id, Role.OBSERVER, created.observerToken).href;
        hook.observerLink = observerLink;
        history.replaceState(null, '', pageUrl(id, client.role, client.token));
        overlay.session(id, observerLink);
      },
      joined(j) {
        const isController = j.role === Role.CONTROLLER;
        hook.sessionId = j.sessionId;
        hook.toolId = isController ? j.toolId : 0;
        hook.role = isController ? 'controller' : 'observer';
        hook.vertexCount = j.vertexCount;
        const url = pageUrl(j.sessionId, j.role, client.token);
        history.replaceState(null, '', url);
        overlay.session(j.sessionId, observerLink || (j.role === Role.OBSERVER ? url.href : ''));
        overlay.role(hook.role, hook.toolId);
        overlay.error('');  // joined again: what went wrong before is over
        overlay.vertices(j.vertexCount);
        if (view) view.setOwnTool(hook.toolId);
        pointer?.setEnabled(isController, client.toolRadius);
        // A new tool waits above the tissue until the pointer brings it down.
        if (isController) {
          if (pointer) pointer.park();
          else client.sendPose({ x: 0, y: 0.03, z: 0 });
        }
      },
      frame(stream, isKey) {
        hook.frames++;
        if (isKey) hook.keyframes++;
        hook.vertexCount = stream.vertexCount;
        hook.positions = stream.positions;
        hook.simTime = stream.simTime;
        const now = performance.now();
        fpsWindow.push(now);
        while (fpsWindow.length && fpsWindow[0] < now - 1000) fpsWindow.shift();
        if (view) {
          if (stream.topologyVersion !== builtFor) {
            view.setTopology(stream);
            builtFor = stream.topologyVersion;
          }
          view.update(stream);
        }
        const own = hook.toolId ? stream.tool(hook.toolId) : null;
        if (pointer && own && own.radius > 0) pointer.radius = own.radius;
        overlay.behind((stream.flags & 1) !== 0);
      },
      force(m) {
        // the controller's own ToolForce messages (filtered by the server)
        const f = m.force || {};
        hook.force = { x: f.x || 0, y: f.y || 0, z: f.z || 0 };
        hook.forceMessages++;
      },
      error(text) { showError(text); },
      rtt(ms) { overlay.rtt(ms); },
      closed(code, reason) { showError('connection closed: ' + code + (reason ? ' ' + reason : '')); },
    },
  });
  hook.client = client;

  if (view) {
    pointer = new ToolPointer(view, (pose) => client.sendPose(pose.position));
  }
  // The overlay's numbers are refreshed a few times a second, not per frame.
  setInterval(() => {
    const now = performance.now();
    while (fpsWindow.length && fpsWindow[0] < now - 1000) fpsWindow.shift();
    hook.fps = fpsWindow.length;
    overlay.fps(hook.fps);
    overlay.vertices(hook.vertexCount);
    overlay.force(hook.force);
  }, 250);

  client.start();
}

start().catch((err) => {
  hook.state = 'failed';
  overlay.state('failed');
  showError(err.message);
});
