import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testNatsAuth, uniqueDbPrefix, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStack, freePort, type LocalStack } from '../deploy/local/launcher.mjs';

// The ports the local launcher (deploy/local/launcher.mjs) picks for what it starts. A port is free
// only when it looks: another process (a stack of a test file running beside this one, an outgoing
// connection) may take it before the child binds it. Real nats-server, FerretDB and services; the
// launcher is only made to pick, first, a port something here already listens on.

describe('ports the launcher picks', () => {
  const holder = createServer();
  let taken: number;
  /** How often the launcher was handed the taken port. */
  let handedTaken = 0;
  const starts: string[] = [];
  const unexpectedExits: string[] = [];
  let dir: string;
  let stack: LocalStack;

  beforeAll(async () => {
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    taken = (holder.address() as AddressInfo).port;
    // The taken port first, and again after a free one, twice in all: the first port each of the
    // two processes that get one picked is given.
    let last: number | undefined;
    const choosePort = async () => {
      last = handedTaken < 2 && last !== taken ? taken : await freePort();
      if (last === taken) handedTaken += 1;
      return last;
    };
    dir = mkdtempSync(join(tmpdir(), 'threadwork-launcher-'));
    const natsAuth = testNatsAuth();
    const inherited = Object.entries(process.env).filter(
      (e): e is [string, string] => e[1] !== undefined && !/^(VITEST|NATS_|MONGO_|OTEL_|PORT$)/.test(e[0]),
    );
    stack = createStack({
      dir,
      nats: { config: natsAuth.config },
      ferret: {},
      natsKeys: natsAuth.keys,
      env: {
        ...Object.fromEntries(inherited),
        MONGO_DB_PREFIX: uniqueDbPrefix(),
        SESSION_SECRET: uniqueId('session-secret-').padEnd(48, 'x'),
        REPOHOST_LOCAL_DIR: join(dir, 'repos'),
        SANDBOX_ROOT: join(dir, 'sandboxes'),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
      },
      // runs answers its probes on a health port, the gateway on the port it serves: both picked.
      services: [{ role: 'runs' }, { role: 'gateway', ports: [] }],
      health: true,
      choosePort,
      onStart: (proc) => starts.push(proc.name),
      onExit: (proc) => unexpectedExits.push(proc.name),
    });
    await stack.start();
  });

  afterAll(async () => {
    await stack?.stop();
    holder.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('starts a service that could not bind a port it picked again, on another', async () => {
    expect(handedTaken, 'the first health port of runs and the first port of the gateway').toBe(2);
    const runs = stack.process('runs');
    const gateway = stack.process('gateway');
    expect(runs.healthPort).not.toBe(taken);
    expect(gateway.port).not.toBe(taken);
    expect(runs.alive() && runs.ready).toBe(true);
    expect(gateway.alive() && gateway.ready).toBe(true);
    expect(gateway.env.PORT).toBe(String(gateway.port));
    expect((await fetch(`http://127.0.0.1:${gateway.port}/readyz`)).ok).toBe(true);
    // The attempts that could not bind are neither announced nor reported as crashes.
    expect(starts).toEqual(['nats-server', 'ferretdb', 'runs', 'gateway']);
    expect(unexpectedExits).toEqual([]);
  });

  it('never moves a port the caller set: its start fails with the reason', async () => {
    await expect(stack.add('gateway', { PORT: String(taken) })).rejects.toThrow(
      new RegExp(`gateway-2 exited while starting:[\\s\\S]*EADDRINUSE[\\s\\S]*:${taken}\\b`),
    );
    expect(starts.filter((name) => name === 'gateway-2')).toEqual(['gateway-2']);
  });
});
