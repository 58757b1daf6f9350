import { fatal, loadConfig, stopOnSignal } from '@threadwork/platform';
import { ReviewConfig, startReview } from './index.js';

async function main(): Promise<void> {
  const config = loadConfig(ReviewConfig);
  const service = await startReview(config);
  stopOnSignal(service, service.logger, config.SHUTDOWN_TIMEOUT_MS);
}

main().catch(fatal);
