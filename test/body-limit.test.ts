import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProcessStack, type ProcessStack } from './support/process-stack.js';

// A body over the limit must be answered with a 413 that ordinary HTTP clients can read. These
// tests use Node's own `fetch` against the gateway as its own process, as deployed: in one process
// with the client, the server reads as fast as the client writes and the reset never shows.

const MIB = 1024 * 1024;

const TOO_LARGE = { error: { code: 'payload_too_large', message: `request body is larger than ${MIB} bytes` } };

/** A JSON body of about `bytes` bytes that is valid apart from its size. */
function jsonBody(bytes: number): string {
  return JSON.stringify({ repository_id: 1, prompt: 'x'.repeat(bytes) });
}

/**
 * The same bytes as a stream: sent chunked, with no Content-Length, so the limit is found
 * mid-body. `gapMs` between chunks keeps the client still sending when the server answers, the way
 * a slow uplink would.
 */
function chunked(text: string, { chunkBytes = 64 * 1024, gapMs = 0 } = {}): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  return new ReadableStream({
    async pull(controller) {
      if (offset >= bytes.length) return controller.close();
      if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
      controller.enqueue(bytes.subarray(offset, offset + chunkBytes));
      offset += chunkBytes;
    },
  });
}

describe('an oversized request body', () => {
  let stack: ProcessStack;
  let base: string;
  let authorization: string;

  beforeAll(async () => {
    stack = await startProcessStack();
    base = `http://127.0.0.1:${stack.port}`;
    const key = stack.admin('keys', 'create', '--user', 'alice').stdout.trim().split('\n').at(-1)!;
    authorization = `Bearer ${key}`;
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    stack?.cleanUp();
  });

  const post = (body: RequestInit['body'], headers: Record<string, string> = {}) =>
    fetch(`${base}/v1/tasks`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json', ...headers },
      body,
      // A streamed request body needs half-duplex in Node's fetch.
      duplex: 'half',
    } as RequestInit);

  // Bodies well past what the kernel's socket buffers absorb: a server that closes without
  // reading them resets the connection while the client is still writing, and fetch then fails
  // (EPIPE / ECONNRESET) before it reads the answer.
  const LARGE = 16 * MIB;

  it('is answered 413 payload_too_large that fetch reads, with Content-Length', async () => {
    const body = jsonBody(LARGE);
    for (let attempt = 0; attempt < 4; attempt++) {
      const res = await post(body);
      expect(res.status).toBe(413);
      expect(await res.json()).toEqual(TOO_LARGE);
    }
  });

  it('is answered 413 that fetch reads when sent chunked', async () => {
    const body = jsonBody(LARGE);
    for (let attempt = 0; attempt < 4; attempt++) {
      const res = await post(chunked(body));
      expect(res.status).toBe(413);
      expect(await res.json()).toEqual(TOO_LARGE);
    }
  });

  it('is answered 413 that fetch reads while a slow client is still sending', async () => {
    const res = await post(chunked(jsonBody(2 * MIB), { chunkBytes: 128 * 1024, gapMs: 20 }));
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(TOO_LARGE);
  });

  it('leaves the server answering the next request on a new connection', async () => {
    expect((await post(jsonBody(2 * MIB))).status).toBe(413);
    const ok = await fetch(`${base}/v1/openapi.json`);
    expect(ok.status).toBe(200);
  });

  it('to the webhook path is refused as it arrives, at what one NATS message can forward', async () => {
    // GitHub may send up to 25 MiB; the gateway forwards a delivery in one NATS message (1 MiB by
    // default), so it stops reading there instead of holding the whole body first.
    const forwardable = Math.floor(((MIB - 4096) * 3) / 4);
    const res = await fetch(`${base}/v1/repohost/webhooks`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'ping',
        'x-github-delivery': 'oversized-1',
        'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
      },
      body: chunked(JSON.stringify({ padding: 'x'.repeat(16 * MIB) }), { chunkBytes: 256 * 1024 }),
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({
      error: { code: 'payload_too_large', message: `request body is larger than ${forwardable} bytes` },
    });
  });

  it('past the discard bound costs bounded work: the connection is closed and the server goes on', async () => {
    // Declared larger than the gateway ever reads and discards (32 MiB): answered without reading.
    const outcome = await post(jsonBody(40 * MIB)).then(
      (res) => res.status,
      (err: unknown) => (err instanceof Error ? err.name : 'error'),
    );
    // Either the 413 arrives before the socket goes, or the send fails: never a hang.
    expect([413, 'TypeError']).toContain(outcome);
    expect((await fetch(`${base}/v1/openapi.json`)).status).toBe(200);
  });
});
