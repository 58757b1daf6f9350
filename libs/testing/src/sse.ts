import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';

// How the tests read a Server-Sent Events stream the way a browser would: eventsource-parser
// follows the spec (CR, LF and CRLF line ends, `data:` over several lines, comments, `id:`,
// `retry:`), so a frame the gateway writes wrongly fails here as it would in a client.

/** One dispatched event; `event` and `id` are absent when the frame does not name them. */
export type SseFrame = EventSourceMessage;

/**
 * Turns the bytes of a stream, as they arrive in chunks cut anywhere, into complete events.
 * Comments (`: ping`) are not events; `onComment` sees them.
 */
export class SseDecoder {
  private readonly parser: EventSourceParser;
  private readonly decoder = new TextDecoder();
  private pending: SseFrame[] = [];

  constructor(onComment?: (comment: string) => void) {
    this.parser = createParser({
      onEvent: (frame) => this.pending.push(frame),
      ...(onComment ? { onComment } : {}),
    });
  }

  /** The events completed by `chunk`; an incomplete rest waits for the next chunk. */
  push(chunk: Uint8Array | string): SseFrame[] {
    this.parser.feed(typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true }));
    const frames = this.pending;
    this.pending = [];
    return frames;
  }
}

/**
 * The events of an SSE response until its body ends. The caller stops early by breaking out of
 * the loop (the reader is released).
 */
export async function* sseFrames(res: Response): AsyncGenerator<SseFrame> {
  if (!res.body) throw new Error('the response has no body to read events from');
  const decoder = new SseDecoder();
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield* decoder.push(value);
    }
  } finally {
    reader.releaseLock();
  }
}
