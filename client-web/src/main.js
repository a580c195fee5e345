// main.js: the page's entry point. Loads the protocol from the daemon, opens
// the session client (joining ?session=N&role=observer|controller; with the
// server key and no session given, creating one when the server has none),
// builds the three.js view on the first keyframe and updates it on every
// frame, lets a controller drive its tool with the mouse, one finger or a
// gamepad and choose and work it with the tool controls, and wires the
// sessions, layers (with cut-away), training, lesion marking, session
// (instructor) and hand-over panels, the force plot and the link health to
// the overlay and the test hook (window.tissued).

import { loadProtocol, Role } from './protocol.js';
import { SessionClient } from './connection.js';
import { Overlay } from './overlay.js';
import { ForcePlot } from './forceplot.js';
import { LinkHealth } from './health.js';
import { SessionsPanel } from './sessions.js';
import { ToolControls } from './tools.js';
import { LayersPanel } from './layers.js';
import { InstructorControls } from './instructor.js';
import { TrainingPanel } from './training.js';
import { LesionMarker } from './lesion.js';
import { HandOverControls } from './handover.js';
import { GamepadDriver } from './gamepad.js';
import { FrameDecoder } from './framedecoder.js';

const QUASI_STATIC = 3;  // Solver.SOLVER_QUASI_STATIC: refined inside its solve, not live

// Read by the tests instead of pixels.
const hook = {
  state: 'connecting',
  sessionId: 0,
  role: '',
  frames: 0,
  keyframes: 0,
  vertexCount: 0,
  positions: null,
  seq: 0,                       // seq of the frame shown
  decode: null,                 // where frames are decoded and how long it takes (DecodeStats)
  simTime: 0,
  toolId: 0,
  force: null,
  forceMessages: 0,
  observerLink: '',             // the watch link this page hands out ('' if none)
  fps: 0,
  latencyMs: null,              // pose-to-frame latency (median of the last few), ms
  degraded: '',                 // the connection warning shown, '' when none
  watchers: 0,                  // participants of this session (ListSessions)
  sessions: [],                 // the server's sessions, as last listed
  solver: 0,                    // this session's solver (Solver enum)
  toolKind: 0,                  // ToolShape.Kind this page drives
  friction: 'wet',              // the tool's friction setting (tools.js Friction)
  joins: 0,                     // Joined replies this page has had
  joinedFriction: null,         // ToolShape.friction of the last join as controller (null: default)
  jaw: 1,                       // grasper: 0 closed .. 1 open
  plot: { count: 0, nonZero: 0, points: 0 },  // force plot samples
  layers: [],                   // [{name, triangles, visible}]
  resets: 0,                    // acknowledged ResetSession requests
  ended: '',                    // why this page's session ended ('' while it runs)
  training: null,                // training panel state (training.js snapshot)
  handover: null,               // the last hand-over this page made: {toolId, link}
  handedOver: 0,                // times this page's tool was handed to someone else
  cutaway: [],                  // names of the layers clipped by the cut-away plane
  lesion: null,                 // lesion marker state (lesion.js snapshot)
  toolShapes: () => [],         // the tools as drawn (toolshapes.js describe())
  tissueBuffers: () => null,    // {position, normal}: the tissue geometry's arrays
  render: () => null,           // the view's counts: {frames, drawn, renders, uploadMs, renderMs}
  layerAt: () => null,          // (x, y): the layer drawn first there {name, distance, facing} (scene.js)
  cameraDistance: () => 0,      // m from the camera to the point it orbits
  touch: { presses: 0, gestures: 0 },  // one-finger presses, two-finger gestures
  gamepad: { pad: '', moves: 0 },      // the pad in use and the positions it sent
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
    const [{ TissueView }, { ToolPointer }, { TouchGestures }, { CutAway }] = await Promise.all([
      import('./scene.js'), import('./pointer.js'), import('./touch.js'), import('./cutaway.js')]);
    const view = new TissueView(document.getElementById('view'));
    return { view, ToolPointer, TouchGestures, cutaway: new CutAway(view) };
  } catch (err) {
    hook.webgl = false;
    showError('3D view unavailable: ' + err.message);
    return { view: null, ToolPointer: null, TouchGestures: null, cutaway: null };
  }
}

const NO_KEY_TEXT = 'creating a session needs the server key: open the address tissued printed ' +
  '(it ends in #key=...), or a link to a session';

