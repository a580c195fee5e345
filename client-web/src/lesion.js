// lesion.js: marking a lesion region (issue 9): a controller arms the
// marker (button or M key), clicks the tissue, and the server refines the
// region around the clicked point (RefineRegion by a ray from the camera
// through the click: Loop subdivision, or longest-edge bisection, of the
// outer-surface triangles within the chosen range). Every page of the
// session then gets the finer topology in its next keyframe; this panel
// shows the vertex count before and after. One click, one refinement: the
// marker disarms itself after each.
//
// The click is taken in the capture phase on the canvas, so while armed it
// does not also press the tool into the tissue.

const $ = (id) => document.getElementById(id);

export class LesionMarker {
  /**
   * client: SessionClient (refineRegion); view: TissueView (rayAt) or null
   * without WebGL; onChange(): after a refinement or an error.
   */
  constructor(client, view, onChange) {
    this.client = client;
    this.view = view;
    this.onChange = onChange;
    this.section = $('lesion');
    this.el = { mark: $('ls-mark'), method: $('ls-method'), range: $('ls-range'), status: $('ls-status') };
    this.enabled = false;
    this.armed = false;
    this.busy = false;
    this.marks = 0;          // refinements the server made for this page
    this.last = null;        // the last Refined reply
    this.el.mark.addEventListener('click', () => this.arm(!this.armed));
    document.addEventListener('keydown', (e) => {
      if (e.key !== 'm' && e.key !== 'M') return;
      if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
      const t = e.target;
      if (t && t.matches && t.matches('input[type=text], input[type=number], input:not([type]), textarea, select')) return;
      if (!this.enabled) return;
      e.preventDefault();
      this.arm(!this.armed);
    });
    if (view) view.canvas.addEventListener('pointerdown', (e) => this._click(e), { capture: true });
    this._render();
  }

  /** Shown to controllers of sessions that can be refined (not quasi-static). */
  setEnabled(on) {
    this.enabled = on && !!this.view;
    this.section.hidden = !this.enabled;
    if (!this.enabled) this.arm(false);
  }

  arm(on) {
    const was = this.armed;
    this.armed = on && this.enabled && !this.busy;
    this._render();
    if (was !== this.armed) this.onChange?.();
  }

  snapshot() {
    return { armed: this.armed, busy: this.busy, marks: this.marks, last: this.last };
  }

  async _click(e) {
    if (!this.armed || !e.isPrimary || e.button !== 0) return;
    e.stopImmediatePropagation();
    e.preventDefault();
    const ray = this.view.rayAt(e.clientX, e.clientY);
    this.busy = true;
    this.armed = false;
    this.el.status.textContent = 'refining…';
    this._render();
    this.onChange?.();
    try {
      const r = await this.client.refineRegion({
        method: Number(this.el.method.value),
        rayOrigin: ray.origin,
        rayDirection: ray.direction,
        range: Number(this.el.range.value),
      });
      this.marks++;
      this.last = { vertexCount: r.vertexCount, newVertices: r.newVertices,
        selectedTriangles: r.selectedTriangles, millis: r.millis };
      this.el.status.textContent = `refined ${r.selectedTriangles} triangles: ` +
        `${r.vertexCount - r.newVertices} → ${r.vertexCount} vertices`;
    } catch (err) {
      this.el.status.textContent = 'not refined: ' + err.message;
      this.last = { error: err.message };
    } finally {
      this.busy = false;
      this._render();
      this.onChange?.();
    }
  }

  _render() {
    this.el.mark.setAttribute('aria-pressed', this.armed ? 'true' : 'false');
    this.el.mark.textContent = this.armed ? 'click the tissue to mark (M cancels)' : 'mark a lesion (M)';
    this.el.mark.disabled = this.busy;
    this.view?.canvas.classList.toggle('marking', this.armed);
  }
}
