// Benchmarks 1–3, the read paths of the public API, each side by side with a baseline in the same
// run: a run read through gateway → NATS → runs → FerretDB against a bare fastify route doing the
// runs service's findOne; the gateway's /healthz against a bare one; and an event page at the
// tail of a long log against the first page, and each against a raw JetStream batch direct get of
// the same 100 events.
import { STREAM_NAMES, subjects } from '@threadwork/contracts';
import { compareLoad } from '../lib/load.mjs';
import { sampleMemory } from '../lib/proc.mjs';
import { api } from '../lib/stack.mjs';

/** Fails early with the body when a path does not answer as expected before it is loaded. */
async function probe(url, headers) {
  const res = await fetch(url, { headers });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/**
 * Benchmark 1, with the memory of every process of the stack sampled meanwhile (the peaks are
 * returned too: our side and the baseline alternate, and the baseline adds nothing to our services).
 */
export async function runReadBenchmark(stack, { runId, ...opts }) {
  const ours = { url: `${stack.base}/v1/runs/${runId}`, headers: stack.headers };
  const baseline = { url: `${stack.baselineBase}/runs/${runId}` };
  await probe(ours.url, ours.headers);
  await probe(baseline.url, {});
  const pids = stack.processIds();
  const sampler = sampleMemory(pids);
  const [oursResult, baselineResult] = await compareLoad([ours, baseline], { pids, ...opts });
  return { ours: oursResult, baseline: baselineResult, memoryUnderLoad: sampler.stop() };
}

/** Benchmark 2. */
export async function healthBenchmark(stack, opts) {
  const [ours, baseline] = await compareLoad(
    [{ url: `${stack.base}/healthz` }, { url: `${stack.baselineBase}/healthz` }],
    {
      pids: stack.processIds(),
      ...opts,
    },
  );
  return { ours, baseline };
}

const LIMIT = 100;

/**
 * The floor under an event page: one batch direct get of the page's events from RUN_EVENTS by this
 * process's own NATS connection, every message taken (its payload not parsed). Throws unless it
 * got exactly the page's events.
 */
export function rawPage(stack, runId, from, lastSeq) {
  return async () => {
    const batch = await stack.jsm.direct.getBatch(STREAM_NAMES.runEvents, {
      seq: from,
      next_by_subj: subjects.runEvents(runId),
      batch: LIMIT,
    });
    let count = 0;
    let bytes = 0;
    let last = 0;
    for await (const m of batch) {
      count += 1;
      bytes += m.data.length;
      last = m.seq;
    }
    if (count !== LIMIT || bytes === 0 || (lastSeq !== undefined && last !== lastSeq)) {
      throw new Error(`raw page from ${from}: ${count} events, the last ${last}`);
    }
  };
}

/**
 * Benchmark 3: `runId` has a long log; the tail page starts 100 events before its end. Each page
 * through the API, and the same page by a raw batch direct get, alternating in rounds.
 */
export async function eventPagesBenchmark(stack, { runId, ...opts }) {
  const path = (from) => `/v1/runs/${runId}/events?from=${from}&limit=${LIMIT}`;
  const last = await stack.jsm.streams.getMessage(STREAM_NAMES.runEvents, {
    last_by_subj: subjects.runEvents(runId),
  });
  // The run's events were appended back to back, so its last 100 have consecutive sequences.
  const tailFrom = last.seq - (LIMIT - 1);
  const head = await api(stack, 'GET', path(1));
  const tail = await api(stack, 'GET', path(tailFrom));
  if (head.events.length !== LIMIT || tail.events.length !== LIMIT || tail.events.at(-1).sequence !== last.seq) {
    throw new Error(`unexpected pages: head ${head.events.length} events, tail ${tail.events.length} events`);
  }
  const headLast = head.events.at(-1).sequence;
  await rawPage(stack, runId, tailFrom, last.seq)();
  await rawPage(stack, runId, 1, headLast)();
  const [tailResult, headResult, rawTail, rawHead] = await compareLoad(
    [
      { url: `${stack.base}${path(tailFrom)}`, headers: stack.headers },
      { url: `${stack.base}${path(1)}`, headers: stack.headers },
      { op: rawPage(stack, runId, tailFrom, last.seq) },
      { op: rawPage(stack, runId, 1, headLast) },
    ],
    { pids: stack.processIds(), ...opts },
  );
  return { tailFrom, tail: tailResult, head: headResult, rawTail, rawHead };
}
