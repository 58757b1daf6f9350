// What the model proxy (../model-proxy.ts) needs to know of one model API to serve a jailed
// harness through it: which requests the harness makes, what in a body the provider would act on
// past the turn or past the egress policy, which body fields set the price, and where the key goes.
// With the key added outside, a request's path, headers and body are the agent's to write.

/** The API a harness speaks: OpenAI's Responses (Codex) or Anthropic's Messages (Claude Code). */
export type ModelApi = 'responses' | 'messages';

/**
 * What every request body forwarded is billed as: the run's model, and which run it is (for the log).
 * Set per turn: a harness kept warm for a thread's next run serves that run's model then.
 */
export interface ModelPin {
  model: string;
  runId?: string | undefined;
}

export interface ModelDialect {
  /** Whether a harness of this API makes this request: its method, and its path and query. */
  allowed(method: string, url: string, basePath: string): boolean;
  /** Why a request body (parsed JSON) is not one a harness makes, or null. */
  bodyProblem(body: unknown): string | null;
  /** The body fields that set the price of a token: `model`, pinned, and others, removed. */
  readonly billingFields: readonly string[];
  /** What the log says when a body's billing was rewritten. */
  readonly billingRewritten: string;
  /** Headers that carry a key in this API: the agent's are never forwarded. */
  readonly keyHeaders: readonly string[];
  /** The header that carries the operator's key upstream. */
  keyHeader(apiKey: string): readonly [name: string, value: string];
  /** Removes in place what the agent may not ask for in a header; says what it removed. */
  screenHeaders?(headers: Record<string, string | string[]>): string[];
}

/**
 * The body as it is billed: `model` set to the pinned one and the dialect's other billing fields
 * removed (the account's defaults); null when it already is. These set the price of each token on
 * the key's account; how many tokens a turn takes is the harness's loop's. Rewritten rather than
 * refused: the harness names the run's model on its own requests, so a difference is normally the
 * agent's, and rewriting bills it as configured; a refusal would also fail a harness that names
 * another model for a request of its own, where a rewrite keeps it working.
 */
export function pinBilling(
  request: Record<string, unknown>,
  pin: ModelPin,
  fields: readonly string[],
): Record<string, unknown> | null {
  const removed = fields.filter((field) => field !== 'model');
  if (request.model === pin.model && !removed.some((field) => field in request)) return null;
  const rest = { ...request };
  for (const field of removed) delete rest[field];
  return { ...rest, model: pin.model };
}

/**
 * The path below the endpoint's base path, or null when the path leaves it or holds encoded or dot
 * segments that the endpoint could resolve to somewhere else.
 */
export function pathUnderBase(pathname: string, basePath: string): string | null {
  if (!pathname.startsWith(`${basePath}/`) || /%|\/\.\.?(\/|$)/.test(pathname)) return null;
  return pathname.slice(basePath.length);
}
