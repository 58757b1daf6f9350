import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
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

  // Modules, not scripts (a script starts with `#!` and runs when loaded): each loads, so an export
  // one of them takes from another, a package's or a sibling's, that is gone fails here.
  it('load, every module of them, with what they import from each other', async () => {
    const modules = scripts(join(root, 'bench')).filter(
      (file) => file.endsWith('.mjs') && !readFileSync(file, 'utf8').startsWith('#!'),
    );
    expect(modules.map((file) => relative(root, file))).toEqual(
      expect.arrayContaining(['bench/lib/load.mjs', 'bench/lib/codex-alone.mjs', 'bench/suites/all.mjs']),
    );
    // autocannon first, as the runner script loads it (see bench/run.mjs).
    await import(pathToFileURL(join(root, 'bench', 'lib', 'load.mjs')).href);
    for (const file of modules) {
      const loaded: Record<string, unknown> = await import(pathToFileURL(file).href);
      expect(Object.keys(loaded).length, relative(root, file)).toBeGreaterThan(0);
    }
    const options: Record<string, unknown> = await import(
      pathToFileURL(join(root, 'bench', 'lib', 'options.mjs')).href
    );
    expect(options.BENCHMARKS).toEqual(expect.arrayContaining(['harness-alone', 'throughput', 'followers']));
  });
});
