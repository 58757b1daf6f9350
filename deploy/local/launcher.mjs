// Threadwork's processes on one machine, from a description: nats-server and FerretDB, then each
// service (as many replicas as asked) as a process of its own, run from its build. `npm start`
// (stack.mjs), the benchmarks (bench/lib/stack.mjs) and the fault tests (test/chaos) all start
// their deployments here, so all three run the services the same way; what each prints, measures
// or breaks stays with it. Every process gets SIGTERM if we die (spawnGuarded), has a handle to
// stop, kill -9, freeze, thaw or restart it by pid, and everything stops in reverse order of
// starting. Dependency-free, like servers.mjs.
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { spawnGuarded, startFerretDb, startNatsServer } from './servers.mjs';
import { ensureTool } from './tools.mjs';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Every service in the order they start: those that others call come first; they stop in reverse. */
export const SERVICES = ['runs', 'repohost', 'review', 'threads', 'runner', 'gateway'];

// A hang guard for one service's readiness, not a budget.
const READY_GUARD_MS = 30_000;
const DEFAULT_OUTPUT_LIMIT = 256 * 1024;
const DEFAULT_STOP_TIMEOUT_MS = 15_000;
// A port we pick is free only when we look: until the child binds it, another process (a stack
// starting beside ours, an outgoing connection's ephemeral port) may take it. A child that could
// not bind one we picked starts again on new ones, this many times in all.
const BIND_ATTEMPTS = 5;

/** A port nothing listens on now (the kernel picks it; it is free again once we close). */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/** The built entry of a service. */
export function serviceScript(role) {
  const main = join(root, 'services', role, 'dist', 'main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: the services run from their build (npm run build)`);
  return main;
}

/** The newest part of what a process printed, line by line, and each line to `onLine` as it comes. */
function outputOf(limit, onLine) {
  let text = '';
  return {
    add(line) {
      text += `${line}\n`;
      if (text.length > limit) text = text.slice(-Math.floor(limit / 2));
      onLine(line);
    },
    text: () => text,
  };
}

function eachLine(stream, fn) {
  let buffered = '';
  stream.on('data', (chunk) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) if (line.trim()) fn(line);
  });
}

/** Did the process fail to bind `port` because something else has it? */
function couldNotBind(output, port) {
  return new RegExp(`EADDRINUSE.*:${port}\\b`).test(output);
}

