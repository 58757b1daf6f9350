// Pinned local infrastructure: nats-server, FerretDB (through our launcher), helm and a Kubernetes
// control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, for the
// chart's cluster test), built with the Go toolchain and cached outside the repository, so a second
// run is instant and a fresh machine builds each one once. Dependency-free on purpose: it runs
// before `pnpm install`.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

const KUBE_VERSION = 'v1.37.2';

/** What Kubernetes' release build stamps in: without it `/version` says v0.0.0, which charts' `kubeVersion` checks refuse. */
function kubeVersionFlags(version) {
  const [major, minor] = version.slice(1).split('.');
  const pkg = 'k8s.io/component-base/version';
  return [`-X ${pkg}.gitVersion=${version}`, `-X ${pkg}.gitMajor=${major}`, `-X ${pkg}.gitMinor=${minor}`];
}

export const TOOLS = {
  'nats-server': {
    version: 'v2.12.15',
    module: 'github.com/nats-io/nats-server/v2',
    about: 'NATS server with JetStream',
    minutes: '1-2',
  },
  ferretdb: {
    version: 'v1.24.2',
    // Built from our own launcher module (deploy/local/ferretdb-launcher), which pins FerretDB in
    // its go.mod: `go install .../cmd/ferretdb` builds a binary that panics at start.
    launcher: join(here, 'ferretdb-launcher'),
    binary: 'ferretdb-launcher',
    // With one patch to FerretDB's SQLite backend: a filter naming a string `_id` reads that one
    // row also when it has other conditions (a conditional update: `{_id, status}`), where it read
    // every row of the collection. MongoDB serves such a filter from its _id index; unpatched, every
    // move of a run costs a scan of all runs, which grows with the database. The handler still
    // applies the whole filter, as FerretDB's backend contract allows ("Filter may be ignored, or
    // safely applied partially").
    patch: join(here, 'patches', 'ferretdb-v1.24.2-id-lookup.patch'),
    patchModule: 'github.com/FerretDB/FerretDB',
    about: 'FerretDB (MongoDB wire protocol on SQLite)',
    minutes: '2-4',
    revision: 4,
  },
  helm: {
    version: 'v3.21.4',
    module: 'helm.sh/helm/v3/cmd/helm',
    about: 'helm',
    minutes: '2-3',
    // What helm's release build stamps in: without it `helm version` says "v3.21" and the default
    // Kubernetes version is 1.20. 1.36 is the client-go minor this helm is built against.
    ldflags: [
      '-X helm.sh/helm/v3/internal/version.version=v3.21.4',
      '-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1',
      '-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=36',
      '-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1',
      '-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=36',
    ],
    // Bumped when the build itself changes, so caches of an older build are not reused.
    revision: 1,
  },
  // The control plane is built from our own module (deploy/local/kube-control-plane): `go install`
  // of these commands fails, since k8s.io/kubernetes replaces its staging modules with directories.
  etcd: {
    version: 'v3.7.0',
    launcher: join(here, 'kube-control-plane'),
    package: './etcd',
    about: 'etcd',
    minutes: '1',
  },
  'kube-apiserver': {
    version: KUBE_VERSION,
    launcher: join(here, 'kube-control-plane'),
    package: 'k8s.io/kubernetes/cmd/kube-apiserver',
    about: 'kube-apiserver',
    minutes: '20-40',
    ldflags: kubeVersionFlags(KUBE_VERSION),
  },
  'kube-controller-manager': {
    version: KUBE_VERSION,
    launcher: join(here, 'kube-control-plane'),
    package: 'k8s.io/kubernetes/cmd/kube-controller-manager',
    about: 'kube-controller-manager',
    minutes: '5-10',
    ldflags: kubeVersionFlags(KUBE_VERSION),
  },
  'kube-scheduler': {
    version: KUBE_VERSION,
    launcher: join(here, 'kube-control-plane'),
    package: 'k8s.io/kubernetes/cmd/kube-scheduler',
    about: 'kube-scheduler',
    minutes: '1-3',
    ldflags: kubeVersionFlags(KUBE_VERSION),
  },
  // Simulated nodes: pods on them turn Running and Ready without a container runtime.
  kwok: {
    version: 'v0.8.0',
    // Built from the module's source with a patch to its exec (which runs the command on this
    // machine) so that it does what a kubelet does: the command's stdin is closed once the client's
    // is (else `cat` never ends), and a non-zero exit is reported with its code (else the exec API
    // says only "internal error").
    module: 'sigs.k8s.io/kwok',
    package: './cmd/kwok',
    patch: join(here, 'patches', 'kwok-v0.8.0-exec.patch'),
    about: 'kwok',
    minutes: '3-6',
    revision: 1,
  },
};

