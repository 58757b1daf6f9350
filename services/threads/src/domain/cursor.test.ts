import { AppError } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { decodeMessageCursor, encodeMessageCursor } from './cursor.js';

describe('message cursor', () => {
  it('round-trips a position', () => {
    const position = { createdAt: new Date('2025-05-01T10:00:00.123Z'), id: 'thr_1/msg_2' };
    const cursor = encodeMessageCursor(position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeMessageCursor(cursor)).toEqual(position);
  });

  it.each(['nope', Buffer.from('{"t":"x","i":"a"}').toString('base64url'), Buffer.from('[]').toString('base64url')])(
    'rejects %s as invalid_request',
    (cursor) => {
      const err = (() => {
        try {
          return decodeMessageCursor(cursor);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('invalid_request');
    },
  );
});
