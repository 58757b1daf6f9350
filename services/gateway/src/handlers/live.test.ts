import { encodeJson, type NatsConnection } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { followRun, type LiveMessage } from './live.js';

type Callback = (err: Error | null, msg: unknown) => void;

/** Just enough of a NATS connection for followRun: subscriptions by subject, and publishing to them. */
class FakeNats {
  readonly subscriptions: { subject: string; callback: Callback; closed: boolean }[] = [];

  subscribe(subject: string, { callback }: { callback: Callback }) {
    const subscription = { subject, callback, closed: false };
    this.subscriptions.push(subscription);
    return { unsubscribe: () => void (subscription.closed = true) };
  }

  open(subject: string) {
    return this.subscriptions.filter((s) => s.subject === subject && !s.closed);
  }

  /** What RUN_EVENTS republishes: the stored event, its sequence and the subject's previous one. */
  republish(runId: string, sequence: number, previous: number, body: unknown) {
    const headers = new Map([
      ['Nats-Sequence', String(sequence)],
      ['Nats-Last-Sequence', String(previous)],
    ]);
    const msg = { headers: { get: (name: string) => headers.get(name) }, data: encodeJson(body) };
    for (const s of this.open(`run.live.${runId}`)) s.callback(null, msg);
  }

  get connection(): NatsConnection {
    // followRun only subscribes; the fake stands in for the whole connection type.
    return this as unknown as NatsConnection;
  }
}

const stored = { chunk: { type: 'message.delta', delta: 'hi' }, created_at: '2026-01-01T00:00:00.000Z' };

describe('followRun', () => {
  it('shares one subscription among the followers of a run, and hands each the parsed event', () => {
    const nats = new FakeNats();
    const seen: [string, LiveMessage][] = [];
    followRun(nats.connection, 'run_a', (m) => seen.push(['first', m]));
    followRun(nats.connection, 'run_a', (m) => seen.push(['second', m]));
    expect(nats.open('run.live.run_a')).toHaveLength(1);

    nats.republish('run_a', 7, 5, stored);
    const expected = { sequence: 7, previous: 5, event: { sequence: 7, ...stored } };
    expect(seen).toEqual([
      ['first', expected],
      ['second', expected],
    ]);
  });

  it('keeps runs apart', () => {
    const nats = new FakeNats();
    const seen: string[] = [];
    followRun(nats.connection, 'run_a', () => seen.push('a'));
    followRun(nats.connection, 'run_b', () => seen.push('b'));
    expect(nats.subscriptions.map((s) => s.subject)).toEqual(['run.live.run_a', 'run.live.run_b']);
    nats.republish('run_b', 3, 0, stored);
    expect(seen).toEqual(['b']);
  });

  it('unsubscribes when the last follower leaves, and subscribes anew for the next', () => {
    const nats = new FakeNats();
    const seen: string[] = [];
    const first = followRun(nats.connection, 'run_a', () => seen.push('first'));
    const second = followRun(nats.connection, 'run_a', () => seen.push('second'));
    first.close();
    first.close();
    expect(nats.open('run.live.run_a')).toHaveLength(1);
    nats.republish('run_a', 2, 1, stored);
    expect(seen).toEqual(['second']);

    second.close();
    expect(nats.open('run.live.run_a')).toHaveLength(0);

    followRun(nats.connection, 'run_a', () => seen.push('third'));
    expect(nats.open('run.live.run_a')).toHaveLength(1);
    nats.republish('run_a', 4, 2, stored);
    expect(seen).toEqual(['second', 'third']);
  });

  it('counts the same callback given twice as two followers', () => {
    const nats = new FakeNats();
    const seen: number[] = [];
    const onMessage = (m: LiveMessage) => seen.push(m.sequence ?? -1);
    const one = followRun(nats.connection, 'run_a', onMessage);
    followRun(nats.connection, 'run_a', onMessage);
    nats.republish('run_a', 9, 8, stored);
    one.close();
    nats.republish('run_a', 10, 9, stored);
    expect(seen).toEqual([9, 9, 10]);
  });

  it('still says "read again" when the body is not a stored event', () => {
    const nats = new FakeNats();
    const seen: LiveMessage[] = [];
    followRun(nats.connection, 'run_a', (m) => seen.push(m));
    nats.republish('run_a', 5, 4, { not: 'an event' });
    expect(seen).toEqual([{ sequence: 5, previous: 4, event: null }]);
  });
});
