import { randomBytes } from 'node:crypto';
import { RunEventPage, ThreadWithRun } from '@threadwork/contracts';
import { createBareRepo, startOtlpReceiver, waitFor, type OtlpReceiver, type ReceivedSpan } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { startProcessStack, type ProcessStack } from './support/process-stack.js';

// The real services, each its own process with its own OpenTelemetry SDK, export to a receiver
// in this test: one API request must come back as one connected trace across every hop, and the
// operational metrics must be there.

let receiver: OtlpReceiver;
let stack: ProcessStack;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  stack = await startProcessStack({
    THREADWORK_DEMO: '1',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '200',
    OTEL_METRIC_EXPORT_INTERVAL: '1000',
  });
}, 90_000);
afterAll(async () => {
  await stack?.stop();
  stack?.cleanUp();
  await receiver?.stop();
});

describe('OpenTelemetry end to end', () => {
  it(
    'traces one request from the gateway through the services, the database, JetStream and the runner',
    { timeout: 120_000 },
    async () => {
      const key = stack.admin('keys', 'create', '--user', 'otel').stdout.trim().split('\n').at(-1)!;
      createBareRepo(join(stack.dataDir, 'repos'), 'traced');
      const base = `http://127.0.0.1:${stack.port}`;
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const repos = (await (await fetch(`${base}/v1/repohost/repositories`, { headers })).json()) as {
        repositories: { repository_id: number }[];
      };

      // The client starts the trace; everything the request causes must stay in it.
      const traceId = randomBytes(16).toString('hex');
      const res = await fetch(`${base}/v1/threads`, {
        method: 'POST',
        headers: { ...headers, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
        body: JSON.stringify({ repository_id: repos.repositories[0]!.repository_id, prompt: 'Trace me' }),
      });
      expect(res.status).toBe(202);
      const created = ThreadWithRun.parse(await res.json());

      await waitFor(
        'the run to complete',
        async () => {
          const page = RunEventPage.parse(
            await (await fetch(`${base}/v1/runs/${created.run_id}/events?limit=1000`, { headers })).json(),
          );
          return page.terminal ? page : undefined;
        },
        60_000,
      );

      const expected = [
        ['gateway', 'POST /v1/threads'],
        ['gateway', 'request threads.create'],
        ['threads', 'handle threads.create'],
        ['repohost', 'handle repohost.access'],
        ['runs', 'handle runs.admit'],
        ['runs', 'mongodb insert'],
        ['runs', 'publish run.jobs.codex'],
        ['runner', 'consume run.jobs.codex'],
        ['runner', 'prepare sandbox'],
        ['runs', 'handle runs.append'],
        ['runs', 'append run events'],
        // The run's candidate, consumed by review inside the same trace.
        ['review', 'consume evt.runner.candidate.produced'],
      ];
      const inTrace = () => receiver.spans().filter((s) => s.traceId === traceId);
      const missing = () =>
        expected.filter(
          ([service, name]) => !inTrace().some((s) => s.service === `threadwork-${service}` && s.name === name),
        );
      const trace = await waitFor(
        'the whole trace',
        () => (missing().length === 0 ? inTrace() : undefined),
        60_000,
      ).catch((err: Error) => {
        const have = [...new Set(inTrace().map((s) => `${s.service} ${s.name}`))];
        throw new Error(`${err.message}; missing ${JSON.stringify(missing())}; have ${JSON.stringify(have)}`);
      });

      // Connected: every span's parent is in the trace, except the client's own (the root we sent).
      // A parent still open (a consumer's span outlives its first database call) is exported after
      // its children, so wait for the trace to settle.
      const orphans = () => {
        const spans = inTrace();
        const ids = new Set(spans.map((s) => s.spanId));
        return spans
          .filter((s: ReceivedSpan) => s.parentSpanId && !ids.has(s.parentSpanId))
          .map((s) => `${s.service} ${s.name}`);
      };
      await waitFor('a connected trace', () => (orphans().length === 1 ? true : undefined), 30_000).catch(
        () => undefined,
      );
      expect(orphans()).toEqual(['threadwork-gateway POST /v1/threads']);
      expect(new Set(trace.map((s) => s.service))).toEqual(
        new Set([
          'threadwork-gateway',
          'threadwork-threads',
          'threadwork-repohost',
          'threadwork-runs',
          'threadwork-runner',
          'threadwork-review',
        ]),
      );
    },
  );

  it('exports the operational metrics', { timeout: 60_000 }, async () => {
    const wanted: [string, string][] = [
      ['gateway', 'http.server.request.duration'],
      ['gateway', 'threadwork.nats.request.duration'],
      ['runs', 'threadwork.runs.transitions'],
      ['runs', 'threadwork.run.duration'],
      ['runs', 'threadwork.run.events.appended'],
      ['runs', 'threadwork.run_jobs.depth'],
      ['runner', 'threadwork.sandbox.start.duration'],
    ];
    await waitFor('every metric', () => {
      const metrics = receiver.metrics();
      return wanted.every(([service, name]) => metrics.get(`threadwork-${service}`)?.has(name)) ? true : undefined;
    });
  });
});
