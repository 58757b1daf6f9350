import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decide, startEgressProxy, type EgressPolicy, type EgressProxy, type EgressRefusal } from './egress.js';

// The egress proxy decides where a jailed agent may connect to. Decisions first, then the proxy
// itself on its unix socket, tunnelling and forwarding to a server on this machine.

const verdict = async (policy: EgressPolicy, host: string, port: number) => {
  const v = await decide(policy, host, port);
  return v.ok ? 'allowed' : v.reason;
};

describe('egress decisions', () => {
  it('refuse everything with SANDBOX_EGRESS=none, listed or not', async () => {
    const none: EgressPolicy = { mode: 'none', allow: ['registry.npmjs.org'] };
    expect(await verdict(none, 'registry.npmjs.org', 443)).toMatch(/no network access/);
    expect(await verdict(none, '8.8.8.8', 443)).toMatch(/no network access/);
  });

  it('allow only listed hosts, on 80 and 443 unless a port is listed', async () => {
    const list: EgressPolicy = { mode: 'allowlist', allow: ['8.8.8.8', '*.example.org', '9.9.9.9:8443'] };
    expect(await verdict(list, '8.8.8.8', 443)).toBe('allowed');
    expect(await verdict(list, '8.8.8.8', 80)).toBe('allowed');
    expect(await verdict(list, '8.8.8.8', 22)).toMatch(/not in SANDBOX_EGRESS_ALLOW/);
    expect(await verdict(list, '9.9.9.9', 8443)).toBe('allowed');
    expect(await verdict(list, '9.9.9.9', 443)).toMatch(/not in SANDBOX_EGRESS_ALLOW/);
    expect(await verdict(list, '8.8.4.4', 443)).toMatch(/not in SANDBOX_EGRESS_ALLOW/);
    // A wildcard names the subdomains, not the domain, nor a name that merely ends alike.
    expect(await verdict(list, 'example.org', 443)).toMatch(/not in SANDBOX_EGRESS_ALLOW/);
    expect(await verdict(list, 'evilexample.org', 443)).toMatch(/not in SANDBOX_EGRESS_ALLOW/);
  });

  it('open public hosts on 80 and 443 only, and never this machine, private networks or metadata', async () => {
    const open: EgressPolicy = { mode: 'open', allow: [] };
    expect(await verdict(open, '8.8.8.8', 443)).toBe('allowed');
    expect(await verdict(open, '2606:4700:4700::1111', 443)).toBe('allowed');
    expect(await verdict(open, '8.8.8.8', 22)).toMatch(/port 22 is closed/);
    for (const internal of [
      '127.0.0.1',
      'localhost',
      '10.1.2.3',
      '172.20.0.1',
      '192.168.1.1',
      '100.64.0.1',
      '169.254.169.254',
      '0.0.0.0',
      '[::1]',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '64:ff9b::a00:1',
      '64:ff9b:1::a00:1',
      // IPv4-compatible, SIIT, 6to4 and Teredo forms carry an IPv4 address of their own; site-local
      // and discard-only ranges are no one's outside.
      '::127.0.0.1',
      '[::7f00:1]',
      '::ffff:0:7f00:1',
      '2002:7f00:1::1',
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
      'fec0::1',
      '100::1',
    ]) {
      expect(await verdict(open, internal, 443), internal).toMatch(/internal address/);
    }
    // Unless the operator lists it (an internal registry mirror, say) by its name: not a wildcard's,
    // under which the agent may make up names that resolve anywhere (`10.1.2.3.nip.io`).
    expect(await verdict({ mode: 'open', allow: ['10.1.2.3'] }, '10.1.2.3', 443)).toBe('allowed');
    expect(await verdict({ mode: 'allowlist', allow: ['*.2.3'] }, '10.1.2.3', 443)).toMatch(/internal address/);
  });

  it('refuse a name that does not resolve', async () => {
    expect(await verdict({ mode: 'open', allow: [] }, 'no-such-host.invalid', 443)).toMatch(/does not resolve/);
  });
});

