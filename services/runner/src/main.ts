import { fatal, loadConfig, stopOnSignal } from '@threadwork/platform';
import { RunnerConfig, startRunner } from './index.js';

async function main(): Promise<void> {
  const config = loadConfig(RunnerConfig);
  const service = await startRunner(config);
  if (process.env.MONGO_URL) {
    service.logger.warn('MONGO_URL is set, but the runner never uses the database: leave it out of its environment');
  }
  stopOnSignal(service, service.logger, config.SHUTDOWN_TIMEOUT_MS);
}

main().catch(fatal);
