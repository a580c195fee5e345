// stream.js: a client's view of one session's frame stream.
//
// Frames arrive as a keyframe (all quantized positions, plus the topology
// when it is new) followed by deltas, each naming the frame it applies to
// (baseline_seq). FrameStream keeps the quantized positions q (Int32Array),
// the decoded positions in metres (Float32Array, rewritten in place on every
// frame so a renderer can hand it straight to the GPU) and the topology, and
// checks that every delta applies to the frame it holds.
//
// apply() does it all at once. Decoding elsewhere (the page's worker, see
// src/framedecoder.js) splits it: check() a frame against the head of the
// chain, advance() the head, and show() the positions decoded for it later.
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
    this.q = null;              // Int32Array(3n), main-thread decoding only
    this.positions = null;      // Float32Array(3n), metres
    this.quantum = 0;
    this.seq = 0;               // seq of the frame held; 0 = none
    this.simTime = 0;
    this.flags = 0;
    this.topology = null;       // { triangles: Uint32Array, groups: [{name, start, count}] }
    // bumped whenever topology or buffers change, and never goes back (not
    // even here), so a view built for an older stream sees the change
    this.topologyVersion = (this.topologyVersion || 0) + 1;
    // bumped on every reset: frames handed to a decoder worker before it
    // belong to a stream that is gone (src/framedecoder.js drops them)
    this.generation = (this.generation || 0) + 1;
    this.tools = [];            // ToolState of the last frame
    this.keyframes = 0;
    this.deltas = 0;
    this.lastChanged = 0;       // vertices changed by the last frame
    // The head of the chain: the last frame accepted, which the next delta
    // must name as its baseline. It runs ahead of seq/positions while frames
    // are being decoded elsewhere (a worker); with apply() they are equal.
    this.head = { seq: 0, n: 0, quantum: 0, topology: null };
  }

  /**
   * Applies one decoded Frame message. Returns true for a keyframe.
   * Throws (and leaves the held frame as it was) when the frame does not fit:
   * a malformed payload, a delta for another baseline, a vertex count that
   * disagrees with the topology.
   */
  apply(frame) {
    const job = this.check(frame);
    const n = job.n;
    if (job.keyframe) {
      // decodeKeyframe validates before it writes, so decoding into the held
      // array leaves it intact when the payload is bad.
      const q = this.q && this.q.length === 3 * n ? this.q : new Int32Array(3 * n);
      decodeKeyframe(job.payload, n, q, job.codec);
      this.q = q;
      job.changed = n;
    } else {
      if (!this.q || this.q.length !== 3 * n) throw new Error('delta ' + job.seq + ' without the keyframe it follows');
      job.changed = decodeDelta(job.payload, n, this.q, job.codec);
    }
    this.advance(job);
    this.show(job, null);
    return job.keyframe;
  }

  /**
   * Checks a Frame message against the head of the chain without changing
   * anything; returns the job to decode: { seq, keyframe, n, quantum, codec,
   * payload (Uint8Array), topology (parsed), simTime, flags, tools,
   * generation }. Throws when the frame does not fit (see apply()).
   */
  check(frame) {
    const seq = toNumber(frame.seq);
    const quantum = frame.quantum;
    if (!(quantum > 0) || !Number.isFinite(quantum)) throw new Error('frame ' + seq + ': bad quantum ' + quantum);
    const payload = frame.payload instanceof Uint8Array ? frame.payload : new Uint8Array(frame.payload || []);
    const n = frame.vertexCount;
    const h = this.head;
    let topology = h.topology;
    if (frame.keyframe) {
      const t = frame.topology;
      if (t) {
        topology = parseTopology(t, n);
      } else if (!topology || n !== h.n) {
        throw new Error('keyframe ' + seq + ' without the topology its ' + n + ' vertices need');
      }
    } else {
      if (!h.seq) throw new Error('delta ' + seq + ' before any keyframe');
      const base = toNumber(frame.baselineSeq);
      if (base !== h.seq) throw new Error('delta ' + seq + ' is against frame ' + base + ', held ' + h.seq);
      if (n !== h.n) throw new Error('delta ' + seq + ' has ' + n + ' vertices, held ' + h.n);
      if (quantum !== h.quantum) throw new Error('delta ' + seq + ' changes the quantum');
    }
    return {
      seq, keyframe: !!frame.keyframe, n, quantum, codec: frame.codec || 0, payload, topology,
      simTime: frame.simTime || 0, flags: frame.flags || 0, tools: frame.tools || [],
      generation: this.generation, changed: 0,
    };
  }

  /** Makes a checked job the head of the chain (the next delta's baseline). */
  advance(job) {
    this.head = { seq: job.seq, n: job.n, quantum: job.quantum, topology: job.topology };
  }

  /**
   * Makes a decoded job the frame held. positions: the job's positions in
   * metres (a Float32Array(3n) decoded elsewhere, which the stream adopts),
   * or null to dequantize this.q into the held array in place.
   */
  show(job, positions) {
    const n = job.n;
    let resized = !this.positions || this.positions.length !== 3 * n;
    if (positions) {
      if (positions.length !== 3 * n) throw new Error('frame ' + job.seq + ': decoded ' + positions.length + ' values');
      this.positions = positions;
    } else {
      if (resized) this.positions = new Float32Array(3 * n);
      dequantize(this.q, n, job.quantum, this.positions);
    }
    if (resized || job.topology !== this.topology) this.topologyVersion++;
    this.vertexCount = n;
    this.quantum = job.quantum;
    this.topology = job.topology;
    this.seq = job.seq;
    this.simTime = job.simTime;
    this.flags = job.flags;
    this.tools = job.tools;
    this.lastChanged = job.changed;
    if (job.keyframe) this.keyframes++;
    else this.deltas++;
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
