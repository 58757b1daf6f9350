import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '..', '..');

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface StackFile {
  natsUrl: string;
  mongoUrl: string;
  gatewayUrl: string;
  processes: { name: string; pid: number }[];
}

export interface ProcessStack {
  /** The gateway's: picked by the stack, known once it is ready. */
  port: number;
  dataDir: string;
  env: NodeJS.ProcessEnv;
  child: ChildProcess;
  output(): string;
  info(): StackFile;
  /** Runs the admin CLI against this stack. */
  admin(...args: string[]): SpawnSyncReturns<string>;
  /** SIGTERM, then SIGKILL after 20 s; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** Removes the data directory (after stop). */
  cleanUp(): void;
}

/**
 * The local stack as `npm start` runs it (after its build step): real nats-server and FerretDB,
 * every service as its own process. Resolves once the gateway is ready.
 */
export async function startProcessStack(extraEnv: Record<string, string> = {}): Promise<ProcessStack> {
  const dataDir = mkdtempSync(join(tmpdir(), 'threadwork-stack-'));
  // The stack picks the gateway's port itself, and picks again should another process (a stack of
  // a test file running beside this one) take it first; a port picked here could be taken too.
  const env: NodeJS.ProcessEnv = { ...process.env, THREADWORK_DATA_DIR: dataDir, PORT: '0', ...extraEnv };
  delete env.NATS_URL;
  delete env.MONGO_URL;
  const child = spawn(process.execPath, [join(root, 'deploy', 'local', 'stack.mjs')], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));

  const stack: ProcessStack = {
    port: 0,
    dataDir,
    env,
    child,
    output: () => output,
    info: () => JSON.parse(readFileSync(join(dataDir, 'stack.json'), 'utf8')) as StackFile,
    admin: (...args) =>
      spawnSync(process.execPath, [join(root, 'services', 'gateway', 'dist', 'admin.js'), ...args], {
        cwd: root,
        env,
        encoding: 'utf8',
        timeout: 20_000,
      }),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        const code = await exited;
        clearTimeout(timer);
        return code;
      }
      return exited;
    },
    cleanUp: () => rmSync(dataDir, { recursive: true, force: true }),
  };

  const deadline = Date.now() + 60_000;
  while (!/ready: /.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) {
      await stack.stop();
      stack.cleanUp();
      throw new Error(`stack did not become ready:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  stack.port = Number(new URL(stack.info().gatewayUrl).port);
  return stack;
}
