import { ErrorBody, SubjectTokenError, UnauthorizedBody, subjectToken, type RpcEndpoint } from '@threadwork/contracts';
import { AppError, notFound, request, type Logger, type NatsConnection } from '@threadwork/platform';
import type {
  FastifyInstance,
  FastifyRequest,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';

/** The fastify instance routes are added to: zod schemas type requests and replies. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  Logger,
  ZodTypeProvider
>;

/** What route handlers need: the way to the services, and how long to wait for them. */
export interface HandlerDeps {
  nc: NatsConnection;
  requestTimeoutMs: number;
  /** Aborted when the server starts closing: long-polls answer and event streams end at once. */
  closing: AbortSignal;
  /** How often an idle event stream gets a `: ping` comment. */
  heartbeatMs: number;
  /** Event streams and long-polls open at once, per user (on this replica). */
  followers: Followers;
  /** The GitHub App's webhook secret, checked before a delivery is sent on NATS; null refuses all. */
  webhookSecret: string | null;
  /** Gives back the per-address token a public request took, when it proved itself. */
  refundAddress: (request: FastifyRequest) => void;
}

/**
 * Counts what each user holds open that waits on the event log — streams and long-polls — so one
 * user cannot hold every connection and subscription of a replica.
 */
export class Followers {
  private readonly open = new Map<string, number>();

  constructor(readonly maxPerUser: number) {}

  /** Takes a place for the user, answering how to give it back; throws 429 `rate_limited` when none is left. */
  enter(userId: string): () => void {
    const now = this.open.get(userId) ?? 0;
    if (now >= this.maxPerUser) {
      throw new AppError(
        'rate_limited',
        `at most ${this.maxPerUser} event streams and long-polls open at once per user; close one or retry later`,
      );
    }
    this.open.set(userId, now + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const rest = (this.open.get(userId) ?? 1) - 1;
      if (rest > 0) this.open.set(userId, rest);
      else this.open.delete(userId);
    };
  }
}

export type RouteModule = (app: App, deps: HandlerDeps) => void;

/** One request to a backing service; no answer within the timeout becomes `unavailable` (503). */
export function call<E extends RpcEndpoint>(
  deps: HandlerDeps,
  endpoint: E,
  payload: z.input<E['request']>,
): Promise<z.output<E['response']>> {
  return request(deps.nc, endpoint, payload, { timeoutMs: deps.requestTimeoutMs });
}

/** The caller every handler acts for; the onRequest hook has rejected anyone else already. */
export function ownerOf(req: FastifyRequest): string {
  if (!req.user) throw new AppError('unauthorized', 'Unauthorized');
  return req.user._id;
}

/**
 * A path id that can also be one NATS subject token. Ids we hand out always can; anything else
 * (a `.`, a wildcard, whitespace) names nothing that exists, which the contract calls 404.
 */
export function pathId(id: string): string {
  try {
    return subjectToken(id, 'id');
  } catch (err) {
    if (err instanceof SubjectTokenError) throw notFound('resource');
    throw err;
  }
}

/**
 * Services answer one vocabulary's shape for each view, but the endpoints are typed with the union
 * of both; parsing with the one the route promises narrows the type (and a wrong shape is a 500).
 */
export function asShape<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  return schema.parse(value) as z.output<S>;
}

const errorResponses = {
  400: ErrorBody.describe('Invalid request: `error.message` names the offending field (`body.prompt: …`)'),
  401: UnauthorizedBody.describe('Missing or invalid API key or session'),
  404: ErrorBody.describe("No such resource for this caller (others' resources are reported the same way)"),
  429: ErrorBody.describe(
    'Rate limited (per caller, per gateway replica; for event streams and long-polls also their number open at once; for thread and task creation THREADS_PER_MINUTE_PER_USER); `Retry-After` says when to retry',
  ),
  500: ErrorBody.describe('Unexpected failure; the message never carries details'),
  503: ErrorBody.describe('A backing service did not answer in time; retry'),
};
const payloadTooLarge = { 413: ErrorBody.describe('Request body larger than the limit (1 MiB by default)') };
const conflictResponse = {
  409: ErrorBody.describe(
    'Conflict: `thread_busy`, `no_active_run`, `already_settled`, `idempotency_conflict` or `too_many_runs` (the caller has MAX_LIVE_RUNS_PER_USER runs live; nothing was written) (see `error.code`)',
  ),
};

/** Error responses of a read. */
export const readErrors = errorResponses;
/** Error responses of a write with a JSON body. */
export const writeErrors = { ...errorResponses, ...payloadTooLarge };
/** Error responses of a write that can conflict with the resource's state. */
export const conflictingWriteErrors = { ...writeErrors, ...conflictResponse };
