// framedecoder.js: the page's side of the frame decode worker
// (src/decode_worker.js), and the decode time figures the page shows.
//
// SessionClient (src/connection.js) checks each Frame against the baseline
// chain on the main thread (FrameStream.check, cheap: no payload is read),
// then hands the payload to the worker by transferring the WebSocket
// message's ArrayBuffer. The worker answers in order with the frame's
// positions in a Float32Array it transfers back; the stream adopts it
// (FrameStream.show) and the view points its BufferAttribute at it, and the
// array it showed before goes back to the worker for a later frame. So the
// main thread neither decodes nor copies per frame.
//
// When the worker cannot start (no module workers, the script fails to load)
// or dies, `ready` is false and the client decodes on the main thread, as
// node does (no Worker there): the fallback is the same codec.js.

/** Sums of decode time per place; means are ms / frames. */
export class DecodeStats {
  constructor() {
    this.where = 'main';      // where the last frame was decoded: 'main' | 'worker'
    this.workerFrames = 0;
    this.mainFrames = 0;
    this.workerMs = 0;        // decode + dequantize time spent in the worker
    this.mainMs = 0;          // ... and on the main thread
    this.lastMs = 0;
  }

  add(where, ms) {
    this.where = where;
    this.lastMs = ms;
    if (where === 'worker') {
      this.workerFrames++;
      this.workerMs += ms;
    } else {
      this.mainFrames++;
      this.mainMs += ms;
    }
  }

  /** Mean ms per frame where the last frame was decoded (0 before any). */
  meanMs() {
    return this.where === 'worker'
      ? (this.workerFrames ? this.workerMs / this.workerFrames : 0)
      : (this.mainFrames ? this.mainMs / this.mainFrames : 0);
  }
}

export class FrameDecoder {
  /**
   * Starts the worker at `url` (a module script). onResult(job, positions,
   * ms, error) is called for every job submitted, in order; onFail(text)
   * once if the worker dies.
   */
  constructor(url, WorkerCtor = globalThis.Worker) {
    this.ready = false;
    this.failed = false;
    this.q2 = false;
    this.pending = [];        // jobs submitted and not answered, oldest first
    this.onResult = null;
    this.onFail = null;
    this.worker = null;
    if (typeof WorkerCtor !== 'function') {
      this.failed = true;
      return;
    }
    try {
      this.worker = new WorkerCtor(url, { type: 'module' });
    } catch {
      this.failed = true;
      return;
    }
    this.worker.onmessage = (ev) => this._onMessage(ev.data);
    this.worker.onerror = (ev) => {
      ev.preventDefault?.();
      this._fail('the decode worker failed: ' + (ev.message || 'it did not load'));
    };
    this.worker.onmessageerror = () => this._fail('the decode worker sent a message that does not clone');
  }

  _fail(text) {
    if (this.failed) return;
    this.failed = true;
    this.ready = false;
    this.pending.length = 0;
    this.worker?.terminate();
    this.onFail?.(text);
  }

  _onMessage(m) {
    if (m.ready) {
      this.ready = !this.failed;
      this.q2 = !!m.q2;
      return;
    }
    const job = this.pending.shift();
    if (!job || job.seq !== m.seq || job.generation !== m.generation) {
      this._fail('the decode worker answered frame ' + m.seq + ', expected ' + (job ? job.seq : 'none'));
      return;
    }
    this.onResult?.(job, m.positions || null, m.ms || 0, m.error || null);
  }

  /**
   * Hands a checked job (FrameStream.check) to the worker. Its payload's
   * ArrayBuffer is transferred: the job's payload is unusable afterwards.
   */
  submit(job) {
    const p = job.payload;
    this.pending.push(job);
    this.worker.postMessage({
      generation: job.generation, seq: job.seq, keyframe: job.keyframe, n: job.n,
      codec: job.codec, quantum: job.quantum, payload: p,
    }, p.buffer.byteLength ? [p.buffer] : []);
    job.payload = null;
  }

  /**
   * Moves a chain decoded on the main thread so far to the worker: the
   * stream's quantized positions (its q, transferred: the stream drops it)
   * become the worker's, as if it had decoded the frame held.
   */
  seed(stream) {
    const q = stream.q;
    stream.q = null;
    this.worker.postMessage({ seed: true, generation: stream.generation, seq: stream.seq, q }, [q.buffer]);
  }

  /** Gives a positions array the page no longer uses back to the worker. */
  recycle(positions) {
    if (!this.ready || !positions || !positions.buffer.byteLength) return;
    this.worker.postMessage({ recycle: positions.buffer }, [positions.buffer]);
  }
}
