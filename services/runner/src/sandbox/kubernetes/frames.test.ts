import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { frame, FrameError, FrameKind, FrameReader, MAX_FRAME_PAYLOAD, u32 } from './frames.js';

function read(pieces: Buffer[]) {
  const frames: [number, number, string][] = [];
  const errors: FrameError[] = [];
  const reader = new FrameReader(
    (kind, id, payload) => frames.push([kind, id, payload.toString('hex')]),
    (err) => errors.push(err),
  );
  for (const piece of pieces) reader.push(piece);
  return { frames, errors };
}

describe('the pod bridge’s frames', () => {
  const big = randomBytes(MAX_FRAME_PAYLOAD);
  const stream = Buffer.concat([
    frame(FrameKind.ready, 0),
    frame(FrameKind.open, 1, Buffer.from([0x46, 0xa0])),
    frame(FrameKind.data, 1, big),
    frame(FrameKind.credit, 1, u32(42)),
    frame(FrameKind.close, 1),
  ]);
  const expected = [
    [FrameKind.ready, 0, ''],
    [FrameKind.open, 1, '46a0'],
    [FrameKind.data, 1, big.toString('hex')],
    [FrameKind.credit, 1, '0000002a'],
    [FrameKind.close, 1, ''],
  ];

  it('reads the same frames whole, byte by byte, and cut anywhere', () => {
    expect(read([stream])).toEqual({ frames: expected, errors: [] });
    expect(read([...stream].map((b) => Buffer.from([b])))).toEqual({ frames: expected, errors: [] });
    const cuts = [3, 9, 10, 20, 5000, 65_000, stream.length - 1];
    const pieces = cuts.map((end, i) => stream.subarray(cuts[i - 1] ?? 0, end));
    pieces.push(stream.subarray(cuts.at(-1)));
    expect(read(pieces)).toEqual({ frames: expected, errors: [] });
  });

  it('refuses a frame past the limit from its header alone, and reads nothing after it', () => {
    const header = Buffer.concat([Buffer.from([FrameKind.data]), u32(1), u32(MAX_FRAME_PAYLOAD + 1)]);
    const { frames, errors } = read([frame(FrameKind.ready, 0), header, frame(FrameKind.ready, 0)]);
    expect(frames).toEqual([[FrameKind.ready, 0, '']]);
    expect(errors.map((e) => e.message)).toEqual([
      `a frame of ${MAX_FRAME_PAYLOAD + 1} bytes (at most ${MAX_FRAME_PAYLOAD})`,
    ]);
  });

  it('stops at the first frame its reader refuses', () => {
    const seen: number[] = [];
    const errors: string[] = [];
    const reader = new FrameReader(
      (kind) => {
        seen.push(kind);
        if (kind === FrameKind.end) throw new FrameError('no end here');
      },
      (err) => errors.push(err.message),
    );
    reader.push(Buffer.concat([frame(FrameKind.ready, 0), frame(FrameKind.end, 1), frame(FrameKind.close, 1)]));
    reader.push(frame(FrameKind.close, 2));
    expect(seen).toEqual([FrameKind.ready, FrameKind.end]);
    expect(errors).toEqual(['no end here']);
  });
});
