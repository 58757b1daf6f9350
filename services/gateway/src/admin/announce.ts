import { connectNats, createLogger, type NatsAuth } from '@threadwork/platform';
import { announceRevocation } from '../store/revocations.js';

/** Announces a revocation to every gateway; without NATS they refuse the key within AUTH_CACHE_TTL_MS. */
export async function tellGateways(natsUrl: string | null, auth: NatsAuth | null): Promise<void> {
  const late = 'gateways that remembered the key refuse it within AUTH_CACHE_TTL_MS (10 s by default)';
  if (!natsUrl) {
    process.stderr.write(`admin: NATS_URL is not set, so the revocation is not announced: ${late}\n`);
    return;
  }
  if (!auth) {
    process.stderr.write(
      `admin: no NATS credentials (NATS_NKEY_SEED or NATS_CREDS of the admin identity), so the revocation is not announced: ${late}\n`,
    );
    return;
  }
  try {
    const nc = await connectNats({
      servers: natsUrl,
      auth,
      name: 'threadwork-admin',
      logger: createLogger({ service: 'admin', level: 'silent' }),
      giveUpAfterMs: 3_000,
    });
    try {
      await announceRevocation(nc);
    } finally {
      await nc.close();
    }
  } catch (err) {
    process.stderr.write(`admin: the revocation could not be announced (${(err as Error).message}): ${late}\n`);
  }
}
