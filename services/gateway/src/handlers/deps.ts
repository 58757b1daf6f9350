import type { NatsConnection } from '@threadwork/platform';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyPluginAsync,
  FastifyRequest,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { BackingServices } from '../clients/backing-services.js';
import type { Followers } from '../domain/followers.js';
import type { SignInAllowList } from '../domain/github-sign-in.js';
import type { IdentityStore } from '../store/identity.js';

/** What route handlers need: the backing services, run events, and this replica's shared state. */
export interface HandlerDeps {
  /** Run events are heard on it (core subscriptions), and its server's max_payload bounds webhooks. */
  nc: NatsConnection;
  services: BackingServices;
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
  /** Users, their API keys (the signed-in user's own are managed through it), session epochs and login links. */
  identity: IdentityStore;
  /** Key that signs `tw_session` cookies. */
  sessionSecret: string;
  /** How long a session made from a login link lasts. */
  sessionTtlSeconds: number;
  /** Who may sign in with GitHub (GITHUB_SIGN_IN_ALLOW); null: nobody, and it is not offered. */
  githubSignInAllow: SignInAllowList | null;
}

/** The fastify instance routes are added to: zod schemas type requests and replies. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

/** The routes of one area: a fastify plugin whose zod schemas type requests and replies. */
export type RoutePlugin = FastifyPluginAsync<HandlerDeps, RawServerDefault, ZodTypeProvider>;
