import { join } from 'node:path';
import type { HarnessHome } from '../home.js';

/**
 * Whether Codex ever recorded the session: it writes one rollout file per thread, named after the
 * thread's id, under `sessions/` (or `archived_sessions/`) of its home, once the thread's first turn
 * has begun, the session's metadata as its first line. A thread lost before that line was whole
 * (no file, an empty one, a line cut short) has nothing to resume.
 */
export async function hasRollout(files: HarnessHome, home: string, threadId: string): Promise<boolean> {
  for (const dir of ['sessions', 'archived_sessions']) {
    for (const name of await files.find(join(home, dir), `-${threadId}.jsonl`)) {
      const line = await files.firstLine(join(home, dir, name));
      if (line !== null && parses(line)) return true;
    }
  }
  return false;
}

function parses(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}
