import { Resolver } from 'node:dns/promises';
import { mkdir, rm } from 'node:fs/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { BlockList, connect, isIP, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';

// The only way out of a jail besides the model proxy: an HTTP proxy of the runner's on a unix
// socket bound into the jail (relayed to a loopback port inside, like the model proxy), named in
// the jail's HTTP(S)_PROXY so package managers, git and curl use it. It tunnels CONNECT and
// forwards plain-HTTP requests to the hosts the egress policy allows, and refuses the rest with 403,
// reporting each refusal (host, port, why) so the run's events can say so. A process that ignores
// the proxy variables finds no network at all: the jail has nothing but its own loopback.
//
// - `none`: every destination refused (the proxy still runs, so that attempts are seen).
// - `allowlist`: hosts matching SANDBOX_EGRESS_ALLOW (`registry.npmjs.org`, `*.pypi.org`,
//   `git.example.com:8443`), on ports 80 and 443 unless a port is given.
// - `open`: any host on ports 80 and 443.
// Whatever the mode, a destination that resolves to a loopback, private, link-local (cloud metadata)
// or otherwise non-public address is refused unless the allowlist names that host: the cluster's
// NATS, MongoDB and the runner's neighbours are not the agent's to reach. The connection goes to
// the address that was checked, so a name that resolves elsewhere on a second look gains nothing.

export type EgressMode = 'none' | 'allowlist' | 'open';

export interface EgressPolicy {
  mode: EgressMode;
  /** Host patterns, for `allowlist` (and to let a listed host resolve to a private address). */
  allow: readonly string[];
  /** DNS servers (`address[:port]`) to ask instead of the system's; tests use their own. */
  dnsServers?: readonly string[];
}

export interface EgressRefusal {
  host: string;
  port: number;
  reason: string;
}

export interface EgressProxyOptions {
  policy: EgressPolicy;
  /** Called for every refused destination. */
  refused(refusal: EgressRefusal): void;
}

export interface EgressProxy {
  readonly socketPath: string;
  close(): Promise<void>;
}

const DEFAULT_PORTS = new Set([80, 443]);
const CONNECT_TIMEOUT_MS = 15_000;
/** Connections (tunnels included) one jail may hold open to the proxy; more are closed as they come. */
export const MAX_CONNECTIONS = 64;
const HOST = /^(?:\*\.)?[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

interface Rule {
  /** A host name, or a suffix (`.example.org`) for a wildcard. */
  host: string;
  wildcard: boolean;
  /** Null: the default ports. */
  port: number | null;
}

/** The problem with an allowlist entry, or null when it is well formed. */
export function egressRuleProblem(entry: string): string | null {
  const [host = '', port, extra] = entry.trim().toLowerCase().split(':');
  if (extra !== undefined) return `"${entry}" is not host or host:port`;
  if (!HOST.test(host)) return `"${entry}" is not a host name (a leading "*." is the only wildcard)`;
  if (port !== undefined && !(/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) {
    return `"${entry}" has no valid port`;
  }
  return null;
}

function parseRule(entry: string): Rule {
  const [host = '', port] = entry.trim().toLowerCase().split(':');
  const wildcard = host.startsWith('*.');
  return { host: wildcard ? host.slice(1) : host, wildcard, port: port === undefined ? null : Number(port) };
}

/** Whether an entry lets the host through; `exact`: only entries that name it, not a wildcard's. */
function listed(rules: readonly Rule[], host: string, port: number, exact = false): boolean {
  return rules.some(
    (r) =>
      (r.wildcard ? !exact && host.endsWith(r.host) : host === r.host) &&
      (r.port === null ? DEFAULT_PORTS.has(port) : r.port === port),
  );
}

/** Addresses no agent reaches unless the operator lists the host: this machine, private networks, metadata. */
const INTERNAL_V4 = new BlockList();
const INTERNAL_V6 = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
] as const) {
  INTERNAL_V4.addSubnet(net, bits, 'ipv4');
}
// IPv6: only global unicast (2000::/3) is outside, less the ranges that tunnel or translate to
// addresses of their own (6to4, Teredo: an IPv4 address inside) and those reserved for examples.
// Everything else — loopback, IPv4-compatible and -mapped, NAT64, unique and link-local, site-local,
// discard-only, multicast — is internal.
const GLOBAL_V6 = new BlockList();
GLOBAL_V6.addSubnet('2000::', 3, 'ipv6');
for (const [net, bits] of [
  ['2001::', 32],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
] as const) {
  INTERNAL_V6.addSubnet(net, bits, 'ipv6');
}

function internal(address: string): boolean {
  // Kept apart: a BlockList also holds IPv4 addresses against the IPv4-mapped IPv6 range.
  if (isIP(address) === 6) return !GLOBAL_V6.check(address, 'ipv6') || INTERNAL_V6.check(address, 'ipv6');
  return INTERNAL_V4.check(address, 'ipv4');
}

/** Destinations of one jail being decided at once (each may wait on DNS); past this, refused. */
const MAX_LOOKUPS_IN_FLIGHT = 8;
/** Names this machine answers for itself (RFC 6761): never asked of DNS. */
const LOOPBACK_NAME = /^(localhost|[a-z0-9-]+(\.[a-z0-9-]+)*\.localhost)\.?$/;
/** How long one DNS query may take, and how often it is sent, before the name counts as unresolvable. */
const RESOLVE_TIMEOUT_MS = 3_000;
const RESOLVE_TRIES = 2;

