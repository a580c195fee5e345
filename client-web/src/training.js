// training.js: the training panel of a quasi-static session (issue 6's
// learned shortcut, issue 9's page). A controller starts training on the
// samples recorded so far (TrainShortcut, model "method" — the method's
// three-parameter model — "rich", "spread", "spread2" or "spread2r"); every client of the
// session then sees the TrainingProgress messages as a progress bar and the loss J(theta) as a
// small plot (log scale, canvas 2D like forceplot.js), and when it is done
// the held-out error in millimetres and relative to the displacement. The
// controller switches between the quasi-static solve and the learned model
// (UseShortcut); which one runs is read from the frames (flag bit 2, set by
// the physics when the learned model made the frame), so the indicator shows
// what the server does, not what was asked.

const $ = (id) => document.getElementById(id);
const MAX_LOSSES = 512;        // loss samples kept for the plot
const LEARNED_FLAG = 4;        // Frame.flags bit 2 (server/physics.h)
const QUASI_STATIC = 3;        // Solver.SOLVER_QUASI_STATIC

export class TrainingPanel {
  /** client: SessionClient; onChange(): after anything the hook shows changed. */
  constructor(client, onChange) {
    this.client = client;
    this.onChange = onChange;
    this.el = {
      section: $('training'),
      model: $('tr-model'),
      start: $('tr-start'),
      progress: $('tr-progress'),
      percent: $('tr-percent'),
      canvas: $('tr-loss'),
      lossValue: $('tr-loss-value'),
      result: $('tr-result'),
      mode: $('tr-mode'),
      use: $('tr-use'),
      status: $('tr-status'),
      samples: $('tr-samples'),
    };
    this.ctx = this.el.canvas.getContext('2d');
    this.losses = new Float64Array(MAX_LOSSES);
    this.nLosses = 0;
    this.raf = 0;
    this.state = this._fresh();
    this.controller = false;
    this.shown = false;
    this.sessionId = 0;
    this.el.start.addEventListener('click', () => this._start());
    this.el.use.addEventListener('click', () => this._use(!this.state.learnedRunning));
    this._render();
  }

  _fresh() {
    return { fraction: 0, training: false, done: false, loss: null, samples: 0, iterations: 0,
      heldoutMm: null, heldoutRel: null, modelId: 0, model: '', error: '', learnedRunning: false,
      learnedAvailable: false, recorded: 0, switches: 0 };
  }

  /**
   * Joined (again) or changed role: the session's id and solver (Solver
   * enum), and whether this page controls a tool. Another session, or a
   * join (`rejoined`: the server then sends the reports of the session's
   * last training again, server/training.c), starts from a clean panel.
   */
  joined(sessionId, solver, isController, rejoined = false) {
    if (sessionId !== this.sessionId || rejoined) {
      this.sessionId = sessionId;
      this.state = this._fresh();
      this.nLosses = 0;
    }
    this.controller = isController;
    this.setSolver(solver);
  }

  setSolver(solver) {
    this.shown = solver === QUASI_STATIC;
    this._render();
  }

  /** The session's SessionInfo from ListSessions: samples and learned state. */
  info(s) {
    if (!s) return;
    this.state.recorded = Number(s.samples || 0);
    if (s.learned) this.state.learnedAvailable = true;
    this.el.samples.textContent = this.state.recorded.toLocaleString('en') + ' samples recorded';
  }

  /** Every frame: which method made it. */
  frame(flags) {
    const learned = (flags & LEARNED_FLAG) !== 0;
    if (learned === this.state.learnedRunning) return;
    this.state.learnedRunning = learned;
    if (learned) this.state.learnedAvailable = true;
    this._renderMode();
    this.onChange?.();
  }

  /** A TrainingProgress message of this session. */
  progress(p) {
    const st = this.state;
    st.fraction = Math.min(Math.max(p.fraction || 0, 0), 1);
    st.model = p.model || st.model;
    if (Number.isFinite(p.loss) && p.loss > 0) {
      st.loss = p.loss;
      if (this.nLosses === MAX_LOSSES) {
        this.losses.copyWithin(0, 1);
        this.nLosses--;
      }
      this.losses[this.nLosses++] = p.loss;
      this._schedule();
    }
    st.training = !p.done;
    if (p.done) {
      st.done = true;
      this._status('');
      st.error = p.error || '';
      if (!st.error) {
        st.fraction = 1;
        st.samples = Number(p.samples || 0);
        st.iterations = Number(p.iterations || 0);
        st.heldoutMm = (p.heldoutRmse || 0) * 1000;
        st.heldoutRel = p.heldoutRel || 0;
        st.modelId = Number(p.modelId || 0);
        st.learnedAvailable = true;
      }
    }
    this._render();
    this.onChange?.();
  }

