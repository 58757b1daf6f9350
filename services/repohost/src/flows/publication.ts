import type {
  CandidateProducedEvent,
  Publication,
  PublicationCheck,
  PublicationCommitStatus,
} from '@threadwork/contracts';
import { repositoryEventAttestation, unavailable, type Logger } from '@threadwork/platform';
import type { RunsClient } from '../clients/runs.js';
import type { GitHubAppConfig } from '../config.js';
import { isStale } from '../domain/github.js';
import {
  checksAggregate,
  isAlreadyExists,
  publicationState,
  pullRequestBody,
  pullRequestTitle,
} from '../domain/publication.js';
import { GitHubError, type GitHubClient, type PullRef } from '../providers/github/client.js';
import type { GhPull } from '../providers/github/shapes.js';
import { gitHubAppError } from '../providers/github/provider.js';
import type { GitHubStore } from '../store/github.js';
import type { PublicationDoc, PublicationStore, PullFacts } from '../store/publications.js';

export interface PublicationDeps {
  config: GitHubAppConfig;
  client: GitHubClient;
  store: GitHubStore;
  publications: PublicationStore;
  /** The thread's name for the pull request title; null when it has none or cannot be read. */
  threadName(ownerId: string, threadId: string): Promise<string | null>;
  logger: Logger;
}

export interface CandidateDeps extends PublicationDeps {
  runs: Pick<RunsClient, 'attestation'>;
}

/** How long a read waits for an on-demand sync before answering the stored state. */
const SYNC_WAIT_MS = 2_000;

export const publicationId = (threadId: string, projectRepositoryId: string) => `${threadId}:${projectRepositoryId}`;

const refOf = (doc: Pick<PublicationDoc, 'installation_id' | 'owner' | 'name'>): PullRef => ({
  installationId: doc.installation_id,
  owner: doc.owner,
  repo: doc.name,
});

/** The pull request's state, checks and statuses at its head, as GitHub has them now. */
/**
 * What GitHub says of `pull` and its head's checks, as of `asOf`: when the reading began. Of two
 * reads that overlap, the one begun later saw at least what the other saw, whichever ends last.
 */
async function readFacts(client: GitHubClient, ref: PullRef, pull: GhPull, asOf: Date): Promise<PullFacts> {
  const [runs, statuses] = await Promise.all([
    client.checkRuns(ref, pull.head.sha),
    client.commitStatuses(ref, pull.head.sha),
  ]);
  const checks: PublicationCheck[] = runs.map((run) => ({
    id: run.id,
    name: run.name,
    status: run.status,
    conclusion: run.conclusion,
    detailsUrl: run.details_url ?? null,
    startedAt: run.started_at ?? null,
    completedAt: run.completed_at ?? null,
  }));
  const commitStatuses: PublicationCommitStatus[] = statuses.map((status) => ({
    id: status.id,
    context: status.context,
    state: status.state,
    targetUrl: status.target_url ?? null,
  }));
  return {
    pr_number: pull.number,
    pr_url: pull.html_url,
    head_sha: pull.head.sha,
    state: publicationState(pull),
    mergeable: pull.mergeable ?? null,
    mergeable_state: pull.mergeable_state ?? 'unknown',
    checks,
    commit_statuses: commitStatuses,
    checks_aggregate: checksAggregate(checks, commitStatuses),
    last_synced_at: asOf,
  };
}

export function publicationView(doc: PublicationDoc): Publication {
  return {
    projectRepositoryId: doc.project_repository_id,
    repository: { owner: doc.owner, name: doc.name },
    prNumber: doc.pr_number,
    prUrl: doc.pr_url,
    branch: doc.branch,
    headSha: doc.head_sha,
    state: doc.state,
    mergeable: doc.mergeable,
    mergeableState: doc.mergeable_state,
    checks: doc.checks,
    commitStatuses: doc.commit_statuses,
    checksAggregate: doc.checks_aggregate,
    lastSyncedAt: doc.last_synced_at.toISOString(),
  };
}

/**
 * A candidate of a GitHub repository: open the thread branch's pull request the first time (a
 * draft when PR_DRAFT), afterwards update its description and reopen it if it was closed; a
 * merged one is followed by a new pull request. The runner pushes the branch; a head GitHub does
 * not know yet is retried (the push may still be on its way). GitHub itself refuses a second open
 * pull request for one head, so concurrent deliveries converge on one: the loser adopts it.
 */
