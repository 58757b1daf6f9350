// The framing of the pod bridge (bridge.ts, and jail/pod-bridge.mjs in the pod, which describes
// it): kind (1 byte), channel id (4 bytes), payload length (4 bytes), payload. The pod's script
// takes the limits below from its command line, so they are set here only.

export const FrameKind = { ready: 0, open: 1, data: 2, end: 3, close: 4, credit: 5 } as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

export const FRAME_HEADER = 9;
/** The largest payload a frame carries; a longer one from the pod stops the bridge before it is buffered. */
export const MAX_FRAME_PAYLOAD = 64 * 1024;
/** Bytes of one channel sent and not yet acknowledged (CREDIT), each way. */
export const CHANNEL_WINDOW = 256 * 1024;
/**
 * Channels the pod may hold open at once, as many connections as the egress and model proxies each
 * take from a jail (MAX_CONNECTIONS there).
 */
export const MAX_CHANNELS = 64;

export function frame(kind: FrameKind, id: number, payload?: Buffer): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER + (payload?.length ?? 0));
  out.writeUInt8(kind, 0);
  out.writeUInt32BE(id, 1);
  out.writeUInt32BE(payload?.length ?? 0, 5);
  payload?.copy(out, FRAME_HEADER);
  return out;
}

export function u32(n: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeUInt32BE(n);
  return out;
}

export class FrameError extends Error {
  override name = 'FrameError';
}

/**
 * Cuts a byte stream into frames. It holds at most one frame's worth of bytes: a header announcing
 * more than MAX_FRAME_PAYLOAD is refused at once (FrameError), and `onFrame` may throw a FrameError
 * too; after the first, everything later is dropped. A frame that arrives a few bytes at a time is
 * put together once it is whole, not at every piece, so a trickle costs no more than a flood.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Bytes needed before there is anything to read: a header, or the frame it announces. */
  private need = FRAME_HEADER;
  private failed = false;

  constructor(
    private readonly onFrame: (kind: number, id: number, payload: Buffer) => void,
    private readonly onError: (err: FrameError) => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.failed) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size < this.need) return;
    const buf = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks, this.size);
    try {
      let at = 0;
      this.need = FRAME_HEADER;
      while (buf.length - at >= FRAME_HEADER) {
        const length = buf.readUInt32BE(at + 5);
        if (length > MAX_FRAME_PAYLOAD) {
          throw new FrameError(`a frame of ${length} bytes (at most ${MAX_FRAME_PAYLOAD})`);
        }
        if (buf.length - at < FRAME_HEADER + length) {
          this.need = FRAME_HEADER + length;
          break;
        }
        const payload = buf.subarray(at + FRAME_HEADER, at + FRAME_HEADER + length);
        const [kind, id] = [buf.readUInt8(at), buf.readUInt32BE(at + 1)];
        at += FRAME_HEADER + length;
        this.onFrame(kind, id, payload);
      }
      const rest = buf.subarray(at);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.size = rest.length;
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      this.failed = true;
      this.chunks = [];
      this.onError(err);
    }
  }
}
