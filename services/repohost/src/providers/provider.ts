import type { HostedRepository, ProviderConnection } from '@threadwork/contracts';

/**
 * Where repositories come from. `local` (bare repositories in a folder) exists now; the GitHub App
 * provider implements the same three questions from installations and their tokens.
 */
export interface RepositoryProvider {
  readonly name: string;
  /** What the owner has connected, for GET /v1/repohost/connection. */
  connection(ownerId: string): Promise<ProviderConnection>;
  /** Every repository the owner can see right now, sorted by full name. */
  repositories(ownerId: string): Promise<HostedRepository[]>;
}
