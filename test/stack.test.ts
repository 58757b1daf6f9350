import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Svcm } from '@nats-io/services';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface StackFile {
  natsUrl: string;
  mongoUrl: string;
  gatewayUrl: string;
  processes: { name: string; pid: number }[];
}

/**
 * The local stack as `npm start` runs it (after its build step): real nats-server and FerretDB,
 * every service as its own process, stopped by SIGTERM with nothing left behind.
 */
describe('local stack', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'threadwork-stack-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('starts, answers health, issues working keys and stops cleanly', { timeout: 120_000 }, async () => {
    expect(
      existsSync(join(root, 'services', 'gateway', 'dist', 'main.js')),
      'services are built (npm test builds them)',
    ).toBe(true);
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, THREADWORK_DATA_DIR: dataDir, PORT: String(port) };
    delete env.NATS_URL;
    delete env.MONGO_URL;
    const stack = spawn(process.execPath, [join(root, 'deploy', 'local', 'stack.mjs')], {
      cwd: root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    stack.stdout.on('data', (c: Buffer) => (output += c.toString()));
    stack.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((r) => stack.once('exit', (code) => r(code)));

    try {
      const deadline = Date.now() + 60_000;
      while (!/ready: /.test(output)) {
        if (Date.now() > deadline || stack.exitCode !== null) throw new Error(`stack did not become ready:\n${output}`);
        await new Promise((r) => setTimeout(r, 100));
      }

      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);

      const info = JSON.parse(readFileSync(join(dataDir, 'stack.json'), 'utf8')) as StackFile;
      expect(info.processes.map((p) => p.name)).toEqual([
        'nats-server',
        'ferretdb',
        'runs',
        'repohost',
        'review',
        'threads',
        'runner',
        'gateway',
      ]);

      // Every service with request/reply endpoints answers a NATS service PING.
      const nc = await connect({ servers: info.natsUrl });
      const pings = [];
      for await (const ping of await new Svcm(nc).client({ strategy: 'timer', maxWait: 1_000 }).ping())
        pings.push(ping.name);
      await nc.close();
      expect(pings.sort()).toEqual(['repohost', 'review', 'runs', 'threads']);

      // The admin CLI finds the running stack through the data directory.
      const admin = spawnSync(
        process.execPath,
        [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'keys', 'create', '--user', 'alice'],
        {
          cwd: root,
          env,
          encoding: 'utf8',
        },
      );
      expect(admin.status, admin.stderr).toBe(0);
      const key = admin.stdout.trim().split('\n').at(-1)!;
      expect(key).toMatch(/^twk_[0-9A-Za-z]{40}$/);

      const anonymous = await fetch(`http://127.0.0.1:${port}/v1/work`);
      expect(anonymous.status).toBe(401);
      expect(await anonymous.json()).toEqual({ error: 'Unauthorized' });
      const authed = await fetch(`http://127.0.0.1:${port}/v1/work`, { headers: { authorization: `Bearer ${key}` } });
      expect(authed.status).toBe(200);
      expect(await authed.json()).toEqual({ projects: [] });

      // A session cookie issued by the CLI is signed with the stack's own secret.
      const session = spawnSync(
        process.execPath,
        [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'sessions', 'create', '--user', 'alice'],
        {
          cwd: root,
          env,
          encoding: 'utf8',
        },
      );
      expect(session.status, session.stderr).toBe(0);
      const cookie = session.stdout
        .trim()
        .split('\n')
        .at(-1)!
        .replace(/^Cookie: /, '');
      const withCookie = await fetch(`http://127.0.0.1:${port}/v1/tasks`, { headers: { cookie } });
      expect(withCookie.status).toBe(200);

      const listed = spawnSync(
        process.execPath,
        [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'users', 'list'],
        { cwd: root, env, encoding: 'utf8' },
      );
      expect(listed.stdout).toContain('alice');

      stack.kill('SIGTERM');
      expect(await exited).toBe(0);
      for (const { name, pid } of info.processes) expect(alive(pid), `${name} (pid ${pid}) still running`).toBe(false);
      expect(existsSync(join(dataDir, 'stack.json'))).toBe(false);

      // With the stack gone, the CLI says so instead of hanging.
      const orphan = spawnSync(
        process.execPath,
        [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'users', 'list'],
        { cwd: root, env, encoding: 'utf8', timeout: 20_000 },
      );
      expect(orphan.status).toBe(1);
      expect(orphan.stderr).toMatch(/npm start/);
    } finally {
      if (stack.exitCode === null) {
        stack.kill('SIGTERM');
        const timer = setTimeout(() => stack.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(timer);
      }
    }
  });
});
