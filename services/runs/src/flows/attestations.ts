import type { AttestationRequest, AttestationResponse, AttestRequest } from '@threadwork/contracts';
import { AppError } from '@threadwork/platform';
import type { z } from 'zod';
import type { RunsContext } from './context.js';
import { fencedRun } from './runner-holder.js';

// The runner's DOMAIN events (candidate, reply, applied steer, sandbox status) are published on
// `evt.runner.>`, which NATS lets anyone with the runner's key use. Before publishing one, the
// holder of the run attests it here, under its claim; before acting on one, a service asks here
// whether that run's holder published it, and whether the run is what the event says it is.

/** Records that the claim holding the live run publishes this event (its subject and digest). */
export async function attestEvent(ctx: RunsContext, req: z.output<typeof AttestRequest>): Promise<void> {
  const run = await fencedRun(ctx, req.run_id, req.attempt, req.claim_id);
  if (run.terminal) throw new AppError('already_settled', `run ${run._id} has ended`);
  await ctx.store.attest({
    _id: `${run._id}:${req.digest}`,
    run_id: run._id,
    attempt: req.attempt,
    subject: req.subject,
    at: new Date(),
  });
}

/** Whether the event was attested by the run's holder and says what the run is; if not, why not. */
export async function checkAttestation(
  ctx: RunsContext,
  req: z.output<typeof AttestationRequest>,
): Promise<z.input<typeof AttestationResponse>> {
  const no = (reason: string) => ({ confirmed: false, reason });
  const [run, attested] = await Promise.all([ctx.store.run(req.run_id), ctx.store.attestation(req.run_id, req.digest)]);
  if (!run) return no(`no run ${req.run_id}`);
  if (!attested || attested.subject !== req.subject) return no(`the holder of run ${run._id} published no such event`);
  if (run.thread_id !== req.thread_id) return no(`run ${run._id} is not a run of thread ${req.thread_id}`);
  if (req.owner_id !== undefined && run.owner_id !== req.owner_id) return no(`run ${run._id} is another owner's`);
  if (req.repository) {
    const { project_repository_id, repository_id } = req.repository;
    const named = run.repositories.some(
      (r) => r.project_repository_id === project_repository_id && r.repository_id === repository_id,
    );
    if (!named) return no(`run ${run._id} has no repository ${project_repository_id} (${repository_id})`);
  }
  return { confirmed: true, reason: null };
}
