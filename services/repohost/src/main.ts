import { fatal, loadConfig, stopOnSignal } from '@threadwork/platform';
import { RepohostConfig, startRepohost } from './index.js';

async function main(): Promise<void> {
  const config = loadConfig(RepohostConfig);
  const service = await startRepohost(config);
  stopOnSignal(service, service.logger, config.SHUTDOWN_TIMEOUT_MS);
}

main().catch(fatal);
