// protocol.js: Envelope encoding and decoding for the tissued wire protocol
// (proto/tissue.proto, v1) on top of a protobufjs Root.
//
// The page gets the Root from the global `protobuf` (protobuf.min.js, served
// by the daemon under /vendor/) and /proto/tissue.proto; the node tests get it
// from the protobufjs package and the repository's proto file. Both then use
// this module, so tests exercise the page's own encoding rules.

export const PROTOCOL_VERSION = 1;

export const Role = Object.freeze({ OBSERVER: 0, CONTROLLER: 1 });

/** uint64 fields decode as numbers in the browser and as Long in node. */
export function toNumber(v) {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v.toNumber === 'function') return v.toNumber();
  return Number(v);
}

/** Microseconds since the Unix epoch, as a client clock for poses and pings. */
export function nowMicros() {
  const ms = typeof performance !== 'undefined' && performance.timeOrigin
    ? performance.timeOrigin + performance.now()
    : Date.now();
  return Math.round(ms * 1000);
}

/**
 * Wraps a loaded protobufjs Root. encode(kind, fields, requestId) returns
 * the bytes of an Envelope whose body is `kind` (a field name of the oneof,
 * e.g. 'hello', 'toolPose'); decode(bytes) returns
 * { requestId, kind, body } where kind is the oneof field that is set
 * (undefined for a body this client does not know).
 */
export class Protocol {
  constructor(root) {
    this.root = root;
    this.Envelope = root.lookupType('tissued.v1.Envelope');
  }

  encode(kind, fields, requestId = 0) {
    if (!this.Envelope.fields[kind]) throw new Error('unknown message kind ' + kind);
    const payload = { requestId, [kind]: fields || {} };
    const err = this.Envelope.verify(payload);
    if (err) throw new Error('bad ' + kind + ': ' + err);
    return this.Envelope.encode(this.Envelope.fromObject(payload)).finish();
  }

  decode(bytes) {
    const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const env = this.Envelope.decode(data);
    const kind = env.body;
    return { requestId: toNumber(env.requestId), kind, body: kind ? env[kind] : null };
  }
}

/** Loads the protocol in node from a .proto path with the protobufjs package. */
export function loadProtocolSync(protobuf, protoPath) {
  return new Protocol(protobuf.loadSync(protoPath));
}

/** Loads the protocol in the browser from the daemon's /proto/tissue.proto. */
export async function loadProtocol(protobuf, url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error('GET ' + url + ': HTTP ' + res.status);
  return new Protocol(protobuf.parse(await res.text()).root);
}
