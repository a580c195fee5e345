// touch.js: touch screens. One finger drives the tool as the left mouse
// button does (pointer.js works on pointer events, so a touch down is a
// press, dragging moves the pressed tool and lifting the finger releases
// it); two fingers orbit and zoom the camera (OrbitControls' DOLLY_ROTATE).
// While a second finger is down the tool press is released and the tool
// stops following, until every finger has lifted, so a pinch never drags
// the tool across the tissue.

import { TOUCH } from 'three';

export class TouchGestures {
  /** view: TissueView (canvas, controls); pointer: ToolPointer or null. */
  constructor(view, pointer) {
    this.view = view;
    this.pointer = pointer;
    this.touches = new Set();   // pointer ids of the fingers down
    this.gestures = 0;          // two-finger gestures seen (read by the test hook)
    this.touchPresses = 0;      // one-finger presses seen
    view.controls.touches = { ONE: null, TWO: TOUCH.DOLLY_ROTATE };
    const c = view.canvas;
    // capture phase: seen before pointer.js and OrbitControls decide
    c.addEventListener('pointerdown', (e) => this._down(e), { capture: true });
    const up = (e) => this._up(e);
    window.addEventListener('pointerup', up, { capture: true });
    window.addEventListener('pointercancel', up, { capture: true });
  }

  _down(e) {
    if (e.pointerType !== 'touch') return;
    this.touches.add(e.pointerId);
    if (this.touches.size === 1) {
      this.touchPresses++;
    } else if (this.touches.size === 2) {
      this.gestures++;
      if (this.pointer) this.pointer.suspend(true);
    }
  }

  _up(e) {
    if (e.pointerType !== 'touch') return;
    this.touches.delete(e.pointerId);
    if (this.touches.size === 0 && this.pointer) this.pointer.suspend(false);
  }
}
