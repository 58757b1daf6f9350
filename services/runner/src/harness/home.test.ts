import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localExec } from '../sandbox/kubernetes/exec.js';
import { podHost } from '../sandbox/kubernetes/process.js';
import { hasRollout } from './codex/rollout.js';
import { clearConfig, hasTranscript } from './claude/launch.js';
import { localHome, type HarnessHome } from './home.js';

// The harness's home is the agent's to write: what the runner does there before a start (clear
// what a start would read, look up whether a session was recorded) follows no link, reads no FIFO,
// and touches nothing outside. The same behaviour on this machine's disk and in a pod (here a local
// stand-in for one, whose scripts run as they would in the pod).

const pod = podHost(localExec(), {
  openGates: () => Promise.reject(new Error('no gates in this test')),
  sweepScope: 'harness',
});
const homes: [string, HarnessHome][] = [
  ['on this machine', localHome],
  ['in a pod', pod.home],
];

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-home-'));
  dirs.push(dir);
  return dir;
}

describe.each(homes)('the harness home %s', (_where, home) => {
  it('removes a link, not what it names', async () => {
    const dir = tempDir();
    const outside = join(tempDir(), 'keep.toml');
    writeFileSync(outside, 'kept');
    symlinkSync(outside, join(dir, 'config.toml'));
    await home.remove(join(dir, 'config.toml'));
    expect(existsSync(join(dir, 'config.toml'))).toBe(false);
    expect(readFileSync(outside, 'utf8')).toBe('kept');
    await home.remove(join(dir, 'absent'));
  });

  it('makes a directory where the agent left a link or a file', async () => {
    const dir = tempDir();
    const elsewhere = tempDir();
    symlinkSync(elsewhere, join(dir, 'claude'));
    await home.directory(join(dir, 'claude'), null);
    expect(lstatSync(join(dir, 'claude')).isDirectory()).toBe(true);
    writeFileSync(join(dir, 'file'), 'x');
    await home.directory(join(dir, 'file'), null);
    expect(lstatSync(join(dir, 'file')).isDirectory()).toBe(true);
    await home.directory(join(dir, 'new', 'deeper'), null);
    expect(lstatSync(join(dir, 'new', 'deeper')).isDirectory()).toBe(true);
  });

  it('clears Claude Code’s state but its conversations, dotfiles and links included, nothing outside', async () => {
    const dir = tempDir();
    const outside = tempDir();
    writeFileSync(join(outside, 'settings.json'), '{}');
    mkdirSync(join(dir, 'projects', 'p'), { recursive: true });
    writeFileSync(join(dir, 'projects', 'p', 's.jsonl'), '{}\n');
    writeFileSync(join(dir, 'settings.json'), '{"hooks":{}}');
    writeFileSync(join(dir, '.credentials.json'), '{}');
    writeFileSync(join(dir, '..hidden'), 'x');
    mkdirSync(join(dir, 'plugins'));
    symlinkSync(outside, join(dir, 'linked'));
    await clearConfig(home, dir);
    expect(execFileSync('ls', ['-A', dir], { encoding: 'utf8' }).trim().split('\n')).toEqual(['projects']);
    expect(existsSync(join(dir, 'projects', 'p', 's.jsonl'))).toBe(true);
    expect(existsSync(join(outside, 'settings.json'))).toBe(true);
  });

  it('finds a recorded session only in regular files, whole first lines, and not through links', async () => {
    const dir = tempDir();
    const day = join(dir, 'sessions', '2026', '11', '26');
    mkdirSync(day, { recursive: true });
    writeFileSync(join(day, 'rollout-a.jsonl'), '{"type":"session_meta"}\n{"type":');
    writeFileSync(join(day, 'rollout-b.jsonl'), '{"type":"sess');
    writeFileSync(join(day, 'rollout-n.jsonl'), 'not json\n');
    execFileSync('mkfifo', [join(day, 'rollout-fifo.jsonl')]);
    const outside = tempDir();
    writeFileSync(join(outside, 'rollout-link.jsonl'), '{"secret":"of the runner"}\n');
    symlinkSync(join(outside, 'rollout-link.jsonl'), join(day, 'rollout-link.jsonl'));
    mkdirSync(join(dir, 'archived_sessions'));
    symlinkSync(outside, join(dir, 'archived_sessions', 'linked'));
    writeFileSync(join(outside, 'rollout-far.jsonl'), '{"type":"session_meta"}\n');

    expect(await hasRollout(home, dir, 'a')).toBe(true);
    for (const id of ['b', 'n', 'fifo', 'link', 'far', 'none']) expect(await hasRollout(home, dir, id)).toBe(false);
    expect((await home.find(join(dir, 'sessions'), '.jsonl')).sort()).toEqual(
      ['a', 'b', 'n'].map((id) => `2026/11/26/rollout-${id}.jsonl`),
    );
    expect(await home.firstLine(join(day, 'rollout-fifo.jsonl'))).toBeNull();
    expect(await home.firstLine(join(day, 'rollout-link.jsonl'))).toBeNull();
    expect(await home.find(join(dir, 'missing'), '.jsonl')).toEqual([]);
    await expect(home.find(dir, '*')).rejects.toThrow(/not a file name suffix/);
  });

  it('finds a Claude Code conversation only at its place', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'projects', 'p', 'deeper'), { recursive: true });
    writeFileSync(join(dir, 'projects', 'p', 'here.jsonl'), '{}\n');
    writeFileSync(join(dir, 'projects', 'p', 'deeper', 'deep.jsonl'), '{}\n');
    expect(await hasTranscript(home, dir, 'here')).toBe(true);
    expect(await hasTranscript(home, dir, 'deep')).toBe(false);
    expect(await hasTranscript(home, dir, 'none')).toBe(false);
  });
});

it('gives up on a pod that does not answer, rather than waiting for good', async () => {
  // A FIFO swapped in after the check that it was a file would hold `head` for good: the exec is cut off.
  const stuck = podHost(
    { run: (_argv, io) => localExec().run(['/bin/sh', '-c', 'exec sleep 600'], io) },
    { openGates: () => Promise.reject(new Error('no gates')), sweepScope: 'harness', homeTimeoutMs: 500 },
  );
  await expect(stuck.home.firstLine(join(tempDir(), 'x'))).rejects.toThrow(/failed/);
});
