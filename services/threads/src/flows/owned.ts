import type { Run, View } from '@threadwork/contracts';
import { isAppError, notFound } from '@threadwork/platform';
import { isRecorded, type RecordedThread } from '../store/records.js';
import type { Deps } from './deps.js';

/** The caller's thread; another owner's, or one whose creation has not finished, does not exist. */
export async function ownedThread(
  { store }: Pick<Deps, 'store'>,
  ownerId: string,
  threadId: string,
  view: View,
): Promise<RecordedThread> {
  const thread = await store.findOwnedThread(ownerId, threadId);
  if (!thread || !isRecorded(thread)) throw notFound(view);
  return thread;
}

/** The thread's latest run as runs reports it now (a cached status would go stale the moment the run moves). */
export async function latestRun({ peers }: Pick<Deps, 'peers'>, thread: RecordedThread): Promise<Run | null> {
  try {
    return await peers.getRun(thread.owner_id, thread.latest_run_id);
  } catch (err) {
    if (isAppError(err) && err.code === 'not_found') return null;
    throw err;
  }
}
