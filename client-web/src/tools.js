// tools.js: the tool controls of a controller: which tool it drives (sphere,
// capsule, or grasper; the grasper only in XPBD sessions, the only solver
// with grasping jaws) and the grasper's jaws, closed or opened with the
// button or the G key (ignored while typing in a field).
//
// It keeps the state and the controls' look; main.js sends the poses.

export const ToolKind = Object.freeze({ SPHERE: 0, CAPSULE: 1, JAWS: 2 });
const XPBD = 2;  // Solver.SOLVER_XPBD

const $ = (id) => document.getElementById(id);

export class ToolControls {
  /**
   * onKind(kind): the user chose another tool; onJaw(jaw): the grasper was
   * closed (0) or opened (1).
   */
  constructor({ onKind, onJaw }) {
    this.onKind = onKind;
    this.onJaw = onJaw;
    this.kind = ToolKind.SPHERE;
    this.jaw = 1;
    this.enabled = false;
    this.solver = 0;
    this.el = {
      section: $('tools'),
      radios: Array.from(document.querySelectorAll('input[name="tool"]')),
      grasperOption: $('tl-grasper-option'),
      grasperNote: $('tl-grasper-note'),
      jaw: $('tl-jaw'),
    };
    for (const r of this.el.radios) {
      r.addEventListener('change', () => { if (r.checked) this._choose(Number(r.value)); });
    }
    this.el.jaw.addEventListener('click', () => this.toggleJaw());
    document.addEventListener('keydown', (e) => {
      if (e.key !== 'g' && e.key !== 'G') return;
      if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
      const t = e.target;
      if (t && t.matches && t.matches('input[type=text], input[type=number], input:not([type]), textarea, select')) return;
      if (!this.enabled || this.kind !== ToolKind.JAWS) return;
      e.preventDefault();
      this.toggleJaw();
    });
    this._render();
  }

  /**
   * After a join: whether this page controls a tool, the session's solver,
   * and the tool kind it joined with.
   */
  joined(isController, solver, kind) {
    this.enabled = isController;
    this.solver = solver;
    this.kind = kind;
    if (kind !== ToolKind.JAWS) this.jaw = 1;
    this._render();
  }

  /** The session's solver became known (from ListSessions). */
  setSolver(solver) {
    if (solver === this.solver) return;
    this.solver = solver;
    this._render();
  }

  toggleJaw() {
    if (!this.enabled || this.kind !== ToolKind.JAWS) return;
    this.jaw = this.jaw > 0.5 ? 0 : 1;
    this._render();
    this.onJaw(this.jaw);
  }

  _choose(kind) {
    if (kind === this.kind) return;
    if (kind === ToolKind.JAWS && this.solver !== XPBD) return;
    this.kind = kind;
    this.jaw = 1;
    this._render();
    this.onKind(kind);
  }

  _render() {
    const el = this.el;
    el.section.hidden = !this.enabled;
    const xpbd = this.solver === XPBD;
    el.grasperOption.hidden = !xpbd;
    el.grasperNote.hidden = xpbd;
    for (const r of el.radios) {
      r.checked = Number(r.value) === this.kind;
      r.disabled = Number(r.value) === ToolKind.JAWS && !xpbd;
    }
    const isJaws = this.kind === ToolKind.JAWS;
    el.jaw.hidden = !isJaws;
    const closed = this.jaw < 0.5;
    el.jaw.setAttribute('aria-pressed', closed ? 'true' : 'false');
    el.jaw.textContent = closed ? 'open grasper (G)' : 'close grasper (G)';
  }
}
