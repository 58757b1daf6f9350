import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  commandLine,
  descendants,
  killNamespace,
  killTree,
  namespaceInit,
  processesOf,
  startTime,
  stopAllBut,
} from '../harness/processes.js';
import { DiskMeasureError, measureDisk } from './disk.js';
import { jailFixture } from '../../test/support/jail.js';
import { jailed } from './jail.js';

// The jail against an agent whose processes fork away from every look: what the sweep at the end of
// a run and the measure of the sandbox make of it (what the jail lets a process see: jail.test.ts).

const fixture = jailFixture('jail-sweep-test');
const { layout } = fixture;
let available = false;

beforeAll(async () => {
  available = await fixture.prepare();
});
afterAll(() => fixture.remove());

/**
 * A chain of processes in a jail that each fork once and exit, so that a pid listed is gone by the
 * time it is signalled (as the agent's commands can run, without Codex's sandbox in between). It
 * starts once the shell is sent a line; the shell itself, like a harness, stays until a second one.
 * `perl` is what the chain runs before it forks: `body`, each time round.
 */
async function forkChain(marker: string, body: string, ready: () => boolean = () => true) {
  const script = `read go; perl -e '$0 = "${marker}"; ${body}; while (1) { fork && exit; select(undef, undef, undef, .002) }' & read stop`;
  const cmd = jailed({ command: '/bin/sh', args: ['-c', script] }, layout);
  const child = spawn(cmd.command, cmd.args, {
    cwd: layout.cwd,
    env: { PATH: '/usr/bin:/bin', HOME: layout.cwd },
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
  });
  const root = child.pid as number;
  // The shell itself, not the jail's bwraps, whose command lines end in its own.
  await waitFor('the jail’s shell', () =>
    descendants(root).some((pid) => commandLine(pid)?.startsWith('/bin/sh -c read go')),
  );
  // What runs before the agent's command: the jail's processes the sweep keeps.
  const kept = processesOf(root);
  child.stdin.write('go\n');
  await waitFor('the chain to run', () => chain(marker).length > 0 && ready());
  return {
    root,
    kept,
    close: async () => {
      child.stdin.end();
      await killTree(root);
    },
  };
}

/** The live processes of the chain, anywhere on the machine. */
function chain(marker: string): number[] {
  return descendants(0).filter((pid) => commandLine(pid)?.startsWith(marker) && startTime(pid) !== null);
}

describe('a jail whose agent runs a chain of processes that fork and exit', () => {
  it('has nothing of it left once the sweep at the end of a run is over: stopped one by one, or the jail killed whole', async (ctx) => {
    if (!available) ctx.skip();
    const marker = `chain-${process.pid}-${Date.now() % 100000}`;
    const jail = await forkChain(marker, '1');
    try {
      const sweep = await stopAllBut(jail.root, jail.kept, namespaceInit(jail.kept));
      // What the run does with a sweep that did not settle: the jail goes, every process in it.
      if (!sweep.settled) expect(await killNamespace(namespaceInit(jail.kept)!)).toBe(true);
      // A chain still going shows up in one of several looks apart.
      for (let look = 0; look < 20; look++) {
        expect(chain(marker)).toEqual([]);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      await jail.close();
    }
  });

  it('cannot keep a deleted file out of the measure of its sandbox by passing it down the chain', async (ctx) => {
    if (!available) ctx.skip();
    const marker = `held-${process.pid}-${Date.now() % 100000}`;
    const size = 32 * 2 ** 20;
    // The file is written, kept open, and unlinked: only the chain's open descriptor holds it.
    const jail = await forkChain(
      marker,
      `open(my $f, ">", "held.bin") or die; print $f "x" x ${size}; close $f; open(our $h, "<", "held.bin") or die; unlink "held.bin"; open(my $r, ">", "held.ready"); close $r`,
      () => existsSync(join(layout.cwd, 'held.ready')),
    );
    try {
      const measured = await measureDisk(layout.cwd, jail.root).catch((err: unknown) => err);
      // Either it could not be measured (the run then fails as past its bound), or the file counts.
      if (!(measured instanceof DiskMeasureError)) {
        expect(measured).not.toBeInstanceOf(Error);
        expect((measured as { bytes: number }).bytes).toBeGreaterThanOrEqual(size);
      }
    } finally {
      await jail.close();
    }
  });
});
