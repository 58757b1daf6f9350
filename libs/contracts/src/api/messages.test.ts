import { describe, expect, it } from 'vitest';
import { Message, MessageAccepted, MessagePage, MessagePageQuery, SendMessageBody } from './messages.js';

const message = {
  id: 'msg_1',
  role: 'assistant',
  parts: [{ type: 'text', text: 'Done.' }],
  created_at: '2025-05-01T10:00:00Z',
};

describe('Message page', () => {
  it('accepts a page and its last page', () => {
    expect(MessagePage.parse({ messages: [message], next_cursor: 'c1' })).toEqual({
      messages: [message],
      next_cursor: 'c1',
    });
    expect(MessagePage.parse({ messages: [], next_cursor: null })).toEqual({ messages: [], next_cursor: null });
  });

  it('rejects an absent next_cursor, unknown roles and non-text parts', () => {
    expect(MessagePage.safeParse({ messages: [] }).success).toBe(false);
    expect(Message.safeParse({ ...message, role: 'system' }).success).toBe(false);
    expect(Message.safeParse({ ...message, parts: [{ type: 'image', url: 'x' }] }).success).toBe(false);
  });
});

describe('MessagePageQuery', () => {
  it('defaults limit to 50 and coerces strings', () => {
    expect(MessagePageQuery.parse({})).toEqual({ limit: 50 });
    expect(MessagePageQuery.parse({ cursor: 'abc', limit: '200' })).toEqual({ cursor: 'abc', limit: 200 });
    expect(MessagePageQuery.parse({ cursor: '', limit: '' })).toEqual({ limit: 50 });
  });

  it('rejects limit outside 1..200 and cursors over 256 characters', () => {
    expect(MessagePageQuery.safeParse({ limit: '201' }).success).toBe(false);
    expect(MessagePageQuery.safeParse({ limit: '0' }).success).toBe(false);
    expect(MessagePageQuery.safeParse({ cursor: 'c'.repeat(257) }).success).toBe(false);
  });
});

describe('SendMessageBody', () => {
  it('accepts the contract example and the optional fields', () => {
    expect(SendMessageBody.parse({ prompt: 'And the tests?' })).toEqual({ prompt: 'And the tests?' });
    const full = { prompt: 'p', client_request_id: 'r', message_id: 'm', collaboration_mode: 'plan' };
    expect(SendMessageBody.parse(full)).toEqual(full);
  });

  it('rejects bad prompts and unknown properties', () => {
    expect(SendMessageBody.safeParse({ prompt: '' }).success).toBe(false);
    expect(SendMessageBody.safeParse({ prompt: 'x'.repeat(4097) }).success).toBe(false);
    expect(SendMessageBody.safeParse({ prompt: 'x'.repeat(4096) }).success).toBe(true);
    expect(SendMessageBody.safeParse({ prompt: 'x', model: 'gpt-5' }).success).toBe(false);
  });
});

describe('MessageAccepted', () => {
  const accepted = {
    status: 'accepted',
    run_id: 'run_2',
    run_status: 'queued',
    message_id: 'msg_2',
    run_url: '/v1/runs/run_2',
    events_url: '/v1/runs/run_2/events',
  };

  it('accepts the contract shape and nothing but status accepted', () => {
    expect(MessageAccepted.parse(accepted)).toEqual(accepted);
    expect(MessageAccepted.safeParse({ ...accepted, status: 'queued' }).success).toBe(false);
  });
});
