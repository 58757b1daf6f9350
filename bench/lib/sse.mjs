// Minimal Server-Sent Events clients, enough to follow run event streams: one connection per
// follower (no agent pooling), every read handed over with the time its bytes arrived, taken before
// any parsing. `follow` goes through node:http and the tests' decoder (eventsource-parser);
// `followRaw`, for thousands of followers at once, is a bare socket.
import { request } from 'node:http';
import { connect } from 'node:net';
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
  const opened = Promise.withResolvers();
  const ended = Promise.withResolvers();
  const decoder = new SseDecoder();
  const req = request(url, { headers: { ...headers, accept: 'text/event-stream' }, agent: false }, (res) => {
    if (res.statusCode !== 200) {
      opened.reject(new Error(`${url}: ${res.statusCode}`));
      res.resume();
      return;
    }
    opened.resolve();
    res.on('data', (chunk) => {
      const receivedAt = nowMs();
      for (const { event, data } of decoder.push(chunk)) onFrame({ event: event ?? 'message', data }, receivedAt);
    });
    res.once('close', () => ended.resolve());
  });
  req.once('error', (err) => {
    opened.reject(err);
    ended.resolve();
  });
  req.end();
  return { opened: opened.promise, ended: ended.promise, close: () => req.destroy() };
}

/**
 * As `follow`, but for many followers in this process, whose own work per delivery is taken from
 * the servers' cores (they share the machine): a bare TCP socket speaking HTTP/1.1, no HTTP client
 * and no parsing beyond the response's status line. `onBytes(chunk, receivedAt)` gets each read as
 * it came (body bytes only; chunked transfer framing and frames cut across reads included), and
 * the caller finds in it what it needs.
 */
export function followRaw(url, headers, onBytes) {
  const { hostname, port, pathname, search } = new URL(url);
  const opened = Promise.withResolvers();
  const ended = Promise.withResolvers();
  const socket = connect({ host: hostname, port: Number(port), noDelay: true });
  const lines = [`GET ${pathname}${search} HTTP/1.1`, `host: ${hostname}:${port}`, 'accept: text/event-stream'];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  let head = null;
  const onHead = (chunk) => {
    head = head ? Buffer.concat([head, chunk]) : chunk;
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    const status = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
    if (!/^HTTP\/1\.1 200 /.test(status)) {
      opened.reject(new Error(`${url}: ${status}`));
      socket.destroy();
      return;
    }
    const body = head.subarray(end + 4);
    head = null;
    socket.off('data', onHead);
    socket.on('data', (bytes) => onBytes(bytes, nowMs()));
    opened.resolve();
    if (body.length > 0) onBytes(body, nowMs());
  };
  socket.on('data', onHead);
  socket.once('error', (err) => opened.reject(err));
  socket.once('close', () => {
    opened.reject(new Error(`${url}: closed before the response began`));
    ended.resolve();
  });
  return { opened: opened.promise, ended: ended.promise, close: () => socket.destroy() };
}
