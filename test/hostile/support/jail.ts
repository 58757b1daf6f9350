// A whole deployment whose runner jails every sandbox, and the agent in it as an attacker.
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { say, shell, uniqueId, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, expect } from 'vitest';
import { createThread, readLog, waitForTerminal } from '../../chaos/support/api.js';
import { Cluster, type ChaosUser } from '../../chaos/support/cluster.js';
import { root } from '../../support/process-stack.js';

/** The jail's model bridge, by the path its command line shows. */
export const BRIDGE = join(root, 'services', 'runner', 'jail', 'bridge.mjs');

// The agent as an attacker inside its sandbox, against the jail (src/sandbox/jail.ts in the
// runner): the real codex binary, driven by the fake model, runs each attack as a shell command in
// a whole deployment, and writes what it found into its workspace for the test to read.

export const MODEL_KEY = `sk-jail-${uniqueId()}`;
export const SESSION_SECRET = `session-${uniqueId()}`.padEnd(48, 's');

/** One attack per prompt: the command runs, then the agent says it is done. */
export const attacks = new Map<string, string>();
const scripts = new Map<string, FakeScript>([
  [
    'ATTACK',
    (req) => {
      if (req.toolOutputsSinceLastUser.length > 0) return [say('Done.')];
      const name = req.lastUserText.split(' ')[1] ?? '';
      return [shell(attacks.get(name) ?? 'echo unknown attack')];
    },
  ],
]);

/** Where the runner runs as root (as in CI), each sandbox's jail runs as a uid of its own outside. */
export const ROOT = process.getuid?.() === 0;
export const OUTSIDE_LAYER = ROOT ? 'outside-uid-per-sandbox' : `outside-uid-runner-${process.getuid?.()}`;

/** The host's Yama ptrace restriction; absent where the kernel has no Yama. */
export const YAMA = '/proc/sys/kernel/yama/ptrace_scope';

/** A process's real uid, from /proc. */
export function realUid(pid: number): number {
  return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

export let cluster: Cluster;
export let user: ChaosUser;
/** A server on this machine that the egress policy lets the agent reach (a package mirror, say). */
let mirror: Server;
export let mirrorPort: number;

/** Starts the whole deployment with one jailed runner, and the mirror; call once at the top of a test file. */
export function useJailCluster(): void {
  beforeAll(async () => {
    mirror = createServer((req, res) => res.end(`mirror answered ${req.url}`));
    await new Promise<void>((resolve) => mirror.listen(0, '127.0.0.1', resolve));
    mirrorPort = (mirror.address() as { port: number }).port;
    // Sandboxes outside the temporary directory, as in a deployment: Codex's own sandbox (the second
    // layer) leaves the temporary directory writable, so it is only used where sandboxes live elsewhere.
    mkdirSync('/var/tmp', { recursive: true });
    const sandboxRoot = mkdtempSync('/var/tmp/threadwork-hostile-');
    cluster = await Cluster.start({
      runners: 1,
      scripts,
      sandboxRoot,
      env: { SESSION_SECRET },
      runnerEnv: {
        MODEL_API_KEY: MODEL_KEY,
        SANDBOX_JAIL: 'required',
        CODEX_SANDBOX_MODE: 'workspace-write',
        SANDBOX_PIDS_MAX: '256',
        SANDBOX_MEMORY_MAX_BYTES: String(768 * 2 ** 20),
        SANDBOX_TMP_MAX_BYTES: String(64 * 2 ** 20),
        SANDBOX_DISK_MAX_BYTES: String(128 * 2 ** 20),
        SANDBOX_DISK_CHECK_MS: '500',
        SANDBOX_EGRESS: 'allowlist',
        SANDBOX_EGRESS_ALLOW: `localhost:${mirrorPort}`,
      },
    });
    user = cluster.createUser();
  });
  afterAll(async () => {
    await cluster?.stop();
    await new Promise((resolve) => mirror?.close(resolve));
  });
}

/** Runs one attack in a thread of its own; answers what it wrote to `found.txt` in its workspace. */
export async function attack(
  name: string,
  command: string,
): Promise<{ found: string; threadId: string; runId: string; repo: string }> {
  attacks.set(name, `{ ${command}\n} > found.txt 2>&1; true`);
  const repo = uniqueId('jail');
  const repositoryId = await cluster.addRepo(user, repo);
  const thread = await createThread(cluster, user, { repository_id: repositoryId, prompt: `ATTACK ${name}` });
  const run = await waitForTerminal(cluster, user, thread.run_id, 120_000);
  expect(run.status, JSON.stringify(run.error)).toBe('completed');
  const file = join(cluster.sandboxRoot, thread.id, repo, 'found.txt');
  if (!existsSync(file)) {
    const log = await readLog(cluster, user, thread.run_id);
    const outputs = cluster
      .fake!.requests.filter((r) => r.lastUserText === `ATTACK ${name}`)
      .map((r) => r.toolOutputsSinceLastUser);
    throw new Error(
      `${name}: no found.txt; ${JSON.stringify(log.map((e) => e.chunk)).slice(0, 4000)} ${JSON.stringify(outputs).slice(0, 2000)}`,
    );
  }
  const found = readFileSync(file, 'utf8');
  return { found, threadId: thread.id, runId: thread.run_id, repo };
}
