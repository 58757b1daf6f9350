import { AppError } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from './cursor.js';

describe('cursor', () => {
  it('round-trips a position', () => {
    const position = { createdAt: new Date('2025-05-01T10:00:00.123Z'), id: 'thr_1/msg_2' };
    const cursor = encodeCursor(position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(cursor)).toEqual(position);
  });

  it.each(['nope', Buffer.from('{"t":"x","i":"a"}').toString('base64url'), Buffer.from('[]').toString('base64url')])(
    'rejects %s as invalid_request',
    (cursor) => {
      const err = (() => {
        try {
          return decodeCursor(cursor);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('invalid_request');
    },
  );
});
