import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NATS_IDENTITIES } from '@threadwork/contracts';
import {
  natsAuthorizationConfig,
  natsPublicKeyOf,
  natsServerUsers,
  newNatsUserKey,
  NKEY_USER_SEED,
  type NatsKeys,
} from '@threadwork/platform';
import { fail } from './fail.js';

/**
 * A deployment's NATS identities: a seed per identity in `dir` (made when missing, kept when
 * there), and the server's `authorization` for their public keys with each identity's grant.
 */
export function writeNatsKeys(dir: string): void {
  // The folder is what keeps the seeds private on this host (its owner only); the files themselves
  // are readable, as Compose mounts them into containers whose user is not their owner.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const keys = {} as NatsKeys;
  for (const identity of NATS_IDENTITIES) {
    const file = join(dir, `${identity}.seed`);
    if (existsSync(file)) {
      const seed = readFileSync(file, 'utf8').trim();
      if (!NKEY_USER_SEED.test(seed))
        fail(`admin: ${file} does not hold an NKEY user seed; remove it to make a new one`);
      keys[identity] = { seed, publicKey: natsPublicKeyOf(seed) };
    } else {
      keys[identity] = newNatsUserKey();
      writeFileSync(file, `${keys[identity].seed}\n`, { mode: 0o644 });
    }
  }
  writeFileSync(join(dir, 'authorization.conf'), natsAuthorizationConfig(natsServerUsers(keys)));
  process.stderr.write(
    `admin: NATS keys in ${dir}: a seed per identity (give each service only its own), and authorization.conf for nats-server\n`,
  );
  // The chart's values: public keys only (the seeds go in the Secret named by nats.auth.existingSecret).
  const lines = ['nats:', '  auth:', '    publicKeys:'];
  for (const identity of NATS_IDENTITIES) lines.push(`      ${identity}: ${keys[identity].publicKey}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}
