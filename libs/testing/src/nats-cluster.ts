import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, createLogger, jetStreamOf } from '@threadwork/platform';
import { startNatsServer, type LocalServer } from './servers.js';
import { waitFor } from './wait.js';

export interface ClusterNode {
  /** The server's name (`n1`, `n2`, …): what stream info reports as `cluster.leader`. */
  name: string;
  server: LocalServer;
}

export interface NatsCluster {
  nodes: ClusterNode[];
  /** Every node's client URL, comma-separated (as NATS_URL takes them). */
  url: string;
  /** The node named `name`. */
  node(name: string): ClusterNode;
  stop(): Promise<void>;
}

/** A free TCP port on loopback, for a cluster route (nats-server picks client ports itself). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * `size` nats-servers on loopback forming one JetStream cluster (no authorization): each with a
 * store directory of its own and a route to every other. Resolves once JetStream answers, i.e. the
 * cluster has elected its meta leader and streams can be created.
 */
export async function startNatsCluster({ binary, size = 3 }: { binary: string; size?: number }): Promise<NatsCluster> {
  const root = mkdtempSync(join(tmpdir(), 'threadwork-nats-cluster-'));
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) routePorts.push(await freePort());
  const routes = routePorts.map((port) => `nats-route://127.0.0.1:${port}`);
  const nodes: ClusterNode[] = [];
  try {
    const started = await Promise.all(
      routePorts.map(async (port, i) => {
        const name = `n${i + 1}`;
        const config = [
          `server_name: ${name}`,
          'cluster {',
          '  name: threadwork-test',
          `  listen: 127.0.0.1:${port}`,
          `  routes: [${routes.join(', ')}]`,
          '}',
          '',
        ].join('\n');
        return { name, server: await startNatsServer({ binary, dir: join(root, name), config }) };
      }),
    );
    nodes.push(...started);
  } catch (err) {
    await Promise.all(nodes.map(({ server }) => server.stop('SIGKILL')));
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
  const url = nodes.map(({ server }) => server.url).join(',');

  const logger = createLogger({ service: 'test-cluster', level: 'silent' });
  const nc = await connectNats({ servers: url, name: 'test-cluster', logger });
  try {
    await waitFor(
      'the JetStream cluster to elect its meta leader',
      async () => {
        const { jsm } = await jetStreamOf(nc);
        return jsm.getAccountInfo();
      },
      30_000,
      { tolerateErrors: true },
    );
  } finally {
    await nc.close();
  }

  return {
    nodes,
    url,
    node(name) {
      const found = nodes.find((n) => n.name === name);
      if (!found) throw new Error(`no cluster node named ${name}`);
      return found;
    },
    async stop() {
      await Promise.all(nodes.map(({ server }) => server.stop()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
