import { startRuntime, type StartedService } from '@threadwork/platform';
import type { GatewayConfig } from './config.js';
import { buildServer } from './server.js';
import { createIdentityStore } from './store/identity.js';

export { GatewayConfig } from './config.js';
export { createIdentityStore } from './store/identity.js';
export * from './domain/keys.js';

export interface Gateway extends StartedService {
  url: string;
}

export async function startGateway(config: GatewayConfig): Promise<Gateway> {
  const runtime = await startRuntime({ name: 'gateway', config, mongo: true });
  try {
    const identity = createIdentityStore(runtime.db);
    await identity.ensureIndexes();
    const app = await buildServer({
      identity,
      logger: runtime.logger,
      bodyLimit: config.BODY_LIMIT_BYTES,
      ready: async () => {
        if (runtime.nc.isClosed()) return false;
        await runtime.db.command({ ping: 1 });
        return true;
      },
    });
    const url = await app.listen({ port: config.PORT, host: config.HOST });
    runtime.lifecycle.add('http', () => app.close());
    runtime.logger.info({ url }, 'gateway listening');
    return { url, logger: runtime.logger, stop: () => runtime.lifecycle.stop() };
  } catch (err) {
    await runtime.lifecycle.stop();
    throw err;
  }
}
