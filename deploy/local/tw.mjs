#!/usr/bin/env node
// The one entry behind `npm start`, `npm test` and friends. On a fresh machine with Node 20.19+ and
// Go it installs everything else: the pinned Node LTS (`.node-version`) it then runs everything on,
// a pinned pnpm (both cached outside the repo), the workspace's node modules, and the pinned
// servers (see tools.mjs). Dependency-free on purpose, and runs on the older Node too.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CONTROL_PLANE_TOOLS,
  ensureNode,
  ensureSystemPackages,
  ensureTools,
  haveGo,
  isPinnedNode,
  NODE_VERSION,
  toolsCached,
  toolsDir,
} from './tools.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const PNPM_VERSION = pkg.packageManager.replace(/^pnpm@/, '');
const SETPRIV = '/usr/bin/setpriv';

function log(line) {
  process.stderr.write(`threadwork: ${line}\n`);
}

function run(cmd, args, opts = {}) {
  const result = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  if (result.error) throw result.error;
  if (result.status !== 0) process.exit(result.status ?? 1);
}

/** A pnpm of the pinned version: the one on PATH if it matches, else one cached by npm. */
function ensurePnpm() {
  const onPath = spawnSync('pnpm', ['--version'], { encoding: 'utf8' });
  if (onPath.status === 0 && onPath.stdout.trim() === PNPM_VERSION) return 'pnpm';

  const prefix = join(toolsDir(), `pnpm-${PNPM_VERSION}`);
  const bin = join(prefix, 'node_modules', '.bin', 'pnpm');
  if (existsSync(bin)) return bin;

  log(`installing pnpm ${PNPM_VERSION} into ${prefix}`);
  const tmp = `${prefix}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  run('npm', [
    'install',
    '--prefix',
    tmp,
    '--no-save',
    '--no-package-lock',
    '--loglevel=error',
    `pnpm@${PNPM_VERSION}`,
  ]);
  rmSync(prefix, { recursive: true, force: true });
  spawnSync('mv', [tmp, prefix]);
  return bin;
}

function pnpmInstall(pnpm) {
  const args = ['install', '--reporter=append-only'];
  if (process.env.CI) args.push('--frozen-lockfile');
  else args.push('--prefer-offline');
  run(pnpm, args, { env: { ...process.env, npm_config_update_notifier: 'false' } });
}

function withPnpmOnPath(pnpm) {
  const env = { ...process.env };
  if (pnpm !== 'pnpm') env.PATH = `${dirname(pnpm)}:${env.PATH}`;
  return env;
}

/** The parent of a process, from /proc on Linux; null where that cannot be read. */
function parentOf(pid) {
  try {
    // Field 4 of /proc/<pid>/stat, after the command name in parentheses (which may hold spaces).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

/**
 * Runs a long-lived child in the foreground, forwarding Ctrl-C and SIGTERM; resolves with its exit
 * code. Nothing it started outlives us: on Linux the child gets SIGTERM if we die, even by SIGKILL
 * (`setpriv --pdeathsig`, which then execs the command), and if our own parent goes away without a
 * word — npm passes SIGTERM to the shell it ran us in, not to us; killed, it leaves that shell
 * waiting for us — we pass a SIGTERM on ourselves.
 */
function foreground(cmd, args, env) {
  const guarded = process.platform === 'linux' && existsSync(SETPRIV);
  const child = guarded
    ? spawn(SETPRIV, ['--pdeathsig', 'SIGTERM', '--', cmd, ...args], { cwd: root, stdio: 'inherit', env })
    : spawn(cmd, args, { cwd: root, stdio: 'inherit', env });
  const forward = (signal) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const lineage = [process.ppid, parentOf(process.ppid)];
  const orphaned = setInterval(() => {
    if (process.ppid === lineage[0] && parentOf(lineage[0]) === lineage[1]) return;
    clearInterval(orphaned);
    forward('SIGTERM');
    log('the process that started us is gone; stopping');
  }, 250);
  return new Promise((resolveExit) =>
    child.on('exit', (code, signal) => {
      clearInterval(orphaned);
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolveExit(code ?? (signal === 'SIGINT' || signal === 'SIGTERM' ? 0 : 1));
    }),
  );
}

const CHAOS_CONFIG = 'vitest.chaos.config.ts';
const CLUSTER_CONFIG = 'vitest.cluster.config.ts';

// Everything runs on the pinned Node LTS line, as in the image: on another Node this script only
// installs that one and runs itself again on it, first on PATH so that every child (pnpm, vitest,
// the services) runs on it too.
if (!isPinnedNode()) {
  let node;
  try {
    node = ensureNode({ log: (line) => process.stderr.write(line + '\n') });
  } catch (err) {
    log(err.message.replace(/^threadwork: /, ''));
    process.exit(1);
  }
  log(`running on Node.js ${NODE_VERSION} (this is ${process.versions.node})`);
  const env = { ...process.env, PATH: `${dirname(node)}:${process.env.PATH ?? ''}` };
  process.exit(await foreground(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], env));
}

const [command = 'help', ...rest] = process.argv.slice(2);
const needServers = !(process.env.NATS_URL && process.env.MONGO_URL);

switch (command) {
  case 'pnpm': {
    const pnpm = ensurePnpm();
    if (!existsSync(join(root, 'node_modules', '.modules.yaml'))) pnpmInstall(pnpm);
    run(pnpm, rest, { env: withPnpmOnPath(pnpm) });
    break;
  }
  case 'node': {
    // A script on the pinned Node (the benchmarks, say).
    process.exitCode = await foreground(process.execPath, rest, process.env);
    break;
  }
  case 'tools': {
    ensureSystemPackages();
    const paths = ensureTools(rest.length ? rest : ['nats-server', 'ferretdb', 'helm']);
    for (const [name, path] of Object.entries(paths)) process.stdout.write(`${name}\t${path}\n`);
    break;
  }
  case 'test': {
    // The suite, then the fault tests (real servers killed and restarted by pid; one file at a
    // time, so they have the machine to themselves). With arguments: just those of the suite.
    const pnpm = ensurePnpm();
    pnpmInstall(pnpm);
    ensureTools(['nats-server', 'ferretdb', 'helm']);
    // bubblewrap for the jail tests, chromium for the console's.
    ensureSystemPackages();
    const env = withPnpmOnPath(pnpm);
    run(pnpm, ['-r', '--workspace-concurrency=2', 'build'], { env });
    const suite = await foreground(pnpm, ['exec', 'vitest', 'run', ...rest], env);
    const chaos = rest.length ? 0 : await foreground(pnpm, ['exec', 'vitest', 'run', '--config', CHAOS_CONFIG], env);
    process.exitCode = suite || chaos;
    break;
  }
  case 'test:chaos': {
    const pnpm = ensurePnpm();
    pnpmInstall(pnpm);
    ensureTools(['nats-server', 'ferretdb']);
    ensureSystemPackages(['bubblewrap']);
    const env = withPnpmOnPath(pnpm);
    run(pnpm, ['-r', '--workspace-concurrency=2', 'build'], { env });
    process.exitCode = await foreground(pnpm, ['exec', 'vitest', 'run', '--config', CHAOS_CONFIG, ...rest], env);
    break;
  }
  case 'test:cluster': {
    // The chart on a real Kubernetes control plane, built once from the Go module proxy (the first
    // build takes long: kube-apiserver alone is 20-40 min on two cores; cached after that).
    const pnpm = ensurePnpm();
    pnpmInstall(pnpm);
    // Without Go (and nothing cached) the test skips itself, saying why.
    if (toolsCached(CONTROL_PLANE_TOOLS) || haveGo()) {
      if (!toolsCached(CONTROL_PLANE_TOOLS)) {
        log('building the Kubernetes control plane for the cluster test (first time only: 30-50 min on two cores)');
      }
      ensureTools(['helm', ...CONTROL_PLANE_TOOLS]);
    }
    // A runner serving runs in sandbox pods needs the rest of the stack: NATS and the database.
    ensureTools(['nats-server', 'ferretdb']);
    ensureSystemPackages(['openssl', 'util-linux']);
    const env = withPnpmOnPath(pnpm);
    run(pnpm, ['-r', '--workspace-concurrency=2', 'build'], { env });
    process.exitCode = await foreground(pnpm, ['exec', 'vitest', 'run', '--config', CLUSTER_CONFIG, ...rest], env);
    break;
  }
  case 'start': {
    const pnpm = ensurePnpm();
    pnpmInstall(pnpm);
    if (needServers) ensureTools(['nats-server', 'ferretdb']);
    ensureSystemPackages(['bubblewrap']);
    const env = withPnpmOnPath(pnpm);
    run(pnpm, ['-r', '--workspace-concurrency=2', 'build'], { env });
    process.exitCode = await foreground(process.execPath, [join(root, 'deploy', 'local', 'stack.mjs'), ...rest], env);
    break;
  }
  case 'admin': {
    const pnpm = ensurePnpm();
    if (!existsSync(join(root, 'services', 'gateway', 'dist', 'admin.js'))) {
      pnpmInstall(pnpm);
      run(pnpm, ['-r', '--workspace-concurrency=2', 'build'], { env: withPnpmOnPath(pnpm) });
    }
    const admin = join(root, 'services', 'gateway', 'dist', 'admin.js');
    process.exitCode = await foreground(process.execPath, [admin, ...rest], process.env);
    break;
  }
  default:
    process.stderr.write(
      'usage: node deploy/local/tw.mjs start|test|test:chaos|test:cluster|admin|tools|pnpm|node …\n',
    );
    process.exit(command === 'help' ? 0 : 2);
}
