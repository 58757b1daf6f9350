// Starts the runner (services/runner/src/main.ts) in a process of its own, transpiled on the fly
// by the same vite that runs the tests, so a test can kill it with SIGKILL like a crash would.
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..', '..');
const require = createRequire(join(root, 'package.json'));
const vite = await import(createRequire(require.resolve('vitest/package.json')).resolve('vite'));

const conditions = ['threadwork-source', 'node', 'import', 'default'];
const server = await vite.createServer({
  configFile: false,
  root,
  logLevel: 'error',
  appType: 'custom',
  server: { middlewareMode: true, hmr: false, ws: false, watch: null },
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['threadwork-source'] } },
  optimizeDeps: { noDiscovery: true, include: [] },
});
const runner = vite.createServerModuleRunner(server.environments.ssr, { hmr: false });
await runner.import(join(root, 'services', 'runner', 'src', 'main.ts'));
