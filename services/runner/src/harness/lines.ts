import { Transform, type Readable, type TransformCallback } from 'node:stream';

// A harness's stdout is a stream of lines (JSON-RPC for Codex, stream-json for Claude Code), and
// the agent can write to it: the harness's descriptors are reachable from its commands
// (`/proc/<harness>/fd/1`, same uid). A line read whole into one string past what V8 can hold would
// throw inside the stream's handler and take the runner down with every run on it; so a line is
// bounded, and a harness that writes a longer one is cut off.

/** Longer than any message a harness sends; far below a string's limit. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

/**
 * `input`, passed through as long as no line is longer than `maxLineBytes`; past that the stream
 * ends there (nothing of the long line's rest, nor after it) and `overflow` is called once.
 */
export function boundedLines(input: Readable, overflow: () => void, maxLineBytes = MAX_LINE_BYTES): Readable {
  // The line being read, held until it is whole: only whole lines go on, so a cut-off line never
  // reaches the reader in part.
  let pending: Buffer[] = [];
  let run = 0;
  let cut = false;
  const stop = (stream: Transform) => {
    cut = true;
    pending = [];
    overflow();
    stream.push(null);
  };
  const bounded = new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      if (cut) return done();
      let start = 0;
      for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
        if (run + (nl - start) > maxLineBytes) {
          stop(this);
          return done();
        }
        this.push(Buffer.concat([...pending, chunk.subarray(start, nl + 1)]));
        pending = [];
        run = 0;
        start = nl + 1;
      }
      run += chunk.length - start;
      if (run > maxLineBytes) {
        stop(this);
        return done();
      }
      if (start < chunk.length) pending.push(chunk.subarray(start));
      done();
    },
    flush(done: TransformCallback) {
      if (!cut && pending.length > 0) this.push(Buffer.concat(pending));
      done();
    },
  });
  input.on('error', (err) => bounded.destroy(err));
  return input.pipe(bounded);
}