async function start() {
  overlay.state('connecting');
  if (typeof protobuf === 'undefined') throw new Error('protobuf.min.js did not load');
  const protocol = await loadProtocol(protobuf, '/proto/tissue.proto');
  const { view, ToolPointer, TouchGestures, cutaway } = await loadView();
  if (view) {
    hook.toolShapes = () => view.toolShapes.describe();
    hook.cameraDistance = () => view.camera.position.distanceTo(view.controls.target);
    // the tissue's GPU-side arrays (the same objects from frame to frame until
    // the topology changes) and the view's render counts (scene.js stats)
    hook.tissueBuffers = () => view.geometry &&
      { position: view.geometry.attributes.position.array, normal: view.geometry.attributes.normal.array };
    hook.render = () => ({ ...view.stats });
    hook.layerAt = (x, y) => view.layerAt(x, y);
  }

  const { sessionId, role, token } = parseQuery();
  const credentials = serverKey();
  // The link to hand out: watch this session (the observer token), set once
  // the session's creator has its tokens.
  let observerLink = '';
  const wsUrl = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
  let builtFor = -1;            // topologyVersion the view and layer list were built for
  let pointer = null;
  let parkedAt = null;          // where a tool waits before the pointer moves it
  const health = new LinkHealth();
  const plot = new ForcePlot(document.getElementById('fp-canvas'), document.getElementById('fp-value'));
  const plotSection = document.getElementById('plot');
  // A "cut away" toggle beside each layer's checkbox.
  function cutToggle(row, name, i) {
    if (!cutaway) return;
    const span = document.createElement('span');
    span.className = 'cut';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.id = 'ly-cut-' + i;
    box.dataset.cut = name;
    box.checked = cutaway.cut.has(name);
    const label = document.createElement('label');
    label.htmlFor = box.id;
    label.textContent = 'cut away';
    label.title = 'clip this layer and the ones above it through the tool';
    box.setAttribute('aria-label', 'cut away ' + name + ' and the layers above it');
    box.addEventListener('change', () => {
      cutaway.setCut(name, box.checked);
      hook.cutaway = cutaway.clipped.slice();
    });
    span.append(box, label);
    row.appendChild(span);
  }
  const layers = new LayersPanel(view, () => { hook.layers = layers.layers.map((l) => ({ ...l })); }, cutToggle);
  let client = null;
  let toolCount = { sessionId: 0, n: 0 };  // tools of the session this page created (its tokens)
  const TOOLS_DEFAULT = 4;                   // the daemon's max-tools default

  // The current session's solver and participants, from ListSessions.
  function sessionListed(list) {
    hook.sessions = list.map((s) => ({ sessionId: s.sessionId, name: s.name, tissue: s.tissue,
      solver: s.solver, clients: s.clients, vertexCount: s.vertexCount, learned: !!s.learned,
      samples: Number(s.samples || 0) }));
    const mine = list.find((s) => s.sessionId === hook.sessionId);
    hook.watchers = mine ? mine.clients : 0;
    overlay.watchers(hook.watchers);
    if (mine) {
      hook.solver = mine.solver;
      tools.setSolver(mine.solver);
      training.setSolver(mine.solver);
      lesion.setEnabled(hook.role === 'controller' && mine.solver !== QUASI_STATIC);
      training.info(mine);
      hook.training = training.snapshot();
    }
  }

  function sendJaw() {
    const at = pointer?.sent || parkedAt;
    if (at) client.sendPose(at, hook.jaw);
  }

  const tools = new ToolControls({
    onKind(kind) {
      hook.toolKind = kind;
      hook.jaw = 1;
      plot.clear();
      client.setTool(kind);
    },
    onJaw(jaw) {
      hook.jaw = jaw;
      sendJaw();
    },
    onFriction(name, mu) {
      hook.friction = name;
      client.setFriction(mu);
    },
  });

  function leftSession(text) {
    hook.sessionId = 0;
    hook.role = '';
    hook.toolId = 0;
    hook.watchers = 0;
    hook.vertexCount = 0;
    hook.positions = null;
    hook.force = null;
    hook.ended = text;
    health.left();
    pointer?.setEnabled(false);
    tools.joined(false, 0, 0);
    instructor.setEnabled(false);
    lesion.setEnabled(false);
    handover.set(false);
    training.setSolver(0);
    hook.training = null;
    plotSection.hidden = true;
    view?.clear();
    layers.setTopology(null);
    hook.layers = [];
    builtFor = -1;
    overlay.session(0, '');
    overlay.behind(false);
    overlay.role('', 0);
    overlay.watchers(0);
    overlay.error(text);
    sessions.setCurrent(0);
    history.replaceState(null, '', location.pathname);
  }

  // Frames are decoded in a worker unless the address says ?decode=main
  // (or the browser cannot run it): then on this thread.
  const decoder = new URLSearchParams(location.search).get('decode') === 'main'
    ? null : new FrameDecoder('/src/decode_worker.js');
  client = new SessionClient({
    url: wsUrl, protocol, WebSocket, sessionId, role, clientName: 'web', credentials, token,
    autoCreate: 'ifNone', decoder,
    handlers: {
      state(s) {
        hook.state = s;
        overlay.state(s);
        health.setState(s);
        if (s !== 'connected') {
          pointer?.setEnabled(false);
          overlay.behind(false);
        } else {
          sessions.refresh();
        }
      },
      lobby() {
        if (!credentials && !client.sessionId) showError(NO_KEY_TEXT);
        sessions.refresh();
      },
      session(id, created) {
        hook.sessionId = id;
        hook.ended = '';
        observerLink = created && created.observerToken
          ? pageUrl(id, Role.OBSERVER, created.observerToken).href : '';
        if (created && created.controllerTokens) toolCount = { sessionId: id, n: created.controllerTokens.length };
        hook.observerLink = observerLink;
        history.replaceState(null, '', pageUrl(id, client.role, client.token));
        overlay.session(id, observerLink);
      },
      joined(j) {
        const isController = j.role === Role.CONTROLLER;
        if (j.sessionId !== hook.sessionId) {
          // another session than the one this page created: its watch link is not ours
          if (!(observerLink && new URL(observerLink).searchParams.get('session') === String(j.sessionId)))
            observerLink = '';
          hook.observerLink = observerLink;
          hook.solver = 0;
        }
        hook.sessionId = j.sessionId;
        hook.ended = '';
        hook.toolId = isController ? j.toolId : 0;
        hook.role = isController ? 'controller' : 'observer';
        hook.vertexCount = j.vertexCount;
        hook.toolKind = isController ? client.tool.kind : 0;
        hook.joinedFriction = isController && client.friction ? { ...client.friction } : null;
        hook.joins++;
        hook.jaw = 1;
        const url = pageUrl(j.sessionId, j.role, client.token);
        history.replaceState(null, '', url);
        overlay.session(j.sessionId, observerLink || (j.role === Role.OBSERVER ? url.href : ''));
        overlay.role(hook.role, hook.toolId);
        overlay.error('');  // joined again: what went wrong before is over
        overlay.vertices(j.vertexCount);
        health.joined(hook.toolId, j.frameRate);
        sessions.setCurrent(j.sessionId);
        const known = sessions.sessions.find((s) => s.sessionId === j.sessionId);
        if (known) hook.solver = known.solver;
        tools.joined(isController, hook.solver, hook.toolKind);
        // the key's holder (the instructor) whatever the role: a class's
        // session whose tools are all taken is still theirs to reset and end
        instructor.setEnabled(isController || !!credentials);
        lesion.setEnabled(isController && hook.solver !== QUASI_STATIC);
        training.joined(j.sessionId, hook.solver, isController, true);
        hook.training = training.snapshot();
        handover.set(!!credentials, toolCount.sessionId === j.sessionId && toolCount.n ? toolCount.n : TOOLS_DEFAULT,
          hook.toolId);
        handedNote.hidden = true;
        plotSection.hidden = !isController;
        plot.clear();
        if (view) view.setOwnTool(hook.toolId);
        pointer?.setEnabled(isController, client.toolRadius);
        // A new tool waits above the tissue until the pointer brings it down.
        if (isController) {
          parkedAt = { x: 0, y: 0.03, z: 0 };
          if (pointer) pointer.park();
          else client.sendPose(parkedAt, 1);
        }
        sessions.refresh();
      },
      ended(id, text) {
        leftSession('session ' + id + ' ended');
        hook.ended = text;
      },
      frame(stream, isKey) {
        hook.frames++;
        if (isKey) hook.keyframes++;
        hook.vertexCount = stream.vertexCount;
        hook.positions = stream.positions;
        hook.seq = stream.seq;
        hook.decode = client.decodeStats;
        hook.simTime = stream.simTime;
        if (hook.frames % 30 === 1) overlay.decode(client.decodeStats);
        health.frame(stream);
        if (stream.topologyVersion !== builtFor) {
          if (view) view.setTopology(stream);
          cutaway?.apply();
          layers.setTopology(stream.topology);
          hook.layers = layers.layers.map((l) => ({ ...l }));
          builtFor = stream.topologyVersion;
        }
        if (view) view.update(stream);
        const own = hook.toolId ? stream.tool(hook.toolId) : null;
        if (pointer && own && own.radius > 0) pointer.radius = own.radius;
        cutaway?.follow(own && own.position ? own.position.z || 0 : NaN);
        training.frame(stream.flags);
        overlay.behind((stream.flags & 1) !== 0);
      },
      force(m) {
        // the controller's own ToolForce messages (filtered by the server)
        const f = m.force || {};
        hook.force = { x: f.x || 0, y: f.y || 0, z: f.z || 0 };
        hook.forceMessages++;
        plot.add(hook.force, performance.now());
      },
      handedOver(m) {
        // the instructor gave this page's tool to someone else: watch from now on
        // (the address becomes a watch link, so a reload or reconnect watches)
        hook.handedOver++;
        hook.role = 'observer';
        history.replaceState(null, '', pageUrl(hook.sessionId, Role.OBSERVER, client.token));
        hook.toolId = 0;
        hook.toolKind = 0;
        pointer?.setEnabled(false);
        tools.joined(false, hook.solver, 0);
        instructor.setEnabled(!!credentials);
        lesion.setEnabled(false);
        training.joined(hook.sessionId, hook.solver, false);
        hook.training = training.snapshot();
        handover.set(!!credentials, handover.toolCount || TOOLS_DEFAULT, 0);
        plotSection.hidden = true;
        if (view) view.setOwnTool(0);
        overlay.role('observer', 0);
        health.joined(0, client.joined?.frameRate || 0);
        handedNote.textContent = 'tool ' + m.toolId + ' was handed to someone else: you are watching now';
        handedNote.hidden = false;
      },
      training(p) {
        training.progress(p);
        hook.training = training.snapshot();
      },
      error(text) { showError(text); },
      rtt(ms) { overlay.rtt(ms); },
      closed(code, reason) { showError('connection closed: ' + code + (reason ? ' ' + reason : '')); },
    },
  });
  hook.client = client;

  const sessions = new SessionsPanel({
    client,
    hasKey: !!credentials,
    onList: sessionListed,
    onCreated(created, spec) {
      hook.solver = spec.solver || 1;
      tools.setSolver(hook.solver);
      training.setSolver(hook.solver);
    },
  });
  const instructor = new InstructorControls(client, (what, err) => {
    if (what === 'reset' && !err) hook.resets = instructor.resets;
    if (what === 'end' && !err) leftSession('session ended');
  });

  const training = new TrainingPanel(client, () => { hook.training = training.snapshot(); });
  const handedNote = document.getElementById('st-handed');
  const handover = new HandOverControls(client,
    (sid, token) => pageUrl(sid, Role.CONTROLLER, token).href,
    (r) => { if (!r.error) hook.handover = r; });

  const lesion = new LesionMarker(client, view, () => { hook.lesion = lesion.snapshot(); });
  hook.lesion = lesion.snapshot();
  let touch = null;
  if (view) {
    pointer = new ToolPointer(view, (pose) => client.sendPose(pose.position, hook.jaw));
    touch = new TouchGestures(view, pointer);
  }
  const gamepad = new GamepadDriver({
    position() {
      if (!hook.toolId) return null;
      return pointer?.sent || parkedAt;
    },
    move(p) {
      if (!client.sendPose(p, hook.jaw)) return false;
      if (pointer) pointer.sent = p;
      else parkedAt = p;
      return true;
    },
    jaw() { tools.toggleJaw(); },
  });
  // The overlay's numbers are refreshed a few times a second, not per frame.
  setInterval(() => {
    const fps = health.fps();
    hook.fps = fps;
    const lat = health.medianLatency();
    hook.latencyMs = Number.isFinite(lat) ? lat : null;
    hook.degraded = health.problem(fps);
    hook.plot.count = plot.count;
    hook.plot.nonZero = plot.nonZero;
    hook.plot.points = plot.points();
    if (touch) hook.touch = { presses: touch.touchPresses, gestures: touch.gestures };
    hook.gamepad = { pad: gamepad.pad, moves: gamepad.moves };
    overlay.fps(fps);
    overlay.latency(lat);
    overlay.degraded(hook.degraded);
    overlay.vertices(hook.vertexCount);
    overlay.force(hook.force);
    plot.updateLabel();
  }, 250);

  client.start();
}

start().catch((err) => {
  hook.state = 'failed';
  overlay.state('failed');
  showError(err.message);
});
