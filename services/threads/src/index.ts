import { SERVICES } from '@threadwork/contracts';
import { bootService, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import type { ThreadsConfig } from './config.js';

export { ThreadsConfig } from './config.js';

export async function startThreads(config: ThreadsConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'threads', config, mongo: true });
  return bootService(runtime, async () => {
    await serveRoutes(runtime, SERVICES.threads, [], config.SHUTDOWN_TIMEOUT_MS);
  });
}
