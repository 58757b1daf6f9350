export * from './config.js';
export * from './errors.js';
export * from './git-env.js';
export * from './ids.js';
export * from './lifecycle.js';
export * from './logger.js';
export * from './mongo.js';
export * from './one-at-a-time.js';
export * from './nats.js';
export * from './jetstream.js';
export * from './retry.js';
export * from './events.js';
export * from './rpc.js';
export * from './nats-auth.js';
export { newReplyKey, parseReplyKey, REPLY_KEY_HEADER, seal, type ReplyKey } from './sealed-reply.js';
export * from './request-context.js';
export { endResponseStream, startResponseStream, writeFunctionCall, writeResponseEvent } from './responses-stream.js';
export {
  blockEvents,
  endMessageStream,
  messageEndEvents,
  messageErrorBody,
  messageStartEvent,
  startMessageStream,
  writeMessageBlock,
  writeMessageEvent,
  type MessageBlock,
  type MessageStopReason,
} from './messages-stream.js';
export * from './runtime.js';
export * from './telemetry.js';
export { isTransientFailure } from './transient.js';
export * from './http-telemetry.js';
export { verifyWebhookSignature } from './webhook-signature.js';
