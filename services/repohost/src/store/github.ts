import type { Db } from '@threadwork/platform';
import { createIdentityStore, type IdentityStore } from './identities.js';
import { createInstallSessionStore, type InstallSessionStore } from './install-sessions.js';
import { createInstallationStore, type InstallationStore } from './installations.js';
import { createWebhookDeliveryStore, type WebhookDeliveryStore } from './webhook-deliveries.js';

// The GitHub side of repohost's collections, one file per concern: installations and their
// repositories, install sessions and link codes, verified identities, webhook deliveries.

export type GitHubStore = InstallationStore & InstallSessionStore & IdentityStore & WebhookDeliveryStore;

export function createGitHubStore(db: Db): GitHubStore {
  const parts = [
    createInstallationStore(db),
    createInstallSessionStore(db),
    createIdentityStore(db),
    createWebhookDeliveryStore(db),
  ] as const;
  const [installations, sessions, identities, deliveries] = parts;
  return {
    ...installations,
    ...sessions,
    ...identities,
    ...deliveries,
    async ensureIndexes() {
      for (const part of parts) await part.ensureIndexes();
    },
  };
}
