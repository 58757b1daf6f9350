import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, createLogger, jetStreamOf, type NatsAuth } from '@threadwork/platform';
import { startNatsServer, type LocalServer } from './servers.js';
import { waitFor } from './wait.js';

export interface ClusterNode {
  /** The server's name (`n1`, `n2`, …): what stream info reports as `cluster.leader`. */
  name: string;
  /** Its current process (a restart replaces it). */
  server: LocalServer;
}

export interface NatsCluster {
  nodes: ClusterNode[];
  /** Every node's client URL, comma-separated (as NATS_URL takes them). */
  url: string;
  /** The node named `name`. */
  node(name: string): ClusterNode;
  /**
   * Stops a node (`crash`: kill -9) and starts it again on the same client port, routes and store:
   * it rejoins the cluster and catches its streams up from their leaders.
   */
  restart(name: string, opts?: { crash?: boolean }): Promise<ClusterNode>;
  stop(): Promise<void>;
}

export interface NatsClusterOptions {
  binary: string;
  size?: number;
  /** More of each server's configuration file (an `authorization` block: who may connect). */
  config?: string;
  /** How the cluster's own check connects, when `config` asks for credentials. */
  auth?: NatsAuth;
  /** Each line a server prints, with the server's name. */
  onLine?: (name: string, line: string) => void;
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
export async function startNatsCluster({
  binary,
  size = 3,
  config: extra = '',
  auth,
  onLine,
}: NatsClusterOptions): Promise<NatsCluster> {
  const root = mkdtempSync(join(tmpdir(), 'threadwork-nats-cluster-'));
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) routePorts.push(await freePort());
  const routes = routePorts.map((port) => `nats-route://127.0.0.1:${port}`);
  const nodes: ClusterNode[] = [];
  const configOf = (name: string, port: number) =>
    [
      `server_name: ${name}`,
      'cluster {',
      '  name: threadwork-test',
      `  listen: 127.0.0.1:${port}`,
      `  routes: [${routes.join(', ')}]`,
      '}',
      extra,
      '',
    ].join('\n');
  const start = (name: string, routePort: number, port?: number) =>
    startNatsServer({
      binary,
      dir: join(root, name),
      config: configOf(name, routePort),
      ...(port === undefined ? {} : { port }),
      ...(onLine ? { onLine: (line: string) => onLine(name, line) } : {}),
    });
  try {
    const started = await Promise.all(
      routePorts.map(async (port, i) => {
        const name = `n${i + 1}`;
        return { name, server: await start(name, port) };
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
  const nc = await connectNats({ servers: url, name: 'test-cluster', logger, ...(auth ? { auth } : {}) });
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

  const node = (name: string) => {
    const found = nodes.find((n) => n.name === name);
    if (!found) throw new Error(`no cluster node named ${name}`);
    return found;
  };
  return {
    nodes,
    url,
    node,
    async restart(name, { crash = false } = {}) {
      const found = node(name);
      await found.server.stop(crash ? 'SIGKILL' : 'SIGTERM');
      found.server = await start(name, routePorts[nodes.indexOf(found)]!, found.server.port);
      return found;
    },
    async stop() {
      await Promise.all(nodes.map(({ server }) => server.stop()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
