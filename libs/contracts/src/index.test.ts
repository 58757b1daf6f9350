import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as contracts from './index.js';

const schemas: [string, z.ZodType][] = [];
for (const [name, value] of Object.entries(contracts)) {
  if (value instanceof z.ZodType) schemas.push([name, value]);
}

describe('index', () => {
  it('exports the schemas services rely on', () => {
    const names = schemas.map(([name]) => name);
    for (const name of [
      'Project',
      'WorkList',
      'Thread',
      'ThreadWithRun',
      'Task',
      'TaskWithRun',
      'Run',
      'RunEventPage',
      'MessagePage',
      'ControlSubmission',
      'ProviderConnection',
      'ReviewEvidence',
      'Interaction',
      'AnswerRequest',
      'AnswerResult',
      'CreateTaskBody',
      'CreateThreadBody',
      'ErrorBody',
      'RunEventChunk',
    ]) {
      expect(names).toContain(name);
    }
  });

  // The gateway generates its OpenAPI document from these schemas; a transform or a custom type
  // would make that fail at start-up, so catch it here.
  it.each(schemas)('%s renders as JSON Schema for requests and responses', (_name, schema) => {
    expect(() => z.toJSONSchema(schema, { io: 'input' })).not.toThrow();
    expect(() => z.toJSONSchema(schema, { io: 'output' })).not.toThrow();
  });
});
