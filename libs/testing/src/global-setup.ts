import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ensureTool } from '../../../deploy/local/tools.mjs';
import { startFerretDb, startNatsServer, type LocalServer } from './servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    natsUrl: string;
    mongoUrl: string;
    /** Where the servers came from: `env`, `local` or `containers`. */
    infra: string;
    /** Binaries, when `local` (tests that restart or kill a server start their own). */
    natsServerBin: string;
    ferretdbBin: string;
  }
}

function dockerReachable(): boolean {
  return spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 10_000 }).status === 0;
}

/**
 * Gives the test run its own NATS (JetStream) and MongoDB-wire server: the ones named by NATS_URL
 * and MONGO_URL when given; containers (mongo:7, nats:2.12) when TEST_INFRA=containers and a
 * Docker engine answers; otherwise local nats-server and FerretDB binaries on random ports with
 * their data in a temporary directory. Torn down by pid at the end.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Tests that kill or restart a server start their own from these binaries; they are built only
  // when this run starts local servers anyway.
  project.provide('natsServerBin', '');
  project.provide('ferretdbBin', '');

  if (process.env.NATS_URL && process.env.MONGO_URL) {
    project.provide('natsUrl', process.env.NATS_URL);
    project.provide('mongoUrl', process.env.MONGO_URL);
    project.provide('infra', 'env');
    return async () => {};
  }

  if (process.env.TEST_INFRA === 'containers' && dockerReachable()) {
    const { GenericContainer, Wait } = await import('testcontainers');
    const [mongo, nats] = await Promise.all([
      new GenericContainer('mongo:7')
        .withExposedPorts(27017)
        .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
        .start(),
      new GenericContainer('nats:2.12')
        .withCommand(['-js'])
        .withExposedPorts(4222)
        .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
        .start(),
    ]);
    project.provide('natsUrl', `nats://${nats.getHost()}:${nats.getMappedPort(4222)}`);
    project.provide('mongoUrl', `mongodb://${mongo.getHost()}:${mongo.getMappedPort(27017)}/`);
    project.provide('infra', 'containers');
    return async () => {
      await Promise.all([mongo.stop(), nats.stop()]);
    };
  }

  const natsBin = ensureTool('nats-server');
  const ferretBin = ensureTool('ferretdb');
  project.provide('natsServerBin', natsBin);
  project.provide('ferretdbBin', ferretBin);
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-test-'));
  const started: LocalServer[] = [];
  try {
    const [nats, ferret] = await Promise.all([
      startNatsServer({ binary: natsBin, dir: join(dir, 'nats') }),
      startFerretDb({ binary: ferretBin, dir: join(dir, 'ferretdb') }),
    ]);
    started.push(nats, ferret);
    project.provide('natsUrl', nats.url);
    project.provide('mongoUrl', ferret.url);
    project.provide('infra', 'local');
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  return async () => {
    await Promise.all(started.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
}
