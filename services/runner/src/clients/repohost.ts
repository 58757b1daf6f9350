import { rpc } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import type { RepositoryCredentials } from '../sandbox/provider.js';

/**
 * Credentials for a repository, as repohost hands them out: a short-lived token for one that
 * needs it (GitHub), none for a local one.
 */
export function repohostCredentials(nc: NatsConnection): RepositoryCredentials {
  return async (hold, repositoryId, url) =>
    /^https?:\/\//.test(url)
      ? (
          await request(nc, rpc.repohost.token, {
            run_id: hold.runId,
            claim_id: hold.claimId,
            repository_ids: [repositoryId],
          })
        ).token
      : null;
}
