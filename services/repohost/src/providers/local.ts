import { mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { HostedRepository } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import {
  localConnection,
  localRepository,
  localRepositoryId,
  parseHeadRef,
  repositoryNameOf,
  LOCAL_OWNER,
} from '../domain/local.js';
import { sortRepositories } from '../domain/repositories.js';
import type { RepositoryStore } from '../store/repositories.js';
import type { RepositoryProvider } from './provider.js';

const PROVIDER = 'local';

export interface LocalProviderOptions {
  /** Absolute path of the folder of bare repositories. */
  dir: string;
  store: RepositoryStore;
  logger: Logger;
}

function isMissing(err: unknown): boolean {
  return err instanceof Error && 'code' in err && (err.code === 'ENOENT' || err.code === 'ENOTDIR');
}

/** Creates the folder so a newcomer can drop repositories into it right away. */
export async function ensureLocalDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
}

/**
 * Bare repositories (`<name>.git`) directly inside one folder, visible to every user as one
 * installation. The folder is read on every call (a directory listing and one small file per
 * repository), so repositories added while running show up on the next list.
 */
export function createLocalProvider({ dir, store, logger }: LocalProviderOptions): RepositoryProvider {
  // Ids already recorded (or collisions already reported) by this process: only names never seen
  // before cost a database round trip.
  const known = new Map<string, number | null>();
  // Complain once per repository, not on every list.
  const reported = new Set<string>();

  const reportOnce = (key: string, log: () => void) => {
    if (reported.has(key)) return;
    reported.add(key);
    log();
  };

  async function idOf(name: string): Promise<number | null> {
    const cached = known.get(name);
    if (cached !== undefined) return cached;
    const fullName = `${LOCAL_OWNER}/${name}`;
    const registration = await store.register({ provider: PROVIDER, fullName, proposedId: localRepositoryId(name) });
    if (registration.ok) {
      known.set(name, registration.repositoryId);
      return registration.repositoryId;
    }
    known.set(name, null);
    reportOnce(`collision:${name}`, () =>
      logger.error(
        { full_name: fullName, repository_id: localRepositoryId(name), taken_by: registration.takenBy },
        `local repository ${fullName} is not listed: its id is already held by ${registration.takenBy}; rename one of them`,
      ),
    );
    return null;
  }

  async function read(entry: string): Promise<HostedRepository | null> {
    const name = repositoryNameOf(entry);
    if (name === null) return null;
    const path = join(dir, entry);
    let head: string;
    try {
      if (!(await stat(path)).isDirectory()) return null;
      head = await readFile(join(path, 'HEAD'), 'utf8');
    } catch (err) {
      // Removed while we looked, or a `.git` folder that is not a repository.
      if (isMissing(err)) return null;
      throw err;
    }
    const defaultBranch = parseHeadRef(head);
    if (defaultBranch === null) {
      reportOnce(`head:${name}`, () =>
        logger.warn({ path }, `local repository ${name} is not listed: its HEAD names no branch`),
      );
      return null;
    }
    const repositoryId = await idOf(name);
    if (repositoryId === null) return null;
    return localRepository({ repositoryId, name, cloneUrl: pathToFileURL(path).href, defaultBranch });
  }

  return {
    name: PROVIDER,

    connection: async () => localConnection(),

    async repositories() {
      let entries: string[];
      try {
        entries = await readdir(dir);
      } catch (err) {
        if (isMissing(err)) return [];
        throw err;
      }
      // Sorted before registering so that, of two colliding names, the same one wins on every replica.
      entries.sort();
      const repositories: HostedRepository[] = [];
      for (const entry of entries) {
        const repository = await read(entry);
        if (repository) repositories.push(repository);
      }
      return sortRepositories(repositories);
    },
  };
}
