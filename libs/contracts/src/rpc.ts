import { z } from 'zod';
import { ErrorCode } from './errors.js';

/**
 * A request/reply endpoint between services: its subject and the schemas of both directions.
 * Defined once here and imported by the serving service and by every caller, so neither side
 * retypes a subject or a message shape.
 */
export interface RpcEndpoint<Req extends z.ZodType = z.ZodType, Res extends z.ZodType = z.ZodType> {
  subject: string;
  request: Req;
  response: Res;
  /**
   * Its replies carry secrets or a user's content to a caller that shares its NATS identity with
   * others (the runners): they travel sealed to a key the caller sends with the request (`SealedReply`),
   * since everyone holding that identity's key may subscribe to its reply inboxes.
   */
  sealed: boolean;
}

export interface EndpointOptions {
  /** Seal its replies to the caller (RpcEndpoint.sealed). */
  sealed?: boolean;
}

export function defineEndpoint<Req extends z.ZodType, Res extends z.ZodType>(
  subject: string,
  request: Req,
  response: Res,
  opts: EndpointOptions = {},
): RpcEndpoint<Req, Res> {
  return { subject, request, response, sealed: opts.sealed ?? false };
}

export type RpcRequest<E extends RpcEndpoint> = z.input<E['request']>;
export type RpcResponse<E extends RpcEndpoint> = z.output<E['response']>;

/** What travels back on the wire: the result, or a typed error a caller can map or retry. */
export const RpcError = z.object({
  code: ErrorCode,
  message: z.string(),
  retryable: z.boolean(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type RpcError = z.infer<typeof RpcError>;

export const RpcEnvelope = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), result: z.unknown() }),
  z.object({ ok: z.literal(false), error: RpcError }),
]);
export type RpcEnvelope = z.infer<typeof RpcEnvelope>;

/**
 * A sealed endpoint's reply: its RpcEnvelope encrypted to the caller's reply key (X25519 with the
 * responder's one-time `key`, HKDF-SHA256, AES-256-GCM over the endpoint's subject). Base64url.
 * The one reply of a sealed endpoint that travels in clear is the refusal of a request without a
 * usable reply key, which says only that.
 */
export const SealedReply = z.object({
  sealed: z.object({
    v: z.literal(1),
    key: z.string().min(1),
    iv: z.string().min(1),
    data: z.string().min(1),
  }),
});
export type SealedReply = z.infer<typeof SealedReply>;
export type SealedBox = SealedReply['sealed'];

/**
 * A DOMAIN event: its subject and the schema of its payload. Defined once here and imported by
 * its publisher (which checks what it sends against the schema) and by every consumer (which
 * names the events it takes and gets each payload parsed by its schema), so neither side retypes
 * a subject or parses a payload by hand.
 */
export interface EventDef<S extends z.ZodType = z.ZodType> {
  subject: string;
  schema: S;
}

export function defineEvent<S extends z.ZodType>(subject: string, schema: S): EventDef<S> {
  return { subject, schema };
}

/** What a publisher hands over (defaults not yet applied) and what a consumer receives. */
export type EventInput<E extends EventDef> = z.input<E['schema']>;
export type EventPayload<E extends EventDef> = z.output<E['schema']>;