/** The control plane's tools, in the order a cold build should take them (the longest last). */
export const CONTROL_PLANE_TOOLS = ['etcd', 'kube-scheduler', 'kwok', 'kube-controller-manager', 'kube-apiserver'];

export function toolsDir() {
  const base =
    process.env.THREADWORK_TOOLS_DIR ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'threadwork', 'tools');
  return resolve(base);
}

/** Absolute path of a tool's binary in the cache (it may not be built yet). */
export function toolPath(name) {
  const tool = TOOLS[name];
  if (!tool) throw new Error(`unknown tool ${name}`);
  const dir = tool.revision ? `${name}-${tool.version}-r${tool.revision}` : `${name}-${tool.version}`;
  return join(toolsDir(), dir, tool.binary ?? name);
}

function findGo() {
  const candidates = [process.env.GO, 'go', '/usr/local/go/bin/go'].filter(Boolean);
  for (const candidate of candidates) {
    const probe = spawnSync(candidate, ['version'], { encoding: 'utf8' });
    if (probe.status === 0) return candidate;
  }
  return null;
}

class MissingGoError extends Error {}

/** Whether a Go toolchain is here to build the tools that are not cached yet. */
export function haveGo() {
  return findGo() !== null;
}

/** Whether every named tool is built and cached already. */
export function toolsCached(names) {
  return names.every((name) => {
    const target = toolPath(name);
    return existsSync(target) && statSync(target).size > 0;
  });
}

/**
 * Builds `name` unless its pinned binary is already cached; returns the binary's path.
 * Builds into a temporary directory and renames, so an interrupted build never leaves a
 * half-written binary behind that a later run would trust.
 */
export function ensureTool(name, { log = (line) => process.stderr.write(line + '\n') } = {}) {
  const tool = TOOLS[name];
  const target = toolPath(name);
  if (existsSync(target) && statSync(target).size > 0) return target;

  const go = findGo();
  if (!go) {
    throw new MissingGoError(
      `threadwork: ${name} ${tool.version} is not built and no Go toolchain was found. ` +
        `Install Go 1.24+ (https://go.dev/dl/, or 'apt-get install golang'), or point at running servers with NATS_URL and MONGO_URL.`,
    );
  }

  const finalDir = dirname(target);
  const tmpDir = `${finalDir}.tmp-${process.pid}`;
  rmSync(tmpDir, { recursive: true, force: true });
  mkdirSync(tmpDir, { recursive: true });

  log(`threadwork: building ${tool.about} ${tool.version} with Go (first time only, about ${tool.minutes} min)…`);
  const started = Date.now();
  const env = { ...process.env, GOBIN: tmpDir, CGO_ENABLED: '0', GOFLAGS: '-mod=mod' };
  const ldflags = tool.ldflags ? ['-ldflags', tool.ldflags.join(' ')] : [];
  const result = tool.patchModule
    ? buildLauncherPatched(go, tool, name, tmpDir, env, ldflags)
    : tool.launcher
      ? spawnSync(
          go,
          ['build', '-trimpath', ...ldflags, '-o', join(tmpDir, tool.binary ?? name), tool.package ?? '.'],
          {
            cwd: tool.launcher,
            env,
            stdio: ['ignore', 'inherit', 'inherit'],
          },
        )
      : tool.patch
        ? buildPatched(go, tool, name, tmpDir, env, ldflags)
        : spawnSync(go, ['install', '-trimpath', ...ldflags, `${tool.module}@${tool.version}`], {
            env,
            stdio: ['ignore', 'inherit', 'inherit'],
          });
  if (result.status !== 0) {
    rmSync(tmpDir, { recursive: true, force: true });
    throw new Error(`threadwork: building ${name} ${tool.version} failed (exit ${result.status ?? result.signal})`);
  }

  // Another process (a parallel test run, say) may have finished the same build meanwhile.
  if (existsSync(target)) {
    rmSync(tmpDir, { recursive: true, force: true });
    return target;
  }
  rmSync(finalDir, { recursive: true, force: true });
  try {
    renameSync(tmpDir, finalDir);
  } catch (err) {
    rmSync(tmpDir, { recursive: true, force: true });
    if (!existsSync(target)) throw err;
  }
  log(`threadwork: built ${name} ${tool.version} in ${Math.round((Date.now() - started) / 1000)} s → ${target}`);
  return target;
}

