// A minimal Server-Sent Events client over node:http, enough to follow run event streams: one
// connection per follower (no agent pooling), every event handed over with the time its bytes
// arrived, taken before any parsing. Frames are parsed by the tests' decoder (eventsource-parser).
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { SseDecoder } from '@threadwork/testing';

/** Wall-clock milliseconds with sub-millisecond precision, comparable across this process. */
export const nowMs = () => performance.timeOrigin + performance.now();

/**
 * Opens `url` and calls `onFrame({ event, data }, receivedAt)` for each frame that carries data.
 * `opened` resolves once the response headers are in (rejects on a non-200), `ended` when the
 * server closes the stream; `close()` ends it from our side.
 */
export function follow(url, headers, onFrame) {
  return open(url, headers, () => {
    const decoder = new SseDecoder();
    return (chunk, receivedAt) => {
      for (const { event, data } of decoder.push(chunk)) onFrame({ event: event ?? 'message', data }, receivedAt);
    };
  });
}

/**
 * As `follow`, but unparsed: `onFrames(text, receivedAt)` gets the complete frames of what arrived
 * (a frame cut at a chunk's end comes whole with the next). For many followers in this process,
 * where parsing every frame would take the servers' cores.
 */
export function followRaw(url, headers, onFrames) {
  return open(url, headers, () => {
    let rest = '';
    return (chunk, receivedAt) => {
      const text = rest + chunk.toString('utf8');
      const end = text.lastIndexOf('\n\n');
      if (end < 0) {
        rest = text;
        return;
      }
      rest = text.slice(end + 2);
      onFrames(text.slice(0, end + 2), receivedAt);
    };
  });
}

function open(url, headers, handler) {
  let resolveOpened;
  let rejectOpened;
  const opened = new Promise((resolve, reject) => {
    resolveOpened = resolve;
    rejectOpened = reject;
  });
  let resolveEnded;
  const ended = new Promise((resolve) => {
    resolveEnded = resolve;
  });
  const req = request(url, { headers: { ...headers, accept: 'text/event-stream' }, agent: false }, (res) => {
    if (res.statusCode !== 200) {
      rejectOpened(new Error(`${url}: ${res.statusCode}`));
      res.resume();
      return;
    }
    resolveOpened();
    const onChunk = handler();
    res.on('data', (chunk) => onChunk(chunk, nowMs()));
    res.once('close', () => resolveEnded());
  });
  req.once('error', (err) => {
    rejectOpened(err);
    resolveEnded();
  });
  req.end();
  return { opened, ended, close: () => req.destroy() };
}
