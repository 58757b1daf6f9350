import { SERVICES } from '@threadwork/contracts';
import { bootService, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import type { ReviewConfig } from './config.js';

export { ReviewConfig } from './config.js';

export async function startReview(config: ReviewConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'review', config, mongo: true });
  return bootService(runtime, async () => {
    await serveRoutes(runtime, SERVICES.review, [], config.SHUTDOWN_TIMEOUT_MS);
  });
}
