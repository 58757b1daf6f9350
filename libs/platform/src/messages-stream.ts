import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

// An Anthropic Messages answer streamed as server-sent events, as Claude Code reads it. The events
// are built by pure functions (so a test can hold them against the provider's published types) and
// written by the `write…` functions; a scripted model picks the blocks, this file says how they go
// on the wire. Every field the published `Message` requires is present, `null` where a real answer
// would leave it unset, so a client's accumulated message has the shape the real API gives it.

/** A block of an assistant answer: text, or a call of a client tool. */
export type MessageBlock =
  { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

export type MessageStopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence';

/** `message_start`: the answer's envelope, with no content yet. */
export function messageStartEvent(message: { id: string; model: string; inputTokens: number }) {
  return {
    type: 'message_start' as const,
    message: {
      id: message.id,
      type: 'message' as const,
      role: 'assistant' as const,
      model: message.model,
      content: [],
      container: null,
      diagnostics: null,
      stop_details: null,
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: message.inputTokens,
        output_tokens: 1,
        cache_creation: null,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        inference_geo: null,
        output_tokens_details: null,
        server_tool_use: null,
        service_tier: 'standard' as const,
        speed: null,
      },
    },
  };
}

/**
 * One block as start, deltas, stop. The text or the tool input arrives in two pieces, so clients
 * see it accumulate as with a real model (a tool's input starts as `{}` and is assembled from
 * `input_json_delta` pieces that are only valid JSON together).
 */
export function blockEvents(index: number, block: MessageBlock) {
  const start =
    block.type === 'text'
      ? {
          type: 'content_block_start' as const,
          index,
          content_block: { type: 'text' as const, text: '', citations: null },
        }
      : {
          type: 'content_block_start' as const,
          index,
          content_block: {
            type: 'tool_use' as const,
            id: block.id,
            name: block.name,
            input: {},
            caller: { type: 'direct' as const },
          },
        };
  const whole = block.type === 'text' ? block.text : JSON.stringify(block.input);
  const half = Math.ceil(whole.length / 2);
  const deltas = [whole.slice(0, half), whole.slice(half)]
    .filter((piece) => piece.length > 0)
    .map((piece) => ({
      type: 'content_block_delta' as const,
      index,
      delta:
        block.type === 'text'
          ? { type: 'text_delta' as const, text: piece }
          : { type: 'input_json_delta' as const, partial_json: piece },
    }));
  return [start, ...deltas, { type: 'content_block_stop' as const, index }];
}

/** `message_delta` (why the answer stopped, the output tokens) and `message_stop`. */
export function messageEndEvents(end: { stopReason: MessageStopReason; outputTokens: number }) {
  return [
    {
      type: 'message_delta' as const,
      delta: { stop_reason: end.stopReason, stop_sequence: null, stop_details: null, container: null },
      usage: {
        output_tokens: end.outputTokens,
        input_tokens: null,
        cache_creation_input_tokens: null,
        cache_read_input_tokens: null,
        output_tokens_details: null,
        server_tool_use: null,
      },
    },
    { type: 'message_stop' as const },
  ];
}

/** One event: its name, and again as `type` in its data, as the Messages API sends both. */
export function writeMessageEvent(res: ServerResponse, event: { type: string }): void {
  res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
}

/** Answers 200 with an event stream and opens the answer. */
export function startMessageStream(
  res: ServerResponse,
  message: { id: string; model: string; inputTokens: number },
  headers: OutgoingHttpHeaders = {},
): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  writeMessageEvent(res, messageStartEvent(message));
}

/** Writes block `index` of the answer. */
export function writeMessageBlock(res: ServerResponse, index: number, block: MessageBlock): void {
  for (const event of blockEvents(index, block)) writeMessageEvent(res, event);
}

/** Closes the answer with why it stopped and ends the stream. */
export function endMessageStream(
  res: ServerResponse,
  end: { stopReason: MessageStopReason; outputTokens: number },
): void {
  for (const event of messageEndEvents(end)) writeMessageEvent(res, event);
  res.end();
}

/** The body of a Messages API error answer, e.g. `{type:'error', error:{type:'overloaded_error', …}}`. */
export function messageErrorBody(status: number, message: string, errorType = errorTypeFor(status)): string {
  return JSON.stringify({ type: 'error', error: { type: errorType, message } });
}

// The error types the Messages API documents for each status.
function errorTypeFor(status: number): string {
  const byStatus: Record<number, string> = {
    400: 'invalid_request_error',
    401: 'authentication_error',
    403: 'permission_error',
    404: 'not_found_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    529: 'overloaded_error',
  };
  return byStatus[status] ?? 'api_error';
}
