// codec.js: the JavaScript twin of proto/ts_codec.c and ts_codec_q2.c, the
// frame codecs "q1" and "q2" (q2 itself is in codec_q2.js).
//
// The formats are specified in proto/ts_codec.h; a Frame names its payload's
// codec in Frame.codec (0 or 1: q1, 2: q2), passed here as the last
// argument of the decoders (default q1). Positions travel as int32
// grid coordinates (metres = q * quantum); a q1 keyframe holds every vertex as
// zigzag-varint differences from the previous vertex, a delta holds only the
// vertices that changed against the client's baseline frame. Decoding must
// give exactly the integers the daemon quantized, so all arithmetic here is
// int32 with wrap-around, like the C code's uint32 arithmetic.
//
// Pure ES module without DOM use: the page (src/stream.js) and the node
// tests (tests/integration/*.test.mjs) import the same file.
//
// q is a flat Int32Array of at least 3 * n elements (x, y, z per vertex).
// Both decoders validate the whole payload before writing anything, so a
// rejected payload leaves q untouched; malformed input throws a CodecError.

import { decodeKeyframeQ2, decodeDeltaQ2, q2Available } from './codec_q2.js';

/** Thrown for a payload that does not decode (TS_EDECODE in the C code). */
export class CodecError extends Error {
  constructor(message, code = 'TS_EDECODE') {
    super(message);
    this.name = 'CodecError';
    this.code = code;
  }
}

/** Frame.codec values (proto/ts_codec.h). 0, a Frame without the field, is q1. */
export const CODEC_Q1 = 1;
export const CODEC_Q2 = 2;
export { q2Available };

/** "q1", "q2", or null for an unknown codec id. */
export function codecName(codec) {
  return codec === 0 || codec === CODEC_Q1 ? 'q1' : codec === CODEC_Q2 ? 'q2' : null;
}

function failDecode(message) {
  throw new CodecError(message);
}

// Which decoder a codec id names; throws for an unknown one (TS_EUNSUPPORTED).
function isQ2(codec) {
  if (codec === undefined || codec === null || codec === 0 || codec === CODEC_Q1) return false;
  if (codec === CODEC_Q2) return true;
  throw new CodecError('unknown frame codec ' + codec, 'TS_EUNSUPPORTED');
}

const MAX_VARINT_BYTES = 5;

// Reads one LEB128 varint of at most 32 bits at p[o]; returns the value
// (uint32 as a JS number) and stores the byte count in st.len. A truncated
// varint, one longer than 5 bytes, or one over 32 bits throws.
function getVarint(p, o, end, st) {
  let r = 0;
  for (let k = 0; k < MAX_VARINT_BYTES; k++) {
    if (o + k >= end) throw new CodecError('truncated varint at byte ' + (o + k));
    const b = p[o + k];
    if (k === 4 && (b & 0xf0)) throw new CodecError('varint over 32 bits at byte ' + o);
    r |= (b & 0x7f) << (7 * k);
    if (!(b & 0x80)) {
      st.len = k + 1;
      return r >>> 0;
    }
  }
  throw new CodecError('varint longer than 5 bytes at byte ' + o);
}

// zigzag: u -> (u >>> 1) ^ -(u & 1), an int32.
function zigzagDecode(u) {
  return ((u >>> 1) ^ -(u & 1)) | 0;
}

function checkArgs(bytes, n, q) {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('payload must be a Uint8Array');
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new TypeError('vertex count must be a uint32');
  if (!(q instanceof Int32Array)) throw new TypeError('q must be an Int32Array');
  if (q.length < 3 * n) throw new RangeError('q holds ' + q.length / 3 + ' vertices, need ' + n);
}

/**
 * Decodes a keyframe of n vertices into q (overwriting q[0 .. 3n-1]).
 * codec: Frame.codec (default q1). Returns the number of payload bytes
 * consumed (always bytes.length).
 */
export function decodeKeyframe(bytes, n, q, codec = CODEC_Q1) {
  checkArgs(bytes, n, q);
  if (isQ2(codec)) {
    decodeKeyframeQ2(bytes, n, q, failDecode);
    return bytes.length;
  }
  const end = bytes.length;
  const st = { len: 0 };
  // Pass 1: validate (every varint well formed, payload consumed exactly).
  let o = 0;
  for (let i = 0, c = 3 * n; i < c; i++) {
    getVarint(bytes, o, end, st);
    o += st.len;
  }
  if (o !== end) throw new CodecError('keyframe has ' + (end - o) + ' trailing bytes');
  // Pass 2: apply.
  o = 0;
  let px = 0, py = 0, pz = 0;
  for (let i = 0; i < n; i++) {
    px = (px + zigzagDecode(getVarint(bytes, o, end, st))) | 0; o += st.len;
    py = (py + zigzagDecode(getVarint(bytes, o, end, st))) | 0; o += st.len;
    pz = (pz + zigzagDecode(getVarint(bytes, o, end, st))) | 0; o += st.len;
    q[3 * i] = px;
    q[3 * i + 1] = py;
    q[3 * i + 2] = pz;
  }
  return o;
}

// One pass over a delta payload; writes into q only when apply is set.
function deltaPass(bytes, n, q, apply) {
  const end = bytes.length;
  const st = { len: 0 };
  let o = 0;
  const m = getVarint(bytes, o, end, st);
  o += st.len;
  if (m > n) throw new CodecError('delta changes ' + m + ' vertices of ' + n);
  let prev = -1;
  for (let j = 0; j < m; j++) {
    const gap = getVarint(bytes, o, end, st);
    o += st.len;
    const idx = prev + 1 + gap; // exact: both below 2^33
    if (idx >= n) throw new CodecError('delta vertex index ' + idx + ' past ' + n);
    const rx = zigzagDecode(getVarint(bytes, o, end, st)); o += st.len;
    const ry = zigzagDecode(getVarint(bytes, o, end, st)); o += st.len;
    const rz = zigzagDecode(getVarint(bytes, o, end, st)); o += st.len;
    if (apply) {
      const b = 3 * idx;
      q[b] = (q[b] + rx) | 0;
      q[b + 1] = (q[b + 1] + ry) | 0;
      q[b + 2] = (q[b + 2] + rz) | 0;
    }
    prev = idx;
  }
  if (o !== end) throw new CodecError('delta has ' + (end - o) + ' trailing bytes');
  return m;
}

/**
 * Applies a delta to the n vertices in q (the client's baseline). codec:
 * Frame.codec (default q1). Returns the number of changed vertices; a
 * malformed delta throws and leaves q unchanged.
 */
export function decodeDelta(bytes, n, q, codec = CODEC_Q1) {
  checkArgs(bytes, n, q);
  if (isQ2(codec)) return decodeDeltaQ2(bytes, n, q, failDecode);
  deltaPass(bytes, n, q, false);
  return deltaPass(bytes, n, q, true);
}

/**
 * Writes q * quantum into out (a Float32Array of at least 3n elements),
 * in place: the page calls this on every frame without allocating.
 */
export function dequantize(q, n, quantum, out) {
  const c = 3 * n;
  for (let i = 0; i < c; i++) out[i] = q[i] * quantum;
  return out;
}