function signal(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * A stack as described; nothing runs until `start()`. See launcher.d.mts for the description and
 * the handles.
 */
export function createStack(options) {
  const {
    dir,
    nats,
    ferret,
    natsKeys,
    services = [],
    health = false,
    stopTimeoutMs = DEFAULT_STOP_TIMEOUT_MS,
    outputLimit = DEFAULT_OUTPUT_LIMIT,
    onLine = () => {},
    onStart = () => {},
    onExit = () => {},
    onStopError = () => {},
    choosePort = freePort,
  } = options;
  const env = { ...options.env };
  /** One per process started, in order of first start; a restart replaces the process in its place. */
  const slots = [];
  const replicaCounts = new Map();
  let starting = Promise.resolve();
  let stopping = false;

  const slotOf = (name) => slots.find((slot) => slot.name === name);

  /** A handle's exit is reported unless we stopped or replaced it ourselves. */
  function watch(handle) {
    void handle.exited.then((exit) => {
      if (!handle.retired) onExit(handle, exit);
    });
  }

  async function startServer(name, port) {
    const handle = { kind: 'server', name, role: name, replica: 1, env: {}, retired: false };
    const output = outputOf(outputLimit, (line) => onLine(handle, line));
    const spec = name === 'nats-server' ? nats : ferret;
    const common = { binary: ensureTool(name), port, onLine: output.add };
    const server =
      name === 'nats-server'
        ? await startNatsServer({ ...common, dir: join(dir, 'nats'), config: spec.config })
        : await startFerretDb({ ...common, dir: join(dir, 'ferretdb') });
    let gone = false;
    void server.exited.then(() => (gone = true));
    Object.assign(handle, {
      pid: server.pid,
      url: server.url,
      port: server.port,
      exited: server.exited,
      alive: () => !gone,
      output: output.text,
      stop: () => server.stop(),
      kill: () => server.stop('SIGKILL'),
      pause: () => signal(server.pid, 'SIGSTOP'),
      resume: () => signal(server.pid, 'SIGCONT'),
    });
    watch(handle);
    return handle;
  }

  /**
   * Starts a service in its place. With `health`, or on a port we picked, it has started once it
   * answers /readyz; one that exits before, not able to bind a port we picked, starts again on new
   * ones. Only the attempt kept is announced (onStart) and watched.
   */
  async function startService(slot, override = {}) {
    for (let attempt = 1; ; attempt++) {
      // The gateway answers its probes on the port it serves; the others on a port of their own.
      const healthPort = health && slot.spec.role !== 'gateway' ? await choosePort() : undefined;
      const { handle, picked, closed } = spawnService(slot, override, healthPort);
      slot.current = handle;
      try {
        if (health || picked.length > 0) await waitReady(handle, closed);
      } catch (err) {
        const taken = handle.alive() ? [] : picked.filter((port) => couldNotBind(handle.output(), port));
        if (taken.length === 0 || attempt === BIND_ATTEMPTS || stopping) {
          watch(handle);
          onStart(handle);
          throw err;
        }
        handle.retired = true;
        if (taken.includes(slot.port)) slot.port = await choosePort();
        continue;
      }
      watch(handle);
      onStart(handle);
      return handle;
    }
  }

  /** One process of a service, not waited for; `picked`: the ports we chose that it is given. */
  function spawnService(slot, override, healthPort) {
    const { spec, name, replica } = slot;
    const role = spec.role;
    const ownEnv = typeof spec.env === 'function' ? spec.env(replica) : (spec.env ?? {});
    const identity = spec.identity ?? role;
    const procEnv = {
      ...env,
      ...(natsKeys ? { NATS_NKEY_SEED: natsKeys[identity].seed } : {}),
      ...(health ? { HEALTH_PORT: String(healthPort ?? 0) } : {}),
      ...(slot.port !== undefined ? { PORT: String(slot.port) } : {}),
      ...ownEnv,
      ...slot.extraEnv,
      ...override,
    };
    for (const key of spec.withhold ?? []) delete procEnv[key];
    // Ports the caller set (in the env, or over ours) are theirs: never moved.
    const picked = [
      ...(healthPort !== undefined && procEnv.HEALTH_PORT === String(healthPort) ? [healthPort] : []),
      ...(slot.portPicked && procEnv.PORT === String(slot.port) ? [slot.port] : []),
    ];
    const nodeArgs = typeof spec.nodeArgs === 'function' ? spec.nodeArgs(replica) : (spec.nodeArgs ?? []);
    const child = spawnGuarded(process.execPath, [...nodeArgs, spec.script ?? serviceScript(role)], {
      cwd: root,
      env: procEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const alive = () => child.exitCode === null && child.signalCode === null;
    const exited = new Promise((done) => child.once('exit', (code, sig) => done({ code, signal: sig })));
    const closed = new Promise((done) => child.once('close', done));
    const handle = {
      kind: 'service',
      name,
      role,
      replica,
      pid: child.pid,
      env: procEnv,
      port: procEnv.PORT === undefined ? undefined : Number(procEnv.PORT),
      healthPort,
      ready: false,
      retired: false,
      exited,
      alive,
      output: () => output.text(),
      async stop() {
        if (!alive()) return;
        child.kill('SIGTERM');
        const killer = setTimeout(() => alive() && child.kill('SIGKILL'), stopTimeoutMs);
        await exited;
        clearTimeout(killer);
      },
      async kill() {
        if (alive()) child.kill('SIGKILL');
        await exited;
      },
      pause: () => signal(child.pid, 'SIGSTOP'),
      resume: () => signal(child.pid, 'SIGCONT'),
    };
    const output = outputOf(outputLimit, (line) => onLine(handle, line));
    eachLine(child.stdout, output.add);
    eachLine(child.stderr, output.add);
    return { handle, picked, closed };
  }

  /** `closed`: its output has all come through (after it exited). */
  async function waitReady(handle, closed) {
    const url = `http://127.0.0.1:${handle.healthPort ?? handle.port}/readyz`;
    const deadline = Date.now() + READY_GUARD_MS;
    while (!stopping) {
      if (!handle.alive()) {
        // Why it exited, its last lines, may still be on their way through the pipes.
        await closed;
        throw new Error(`${handle.name} exited while starting:\n${handle.output()}`);
      }
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
        if (res.ok) {
          handle.ready = true;
          return;
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${handle.name} was not ready at ${url}:\n${handle.output()}`);
      await sleep(100);
    }
  }

  async function addServer(name) {
    const slot = { kind: 'server', name };
    slots.push(slot);
    slot.current = await startServer(name, undefined);
    if (name === 'nats-server') env.NATS_URL = slot.current.url;
    else env.MONGO_URL = slot.current.url;
    onStart(slot.current);
  }

  /** A new place for one replica of `spec`: its name, number and port. */
  async function newServiceSlot(spec, numbered, extraEnv = {}) {
    const replica = (replicaCounts.get(spec.role) ?? 0) + 1;
    replicaCounts.set(spec.role, replica);
    const wanted = spec.ports?.[replica - 1];
    const portPicked = spec.ports !== undefined && !wanted;
    const slot = {
      kind: 'service',
      spec,
      replica,
      port: portPicked ? await choosePort() : wanted,
      portPicked,
      extraEnv,
      name: numbered ? `${spec.role}-${replica}` : spec.role,
    };
    slots.push(slot);
    return slot;
  }

  const stack = {
    env,
    get stopping() {
      return stopping;
    },
    /** The current process of every place, in order of starting. */
    get processes() {
      return slots.filter((slot) => slot.current).map((slot) => slot.current);
    },
    process(name) {
      const found = slotOf(name)?.current;
      if (!found) throw new Error(`no process ${name} (have ${stack.processes.map((p) => p.name).join(', ')})`);
      return found;
    },
    start() {
      starting = (async () => {
        if (nats?.url) env.NATS_URL = nats.url;
        else if (nats && !stopping) await addServer('nats-server');
        if (ferret?.url) env.MONGO_URL = ferret.url;
        else if (ferret && !stopping) await addServer('ferretdb');
        for (const spec of services) {
          const count = spec.replicas ?? 1;
          for (let i = 0; i < count; i++) {
            if (stopping) return;
            await startService(await newServiceSlot(spec, spec.replicas !== undefined));
          }
        }
      })();
      return starting;
    },
    /** One more replica of `role` (as described, plus `extraEnv`), named `<role>-<n>`. */
    async add(role, extraEnv = {}) {
      const spec = services.find((s) => s.role === role) ?? { role };
      return startService(await newServiceSlot(spec, true, extraEnv));
    },
    /**
     * Stops a process (`crash`: kill -9) and starts it again in its place: a service with the same
     * name and settings (plus `env`, for this start only), a server on the same port and store.
     */
    async restart(name, { crash = false, env: override, downMs = 0 } = {}) {
      const slot = slotOf(name);
      if (!slot?.current) throw new Error(`no process ${name}`);
      const old = slot.current;
      old.retired = true;
      await (crash ? old.kill() : old.stop());
      if (downMs) await sleep(downMs);
      if (slot.kind === 'service') return startService(slot, override);
      slot.current = await startServer(name, old.port);
      onStart(slot.current);
      return slot.current;
    },
    /** Stops every process, newest place first. Safe to call twice, and while starting. */
    async stop() {
      stopping = true;
      await starting.catch(() => {});
      for (const slot of [...slots].reverse()) {
        const proc = slot.current;
        if (!proc) continue;
        proc.retired = true;
        await proc.stop().catch((err) => onStopError(proc, err));
      }
    },
  };
  return stack;
}
