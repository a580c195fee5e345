// decode_worker.js: a module Web Worker that decodes the page's frames off
// the main thread (issue 9: "decoding runs off the main thread").
//
// The page (src/framedecoder.js) checks each Frame against the baseline
// chain itself (FrameStream.check) and posts only the work here:
//   { generation, seq, keyframe, n, codec, quantum, payload (Uint8Array whose
//     ArrayBuffer is transferred: the WebSocket message, not copied) }
//   { recycle: ArrayBuffer }  a positions buffer the page no longer shows
//   { seed, generation, seq, q }  the page's q (transferred) of a chain it
//     began to decode before this worker was ready; its deltas come here now
// The worker keeps the quantized positions q (Int32Array) of the chain,
// decodes the payload into it with the same codec.js the page and the node
// tests use (q1, or q2 through fzstd), dequantizes into a Float32Array
// taken from its pool of recycled buffers, and transfers that back:
//   { generation, seq, positions (Float32Array, transferred), changed, ms }
// or { generation, seq, error } when the payload does not decode (q is then
// untouched: the decoders validate before writing). ms is the decode and
// dequantize time of the frame, measured here.
//
// In steady state nothing is allocated or copied per frame: two or three
// position buffers travel between the page and this worker.

import { decodeKeyframe, decodeDelta, dequantize, q2Available } from './codec.js';

let q = null;           // Int32Array(3n) of the chain being decoded
let qGeneration = 0;    // the stream generation q belongs to
let qSeq = 0;           // seq of the frame q holds; 0 after a failure
const pool = [];        // free ArrayBuffers for positions
const POOL_MAX = 4;

function takeBuffer(bytes) {
  for (let i = pool.length - 1; i >= 0; i--) {
    if (pool[i].byteLength === bytes) return pool.splice(i, 1)[0];
  }
  return new ArrayBuffer(bytes);
}

function decode(m) {
  const n = m.n;
  if (m.keyframe) {
    const into = q && q.length === 3 * n ? q : new Int32Array(3 * n);
    decodeKeyframe(m.payload, n, into, m.codec);
    q = into;
    qGeneration = m.generation;
    qSeq = m.seq;
    return n;
  }
  if (!q || qGeneration !== m.generation || !qSeq || q.length !== 3 * n)
    throw new Error('delta ' + m.seq + ' without the keyframe it follows');
  const changed = decodeDelta(m.payload, n, q, m.codec);
  qSeq = m.seq;
  return changed;
}

self.onmessage = (ev) => {
  const m = ev.data;
  if (m.recycle) {
    if (pool.length < POOL_MAX) pool.push(m.recycle);
    return;
  }
  if (m.seed) {
    // the page decoded this chain until the worker was ready: take it over
    q = m.q;
    qGeneration = m.generation;
    qSeq = m.seq;
    return;
  }
  const t0 = performance.now();
  let changed;
  try {
    changed = decode(m);
  } catch (err) {
    qSeq = 0; // deltas are refused until the next keyframe
    self.postMessage({ generation: m.generation, seq: m.seq, error: err.message });
    return;
  }
  const positions = new Float32Array(takeBuffer(12 * m.n));
  dequantize(q, m.n, m.quantum, positions);
  const ms = performance.now() - t0;
  self.postMessage({ generation: m.generation, seq: m.seq, positions, changed, ms }, [positions.buffer]);
};

self.postMessage({ ready: true, q2: q2Available });
