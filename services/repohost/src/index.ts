import { SERVICES } from '@threadwork/contracts';
import { bootService, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import type { RepohostConfig } from './config.js';

export { RepohostConfig } from './config.js';

export async function startRepohost(config: RepohostConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'repohost', config, mongo: true });
  return bootService(runtime, async () => {
    await serveRoutes(runtime, SERVICES.repohost, [], config.SHUTDOWN_TIMEOUT_MS);
  });
}
