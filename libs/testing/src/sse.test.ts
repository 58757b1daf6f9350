import { describe, expect, it } from 'vitest';
import { SseDecoder, sseFrames, type SseFrame } from './sse.js';

const decode = (...chunks: string[]): SseFrame[] => {
  const decoder = new SseDecoder();
  return chunks.flatMap((chunk) => decoder.push(chunk));
};

describe('reading Server-Sent Events', () => {
  it('reads id, event and data, and leaves out what a frame does not name', () => {
    expect(decode('id: 7\nevent: message.delta\ndata: {"a":1}\n\ndata: plain\n\n')).toEqual([
      { id: '7', event: 'message.delta', data: '{"a":1}' },
      { data: 'plain' },
    ]);
  });

  it('takes LF, CR and CRLF as line ends, mixed in one stream', () => {
    expect(decode('id: 1\r\ndata: crlf\r\n\r\nid: 2\rdata: cr\r\rid: 3\ndata: lf\n\n')).toEqual([
      { id: '1', data: 'crlf' },
      { id: '2', data: 'cr' },
      { id: '3', data: 'lf' },
    ]);
  });

  it('joins data over several lines with LF, whatever the line ends', () => {
    expect(decode('data: first\r\ndata:second\r\ndata:  third\r\n\r\n')).toEqual([{ data: 'first\nsecond\n third' }]);
  });

  it('passes comments aside, not as events', () => {
    const comments: string[] = [];
    const decoder = new SseDecoder((comment) => comments.push(comment));
    expect(decoder.push(': ping\n\nid: 4\n: inside\ndata: x\n\n')).toEqual([{ id: '4', data: 'x' }]);
    expect(comments).toEqual(['ping', 'inside']);
  });

  it('completes an event only at its blank line, however the chunks cut it, a CRLF too', () => {
    const decoder = new SseDecoder();
    expect(decoder.push('id: 9\r')).toEqual([]);
    expect(decoder.push('\nevent: end\r\nda')).toEqual([]);
    // A CR ends a line at once; the LF after it, in the next chunk, is the rest of that CRLF.
    expect(decoder.push('ta: {}\r\n\r')).toEqual([{ id: '9', event: 'end', data: '{}' }]);
    expect(decoder.push('\ndata: next\n')).toEqual([]);
    expect(decoder.push('\n')).toEqual([{ data: 'next' }]);
  });

  it('decodes UTF-8 split between chunks', () => {
    const bytes = new TextEncoder().encode('data: café ✓\n\n');
    const decoder = new SseDecoder();
    expect([...decoder.push(bytes.subarray(0, 10)), ...decoder.push(bytes.subarray(10))]).toEqual([{ data: 'café ✓' }]);
  });

  it('reads the events of a response body until it ends', async () => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        const encoder = new TextEncoder();
        controller.enqueue(encoder.encode('retry: 3000\n\nid: 1\nda'));
        controller.enqueue(encoder.encode('ta: one\n\n: ping\n\nevent: end\ndata: {}\n\n'));
        controller.close();
      },
    });
    const frames: SseFrame[] = [];
    for await (const frame of sseFrames(new Response(body))) frames.push(frame);
    expect(frames).toEqual([
      { id: '1', data: 'one' },
      { event: 'end', data: '{}' },
    ]);
  });
});
