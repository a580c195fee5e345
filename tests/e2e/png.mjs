// png.mjs: a small PNG reader for the browser tests, enough for the
// screenshots Chromium writes (8-bit RGB or RGBA, not interlaced), so the
// tests can compare pixels instead of file bytes. Uses node's zlib only.
// The pages render at a device scale factor under 1 (SHOT_SCALE: a quarter
// of the pixels to software-render); rects are given in CSS pixels and
// taken at the image's scale.

import zlib from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * The device pixels per CSS pixel the browser tests' pages render at
 * (Playwright's deviceScaleFactor). 0.5 draws a quarter of the pixels of a
 * 1280 x 800 page: each software-rendered (SwiftShader, antialiased) frame
 * costs the loaded 2-core CI box that much less, and every wait on a page
 * with it. js.training took 133 s instead of 198 s at 0.5 (load 17-18,
 * 2026-12-02); the screenshots are 640 x 400, their text still legible.
 */
export const SHOT_SCALE = 0.5;

/** A rect in CSS pixels {x, y, w, h} in the device pixels of an image at scale s. */
function devRect(rect, s) {
  const x = Math.round(rect.x * s), y = Math.round(rect.y * s);
  return { x, y, w: Math.round((rect.x + rect.w) * s) - x, h: Math.round((rect.y + rect.h) * s) - y };
}

/**
 * Returns { width, height, channels, data, scale } with data as RGB(A)
 * rows; scale: the device pixels per CSS pixel of the page it was taken of
 * (default SHOT_SCALE), for the rects below.
 */
export function decodePng(buf, scale = SHOT_SCALE) {
  if (buf.length < 8 || !buf.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG');
  let o = 8;
  let width = 0, height = 0, depth = 0, colour = 0, interlace = 0;
  const idat = [];
  while (o + 8 <= buf.length) {
    const len = buf.readUInt32BE(o);
    const type = buf.toString('latin1', o + 4, o + 8);
    const body = buf.subarray(o + 8, o + 8 + len);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      depth = body[8];
      colour = body[9];
      interlace = body[12];
    } else if (type === 'IDAT') {
      idat.push(body);
    } else if (type === 'IEND') {
      break;
    }
    o += 12 + len;
  }
  if (depth !== 8 || (colour !== 2 && colour !== 6) || interlace !== 0) {
    throw new Error(`unsupported PNG: depth ${depth}, colour type ${colour}, interlace ${interlace}`);
  }
  const channels = colour === 6 ? 4 : 3;
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  if (raw.length < height * (stride + 1)) throw new Error('PNG data too short');
  const data = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = data.subarray(y * stride, (y + 1) * stride);
    const up = y ? data.subarray((y - 1) * stride, y * stride) : null;
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? row[i - channels] : 0;
      const b = up ? up[i] : 0;
      const c = up && i >= channels ? up[i - channels] : 0;
      let v = src[i];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) >> 1; break;
        case 4: {
          const p = a + b - c;
          const pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
          v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw new Error('bad PNG filter ' + filter);
      }
      row[i] = v & 0xff;
    }
  }
  return { width, height, channels, data, scale };
}

/**
 * Fraction of pixels inside rect {x, y, w, h} (CSS pixels) whose RGB differs
 * by more than `threshold` (sum over channels) between two decoded images of
 * one size.
 */
export function changedFraction(a, b, cssRect, threshold = 24) {
  if (a.width !== b.width || a.height !== b.height) throw new Error('images differ in size');
  const rect = devRect(cssRect, a.scale);
  let changed = 0, total = 0;
  for (let y = rect.y; y < rect.y + rect.h; y++) {
    for (let x = rect.x; x < rect.x + rect.w; x++) {
      const ia = (y * a.width + x) * a.channels;
      const ib = (y * b.width + x) * b.channels;
      const d = Math.abs(a.data[ia] - b.data[ib]) + Math.abs(a.data[ia + 1] - b.data[ib + 1]) +
        Math.abs(a.data[ia + 2] - b.data[ib + 2]);
      if (d > threshold) changed++;
      total++;
    }
  }
  return total ? changed / total : 0;
}

/** Mean RGB of rect (CSS pixels), to tell a rendered scene from a blank canvas. */
export function meanColour(img, cssRect) {
  const rect = devRect(cssRect, img.scale);
  const sum = [0, 0, 0];
  let n = 0;
  for (let y = rect.y; y < rect.y + rect.h; y++) {
    for (let x = rect.x; x < rect.x + rect.w; x++) {
      const i = (y * img.width + x) * img.channels;
      sum[0] += img.data[i]; sum[1] += img.data[i + 1]; sum[2] += img.data[i + 2];
      n++;
    }
  }
  return sum.map((s) => s / Math.max(n, 1));
}
