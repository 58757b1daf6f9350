// A sandbox pod's ways out over exec. kwok's pods run no container, so the pod here is a stand-in
// (localExec): real node running the real script on this machine's loopback, its stdin and stdout
// the exec stream. The routes are real servers on unix sockets, as the model and egress proxies
// are. It shows what the bridge does end to end, not what the exec API does with the stream.
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request, type Server as HttpServer } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTime } from '../../harness/processes.js';
import { openPodBridge, type PodBridge, type PodRoute } from './bridge.js';
import { localExec, type PodExec } from './exec.js';
import { frame, FrameKind, MAX_CHANNELS, MAX_FRAME_PAYLOAD, u32 } from './frames.js';

let dir: string;
const servers: (Server | HttpServer)[] = [];
const bridges: PodBridge[] = [];
/** Every connection a route accepted, ended after the tests so that the servers can close. */
const everyConnection: Socket[] = [];
/** Sockets the raw route accepted. */
const accepted: Socket[] = [];

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** An HTTP service on a unix socket: GET answers its name and path; POST answers the body's hash and `x-want` bytes. */
function service(name: string): HttpServer {
  return createHttpServer((req, res) => {
    const hash = createHash('sha256');
    req.on('data', (chunk: Buffer) => hash.update(chunk));
    req.on('end', () => {
      if (req.method === 'GET') return res.end(`${name} ${req.url}`);
      const body = randomBytes(Number(req.headers['x-want'] ?? 0));
      res.writeHead(200, { 'x-received-sha256': hash.digest('hex'), 'x-body-sha256': sha(body) });
      res.end(body);
    });
  });
}

async function listenOn(server: Server | HttpServer, name: string): Promise<string> {
  const path = join(dir, name);
  servers.push(server);
  server.on('connection', (socket: Socket) => {
    everyConnection.push(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return path;
}

let modelSocket: string;
let egressSocket: string;
/** Echoes what it gets and half-closes when its peer does; keeps every socket in `accepted`. */
let rawSocket: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'threadwork-pod-bridge-'));
  modelSocket = await listenOn(service('model'), 'model.sock');
  egressSocket = await listenOn(service('egress'), 'egress.sock');
  const raw = createServer({ allowHalfOpen: true }, (socket) => {
    accepted.push(socket);
    socket.pipe(socket);
  });
  rawSocket = await listenOn(raw, 'raw.sock');
});

afterEach(async () => {
  await Promise.all(bridges.splice(0).map((b) => b.close()));
});

afterAll(async () => {
  for (const socket of everyConnection) socket.destroy();
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  rmSync(dir, { recursive: true, force: true });
});

/** A free loopback port, as the pod's port would be inside its own network namespace. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Opens a bridge on a fresh port for each socket, collecting its refusals. */
async function bridgeTo(sockets: string[], exec: PodExec = localExec()) {
  const routes: PodRoute[] = [];
  for (const socketPath of sockets) routes.push({ port: await freePort(), socketPath });
  const refusals: string[] = [];
  const bridge = await openPodBridge(exec, routes, { refused: (reason) => refusals.push(reason) });
  bridges.push(bridge);
  return { bridge, ports: routes.map((r) => r.port), refusals };
}

