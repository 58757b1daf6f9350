import { rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admission, failure, startHarness, type Harness } from './helpers.js';

// The runs service with two harnesses: each run gets its own harness's defaults, and the catalog it
// admits with is what rpc.runs.harnesses (GET /v1/harnesses) answers.

describe('runs harness catalog', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      HARNESSES: 'codex,claude-code',
      DEFAULT_HARNESS: 'claude-code',
      CLAUDE_MODEL: 'claude-opus-4-1',
      CODEX_MODEL: 'gpt-5',
      CODEX_MODELS: 'gpt-5,o3',
    });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it("admits a run that names no model or effort with its harness's defaults", async () => {
    const claude = await request(h.nc, rpc.runs.admit, admission());
    expect(claude.run).toMatchObject({ harness: 'claude-code', model: 'claude-opus-4-1', reasoning_effort: 'high' });
    const codex = await request(h.nc, rpc.runs.admit, admission({ harness: 'codex' }));
    expect(codex.run).toMatchObject({ harness: 'codex', model: 'gpt-5', reasoning_effort: 'medium' });
    const chosen = await request(
      h.nc,
      rpc.runs.admit,
      admission({ harness: 'codex', model: 'o3', reasoning_effort: 'xhigh' }),
    );
    expect(chosen.run).toMatchObject({ model: 'o3', reasoning_effort: 'xhigh' });
  });

  it('refuses a harness it does not serve, naming those it does', async () => {
    const err = await failure(request(h.nc, rpc.runs.admit, admission({ harness: 'aider' })));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toBe('harness: not a harness this deployment serves (codex, claude-code)');
  });

  it('lists its catalog, the default harness marked', async () => {
    const { harnesses } = await request(h.nc, rpc.runs.harnesses, {});
    expect(harnesses.map((e) => [e.id, e.default, e.default_model, e.models])).toEqual([
      ['codex', false, 'gpt-5', ['gpt-5', 'o3']],
      ['claude-code', true, 'claude-opus-4-1', []],
    ]);
  });
});
