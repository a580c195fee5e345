// codec_q2.js: the JavaScript twin of proto/ts_codec_q2.c, the "q2" frame
// codec: quantized positions as planar second differences in zigzag
// varints, through Zstandard. The format, and why zstd rather than
// meshoptimizer's vertex codec, is in proto/ts_codec.h.
//
// The zstd stage is the fzstd package (pure JavaScript, synchronous; pinned
// in package.json; the page maps the bare name "fzstd" to
// /vendor/fzstd/esm/index.mjs in its import map; its decode worker, which
// has no import map, imports that path). It is loaded with a
// dynamic import, so a page without it still decodes q1 and reports q2
// frames as undecodable instead of failing to load.
//
// Like the C decoder, this one trusts nothing: the payload must be exactly
// one zstd frame (RFC 8878) that declares its content size, at most the
// largest legal content for n vertices (5 + 20 n bytes), checked from the
// header before anything is decompressed; the content must parse and be
// consumed exactly. Keyframes and deltas are validated completely before q
// is written, so a rejected payload leaves q untouched.

let fzstd = null;
try {
  fzstd = await import('fzstd');
} catch {
  fzstd = null; // no zstd decoder: q2 frames are refused with a CodecError
}
if (!fzstd && typeof location !== 'undefined' && typeof document === 'undefined') {
  // a module worker of the page (src/decode_worker.js): import maps do not
  // reach workers, so the package is named by the path the daemon serves it at
  try {
    fzstd = await import('/vendor/fzstd/esm/index.mjs');
  } catch {
    fzstd = null;
  }
}

/** True when the zstd stage is available (q2 frames can be decoded). */
export const q2Available = fzstd !== null;

const ZSTD_MAGIC = 0xfd2fb528;
const WINDOW_LOG_MAX = 29; // as TS__Q2_WINDOW_LOG_MAX in the C decoder

/** The largest q2 content (and q1 payload) of n vertices, bytes. */
export function contentBound(n) {
  return 5 + 20 * n;
}

/**
 * Reads the zstd frame header of a q2 payload and walks its blocks.
 * Returns the declared content size, or throws (via fail) when the payload
 * is not exactly one frame with a declared size and no dictionary.
 */
export function q2ContentSize(p, fail) {
  const len = p.length;
  if (len < 6) fail('q2 payload of ' + len + ' bytes is too short for a zstd frame');
  const magic = (p[0] | (p[1] << 8) | (p[2] << 16) | (p[3] << 24)) >>> 0;
  if (magic !== ZSTD_MAGIC) fail('q2 payload is not a zstd frame');
  const fhd = p[4];
  const fcsFlag = fhd >> 6;
  const single = (fhd >> 5) & 1;
  const checksum = (fhd >> 2) & 1;
  const dictFlag = fhd & 3;
  if (fhd & 0x08) fail('zstd frame header has the reserved bit set');
  let o = 5;
  if (!single) {
    const wd = p[o++];
    const base = 2 ** (10 + (wd >> 3));
    const window = base + (base / 8) * (wd & 7);
    if (window > 2 ** WINDOW_LOG_MAX) fail('zstd frame asks for a window of ' + window + ' bytes');
  }
  const dictBytes = [0, 1, 2, 4][dictFlag];
  let dictId = 0;
  for (let k = 0; k < dictBytes; k++) dictId += p[o + k] * 2 ** (8 * k);
  o += dictBytes;
  if (dictId !== 0) fail('zstd frame needs a dictionary');
  const fcsBytes = [single ? 1 : 0, 2, 4, 8][fcsFlag];
  if (fcsBytes === 0) fail('zstd frame does not declare its content size');
  if (o + fcsBytes > len) fail('zstd frame header is cut short');
  let size = 0;
  for (let k = 0; k < fcsBytes; k++) size += p[o + k] * 2 ** (8 * k);
  if (fcsBytes === 2) size += 256;
  o += fcsBytes;
  // the blocks, to find where the frame ends
  for (;;) {
    if (o + 3 > len) fail('zstd frame is cut short');
    const bh = p[o] | (p[o + 1] << 8) | (p[o + 2] << 16);
    o += 3;
    const last = bh & 1;
    const type = (bh >> 1) & 3;
    const bsize = bh >>> 3;
    if (type === 3) fail('zstd block of the reserved type');
    o += type === 1 ? 1 : bsize;
    if (o > len) fail('zstd frame is cut short');
    if (last) break;
  }
  if (checksum) o += 4;
  if (o !== len) fail('q2 payload has ' + (len - o) + ' bytes after the zstd frame');
  return size;
}