describe('the egress proxy', () => {
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-egress-'));
  const socketPath = join(dir, 'egress.sock');
  const refusals: EgressRefusal[] = [];
  let upstream: Server;
  let port: number;
  let proxy: EgressProxy;

  beforeAll(async () => {
    upstream = createServer((req, res) => res.end(`upstream saw ${req.method} ${req.url} for ${req.headers.host}`));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    port = (upstream.address() as { port: number }).port;
    proxy = await startEgressProxy(socketPath, {
      policy: { mode: 'allowlist', allow: [`localhost:${port}`] },
      refused: (r) => refusals.push(r),
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await new Promise((resolve) => upstream?.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  /** Sends raw bytes to the proxy and answers everything it writes back until it closes. */
  const raw = (text: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(socketPath);
      let got = '';
      socket.on('data', (d) => {
        got += d.toString();
        // A tunnel stays open: once the upstream has answered, the exchange is over.
        if (got.includes('upstream saw')) socket.end();
      });
      socket.on('end', () => resolve(got));
      socket.on('error', reject);
      socket.write(text);
    });

  it('tunnels CONNECT to a listed host and port', async () => {
    const got = await raw(
      `CONNECT localhost:${port} HTTP/1.1\r\nHost: localhost:${port}\r\n\r\n` +
        `GET /through HTTP/1.1\r\nHost: localhost:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(got).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(got).toContain(`upstream saw GET /through for localhost:${port}`);
  });

  it('forwards a plain-HTTP request to a listed host', async () => {
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(
        {
          socketPath,
          method: 'GET',
          path: `http://localhost:${port}/plain?x=1`,
          headers: { host: `localhost:${port}` },
        },
        (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve(`${res.statusCode} ${text}`));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(body).toBe(`200 upstream saw GET /plain?x=1 for localhost:${port}`);
  });

  it('refuses the rest with 403 and reports each refusal', async () => {
    refusals.length = 0;
    const unlisted = await raw(`CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`);
    expect(unlisted).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    const otherPort = await raw(`CONNECT localhost:4222 HTTP/1.1\r\nHost: localhost:4222\r\n\r\n`);
    expect(otherPort).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    const metadata = await raw(
      `GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n`,
    );
    expect(metadata).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    expect(refusals).toEqual([
      { host: 'example.com', port: 443, reason: 'not in SANDBOX_EGRESS_ALLOW' },
      { host: 'localhost', port: 4222, reason: 'not in SANDBOX_EGRESS_ALLOW' },
      { host: '169.254.169.254', port: 80, reason: 'not in SANDBOX_EGRESS_ALLOW' },
    ]);
    const garbage = await raw(`CONNECT not-an-authority HTTP/1.1\r\n\r\n`);
    expect(garbage).toMatch(/^HTTP\/1\.1 400/);
  });
});

describe('the egress proxy’s name lookups', () => {
  it('ask DNS on sockets of their own, a bounded number at once: a nameserver that never answers stalls only this jail', async () => {
    // A nameserver that takes every query and answers none.
    const silent = createSocket('udp4');
    await new Promise<void>((resolve) => silent.bind(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(join(tmpdir(), 'threadwork-egress-dns-'));
    const socketPath = join(dir, 'egress.sock');
    const refusals: EgressRefusal[] = [];
    const proxy = await startEgressProxy(socketPath, {
      policy: { mode: 'open', allow: [], dnsServers: [`127.0.0.1:${silent.address().port}`] },
      refused: (r) => refusals.push(r),
    });
    const sockets: ReturnType<typeof connect>[] = [];
    const ask = (host: string) =>
      new Promise<string>((resolve) => {
        const socket = connect(socketPath);
        sockets.push(socket);
        let got = '';
        socket.on('data', (d) => (got += d.toString()));
        socket.on('close', () => resolve(got));
        socket.on('error', () => resolve(got));
        socket.write(`CONNECT ${host}:443 HTTP/1.1\r\nHost: ${host}:443\r\n\r\n`);
      });
    try {
      const queried = new Promise<void>((resolve) => {
        let count = 0;
        silent.on('message', () => {
          count += 1;
          if (count >= 8) resolve();
        });
      });
      const pending = Array.from({ length: 8 }, (_, i) => ask(`never-answers-${i}.example.com`));
      // Every one of them has reached the silent nameserver, and none has an answer.
      await queried;
      const ninth = await ask('one-too-many.example.com');
      expect(ninth).toMatch(/^HTTP\/1\.1 403 .*\r\n\r\nmore than 8 connections of the sandbox are being resolved/s);
      expect(refusals.at(-1)).toMatchObject({ host: 'one-too-many.example.com', port: 443 });
      // The runner's own lookups (getaddrinfo, on libuv's threads) are not queued behind them.
      const { lookup } = await import('node:dns/promises');
      expect((await lookup('localhost', { family: 4 })).address).toBe('127.0.0.1');
      for (const socket of sockets) socket.destroy();
      await Promise.all(pending);
    } finally {
      await proxy.close();
      silent.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
