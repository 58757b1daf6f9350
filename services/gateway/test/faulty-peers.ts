import { rpc, SERVICES } from '@threadwork/contracts';
import {
  AppError,
  notFound,
  route,
  serveRpc,
  type Logger,
  type NatsConnection,
  type RpcServer,
} from '@threadwork/platform';

// The threads and runs services as they look when they go wrong: a crash, an `internal` answer
// carrying a message of its own, an answer the contract does not allow, an answer too late. The
// real services do none of these on purpose, and the gateway must still hide or bound each, so
// these faulty stand-ins answer the two reads the gateway's error paths are tested through. For
// any other id they answer as the real services do for an id that is not the caller's
// (faulty-peers.test.ts holds them to that).

/** Ids the faulty peers answer wrongly. */
export const FAULTS = {
  /** Throws a plain Error carrying a secret: the service answers `internal`. */
  boom: 'thr_boom',
  /** Answers `internal` with a message of its own (as repohost did with GitHub's failures). */
  internalWithText: 'thr_internal_text',
  /** Answers a shape the contract does not allow: the gateway's parse fails. */
  malformed: 'thr_malformed',
  /** Answers after the gateway has given up. */
  slowRun: 'run_slow',
} as const;

export const SECRET = 'password=hunter2';

/** How late the slow run's answer comes: later than a gateway with a short request timeout waits. */
const SLOW_MS = 2_000;

export async function serveFaultyPeers(nc: NatsConnection, logger: Logger): Promise<RpcServer[]> {
  const threads = await serveRpc(
    nc,
    { name: SERVICES.threads.name, version: '0.0.0' },
    [
      route(rpc.threads.get, async ({ thread_id, view }) => {
        if (thread_id === FAULTS.boom) throw new Error(`driver said ${SECRET}`);
        if (thread_id === FAULTS.internalWithText) throw new AppError('internal', `GitHub answered ${SECRET}`);
        // Cast: the point is an answer the contract does not allow.
        if (thread_id === FAULTS.malformed) return { id: thread_id } as never;
        throw notFound(view);
      }),
    ],
    logger,
  );
  const runs = await serveRpc(
    nc,
    { name: SERVICES.runs.name, version: '0.0.0' },
    [
      route(rpc.runs.get, async ({ run_id }) => {
        if (run_id === FAULTS.slowRun) await new Promise((resolve) => setTimeout(resolve, SLOW_MS));
        throw notFound('run');
      }),
    ],
    logger,
  );
  return [threads, runs];
}
