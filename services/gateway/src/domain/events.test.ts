import type { RunEventPage } from '@threadwork/contracts';
import { describe, expect, it, vi } from 'vitest';
import {
  eventName,
  isTerminalStatusChunk,
  sseErrorFrame,
  sseEventFrame,
  streamFinished,
  streamStart,
} from './events.js';

const page = (overrides: Partial<RunEventPage>): RunEventPage => ({
  events: [],
  next_sequence: 1,
  status: 'running',
  terminal: false,
  error: null,
  ...overrides,
});

describe('run event streaming decisions', () => {
  it('starts at ?from, else after Last-Event-ID, else at 1', () => {
    expect(streamStart(7, 3)).toBe(7);
    expect(streamStart(0, 3)).toBe(1);
    expect(streamStart(undefined, 3)).toBe(4);
    expect(streamStart(undefined, 0)).toBe(1);
    expect(streamStart(undefined, undefined)).toBe(1);
  });

  it('frames an event with its sequence, chunk type and the page element as data', () => {
    const event = {
      sequence: 12,
      chunk: { type: 'message.delta', delta: 'a\nb' },
      created_at: '2025-01-01T00:00:00.000Z',
    };
    const frame = sseEventFrame(event);
    expect(frame).toBe(`id: 12\nevent: message.delta\ndata: ${JSON.stringify(event)}\n\n`);
    // Exactly one data line: newlines inside the chunk are escaped by JSON.
    expect(frame.split('\n').filter((l) => l.startsWith('data: '))).toHaveLength(1);
  });

  it('frames an event once however many streams it is written to', () => {
    const event = {
      sequence: 3,
      chunk: { type: 'message.delta', delta: 'hi' },
      created_at: '2025-01-01T00:00:00.000Z',
    };
    const expected = `id: 3\nevent: message.delta\ndata: ${JSON.stringify(event)}\n\n`;
    const stringify = vi.spyOn(JSON, 'stringify');
    let frames: string[];
    try {
      frames = Array.from({ length: 1_000 }, () => sseEventFrame(event));
      expect(stringify).toHaveBeenCalledTimes(1);
    } finally {
      stringify.mockRestore();
    }
    expect(new Set(frames)).toEqual(new Set([expected]));
    // An equal event read again (another page) is another object, framed the same way.
    expect(sseEventFrame({ ...event })).toBe(expected);
  });

  it('never lets a chunk type break the frame', () => {
    expect(eventName({ type: 'run.status' })).toBe('run.status');
    expect(eventName({ type: 'evil\ndata: x' })).toBe('event');
    expect(eventName({ type: 42 })).toBe('event');
    expect(eventName('text')).toBe('event');
    expect(eventName(null)).toBe('event');
  });

  it('frames errors as JSON', () => {
    expect(sseErrorFrame('unavailable', 'down')).toBe(
      'event: error\ndata: {"error":{"code":"unavailable","message":"down"}}\n\n',
    );
  });

  it('recognises the final status of a run', () => {
    for (const status of ['completed', 'failed', 'cancelled']) {
      expect(isTerminalStatusChunk({ type: 'run.status', status })).toBe(true);
    }
    expect(isTerminalStatusChunk({ type: 'run.status', status: 'cancelling' })).toBe(false);
    expect(isTerminalStatusChunk({ type: 'message.delta', status: 'completed' })).toBe(false);
    expect(isTerminalStatusChunk(null)).toBe(false);
  });

  it('finishes when the page says so, or on an empty page past a final status', () => {
    const event = { sequence: 1, chunk: {}, created_at: '2025-01-01T00:00:00.000Z' };
    expect(streamFinished(page({ terminal: true, events: [event], status: 'completed' }), false)).toBe(true);
    expect(streamFinished(page({ status: 'running' }), true)).toBe(true);
    expect(streamFinished(page({ status: 'completed' }), false)).toBe(true);
    expect(streamFinished(page({ status: 'completed', events: [event] }), true)).toBe(false);
    expect(streamFinished(page({ status: 'running' }), false)).toBe(false);
  });
});
