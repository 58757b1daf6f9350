import { rpc } from '@threadwork/contracts';
import { mongoCall, route, type RpcRoute } from '@threadwork/platform';
import { admitRun } from '../flows/admission.js';
import { attestEvent, checkAttestation } from '../flows/attestations.js';
import { loadOwnedRun, type RunsContext } from '../flows/context.js';
import {
  answerInteraction,
  createInteraction,
  getInteraction,
  listInteractions,
  readSettlement,
} from '../flows/interactions.js';
import {
  appendEvents,
  attemptState,
  claimRun,
  describeHolder,
  holdingRun,
  releaseRun,
  transitionRun,
} from '../flows/runner.js';
import { cancelRun, eventsPage, getRuns, liveCount, liveRun } from '../flows/runs.js';
import { toInteraction } from '../store/interactions.js';
import { toRun } from '../store/runs.js';

// The rpc.runs.* endpoints: the request is parsed by serveRpc against the contract, each handler
// calls one flow and maps its result onto the contract. mongoCall turns a database outage into
// `unavailable` (retryable) instead of `internal`.

export function runsRoutes(ctx: RunsContext): RpcRoute[] {
  return [
    route(rpc.runs.admit, (req) =>
      mongoCall(async () => {
        const { run, created } = await admitRun(ctx, req);
        return { run: toRun(run), created };
      }),
    ),
    route(rpc.runs.get, (req) => mongoCall(async () => toRun(await loadOwnedRun(ctx, req.run_id, req.owner_id)))),
    route(rpc.runs.getMany, (req) =>
      mongoCall(async () => ({
        runs: (await getRuns(ctx, req.owner_id, req.run_ids)).map((run) => ({ id: run._id, status: run.status })),
      })),
    ),
    route(rpc.runs.liveCount, (req) =>
      mongoCall(async () => ({ live: await liveCount(ctx, req.owner_id, req.at_most) })),
    ),
    route(rpc.runs.live, (req) =>
      mongoCall(async () => {
        const run = await liveRun(ctx, req.owner_id, req.thread_id);
        return { run: run ? toRun(run) : null };
      }),
    ),
    route(rpc.runs.cancel, (req) =>
      mongoCall(async () => {
        const { run, requested } = await cancelRun(ctx, req.owner_id, req.run_id);
        return { run: toRun(run), requested };
      }),
    ),
    route(rpc.runs.eventsPage, (req) => mongoCall(() => eventsPage(ctx, req))),
    route(rpc.runs.claim, (req) =>
      mongoCall(async () => {
        const { run, attempt, job } = await claimRun(ctx, req);
        return { run: toRun(run), attempt, job };
      }),
    ),
    route(rpc.runs.transition, (req) => mongoCall(async () => toRun(await transitionRun(ctx, req)))),
    route(rpc.runs.append, (req) => mongoCall(async () => ({ sequences: await appendEvents(ctx, req) }))),
    route(rpc.runs.interactionCreate, (req) => mongoCall(async () => toInteraction(await createInteraction(ctx, req)))),
    route(rpc.runs.interactionGet, (req) =>
      mongoCall(async () => toInteraction(await getInteraction(ctx, req.interaction_id, req.owner_id))),
    ),
    route(rpc.runs.interactionList, (req) =>
      mongoCall(async () => ({
        interactions: (await listInteractions(ctx, req.owner_id, req.thread_id, req.status)).map(toInteraction),
      })),
    ),
    route(rpc.runs.interactionAnswer, (req) =>
      mongoCall(() => answerInteraction(ctx, req.owner_id, req.interaction_id, req.request)),
    ),
    route(rpc.runs.interactionSettlement, (req) =>
      mongoCall(async () => {
        // Answers in clear, secrets included: for the runner holding the run that asked only.
        await holdingRun(ctx, req.run_id, req.claim_id);
        const { doc, answers } = await readSettlement(ctx, req.interaction_id, req.run_id);
        return { interaction: toInteraction(doc), answers };
      }),
    ),
    route(rpc.runs.holder, (req) => mongoCall(() => describeHolder(ctx, req.run_id, req.claim_id))),
    route(rpc.runs.attemptState, (req) => mongoCall(() => attemptState(ctx, req))),
    route(rpc.runs.release, (req) => mongoCall(() => releaseRun(ctx, req))),
    route(rpc.runs.attest, (req) =>
      mongoCall(async () => {
        await attestEvent(ctx, req);
        return { attested: true as const };
      }),
    ),
    route(rpc.runs.attestation, (req) => mongoCall(() => checkAttestation(ctx, req))),
  ];
}
