import { rpc } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';

/** The thread's name for a pull request title; null when it has none or cannot be read. */
export async function threadName(nc: NatsConnection, ownerId: string, threadId: string): Promise<string | null> {
  const thread = await request(
    nc,
    rpc.threads.get,
    { owner_id: ownerId, thread_id: threadId, view: 'thread' },
    { timeoutMs: 2_000 },
  ).catch(() => null);
  return thread && 'name' in thread ? (thread.name ?? null) : null;
}
