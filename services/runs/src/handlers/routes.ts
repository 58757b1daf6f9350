import { harnessCatalog, harnessView, rpc } from '@threadwork/contracts';
import { route, type RpcRoute } from '@threadwork/platform';
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
import { claimRun } from '../flows/runner-claim.js';
import { attemptState, describeHolder, holdingRun, releaseRun } from '../flows/runner-holder.js';
import { appendEvents, transitionRun } from '../flows/runner-moves.js';
import { cancelRun, eventsPage, getRuns, liveCount, liveRun } from '../flows/runs.js';
import { toInteraction } from '../store/interactions.js';
import { toRun } from '../store/runs.js';

// The rpc.runs.* endpoints: the request is parsed by serveRpc against the contract, each handler
// calls one flow and maps its result onto the contract. A database outage reaches the caller as
// `unavailable` (retryable): the store says so.

export function runsRoutes(ctx: RunsContext): RpcRoute[] {
  return [
    route(rpc.runs.harnesses, async () => {
      // Read from the configuration the runs service admits with, so the list cannot drift from it.
      const catalog = harnessCatalog(ctx.config);
      return { harnesses: catalog.harnesses.map((entry) => harnessView(catalog, entry)) };
    }),
    route(rpc.runs.admit, async (req) => {
      const { run, created } = await admitRun(ctx, req);
      return { run: toRun(run), created };
    }),
    route(rpc.runs.get, async (req) => toRun(await loadOwnedRun(ctx, req.run_id, req.owner_id))),
    route(rpc.runs.getMany, async (req) => ({
      runs: (await getRuns(ctx, req.owner_id, req.run_ids)).map((run) => ({ id: run._id, status: run.status })),
    })),
    route(rpc.runs.liveCount, async (req) => ({ live: await liveCount(ctx, req.owner_id, req.at_most) })),
    route(rpc.runs.live, async (req) => {
      const run = await liveRun(ctx, req.owner_id, req.thread_id);
      return { run: run ? toRun(run) : null };
    }),
    route(rpc.runs.cancel, async (req) => {
      const { run, requested } = await cancelRun(ctx, req.owner_id, req.run_id);
      return { run: toRun(run), requested };
    }),
    route(rpc.runs.eventsPage, (req) => eventsPage(ctx, req)),
    route(rpc.runs.claim, async (req) => {
      const { run, attempt, job } = await claimRun(ctx, req);
      return { run: toRun(run), attempt, job };
    }),
    route(rpc.runs.transition, async (req) => toRun(await transitionRun(ctx, req))),
    route(rpc.runs.append, async (req) => ({ sequences: await appendEvents(ctx, req) })),
    route(rpc.runs.interactionCreate, async (req) => toInteraction(await createInteraction(ctx, req))),
    route(rpc.runs.interactionGet, async (req) =>
      toInteraction(await getInteraction(ctx, req.interaction_id, req.owner_id)),
    ),
    route(rpc.runs.interactionList, async (req) => ({
      interactions: (await listInteractions(ctx, req.owner_id, req.thread_id, req.status)).map(toInteraction),
    })),
    route(rpc.runs.interactionAnswer, (req) => answerInteraction(ctx, req.owner_id, req.interaction_id, req.request)),
    route(rpc.runs.interactionSettlement, async (req) => {
      // Answers in clear, secrets included: for the runner holding the run that asked only.
      await holdingRun(ctx, req.run_id, req.claim_id);
      const { doc, answers } = await readSettlement(ctx, req.interaction_id, req.run_id);
      return { interaction: toInteraction(doc), answers };
    }),
    route(rpc.runs.holder, (req) => describeHolder(ctx, req.run_id, req.claim_id)),
    route(rpc.runs.attemptState, (req) => attemptState(ctx, req)),
    route(rpc.runs.release, (req) => releaseRun(ctx, req)),
    route(rpc.runs.attest, async (req) => {
      await attestEvent(ctx, req);
      return { attested: true as const };
    }),
    route(rpc.runs.attestation, (req) => checkAttestation(ctx, req)),
  ];
}