function call(port: number, method: string, path: string, body?: Buffer, want = 0) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method, path, agent: false, headers: { 'x-want': String(want) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Connects through the bridge and waits until the raw route holds the other end. */
async function rawPair(port: number): Promise<{ client: Socket; server: Socket }> {
  const before = accepted.length;
  const client = connect(port, '127.0.0.1');
  client.on('error', () => undefined);
  client.write('hello');
  await once(client, 'data');
  const server = accepted[before];
  if (!server) throw new Error('the raw route accepted no connection');
  return { client, server };
}

describe('the pod bridge', () => {
  it('relays an HTTP request on each port to its route’s socket and the answer back', async () => {
    const { ports, refusals } = await bridgeTo([modelSocket, egressSocket]);
    const model = await call(ports[0]!, 'GET', '/v1/models');
    const egress = await call(ports[1]!, 'GET', 'http://registry.example/pkg');
    expect(model.body.toString()).toBe('model /v1/models');
    expect(egress.body.toString()).toBe('egress http://registry.example/pkg');
    expect(refusals).toEqual([]);
  });

  it('names its own process in the pod when ready, so that a sweep of the pod can spare it', async () => {
    const { bridge } = await bridgeTo([modelSocket]);
    const identity = bridge.identity;
    expect(identity).not.toBeNull();
    // The stand-in pod is this machine: the process named is the bridge's node, by pid and start time.
    expect(readFileSync(`/proc/${identity!.pid}/cmdline`, 'utf8')).toContain('--input-type=module');
    expect(startTime(identity!.pid)).toBe(identity!.started);
  });

  it('carries 20 concurrent connections of 1 MiB each way intact', async () => {
    const { ports, refusals } = await bridgeTo([modelSocket, egressSocket]);
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const body = randomBytes(1024 * 1024);
        const res = await call(ports[i % 2]!, 'POST', `/upload/${i}`, body, 1024 * 1024);
        return { sent: sha(body), res };
      }),
    );
    for (const { sent, res } of results) {
      expect(res.status).toBe(200);
      expect(res.headers['x-received-sha256']).toBe(sent);
      expect(res.body.length).toBe(1024 * 1024);
      expect(sha(res.body)).toBe(res.headers['x-body-sha256']);
    }
    expect(refusals).toEqual([]);
  });

  it('closes the other end of a connection closed on either side, and frees its channel', async () => {
    const { ports, refusals } = await bridgeTo([rawSocket]);
    const port = ports[0]!;

    const first = await rawPair(port);
    first.client.destroy();
    await once(first.server, 'close');

    const second = await rawPair(port);
    second.server.destroy();
    await once(second.client, 'close');

    // A half-close goes through, and the answer after it still comes back.
    const half = connect(port, '127.0.0.1');
    const answer: Buffer[] = [];
    half.on('data', (chunk: Buffer) => answer.push(chunk));
    half.end('ping');
    await once(half, 'end');
    expect(Buffer.concat(answer).toString()).toBe('ping');

    // Twice as many connections, one after the other, as may be open at once: each was freed.
    for (let i = 0; i < 2 * MAX_CHANNELS; i++) {
      const { client, server } = await rawPair(port);
      client.destroy();
      await once(server, 'close');
    }
    expect(refusals).toEqual([]);
  });

  it('lets a connection whose reader stalls hold up nothing but itself, and loses none of it', async () => {
    const held: Socket[] = [];
    const stalled = createServer({ pauseOnConnect: true }, (socket) => held.push(socket));
    const stalledSocket = await listenOn(stalled, 'slow.sock');
    const { ports, refusals } = await bridgeTo([stalledSocket, modelSocket]);
    const body = randomBytes(32 * 1024 * 1024);
    const client = connect(ports[0]!, '127.0.0.1');
    client.on('error', () => undefined);
    client.end(body);
    await once(stalled, 'connection');
    // Far more than the window and every buffer on the way: the rest waits in the client.
    expect((await call(ports[1]!, 'GET', '/meanwhile')).body.toString()).toBe('model /meanwhile');
    expect(client.writableLength).toBeGreaterThan(0);

    const reader = held[0]!;
    const hash = createHash('sha256');
    reader.on('data', (chunk: Buffer) => hash.update(chunk));
    reader.resume();
    await once(reader, 'end');
    expect(hash.digest('hex')).toBe(sha(body));
    expect(refusals).toEqual([]);
  });

  it('listens in the pod on the configured ports only', async () => {
    const { ports } = await bridgeTo([modelSocket]);
    const other = await freePort();
    await expect(call(other, 'GET', '/')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect((await call(ports[0]!, 'GET', '/')).body.toString()).toBe('model /');
  });

  it('closes open connections when the script in the pod is killed', async () => {
    const gone = new AbortController();
    const local = localExec();
    const pod: PodExec = {
      run: (argv, io = {}) =>
        local.run(argv, { ...io, signal: AbortSignal.any([gone.signal, ...(io.signal ? [io.signal] : [])]) }),
    };
    const { bridge, ports } = await bridgeTo([rawSocket], pod);
    const { client, server } = await rawPair(ports[0]!);
    const closed = Promise.all([once(client, 'close'), once(server, 'close')]);
    gone.abort();
    await closed;
    expect(await bridge.exited).toMatchObject({ code: -1, refused: null });
  });

  it('ends every connection and the script on close()', async () => {
    const { bridge, ports } = await bridgeTo([rawSocket]);
    const { client, server } = await rawPair(ports[0]!);
    const closed = Promise.all([once(client, 'close'), once(server, 'close')]);
    await bridge.close();
    await closed;
    // The script exited by itself once its stdin ended.
    expect(await bridge.exited).toMatchObject({ code: 0, refused: null });
  });
});

let hostiles = 0;

/**
 * A pod whose bridge was replaced by the agent: writes `first` at once, then `later` when the
 * runner first sends it anything, and never exits by itself. The bytes come from files (a command
 * line holds too few).
 */
function hostilePod(first: Buffer, later: Buffer = Buffer.alloc(0)): PodExec {
  const files = [join(dir, `hostile-${++hostiles}-first`), join(dir, `hostile-${hostiles}-later`)];
  writeFileSync(files[0]!, first);
  writeFileSync(files[1]!, later);
  const script = `const { readFileSync } = require('node:fs');
const [first, later] = process.argv.slice(1).map((f) => readFileSync(f));
process.stdout.write(first);
if (later.length > 0) process.stdin.once('data', () => process.stdout.write(later));
setInterval(() => {}, 1 << 30);`;
  const local = localExec();
  return { run: (_argv, io) => local.run(['node', '-e', script, '--', ...files], io) };
}