function inflate(p, n, fail) {
  if (!fzstd) fail('q2 frames need the zstd decoder (the fzstd package), which did not load');
  const size = q2ContentSize(p, fail);
  if (size > contentBound(n)) fail('q2 content of ' + size + ' bytes is over the bound for ' + n + ' vertices');
  let c;
  try {
    c = fzstd.decompress(p);
  } catch (err) {
    fail('q2 payload does not decompress: ' + err.message);
  }
  if (c.length !== size) fail('q2 content is ' + c.length + ' bytes, its header says ' + size);
  return c;
}

// Cursor over the content: LEB128 varints of at most 32 bits.
class Reader {
  constructor(c, fail) {
    this.c = c;
    this.o = 0;
    this.fail = fail;
  }

  next() {
    const c = this.c;
    let o = this.o;
    if (o < c.length && c[o] < 0x80) {
      this.o = o + 1;
      return c[o];
    }
    let r = 0;
    for (let k = 0; k < 5; k++, o++) {
      if (o >= c.length) this.fail('truncated varint at content byte ' + o);
      const b = c[o];
      if (k === 4 && (b & 0xf0)) this.fail('varint over 32 bits at content byte ' + this.o);
      r |= (b & 0x7f) << (7 * k);
      if (!(b & 0x80)) {
        this.o = o + 1;
        return r >>> 0;
      }
    }
    this.fail('varint longer than 5 bytes at content byte ' + this.o);
    return 0;
  }
}

const zz = (u) => ((u >>> 1) ^ -(u & 1)) | 0;

/** Decodes a q2 keyframe of n vertices into q (Int32Array, 3n). */
export function decodeKeyframeQ2(p, n, q, fail) {
  const c = inflate(p, n, fail);
  // pass 1: every varint well formed and the content consumed exactly
  const rd = new Reader(c, fail);
  for (let i = 0, k = 3 * n; i < k; i++) rd.next();
  if (rd.o !== c.length) fail('q2 keyframe content has ' + (c.length - rd.o) + ' bytes left over');
  // pass 2: planes x, y, z of second differences
  rd.o = 0;
  for (let a = 0; a < 3; a++) {
    let prev = 0, d = 0;
    for (let i = 0; i < n; i++) {
      d = (d + zz(rd.next())) | 0;
      prev = (prev + d) | 0;
      q[3 * i + a] = prev;
    }
  }
  return n;
}

/** Applies a q2 delta to the n vertices in q; returns the changed count. */
export function decodeDeltaQ2(p, n, q, fail) {
  const c = inflate(p, n, fail);
  const rd = new Reader(c, fail);
  const m = rd.next();
  if (m > n) fail('q2 delta changes ' + m + ' vertices of ' + n);
  if (m * 4 > c.length - rd.o) fail('q2 delta content too short for ' + m + ' vertices');
  const idx = new Uint32Array(m);
  let prev = -1;
  for (let j = 0; j < m; j++) {
    const i = prev + 1 + rd.next(); // exact: both below 2^33
    if (i >= n) fail('q2 delta vertex index ' + i + ' past ' + n);
    idx[j] = i;
    prev = i;
  }
  const res = new Int32Array(3 * m);
  for (let a = 0; a < 3; a++) {
    let r = 0;
    for (let j = 0; j < m; j++) {
      r = (r + zz(rd.next())) | 0;
      res[3 * j + a] = r;
    }
  }
  if (rd.o !== c.length) fail('q2 delta content has ' + (c.length - rd.o) + ' bytes left over');
  for (let j = 0; j < m; j++) {
    const b = 3 * idx[j];
    q[b] = (q[b] + res[3 * j]) | 0;
    q[b + 1] = (q[b + 1] + res[3 * j + 1]) | 0;
    q[b + 2] = (q[b + 2] + res[3 * j + 2]) | 0;
  }
  return m;
}
