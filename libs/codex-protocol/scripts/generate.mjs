// Regenerates the typed app-server protocol bindings (src/) from the pinned codex binary. Run it
// after bumping @openai/codex (pnpm --filter @threadwork/codex-protocol generate) and commit the
// result; test/bindings.test.ts fails while src/ differs from what this writes.
//
//   node scripts/generate.mjs [--out DIR]    (default: src/ of this package)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { out: { type: 'string' } } });
const out = values.out ? resolve(values.out) : join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

const require = createRequire(import.meta.url);
const codexJs = join(dirname(require.resolve('@openai/codex/package.json')), 'bin', 'codex.js');

rmSync(out, { recursive: true, force: true });
// An empty Codex home: the bindings are the binary's alone, whatever a config.toml of the user's says.
const home = mkdtempSync(join(tmpdir(), 'codex-protocol-home-'));
// --experimental: the plan-mode and request-user-input types only appear with it.
const result = spawnSync(process.execPath, [codexJs, 'app-server', 'generate-ts', '--experimental', '--out', out], {
  stdio: ['ignore', 'inherit', 'pipe'],
  env: { ...process.env, CODEX_HOME: home },
});
rmSync(home, { recursive: true, force: true });
// Its warnings (a home under the temp folder gets no helper links) only matter when it failed.
if (result.status !== 0) {
  process.stderr.write(result.stderr ?? '');
  process.exit(result.status ?? 1);
}

// The generator writes extensionless relative imports; the workspace resolves ESM the Node way
// (NodeNext), which wants the file named: `./X` becomes `./X.js`, the folder `./v2` `./v2/index.js`.
function addExtensions(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      addExtensions(path);
      continue;
    }
    if (!name.endsWith('.ts')) continue;
    const text = readFileSync(path, 'utf8').replace(/from "(\.{1,2}\/[^"]+)"/g, (_, spec) => {
      const target = join(dir, spec);
      const isDir = statSync(target, { throwIfNoEntry: false })?.isDirectory() ?? false;
      return `from "${spec}${isDir ? '/index.js' : '.js'}"`;
    });
    writeFileSync(path, text);
  }
}
addExtensions(out);
