// sessions.js: the sessions panel: the server's sessions (name, tissue,
// solver, participants) refreshed every few seconds with ListSessions, a
// form that creates one (the built-in tissue, one stored from an earlier
// upload, which the form can also delete, or an uploaded OBJ/STL/PLY file
// with a scale, the mass-spring or XPBD solver, and for each of the three
// layers a stored material fit by name or the layer's built-in law), and
// buttons that join one
// as controller or observer, or end one. Creating and joining need the server key (it
// opens any session); without it the panel says how to get one.
//
// Rows are kept per session id and updated in place, so a refresh neither
// rebuilds the table nor takes the keyboard focus away from a button.

import { Role } from './protocol.js';

const REFRESH_MS = 3000;
export const SOLVER_NAMES = { 0: 'default', 1: 'mass-spring', 2: 'XPBD', 3: 'quasi-static' };
const FORMATS = { obj: 0, stl: 1, ply: 2 };  // MeshUpload.Format
const MAX_UPLOAD_BYTES = 64 * 1024 * 1024;
// The layers of the built-in patch (and of an upload's default layers),
// outermost first, and the tissue their material fits are stored under.
export const LAYERS = Object.freeze(['mucosa', 'submucosa', 'muscularis']);
const FIT_TISSUE = 'stomach';
const BUILTIN_TISSUE = 'stomach-patch';  // the tissue select's first option

/** The fit names that each layer can take: those stored for it in both
 *  directions (a session needs both), "default" (the shipped table) first,
 *  the rest in order. fits: MaterialFit[] of ListMaterials. */
export function materialChoices(fits) {
  return LAYERS.map((layer) => {
    const dirs = new Map();
    for (const f of fits) {
      if (f.layer !== layer || !f.name) continue;
      if (!dirs.has(f.name)) dirs.set(f.name, new Set());
      dirs.get(f.name).add(f.direction);
    }
    return [...dirs].filter(([, d]) => d.has('axial') && d.has('radial')).map(([n]) => n)
      .sort((a, b) => (a === 'default' ? -1 : b === 'default' ? 1 : a < b ? -1 : a > b ? 1 : 0));
  });
}

const $ = (id) => document.getElementById(id);

// "XPBD live": one XPBD step per 60 Hz frame of 4 substeps of 4 sweeps
// (CreateSession.dt, .substeps, .iterations), which keeps a mesh as large as
// the liver up with wall time on one core, at the price of a tissue that
// acts softer than its material (README, "Live sessions of large meshes").
export const LIVE_XPBD = Object.freeze({ solver: 2, dt: 1 / 60, substeps: 4, iterations: 4 });

// SessionInfo.SelfContactOff
const SELF_OFF = { 1: 'over the node limit', 2: 'could not be set up' };

/** The sessions panel's words for a session's tissue self-contact: '' when it
 *  was not asked for. */
export function selfContactText(s) {
  if (s.selfContact) return 'self-contact';
  const off = SELF_OFF[s.selfContactOff];
  return off ? 'self-contact off: ' + off : '';
}

/** The session list's note on a session whose tissue is at rest
 *  (SessionInfo.asleep): '' when it is not. */
export function restTitle(s) {
  return s.asleep ? 'at rest: the tissue has settled and its steps cost next to nothing ' +
    'until a tool comes near' : '';
}

/** The session list's note on a session a slow physics thread of the daemon steps
 *  (SessionInfo.slowLane, server/lane.h): '' when it is not. */
export function laneTitle(s) {
  if (!s.slowLane) return '';
  const load = Number(s.stepLoad) > 0 ? ` (${Number(s.stepLoad).toPrecision(3)}x)` : '';
  return 'slower than real time: its steps take more CPU time than they simulate' + load +
    ', so the daemon steps it on a thread of its own kind, without holding back other sessions';
}

// CreateProgress.Stage, in the words of the panel's status line
const CREATE_STAGES = {
  1: 'reading the mesh',
  2: 'extruding the layers',
  3: 'building the springs and the stable step',
  4: 'setting up the solver',
  5: 'storing the tissue',
};

/** The status line while the server builds a new session's tissue
 *  (CreateProgress: {stage, elapsed, ahead}). */
