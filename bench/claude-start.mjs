#!/usr/bin/env node
// Claude Code's own start and turn, outside Threadwork: the Agent SDK the runner depends on starts
// its bundled binary against the fake Messages API (libs/testing), as the runner does but with no
// jail, sandbox or run around it. Times query() → initialised (the binary spawned and answering
// the SDK), then a turn of two Bash calls → its result. Medians of --samples (5) fresh starts.
//
//   node bench/claude-start.mjs [--samples 5]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { agent } from '@threadwork/testing';
import { root } from '../deploy/local/launcher.mjs';

const { values: args } = parseArgs({ options: { samples: { type: 'string', default: '5' } } });
const samples = Number(args.samples);

// The SDK as the runner resolves it (its dependency, not the bench's).
const require = createRequire(join(root, 'services', 'runner', 'package.json'));
const sdkEntry = require.resolve('@anthropic-ai/claude-agent-sdk');
const { query } = await import(pathToFileURL(sdkEntry).href);
const sdkPackage = JSON.parse(readFileSync(join(sdkEntry, '..', 'package.json'), 'utf8'));

const fake = await agent.startAgentFake(
  'claude-code',
  agent.agentTurn([[agent.shell('true')], [agent.shell('echo two')], [agent.say('done')]]),
);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** One fresh Claude Code: how long until it is initialised, then how long a two-tool turn takes. */
async function sample() {
  const cwd = mkdtempSync(join(tmpdir(), 'threadwork-claude-start-'));
  let sendPrompt;
  const prompt = (async function* () {
    await new Promise((resolve) => (sendPrompt = resolve));
    yield { type: 'user', message: { role: 'user', content: 'two tools' }, parent_tool_use_id: null };
  })();
  const requestsBefore = fake.requests.length;
  const startedAt = performance.now();
  const q = query({
    prompt,
    options: {
      cwd,
      settingSources: [],
      permissionMode: 'bypassPermissions',
      allowDangerouslySkipPermissions: true,
      env: {
        ...process.env,
        ANTHROPIC_BASE_URL: fake.baseUrl,
        ANTHROPIC_API_KEY: 'bench-model-key',
        CLAUDE_CONFIG_DIR: join(cwd, '.claude-config'),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        CLAUDE_CODE_MAX_RETRIES: '0',
        IS_SANDBOX: '1',
      },
    },
  });
  try {
    await q.initializationResult();
    const initMs = performance.now() - startedAt;
    const turnStart = performance.now();
    sendPrompt();
    for await (const message of q) {
      if (message.type !== 'result') continue;
      if (message.subtype !== 'success') throw new Error(`the turn ended ${message.subtype}`);
      const turnMs = performance.now() - turnStart;
      // The turn the script plays: two tool calls, then the answer, so three model requests.
      if (fake.requests.length - requestsBefore !== 3) throw new Error('the turn was not the two-tool turn');
      return { initMs, turnMs };
    }
    throw new Error('Claude Code ended without a result');
  } finally {
    q.close();
    rmSync(cwd, { recursive: true, force: true });
  }
}

try {
  const results = [];
  for (let i = 0; i < samples; i++) results.push(await sample());
  const fmt = (list) => `median ${Math.round(median(list))} ms (${list.map(Math.round).join(', ')})`;
  process.stdout.write(
    `Claude Code through @anthropic-ai/claude-agent-sdk ${sdkPackage.version}, ${samples} fresh starts\n` +
      `spawn → initialised: ${fmt(results.map((r) => r.initMs))}\n` +
      `two-tool turn → result: ${fmt(results.map((r) => r.turnMs))}\n`,
  );
} finally {
  await fake.close();
}