export async function publishCandidate(deps: PublicationDeps, event: CandidateProducedEvent): Promise<void> {
  const { client, store, publications, logger } = deps;
  const repository = await store.repository(event.repository_id);
  if (!repository) return; // a local repository (or one no longer visible): nothing to publish
  const linked = await store.linkedInstallationIds(event.owner_id);
  if (!linked.includes(repository.installation_id)) {
    logger.warn(
      { owner_id: event.owner_id, repository_id: event.repository_id },
      'candidate of a repository its owner no longer sees; not published',
    );
    return;
  }
  const id = publicationId(event.thread_id, event.project_repository_id);
  const at = new Date(event.at);
  const existing = await publications.get(id);
  if (existing && existing.candidate_at.getTime() > at.getTime()) return;

  const ref: PullRef = { installationId: repository.installation_id, owner: repository.owner, repo: repository.name };
  const body = pullRequestBody({
    threadId: event.thread_id,
    runId: event.run_id,
    candidateRevision: event.candidate_revision,
    files: event.files.length,
    additions: event.stats.additions,
    deletions: event.stats.deletions,
  });

  try {
    let pull: GhPull | null = null;
    if (existing) {
      const current = publicationState(await client.getPull(ref, existing.pr_number));
      // A closed pull request comes back with the new work; a merged one is followed by a new one.
      if (current === 'closed') pull = await client.updatePull(ref, existing.pr_number, { body, state: 'open' });
      else if (current !== 'merged') pull = await client.updatePull(ref, existing.pr_number, { body });
    }
    pull ??= await openPull(deps, ref, event, body);
    // As of now, once GitHub has the change: a sync begun before it may have read the pull request
    // as it was (closed, or the merged one this one follows), and must not win over these facts.
    const facts = await readFacts(client, ref, pull, new Date());
    await publications.saveCandidate({
      _id: id,
      owner_id: event.owner_id,
      thread_id: event.thread_id,
      project_repository_id: event.project_repository_id,
      repository_id: repository._id,
      installation_id: repository.installation_id,
      owner: repository.owner,
      name: repository.name,
      branch: event.branch,
      base_branch: event.base_branch,
      ...facts,
      candidate_at: at,
      candidate_revision: event.candidate_revision,
    });
    logger.info({ thread_id: event.thread_id, pr_number: pull.number }, 'pull request published');
  } catch (err) {
    throw gitHubAppError(err, logger);
  }
}

async function openPull(
  deps: PublicationDeps,
  ref: PullRef,
  event: CandidateProducedEvent,
  body: string,
): Promise<GhPull> {
  const { config, client } = deps;
  const open = await client.findOpenPull(ref, event.branch, event.base_branch);
  if (open) return client.updatePull(ref, open.number, { body });
  const title = pullRequestTitle(await deps.threadName(event.owner_id, event.thread_id), event.thread_id);
  try {
    return await client.createPull(ref, {
      title,
      head: event.branch,
      base: event.base_branch,
      body,
      draft: config.prDraft,
    });
  } catch (err) {
    if (!(err instanceof GitHubError) || err.status !== 422) throw err;
    if (isAlreadyExists(err.errors)) {
      const adopted = await client.findOpenPull(ref, event.branch, event.base_branch);
      if (adopted) return adopted;
    }
    // Most likely the branch is not pushed yet: try again later (bounded by the consumer's max_deliver).
    throw unavailable(`GitHub refused the pull request for ${ref.owner}/${ref.repo}:${event.branch}`, err);
  }
}

/**
 * A candidate is published (a pull request opened or updated, as its owner's installation) only
 * when the runs service confirms it: the holder of its run attested these very bytes, and the run
 * is of that thread and owner, with that repository. Anyone with the runner's NATS key can publish
 * on `evt.runner.>`; what they publish alone opens no pull request. Ignored ones are logged.
 */
export async function publishAttestedCandidate(
  deps: CandidateDeps,
  subject: string,
  data: Uint8Array,
  event: CandidateProducedEvent,
): Promise<void> {
  const answer = await deps.runs.attestation(repositoryEventAttestation(subject, data, event));
  if (!answer.confirmed) {
    deps.logger.warn(
      { run_id: event.run_id, thread_id: event.thread_id, repository_id: event.repository_id, reason: answer.reason },
      'candidate not published: its run’s holder did not produce it',
    );
    return;
  }
  await publishCandidate(deps, event);
}

/** Reads the pull request again and stores what GitHub says now. */
export async function syncPublication(
  deps: Pick<PublicationDeps, 'client' | 'publications'>,
  doc: PublicationDoc,
): Promise<PublicationDoc> {
  const ref = refOf(doc);
  const asOf = new Date();
  const pull = await deps.client.getPull(ref, doc.pr_number);
  const facts = await readFacts(deps.client, ref, pull, asOf);
  await deps.publications.saveSync(doc._id, facts);
  return { ...doc, ...facts };
}

/**
 * rpc.repohost.publication: the thread's pull request for review, synced first when older than
 * PUBLICATION_SYNC_MS. A failed sync answers what was known (review stays readable while GitHub
 * is down; `lastSyncedAt` says how old it is).
 */
export async function readPublication(
  deps: PublicationDeps,
  input: { owner_id: string; thread_id: string; project_repository_id: string },
): Promise<Publication | null> {
  const doc = await deps.publications.get(publicationId(input.thread_id, input.project_repository_id));
  if (!doc || doc.owner_id !== input.owner_id) return null;
  if (!isStale(doc.last_synced_at, new Date(), deps.config.publicationSyncMs)) return publicationView(doc);
  const sync = syncPublication(deps, doc).catch((err: unknown) => {
    deps.logger.warn({ err, publication: doc._id }, 'could not sync the pull request; answering the last known state');
    return doc;
  });
  // A slow GitHub must not make review miss its caller's deadline: past the wait, answer what is
  // known; the sync goes on and stores its result for the next read.
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<PublicationDoc>((resolve) => {
    timer = setTimeout(() => resolve(doc), SYNC_WAIT_MS);
  });
  const result = await Promise.race([sync, waited]);
  clearTimeout(timer);
  return publicationView(result);
}
