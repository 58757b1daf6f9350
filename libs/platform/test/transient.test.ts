import { jetstream } from '@nats-io/jetstream';
import { createServer, connect, type AddressInfo } from 'node:net';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connectNats, createLogger, isTransientFailure, toAppError, type NatsConnection } from '../src/index.js';

// What real servers and drivers throw when a backing server does not answer, classified the way
// every service reports it: `unavailable` (503, retry), never `internal`.

const logger = createLogger({ service: 'test', level: 'silent' });
const suffix = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;

/** What a call threw (it must throw). */
async function thrown(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  throw new Error('the call did not fail');
}

function expectUnavailable(err: unknown) {
  expect(isTransientFailure(err), String(err)).toBe(true);
  expect(toAppError(err)).toMatchObject({ code: 'unavailable', retryable: true });
}

describe('failures of backing servers are unavailable, not internal', () => {
  let nc: NatsConnection;

  beforeAll(async () => {
    nc = await connectNats({ servers: inject('natsUrl'), name: 'transient-test', logger });
  });
  afterAll(async () => {
    await nc?.drain();
  });

  it('a NATS request nobody answers', async () => {
    expectUnavailable(await thrown(() => nc.request(`test.${suffix}.nobody`, '', { timeout: 2_000 })));
  });

  it('a NATS request whose responder does not answer in time', async () => {
    const sub = nc.subscribe(`test.${suffix}.silent`, { callback: () => {} });
    await nc.flush();
    try {
      expectUnavailable(await thrown(() => nc.request(`test.${suffix}.silent`, '', { timeout: 200 })));
    } finally {
      sub.unsubscribe();
    }
  });

  it('a JetStream publish no stream takes', async () => {
    const js = jetstream(nc, { timeout: 2_000 });
    expectUnavailable(await thrown(() => js.publish(`test.${suffix}.nostream`, 'x')));
  });

  it('a request on a closed connection', async () => {
    const closed = await connectNats({ servers: inject('natsUrl'), name: 'transient-closed', logger });
    await closed.close();
    expectUnavailable(await thrown(() => closed.request(`test.${suffix}.any`, '', { timeout: 1_000 })));
  });

  it('a database that cannot be reached', async () => {
    // Nothing listens on port 1.
    const client = new MongoClient('mongodb://127.0.0.1:1/?directConnection=true', {
      serverSelectionTimeoutMS: 300,
      connectTimeoutMS: 300,
    });
    try {
      expectUnavailable(await thrown(() => client.db('x').command({ ping: 1 })));
    } finally {
      await client.close();
    }
  });

  it('a write on a connection the database closed (the driver passes the socket error through)', async () => {
    // What the MongoDB driver threw when FerretDB was killed under a pooled connection: Node's own
    // "This socket has been ended by the other party" (EPIPE), unwrapped. Made here by a real socket.
    const server = createServer((socket) => socket.end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    // The same error is emitted as well; the callback's copy is the one checked.
    socket.on('error', () => {});
    try {
      await new Promise((resolve) => socket.once('end', resolve));
      const err = await new Promise<unknown>((resolve) => socket.write('ping', (e) => resolve(e)));
      expect(String(err)).toContain('ended by the other party');
      expectUnavailable(err);
    } finally {
      socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('and a bug is still internal', () => {
    expect(isTransientFailure(new TypeError('x is undefined'))).toBe(false);
    expect(toAppError(new TypeError('x is undefined'))).toMatchObject({ code: 'internal', retryable: false });
  });
});
