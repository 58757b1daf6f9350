import { createLogger, type NatsConnection } from '@threadwork/platform';
import { buildServer } from './server.js';
import type { IdentityStore } from './store/identity.js';

/** What the document is built with instead of connections: registering routes touches neither. */
function unconnected<T extends object>(what: string): T {
  return new Proxy({} as T, {
    get(_target, property) {
      // Read at registration to size the webhook body limit; absent is what a fresh connection says.
      if (property === 'info') return undefined;
      throw new Error(`the OpenAPI document is built without a ${what} (it read ${String(property)})`);
    },
  });
}

/**
 * The gateway's OpenAPI document, as GET /v1/openapi.json answers it, built from the routes
 * without NATS, a database or a listening port: the console's build generates its API types from it.
 */
export async function buildOpenApiDocument(): Promise<Record<string, unknown>> {
  const app = await buildServer({
    identity: unconnected<IdentityStore>('identity store'),
    nc: unconnected<NatsConnection>('NATS connection'),
    logger: createLogger({ service: 'gateway', level: 'silent' }),
    bodyLimit: 1024 * 1024,
    ready: async () => false,
    requestTimeoutMs: 1_000,
    rateLimit: { perSecond: 1, burst: 1 },
    sessionSecret: 'unused: this gateway never answers a request',
  });
  try {
    await app.ready();
    return app.swagger() as unknown as Record<string, unknown>;
  } finally {
    await app.close();
  }
}