/** Opens a bridge of one route into a hostile pod (which says it is ready, and then `frames`). */
async function openHostile(port: number, socketPath: string, frames: Buffer[], later?: Buffer) {
  const refusals: string[] = [];
  const pod = hostilePod(Buffer.concat([frame(FrameKind.ready, 0), ...frames]), later);
  const bridge = await openPodBridge(pod, [{ port, socketPath }], { refused: (r) => refusals.push(r) });
  return { bridge, refusals };
}

const port16 = (port: number) => Buffer.from([port >> 8, port & 0xff]);
const opening = (port: number, id = 1) => frame(FrameKind.open, id, port16(port));

describe('a hostile pod', () => {
  const cases: [string, (port: number) => Buffer[], RegExp][] = [
    [
      'a frame past the size limit',
      () => [Buffer.from([FrameKind.data]), u32(1), u32(MAX_FRAME_PAYLOAD + 1)],
      /a frame of 65537 bytes/,
    ],
    ['a frame of an unknown kind', (p) => [opening(p), frame(9 as FrameKind, 1)], /unexpected frame of kind 9/],
    [
      'data on a channel never opened',
      () => [frame(FrameKind.data, 7, Buffer.from('x'))],
      /channel 7, which is not open/,
    ],
    ['a channel to a port not bridged', () => [opening(22)], /port 22, which is not bridged/],
    ['a channel opened twice', (p) => [opening(p), opening(p)], /out of order/],
    ['credit for bytes never sent', (p) => [opening(p), frame(FrameKind.credit, 1, u32(1))], /not sent/],
    [
      'more channels than allowed',
      (p) => Array.from({ length: MAX_CHANNELS + 1 }, (_, i) => opening(p, i + 1)),
      /more than 64 channels/,
    ],
  ];

  it.each(cases)('stops the bridge on %s and reports why', async (_, frames, reason) => {
    const port = await freePort();
    const { bridge, refusals } = await openHostile(port, rawSocket, frames(port));
    // The hostile script never exits by itself: the bridge ending shows the runner cut it off.
    const exit = await bridge.exited;
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatch(reason);
    expect(exit).toMatchObject({ code: -1, refused: refusals[0] });
  });

  it('stops the bridge on data past the window of a connection that does not read', async () => {
    // The route takes the connection and reads nothing: once the socket's buffers are full the
    // runner acknowledges nothing more, and the pod has a window to keep to.
    const stalledSocket = await listenOn(createServer({ pauseOnConnect: true }), 'stalled.sock');
    const port = await freePort();
    const flood = Array.from({ length: 64 }, () => frame(FrameKind.data, 1, Buffer.alloc(MAX_FRAME_PAYLOAD)));
    const { bridge, refusals } = await openHostile(port, stalledSocket, [opening(port), ...flood]);
    const exit = await bridge.exited;
    expect(refusals).toEqual(['channel 1 sent past its window']);
    expect(exit).toMatchObject({ code: -1, refused: refusals[0] });
  });

  it('refuses garbage before the ready frame, and openPodBridge fails', async () => {
    const refusals: string[] = [];
    const pod = hostilePod(Buffer.from('Welcome to the pod!\n'));
    await expect(
      openPodBridge(pod, [{ port: await freePort(), socketPath: modelSocket }], { refused: (r) => refusals.push(r) }),
    ).rejects.toThrow(/refused/);
    expect(refusals).toHaveLength(1);
  });

  it('closes the connections it relays when it is stopped, and the runner carries on', async () => {
    const held: Socket[] = [];
    const greeter = createServer((socket) => {
      socket.write('hello');
      held.push(socket);
    });
    const greeterSocket = await listenOn(greeter, 'greeter.sock');
    const port = await freePort();
    const connected = once(greeter, 'connection');
    // Opens a channel, and breaks the protocol once the runner relays the greeting into the pod.
    const open = [opening(port)];
    const { bridge, refusals } = await openHostile(port, greeterSocket, open, frame(9 as FrameKind, 1));
    await connected;
    const exit = await bridge.exited;
    expect(exit.refused).toMatch(/unexpected frame of kind 9/);
    expect(refusals).toEqual([exit.refused]);
    // The route's end of the channel is closed with the bridge.
    await Promise.all(held.map((s) => (s.closed ? null : once(s, 'close'))));

    // The runner is fine: a bridge opened after it works.
    const { ports } = await bridgeTo([modelSocket]);
    expect((await call(ports[0]!, 'GET', '/after')).body.toString()).toBe('model /after');
  });
});
