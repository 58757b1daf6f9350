import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { uniqueId } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { createThread, readLog, waitFor, waitForTerminal } from '../chaos/support/api.js';
import { processesMatching } from './support/processes.js';
import {
  attack,
  attacks,
  BRIDGE,
  cluster,
  MODEL_KEY,
  OUTSIDE_LAYER,
  realUid,
  ROOT,
  SESSION_SECRET,
  useJailCluster,
  user,
  YAMA,
} from './support/jail.js';

// The agent as an attacker inside its sandbox, against the jail (src/sandbox/jail.ts in the runner):
// what it can see, who it is, and the limits it runs under.

useJailCluster();

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
    // What filled it is gone as the run ends: the disk is every sandbox's. (Its own sandbox is read:
    // the runner may be making a spare beside it meanwhile, whose folders come and go.)
    expect(
      readdirSync(cluster.sandboxOf(thread.id), { recursive: true }).filter((p) => String(p).endsWith('fill.bin')),
    ).toEqual([]);
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
