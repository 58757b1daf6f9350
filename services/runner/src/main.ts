import { fatal, loadConfig, stopOnSignal } from '@threadwork/platform';
import { RunnerConfig, startRunner } from './index.js';

async function main(): Promise<void> {
  const config = loadConfig(RunnerConfig);
  const service = await startRunner(config);
  stopOnSignal(service, service.logger, config.SHUTDOWN_TIMEOUT_MS);
}

main().catch(fatal);
