// overlay.js: the status panel over the 3D view: connection state, session,
// role and tool, vertex count, frames per second received, the force on this
// client's tool, round-trip time, and the last error. It only writes text
// into the elements index.html provides; main.js decides what to show.

const $ = (id) => document.getElementById(id);

export class Overlay {
  constructor() {
    this.el = {
      state: $('st-state'),
      session: $('st-session'),
      role: $('st-role'),
      vertices: $('st-vertices'),
      fps: $('st-fps'),
      force: $('st-force'),
      rtt: $('st-rtt'),
      behind: $('st-behind'),
      error: $('st-error'),
      share: $('st-share'),
      help: $('st-help'),
    };
  }

  state(s) {
    this.el.state.textContent = s;
    this.el.state.dataset.state = s;
  }

  session(id, url) {
    this.el.session.textContent = id ? String(id) : '–';
    if (url) {
      this.el.share.href = url;
      this.el.share.hidden = false;
    }
  }

  role(role, toolId) {
    this.el.role.textContent = role + (toolId ? ' · tool ' + toolId : '');
    this.el.help.hidden = role !== 'controller';
  }

  vertices(n) { this.el.vertices.textContent = n ? n.toLocaleString('en') : '–'; }

  fps(v) { this.el.fps.textContent = v.toFixed(1); }

  force(f) {
    if (!f) { this.el.force.textContent = '–'; return; }
    const mag = Math.hypot(f.x || 0, f.y || 0, f.z || 0);
    this.el.force.textContent = mag.toFixed(3) + ' N';
  }

  rtt(ms) { this.el.rtt.textContent = ms.toFixed(1) + ' ms'; }

  behind(on) { this.el.behind.hidden = !on; }

  error(text) {
    this.el.error.textContent = text || '';
    this.el.error.hidden = !text;
  }
}
