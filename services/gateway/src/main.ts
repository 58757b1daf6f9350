import { fatal, loadConfig, stopOnSignal } from '@threadwork/platform';
import { GatewayConfig, startGateway } from './index.js';

async function main(): Promise<void> {
  const config = loadConfig(GatewayConfig);
  const gateway = await startGateway(config);
  stopOnSignal(gateway, gateway.logger, config.SHUTDOWN_TIMEOUT_MS);
}

main().catch(fatal);
