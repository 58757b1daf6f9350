import { once } from 'node:events';
import {
  firstSequenceFrom,
  IdParam,
  RUN_EVENTS_LIMIT_MAX,
  RunEventPage,
  RunEventsQuery,
  RunEventsStreamQuery,
  isTerminalRunStatus,
  optionalQueryParam,
  rpc,
  type RunEvent,
} from '@threadwork/contracts';
import { toAppError } from '@threadwork/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  SSE_END_FRAME,
  SSE_PING_FRAME,
  isTerminalStatusChunk,
  sseErrorFrame,
  sseEventFrame,
  streamFinished,
  streamStart,
} from '../domain/events.js';
import type { HandlerDeps, RoutePlugin } from './deps.js';
import { readErrors } from './error-responses.js';
import { ownerOf, pathId } from './parse.js';
import { firstLiveMessage, followRunLog, type LogRead } from '../clients/live.js';

/** Tells EventSource how long to wait before reconnecting (it then sends Last-Event-ID). */
const RECONNECT_MS = 3_000;

const StreamHeaders = z.looseObject({
  'last-event-id': optionalQueryParam(z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional()),
});

export const STREAM_DESCRIPTION = [
  'Server-Sent Events of the run log. Starts at `?from=` (0 is the start of the log), else after `Last-Event-ID`, else at the start.',
  'Each event: `id: <sequence>`, `event: <chunk.type>` (`event` when the chunk has no usable type),',
  '`data: {"sequence", "chunk", "created_at"}` — the same object as an element of a Run event page.',
  'Stored events are sent first, then new ones as they are stored. When the run is terminal and every',
  'event has been sent: `event: end` with `data: {}`, and the stream closes. `: ping` comments come every',
  '15 s. If the stream cannot go on (a backing service stops answering, the gateway shuts down) it',
  'sends `event: error` with `data: {"error": {"code", "message"}}` and closes: reconnect with',
  '`Last-Event-ID` to resume without gaps or repeats.',
].join(' ');

/** The run event log: pages (with long-polling) and a Server-Sent Events stream. */
export const eventRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/runs/:id/events',
    {
      schema: {
        summary: "Read a page of a run's events by sequence, optionally long-polling",
        description:
          'Events with `sequence >= from`, in order; `from` 0 or absent reads from the start of the log. With `wait` (seconds, up to 30) and nothing to return yet, the request waits for the next stored event before answering (an empty page when none comes). `terminal` is true when the run is terminal and the page reaches the end of its log.',
        tags: ['runs'],
        params: IdParam,
        querystring: RunEventsQuery,
        response: { 200: RunEventPage, ...readErrors },
      },
    },
    async (request) => {
      const owner_id = ownerOf(request);
      const run_id = pathId(request.params.id);
      const { limit, wait } = request.query;
      const from = firstSequenceFrom(request.query.from);
      const page = () => deps.services.request(rpc.runs.eventsPage, { owner_id, run_id, from, limit });
      if (wait <= 0) return page();

      const leave = deps.followers.enter(owner_id);
      // Subscribe before reading, so an event stored between the read and the wait still wakes us.
      const live = firstLiveMessage(deps.nc, run_id);
      const gone = new AbortController();
      const onGone = () => gone.abort();
      request.raw.socket.once('close', onGone);
      deps.closing.addEventListener('abort', onGone, { once: true });
      // Closing may have begun while this request was being authenticated: no abort event comes then.
      if (deps.closing.aborted) onGone();
      try {
        const first = await page();
        if (first.events.length > 0 || first.terminal || isTerminalRunStatus(first.status)) return first;
        await live.wait(wait * 1000, gone.signal);
        return gone.signal.aborted && !deps.closing.aborted ? first : await page();
      } finally {
        leave();
        live.close();
        request.raw.socket.off('close', onGone);
        deps.closing.removeEventListener('abort', onGone);
      }
    },
  );

  app.get(
    '/v1/runs/:id/events/stream',
    {
      schema: {
        summary: "Follow a run's events as Server-Sent Events",
        description: STREAM_DESCRIPTION,
        tags: ['runs'],
        params: IdParam,
        querystring: RunEventsStreamQuery,
        headers: StreamHeaders,
        response: {
          200: {
            description: 'The event stream (see the operation description for the frames)',
            content: { 'text/event-stream': { schema: z.string() } },
          },
          ...readErrors,
        },
      },
    },
    async (request, reply) => {
      await streamRunEvents(request, reply, deps, {
        runId: pathId(request.params.id),
        ownerId: ownerOf(request),
        start: streamStart(request.query.from, request.headers['last-event-id']),
      });
      return reply;
    },
  );
};

