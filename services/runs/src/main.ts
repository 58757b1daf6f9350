import { fatal, loadConfig, stopOnSignal } from '@threadwork/platform';
import { RunsConfig, startRuns } from './index.js';

async function main(): Promise<void> {
  const config = loadConfig(RunsConfig);
  const service = await startRuns(config);
  stopOnSignal(service, service.logger, config.SHUTDOWN_TIMEOUT_MS);
}

main().catch(fatal);
