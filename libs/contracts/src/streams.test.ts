import { describe, expect, it } from 'vitest';
import { DOMAIN_STREAM, RUN_JOBS_STREAM, allStreams, runEventsStream } from './streams.js';

describe('streams', () => {
  it('define RUN_EVENTS with limits retention, direct gets, atomic batches, live republish and the given max age', () => {
    expect(runEventsStream({ maxAgeMs: 86_400_000 })).toEqual({
      name: 'RUN_EVENTS',
      description: expect.any(String),
      subjects: ['run.events.>'],
      retention: 'limits',
      storage: 'file',
      max_age_ms: 86_400_000,
      allow_direct: true,
      allow_atomic: true,
      republish: { src: 'run.events.>', dest: 'run.live.>' },
      metadata: { threadwork_run_event_shards: '1' },
    });
  });

  it.each([-1, 1.5, Number.NaN])('reject a RUN_EVENTS max age of %d', (maxAgeMs) => {
    expect(() => runEventsStream({ maxAgeMs })).toThrow(RangeError);
  });

  it('define RUN_JOBS as a work queue and DOMAIN with limits', () => {
    expect(RUN_JOBS_STREAM).toMatchObject({
      name: 'RUN_JOBS',
      subjects: ['run.jobs.>'],
      retention: 'workqueue',
      storage: 'file',
    });
    expect(DOMAIN_STREAM).toMatchObject({ name: 'DOMAIN', subjects: ['evt.>'], retention: 'limits', storage: 'file' });
  });

  it('list every stream once, with subjects that do not overlap', () => {
    const streams = allStreams({ runEventsMaxAgeMs: 0 });
    expect(streams.map((s) => s.name)).toEqual(['RUN_EVENTS', 'RUN_JOBS', 'DOMAIN']);
    const prefixes = streams.flatMap((s) => s.subjects.map((subject) => subject.replace(/>$/, '')));
    for (const a of prefixes) {
      for (const b of prefixes) {
        if (a !== b) expect(a.startsWith(b)).toBe(false);
      }
    }
  });
});
