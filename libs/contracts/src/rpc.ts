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
}

export function defineEndpoint<Req extends z.ZodType, Res extends z.ZodType>(
  subject: string,
  request: Req,
  response: Res,
): RpcEndpoint<Req, Res> {
  return { subject, request, response };
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
