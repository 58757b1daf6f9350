import type { TokenRequest, TokenResponse } from '@threadwork/contracts';
import { invalidRequest, isAppError, type Logger } from '@threadwork/platform';
import type { z } from 'zod';
import { pickRepositories } from '../domain/repositories.js';
import type { RunsClient } from '../clients/runs.js';
import type { CombinedProvider } from '../providers/combined.js';
import type { GitHubClient } from '../providers/github/client.js';
import { gitHubAppError } from '../providers/github/provider.js';

/** A token handed to the runner lives at least this long: long enough to clone and push. */
const TOKEN_MIN_LIFETIME_MS = 15 * 60_000;

export interface TokenDeps {
  provider: CombinedProvider;
  runs: Pick<RunsClient, 'holder'>;
  /** Null when no GitHub App is configured. */
  client: GitHubClient | null;
  logger: Logger;
}

/**
 * rpc.repohost.token: an installation token for the runner that holds a live run, for that run's
 * repositories, as the run's owner — never for whichever owner and repositories a caller names.
 * Local repositories need none (`token: null`).
 */
export async function runnerToken(
  { provider, runs, client, logger }: TokenDeps,
  { run_id, claim_id, repository_ids }: z.output<typeof TokenRequest>,
): Promise<z.input<typeof TokenResponse>> {
  let held: Awaited<ReturnType<RunsClient['holder']>>;
  try {
    held = await runs.holder(run_id, claim_id);
  } catch (err) {
    if (isAppError(err) && (err.code === 'already_settled' || err.code === 'not_found')) {
      logger.warn({ run_id, reason: err.message }, 'refused a token: the caller does not hold the run');
    }
    throw err;
  }
  const foreign = repository_ids.filter((id) => !held.repository_ids.includes(id));
  if (foreign.length > 0) {
    logger.warn({ run_id, repository_ids: foreign }, 'refused a token for repositories that are not the run’s');
    throw invalidRequest(`repository_ids: ${foreign.join(', ')} not a repository of run ${run_id}`);
  }
  const owner_id = held.owner_id;
  const sourced = await provider.sourced(owner_id);
  // not_found for any the owner cannot see, as for access.
  const picked = pickRepositories(
    sourced.map(({ repository }) => repository),
    repository_ids,
  );
  const remote = sourced.filter(
    ({ source, repository }) => source === 'github' && picked.some((p) => p.repository_id === repository.repository_id),
  );
  if (remote.length === 0) return { token: null, expires_at: null };
  if (remote.length !== picked.length)
    throw invalidRequest('repository_ids: ask for local and GitHub repositories separately');
  const installations = new Set(remote.map(({ repository }) => repository.installation_id));
  const [installationId] = installations;
  if (installations.size > 1 || installationId === undefined || !client) {
    throw invalidRequest('repository_ids: one token covers repositories of one installation; ask per installation');
  }
  try {
    const token = await client.installationToken(installationId, repository_ids, TOKEN_MIN_LIFETIME_MS);
    return { token: token.token, expires_at: token.expiresAt };
  } catch (err) {
    throw gitHubAppError(err, logger);
  }
}
