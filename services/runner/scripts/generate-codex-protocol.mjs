// Regenerates the typed app-server protocol bindings from the pinned codex binary. Run it after
// bumping @openai/codex (pnpm --filter @threadwork/runner generate:codex) and commit the result.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const codexJs = join(dirname(require.resolve('@openai/codex/package.json')), 'bin', 'codex.js');
const out = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'harness', 'codex', 'protocol');

rmSync(out, { recursive: true, force: true });
// --experimental: the plan-mode and request-user-input types only appear with it.
const result = spawnSync(process.execPath, [codexJs, 'app-server', 'generate-ts', '--experimental', '--out', out], {
  stdio: 'inherit',
});
if (result.status !== 0) process.exit(result.status ?? 1);

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