/**
 * An address of `name`, asked of DNS through c-ares, which has sockets of its own: `lookup`
 * (getaddrinfo) runs on libuv's small thread pool, which the runner's own lookups share, so a jail
 * asking for names that never answer would stall the runner's reconnects and every other jail's
 * egress. Names from /etc/hosts are not seen, but for localhost. IPv4 first, as `lookup` would.
 */
async function resolveName(name: string, servers: readonly string[] | undefined): Promise<string> {
  if (LOOPBACK_NAME.test(name)) return '127.0.0.1';
  const resolver = new Resolver({ timeout: RESOLVE_TIMEOUT_MS, tries: RESOLVE_TRIES });
  if (servers) resolver.setServers([...servers]);
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
  const address =
    (v4.status === 'fulfilled' ? v4.value[0] : undefined) ?? (v6.status === 'fulfilled' ? v6.value[0] : undefined);
  if (address === undefined) throw new Error(`${name} does not resolve`);
  return address;
}

/** Decides a destination; answers the address to connect to, or why not. */
export async function decide(
  policy: EgressPolicy,
  host: string,
  port: number,
): Promise<{ ok: true; address: string } | { ok: false; reason: string }> {
  const rules = policy.allow.map(parseRule);
  const name = host.toLowerCase().replace(/^\[|\]$/g, '');
  const isListed = listed(rules, name, port);
  if (policy.mode === 'none') return { ok: false, reason: 'the sandbox has no network access (SANDBOX_EGRESS=none)' };
  if (policy.mode === 'allowlist' && !isListed) return { ok: false, reason: 'not in SANDBOX_EGRESS_ALLOW' };
  if (policy.mode === 'open' && !isListed && !DEFAULT_PORTS.has(port)) {
    return { ok: false, reason: `port ${port} is closed (SANDBOX_EGRESS=open allows 80 and 443)` };
  }
  let address: string;
  try {
    address = isIP(name) ? name : await resolveName(name, policy.dnsServers);
  } catch {
    return { ok: false, reason: 'the host name does not resolve' };
  }
  // Which address is not said: the answer goes back to the agent, and the network's layout is not its to learn.
  // Only an entry naming the host exactly opens an internal address: under a wildcard, names that
  // resolve anywhere (`10.0.0.1.nip.io`) are the agent's to make up.
  if (internal(address) && !listed(rules, name, port, true)) {
    return { ok: false, reason: 'it resolves to an internal address' };
  }
  return { ok: true, address };
}

/** `host:port` of a CONNECT request, or null. */
function authority(target: string): { host: string; port: number } | null {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:/[\]]+):(\d{1,5})$/.exec(target);
  if (!m?.[1] || !m[2]) return null;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1], port } : null;
}

export async function startEgressProxy(socketPath: string, opts: EgressProxyOptions): Promise<EgressProxy> {
  const refuse = (host: string, port: number, reason: string) =>
    opts.refused({ host: host.slice(0, 255), port, reason });
  // Name lookups of this jail in flight: each holds DNS sockets of the runner's until it answers.
  let deciding = 0;
  const decideBounded = async (host: string, port: number): ReturnType<typeof decide> => {
    if (deciding >= MAX_LOOKUPS_IN_FLIGHT) {
      return { ok: false, reason: `more than ${MAX_LOOKUPS_IN_FLIGHT} connections of the sandbox are being resolved` };
    }
    deciding += 1;
    try {
      return await decide(opts.policy, host, port);
    } finally {
      deciding -= 1;
    }
  };
  // Tunnels are not the HTTP server's to close: they are tracked to end with the proxy.
  const sockets = new Set<Duplex>();
  const track = (socket: Duplex) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };

  const tunnel = async (req: IncomingMessage, client: Duplex, head: Buffer) => {
    track(client);
    client.on('error', () => client.destroy());
    const target = authority(req.url ?? '');
    if (!target) {
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const verdict = await decideBounded(target.host, target.port);
    if (!verdict.ok) {
      refuse(target.host, target.port, verdict.reason);
      client.end(`HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n${verdict.reason}\n`);
      return;
    }
    const upstream: Socket = connect({ host: verdict.address, port: target.port, timeout: CONNECT_TIMEOUT_MS });
    track(upstream);
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    const fail = () => {
      if (!upstream.connecting) {
        client.destroy();
      } else {
        client.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n');
      }
      upstream.destroy();
    };
    upstream.once('timeout', fail);
    upstream.once('error', fail);
    client.once('close', () => upstream.destroy());
  };

  const forward = async (req: IncomingMessage, res: ServerResponse) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('a proxy request needs an absolute http:// URL\n');
      return;
    }
    if (url.protocol !== 'http:') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('use CONNECT for https\n');
      return;
    }
    const port = Number(url.port || 80);
    const verdict = await decideBounded(url.hostname, port);
    if (!verdict.ok) {
      refuse(url.hostname, port, verdict.reason);
      res.writeHead(403, { 'content-type': 'text/plain' }).end(`${verdict.reason}\n`);
      return;
    }
    const headers: Record<string, string | string[] | undefined> = { ...req.headers, host: url.host };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const out = httpRequest(
      { host: verdict.address, port, method: req.method, path: `${url.pathname}${url.search}`, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end();
    });
    req.pipe(out);
  };

  const server: Server = createServer((req, res) => void forward(req, res));
  // A jail cannot hold the runner's file descriptors: past this, new connections are closed.
  server.maxConnections = MAX_CONNECTIONS;
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => void tunnel(req, client, head));
  await mkdir(dirname(socketPath), { recursive: true });
  await rm(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    socketPath,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(socketPath, { force: true });
    },
  };
}
