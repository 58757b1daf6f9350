import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { localHome } from '../home.js';
import { hasRollout as lookUp } from './rollout.js';

// Whether Codex recorded a session is read from the harness's home, which the agent can write:
// what it plants there must not block the runner, nor make it read a file of its own.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function home(): string {
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-rollout-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'sessions', '2026', '11', '25'), { recursive: true });
  return dir;
}
const hasRollout = (dir: string, id: string) => lookUp(localHome, dir, id);
const rollout = (dir: string, id: string) =>
  join(dir, 'sessions', '2026', '11', '25', `rollout-2026-11-25T00-00-00-${id}.jsonl`);

describe('a recorded Codex session', () => {
  it('is a rollout file whose first line is whole', async () => {
    const dir = home();
    writeFileSync(rollout(dir, 'a'), '{"type":"session_meta"}\n{"type":');
    writeFileSync(rollout(dir, 'b'), '{"type":"sess');
    expect(await hasRollout(dir, 'a')).toBe(true);
    expect(await hasRollout(dir, 'b')).toBe(false);
    expect(await hasRollout(dir, 'c')).toBe(false);
  });

  it('is not a FIFO the agent planted (which would block the read for good), nor a link out', async () => {
    const dir = home();
    execFileSync('mkfifo', [rollout(dir, 'fifo')]);
    expect(await hasRollout(dir, 'fifo')).toBe(false);
    const outside = join(dir, 'outside.jsonl');
    writeFileSync(outside, '{"secret":"of the runner"}\n');
    symlinkSync(outside, rollout(dir, 'link'));
    expect(await hasRollout(dir, 'link')).toBe(false);
  });

  it('is not looked for through a sessions folder that is a link (to the runner’s own files, say)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'threadwork-rollout-'));
    dirs.push(dir);
    // A real rollout outside the harness's home, reachable only through the planted link.
    const elsewhere = mkdtempSync(join(tmpdir(), 'threadwork-rollout-elsewhere-'));
    dirs.push(elsewhere);
    writeFileSync(join(elsewhere, 'rollout-2026-11-25T00-00-00-x.jsonl'), '{"type":"session_meta"}\n');
    symlinkSync(elsewhere, join(dir, 'sessions'));
    expect(await hasRollout(dir, 'x')).toBe(false);
  });
});
