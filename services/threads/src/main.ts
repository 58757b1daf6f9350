import { fatal, loadConfig, stopOnSignal } from '@threadwork/platform';
import { ThreadsConfig, startThreads } from './index.js';

async function main(): Promise<void> {
  const config = loadConfig(ThreadsConfig);
  const service = await startThreads(config);
  stopOnSignal(service, service.logger, config.SHUTDOWN_TIMEOUT_MS);
}

main().catch(fatal);
