// gamepad.js: a gamepad (through the browser's Gamepad API) moves the
// controller's tool: the left stick moves it across the tissue (x, z), the
// right stick's vertical axis (or the triggers) up and down, at up to
// SPEED metres per second; button 0 (A / cross) works the grasper. The pads
// are polled once per animation frame; with no pad, or no Gamepad API,
// nothing happens and nothing is logged.

const SPEED = 0.04;        // m/s at full deflection
const DEADZONE = 0.15;     // stick deflection ignored (rest drift)
const LIMIT = 0.2;         // m: the tool stays within this box around the origin
const Y_MIN = -0.03, Y_MAX = 0.06;

function axis(v) {
  if (!Number.isFinite(v) || Math.abs(v) < DEADZONE) return 0;
  return (v - Math.sign(v) * DEADZONE) / (1 - DEADZONE);
}

export class GamepadDriver {
  /**
   * position(): the tool's current position {x, y, z} (or null when this
   * page drives no tool); move(p): sends the new position; jaw(): toggles
   * the grasper.
   */
  constructor({ position, move, jaw }) {
    this.position = position;
    this.move = move;
    this.jaw = jaw;
    this.pad = '';            // id of the pad in use ('' none), read by the test hook
    this.moves = 0;           // positions sent from the pad
    this.lastT = 0;
    this.buttonDown = false;
    this.at = null;
    this.available = typeof navigator !== 'undefined' && typeof navigator.getGamepads === 'function';
    if (this.available) requestAnimationFrame((t) => this._poll(t));
  }

  _firstPad() {
    let pads;
    try {
      pads = navigator.getGamepads();
    } catch {
      return null;   // refused by a permissions policy
    }
    if (!pads) return null;
    for (const p of pads) if (p && p.connected !== false && p.axes && p.axes.length >= 2) return p;
    return null;
  }

  _poll(t) {
    requestAnimationFrame((t2) => this._poll(t2));
    const dt = this.lastT ? Math.min((t - this.lastT) / 1000, 0.1) : 0;
    this.lastT = t;
    const pad = this._firstPad();
    this.pad = pad ? String(pad.id || 'gamepad') : '';
    if (!pad) { this.at = null; return; }
    const b0 = !!(pad.buttons && pad.buttons[0] && pad.buttons[0].pressed);
    if (b0 && !this.buttonDown) this.jaw?.();
    this.buttonDown = b0;
    const dx = axis(pad.axes[0]);
    const dz = axis(pad.axes[1]);
    let dy = pad.axes.length >= 4 ? -axis(pad.axes[3]) : 0;
    if (!dy && pad.buttons && pad.buttons.length > 7) {
      dy = (pad.buttons[7]?.value || 0) * -1 + (pad.buttons[6]?.value || 0);
    }
    if (!(dx || dy || dz) || !dt) { this.at = null; return; }
    const from = this.at || this.position();
    if (!from) return;
    const clamp = (v, lo, hi) => Math.min(Math.max(v, lo), hi);
    const p = {
      x: clamp(from.x + dx * SPEED * dt, -LIMIT, LIMIT),
      y: clamp(from.y + dy * SPEED * dt, Y_MIN, Y_MAX),
      z: clamp(from.z + dz * SPEED * dt, -LIMIT, LIMIT),
    };
    if (this.move(p) !== false) {
      this.at = p;
      this.moves++;
    }
  }
}