  async _start() {
    const st = this.state;
    this.el.start.disabled = true;
    this.nLosses = 0;
    Object.assign(st, { fraction: 0, done: false, training: true, error: '', heldoutMm: null,
      heldoutRel: null, loss: null });
    this._render();
    this._schedule();
    try {
      await this.client.trainShortcut(this.el.model.value);
      this._status('training on the recorded samples…');
    } catch (err) {
      st.training = false;
      st.error = err.message;
      this._status('training refused: ' + err.message, true);
    } finally {
      this._render();
      this.onChange?.();
    }
  }

  async _use(learned) {
    this.el.use.disabled = true;
    try {
      await this.client.useShortcut(learned);
      this.state.switches++;
      this._status(learned ? 'switching to the learned model' : 'switching to the quasi-static solve');
    } catch (err) {
      this._status('switch refused: ' + err.message, true);
    } finally {
      this._render();
      this.onChange?.();
    }
  }

  _status(text, isError = false) {
    this.el.status.textContent = text;
    this.el.status.classList.toggle('error-text', isError);
  }

  _renderMode() {
    const learned = this.state.learnedRunning;
    this.el.mode.textContent = learned ? 'learned model' : 'quasi-static solve';
    this.el.mode.dataset.mode = learned ? 'learned' : 'solve';
    this.el.use.textContent = learned ? 'use the quasi-static solve' : 'use the learned model';
    this.el.use.setAttribute('aria-pressed', learned ? 'true' : 'false');
    this.el.use.disabled = !this.controller || (!learned && !this.state.learnedAvailable);
  }

  _render() {
    const el = this.el, st = this.state;
    el.section.hidden = !this.shown;
    el.start.disabled = !this.controller || st.training;
    el.model.disabled = !this.controller || st.training;
    el.progress.value = st.fraction;
    const pct = Math.round(st.fraction * 100);
    el.percent.textContent = pct + ' %';
    el.progress.setAttribute('aria-valuetext', pct + ' percent' + (st.done ? ', done' : ''));
    el.lossValue.textContent = st.loss ? st.loss.toExponential(2) + ' m²' : '–';
    if (st.done && st.error) {
      el.result.textContent = 'training failed: ' + st.error;
      el.result.classList.add('error-text');
    } else if (st.done) {
      el.result.classList.remove('error-text');
      el.result.textContent = 'held-out error ' + st.heldoutMm.toFixed(3) + ' mm (' +
        (st.heldoutRel * 100).toFixed(1) + ' % of the displacement), ' +
        st.samples.toLocaleString('en') + ' samples, ' + st.iterations.toLocaleString('en') + ' iterations';
    } else {
      el.result.classList.remove('error-text');
      el.result.textContent = st.training ? 'training…' : '';
    }
    this._renderMode();
  }

  _schedule() {
    if (!this.raf) this.raf = requestAnimationFrame(() => { this.raf = 0; this._draw(); });
  }

  // The loss per progress message, on a log scale between its extremes.
  _draw() {
    const c = this.el.canvas, ctx = this.ctx;
    const w = c.width, h = c.height;
    ctx.clearRect(0, 0, w, h);
    ctx.strokeStyle = 'rgba(255,255,255,0.15)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(0, h - 0.5);
    ctx.lineTo(w, h - 0.5);
    ctx.stroke();
    const n = this.nLosses;
    if (n === 0) return;
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < n; i++) {
      const v = Math.log10(this.losses[i]);
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
    ctx.fillStyle = '#97a1ad';
    ctx.font = '14px system-ui, sans-serif';
    ctx.textBaseline = 'top';
    ctx.fillText('loss, log scale', 4, 2);
    ctx.strokeStyle = '#f0b35f';
    ctx.lineWidth = 2;
    ctx.beginPath();
    for (let i = 0; i < n; i++) {
      const x = n === 1 ? w / 2 : (i / (n - 1)) * (w - 4) + 2;
      const y = 4 + (1 - (Math.log10(this.losses[i]) - lo) / (hi - lo)) * (h - 8);
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    }
    ctx.stroke();
  }

  /** For the test hook. */
  snapshot() {
    return { ...this.state, shown: this.shown, losses: this.nLosses };
  }
}
