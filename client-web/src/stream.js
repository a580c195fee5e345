// stream.js: a client's view of one session's frame stream.
//
// Frames arrive as a keyframe (all quantized positions, plus the topology
// when it is new) followed by deltas, each naming the frame it applies to
// (baseline_seq). FrameStream keeps the quantized positions q (Int32Array),
// the decoded positions in metres (Float32Array, rewritten in place on every
// frame so a renderer can hand it straight to the GPU) and the topology, and
// checks that every delta applies to the frame it holds.
//
// No DOM use: the page (src/main.js) and the node tests share it.

import { decodeKeyframe, decodeDelta, dequantize } from './codec.js';
import { toNumber } from './protocol.js';

export class FrameStream {
  constructor() {
    this.reset();
  }

  /** Forgets everything (after a reconnect or a new join). */
  reset() {
    this.vertexCount = 0;
    this.q = null;              // Int32Array(3n)
    this.positions = null;      // Float32Array(3n), metres
    this.quantum = 0;
    this.seq = 0;               // seq of the frame held; 0 = none
    this.simTime = 0;
    this.flags = 0;
    this.topology = null;       // { triangles: Uint32Array, groups: [{name, start, count}] }
    // bumped whenever topology or buffers change, and never goes back (not
    // even here), so a view built for an older stream sees the change
    this.topologyVersion = (this.topologyVersion || 0) + 1;
    this.tools = [];            // ToolState of the last frame
    this.keyframes = 0;
    this.deltas = 0;
    this.lastChanged = 0;       // vertices changed by the last frame
  }

  /**
   * Applies one decoded Frame message. Returns true for a keyframe.
   * Throws (and leaves the held frame as it was) when the frame does not fit:
   * a malformed payload, a delta for another baseline, a vertex count that
   * disagrees with the topology.
   */
  apply(frame) {
    const seq = toNumber(frame.seq);
    const quantum = frame.quantum;
    if (!(quantum > 0) || !Number.isFinite(quantum)) throw new Error('frame ' + seq + ': bad quantum ' + quantum);
    const payload = frame.payload instanceof Uint8Array ? frame.payload : new Uint8Array(frame.payload || []);
    if (frame.keyframe) {
      this._applyKeyframe(frame, seq, quantum, payload);
    } else {
      if (!this.q) throw new Error('delta ' + seq + ' before any keyframe');
      const base = toNumber(frame.baselineSeq);
      if (base !== this.seq) throw new Error('delta ' + seq + ' is against frame ' + base + ', held ' + this.seq);
      const n = frame.vertexCount;
      if (n !== this.vertexCount) throw new Error('delta ' + seq + ' has ' + n + ' vertices, held ' + this.vertexCount);
      if (quantum !== this.quantum) throw new Error('delta ' + seq + ' changes the quantum');
      this.lastChanged = decodeDelta(payload, n, this.q, frame.codec || 0);
      this.deltas++;
    }
    this.seq = seq;
    this.simTime = frame.simTime || 0;
    this.flags = frame.flags || 0;
    this.tools = frame.tools || [];
    dequantize(this.q, this.vertexCount, this.quantum, this.positions);
    return !!frame.keyframe;
  }

  _applyKeyframe(frame, seq, quantum, payload) {
    const n = frame.vertexCount;
    const t = frame.topology;
    let topology = this.topology;
    if (t) {
      topology = parseTopology(t, n);
    } else if (!topology || n !== this.vertexCount) {
      throw new Error('keyframe ' + seq + ' without the topology its ' + n + ' vertices need');
    }
    // decodeKeyframe validates before it writes, so decoding into the held
    // array leaves it intact when the payload is bad.
    const q = this.q && this.q.length === 3 * n ? this.q : new Int32Array(3 * n);
    decodeKeyframe(payload, n, q, frame.codec || 0);
    const resized = !this.positions || this.positions.length !== 3 * n;
    if (resized) this.positions = new Float32Array(3 * n);
    if (resized || topology !== this.topology) this.topologyVersion++;
    this.q = q;
    this.vertexCount = n;
    this.quantum = quantum;
    this.topology = topology;
    this.lastChanged = n;
    this.keyframes++;
  }

  /** The ToolState of tool `id` in the last frame, or null. */
  tool(id) {
    for (const t of this.tools) if (t.toolId === id) return t;
    return null;
  }
}

/** Validates a Topology message against n vertices; returns the parsed form. */
export function parseTopology(t, n) {
  if (t.vertexCount !== n) throw new Error('topology has ' + t.vertexCount + ' vertices, frame ' + n);
  const tri = t.triangles || [];
  if (tri.length % 3) throw new Error('topology has ' + tri.length + ' triangle indices, not a multiple of 3');
  const triangles = Uint32Array.from(tri);
  for (let i = 0; i < triangles.length; i++) {
    if (triangles[i] >= n) throw new Error('triangle index ' + triangles[i] + ' past ' + n + ' vertices');
  }
  const counts = t.layerTriangleCounts || [];
  const names = t.layerNames || [];
  const groups = [];
  let start = 0;
  for (let g = 0; g < counts.length; g++) {
    groups.push({ name: names[g] || 'layer ' + g, start: 3 * start, count: 3 * counts[g] });
    start += counts[g];
  }
  const nTris = triangles.length / 3;
  if (start > nTris) throw new Error('layer triangle counts add up to ' + start + ', have ' + nTris);
  if (start < nTris) groups.push({ name: 'other', start: 3 * start, count: 3 * (nTris - start) });
  return { triangles, groups };
}
