import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseUidRange, probeUid, SandboxUids } from './uids.js';

// Each sandbox's own uid: distinct from every other sandbox's, the same for its every run, whichever
// runner (or restart of one) asks, however many ask at once.

const root = mkdtempSync(join(tmpdir(), 'threadwork-uids-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('SANDBOX_UID_RANGE', () => {
  it('is first-last, above the system’s users, two uids at least, without nobody', () => {
    expect(parseUidRange('200000-265535')).toEqual({ first: 200000, last: 265535 });
    expect(parseUidRange(' 1000 - 1001 ')).toEqual({ first: 1000, last: 1001 });
    for (const bad of ['200000', '0-65535', '999-2000', '5000-5000', '60000-70000', '-1-5', '1000-4294967295']) {
      expect(typeof parseUidRange(bad), bad).toBe('string');
    }
  });
});

describe('a sandbox’s uid', () => {
  it('is its own, the same on every claim, from any runner on the disk, and never the probes’', async () => {
    const dir = mkdtempSync(join(root, 'a-'));
    const range = { first: 300000, last: 300099 };
    const one = new SandboxUids(dir, range);
    const a = await one.claim('thread-a', undefined);
    const b = await one.claim('thread-b', undefined);
    expect(a).not.toBe(b);
    for (const uid of [a, b]) {
      expect(uid).toBeGreaterThanOrEqual(range.first);
      expect(uid).toBeLessThan(probeUid(range));
    }
    // A runner started later (or another on the same disk), with or without the uid recorded.
    const other = new SandboxUids(dir, range);
    expect(await other.claim('thread-a', a)).toBe(a);
    expect(await other.claim('thread-a', undefined)).toBe(a);
    // A uid recorded for a sandbox is not taken on its word if another sandbox holds it.
    expect(await other.claim('thread-c', a)).not.toBe(a);
    // The claim names its sandbox, and only the runner may read it.
    expect(readFileSync(join(dir, '.uids', String(a)), 'utf8')).toBe('thread-a\n');
  });

  it('is never the same for two sandboxes, however many runners claim at once', async () => {
    const dir = mkdtempSync(join(root, 'b-'));
    // A small range: the sandboxes' starting points collide, and they must look further.
    const range = { first: 400000, last: 400064 };
    const runners = [0, 1, 2].map(() => new SandboxUids(dir, range));
    const folders = Array.from({ length: 40 }, (_, i) => `thread-${i}`);
    const claims = await Promise.all(
      runners.flatMap((runner) =>
        folders.map(async (folder) => [folder, await runner.claim(folder, undefined)] as const),
      ),
    );
    const byFolder = new Map<string, Set<number>>();
    for (const [folder, uid] of claims) byFolder.set(folder, (byFolder.get(folder) ?? new Set()).add(uid));
    // Each sandbox got one uid, whichever runner asked …
    for (const uids of byFolder.values()) expect(uids.size).toBe(1);
    // … and no two sandboxes the same.
    const uids = [...byFolder.values()].map((set) => [...set][0]);
    expect(new Set(uids).size).toBe(folders.length);
  });

  it('cannot be had once every uid of the range has a sandbox', async () => {
    const dir = mkdtempSync(join(root, 'c-'));
    const uids = new SandboxUids(dir, { first: 500000, last: 500002 });
    const taken = [await uids.claim('x', undefined), await uids.claim('y', undefined)];
    expect(taken.sort()).toEqual([500000, 500001]);
    await expect(uids.claim('z', undefined)).rejects.toThrow(/every uid of SANDBOX_UID_RANGE/);
  });
});
