import { HarnessList, TaskList, ThreadWithRun } from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Caller, type Harness } from './harness.js';

// The harness catalog through the public API against the real services: what GET /v1/harnesses
// lists, the defaults a new thread gets from it, and the 400s of a choice it does not take.

const CLAUDE_MODELS = ['claude-sonnet-4-5', 'claude-opus-4-1'];

describe('harness catalog', () => {
  let harness: Harness;
  let alice: Caller;
  let repositoryId: number;
  const get = (url: string, who: Caller = alice) => harness.app.inject({ url, headers: who.headers });
  const post = (url: string, payload: Record<string, unknown>, who: Caller = alice) =>
    harness.app.inject({ method: 'POST', url, headers: who.headers, payload });

  beforeAll(async () => {
    harness = await startHarness({
      peerEnv: {
        HARNESSES: 'codex,claude-code',
        CLAUDE_MODELS: CLAUDE_MODELS.join(','),
        CODEX_REASONING_EFFORT: 'high',
      },
    });
    alice = await harness.caller();
    repositoryId = harness.repositories.get('app')!;
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('GET /v1/harnesses lists every harness served, with its models, efforts and defaults', async () => {
    const res = await get('/v1/harnesses');
    expect(res.statusCode).toBe(200);
    expect(HarnessList.parse(res.json())).toEqual({
      harnesses: [
        {
          id: 'codex',
          default: true,
          default_model: 'gpt-5-codex',
          models: [],
          reasoning_efforts: ['minimal', 'low', 'medium', 'high', 'xhigh'],
          default_reasoning_effort: 'high',
          collaboration_modes: ['default', 'plan'],
        },
        {
          id: 'claude-code',
          default: false,
          default_model: 'claude-sonnet-4-5',
          models: CLAUDE_MODELS,
          reasoning_efforts: ['low', 'medium', 'high', 'xhigh', 'max'],
          default_reasoning_effort: 'high',
          collaboration_modes: ['default', 'plan'],
        },
      ],
    });
  });

  it('GET /v1/harnesses needs an API key like every other read', async () => {
    const res = await harness.app.inject({ url: '/v1/harnesses' });
    expect(res.statusCode).toBe(401);
  });

  it('gives a thread that names no model or effort its harness defaults', async () => {
    const claude = await post('/v1/threads', { repository_id: repositoryId, prompt: 'hi', harness: 'claude-code' });
    expect(claude.statusCode).toBe(202);
    expect(ThreadWithRun.parse(claude.json())).toMatchObject({
      harness: 'claude-code',
      model: 'claude-sonnet-4-5',
      reasoning_effort: 'high',
    });
    const codex = await post('/v1/threads', { repository_id: repositoryId, prompt: 'hi', model: 'o3' });
    expect(codex.statusCode).toBe(202);
    expect(ThreadWithRun.parse(codex.json())).toMatchObject({
      harness: 'codex',
      model: 'o3',
      reasoning_effort: 'high',
    });
    const chosen = await post('/v1/threads', {
      repository_id: repositoryId,
      prompt: 'hi',
      harness: 'claude-code',
      model: 'claude-opus-4-1',
      reasoning_effort: 'max',
    });
    expect(chosen.statusCode).toBe(202);
    expect(ThreadWithRun.parse(chosen.json())).toMatchObject({ model: 'claude-opus-4-1', reasoning_effort: 'max' });
  });

  describe('400 naming what is allowed, with nothing written', () => {
    const refusals: [string, Record<string, unknown>, string][] = [
      ['/v1/threads', { harness: 'aider' }, 'body.harness: not a harness this deployment serves (codex, claude-code)'],
      [
        '/v1/threads',
        { harness: 'claude-code', model: 'gpt-5-codex' },
        'body.model: not a model harness claude-code takes (claude-sonnet-4-5, claude-opus-4-1)',
      ],
      [
        '/v1/threads',
        { harness: 'claude-code', reasoning_effort: 'minimal' },
        'body.reasoning_effort: not a reasoning effort harness claude-code takes (low, medium, high, xhigh, max)',
      ],
      [
        '/v1/threads',
        { reasoning_effort: 'max' },
        'body.reasoning_effort: not a reasoning effort harness codex takes (minimal, low, medium, high, xhigh)',
      ],
      [
        '/v1/tasks',
        { harness: 'claude-code', model: 'o3' },
        'body.model: not a model harness claude-code takes (claude-sonnet-4-5, claude-opus-4-1)',
      ],
    ];

    it.each(refusals)('POST %s with %j', async (url, choice, message) => {
      const bob = await harness.caller();
      const res = await post(url, { repository_id: repositoryId, prompt: 'hi', ...choice }, bob);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'invalid_request', message } });
      const tasks = await get('/v1/tasks', bob);
      expect(TaskList.parse(tasks.json()).tasks).toEqual([]);
    });
  });
});