/**
 * Copies `module`'s source as the proxy serves it (`go mod download` from `cwd`, checked against the
 * checksum database and, in a module, its go.sum) out of the read-only module cache into `dir`, and
 * applies `tool.patch` to it. Returns the result of the step that failed, or null.
 */
function patchedSource(go, { module, cwd, dir, tool, tmpDir, env }) {
  const download = spawnSync(go, ['mod', 'download', '-json', module], {
    cwd,
    env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (download.status !== 0) return download;
  cpSync(JSON.parse(download.stdout).Dir, dir, { recursive: true });
  spawnSync('chmod', ['-R', 'u+w', dir]);
  // Outside any repository (a tools directory inside one would make git apply the paths to its root).
  const patched = spawnSync('git', ['apply', '--verbose', tool.patch], {
    cwd: dir,
    env: { ...process.env, GIT_CEILING_DIRECTORIES: tmpDir },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return patched.status === 0 ? null : patched;
}

/**
 * Builds a module's command from a patched copy of its source: the module as the proxy serves it
 * (`go mod download`, checked against the checksum database), copied out of the read-only module
 * cache, the patch applied, then built with the module's own go.mod and go.sum.
 */
function buildPatched(go, tool, name, tmpDir, env, ldflags) {
  const src = join(tmpDir, 'src');
  const failed = patchedSource(go, {
    module: `${tool.module}@${tool.version}`,
    cwd: tmpDir,
    dir: src,
    tool,
    tmpDir,
    env,
  });
  if (failed) return failed;
  const built = spawnSync(
    go,
    ['build', '-trimpath', ...ldflags, '-o', join(tmpDir, tool.binary ?? name), tool.package],
    {
      cwd: src,
      env,
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  rmSync(src, { recursive: true, force: true });
  return built;
}

/**
 * Builds our launcher module against a patched copy of one of its dependencies (`patchModule`, at
 * the version the launcher's go.mod pins, checked against its go.sum): the dependency and the
 * launcher are copied out, the patch applied to the one, and the other built with a `replace`
 * pointing at it.
 */
function buildLauncherPatched(go, tool, name, tmpDir, env, ldflags) {
  const dependency = join(tmpDir, 'dependency');
  const launcher = join(tmpDir, 'launcher');
  const failed = patchedSource(go, {
    module: tool.patchModule,
    cwd: tool.launcher,
    dir: dependency,
    tool,
    tmpDir,
    env,
  });
  if (failed) return failed;
  cpSync(tool.launcher, launcher, { recursive: true });
  spawnSync('chmod', ['-R', 'u+w', launcher]);
  const replaced = spawnSync(go, ['mod', 'edit', `-replace=${tool.patchModule}=${dependency}`], {
    cwd: launcher,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (replaced.status !== 0) return replaced;
  const built = spawnSync(go, ['build', '-trimpath', ...ldflags, '-o', join(tmpDir, tool.binary ?? name), '.'], {
    cwd: launcher,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  rmSync(dependency, { recursive: true, force: true });
  rmSync(launcher, { recursive: true, force: true });
  return built;
}

/** Ensures every named tool; prints one clear line and exits when Go is missing. */
export function ensureTools(names) {
  try {
    return Object.fromEntries(names.map((name) => [name, ensureTool(name)]));
  } catch (err) {
    if (err instanceof MissingGoError) {
      process.stderr.write(err.message + '\n');
      process.exit(1);
    }
    throw err;
  }
}

/** The Node.js release everything runs on: `.node-version`, which the Dockerfile's image matches. */
export const NODE_VERSION = readFileSync(join(here, '..', '..', '.node-version'), 'utf8').trim();

/** Whether this Node is of the pinned release line (its major), which the workspace is built for. */
export function isPinnedNode(version = process.versions.node) {
  return version.split('.')[0] === NODE_VERSION.split('.')[0];
}

/**
 * The pinned Node's binary: installed once from the npm registry's per-platform package
 * (`node-<platform>-<arch>`, the binary of the official release) into the tools cache, like pnpm,
 * so a machine with an older Node still runs everything on the supported LTS line.
 */
export function ensureNode({ log = (line) => process.stderr.write(line + '\n') } = {}) {
  const pkg = `node-${process.platform}-${process.arch}`;
  const prefix = join(toolsDir(), `node-${NODE_VERSION}`);
  const bin = join(prefix, 'node_modules', pkg, 'bin', 'node');
  if (existsSync(bin)) return bin;

  log(`threadwork: installing Node.js ${NODE_VERSION} into ${prefix} (first time only)…`);
  const tmp = `${prefix}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const result = spawnSync(
    'npm',
    ['install', '--prefix', tmp, '--no-save', '--no-package-lock', '--loglevel=error', `${pkg}@${NODE_VERSION}`],
    { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, npm_config_update_notifier: 'false' } },
  );
  const built = join(tmp, 'node_modules', pkg, 'bin', 'node');
  if (result.status !== 0 || !existsSync(built)) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(
      `threadwork: could not install Node.js ${NODE_VERSION} (${pkg} from the npm registry); install Node ${NODE_VERSION.split('.')[0]} yourself and run again`,
    );
  }
  if (existsSync(bin)) {
    rmSync(tmp, { recursive: true, force: true });
    return bin;
  }
  rmSync(prefix, { recursive: true, force: true });
  try {
    renameSync(tmp, prefix);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(bin)) throw err;
  }
  return bin;
}

/** Debian packages the stack needs from the system, by the file that shows each one is installed. */
const SYSTEM_PACKAGES = {
  // The jail around each sandbox's harness (the runner's SANDBOX_JAIL).
  bubblewrap: '/usr/bin/bwrap',
  // The headless browser the console's tests drive (test/console, through playwright-core).
  chromium: '/usr/bin/chromium',
  // The cluster test: kwok's kubelet certificate, and kwok as pid 1 of a pid namespace of its own.
  openssl: '/usr/bin/openssl',
  'util-linux': '/usr/bin/unshare',
};

/**
 * Installs the missing system packages with apt-get when this process may (root, Debian); otherwise
 * says what to install. Without bubblewrap the runner runs harnesses unjailed (SANDBOX_JAIL=auto);
 * without chromium the console's browser tests are skipped.
 */
export function ensureSystemPackages(names = Object.keys(SYSTEM_PACKAGES)) {
  const missing = names.filter((name) => !existsSync(SYSTEM_PACKAGES[name]));
  if (missing.length === 0) return;
  const aptGet = '/usr/bin/apt-get';
  if (process.getuid?.() !== 0 || !existsSync(aptGet)) {
    process.stderr.write(
      `threadwork: missing system packages: ${missing.join(' ')} — install them (Debian: apt-get install ${missing.join(' ')})\n`,
    );
    return;
  }
  process.stderr.write(`threadwork: installing ${missing.join(' ')} with apt-get (first time only)…\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    spawnSync(aptGet, ['install', '-y', '--no-install-recommends', ...missing], {
      env,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  if (install().status !== 0) {
    spawnSync(aptGet, ['update'], { env, stdio: ['ignore', 'inherit', 'inherit'] });
    if (install().status !== 0) process.stderr.write(`threadwork: apt-get could not install ${missing.join(' ')}\n`);
  }
}
