import { describe, expect, it } from 'vitest';
import {
  MAX_RUN_EVENT_SHARDS,
  RUN_EVENT_SHARDS_METADATA,
  everyRunEventStreamName,
  runEventLayout,
  runEventShard,
  runEventShardCount,
} from './run-event-shards.js';
import { allStreams, runEventsStreams } from './streams.js';
import { SubjectTokenError } from './subjects.js';

describe('run event shards', () => {
  it('keep the single-stream layout with one shard: RUN_EVENTS, run.events.<runId>', () => {
    const layout = runEventLayout(1);
    expect(layout.streams).toEqual(['RUN_EVENTS']);
    expect(layout.streamOf('run_abc')).toBe('RUN_EVENTS');
    expect(layout.subjectOf('run_abc')).toBe('run.events.run_abc');
  });

  it('map a run id to the same shard every time, by FNV-1a of its bytes (fixed values: the hash must never change)', () => {
    // FNV-1a 32 of "" is 0x811c9dc5, of "a" 0xe40c292c, of "run_1" 0x4fd2871a.
    expect(runEventShard('a', 16)).toBe(0xe40c292c % 16);
    expect(runEventShard('run_1', 16)).toBe(0x4fd2871a % 16);
    expect(runEventShard('run_1', 7)).toBe(0x4fd2871a % 7);
    const layout = runEventLayout(16);
    const shard = layout.shardOf('run_1');
    expect(layout.streamOf('run_1')).toBe(`RUN_EVENTS_${shard}`);
    expect(layout.subjectOf('run_1')).toBe(`run.events.${shard}.run_1`);
  });

  it('spread run ids over every shard', () => {
    const counts = new Array<number>(16).fill(0);
    for (let i = 0; i < 16_000; i++) counts[runEventShard(`run_${i.toString(36)}x`, 16)]!++;
    for (const count of counts) expect(count).toBeGreaterThan(800);
  });

  it('refuse a run id that is not one subject token, and shard counts out of range', () => {
    expect(() => runEventLayout(4).subjectOf('run.x')).toThrow(SubjectTokenError);
    expect(() => runEventLayout(4).streamOf('run.>')).toThrow(SubjectTokenError);
    for (const bad of [0, -1, 1.5, MAX_RUN_EVENT_SHARDS + 1]) expect(() => runEventLayout(bad)).toThrow(RangeError);
    expect(runEventShardCount.safeParse('0').success).toBe(false);
    expect(runEventShardCount.safeParse(String(MAX_RUN_EVENT_SHARDS + 1)).success).toBe(false);
    expect(runEventShardCount.parse('16')).toBe(16);
  });

  it('define one stream per shard with disjoint subjects, each republishing to run.live.<runId> and recording the count', () => {
    const streams = runEventsStreams({ maxAgeMs: 1000, shards: 4 });
    expect(streams.map((s) => s.name)).toEqual(['RUN_EVENTS_0', 'RUN_EVENTS_1', 'RUN_EVENTS_2', 'RUN_EVENTS_3']);
    expect(streams[2]).toMatchObject({
      subjects: ['run.events.2.*'],
      allow_direct: true,
      max_age_ms: 1000,
      republish: { src: 'run.events.2.*', dest: 'run.live.{{wildcard(1)}}' },
      metadata: { [RUN_EVENT_SHARDS_METADATA]: '4' },
    });
    expect(allStreams({ runEventsMaxAgeMs: 0, runEventShards: 4 }).map((s) => s.name)).toEqual([
      'RUN_EVENTS_0',
      'RUN_EVENTS_1',
      'RUN_EVENTS_2',
      'RUN_EVENTS_3',
      'RUN_JOBS',
      'DOMAIN',
    ]);
    const layout = runEventLayout(4);
    for (const runId of ['run_a', 'run_b', 'run_c', 'run_d', 'run_e']) {
      const stream = streams.find((s) => s.name === layout.streamOf(runId))!;
      expect(layout.subjectOf(runId).startsWith(stream.subjects[0]!.replace('*', ''))).toBe(true);
    }
  });

  it('name every stream the grants must cover', () => {
    const names = everyRunEventStreamName();
    expect(names).toHaveLength(MAX_RUN_EVENT_SHARDS + 1);
    for (let n = 1; n <= MAX_RUN_EVENT_SHARDS; n++) {
      for (const name of runEventLayout(n).streams) expect(names).toContain(name);
    }
  });
});
