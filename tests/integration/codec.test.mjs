// codec.test.mjs: client-web/src/codec.js (the JavaScript twin of
// proto/ts_codec.c) and src/stream.js without a daemon: bytes produced by
// ts_codec.c decode to the same integers, random round trips through an
// encoder written from the spec in proto/ts_codec.h, every malformed form is
// rejected without touching the positions, and the frame stream checks the
// baseline chain and the topology. Run: node --test tests/integration/codec.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { decodeKeyframe, decodeDelta, dequantize, CodecError } from '../../client-web/src/codec.js';
import { FrameStream, parseTopology } from '../../client-web/src/stream.js';

const hex = (h) => Uint8Array.from(h.match(/../g) || [], (x) => parseInt(x, 16));
const I32_MIN = -2147483648;
const I32_MAX = 2147483647;

// Encoder written from proto/ts_codec.h, for round trips.
function putVarint(out, v) {
  v >>>= 0;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
}
const zz = (v) => ((v << 1) ^ (v >> 31)) >>> 0;
function encodeKeyframe(q, n) {
  const out = [];
  const prev = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    for (let a = 0; a < 3; a++) {
      putVarint(out, zz((q[3 * i + a] - prev[a]) | 0));
      prev[a] = q[3 * i + a];
    }
  }
  return Uint8Array.from(out);
}
function encodeDelta(base, q, n) {
  const changed = [];
  for (let i = 0; i < n; i++) {
    if (q[3 * i] !== base[3 * i] || q[3 * i + 1] !== base[3 * i + 1] || q[3 * i + 2] !== base[3 * i + 2]) changed.push(i);
  }
  const out = [];
  putVarint(out, changed.length);
  let prev = -1;
  for (const i of changed) {
    putVarint(out, i - prev - 1);
    prev = i;
    for (let a = 0; a < 3; a++) putVarint(out, zz((q[3 * i + a] - base[3 * i + a]) | 0));
  }
  return { bytes: Uint8Array.from(out), m: changed.length };
}

// xorshift32, so failures reproduce.
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s;
  };
}

test('bytes from ts_codec.c decode to the same integers', () => {
  // ts_encode_keyframe / ts_encode_delta output for these vertices, with
  // int32 extremes so that the differences wrap around.
  const a = [0, 0, 0, 1, -1, 64, I32_MAX, I32_MIN, -8000, -4000, 150, 4000];
  const b = [0, 0, 0, 1, -2, 64, I32_MAX, I32_MIN, -8000, I32_MIN, 150, 4001];
  const kf = hex('00000002018001fcffffff0ffdffffff0fff7dc2c1ffff0fd3fdffff0fc0bb01');
  const q = new Int32Array(12);
  assert.equal(decodeKeyframe(kf, 4, q), kf.length);
  assert.deepEqual(Array.from(q), a);
  assert.equal(decodeDelta(hex('020100010001bfc1ffff0f0002'), 4, q), 2);
  assert.deepEqual(Array.from(q), b);
  assert.equal(decodeDelta(hex('00'), 4, q), 0);
  assert.deepEqual(Array.from(q), b);
  // And the spec encoder produces the same bytes.
  assert.deepEqual(encodeKeyframe(Int32Array.from(a), 4), kf);
  assert.deepEqual(encodeDelta(Int32Array.from(a), Int32Array.from(b), 4).bytes, hex('020100010001bfc1ffff0f0002'));
});

test('random keyframes and deltas round-trip, small steps and full int32 range', () => {
  const r = rng(12345);
  for (let t = 0; t < 200; t++) {
    const n = t < 2 ? t : 1 + (r() % 400);
    const wide = t % 3 === 0;
    const a = new Int32Array(3 * n);
    for (let i = 0; i < a.length; i++) a[i] = wide ? r() | 0 : (r() % 20001) - 10000;
    const b = Int32Array.from(a);
    for (let i = 0; i < b.length; i++) if (r() % 5 === 0) b[i] = wide ? r() | 0 : b[i] + (r() % 401) - 200;
    const q = new Int32Array(3 * n).fill(7);
    const kf = encodeKeyframe(a, n);
    assert.equal(decodeKeyframe(kf, n, q), kf.length);
    assert.deepEqual(q, a);
    const d = encodeDelta(a, b, n);
    assert.equal(decodeDelta(d.bytes, n, q), d.m);
    assert.deepEqual(q, b);
  }
});