export function progressText(p) {
  const s = Math.round(Number(p.elapsed) || 0) + ' s';
  const stage = Number(p.stage) || 0;
  if (stage === 0) {
    const ahead = Number(p.ahead) || 0;
    return 'creating: waiting for ' + (ahead === 1 ? '1 other creation' : ahead ? ahead +
      ' other creations' : 'the server') + ', ' + s;
  }
  return 'creating: ' + (CREATE_STAGES[stage] || 'working') + ', ' + s;
}

export class SessionsPanel {
  /**
   * client: SessionClient; hasKey: whether the page knows the server key;
   * onList(sessions): called with SessionInfo[] after every refresh;
   * onCreated(sessionCreated, spec): after the server made a session for
   * this page.
   */
  constructor({ client, hasKey, onList, onCreated }) {
    this.client = client;
    this.hasKey = hasKey;
    this.onList = onList;
    this.onCreated = onCreated;
    this.rows = new Map();      // session id -> { tr, cells: {...} }
    this.sessions = [];
    this.currentId = 0;
    this.el = {
      rows: $('ss-rows'),
      empty: $('ss-empty'),
      nokey: $('ss-nokey'),
      form: $('ss-form'),
      details: $('ss-new'),
      name: $('ss-name'),
      tissue: $('ss-tissue'),
      deleteStored: $('ss-tissue-delete'),
      fileRow: $('ss-file-row'),
      file: $('ss-file'),
      scale: $('ss-scale'),
      solver: $('ss-solver'),
      materials: LAYERS.map((_, i) => $('ss-mat-' + i)),
      create: $('ss-create'),
      status: $('ss-status'),
      msg: $('ss-msg'),
    };
    this.el.nokey.hidden = hasKey;
    this.el.details.hidden = !hasKey;
    this.el.tissue.addEventListener('change', () => this._tissueChanged());
    this.el.deleteStored.addEventListener('click', () => this._deleteStored());
    // the stored fits, asked for each time the form opens (a fit made
    // meanwhile with tissuectl or tissuetool shows up)
    this.el.details.addEventListener('toggle', () => {
      if (!this.el.details.open) return;
      this.loadMaterials();
      this.loadTissues();
    });
    this.el.form.addEventListener('submit', (e) => {
      e.preventDefault();
      this._create();
    });
    this._tissueChanged();
    this.timer = setInterval(() => this.refresh(), REFRESH_MS);
  }

  /** Marks the session this page is in (0: none). */
  setCurrent(id) {
    this.currentId = id;
    for (const [sid, r] of this.rows) this._mark(sid, r);
  }

  _tissueChanged() {
    const upload = this.el.tissue.value === 'upload';
    this.el.fileRow.hidden = !upload;
    this.el.file.required = upload;
    // a stored tissue keeps the layers (and materials) it was uploaded with
    const stored = this._stored();
    for (const sel of this.el.materials) sel.disabled = stored;
    this.el.deleteStored.hidden = !stored;
  }

  /** Deletes the stored upload chosen (DeleteTissue) after asking. One
   *  with learned models or material fits stored under it is deleted with
   *  them only after a second question that says how many; one in use by
   *  a session is refused by the server, which names the sessions. */
  async _deleteStored() {
    const name = this.el.tissue.value;
    if (!this._stored()) return;
    if (!window.confirm(`Delete the stored tissue "${name}" from the server? No session can be made of it afterwards.`)) return;
    this.el.deleteStored.disabled = true;
    try {
      try {
        await this.client.request('deleteTissue', { name });
      } catch (err) {
        if (!/^TS_EBUSY: .* stored with it/.test(err.message)) throw err;
        const what = err.message.replace(/^TS_EBUSY: /, '').replace(/;.*$/, '');
        if (!window.confirm(what + '. Delete them too?')) {
          this._status('kept the stored tissue ' + name);
          return;
        }
        await this.client.request('deleteTissue', { name, withRecords: true });
      }
      this._status('deleted the stored tissue ' + name);
      await this.loadTissues();
    } catch (err) {
      this._status(err.message, true);
    } finally {
      this.el.deleteStored.disabled = false;
    }
  }

  /** Whether the tissue chosen is a stored upload (neither the built-in
   *  patch nor a new upload). */
  _stored() {
    const v = this.el.tissue.value;
    return v !== 'upload' && v !== BUILTIN_TISSUE;
  }

