import { subjects } from '@threadwork/contracts';
import { encodeJson, type Logger, type NatsConnection } from '@threadwork/platform';
import type { CachingIdentityStore } from './auth-cache.js';

// A key revoked by the admin CLI is refused by every gateway replica at once: the CLI announces the
// revocation on core NATS, and each replica forgets the keys it remembers (auth-cache.ts). Which
// key is not said: forgetting all is cheap, and the announcement names nothing of a key.

/** Tells every gateway that a key was revoked; resolves once the server has the message. */
export async function announceRevocation(nc: NatsConnection): Promise<void> {
  nc.publish(subjects.keysRevoked, encodeJson({ at: new Date().toISOString() }));
  await nc.flush();
}

/** Makes `cache` forget every key it remembers whenever a revocation is announced. */
export function forgetOnRevocation(nc: NatsConnection, cache: CachingIdentityStore, logger: Logger): void {
  nc.subscribe(subjects.keysRevoked, {
    callback: (err) => {
      if (err) {
        logger.warn(
          { err },
          'key revocations can no longer be heard; revoked keys are refused within AUTH_CACHE_TTL_MS',
        );
        return;
      }
      cache.forgetAll();
    },
  });
}