/**
 * Writes stored events from `start`, then new ones as they are stored, until the run is terminal
 * and drained. Everything written is read from the log (the live subject only wakes the run's
 * shared reader, see followRunLog). Order of work: follow the run first, then read the first page,
 * so nothing stored in between is lost; events already sent are skipped by sequence, and a page
 * that starts past the last sequence sent makes us read the gap ourselves. All work runs one step
 * at a time on a chain, so pages never interleave on the wire; a page the run's reader hands over
 * while nothing is on the chain (the common case: a follower that is up to date) is written at
 * once instead, with no step of its own, since one run's pages reach thousands of followers.
 */
async function streamRunEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: HandlerDeps,
  { runId, ownerId, start }: { runId: string; ownerId: string; start: number },
): Promise<void> {
  const page = (from: number) =>
    deps.services.request(rpc.runs.eventsPage, { owner_id: ownerId, run_id: runId, from, limit: RUN_EVENTS_LIMIT_MAX });

  let lastSent = start - 1;
  let sawTerminalChunk = false;
  let closed = false;
  // Live messages that arrive while the first page is read queue up behind it: the chain starts
  // with writing that page, once the response has begun.
  let begin: (first: RunEventPage) => void = () => {};
  const started = new Promise<RunEventPage>((resolve) => {
    begin = resolve;
  });
  // Steps on the chain not yet done, the first page's included: while there are any, what comes
  // next waits its turn behind them.
  let queued = 1;
  const settled = () => {
    queued -= 1;
  };
  let chain: Promise<void> = started.then(writeFirst).catch(fail).finally(settled);
  const enqueue = (step: () => Promise<void>) => {
    queued += 1;
    chain = chain
      .then(() => (closed ? undefined : step()))
      .catch(fail)
      .finally(settled);
  };

  // The page a step on the chain will write, and whether pages came after it meanwhile.
  let waiting: LogRead | null = null;
  let missed = false;

  const leave = deps.followers.enter(ownerId);
  const subscription = followRunLog(
    deps.nc,
    runId,
    ownerId,
    page,
    {
      lastSent: () => lastSent,
      onRead: (read) => {
        if (writeReadNow(read)) return;
        // At most one page waits on the chain: a reader that does not keep up (its socket full)
        // would otherwise hold every page of the run until it drains. Later pages are dropped,
        // and the waiting step reads what they held from the log when its turn comes.
        if (waiting) {
          missed = true;
          return;
        }
        waiting = read;
        enqueue(async () => {
          const next = waiting!;
          const gap = missed;
          waiting = null;
          missed = false;
          await onRead(next);
          if (gap && !closed) await readPages();
        });
      },
      onError: (err) => enqueue(() => Promise.reject(err)),
    },
    request.log,
  );
  // The first read happens before the response starts, so a run that is not the caller's (or a
  // service that is down) is still answered with a JSON error and the right status.
  let first: RunEventPage;
  try {
    first = await page(start);
  } catch (err) {
    closed = true;
    subscription.close();
    leave();
    throw err;
  }

  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    // Tells nginx-style proxies not to buffer the stream.
    'x-accel-buffering': 'no',
  });
  raw.write(`retry: ${RECONNECT_MS}\n\n`);
  const heartbeat = setInterval(() => {
    if (!closed) raw.write(SSE_PING_FRAME);
  }, deps.heartbeatMs);
  const aborted = new AbortController();

  const cleanup = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    subscription.close();
    leave();
    aborted.abort();
    deps.closing.removeEventListener('abort', onClosing);
  };
  const finish = (frame: string) => {
    if (closed) return;
    raw.write(frame);
    cleanup();
    raw.end();
  };
  function onClosing() {
    finish(sseErrorFrame('unavailable', 'the server is shutting down; reconnect to resume'));
  }
  function fail(err: unknown) {
    const appErr = toAppError(err);
    if (appErr.code === 'internal') request.log.error({ err, runId }, 'event stream failed');
    finish(sseErrorFrame(appErr.code, appErr.message));
  }
  raw.once('close', cleanup);
  deps.closing.addEventListener('abort', onClosing, { once: true });
  // Closing may have begun while the first page was read: no abort event comes then.
  if (deps.closing.aborted) onClosing();

  async function write(event: RunEvent): Promise<void> {
    if (closed || event.sequence <= lastSent) return;
    lastSent = event.sequence;
    if (isTerminalStatusChunk(event.chunk)) sawTerminalChunk = true;
    if (!raw.write(sseEventFrame(event))) {
      // A slow reader: wait until the socket takes more (or goes away) before writing on.
      await once(raw, 'drain', { signal: aborted.signal }).catch(() => undefined);
    }
  }

  /** Writes a page; true when the stream is complete. */
  async function writePage(result: RunEventPage): Promise<boolean> {
    for (const event of result.events) await write(event);
    if (streamFinished(result, sawTerminalChunk)) {
      finish(SSE_END_FRAME);
      return true;
    }
    return false;
  }

  /** Reads pages from past the last sequence sent until one comes back empty (or the run is done). */
  async function readPages(): Promise<void> {
    while (!closed) {
      const before = lastSent;
      if (await writePage(await page(lastSent + 1))) return;
      if (lastSent === before) return;
    }
  }

  /**
   * A page read for this run's followers, written at once when nothing is on the chain and it
   * continues what was sent (else false: it goes on the chain). Each frame goes to the socket's
   * buffer whatever it holds; past its high-water mark the chain's next step waits for it to drain,
   * so later pages wait too.
   */
  function writeReadNow({ from, page: read }: LogRead): boolean {
    if (queued > 0 || closed || from > lastSent + 1) return false;
    let full = false;
    for (const event of read.events) {
      if (event.sequence <= lastSent) continue;
      lastSent = event.sequence;
      if (isTerminalStatusChunk(event.chunk)) sawTerminalChunk = true;
      if (!raw.write(sseEventFrame(event))) full = true;
    }
    if (streamFinished(read, sawTerminalChunk)) {
      finish(SSE_END_FRAME);
      return true;
    }
    if (full) enqueue(drained);
    // After the run's final status only stragglers can follow; read them and end.
    if (sawTerminalChunk) enqueue(readPages);
    return true;
  }

  /** Resolves once the socket has taken what it holds (at once if it has), or the stream closed. */
  async function drained(): Promise<void> {
    if (!raw.writableNeedDrain) return;
    await once(raw, 'drain', { signal: aborted.signal }).catch(() => undefined);
  }

  /** A page read for this run's followers: written when it continues what was sent, else read the gap. */
  async function onRead({ from, page: read }: LogRead): Promise<void> {
    if (from > lastSent + 1) return readPages();
    if (await writePage(read)) return;
    // After the run's final status only stragglers can follow; read them and end.
    if (sawTerminalChunk) await readPages();
  }

  async function writeFirst(firstPage: RunEventPage): Promise<void> {
    const before = lastSent;
    if (await writePage(firstPage)) return;
    if (lastSent !== before) await readPages();
  }

  begin(first);
}
