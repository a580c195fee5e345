// tools.js: the tool controls of a controller: which tool it drives (sphere,
// capsule, or grasper; the grasper in mass-spring and XPBD sessions, not in
// quasi-static ones, whose solve takes no jaws) and the grasper's jaws, closed or opened with the
// button or the G key (ignored while typing in a field), and the tool's
// Coulomb friction on the tissue (a choice of three settings).
//
// It keeps the state and the controls' look; main.js sends the poses.

export const ToolKind = Object.freeze({ SPHERE: 0, CAPSULE: 1, JAWS: 2 });

// The friction choices: static and kinetic coefficients (ToolShape.friction).
// 'wet' is the server's default (a steel instrument on wet tissue).
export const Friction = Object.freeze({
  wet: { muStatic: 0.1, muKinetic: 0.05 },
  none: { muStatic: 0, muKinetic: 0 },
  rough: { muStatic: 0.4, muKinetic: 0.3 },
});
const QUASI_STATIC = 3;  // Solver.SOLVER_QUASI_STATIC: the one solver without jaws

const $ = (id) => document.getElementById(id);

export class ToolControls {
  /**
   * onKind(kind): the user chose another tool; onJaw(jaw): the grasper was
   * closed (0) or opened (1); onFriction(name, {muStatic, muKinetic}): another
   * friction was chosen.
   */
  constructor({ onKind, onJaw, onFriction }) {
    this.onKind = onKind;
    this.onJaw = onJaw;
    this.onFriction = onFriction;
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
      friction: $('tl-friction'),
    };
    this.el.friction.addEventListener('change', () => {
      const name = this.el.friction.value;
      if (Friction[name]) this.onFriction?.(name, Friction[name]);
    });
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
    if (kind === ToolKind.JAWS && this.solver === QUASI_STATIC) return;
    this.kind = kind;
    this.jaw = 1;
    this._render();
    this.onKind(kind);
  }

  _render() {
    const el = this.el;
    el.section.hidden = !this.enabled;
    const grasps = this.solver !== QUASI_STATIC;
    el.grasperOption.hidden = !grasps;
    el.grasperNote.hidden = grasps;
    for (const r of el.radios) {
      r.checked = Number(r.value) === this.kind;
      r.disabled = Number(r.value) === ToolKind.JAWS && !grasps;
    }
    const isJaws = this.kind === ToolKind.JAWS;
    el.jaw.hidden = !isJaws;
    const closed = this.jaw < 0.5;
    el.jaw.setAttribute('aria-pressed', closed ? 'true' : 'false');
    el.jaw.textContent = closed ? 'open grasper (G)' : 'close grasper (G)';
  }
}
