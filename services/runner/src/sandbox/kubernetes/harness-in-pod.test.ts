import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { say, shell, startFakeModel, turnScript, uniqueId, type FakeModelServer } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodexHarness } from '../../harness/codex/codex.js';
import { localExec } from './exec.js';
import { bridgedGates } from './gates.js';
import { podHost } from './process.js';

// Codex in a pod, end to end but for the exec API itself: the harness started through the pod
// host, its stdio over the exec's streams, its model reached through the bridge over a second exec
// and the runner's model gate, which adds the key outside. The pod is a local stand-in (localExec):
// what the runner sends and what comes back are the same, but there is no container around it, and
// its pid namespace is this machine's (so sweeps look only below the harness).

const logger = createLogger({ service: 'harness-in-pod-test', level: 'silent' });
const dir = mkdtempSync('/var/tmp/threadwork-harness-in-pod-');
const KEY = `sk-in-pod-${uniqueId('key')}`;
let model: FakeModelServer;
/** The "real" model endpoint: wants the key, then passes the request on to the fake model. */
let endpoint: Server;
let endpointUrl: string;
const authorizations: (string | undefined)[] = [];

beforeAll(async () => {
  model = await startFakeModel(
    turnScript([
      [shell('echo made in the pod > made.txt && echo "key:${THREADWORK_MODEL_API_KEY:-none}"')],
      [say('Done.')],
    ]),
  );
  const upstream = new URL(model.baseUrl);
  endpoint = createServer((req, res) => {
    authorizations.push(req.headers.authorization);
    if (req.headers.authorization !== `Bearer ${KEY}`) return void res.writeHead(401).end();
    const out = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  const address = endpoint.address() as { port: number };
  endpointUrl = `http://127.0.0.1:${address.port}${upstream.pathname}`;
});
afterAll(async () => {
  endpoint?.closeAllConnections();
  await new Promise((resolve) => endpoint?.close(resolve));
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('Codex in a pod', () => {
  it('runs a turn over exec, reaches its model only through the bridge, and never holds the key', async () => {
    const home = join(dir, 'home');
    const cwd = join(dir, 'workspace');
    for (const d of [home, cwd]) mkdirSync(d);
    // What the agent left for the next start: it goes through the pod's home before Codex starts.
    writeFileSync(join(home, 'config.toml'), '[mcp_servers.planted]\ncommand = "/bin/false"\n');
    const exec = localExec();
    const host = podHost(exec, {
      openGates: bridgedGates(exec, { model: await freePort(), egress: await freePort() }),
      sweepScope: 'harness',
    });
    const harness = new CodexHarness({
      baseUrl: endpointUrl,
      apiKey: KEY,
      outputCapBytes: 1 << 20,
      includeRaw: false,
      isolation: {
        jailed: false,
        codexSandbox: 'danger-full-access',
        egress: { mode: 'none', allow: [] },
        outside: null,
        processes: null,
        memory: null,
        tmpBytes: 0,
        layers: [],
      },
      logger,
    });
    const session = await harness.start({
      cwd,
      home,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, CODEX_HOME: home },
      model: 'gpt-test',
      resumeSessionId: null,
      mounts: { writable: [cwd, home], readable: [] },
      owner: null,
      host,
    });
    const outputs: string[] = [];
    try {
      expect(existsSync(join(home, 'config.toml'))).toBe(false);
      const pid = session.pid;
      expect(pid).toBeGreaterThan(0);
      // The stand-in pod is this machine: the harness's environment can be read, and holds no key.
      expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).not.toContain(KEY);
      const outcome = await session.runTurn(
        {
          prompt: 'make a file',
          model: 'gpt-test',
          reasoningEffort: 'low',
          collaborationMode: 'default',
          metadata: {},
        },
        {
          started: () => undefined,
          chunk: (chunk) => {
            if (chunk.type === 'command.completed' || chunk.type === 'command.output')
              outputs.push(JSON.stringify(chunk));
          },
          question: async () => ({}),
          planApproval: async () => ({ approved: false, comment: null }),
        },
      );
      expect(outcome.status, JSON.stringify(outcome.error)).toBe('completed');
      expect(outcome.reply?.text).toBe('Done.');
    } finally {
      await session.stop();
    }
    expect(readFileSync(join(cwd, 'made.txt'), 'utf8')).toBe('made in the pod\n');
    expect(outputs.join('\n')).toContain('key:none');
    expect(outputs.join('\n')).not.toContain(KEY);
    // Every model request went through the gate, which added the key; none came without it.
    expect(authorizations.length).toBeGreaterThan(0);
    expect(authorizations.every((a) => a === `Bearer ${KEY}`)).toBe(true);
    expect(session.alive).toBe(false);
  });
});
