import { expect } from 'vitest';

/** The body of `res`, after checking its status (the body is the message when it is not `status`). */
export async function json<T>(res: Response, status: number, schema?: { parse(v: unknown): T }): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  const body = text ? JSON.parse(text) : undefined;
  return schema ? schema.parse(body) : (body as T);
}