test('the varint limits: 5 bytes, 32 bits', () => {
  const q = new Int32Array(3);
  // 0xffffffff as zigzag is -2147483648: the largest legal varint.
  decodeKeyframe(hex('ffffffff0f' + '00' + '00'), 1, q);
  assert.deepEqual(Array.from(q), [I32_MIN, 0, 0]);
  // A fifth byte with bits above 32 is rejected, as is a sixth byte.
  assert.throws(() => decodeKeyframe(hex('ffffffff1f0000'), 1, q), CodecError);
  assert.throws(() => decodeKeyframe(hex('ffffffff8f000000'), 1, q), CodecError);
  assert.deepEqual(Array.from(q), [I32_MIN, 0, 0], 'rejected keyframes change nothing');
});

test('malformed keyframes are rejected and leave q as it was', () => {
  const q = Int32Array.from([5, 6, 7, 8, 9, 10]);
  const cases = [
    hex(''),                 // empty for 2 vertices
    hex('0202'),             // too short
    hex('020202020202' + '00'), // a trailing byte
    hex('0202020202' + '80'), // truncated varint at the end
  ];
  for (const c of cases) {
    assert.throws(() => decodeKeyframe(c, 2, q), CodecError, 'payload ' + Array.from(c));
    assert.deepEqual(Array.from(q), [5, 6, 7, 8, 9, 10]);
  }
  assert.equal(decodeKeyframe(hex(''), 0, new Int32Array(0)), 0);
  assert.throws(() => decodeKeyframe(hex('00'), 0, new Int32Array(0)), CodecError);
});

test('malformed deltas are rejected and leave q as it was', () => {
  const start = [1, 2, 3, 4, 5, 6, 7, 8, 9];
  const q = Int32Array.from(start);
  const cases = {
    'more changes than vertices': hex('04' + '00020202'.repeat(4)),
    'index past the end': hex('01' + '03' + '020202'),
    'gap past the end on the second change': hex('02' + '00020202' + '02020202'),
    'truncated residual': hex('01' + '00' + '0202'),
    'trailing byte': hex('01' + '00020202' + '00'),
    'empty payload': hex(''),
    'count varint over 32 bits': hex('ffffffff7f'),
    'change count missing its changes': hex('02' + '00020202'),
  };
  for (const [what, bytes] of Object.entries(cases)) {
    assert.throws(() => decodeDelta(bytes, 3, q), CodecError, what);
    assert.deepEqual(Array.from(q), start, what + ': q unchanged');
  }
  // The last change is applied only once the whole payload checked out.
  assert.equal(decodeDelta(hex('02' + '00020202' + '01010101'), 3, q), 2);
  assert.deepEqual(Array.from(q), [2, 3, 4, 4, 5, 6, 6, 7, 8]);
});

test('argument checks: q must hold n vertices', () => {
  assert.throws(() => decodeKeyframe(hex('000000'), 2, new Int32Array(3)), RangeError);
  assert.throws(() => decodeDelta(hex('00'), 2, new Int32Array(5)), RangeError);
  assert.throws(() => decodeDelta([0], 1, new Int32Array(3)), TypeError);
  assert.throws(() => decodeDelta(hex('00'), 1, new Float32Array(3)), TypeError);
});

test('dequantize writes q * quantum in place', () => {
  const out = new Float32Array(6);
  const same = dequantize(Int32Array.from([100000, -250, 0, 1, 2, 3]), 2, 1e-5, out);
  assert.equal(same, out);
  assert.ok(Math.abs(out[0] - 1.0) < 1e-6);
  assert.ok(Math.abs(out[1] + 0.0025) < 1e-9);
  assert.ok(Math.abs(out[5] - 3e-5) < 1e-11);
});

