import { Socket } from 'node:net';
import { RequestError } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { connectNats, createLogger, type NatsConnection } from '../src/index.js';

const logger = createLogger({ service: 'test', level: 'silent' });
const suffix = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
const subject = `writes.${suffix}`;

// What patches/@nats-io__nats-core@3.4.0.patch changes (patches/README.md): without it, these fail.
describe('the NATS client as patched', () => {
  let nc: NatsConnection;

  beforeAll(async () => {
    nc = await connectNats({ servers: inject('natsUrl'), name: 'nats-writes-test', logger });
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    await nc.close();
  });

  it('sends what callbacks of one turn of the event loop publish in one write', async () => {
    const received: string[] = [];
    const sub = nc.subscribe(subject, {
      callback: (_err, msg) => {
        received.push(msg.string());
      },
    });
    await nc.flush();

    const writes = vi.spyOn(Socket.prototype, 'write');
    const publishes = () =>
      writes.mock.calls.filter(([data]) =>
        Buffer.from(data as Uint8Array)
          .toString('latin1')
          .includes(`PUB ${subject}`),
      );
    // Five callbacks of the same phase of one turn, as five requests read from five sockets are.
    await new Promise<void>((resolve) => {
      for (let i = 0; i < 5; i++) setImmediate(() => nc.publish(subject, `m${i}`));
      setImmediate(() => setImmediate(resolve));
    });
    await nc.flush();
    expect(publishes()).toHaveLength(1);
    writes.mockRestore();

    await vi.waitFor(() => expect(received).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']));
    sub.unsubscribe();
  });

  it('makes no error for a request that was answered', async () => {
    const service = nc.subscribe(`echo.${suffix}`, {
      callback: (_err, msg) => {
        msg.respond(msg.data);
      },
    });
    // Counts the errors made: the constructor names each one, through the prototype's `name`.
    let made = 0;
    Object.defineProperty(RequestError.prototype, 'name', {
      configurable: true,
      set(value: string) {
        made++;
        Object.defineProperty(this, 'name', { value, writable: true, configurable: true });
      },
    });
    try {
      for (let i = 0; i < 20; i++) {
        const reply = await nc.request(`echo.${suffix}`, `q${i}`, { timeout: 5_000 });
        expect(reply.string()).toBe(`q${i}`);
      }
      expect(made).toBe(0);
      // The count is live: an unanswered request still fails with a RequestError.
      await expect(nc.request(`nobody.${suffix}`, 'q', { timeout: 5_000 })).rejects.toBeInstanceOf(RequestError);
      expect(made).toBeGreaterThan(0);
    } finally {
      delete (RequestError.prototype as { name?: string }).name;
      service.unsubscribe();
    }
  });
});
