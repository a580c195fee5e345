// pointer.js: turns the mouse (or one finger: pointer events, see touch.js)
// into tool poses for a controller.
//
// A newly joined tool is parked well above the tissue (park()). Moving the
// pointer over the tissue puts the tool just above the surface point under
// it; holding the left button presses the tool into the tissue (its centre
// goes to surface_y + radius - PRESS_DEPTH) until the button is released.
// While pressing, the pointer is followed on the horizontal plane of the
// surface as it was when the press started, so the dent the tool makes does
// not pull the tool further down.
//
// Through the air above the tissue the tool goes straight to its target.
// Below the height where it would touch the surface under it, it descends at
// a bounded speed, DESCENT_SPEED in real time and at most MAX_STEP_PER_POSE
// in one pose (less than the mucosa's 1 mm, so one pose never carries the
// tool through a layer), so that it enters the tissue from above instead of
// jumping into it. The speed is measured on the clock, not in poses: a page
// whose main thread is busy (software WebGL, a slow machine) sends far fewer
// than 60 poses a second, and a per-pose speed would then crawl. Poses go out
// at most every POSE_INTERVAL_MS, and only while the target changes.

import { MOUSE } from 'three';

const HOVER_GAP = 0.002;      // m between the tool and the surface when hovering
const PRESS_DEPTH = 0.006;    // m the tool centre goes below surface + radius
const POSE_INTERVAL_MS = 16;
const PARK_HEIGHT = 0.03;     // m: where a newly joined tool waits
const DESCENT_SPEED = 0.05;    // m/s into the tissue
const MAX_STEP_PER_POSE = 0.0008; // m: DESCENT_SPEED over one POSE_INTERVAL_MS

export class ToolPointer {
  /**
   * view: TissueView (pick(), canvas, controls); send(pose): sends a ToolPose
   * body (without seq; the caller adds tool_id and seq).
   */
  constructor(view, send) {
    this.view = view;
    this.send = send;
    this.enabled = false;
    this.radius = 0.005;
    this.pressed = false;
    this.pressSurfaceY = 0;
    this.target = null;       // {x, y, z, touchY} wanted tool centre; touchY:
                              // the centre height at which it touches the surface
    this.lastSentKey = '';
    this.lastSentAt = 0;
    this.sent = null;         // {x, y, z} last pose sent
    this.timer = 0;
    this.lastClient = null;   // {x, y} last pointer position over the canvas
    this.suspended = false;   // a two-finger gesture is on (touch.js)

    const c = view.canvas;
    // Registered before OrbitControls sees the event (capture phase), so the
    // LEFT button mapping can be chosen per press.
    c.addEventListener('pointerdown', (e) => this._down(e), { capture: true });
    c.addEventListener('pointermove', (e) => this._move(e));
    c.addEventListener('pointerleave', () => { if (!this.pressed) this.lastClient = null; });
    window.addEventListener('pointerup', (e) => this._up(e));
    window.addEventListener('blur', () => this._release());
  }

  setEnabled(on, radius) {
    this.enabled = on;
    if (radius > 0) this.radius = radius;
    if (!on) this._release();
  }

  /** While on, the pointer moves the camera only: the press is released. */
  suspend(on) {
    if (on) this._release();
    this.suspended = on;
  }

  _down(e) {
    if (!e.isPrimary || this.suspended) return;
    const orbitPress = e.button === 0 && (e.ctrlKey || e.metaKey);
    this.view.controls.mouseButtons.LEFT = orbitPress ? MOUSE.PAN : null;
    if (e.button !== 0 || orbitPress || !this.enabled) return;
    const hit = this.view.pick(e.clientX, e.clientY);
    if (!hit) return;
    this.pressed = true;
    this.pressSurfaceY = hit.y;
    this.lastClient = { x: e.clientX, y: e.clientY };
    this._aim();
    e.preventDefault();
  }

  _move(e) {
    if (!e.isPrimary || this.suspended) return;
    this.lastClient = { x: e.clientX, y: e.clientY };
    if (e.buttons & 2 || e.buttons & 4) return; // orbiting or zooming
    this._aim();
  }

  _up(e) {
    if (e.button === 0 && e.isPrimary) this._release();
  }

  _release() {
    if (!this.pressed) return;
    this.pressed = false;
    this._aim();
  }

  // Works out the tool centre for the current pointer and press state.
  _aim() {
    if (!this.enabled || !this.lastClient) return;
    const { x, y } = this.lastClient;
    let p, touchY;
    if (this.pressed) {
      p = this.view.pick(x, y, this.pressSurfaceY, true);
      if (!p) return;
      touchY = this.pressSurfaceY + this.radius;
      p.y = touchY - PRESS_DEPTH;
    } else {
      p = this.view.pick(x, y);
      if (!p) return;
      touchY = p.y + this.radius;
      p.y = touchY + HOVER_GAP;
    }
    this.target = { x: p.x, y: p.y, z: p.z, touchY };
    this._schedule();
  }

  _schedule() {
    if (this.timer) return;
    const wait = POSE_INTERVAL_MS - (performance.now() - this.lastSentAt);
    if (wait <= 0) this._flush();
    else this.timer = setTimeout(() => { this.timer = 0; this._flush(); }, wait);
  }

  _flush() {
    if (!this.target || !this.enabled) return;
    const t = this.target;
    const now = performance.now();
    // Down to the touching height at once; below it at the bounded speed, so
    // a press moves the tool into the tissue over several poses rather than
    // teleporting its centre below the surface.
    let y = t.y;
    let more = false;
    if (this.sent) {
      const from = Math.min(this.sent.y, t.touchY);
      const step = Math.min(DESCENT_SPEED * (now - this.lastSentAt) / 1000, MAX_STEP_PER_POSE);
      if (y < from - step) {
        y = from - step;
        more = true;
      }
    }
    const key = t.x.toFixed(6) + ',' + y.toFixed(6) + ',' + t.z.toFixed(6);
    if (key !== this.lastSentKey) {
      this.lastSentAt = now;
      if (this.send({ position: { x: t.x, y, z: t.z } }) !== false) {
        this.lastSentKey = key;
        this.sent = { x: t.x, y, z: t.z };
      } else {
        more = true; // not sent (backlog or not joined yet): try again
      }
    }
    if (more) this._schedule();
  }

  /**
   * After a (re)join: puts the tool well above the tissue, where it cannot
   * touch it, then follows the pointer again from there.
   */
  park() {
    clearTimeout(this.timer);
    this.timer = 0;
    const p = { x: 0, y: PARK_HEIGHT, z: 0 };
    this.lastSentAt = performance.now();
    if (this.send({ position: p }) === false) return;
    this.sent = p;
    this.lastSentKey = '';
    this._aim();
  }
}
