import { describe, expect, it } from 'vitest';
import { assemblePage, type LoggedEvent } from './event-page.js';

const at = '2024-01-01T00:00:00.000Z';
const event = (sequence: number, pending: number): LoggedEvent => ({
  sequence,
  pending,
  chunk: { type: 'message.delta', delta: String(sequence) },
  created_at: at,
});
const done = { status: 'completed', error: null, terminal: true } as const;
const live = { status: 'running', error: null, terminal: false } as const;

describe('event pages', () => {
  it('continues after the last event, however far apart sequences are', () => {
    const page = assemblePage(live, 3, 10, [event(3, 2), event(17, 1), event(40, 0)]);
    expect(page.events.map((e) => e.sequence)).toEqual([3, 17, 40]);
    expect(page.next_sequence).toBe(41);
    expect(page.events[0]).toEqual({ sequence: 3, chunk: { type: 'message.delta', delta: '3' }, created_at: at });
  });

  it('keeps `from` when nothing is there yet', () => {
    expect(assemblePage(live, 12, 10, [])).toMatchObject({ events: [], next_sequence: 12, terminal: false });
  });

  it('is terminal only when the run is terminal and the page reaches the end of the log', () => {
    expect(assemblePage(done, 1, 2, [event(1, 3), event(2, 2)]).terminal).toBe(false);
    expect(assemblePage(done, 1, 2, [event(5, 1), event(9, 0)]).terminal).toBe(true);
    expect(assemblePage(done, 10, 2, []).terminal).toBe(true);
    expect(assemblePage(live, 1, 2, [event(9, 0)]).terminal).toBe(false);
  });

  it('falls back to the page size when the server does not report what is left', () => {
    expect(assemblePage(done, 1, 2, [event(1, -1), event(2, -1)]).terminal).toBe(false);
    expect(assemblePage(done, 1, 3, [event(1, -1), event(2, -1)]).terminal).toBe(true);
  });

  it('carries the run status and error', () => {
    const failed = { status: 'failed', error: { code: 'runner_lost', message: 'gone' }, terminal: true } as const;
    expect(assemblePage(failed, 1, 5, [])).toMatchObject({ status: 'failed', error: { code: 'runner_lost' } });
  });
});
