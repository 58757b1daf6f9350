import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { harnessCatalog, harnessCatalogIssues, harnessCatalogShape, harnessChoiceProblem } from './harness-catalog.js';

const Config = z.object(harnessCatalogShape);
const catalogOf = (env: Record<string, string>) => harnessCatalog(Config.parse(env));
const issuesOf = (env: Record<string, string>) => harnessCatalogIssues(Config.parse(env));

describe('harness catalog', () => {
  it('serves codex alone by default, with its built-in model and efforts', () => {
    expect(catalogOf({})).toEqual({
      default_harness: 'codex',
      harnesses: [
        {
          id: 'codex',
          default_model: 'gpt-5-codex',
          models: [],
          reasoning_efforts: ['minimal', 'low', 'medium', 'high', 'xhigh'],
          default_reasoning_effort: 'medium',
        },
      ],
    });
  });

  it('reads each harness from its own variables; DEFAULT_MODEL still sets codex alone', () => {
    const catalog = catalogOf({
      HARNESSES: 'codex, claude-code',
      DEFAULT_MODEL: 'demo-scripted',
      CLAUDE_MODELS: 'claude-sonnet-4-5,claude-opus-4-1',
      CLAUDE_REASONING_EFFORT: 'max',
    });
    expect(catalog.harnesses.map((h) => [h.id, h.default_model, h.models, h.default_reasoning_effort])).toEqual([
      ['codex', 'demo-scripted', [], 'medium'],
      ['claude-code', 'claude-sonnet-4-5', ['claude-sonnet-4-5', 'claude-opus-4-1'], 'max'],
    ]);
    expect(catalogOf({ CODEX_MODEL: 'o3', DEFAULT_MODEL: 'demo-scripted' }).harnesses[0]?.default_model).toBe('o3');
    // Deployment files pass on a variable left unset as an empty one.
    expect(
      catalogOf({ CODEX_MODEL: '', CLAUDE_MODEL: '', DEFAULT_HARNESS: '', HARNESSES: 'codex,claude-code' }),
    ).toMatchObject({
      default_harness: 'codex',
      harnesses: [{ default_model: 'gpt-5-codex' }, { default_model: 'claude-sonnet-4-5' }],
    });
  });

  it('serves a harness it does not know like codex', () => {
    const [, other] = catalogOf({ HARNESSES: 'codex,codex-gpu', CODEX_MODEL: 'o3' }).harnesses;
    expect(other).toMatchObject({ id: 'codex-gpu', default_model: 'o3', default_reasoning_effort: 'medium' });
  });

  it('names each variable whose default the harness would not take', () => {
    expect(issuesOf({ HARNESSES: 'claude-code' })).toEqual([
      { path: 'DEFAULT_HARNESS', message: 'must be one of HARNESSES' },
    ]);
    expect(issuesOf({ CODEX_MODELS: 'o3,o4' }).map((i) => i.path)).toEqual(['CODEX_MODEL']);
    expect(issuesOf({ CLAUDE_REASONING_EFFORT: 'minimal', CODEX_REASONING_EFFORT: 'max' }).map((i) => i.path)).toEqual([
      'CODEX_REASONING_EFFORT',
      'CLAUDE_REASONING_EFFORT',
    ]);
    expect(issuesOf({ CODEX_MODELS: 'o3', CODEX_MODEL: 'o3' })).toEqual([]);
  });

  it('checks a choice against the harness it names, or the default one', () => {
    const catalog = catalogOf({ HARNESSES: 'codex,claude-code', CODEX_MODELS: 'gpt-5-codex,o3' });
    expect(harnessChoiceProblem(catalog, {})).toBeNull();
    expect(harnessChoiceProblem(catalog, { model: 'o3', reasoning_effort: 'minimal' })).toBeNull();
    expect(harnessChoiceProblem(catalog, { model: 'claude-opus-4-1' }, 'body.')).toBe(
      'body.model: not a model harness codex takes (gpt-5-codex, o3)',
    );
    expect(harnessChoiceProblem(catalog, { harness: 'claude-code', model: 'anything' })).toBeNull();
    expect(harnessChoiceProblem(catalog, { harness: 'claude-code', reasoning_effort: 'minimal' })).toBe(
      'reasoning_effort: not a reasoning effort harness claude-code takes (low, medium, high, xhigh, max)',
    );
    expect(harnessChoiceProblem(catalog, { harness: 'aider' })).toBe(
      'harness: not a harness this deployment serves (codex, claude-code)',
    );
  });
});
