import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { say, startFakeModel, turnScript, type FakeModelServer } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localHost } from '../host.js';
import { CodexHarness } from './codex.js';

// The harness's home is writable from the agent's commands (from the jail, and in every mode where
// Codex's own sandbox is not around them). What Codex would read there at its next start must not
// make it run a program of the agent's itself, beside the harness and past every sweep.

const logger = createLogger({ service: 'codex-config-test', level: 'silent' });
const dir = mkdtempSync('/var/tmp/threadwork-codex-config-');
let model: FakeModelServer;

beforeAll(async () => {
  model = await startFakeModel(turnScript([[say('Done.')]]));
});
afterAll(async () => {
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a Codex harness started on a home the agent wrote to', () => {
  it('starts no MCP server the agent configured in the home’s config.toml', async () => {
    const home = join(dir, 'codex-home');
    const cwd = join(dir, 'workspace');
    for (const d of [home, cwd]) mkdirSync(d);
    const started = join(cwd, 'mcp-started');
    writeFileSync(
      join(home, 'config.toml'),
      ['[mcp_servers.planted]', 'command = "/bin/sh"', `args = ["-c", "touch ${started}; sleep 600"]`, ''].join('\n'),
    );
    const harness = new CodexHarness({
      baseUrl: model.baseUrl,
      apiKey: null,
      outputCapBytes: 1 << 20,
      includeRaw: false,
      isolation: {
        jailed: false,
        codexSandbox: 'danger-full-access',
        egress: { mode: 'none', allow: [] },
        outside: null,
        processes: null,
        memory: null,
        tmpBytes: 0,
        layers: [],
      },
      logger,
    });
    const session = await harness.start({
      cwd,
      home,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, CODEX_HOME: home },
      model: 'gpt-test',
      resumeSessionId: null,
      mounts: { writable: [cwd, home], readable: [] },
      owner: null,
      host: localHost(),
    });
    try {
      // A turn: by its end, any server configured at the start has been started.
      const outcome = await session.runTurn(
        { prompt: 'hello', model: 'gpt-test', reasoningEffort: 'low', collaborationMode: 'default', metadata: {} },
        {
          started: () => undefined,
          chunk: () => undefined,
          question: async () => ({}),
          planApproval: async () => ({ approved: false, comment: null }),
        },
      );
      expect(outcome.status).toBe('completed');
    } finally {
      await session.stop();
    }
    expect(existsSync(started)).toBe(false);
  });
});
