import { createParser } from 'eventsource-parser';

// SSE frames read one at a time, in the order they came: the events and the comments a client sees,
// and the `retry:` preamble too. Parsed by eventsource-parser, the parser behind @threadwork/testing's
// SseDecoder, whose callbacks here also report the retry hint that SseDecoder drops.

export interface Frame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
  retry?: string;
}

/** Reads SSE frames off a fetch body, one at a time. */
export function frameReader(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const queue: Frame[] = [];
  const parser = createParser({
    onEvent: ({ id, event, data }) =>
      queue.push({ ...(id === undefined ? {} : { id }), ...(event === undefined ? {} : { event }), data }),
    onComment: (comment) => queue.push({ comment: comment.trim() }),
    onRetry: (retry) => queue.push({ retry: String(retry) }),
  });
  return {
    async next(): Promise<Frame | null> {
      while (queue.length === 0) {
        const { value, done } = await reader.read();
        if (done) return null;
        parser.feed(decoder.decode(value, { stream: true }));
      }
      return queue.shift()!;
    },
    /** Events until `end`, skipping the retry preamble and comments. */
    async until(count: number): Promise<Frame[]> {
      const frames: Frame[] = [];
      while (frames.length < count) {
        const frame = await this.next();
        if (!frame) break;
        if (frame.event) frames.push(frame);
      }
      return frames;
    },
    cancel: () => reader.cancel(),
  };
}
