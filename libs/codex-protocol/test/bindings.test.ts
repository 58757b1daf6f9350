import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

// The committed bindings are what the pinned Codex CLI generates, byte for byte: a bump of
// @openai/codex without regenerating, or a hand edit of src/, fails here.

const pkg = fileURLToPath(new URL('..', import.meta.url));
const committed = join(pkg, 'src');
const scratch = await mkdtemp(join(tmpdir(), 'codex-protocol-'));

afterAll(() => rm(scratch, { recursive: true, force: true }));

async function files(dir: string): Promise<Map<string, Buffer>> {
  const names = await readdir(dir, { recursive: true, withFileTypes: true });
  const entries = names.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
  return new Map(await Promise.all(entries.map(async (path) => [relative(dir, path), await readFile(path)] as const)));
}

describe('codex protocol bindings', () => {
  it('are what the pinned Codex CLI generates', async () => {
    const generated = join(scratch, 'src');
    await promisify(execFile)(process.execPath, [join(pkg, 'scripts', 'generate.mjs'), '--out', generated]);
    const want = await files(generated);
    const have = await files(committed);
    const drift = [
      ...[...want.keys()].filter((f) => !have.has(f)).map((f) => `missing from src/: ${f}`),
      ...[...have.keys()].filter((f) => !want.has(f)).map((f) => `not generated: ${f}`),
      ...[...want].filter(([f, bytes]) => have.has(f) && !bytes.equals(have.get(f)!)).map(([f]) => `differs: ${f}`),
    ].sort();
    expect(want.size).toBeGreaterThan(0);
    // The fix is the generator's run, not an edit: pnpm --filter @threadwork/codex-protocol generate
    expect(drift, 'src/ is not what scripts/generate.mjs writes; run it and commit the result').toEqual([]);
  });
});
