import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeAgentTree } from './agent-repo.js';

// The runner replaces the agent's `.git` while the agent's processes may still run beside it. One
// that swaps a directory of that tree for a link, the moment the removal has begun, must not make
// the runner remove what the link names.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('removing a tree the agent can write', () => {
  it('never follows a directory swapped for a link while it is being removed', async () => {
    for (let round = 0; round < 3; round++) {
      const root = mkdtempSync(join(tmpdir(), 'threadwork-agent-tree-'));
      dirs.push(root);
      const tree = join(root, 'workspace', '.git');
      const privateDir = join(root, 'git');
      const victim = join(root, 'victim');
      mkdirSync(join(tree, 'd1', 'precious'), { recursive: true });
      mkdirSync(privateDir);
      mkdirSync(join(victim, 'precious'), { recursive: true });
      writeFileSync(join(victim, 'precious', 'keep.txt'), 'mine');
      for (let i = 0; i < 4000; i++) writeFileSync(join(tree, 'd1', `f${i}`), '');

      // The agent: from inside the tree (its working directory), as soon as entries start to go,
      // it moves the directory aside and puts a link to the victim in its place.
      const ready = join(root, 'ready');
      const attacker = spawn(
        '/bin/bash',
        [
          '-c',
          'touch "$1"; while :; do n=$(ls d1 2>/dev/null | wc -l); if [ "$n" -lt 3990 ]; then mv d1 d1x && ln -s "$2" d1; exit 0; fi; done',
          'attacker',
          ready,
          victim,
        ],
        { cwd: tree, stdio: 'ignore' },
      );
      try {
        await expect.poll(() => existsSync(ready), { timeout: 30_000 }).toBe(true);
        await removeAgentTree(tree, privateDir).catch(() => undefined);
      } finally {
        attacker.kill('SIGKILL');
      }
      expect(existsSync(join(victim, 'precious', 'keep.txt')), `round ${round}`).toBe(true);
      expect(existsSync(tree)).toBe(false);
    }
  });

  it('removes a link put in place of the tree as a link', async () => {
    const root = mkdtempSync(join(tmpdir(), 'threadwork-agent-tree-'));
    dirs.push(root);
    const victim = join(root, 'victim');
    mkdirSync(join(victim, 'inside'), { recursive: true });
    mkdirSync(join(root, 'workspace'));
    mkdirSync(join(root, 'git'));
    symlinkSync(victim, join(root, 'workspace', '.git'));
    await removeAgentTree(join(root, 'workspace', '.git'), join(root, 'git'));
    expect(existsSync(join(root, 'workspace', '.git'))).toBe(false);
    expect(existsSync(join(victim, 'inside'))).toBe(true);
  });
});
