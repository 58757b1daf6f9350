import { describe, expect, it } from 'vitest';
import { SERVICES, SubjectTokenError, subjectToken, subjects } from './subjects.js';

describe('subjects', () => {
  it('build the documented subjects', () => {
    expect(subjects.runEvents('run_1')).toBe('run.events.run_1');
    expect(subjects.runJobs('claude-code')).toBe('run.jobs.claude-code');
    expect(subjects.runSignal('run_1')).toBe('run.signal.run_1');
    expect(subjects.domain('runs', 'run', 'terminal')).toBe('evt.runs.run.terminal');
    expect(subjects.runEventsAll).toBe('run.events.>');
    expect(subjects.runJobsAll).toBe('run.jobs.>');
    expect(subjects.domainAll).toBe('evt.>');
  });

  it.each(['', 'a.b', '*', '>', 'a b', 'a\tb', 'a\nb', 'a\u0000b', 'run*', 'x>'])('reject the token %j', (token) => {
    expect(() => subjectToken(token)).toThrow(SubjectTokenError);
    expect(() => subjects.runEvents(token)).toThrow(SubjectTokenError);
    expect(() => subjects.runJobs(token)).toThrow(SubjectTokenError);
    expect(() => subjects.runSignal(token)).toThrow(SubjectTokenError);
    expect(() => subjects.domain('runs', token, 'terminal')).toThrow(SubjectTokenError);
  });

  it('name the offending part in the error', () => {
    expect(() => subjects.domain('runs', 'run', 'a.b')).toThrow(/verb/);
  });

  it('accept ids with dashes, underscores and other printable characters', () => {
    expect(subjectToken('01J9Z-abc_DEF:1')).toBe('01J9Z-abc_DEF:1');
  });
});

describe('SERVICES', () => {
  it('prefix every endpoint subject with its service name, and no two endpoints share one', () => {
    const all: string[] = [];
    for (const [key, service] of Object.entries(SERVICES)) {
      expect(service.name).toBe(key);
      for (const subject of Object.values(service.subjects)) {
        expect(subject.startsWith(`${service.name}.`)).toBe(true);
        all.push(subject);
      }
    }
    expect(new Set(all).size).toBe(all.length);
  });

  it('keep endpoint subjects clear of the stream subjects', () => {
    for (const service of Object.values(SERVICES)) {
      for (const subject of Object.values(service.subjects)) {
        expect(subject).not.toMatch(/^(run|evt)\./);
      }
    }
  });
});
