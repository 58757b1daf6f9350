import { subjects } from '@threadwork/contracts';
import { connectNats, createLogger, type NatsConnection } from '@threadwork/platform';
import { isolatedNats, type IsolatedNats } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followRun } from './live.js';

// followRun against a real nats-server: one subscription per run and connection, shared by its
// listeners; a message is only a wake-up.

let nats: IsolatedNats;
let nc: NatsConnection;
let publisher: NatsConnection;

beforeAll(async () => {
  nats = await isolatedNats();
  const logger = createLogger({ service: 'live-test', level: 'silent' });
  const connect = (name: string) => connectNats({ servers: nats.url, name, logger, auth: nats.testAuth });
  [nc, publisher] = await Promise.all([connect('follower'), connect('publisher')]);
});
afterAll(async () => {
  await nc?.close();
  await publisher?.close();
  await nats?.stop();
});

/** Publishes a wake-up for `runId`, then one for `marker`; resolves once the marker's arrived (so the first has too). */
async function wakeThenMark(runId: string, marker: string): Promise<void> {
  let arrived: () => void = () => {};
  const marked = new Promise<void>((resolve) => (arrived = resolve));
  const sub = followRun(nc, marker, () => arrived());
  await nc.flush();
  publisher.publish(subjects.runLive(runId));
  publisher.publish(subjects.runLive(marker));
  await marked;
  sub.close();
}

describe('followRun', () => {
  it('wakes every listener of a run from one subscription, and keeps runs apart', async () => {
    const seen: string[] = [];
    const first = followRun(nc, 'run_a', () => seen.push('a1'));
    const second = followRun(nc, 'run_a', () => seen.push('a2'));
    const other = followRun(nc, 'run_b', () => seen.push('b'));
    await wakeThenMark('run_a', 'mark_1');
    expect(seen).toEqual(['a1', 'a2']);
    for (const sub of [first, second, other]) sub.close();
  });

  it('unsubscribes when the last listener leaves, and subscribes anew for the next', async () => {
    const seen: string[] = [];
    const first = followRun(nc, 'run_c', () => seen.push('first'));
    const second = followRun(nc, 'run_c', () => seen.push('second'));
    first.close();
    first.close();
    await wakeThenMark('run_c', 'mark_2');
    expect(seen).toEqual(['second']);

    second.close();
    await wakeThenMark('run_c', 'mark_3');
    expect(seen).toEqual(['second']);

    const third = followRun(nc, 'run_c', () => seen.push('third'));
    await wakeThenMark('run_c', 'mark_4');
    expect(seen).toEqual(['second', 'third']);
    third.close();
  });

  it('counts the same callback given twice as two listeners', async () => {
    let woken = 0;
    const onWake = () => woken++;
    const one = followRun(nc, 'run_d', onWake);
    const two = followRun(nc, 'run_d', onWake);
    await wakeThenMark('run_d', 'mark_5');
    one.close();
    await wakeThenMark('run_d', 'mark_6');
    expect(woken).toBe(3);
    two.close();
  });

  it('takes a message with a reply subject for no wake-up: RUN_EVENTS republishes without one', async () => {
    const warnings: object[] = [];
    let woken = 0;
    const sub = followRun(nc, 'run_e', () => woken++, { warn: (context) => warnings.push(context) });
    await nc.flush();
    publisher.publish(subjects.runLive('run_e'), undefined, { reply: '_INBOX_elsewhere.1' });
    await wakeThenMark('run_e', 'mark_7');
    expect(woken).toBe(1);
    expect(warnings).toEqual([{ run_id: 'run_e', reply: '_INBOX_elsewhere.1' }]);
    sub.close();
  });
  it('wakes every listener when its connection comes back: wake-ups sent while it was away are lost', async () => {
    const logger = createLogger({ service: 'live-test', level: 'silent' });
    const own = await connectNats({ servers: nats.url, name: 'reconnecting', logger, auth: nats.testAuth });
    try {
      const seen: string[] = [];
      let woken: () => void = () => {};
      const wokenTwice = new Promise<void>((resolve) => (woken = resolve));
      const listen = (name: string) =>
        followRun(own, 'run_reconnect', () => {
          seen.push(name);
          if (seen.length === 2) woken();
        });
      const subs = [listen('first'), listen('second')];
      await own.reconnect();
      await wokenTwice;
      expect(seen.sort()).toEqual(['first', 'second']);
      for (const sub of subs) sub.close();
    } finally {
      await own.close();
    }
  });
});
