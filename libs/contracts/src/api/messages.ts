import { z } from 'zod';
import { Cursor, Id, Prompt, Timestamp, optionalQueryParam, pageLimit } from '../common.js';
import { CollaborationMode, MessageRole } from '../values.js';
import { RunRef } from './runs.js';

export const TextPart = z.object({
  type: z.literal('text'),
  text: z.string(),
});
export type TextPart = z.infer<typeof TextPart>;

export const Message = z.object({
  id: Id,
  role: MessageRole,
  parts: z.array(TextPart),
  created_at: Timestamp,
});
export type Message = z.infer<typeof Message>;

/** Oldest first; `next_cursor` is null when there is no further page. */
export const MessagePage = z.object({
  messages: z.array(Message),
  next_cursor: Cursor.nullable(),
});
export type MessagePage = z.infer<typeof MessagePage>;

export const MESSAGE_PAGE_LIMIT_DEFAULT = 50;
export const MESSAGE_PAGE_LIMIT_MAX = 200;

/** GET /v1/threads/{id}/messages and /v1/tasks/{id}/messages */
export const MessagePageQuery = z.object({
  cursor: optionalQueryParam(Cursor.optional()),
  limit: pageLimit({ defaultValue: MESSAGE_PAGE_LIMIT_DEFAULT, max: MESSAGE_PAGE_LIMIT_MAX }),
});
export type MessagePageQuery = z.infer<typeof MessagePageQuery>;

/**
 * POST /v1/threads/{id}/messages. The contract shows only `prompt`; the idempotency key, message
 * id and mode mirror thread creation so a follow-up can be retried and switch modes.
 */
export const SendMessageBody = z.strictObject({
  prompt: Prompt,
  client_request_id: Id.optional(),
  message_id: Id.optional(),
  collaboration_mode: CollaborationMode.optional(),
});
export type SendMessageBody = z.infer<typeof SendMessageBody>;

export const MessageAccepted = z.object({
  status: z.literal('accepted'),
  ...RunRef.shape,
});
export type MessageAccepted = z.infer<typeof MessageAccepted>;
