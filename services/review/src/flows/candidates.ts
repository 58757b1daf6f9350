import { repositoryEventAttestation, type Logger } from '@threadwork/platform';
import type { CandidateFailedEvent, CandidateProducedEvent } from '@threadwork/contracts';
import type { RunsClient } from '../clients/runs.js';
import type { SnapshotStore } from '../store/snapshots.js';

export interface CandidateDeps {
  store: SnapshotStore;
  runs: Pick<RunsClient, 'attestation'>;
  logger: Logger;
}

/** A candidate or its failure, as the runner publishes it about one repository of its run. */
type CandidateEvent = CandidateProducedEvent | CandidateFailedEvent;

/**
 * Whether the holder of the event's run published these very bytes about that thread, owner and
 * repository (the runs service keeps what it attested). Anyone with the runner's NATS key can
 * publish on `evt.runner.>`; what they publish alone is stored as no one's evidence.
 */
async function attested(
  { runs, logger }: CandidateDeps,
  subject: string,
  data: Uint8Array,
  event: CandidateEvent,
): Promise<boolean> {
  const answer = await runs.attestation(repositoryEventAttestation(subject, data, event));
  if (!answer.confirmed) {
    logger.warn(
      { run_id: event.run_id, thread_id: event.thread_id, subject, reason: answer.reason },
      'review evidence not stored: its run’s holder did not publish it',
    );
  }
  return answer.confirmed;
}

/** Stores a candidate its run's holder attested; newer wins, so a redelivery changes nothing. */
export async function storeCandidate(
  deps: CandidateDeps,
  subject: string,
  data: Uint8Array,
  event: CandidateProducedEvent,
): Promise<void> {
  if (await attested(deps, subject, data, event)) await deps.store.saveCandidate(event);
}

/** Stores a failure to produce a candidate its run's holder attested. */
export async function storeFailure(
  deps: CandidateDeps,
  subject: string,
  data: Uint8Array,
  event: CandidateFailedEvent,
): Promise<void> {
  if (await attested(deps, subject, data, event)) await deps.store.saveFailure(event);
}
