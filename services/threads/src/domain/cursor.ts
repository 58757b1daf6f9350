import { invalidRequest } from '@threadwork/platform';

/** Where a message page ends: the (created_at, _id) of its last message, the page order's key. */
export interface MessagePosition {
  createdAt: Date;
  id: string;
}

/** Opaque to callers: base64url of a small JSON document, so its layout can change without an API change. */
export function encodeMessageCursor({ createdAt, id }: MessagePosition): string {
  return Buffer.from(JSON.stringify({ t: createdAt.getTime(), i: id })).toString('base64url');
}

export function decodeMessageCursor(cursor: string): MessagePosition {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidRequest('cursor: not a cursor this API returned');
  }
  if (decoded !== null && typeof decoded === 'object') {
    const { t, i } = decoded as { t?: unknown; i?: unknown };
    if (typeof t === 'number' && Number.isSafeInteger(t) && typeof i === 'string' && i.length > 0) {
      return { createdAt: new Date(t), id: i };
    }
  }
  throw invalidRequest('cursor: not a cursor this API returned');
}