function frame(fields) {
  return { sessionId: 1, simTime: 0, quantum: 1e-5, flags: 0, tools: [], ...fields };
}

test('FrameStream follows the baseline chain and rejects what does not fit', () => {
  const n = 4;
  const a = Int32Array.from([0, 0, 0, 1000, 0, 0, 0, 0, 1000, 1000, 0, 1000]);
  const b = Int32Array.from(a); b[4] = -300;
  const c = Int32Array.from(b); c[4] = -600; c[1] = 5;
  const topology = { vertexCount: n, triangles: [0, 1, 2, 1, 3, 2], layerTriangleCounts: [1, 1], layerNames: ['mucosa', 'submucosa'] };
  const s = new FrameStream();
  assert.throws(() => s.apply(frame({ seq: 1, keyframe: false, baselineSeq: 0, vertexCount: n, payload: hex('00') })), /before any keyframe/);
  assert.throws(() => s.apply(frame({ seq: 1, keyframe: true, vertexCount: n, payload: encodeKeyframe(a, n) })), /without the topology/);

  assert.equal(s.apply(frame({ seq: 10, keyframe: true, vertexCount: n, payload: encodeKeyframe(a, n), topology })), true);
  assert.equal(s.vertexCount, n);
  assert.deepEqual(s.topology.groups, [{ name: 'mucosa', start: 0, count: 3 }, { name: 'submucosa', start: 3, count: 3 }]);
  assert.ok(Math.abs(s.positions[3] - 0.01) < 1e-7);
  const positions = s.positions;
  const version = s.topologyVersion;

  assert.equal(s.apply(frame({ seq: 11, keyframe: false, baselineSeq: 10, vertexCount: n, payload: encodeDelta(a, b, n).bytes })), false);
  assert.equal(s.lastChanged, 1);
  assert.ok(Math.abs(s.positions[4] + 0.003) < 1e-7);
  // A delta against another frame is refused and changes nothing.
  assert.throws(() => s.apply(frame({ seq: 13, keyframe: false, baselineSeq: 12, vertexCount: n, payload: encodeDelta(b, c, n).bytes })), /against frame 12, held 11/);
  assert.equal(s.seq, 11);
  assert.ok(Math.abs(s.positions[4] + 0.003) < 1e-7);
  s.apply(frame({ seq: 12, keyframe: false, baselineSeq: 11, vertexCount: n, payload: encodeDelta(b, c, n).bytes }));
  assert.deepEqual(Array.from(s.q), Array.from(c));
  assert.equal(s.positions, positions, 'positions are updated in place');
  assert.equal(s.topologyVersion, version, 'deltas keep the topology');

  // A later keyframe without topology but the same size keeps the topology.
  s.apply(frame({ seq: 20, keyframe: true, vertexCount: n, payload: encodeKeyframe(a, n) }));
  assert.deepEqual(Array.from(s.q), Array.from(a));
  assert.equal(s.positions, positions);
  assert.equal(s.keyframes, 2);
  assert.equal(s.deltas, 2);
});

test('topologies that do not fit the vertices are refused', () => {
  assert.throws(() => parseTopology({ vertexCount: 3, triangles: [0, 1, 3], layerTriangleCounts: [1], layerNames: ['a'] }, 3), /index 3 past 3/);
  assert.throws(() => parseTopology({ vertexCount: 3, triangles: [0, 1], layerTriangleCounts: [], layerNames: [] }, 3), /multiple of 3/);
  assert.throws(() => parseTopology({ vertexCount: 4, triangles: [0, 1, 2], layerTriangleCounts: [1], layerNames: ['a'] }, 3), /4 vertices/);
  assert.throws(() => parseTopology({ vertexCount: 3, triangles: [0, 1, 2], layerTriangleCounts: [2], layerNames: ['a'] }, 3), /add up to 2/);
  const t = parseTopology({ vertexCount: 3, triangles: [0, 1, 2, 2, 1, 0], layerTriangleCounts: [1], layerNames: ['mucosa'] }, 3);
  assert.deepEqual(t.groups, [{ name: 'mucosa', start: 0, count: 3 }, { name: 'other', start: 3, count: 3 }]);
});
