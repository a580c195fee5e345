// instructor.js: the controls a controller, or the holder of the server key
// in any role, has over the whole session: reset the tissue to rest
// (ResetSession) and end the session for everyone (EndSession). Ending asks
// for a second press within CONFIRM_MS, so one stray key press does not
// close a class's session.

const CONFIRM_MS = 5000;
const $ = (id) => document.getElementById(id);

export class InstructorControls {
  /** client: SessionClient; onDone(what, error): after an Ack or an error. */
  constructor(client, onDone) {
    this.client = client;
    this.onDone = onDone;
    this.section = $('instructor');
    this.reset = $('in-reset');
    this.end = $('in-end');
    this.status = $('in-status');
    this.armed = 0;          // timer while the end button waits for its confirmation
    this.resets = 0;         // acknowledged resets (read by the test hook)
    this.reset.addEventListener('click', () => this._reset());
    this.end.addEventListener('click', () => this._end());
  }

  /** Shown to controllers and to the server key's holder only. */
  setEnabled(on) {
    this.section.hidden = !on;
    if (!on) this._disarm();
  }

  async _reset() {
    this.reset.disabled = true;
    try {
      await this.client.resetSession();
      this.resets++;
      this.status.textContent = 'tissue reset';
      this.onDone?.('reset', null);
    } catch (err) {
      this.status.textContent = 'reset failed: ' + err.message;
      this.onDone?.('reset', err);
    } finally {
      this.reset.disabled = false;
    }
  }

  _disarm() {
    clearTimeout(this.armed);
    this.armed = 0;
    this.end.textContent = 'end session';
    this.end.classList.remove('armed');
  }

  async _end() {
    if (!this.armed) {
      this.end.textContent = 'press again to end it for everyone';
      this.end.classList.add('armed');
      this.armed = setTimeout(() => this._disarm(), CONFIRM_MS);
      return;
    }
    this._disarm();
    try {
      await this.client.endSession();
      this.status.textContent = 'session ended';
      this.onDone?.('end', null);
    } catch (err) {
      this.status.textContent = 'end failed: ' + err.message;
      this.onDone?.('end', err);
    }
  }
}
