import { mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { expect, it } from 'vitest';
import { ClaudeHarness } from './claude.js';
import { decideIsolation } from '../../sandbox/isolation.js';
// @ts-expect-error scratch
import { startFake } from '/tmp/cc-exp/fake.mjs';

it('scratch controls', async () => {
  const dir = mkdtempSync('/var/tmp/cc-scratch-');
  const cwd = join(dir, 'ws');
  const home = join(dir, 'home');
  const agentHome = join(dir, 'agent');
  for (const d of [cwd, home, agentHome]) mkdirSync(d);
  const fake = await startFake((body: any) => {
    const text = JSON.stringify(body.messages ?? []);
    const msgs = body.messages ?? [];
    const lastUser = [...msgs]
      .reverse()
      .find(
        (m: any) =>
          m.role === 'user' &&
          (typeof m.content === 'string' ||
            m.content.some((c: any) => c.type === 'text' && !c.text.startsWith('<system'))),
      );
    const prompt =
      typeof lastUser?.content === 'string'
        ? lastUser.content
        : lastUser?.content
            .filter((c: any) => c.type === 'text' && !c.text.startsWith('<system'))
            .map((c: any) => c.text)
            .join('');
    const results = msgs
      .slice(msgs.indexOf(lastUser))
      .flatMap((m: any) => (Array.isArray(m.content) ? m.content.filter((c: any) => c.type === 'tool_result') : []));
    if (prompt.startsWith('FAIL')) return { status: 500 };
    if (prompt.startsWith('STEER')) {
      if (text.includes('STEERTEXT')) return { blocks: [{ text: 'steered' }] };
      return { blocks: [{ tool: 'Bash', input: { command: 'node -e "setTimeout(()=>{},3000)"', description: 'x' } }] };
    }
    if (prompt.startsWith('CANCEL'))
      return results.length
        ? { blocks: [{ text: 'nope' }] }
        : { blocks: [{ tool: 'Bash', input: { command: 'node -e "setTimeout(()=>{},30000)"', description: 'x' } }] };
    if (prompt.startsWith('ASK'))
      return results.length
        ? { blocks: [{ text: 'answer: ' + JSON.stringify(results[0].content) }] }
        : {
            blocks: [
              {
                tool: 'AskUserQuestion',
                input: {
                  questions: [
                    {
                      question: 'Which file?',
                      header: 'File',
                      multiSelect: false,
                      options: [
                        { label: 'README.md', description: 'r' },
                        { label: 'NOTES.md', description: 'n' },
                      ],
                    },
                  ],
                },
              },
            ],
          };
    if (prompt.startsWith('PLAN')) {
      const last = results.at(-1);
      if (!last) return { blocks: [{ tool: 'ExitPlanMode', input: { plan: 'plan v1' } }] };
      if (JSON.stringify(last.content).includes('rejected'))
        return { blocks: [{ tool: 'ExitPlanMode', input: { plan: 'plan v2' } }] };
      return { blocks: [{ text: 'approved: ' + JSON.stringify(last.content).slice(0, 80) }] };
    }
    return { blocks: [{ text: 'Done.' }] };
  });
  const logger = createLogger({ service: 't', level: 'warn' });
  const isolation = await decideIsolation({ jail: 'auto', codexSandbox: 'danger-full-access', egress: { mode: 'none', allow: [] }, root: dir, pidsMax: 1024, memoryMaxBytes: 0, tmpBytes: 64 << 20, uidRange: { first: 200000, last: 265535 }, harnesses: ['claude-code'] }, logger);
  console.log('layers', isolation.layers.join(' '));
  const harness = new ClaudeHarness({ baseUrl: fake.url, apiKey: 'sk-real-secret', outputCapBytes: 1 << 20, includeRaw: false, logger, isolation });
  const session = await harness.start({
    cwd,
    home,
    env: { PATH: process.env.PATH!, HOME: agentHome },
    model: 'claude-test',
    resumeSessionId: null,
    mounts: { writable: [cwd, home, agentHome], readable: [] },
    owner: null,
  });
  const turn = (prompt: string, mode: 'default' | 'plan', extra: any = {}) => {
    const chunks: any[] = [];
    const p = session.runTurn(
      { prompt, model: 'claude-test', reasoningEffort: 'high', collaborationMode: mode, metadata: {} },
      {
        started: () => chunks.push('STARTED'),
        chunk: (c) => chunks.push(c),
        question: async (k, q) => {
          chunks.push({ q });
          return { q1: ['NOTES.md'] };
        },
        planApproval: async (k, plan) => {
          chunks.push({ plan });
          return plan === 'plan v1' ? { approved: false, comment: 'too vague' } : { approved: true };
        },
        ...extra,
      },
    );
    return { p, chunks };
  };
  let t = turn('STEER me', 'default');
  while (!t.chunks.some((c) => c.type === 'command.started')) await new Promise((r) => setTimeout(r, 50));
  const steered = await session.steer('STEERTEXT please');
  console.log('steer', steered, JSON.stringify(await t.p));
  t = turn('CANCEL me', 'default');
  while (!t.chunks.some((c) => c.type === 'command.started')) await new Promise((r) => setTimeout(r, 50));
  await session.interrupt();
  console.log('cancel', JSON.stringify(await t.p), session.alive);
  t = turn('ASK me', 'plan');
  console.log('ask', JSON.stringify(await t.p), JSON.stringify(t.chunks.filter((c) => c.q)));
  t = turn('PLAN it', 'plan');
  console.log('plan', JSON.stringify(await t.p), JSON.stringify(t.chunks.filter((c) => c.plan)));
  t = turn('FAIL now', 'default');
  console.log('fail', JSON.stringify(await t.p));
  expect(session.alive).toBe(true);
  await session.stop();
  await fake.server.close();
}, 90_000);
