import { invalidRequest } from '@threadwork/platform';

/**
 * Where a page ends: the (created_at, _id) of its last item, the page order's key (messages oldest
 * first, threads newest first).
 */
export interface Position {
  createdAt: Date;
  id: string;
}

/** Opaque to callers: base64url of a small JSON document, so its layout can change without an API change. */
export function encodeCursor({ createdAt, id }: Position): string {
  return Buffer.from(JSON.stringify({ t: createdAt.getTime(), i: id })).toString('base64url');
}

export function decodeCursor(cursor: string): Position {
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
