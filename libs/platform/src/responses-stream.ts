import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

// An OpenAI Responses answer streamed as server-sent events, as Codex reads it: the frames, and
// the events that open and close a response. The runner's demo model and the test kit's fake
// model both write one; what goes between (the items and their deltas) is each one's own.

/** Answers 200 with an event stream and opens response `id`. */
export function startResponseStream(res: ServerResponse, id: string, headers: OutgoingHttpHeaders = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  writeResponseEvent(res, 'response.created', { response: { id } });
}

/** One event: its name, and again as `type` in its data, as the Responses API sends both. */
export function writeResponseEvent(res: ServerResponse, type: string, data: object): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

/** A call of tool `name`, complete as soon as it is announced (a model streams no argument deltas here). */
export function writeFunctionCall(
  res: ServerResponse,
  index: number,
  call: { id: string; callId: string; name: string; arguments: Record<string, unknown> },
): void {
  const item = {
    type: 'function_call',
    id: call.id,
    call_id: call.callId,
    name: call.name,
    arguments: JSON.stringify(call.arguments),
    status: 'completed',
  };
  writeResponseEvent(res, 'response.output_item.added', { output_index: index, item });
  writeResponseEvent(res, 'response.output_item.done', { output_index: index, item });
}

/** Completes response `id` with its token usage and ends the stream. */
export function endResponseStream(
  res: ServerResponse,
  id: string,
  usage: { inputTokens: number; outputTokens: number },
): void {
  writeResponseEvent(res, 'response.completed', {
    response: {
      id,
      usage: {
        input_tokens: usage.inputTokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: usage.outputTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: usage.inputTokens + usage.outputTokens,
      },
    },
  });
  res.end();
}
