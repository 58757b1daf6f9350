import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { say, shell, uniqueId, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, readLog, waitFor, waitForTerminal } from '../chaos/support/api.js';
import { Cluster, type ChaosUser } from '../chaos/support/cluster.js';
import { processesMatching } from './support/processes.js';

// The agent as an attacker who plans ahead: what it leaves in its sandbox during one run must not
// get it out of the harness's own sandbox (Codex's, the second layer) when the harness starts again
// for the thread's next run — after the idle stop here, as after a takeover or a rebuild. And as one
// who floods its gates: a refused connection is reported, a thousand are not a thousand events.

/** What each prompt's command is; the agent runs it once, then says it is done. */
const commands = new Map<string, string>();
const scripts = new Map<string, FakeScript>([
  [
    'RUN',
    (req) => {
      if (req.toolOutputsSinceLastUser.length > 0) return [say('Done.')];
      return [shell(commands.get(req.lastUserText.split(' ')[1] ?? '') ?? 'true')];
    },
  ],
]);

let cluster: Cluster;
let user: ChaosUser;

beforeAll(async () => {
  mkdirSync('/var/tmp', { recursive: true });
  const sandboxRoot = mkdtempSync('/var/tmp/threadwork-hostile-');
  cluster = await Cluster.start({
    runners: 1,
    scripts,
    sandboxRoot,
    runnerEnv: {
      SANDBOX_JAIL: 'required',
      CODEX_SANDBOX_MODE: 'workspace-write',
      // A harness idle this long is stopped, and the thread's next run starts a new one.
      SANDBOX_IDLE_MS: '1500',
      // With some egress allowed, Codex's sandbox lets commands reach the egress gate at all.
      SANDBOX_EGRESS: 'allowlist',
      SANDBOX_EGRESS_ALLOW: 'registry.npmjs.org',
    },
  });
  user = cluster.createUser();
});
afterAll(async () => {
  await cluster?.stop();
});

async function send(threadId: string, text: string): Promise<string> {
  const res = await cluster.fetch(`/v1/threads/${threadId}/messages`, {
    method: 'POST',
    user,
    body: JSON.stringify({ prompt: text }),
  });
  const body = (await res.json()) as { run_id?: string };
  if (res.status !== 202 || !body.run_id) throw new Error(`send → ${res.status}: ${JSON.stringify(body)}`);
  return body.run_id;
}

describe('an agent planning ahead, and flooding its gates', () => {
  it('gets nothing run outside the harness’s sandbox from the login files it leaves in its HOME', async () => {
    // Every login shell that reads these files says how many seccomp filters it is under: 2 inside
    // Codex's sandbox (the jail's and Codex's own), 1 outside it.
    commands.set(
      'plant',
      [
        'log="$PWD/shells.log"',
        'for f in .bashrc .bash_profile .bash_login .profile .zshrc .zprofile .zshenv; do',
        `  printf '%s\\n' "grep Seccomp_filters /proc/self/status >> $log 2>/dev/null" > "$HOME/$f"`,
        'done',
      ].join('\n'),
    );
    commands.set('again', 'echo again');
    const repo = uniqueId('home');
    const repositoryId = await cluster.addRepo(user, repo);
    const thread = await createThread(cluster, user, { repository_id: repositoryId, prompt: 'RUN plant' });
    const first = await waitForTerminal(cluster, user, thread.run_id, 120_000);
    expect(first.status, JSON.stringify(first.error)).toBe('completed');

    // The harness goes idle and is stopped: nothing of the sandbox's jail is left.
    const sandbox = join(cluster.sandboxRoot, thread.id);
    await waitFor('the idle harness to be stopped', () => processesMatching(sandbox).length === 0, 60_000);

    const second = await waitForTerminal(cluster, user, await send(thread.id, 'RUN again'), 120_000);
    expect(second.status, JSON.stringify(second.error)).toBe('completed');

    const log = join(sandbox, repo, 'shells.log');
    expect(existsSync(log), 'the agent’s own commands ran login shells that read the files').toBe(true);
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(/^Seccomp_filters:\s+2$/);
  });

  it('has its refused connections reported up to a bound per turn, then counted', async () => {
    commands.set(
      'flood',
      'for i in $(seq 1 60); do curl -s -o /dev/null --max-time 5 https://flood-$i.example/ ; done; echo flooded',
    );
    const repositoryId = await cluster.addRepo(user, uniqueId('flood'));
    const thread = await createThread(cluster, user, { repository_id: repositoryId, prompt: 'RUN flood' });
    const run = await waitForTerminal(cluster, user, thread.run_id, 180_000);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    const refused = (await readLog(cluster, user, thread.run_id))
      .map((e) => e.chunk as { type: string; host?: string; reason?: string })
      .filter((c) => c.type === 'network.refused');
    expect(refused).toHaveLength(20);
    expect(refused[0]!.host).toBe('flood-1.example');
    expect(refused.at(-1)!.reason).toMatch(/further refusals in this turn are counted, not reported/);
  });
});
