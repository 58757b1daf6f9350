// The harness alone, the floor under a turn through Threadwork: Codex's app-server started by this
// process in a bubblewrap jail of the runner's shape (services/runner/src/sandbox/jail.ts and
// harness/launch.ts: the runner's death signal, new namespaces for everything, system directories
// read-only, a private /tmp, the workspace and the harness's homes writable, the agent as uid 1000
// with no capabilities) and driven over its JSON-RPC stdio as the runner drives it
// (harness/codex/codex.ts, session.ts): initialize, thread/start, turn/start. What it leaves out of
// the runner's launch, and so counts on our side: the model and egress gates (the jail here shares
// the host's network and reaches the fake model directly, where the runner's reaches it through a
// bridge process inside and a proxy outside), the seccomp filter, the pids cgroup and the sandbox
// itself (a clone of the repository; here an empty workspace).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { root } from '../../deploy/local/launcher.mjs';
import { nowMs } from './sse.mjs';

const BWRAP = '/usr/bin/bwrap';
const SETPRIV = '/usr/bin/setpriv';
const JAIL_UID = '1000';
const SYSTEM = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
const ETC = ['nsswitch.conf', 'ssl', 'ca-certificates', 'ca-certificates.conf', 'alternatives', 'ld.so.cache'];
const START_TIMEOUT_MS = 30_000;
const TURN_TIMEOUT_MS = 60_000;
/** Notifications the runner turns into a run event (harness/codex/mapping.ts): the first one is the turn's first harness event. */
const EVENT_METHODS = new Set([
  'item/agentMessage/delta',
  'item/reasoning/summaryTextDelta',
  'item/reasoning/textDelta',
  'item/commandExecution/outputDelta',
  'turn/plan/updated',
]);

/** The native Codex binary the runner starts (harness/codex/launch.ts), resolved from the runner's package. */
export function codexBinary() {
  const require = createRequire(join(root, 'services', 'runner', 'package.json'));
  const packageJson = realpathSync(require.resolve('@openai/codex/package.json'));
  const triple = { x64: 'x86_64-unknown-linux-musl', arm64: 'aarch64-unknown-linux-musl' }[process.arch];
  const pkg = { x64: '@openai/codex-linux-x64', arm64: '@openai/codex-linux-arm64' }[process.arch];
  if (process.platform !== 'linux' || !triple) throw new Error('the harness-alone baseline runs on Linux only');
  const binary = join(
    dirname(createRequire(packageJson).resolve(`${pkg}/package.json`)),
    'vendor',
    triple,
    'bin',
    'codex',
  );
  if (!existsSync(binary)) throw new Error(`no Codex binary at ${binary}`);
  return binary;
}

/** `codex app-server` as the runner configures it (harness/codex/launch.ts appServerArgs), no key, no sandbox of its own. */
function appServerArgs(baseUrl, model) {
  const config = [
    `model=${JSON.stringify(model)}`,
    `model_provider="tw"`,
    `model_providers.tw.name="Threadwork"`,
    `model_providers.tw.base_url=${JSON.stringify(baseUrl)}`,
    `model_providers.tw.wire_api="responses"`,
    `model_providers.tw.request_max_retries=0`,
    `model_providers.tw.stream_max_retries=0`,
    `approval_policy="never"`,
    `sandbox_mode="danger-full-access"`,
    `web_search="disabled"`,
    `analytics.enabled=false`,
  ];
  const disabled = ['plugins', 'apps', 'shell_snapshot', 'hooks', 'skill_mcp_dependency_install'];
  return ['app-server', ...config.flatMap((c) => ['-c', c]), ...disabled.flatMap((f) => ['--disable', f])];
}

/** bubblewrap around `inner`, the runner's layout but for the gates: see the top of this file. */
function jailedCommand(binary, { cwd, writable }) {
  const args = ['--unshare-all', '--share-net', '--uid', JAIL_UID, '--gid', JAIL_UID];
  args.push('--die-with-parent', '--new-session', '--cap-drop', 'ALL');
  for (const dir of SYSTEM) args.push('--ro-bind-try', dir, dir);
  for (const entry of ETC) args.push('--ro-bind-try', `/etc/${entry}`, `/etc/${entry}`);
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  const programs = dirname(dirname(binary));
  args.push('--ro-bind', programs, programs);
  for (const path of writable) args.push('--bind', path, path);
  args.push('--hostname', 'sandbox', '--chdir', cwd, '--', binary);
  return [SETPRIV, '--pdeathsig', 'SIGTERM', '--', BWRAP, ...args];
}

