// forceplot.js: a live plot of the force on this client's tool over the last
// few seconds, drawn on a <canvas> with the 2D context.
//
// Samples (time in ms, |F| in newtons) go into a fixed ring buffer of
// Float64Arrays, so adding one allocates nothing; the plot is redrawn at most
// once per animation frame and only when a sample arrived. The vertical scale
// is the larger of MIN_SCALE_N and the window's peak, rounded up to a 1-2-5
// step so it does not flicker.

const WINDOW_MS = 5000;     // the plot shows the last 5 s
const CAPACITY = 1024;      // > WINDOW_MS at 120 samples/s
const MIN_SCALE_N = 0.05;   // N: the smallest full scale

function niceCeil(v) {
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * e) return m * e;
  return 10 * e;
}

export class ForcePlot {
  /** canvas: the <canvas> to draw into; label: an element for the current value. */
  constructor(canvas, label) {
    this.canvas = canvas;
    this.label = label;
    this.ctx = canvas.getContext('2d');
    this.t = new Float64Array(CAPACITY);
    this.f = new Float64Array(CAPACITY);
    this.head = 0;            // next slot
    this.size = 0;
    this.count = 0;           // samples ever added (read by the test hook)
    this.nonZero = 0;         // samples ever added with |F| > 0
    this.dirty = true;
    this._draw = () => { this.raf = 0; this.draw(); };
    this.raf = 0;
    this.scale = 0;
    this.scaleText = '';
  }

  /** Adds one sample: force {x, y, z} in newtons at performance.now() `tMs`. */
  add(force, tMs) {
    const mag = Math.hypot(force.x || 0, force.y || 0, force.z || 0);
    this.t[this.head] = tMs;
    this.f[this.head] = mag;
    this.head = (this.head + 1) % CAPACITY;
    if (this.size < CAPACITY) this.size++;
    this.count++;
    if (mag > 0) this.nonZero++;
    this.schedule();
  }

  /** Forgets the samples (a new session or tool). */
  clear() {
    this.size = 0;
    this.schedule();
  }

  /** The samples of the last window still held. */
  points() {
    const now = performance.now();
    let n = 0;
    for (let i = 0; i < this.size; i++) {
      const k = (this.head - 1 - i + CAPACITY) % CAPACITY;
      if (now - this.t[k] > WINDOW_MS) break;
      n++;
    }
    return n;
  }

  schedule() {
    if (!this.raf) this.raf = requestAnimationFrame(this._draw);
  }

  draw() {
    const c = this.canvas, ctx = this.ctx;
    const w = c.width, h = c.height;
    const now = performance.now();
    ctx.clearRect(0, 0, w, h);
    let peak = 0;
    let n = 0;
    for (; n < this.size; n++) {
      const k = (this.head - 1 - n + CAPACITY) % CAPACITY;
      if (now - this.t[k] > WINDOW_MS) break;
      if (this.f[k] > peak) peak = this.f[k];
    }
    const scale = niceCeil(Math.max(peak, MIN_SCALE_N));
    if (scale !== this.scale) {
      this.scale = scale;
      this.scaleText = scale.toPrecision(2) + ' N';
    }
    // grid: zero line and half scale
    ctx.strokeStyle = 'rgba(255,255,255,0.15)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(0, h - 0.5);
    ctx.lineTo(w, h - 0.5);
    ctx.moveTo(0, Math.round(h / 2) + 0.5);
    ctx.lineTo(w, Math.round(h / 2) + 0.5);
    ctx.stroke();
    ctx.fillStyle = '#97a1ad';
    ctx.font = '14px system-ui, sans-serif';
    ctx.textBaseline = 'top';
    ctx.fillText(this.scaleText, 4, 2);
    if (n > 0) {
      ctx.strokeStyle = '#5fa8ff';
      ctx.lineWidth = 2;
      ctx.beginPath();
      for (let i = n - 1; i >= 0; i--) {
        const k = (this.head - 1 - i + CAPACITY) % CAPACITY;
        const x = w - ((now - this.t[k]) / WINDOW_MS) * w;
        const y = h - 1 - (this.f[k] / scale) * (h - 4);
        if (i === n - 1) ctx.moveTo(x, y);
        else ctx.lineTo(x, y);
      }
      ctx.stroke();
      // the plot scrolls while it holds samples of the window
      this.schedule();
    }
  }

  /** Writes the latest magnitude into the label (a few times a second). */
  updateLabel() {
    if (!this.label) return;
    if (!this.size) { this.label.textContent = '–'; return; }
    const k = (this.head - 1 + CAPACITY) % CAPACITY;
    this.label.textContent = this.f[k].toFixed(3) + ' N';
  }
}
