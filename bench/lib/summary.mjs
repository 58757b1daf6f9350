// The benchmark run's report: Markdown tables of each benchmark next to its baseline, with where
// the CPU went and what each process held in memory.
import { mib } from './proc.mjs';
import { int, ms, ratio, summaryRow, SUMMARY_HEADER, table } from './report.mjs';
import { eventScaleRows, eventScaleTables } from '../suites/event-scale.mjs';
import { harnessSummaryRows, harnessTables } from './summary-harnesses.mjs';

const out = (line = '') => process.stdout.write(`${line}\n`);

/** `ferretdb 1.20, gateway 0.45, …`: where the CPU went, largest first, negligible ones left out. */
function cpuBreakdown(perUnit) {
  return [...perUnit]
    .filter(([, value]) => value !== null && value >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([name, value]) => `${name} ${value.toFixed(2)}`)
    .join(', ');
}

/** Prints the report of `results`, run with `opts` (and `profile`d into `profileDir`). */
export function report(results, { opts, profile, profileDir }) {
  const rows = [];
  const details = [];
  const reqs = (r) => `${int(r.rps)} req/s`;
  const latencyRow = (name, side, r) => [
    name,
    side,
    int(r.rps),
    ms(r.meanMs),
    int(r.p50),
    int(r.p99),
    cpuBreakdown(r.cpuMsPerRequest),
  ];

  const read = results['run-read'];
  if (read) {
    const value = read.ours.rps / read.baseline.rps;
    rows.push(
      summaryRow(
        1,
        'GET /v1/runs/{id} (gateway → NATS → runs → FerretDB) vs bare fastify findOne',
        reqs(read.ours),
        reqs(read.baseline),
        value,
        { text: '≥ 0.70×', met: value >= 0.7 },
      ),
    );
    details.push(
      latencyRow('GET /v1/runs/{id}', 'ours', read.ours),
      latencyRow('GET /v1/runs/{id}', 'baseline', read.baseline),
    );
  }
  const health = results.healthz;
  if (health) {
    const value = health.ours.rps / health.baseline.rps;
    rows.push(
      summaryRow(2, 'GET /healthz: gateway vs bare fastify', reqs(health.ours), reqs(health.baseline), value, {
        text: '≥ 0.80×',
        met: value >= 0.8,
      }),
    );
    details.push(
      latencyRow('GET /healthz', 'ours', health.ours),
      latencyRow('GET /healthz', 'baseline', health.baseline),
    );
  }
  const pages = results['event-pages'];
  if (pages) {
    const value = pages.tail.meanMs / pages.head.meanMs;
    rows.push(
      summaryRow(
        3,
        `events page (limit 100) at the tail of a ${int(results.seed.events)}-event run vs the first page, mean latency`,
        `${ms(pages.tail.meanMs)} ms`,
        `${ms(pages.head.meanMs)} ms`,
        value,
        { text: '≤ 1.50×', met: value <= 1.5 },
      ),
    );
    // Pages per second through the API against raw batch direct gets of the same 100 events.
    for (const [label, api, raw] of [
      [`tail (from ${int(pages.tailFrom)})`, pages.tail, pages.rawTail],
      ['head (from 1)', pages.head, pages.rawHead],
    ]) {
      const throughput = api.rps / raw.rps;
      rows.push(
        summaryRow(
          3,
          `events page of 100, ${label}: GET /v1/runs/{id}/events vs a raw JetStream batch direct get of the same 100 events, pages/s (throughput ratio)`,
          `${int(api.rps)} pages/s`,
          `${int(raw.rps)} pages/s`,
          throughput,
          { text: '≥ 0.30×', met: throughput >= 0.3 },
        ),
      );
    }
    details.push(
      latencyRow('events page', `tail (from ${pages.tailFrom})`, pages.tail),
      latencyRow('events page', 'head (from 1)', pages.head),
      latencyRow('raw batch direct get', `tail (from ${pages.tailFrom})`, pages.rawTail),
      latencyRow('raw batch direct get', 'head (from 1)', pages.rawHead),
    );
  }
  const append = results.append;
  if (append) {
    const value = append.ours.perSecond / append.baseline.perSecond;
    rows.push(
      summaryRow(
        4,
        `append ${int(append.events)} events: runner's EventSink → runs.append vs the same batches of 100 by pipelined js.publish (acks awaited together)`,
        `${int(append.ours.perSecond)} events/s`,
        `${int(append.baseline.perSecond)} events/s`,
        value,
        { text: '≥ 0.50×', met: value >= 0.5 },
      ),
    );
  }
  const followers = results.followers;
  if (followers) {
    const { ours, baseline } = followers;
    const spread = followers.gateways > 1 ? ` over ${followers.gateways} gateway replicas` : '';
    const name = `${int(ours.followers)} SSE followers of one run${spread}, ${ms(ours.offeredPerSecond)} events/s appended`;
    rows.push(
      summaryRow(5, `${name}: p99 delivery latency`, `${ms(ours.p99)} ms`, `${ms(baseline.p99)} ms`, null, {
        text: 'p99 < 100 ms, none lost',
        met: ours.p99 !== null && ours.p99 < 100 && ours.lost === 0,
      }),
      summaryRow(
        5,
        `${name}: deliveries/s`,
        int(ours.deliveredPerSecond),
        int(baseline.deliveredPerSecond),
        null,
        null,
      ),
    );
  }
  const jailed = results.jail;
  if (jailed) {
    for (const [kind, label] of [
      ['cold', 'new thread'],
      ['warm', 'follow-up in a warm sandbox'],
    ]) {
      const value = jailed.jailed[kind].completedMs / jailed.bare[kind].completedMs;
      rows.push(
        summaryRow(
          8,
          `trivial turn, ${label} → completed: jailed vs no jail, medians of ${jailed.jailed[kind].samples}`,
          `${int(jailed.jailed[kind].completedMs)} ms`,
          `${int(jailed.bare[kind].completedMs)} ms`,
          value,
          { text: '≤ 1.25×', met: value <= 1.25 },
        ),
      );
    }
  }
  const alone = results['harness-alone'];
  if (alone) {
    for (const [kind, label, limit] of [
      ['cold', 'new thread (POST /v1/threads) vs spawn of Codex alone', 1.0],
      ['warm', 'follow-up (POST /v1/threads/{id}/messages) vs a second turn/start to Codex alone', 1.2],
    ]) {
      const value = alone.ours[kind].firstEventMs / alone.alone[kind].firstEventMs;
      rows.push(
        summaryRow(
          9,
          `trivial Codex turn, ${label} → first harness event, medians of ${alone.ours[kind].samples}`,
          `${int(alone.ours[kind].firstEventMs)} ms`,
          `${int(alone.alone[kind].firstEventMs)} ms`,
          value,
          { text: `≤ ${limit.toFixed(1)}×`, met: value <= limit },
        ),
      );
    }
  }
  const throughput = results.throughput;
  if (throughput) {
    const value = throughput.ours.perSecond / throughput.alone.perSecond;
    rows.push(
      summaryRow(
        10,
        `trivial runs end to end (new thread → completed), ${throughput.concurrency} at a time, ${throughput.runners} runners vs Codex alone (spawn → turn completed → stop), runs/s`,
        `${throughput.ours.perSecond.toFixed(2)} runs/s`,
        `${throughput.alone.perSecond.toFixed(2)} runs/s`,
        value,
        null,
      ),
    );
  }
  const turns = results.turns;
  const sandboxes = results.sandboxes;
  rows.push(...harnessSummaryRows(turns, sandboxes));
  rows.push(...eventScaleRows(results['event-scale']));

  out(table(SUMMARY_HEADER, rows, 2));
  if (details.length) {
    out();
    out(
      `HTTP load: autocannon, ${opts.connections} connections, ${opts.seconds} s per side in ${opts.rounds} alternating rounds after a 2 s warm-up; ` +
        'mean = connections / throughput; p50 and p99 are medians over the rounds; CPU from /proc/<pid>/stat.',
    );
    out();
    out(table(['path', 'side', 'req/s', 'mean ms', 'p50 ms', 'p99 ms', 'CPU ms per request, by process'], details, 2));
  }
  if (followers) {
    out();
    const how = followers.together
      ? `stay connected; appends alternate between the sides in ${opts.rounds} rounds`
      : `are connected one side after the other (this process may not hold both sides' sockets); each side's appends in ${opts.rounds} rounds`;
    out(
      `SSE: ${int(followers.ours.followers)} followers per side (ours over ${followers.gateways} gateway replica(s)) ${how}, ` +
        'after an uncounted 2 s warm-up round each; appends as the runner sends them (a batch at most every 50 ms, one at a time); ' +
        `latency = arrival at the follower − sending of the append; connecting took ${ms(followers.ours.connectSeconds)} s (ours) ` +
        `and ${ms(followers.baseline.connectSeconds)} s (baseline); CPU from /proc/<pid>/stat.`,
    );
    out();
    const side = (label, r) => [
      label,
      int(r.events),
      int(r.delivered),
      int(r.lost),
      int(r.deliveredPerSecond),
      ms(r.p50),
      ms(r.p99),
      ms(r.max),
      cpuBreakdown(r.cpuMsPerThousandDeliveries),
    ];
    out(
      table(
        [
          'SSE followers',
          'events',
          'deliveries',
          'lost',
          'deliveries/s',
          'p50 ms',
          'p99 ms',
          'max ms',
          'CPU ms per 1,000 deliveries, by process',
        ],
        [
          side('ours: gateway stream', followers.ours),
          side('baseline: bare fastify forwarding run.live', followers.baseline),
        ],
      ),
    );
  }
  const jail = results.jail;
  if (jail) {
    out();
    const ratio = (a, b) => (b > 0 ? `${(a / b).toFixed(2)}×` : '—');
    const row = (label, kind) => [
      label,
      jail.jailed[kind].samples,
      int(jail.jailed[kind].completedMs),
      int(jail.bare[kind].completedMs),
      ratio(jail.jailed[kind].completedMs, jail.bare[kind].completedMs),
      int(jail.jailed[kind].firstEventMs),
      int(jail.bare[kind].firstEventMs),
    ];
    out(
      table(
        [
          'trivial turn (median)',
          'samples',
          'jailed → completed ms',
          'no jail → completed ms',
          'jailed / no jail',
          'jailed → first event ms',
          'no jail → first event ms',
        ],
        [row('cold: new thread', 'cold'), row('warm: follow-up message', 'warm')],
      ),
    );
  }
  if (alone) {
    out();
    const row = (label, kind, mark) => [
      label,
      alone.ours[kind].samples,
      int(alone.ours[kind][mark]),
      int(alone.alone[kind][mark]),
      ratio(alone.ours[kind][mark] / alone.alone[kind][mark]),
    ];
    out(
      table(
        ['trivial Codex turn (median)', 'samples', 'through Threadwork ms', 'Codex alone ms', 'ratio'],
        [
          ['cold → sandbox.ready (runner)', alone.ours.cold.samples, int(alone.ours.cold.sandboxReadyMs), '—', '—'],
          row('cold → first harness event', 'cold', 'firstEventMs'),
          row('cold → completed', 'cold', 'completedMs'),
          ['warm → sandbox.ready (runner)', alone.ours.warm.samples, int(alone.ours.warm.sandboxReadyMs), '—', '—'],
          row('warm → first harness event', 'warm', 'firstEventMs'),
          row('warm → completed', 'warm', 'completedMs'),
        ],
      ),
    );
  }
  if (throughput) {
    out();
    out(
      table(
        ['trivial runs', 'concurrency', 'runs', 'seconds', 'runs/s'],
        [
          [
            'through Threadwork',
            throughput.concurrency,
            throughput.ours.runs,
            ms(throughput.ours.seconds),
            throughput.ours.perSecond.toFixed(2),
          ],
          [
            'Codex alone',
            throughput.concurrency,
            throughput.alone.runs,
            ms(throughput.alone.seconds),
            throughput.alone.perSecond.toFixed(2),
          ],
        ],
      ),
    );
  }
  for (const text of harnessTables(turns, null)) {
    out();
    out(text);
  }
  for (const text of eventScaleTables(results['event-scale'])) {
    out();
    out(text);
  }

  out();
  const underLoad = read?.memoryUnderLoad;
  out(
    table(
      [
        'process',
        'idle RSS MiB',
        'idle RssAnon MiB',
        'peak RSS under benchmark 1 MiB',
        'peak RssAnon under benchmark 1 MiB',
      ],
      Object.entries(results.memoryIdle).map(([name, idle]) => [
        name,
        mib(idle?.rss),
        mib(idle?.anon),
        mib(underLoad?.get(name)?.rss),
        mib(underLoad?.get(name)?.anon),
      ]),
    ),
  );
  for (const text of harnessTables(null, sandboxes)) {
    out();
    out(text);
  }
  if (results.seed)
    out(`\nSeeding: ${int(results.seed.events)} events appended at ${int(results.seed.perSecond)} events/s.`);
  if (profile.length) out(`\nCPU profiles of ${profile.join(', ')} in ${profileDir}`);
}
