import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './support/process-stack.js';

// The benchmarks run built code they do not typecheck: an import of a service's or library's
// files by path (`services/runner/dist/…`) breaks only when a benchmark runs, after the file moved.
// They import what a package exports, as any consumer would; the local stack's dependency-free
// scripts (deploy/local) are the one thing they may take by path.

function scripts(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter(
      (entry) => entry.isFile() && /\.(mjs|js|ts)$/.test(entry.name) && !entry.parentPath.includes('node_modules'),
    )
    .map((entry) => join(entry.parentPath, entry.name));
}

describe('the benchmarks', () => {
  it('import services and libraries through their packages, never by path', () => {
    const files = scripts(join(root, 'bench'));
    expect(files.length).toBeGreaterThan(3);
    const byPath: string[] = [];
    for (const file of files) {
      for (const [, spec] of readFileSync(file, 'utf8').matchAll(/(?:from|import\()\s*['"]([^'"]+)['"]/g)) {
        if (!spec!.startsWith('.')) continue;
        const target = relative(root, resolve(file, '..', spec!));
        if (/^(services|libs)\//.test(target)) byPath.push(`${relative(root, file)}: ${spec}`);
      }
    }
    expect(byPath).toEqual([]);
  });
});
