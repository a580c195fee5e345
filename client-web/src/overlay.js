// overlay.js: the status panel over the 3D view: connection state, session,
// role and tool, watchers, vertex count, frames per second received, the
// pose-to-frame latency, the frame decode time, the force on this client's tool, round-trip time,
// the warning when the connection degrades, and the last error. It only writes text
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
      watchers: $('st-watchers'),
      latency: $('st-latency'),
      decode: $('st-decode'),
      degraded: $('st-degraded'),
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
    } else if (!id) {
      this.el.share.hidden = true;
    }
  }

  /** Participants of this page's session (controllers and observers). */
  watchers(n) { this.el.watchers.textContent = n > 0 ? String(n) : '–'; }

  /** Pose-to-frame latency in ms (NaN: none measured). */
  latency(ms) { this.el.latency.textContent = Number.isFinite(ms) ? ms.toFixed(0) + ' ms' : '–'; }

  /** The connection warning, '' to hide it. */
  degraded(text) {
    if (this.el.degraded.textContent !== text) this.el.degraded.textContent = text;
    this.el.degraded.hidden = !text;
  }

  role(role, toolId) {
    this.el.role.textContent = role ? role + (toolId ? ' · tool ' + toolId : '') : '–';
    this.el.help.hidden = role !== 'controller';
  }

  vertices(n) { this.el.vertices.textContent = n ? n.toLocaleString('en') : '–'; }

  fps(v) { this.el.fps.textContent = v.toFixed(1); }

  force(f) {
    if (!f) { this.el.force.textContent = '–'; return; }
    const mag = Math.hypot(f.x || 0, f.y || 0, f.z || 0);
    this.el.force.textContent = mag.toFixed(3) + ' N';
  }

  /** Frame decode time: a DecodeStats (src/framedecoder.js). */
  decode(d) {
    this.el.decode.textContent = d.meanMs().toFixed(2) + ' ms · ' + (d.where === 'worker' ? 'worker' : 'main thread');
  }

  rtt(ms) { this.el.rtt.textContent = ms.toFixed(1) + ' ms'; }

  behind(on) { this.el.behind.hidden = !on; }

  error(text) {
    this.el.error.textContent = text || '';
    this.el.error.hidden = !text;
  }
}