  /** Asks the server for the tissues stored from earlier uploads and offers
   *  them between the built-in patch and a new upload; a choice still
   *  offered is kept. */
  async loadTissues() {
    if (this.client.state !== 'connected') return;
    let tissues;
    try {
      tissues = (await this.client.request('listTissues', {})).tissues || [];
    } catch {
      return;  // the built-in patch and uploads stay on offer
    }
    const sel = this.el.tissue, keep = sel.value;
    for (const o of [...sel.options]) if (o.dataset.stored) o.remove();
    const upload = [...sel.options].find((o) => o.value === 'upload');
    for (const t of tissues) {
      if (t.kind !== 'mesh' || t.name === 'upload') continue;  // (that value is the new upload's)
      const o = new Option(t.name + ' (stored upload)', t.name);
      o.dataset.stored = '1';
      sel.add(o, upload);
    }
    sel.value = [...sel.options].some((o) => o.value === keep) ? keep : BUILTIN_TISSUE;
    this._tissueChanged();
  }

  /** Asks the server for its stored material fits and offers, per layer,
   *  the names it can take; a choice still offered is kept. */
  async loadMaterials() {
    if (this.client.state !== 'connected') return;
    let fits;
    try {
      fits = (await this.client.request('listMaterials', { tissue: FIT_TISSUE })).fits || [];
    } catch {
      return;  // the built-in laws stay on offer; the next opening asks again
    }
    const choices = materialChoices(fits);
    this.el.materials.forEach((sel, i) => {
      const keep = sel.value;
      while (sel.options.length > 1) sel.remove(1);
      for (const name of choices[i]) sel.add(new Option(name, name));
      sel.value = choices[i].includes(keep) ? keep : '';
    });
  }

  /** Asks the server for its sessions and updates the table. */
  async refresh() {
    if (this.client.state !== 'connected' || this.busy) return;
    this.busy = true;
    try {
      const list = await this.client.listSessions();
      this.sessions = list;
      this._render(list);
      this.onList?.(list);
    } catch {
      // the next refresh tries again; a closed connection is shown elsewhere
    } finally {
      this.busy = false;
    }
  }

  _render(list) {
    const seen = new Set();
    for (const s of list) {
      seen.add(s.sessionId);
      let r = this.rows.get(s.sessionId);
      if (!r) {
        r = this._row(s);
        this.rows.set(s.sessionId, r);
        this.el.rows.appendChild(r.tr);
      }
      r.cells.name.textContent = s.name || ('session ' + s.sessionId);
      r.cells.tissue.textContent = s.tissue || '–';
      r.cells.solver.textContent = SOLVER_NAMES[s.solver] || String(s.solver);
      r.tr.dataset.solver = r.cells.solver.textContent;
      this._self(r, s);
      r.cells.clients.textContent = String(s.clients || 0);
      // at rest: marked by the row's style (a note after the solver's name)
      r.tr.classList.toggle('at-rest', !!s.asleep);
      // slower than real time: the row's style too (after the solver's name)
      r.tr.classList.toggle('slow-lane', !!s.slowLane);
      r.cells.solver.title = [restTitle(s), laneTitle(s)].filter(Boolean).join('; ');
      this._mark(s.sessionId, r);
    }
    for (const [id, r] of this.rows) {
      if (!seen.has(id)) {
        r.tr.remove();
        this.rows.delete(id);
      }
    }
    this.el.empty.hidden = list.length > 0;
  }

  _row(s) {
    const tr = document.createElement('tr');
    tr.dataset.session = String(s.sessionId);
    // the name, with the tissue and solver under it; the participants; the buttons
    const cells = {};
    const what = document.createElement('td');
    for (const k of ['name', 'tissue', 'solver']) {
      const span = document.createElement('span');
      span.className = 'ss-' + k;
      what.appendChild(span);
      cells[k] = span;
    }
    tr.appendChild(what);
    cells.clients = document.createElement('td');
    cells.clients.className = 'num';
    tr.appendChild(cells.clients);
    const act = document.createElement('td');
    act.className = 'actions';
    if (this.hasKey) {
      const label = s.name || ('session ' + s.sessionId);
      for (const [text, role] of [['control', Role.CONTROLLER], ['watch', Role.OBSERVER]]) {
        const b = document.createElement('button');
        b.type = 'button';
        b.textContent = text;
        b.dataset.role = text;
        b.setAttribute('aria-label', text + ' ' + label);
        b.addEventListener('click', () => this.client.joinSession(s.sessionId, role, ''));
        act.appendChild(b);
      }
      // the key ends any session without joining it (EndSession), even one
      // whose tools are all taken; asked first, since it ends it for everyone
      const end = document.createElement('button');
      end.type = 'button';
      end.textContent = 'end';
      end.dataset.role = 'end';
      end.setAttribute('aria-label', 'end ' + label + ' for everyone in it');
      end.addEventListener('click', () => this._end(s.sessionId, label));
      act.appendChild(end);
    }
    tr.appendChild(act);
    cells.actions = act;
    return { tr, cells };
  }

