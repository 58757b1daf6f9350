import { SERVICES } from '@threadwork/contracts';
import { bootService, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import { localRepositoriesDir, type RepohostConfig } from './config.js';
import { repohostRoutes } from './handlers/rpc.js';
import { createLocalProvider, ensureLocalDir } from './providers/local.js';
import { createRepositoryStore } from './store/repositories.js';

export { RepohostConfig, localRepositoriesDir } from './config.js';
export { localRepositoryId } from './domain/local.js';

export async function startRepohost(config: RepohostConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'repohost', config, mongo: true });
  return bootService(runtime, async () => {
    const store = createRepositoryStore(runtime.db);
    await store.ensureIndexes();
    const dir = localRepositoriesDir(config);
    await ensureLocalDir(dir);
    const provider = createLocalProvider({ dir, store, logger: runtime.logger });
    runtime.logger.info({ provider: provider.name, dir }, 'serving local repositories');
    await serveRoutes(runtime, SERVICES.repohost, repohostRoutes(provider), config.SHUTDOWN_TIMEOUT_MS);
  });
}
