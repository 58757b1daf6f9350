import { natsAnswers, startRuntime, type Logger, type StartedService } from '@threadwork/platform';
import type { GatewayConfig } from './config.js';
import { parseSignInAllow } from './domain/github-sign-in.js';
import { AUTH_CACHE_DEFAULTS, cacheAuthentication } from './store/auth-cache.js';
import { forgetOnRevocation } from './store/revocations.js';
import { generateSessionSecret } from './domain/session.js';
import { consoleBuilt } from './http/console.js';
import { buildServer } from './server.js';
import { createIdentityStore } from './store/identity.js';

export { GatewayConfig } from './config.js';
export { buildServer, type GatewayDeps } from './server.js';
export { buildOpenApiDocument } from './openapi-document.js';
export { createIdentityStore } from './store/identity.js';
export * from './domain/keys.js';
export * from './domain/session.js';
export * from './domain/login-links.js';

export interface Gateway extends StartedService {
  url: string;
}

/**
 * The configured session secret, or (outside production, where config demands one) a random one
 * for this process: cookies then work until the gateway restarts, and the admin CLI cannot issue any.
 */
export function sessionSecretOf(config: GatewayConfig, logger: Logger): string {
  if (config.SESSION_SECRET) return config.SESSION_SECRET;
  logger.warn(
    'SESSION_SECRET is not set: using a random one, so session cookies stop working when the gateway restarts and `admin sessions create` cannot issue any',
  );
  return generateSessionSecret();
}

export async function startGateway(config: GatewayConfig): Promise<Gateway> {
  const runtime = await startRuntime({ name: 'gateway', config, mongo: true });
  try {
    const identity = createIdentityStore(runtime.db, {
      timeoutMs: config.REQUEST_TIMEOUT_MS,
      logger: runtime.logger,
    });
    await identity.ensureIndexes();
    const cached =
      config.AUTH_CACHE_TTL_MS > 0
        ? cacheAuthentication(identity, { ...AUTH_CACHE_DEFAULTS, ttlMs: config.AUTH_CACHE_TTL_MS })
        : null;
    if (cached) forgetOnRevocation(runtime.nc, cached, runtime.logger);
    const consoleDir = consoleBuilt(config.CONSOLE_DIR) ? config.CONSOLE_DIR : null;
    const app = await buildServer({
      consoleDir,
      identity: cached ?? identity,
      logger: runtime.logger,
      bodyLimit: config.BODY_LIMIT_BYTES,
      nc: runtime.nc,
      requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
      rateLimit: { perSecond: config.RATE_LIMIT_PER_SECOND, burst: config.RATE_LIMIT_BURST },
      authFailureLimit: { perSecond: config.AUTH_FAILURES_PER_SECOND, burst: config.AUTH_FAILURES_BURST },
      trustProxy: config.TRUST_PROXY,
      publicRateLimit: { perSecond: config.PUBLIC_RATE_LIMIT_PER_SECOND, burst: config.PUBLIC_RATE_LIMIT_BURST },
      webhookSecret: config.GITHUB_WEBHOOK_SECRET ?? null,
      maxFollowersPerUser: config.MAX_FOLLOWERS_PER_USER,
      sessionSecret: sessionSecretOf(config, runtime.logger),
      sessionTtlSeconds: config.SESSION_TTL_HOURS * 3600,
      githubSignInAllow: parseSignInAllow(config.GITHUB_SIGN_IN_ALLOW),
      ready: async () => {
        // Leaves the endpoint list while NATS is away instead of answering 503 to every request.
        if (!(await natsAnswers(runtime.nc, config.MONGO_SERVER_SELECTION_TIMEOUT_MS))) return false;
        // Bounded: a database that stopped answering makes the gateway not ready, not the probe hang.
        await identity.ping(config.MONGO_SERVER_SELECTION_TIMEOUT_MS);
        return true;
      },
    });
    const url = await app.listen({ port: config.PORT, host: config.HOST });
    runtime.lifecycle.add('http', () => app.close());
    runtime.logger.info(
      {
        url,
        trust_proxy: config.TRUST_PROXY,
        // Deliveries are checked here before anything goes on NATS; without the secret none passes.
        webhooks: config.GITHUB_WEBHOOK_SECRET ? 'signatures checked' : 'refused: GITHUB_WEBHOOK_SECRET is not set',
        console: consoleDir ?? `not served: no built console in ${JSON.stringify(config.CONSOLE_DIR)} (npm run build)`,
      },
      'gateway listening',
    );
    return { url, logger: runtime.logger, stop: () => runtime.lifecycle.stop() };
  } catch (err) {
    await runtime.lifecycle.stop();
    throw err;
  }
}
