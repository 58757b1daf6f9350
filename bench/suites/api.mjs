// Benchmarks 1–3, the read paths of the public API, each side by side with a baseline in the same
// run: a run read through gateway → NATS → runs → FerretDB against a bare fastify route doing the
// runs service's findOne; the gateway's /healthz against a bare one; and an event page at the
// tail of a long log against the first page.
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

/** Benchmark 3: `runId` has a long log; the tail page starts 100 events before its end. */
export async function eventPagesBenchmark(stack, { runId, ...opts }) {
  const LIMIT = 100;
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
  const [tailResult, headResult] = await compareLoad(
    [
      { url: `${stack.base}${path(tailFrom)}`, headers: stack.headers },
      { url: `${stack.base}${path(1)}`, headers: stack.headers },
    ],
    { pids: stack.processIds(), ...opts },
  );
  return { tailFrom, tail: tailResult, head: headResult };
}
