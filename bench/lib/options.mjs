// The benchmark run's options: which benchmarks, at which size (full or --quick), and which
// processes to profile.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SERVICES } from '../../deploy/local/launcher.mjs';

export const BENCHMARKS = [
  'run-read',
  'healthz',
  'event-pages',
  'append',
  'followers',
  'sandboxes',
  'turns',
  'jail',
  'harness-alone',
  'throughput',
  'event-scale',
];

const FULL = {
  seconds: 10,
  rounds: 5,
  connections: 10,
  events: 100_000,
  'append-events': 20_000,
  // 10,000 followers at 2 events/s: 20,000 deliveries/s, as 1,000 at 20.
  followers: 10_000,
  'sse-rate': 2,
  'sse-seconds': 10,
  gateways: 2,
  turns: 20,
  sandboxes: 4,
  'throughput-runs': 24,
  concurrency: 4,
  runners: 2,
  // Benchmark 11 (suites/event-scale.mjs): runs in the log, events per run, runs live at once, shards,
  // pages read per side, runs archived to FerretDB.
  'scale-runs': 300_000,
  'scale-events': 10,
  'scale-live': 1_000,
  'scale-shards': 16,
  'scale-reads': 1_000,
  'scale-archived': 5_000,
};
const QUICK = {
  ...FULL,
  seconds: 3,
  rounds: 3,
  events: 10_000,
  'append-events': 5_000,
  followers: 1_000,
  'sse-rate': 20,
  'sse-seconds': 5,
  turns: 5,
  sandboxes: 2,
  'throughput-runs': 8,
  concurrency: 2,
  'scale-runs': 30_000,
  'scale-reads': 300,
  'scale-archived': 2_000,
};

/** The command line's options, checked: a bad value stops the run before anything starts. */
export function parseOptions() {
  const { values: args } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      profile: { type: 'string' },
      'profile-dir': { type: 'string' },
      json: { type: 'string' },
      ...Object.fromEntries(Object.keys(FULL).map((name) => [name, { type: 'string' }])),
    },
  });
  const opts = Object.fromEntries(
    Object.entries(args.quick ? QUICK : FULL).map(([name, value]) => [name, Number(args[name] ?? value)]),
  );
  for (const [name, value] of Object.entries(opts)) {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
  }
  const selected = new Set(args.only ? args.only.split(',') : BENCHMARKS);
  for (const name of selected) if (!BENCHMARKS.includes(name)) throw new Error(`unknown benchmark ${name}`);
  const profile = args.profile ? args.profile.split(',') : [];
  for (const name of profile) {
    if (!SERVICES.includes(name) && name !== 'baseline') throw new Error(`cannot profile ${name}`);
  }
  const profileDir = profile.length ? (args['profile-dir'] ?? mkdtempSync(join(tmpdir(), 'threadwork-profiles-'))) : '';
  return { args, opts, selected, profile, profileDir };
}
