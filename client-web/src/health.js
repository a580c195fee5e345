// health.js: how well the stream reaches this page, and when to warn.
//
// Pose-to-frame latency: when a frame first shows a new pose of this page's
// tool (ToolState.last_pose_seq grew), now - ToolState.last_client_time_us,
// both on the clock the page stamps its poses with (protocol.js nowMicros:
// performance.timeOrigin + performance.now(), in microseconds), so the daemon's
// clock never enters. Frame rate: frames received in the last second, against
// the rate the session granted (Joined.frame_rate).
//
// The connection is "degraded" when it is reconnecting or closed, when the
// latency (median of the last LAT_SAMPLES measurements) exceeds
// LATENCY_WARN_MS, or when the frame rate stays under FPS_WARN_FRACTION of
// the granted rate for longer than SLOW_GRACE_MS after a join.

import { nowMicros, toNumber } from './protocol.js';

const LAT_SAMPLES = 15;
const LATENCY_WARN_MS = 250;
const FPS_WARN_FRACTION = 0.5;
const SLOW_GRACE_MS = 3000;
const FPS_WINDOW = 512;       // > frames in one second at any granted rate

export class LinkHealth {
  constructor() {
    this.lat = new Float64Array(LAT_SAMPLES);
    this.latSorted = new Float64Array(LAT_SAMPLES);
    this.latN = 0;
    this.latHead = 0;
    this.latencyMs = NaN;      // last measurement
    this.frameTimes = new Float64Array(FPS_WINDOW);
    this.ftHead = 0;
    this.ftSize = 0;
    this.lastSeq = 0;
    this.toolId = 0;
    this.grantedFps = 0;
    this.joinedAt = 0;
    this.slowSince = 0;
    this.state = 'connecting';
  }

  /** After a join: the tool to watch (0: none) and the granted frame rate. */
  joined(toolId, frameRate) {
    this.toolId = toolId;
    this.grantedFps = frameRate || 0;
    this.joinedAt = performance.now();
    this.lastSeq = 0;
    this.latN = 0;
    this.latencyMs = NaN;
    this.ftSize = 0;
    this.slowSince = 0;
  }

  /** Out of any session: no latency or frame rate to judge. */
  left() {
    this.toolId = 0;
    this.joinedAt = 0;
    this.latN = 0;
    this.latencyMs = NaN;
  }

  /** The connection state of SessionClient. */
  setState(s) { this.state = s; }

  /** Called for every frame with the FrameStream. */
  frame(stream) {
    const now = performance.now();
    this.frameTimes[this.ftHead] = now;
    this.ftHead = (this.ftHead + 1) % FPS_WINDOW;
    if (this.ftSize < FPS_WINDOW) this.ftSize++;
    if (!this.toolId) return;
    const t = stream.tool(this.toolId);
    if (!t) return;
    const seq = toNumber(t.lastPoseSeq);
    if (seq <= this.lastSeq) return;
    this.lastSeq = seq;
    const sent = toNumber(t.lastClientTimeUs);
    if (!sent) return;
    const ms = (nowMicros() - sent) / 1000;
    if (!(ms >= 0) || ms > 600000) return;  // a pose from before a clock change
    this.latencyMs = ms;
    this.lat[this.latHead] = ms;
    this.latHead = (this.latHead + 1) % LAT_SAMPLES;
    if (this.latN < LAT_SAMPLES) this.latN++;
  }

  /** Frames received in the last second. */
  fps() {
    const now = performance.now();
    let n = 0;
    for (let i = 0; i < this.ftSize; i++) {
      const k = (this.ftHead - 1 - i + FPS_WINDOW) % FPS_WINDOW;
      if (now - this.frameTimes[k] > 1000) break;
      n++;
    }
    return n;
  }

  /** Median of the recent latencies in ms, NaN before the first. */
  medianLatency() {
    if (!this.latN) return NaN;
    for (let i = 0; i < this.latN; i++) this.latSorted[i] = this.lat[i];
    const s = this.latSorted.subarray(0, this.latN).sort();
    return s[this.latN >> 1];
  }

  /**
   * What is wrong with the link, as a sentence for the warning, or '' when
   * nothing is. `fps` is this second's frame count.
   */
  problem(fps) {
    const now = performance.now();
    if (this.state === 'reconnecting' || this.state === 'closed')
      return 'connection lost: reconnecting…';
    if (this.state !== 'connected' || !this.joinedAt) return '';
    const lat = this.medianLatency();
    if (lat > LATENCY_WARN_MS) return 'slow link: poses take ' + Math.round(lat) + ' ms to show';
    if (this.grantedFps && now - this.joinedAt > SLOW_GRACE_MS && fps < FPS_WARN_FRACTION * this.grantedFps) {
      if (!this.slowSince) this.slowSince = now;
      if (now - this.slowSince > 1000)
        return 'frames are late: ' + fps + ' of ' + this.grantedFps + ' per second';
    } else {
      this.slowSince = 0;
    }
    return '';
  }
}
