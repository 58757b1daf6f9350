import type { IncomingMessage } from 'node:http';

/**
 * How much of an oversized body is read and thrown away before the 413 goes out, and for how long.
 * Past either bound the answer goes out anyway and the connection is closed under the sender.
 */
export const DISCARD_MAX_BYTES = 32 * 1024 * 1024;
export const DISCARD_MAX_MS = 15_000;

/**
 * Reads what is left of a request body and drops it, bounded in bytes and time.
 *
 * A 413 must close the connection (the rest of the body would otherwise be read as the next
 * request), but closing while the client is still sending resets the socket under it: curl copes,
 * Node's `fetch` and browsers report a network error instead of the answer. Reading the rest first
 * lets the client finish sending, so it then reads the 413 like any other answer. The bounds keep
 * an endless or huge body from costing more than a fixed amount of work: the bytes are counted,
 * never kept.
 */
export function discardBody(
  raw: IncomingMessage,
  { maxBytes = DISCARD_MAX_BYTES, maxMs = DISCARD_MAX_MS }: { maxBytes?: number; maxMs?: number } = {},
): Promise<void> {
  if (raw.complete || raw.readableEnded || raw.destroyed) return Promise.resolve();
  // A declared length far past the bound is not worth reading at all.
  const declared = Number(raw.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve();
  return new Promise((resolve) => {
    let read = 0;
    const finish = () => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', finish);
      raw.off('error', finish);
      raw.off('close', finish);
      resolve();
    };
    const onData = (chunk: Buffer | string) => {
      read += chunk.length;
      if (read > maxBytes) finish();
    };
    const timer = setTimeout(finish, maxMs).unref();
    raw.on('data', onData);
    raw.on('end', finish);
    raw.on('error', finish);
    raw.on('close', finish);
    raw.resume();
  });
}
