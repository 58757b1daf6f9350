// A minimal Server-Sent Events client over node:http, enough to follow run event streams: one
// connection per follower (no agent pooling), every `data:` line handed over with the time its
// bytes arrived, before any parsing.
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';

/** Wall-clock milliseconds with sub-millisecond precision, comparable across this process. */
export const nowMs = () => performance.timeOrigin + performance.now();

/**
 * Opens `url` and calls `onFrame({ event, data }, receivedAt)` for each frame that carries data.
 * `opened` resolves once the response headers are in (rejects on a non-200), `ended` when the
 * server closes the stream; `close()` ends it from our side.
 */
export function follow(url, headers, onFrame) {
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
    res.setEncoding('utf8');
    let buffered = '';
    res.on('data', (chunk) => {
      const receivedAt = nowMs();
      buffered += chunk;
      const frames = buffered.split('\n\n');
      buffered = frames.pop() ?? '';
      for (const frame of frames) {
        let event = 'message';
        let data;
        for (const line of frame.split('\n')) {
          if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data = line.slice(6);
        }
        if (data !== undefined) onFrame({ event, data }, receivedAt);
      }
    });
    res.once('close', () => resolveEnded());
  });
  req.once('error', (err) => {
    rejectOpened(err);
    resolveEnded();
  });
  req.end();
  return { opened, ended, close: () => req.destroy() };
}