/** Rejects after `ms` unless `promise` settles first (a hang guard for a benchmark's turn). */
export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A started Codex app-server in its jail, in a workspace of its own: `turn(prompt)` times one turn
 * from just before turn/start to its first harness event and to turn/completed; `stop()` ends it
 * and removes the workspace. `startedAt` is when the process was spawned. `jailed: false` starts
 * it without the jail, to tell the jail's share from the harness's own.
 */
export async function startCodexAlone({ baseUrl, model = 'gpt-5-codex', jailed = true }) {
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-codex-alone-'));
  const cwd = join(dir, 'workspace');
  const home = join(dir, 'home');
  const codexHome = join(dir, 'codex-home');
  for (const path of [cwd, home, codexHome]) mkdirSync(path);
  writeFileSync(join(cwd, 'README.md'), '# Bench\n');
  const [command, ...args] = jailed
    ? jailedCommand(codexBinary(), { cwd, writable: [cwd, home, codexHome] })
    : [codexBinary()];
  const startedAt = nowMs();
  const child = spawn(command, [...args, ...appServerArgs(baseUrl, model)], {
    cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, CODEX_HOME: codexHome, LANG: 'C.UTF-8' },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4_000);
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let nextId = 1;
  const pending = new Map();
  const listeners = new Set();
  createInterface({ input: child.stdout }).on('line', (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (msg.id !== undefined && msg.method === undefined) {
      const waiter = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) waiter?.reject(new Error(`codex: ${JSON.stringify(msg.error)}`));
      else waiter?.resolve(msg.result);
    } else if (msg.id !== undefined) {
      // A request of the server's (approvals, questions): nobody is there to answer.
      child.stdin.write(`${JSON.stringify({ id: msg.id, error: { code: -32601, message: 'not supported' } })}\n`);
    } else {
      const at = nowMs();
      for (const listener of listeners) listener(msg, at);
    }
  });
  void exited.then((exit) => {
    for (const waiter of pending.values())
      waiter.reject(new Error(`codex exited (${JSON.stringify(exit)}): ${stderr}`));
    pending.clear();
  });
  const request = (method, params) =>
    withTimeout(
      new Promise((resolve, reject) => {
        const id = nextId++;
        pending.set(id, { resolve, reject });
        child.stdin.write(`${JSON.stringify({ id, method, params })}\n`);
      }),
      START_TIMEOUT_MS,
      method,
    );

  const stop = async () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await request('initialize', {
      clientInfo: { name: 'threadwork-bench', title: 'Threadwork bench', version: '0.1.0' },
      capabilities: { experimentalApi: true, requestAttestation: false },
    });
    child.stdin.write(`${JSON.stringify({ method: 'initialized' })}\n`);
    const threadId = (await request('thread/start', { cwd })).thread.id;

    /** One turn: milliseconds from `since` (default: just before turn/start) to its first event and to its end. */
    const turn = async (prompt, since) => {
      let firstEventAt = null;
      let listener;
      const completed = new Promise((resolve, reject) => {
        listener = (msg, at) => {
          if (EVENT_METHODS.has(msg.method)) firstEventAt ??= at;
          if (msg.method === 'item/completed' && msg.params?.item?.type === 'agentMessage') firstEventAt ??= at;
          if (msg.method === 'turn/completed') {
            const status = msg.params?.turn?.status;
            if (status === 'completed') resolve(at);
            else reject(new Error(`codex turn ended ${status}: ${JSON.stringify(msg.params?.turn?.error ?? null)}`));
          }
        };
        listeners.add(listener);
      });
      const sentAt = nowMs();
      try {
        await request('turn/start', {
          threadId,
          input: [{ type: 'text', text: prompt, text_elements: [] }],
          model,
        });
        const doneAt = await withTimeout(completed, TURN_TIMEOUT_MS, 'a Codex turn');
        if (firstEventAt === null) throw new Error('a Codex turn completed without an event');
        const from = since ?? sentAt;
        return { firstEventMs: firstEventAt - from, completedMs: doneAt - from };
      } finally {
        listeners.delete(listener);
      }
    };
    return { startedAt, turn, stop, pid: child.pid };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * One cold and one warm turn of the harness alone: spawn → the first turn's first event and end
 * (cold), then a second turn on the same process (warm), timed from its turn/start.
 */
export async function codexAloneTurns(fake, prompt) {
  const codex = await startCodexAlone({ baseUrl: fake.baseUrl });
  try {
    const cold = await codex.turn(`${prompt} cold`, codex.startedAt);
    const warm = await codex.turn(`${prompt} warm`);
    return { cold, warm };
  } finally {
    await codex.stop();
  }
}
