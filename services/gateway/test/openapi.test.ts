import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATION_IDS } from '../src/http/operation-ids.js';
import { startHarness, type Harness } from './harness.js';

// Every operation of the public contract (spec section 4), of DESIGN.md section 4 and
// GET /v1/harnesses that a caller authenticates for; the unauthenticated ones are in PUBLIC_OPERATIONS.
const CONTRACT_OPERATIONS = [
  ['get', '/v1/work'],
  ['get', '/v1/repohost/connection'],
  ['get', '/v1/repohost/repositories'],
  ['post', '/v1/repohost/install-session'],
  ['get', '/v1/threads/{id}/review'],
  ['post', '/v1/tasks'],
  ['get', '/v1/tasks'],
  ['get', '/v1/tasks/{id}'],
  ['get', '/v1/tasks/{id}/runs/resumable'],
  ['post', '/v1/threads'],
  ['get', '/v1/threads/{id}'],
  ['post', '/v1/threads/{id}/messages'],
  ['post', '/v1/threads/{id}/queue'],
  ['post', '/v1/threads/{id}/steer'],
  ['post', '/v1/interactions/{id}/answer'],
  ['get', '/v1/runs/{id}'],
  ['post', '/v1/runs/{id}/cancel'],
  ['get', '/v1/runs/{id}/events'],
  ['get', '/v1/runs/{id}/events/stream'],
  ['get', '/v1/threads/{id}/messages'],
  ['get', '/v1/tasks/{id}/messages'],
  ['get', '/v1/threads/{id}/controls'],
  ['get', '/v1/tasks/{id}/controls'],
  ['get', '/v1/interactions/{id}'],
  ['get', '/v1/threads/{id}/interactions'],
  ['get', '/v1/harnesses'],
  ['get', '/v1/session'],
  ['post', '/v1/auth/logout'],
] as const;

// Operations that prove themselves another way (a single-use `state`, a webhook signature, a
// one-time login link).
const PUBLIC_OPERATIONS = [
  ['get', '/v1/repohost/setup', '302'],
  ['post', '/v1/repohost/webhooks', '202'],
  ['get', '/v1/auth/link', '302'],
] as const;

interface Operation {
  operationId?: string;
  summary?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: { in: string; name: string }[];
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: unknown }> }>;
}

