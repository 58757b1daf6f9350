import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { consumerDefinitions, DOMAIN_INTERESTS } from '../consumers.js';
import { defineEvent } from '../rpc.js';
import { DOMAIN_STREAM } from '../streams.js';
import { subjects } from '../subjects.js';
import { domainEvents, RunStatusEvent, SandboxStatusEvent } from './domain-events.js';

describe('DOMAIN events', () => {
  it('defineEvent pairs a subject with the schema of its payload', () => {
    const schema = z.object({ id: z.string() });
    expect(defineEvent('evt.a.b.c', schema)).toEqual({ subject: 'evt.a.b.c', schema });
  });

  it('each has its own subject on the DOMAIN stream, `evt.<service>.<entity>.<verb>`', () => {
    const all = Object.values(domainEvents);
    for (const def of all) {
      const [evt, service, entity, verb, ...rest] = def.subject.split('.');
      expect([evt, rest]).toEqual(['evt', []]);
      expect(def.subject).toBe(subjects.domain(service!, entity!, verb!));
    }
    expect(DOMAIN_STREAM.subjects).toEqual(['evt.>']);
    expect(new Set(all.map((def) => def.subject)).size).toBe(all.length);
    expect(domainEvents.runStatus.schema).toBe(RunStatusEvent);
    expect(domainEvents.sandboxStatus.schema).toBe(SandboxStatusEvent);
  });

  it('give each DOMAIN consumer the subjects of the events its service takes', () => {
    const defs = consumerDefinitions({ harnesses: [], jobAckWaitMs: 1_000, jobMaxDeliver: 1 });
    for (const [durable, interests] of Object.entries(DOMAIN_INTERESTS)) {
      const def = defs.find((d) => d.durable === durable);
      expect(def?.stream).toBe(DOMAIN_STREAM.name);
      expect(def?.filterSubjects).toEqual(interests.map((event) => event.subject));
    }
    expect(DOMAIN_INTERESTS.review.map((event) => event.subject)).toEqual([
      'evt.runner.candidate.produced',
      'evt.runner.candidate.failed',
    ]);
  });
});