  /** Ends a session from the list (EndSession with the key) after asking. */
  async _end(sessionId, label) {
    if (!window.confirm(`End ${label} for everyone in it?`)) return;
    const msg = this.el.msg;
    try {
      await this.client.request('endSession', { sessionId });
      msg.textContent = 'ended ' + label;
      msg.classList.remove('error-text');
    } catch (err) {
      msg.textContent = 'ending ' + label + ': ' + err.message;
      msg.classList.add('error-text');
    }
    this.refresh();
  }

  /** Tissue self-contact, where the session asked for it: on, or off and why
   *  (SessionInfo.self_contact, .self_contact_off); nothing otherwise. */
  _self(r, s) {
    const text = selfContactText(s);
    if (!text) {
      r.cells.self?.remove();
      r.cells.self = null;
      return;
    }
    if (!r.cells.self) {
      r.cells.self = document.createElement('span');
      r.cells.self.className = 'ss-self';
      r.cells.solver.after(r.cells.self);
    }
    r.cells.self.textContent = text;
    r.cells.self.classList.toggle('off', !s.selfContact);
    r.cells.self.title = s.selfContactSurfaceNodes
      ? s.selfContactSurfaceNodes + ' contact-surface nodes' : '';
  }

  _mark(id, r) {
    const here = id === this.currentId;
    r.tr.classList.toggle('current', here);
    if (here) r.tr.setAttribute('aria-current', 'true');
    else r.tr.removeAttribute('aria-current');
  }

  _status(text, isError = false) {
    this.el.status.textContent = text;
    this.el.status.classList.toggle('error-text', isError);
  }

  async _create() {
    const el = this.el;
    const spec = el.solver.value === 'live'
      ? { name: el.name.value.trim(), ...LIVE_XPBD }
      : { name: el.name.value.trim(), solver: Number(el.solver.value) };
    if (el.tissue.value === 'upload') {
      const file = el.file.files && el.file.files[0];
      if (!file) { this._status('choose an OBJ, STL or PLY file', true); return; }
      const ext = (/\.([a-z0-9]+)$/i.exec(file.name) || [])[1]?.toLowerCase();
      if (!(ext in FORMATS)) { this._status('the file must end in .obj, .stl or .ply', true); return; }
      if (file.size > MAX_UPLOAD_BYTES) { this._status('the file is larger than 64 MB', true); return; }
      const scale = Number(el.scale.value);
      if (!(scale > 0) || !Number.isFinite(scale)) { this._status('the scale must be a positive number', true); return; }
      spec.mesh = { format: FORMATS[ext], data: new Uint8Array(await file.arrayBuffer()), scale };
      if (!spec.name) spec.name = file.name.replace(/\.[^.]*$/, '').slice(0, 63);
    } else {
      spec.builtin = el.tissue.value;
    }
    // a stored fit per layer (LayerSpec.material; "" keeps the layer's law and
    // its other settings): sent only when one is chosen, so that the server's
    // default layers stand otherwise
    const materials = el.materials.map((sel) => sel.value);
    if (materials.some(Boolean) && !this._stored()) spec.layers = materials.map((material) => ({ material }));
    el.create.disabled = true;
    this._status('creating…');
    try {
      const created = await this.client.createSession(spec, (p) => this._status(progressText(p)));
      this._status('created session ' + created.sessionId + (created.name ? ' (' + created.name + ')' : '') +
        (created.warning ? ': ' + created.warning.trim() : ''));
      el.name.value = '';
      el.details.open = false;  // room for the tool and layer controls
      this.onCreated?.(created, spec);
      this.refresh();
    } catch (err) {
      this._status(err.message, true);
    } finally {
      el.create.disabled = false;
    }
  }
}