describe('OpenAPI document', () => {
  let harness: Harness;
  let paths: Record<string, Record<string, Operation>>;
  let schemas: Record<string, unknown>;
  /** A schema with a component `$ref` replaced by the component it names. */
  const resolve = (schema: unknown) => {
    const ref = (schema as { $ref?: string } | undefined)?.$ref;
    return ref?.startsWith('#/components/schemas/') ? schemas[ref.slice('#/components/schemas/'.length)] : schema;
  };

  beforeAll(async () => {
    harness = await startHarness({ peers: 'none' });
    const res = await harness.app.inject({ url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const document = res.json<{
      paths: Record<string, Record<string, Operation>>;
      components: { schemas: Record<string, unknown> };
    }>();
    paths = document.paths;
    schemas = document.components.schemas;
  });
  afterAll(async () => {
    await harness?.close();
  });

  it.each(CONTRACT_OPERATIONS)('has %s %s with a summary, a tag and error responses', (method, path) => {
    const operation = paths[path]?.[method];
    expect(operation, `${method} ${path}`).toBeDefined();
    expect(operation!.summary).toBeTruthy();
    expect(operation!.tags?.length).toBeGreaterThan(0);
    for (const status of ['400', '401', '404', '429', '500', '503']) {
      expect(operation!.responses[status], `${method} ${path} ${status}`).toBeDefined();
    }
    const success = Object.keys(operation!.responses).filter((s) => s.startsWith('2'));
    expect(success.length).toBeGreaterThan(0);
    if (method === 'post') expect(operation!.responses['413']).toBeDefined();
    if (path.includes('{id}'))
      expect(operation!.parameters?.some((p) => p.in === 'path' && p.name === 'id')).toBe(true);
  });

  it.each(PUBLIC_OPERATIONS)('has public %s %s answering %s, with no security requirement', (method, path, status) => {
    const operation = paths[path]?.[method];
    expect(operation, `${method} ${path}`).toBeDefined();
    expect(operation!.summary).toBeTruthy();
    expect(operation!.tags?.length).toBeGreaterThan(0);
    expect(operation!.security).toEqual([]);
    for (const code of [status, '400', '500', '503'])
      expect(operation!.responses[code], `${path} ${code}`).toBeDefined();
  });

  it('describes bodies, the 401 shape, the empty 204 and the event stream', () => {
    const createTask = paths['/v1/tasks']!.post!;
    expect(resolve(createTask.requestBody?.content['application/json']?.schema)).toMatchObject({
      additionalProperties: false,
      required: expect.arrayContaining(['repository_id', 'prompt']),
    });
    expect(createTask.responses['202']).toBeDefined();
    expect(JSON.stringify(createTask.responses['401'])).toContain('Unauthorized');
    expect(paths['/v1/threads/{id}/steer']!.post!.responses['409']).toBeDefined();

    const resumable = paths['/v1/tasks/{id}/runs/resumable']!.get!;
    expect(resumable.responses['204']?.content).toBeUndefined();
    expect(resumable.responses['200']?.content).toBeDefined();

    const cancel = paths['/v1/runs/{id}/cancel']!.post!;
    expect(Object.keys(cancel.responses)).toEqual(expect.arrayContaining(['200', '202']));

    const stream = paths['/v1/runs/{id}/events/stream']!.get!;
    expect(Object.keys(stream.responses['200']?.content ?? {})).toEqual(['text/event-stream']);
    expect(stream.parameters?.map((p) => `${p.in}:${p.name}`)).toEqual(
      expect.arrayContaining(['query:from', 'header:last-event-id', 'path:id']),
    );
  });

  it('documents the pages of the task and work lists and the per-user limits', () => {
    for (const path of ['/v1/tasks', '/v1/work']) {
      const list = paths[path]!.get!;
      expect(list.parameters?.map((p) => `${p.in}:${p.name}`)).toEqual(
        expect.arrayContaining(['query:limit', 'query:cursor']),
      );
      const schema = resolve(list.responses['200']?.content?.['application/json']?.schema) as {
        properties?: Record<string, unknown>;
        required?: string[];
      };
      expect(schema.properties).toHaveProperty('next_cursor');
      // Optional: the contract's response shapes are unchanged.
      expect(schema.required ?? []).not.toContain('next_cursor');
    }
    for (const [method, path] of [
      ['post', '/v1/threads'],
      ['post', '/v1/tasks'],
      ['post', '/v1/threads/{id}/messages'],
      ['post', '/v1/threads/{id}/queue'],
    ] as const) {
      expect(JSON.stringify(paths[path]![method]!.responses['409']), `${method} ${path}`).toContain('too_many_runs');
    }
    expect(JSON.stringify(paths['/v1/threads']!.post!.responses['429'])).toContain('THREADS_PER_MINUTE_PER_USER');
  });

  it('names each operation from the one table, uniquely', () => {
    const ids = Object.entries(paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => {
        const route = `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`;
        expect(op.operationId, route).toBe(OPERATION_IDS[route]);
        return op.operationId;
      }),
    );
    expect(new Set(ids).size).toBe(ids.length);
    // The table names nothing that is not served (a stale name would be given to no operation).
    expect(ids.sort()).toEqual(Object.values(OPERATION_IDS).sort());
  });

  it('refers to named component schemas for the shared shapes, one name per shape', () => {
    expect(paths['/v1/runs/{id}']!.get!.responses['200']!.content!['application/json']!.schema).toEqual({
      $ref: '#/components/schemas/Run',
    });
    expect(paths['/v1/threads']!.post!.requestBody!.content['application/json']!.schema).toEqual({
      $ref: '#/components/schemas/CreateThreadBody',
    });
    expect(paths['/v1/harnesses']!.get!.responses['200']!.content!['application/json']!.schema).toEqual({
      $ref: '#/components/schemas/HarnessList',
    });
    expect(paths['/v1/session']!.get!.responses['200']!.content!['application/json']!.schema).toEqual({
      $ref: '#/components/schemas/SessionInfo',
    });
    for (const name of [
      'Run',
      'RunEventPage',
      'Thread',
      'ThreadWithRun',
      'Task',
      'Interaction',
      'ErrorBody',
      'Harness',
      'SessionInfo',
    ]) {
      expect(schemas[name], name).toBeDefined();
    }
    expect(Object.keys(schemas).filter((name) => name.endsWith('Input'))).toEqual([]);
  });
});
