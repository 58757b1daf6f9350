import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Svcm } from '@nats-io/services';
import { connect, nkeyAuthenticator } from '@nats-io/transport-node';
import { waitFor } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { alive, root, startProcessStack } from './support/process-stack.js';

/**
 * The local stack as `npm start` runs it (after its build step): real nats-server and FerretDB,
 * every service as its own process, stopped by SIGTERM with nothing left behind.
 */
describe('local stack', () => {
  it('starts, answers health, issues working keys and stops cleanly', { timeout: 120_000 }, async () => {
    expect(
      existsSync(join(root, 'services', 'gateway', 'dist', 'main.js')),
      'services are built (npm test builds them)',
    ).toBe(true);
    // Accepted keys are remembered far longer than the test runs (see the revocation below). Claude
    // Code's endpoint is given (nothing listens there: no run starts here), Codex's is not.
    const claudeKey = 'sk-ant-stack-test-key';
    const stack = await startProcessStack({
      AUTH_CACHE_TTL_MS: String(5 * 60_000),
      CLAUDE_BASE_URL: 'http://127.0.0.1:9',
      CLAUDE_API_KEY: claudeKey,
    });
    const base = `http://127.0.0.1:${stack.port}`;
    try {
      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);

      const info = stack.info();
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

      // The runner, which never uses the database or signs sessions, is told neither where the
      // database is nor the session secret; the services that do use them are.
      const environOf = (name: string) => {
        const pid = info.processes.find((p) => p.name === name)!.pid;
        return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      };
      const withheld = /^(MONGO_URL|MONGO_DB_PREFIX|SESSION_SECRET)=/;
      expect(environOf('runner').filter((v) => withheld.test(v))).toEqual([]);
      expect(environOf('gateway').filter((v) => withheld.test(v)).length).toBe(3);

      // Threads, runs and the runner serve both harnesses from one value (codex stays the default:
      // GET /v1/harnesses below). The model key is the runner's alone, and the start message says which harness has an endpoint.
      for (const name of ['threads', 'runs', 'runner']) {
        expect(environOf(name), name).toContain('HARNESSES=codex,claude-code');
      }
      expect(environOf('runner')).toContain(`CLAUDE_API_KEY=${claudeKey}`);
      for (const { name } of info.processes.filter((p) => p.name !== 'runner')) {
        if (name === 'nats-server' || name === 'ferretdb') continue;
        expect(environOf(name).join('\n'), name).not.toContain(claudeKey);
      }
      expect(stack.output()).toMatch(/codex has no model endpoint: .*MODEL_BASE_URL and MODEL_API_KEY/);
      expect(stack.output()).toContain('claude-code has a model endpoint (CLAUDE_BASE_URL)');

      // NATS admits no one without a key of the stack's; each service has its own, kept with the
      // stack's data for its owner only, and is told only its own.
      await expect(connect({ servers: info.natsUrl, reconnect: false })).rejects.toThrow(/authorization/i);
      const keysFile = join(stack.dataDir, 'nats-keys.json');
      expect(statSync(keysFile).mode & 0o777).toBe(0o600);
      const keys = JSON.parse(readFileSync(keysFile, 'utf8')) as Record<string, { seed: string }>;
      expect(environOf('runner')).toContain(`NATS_NKEY_SEED=${keys.runner!.seed}`);
      expect(environOf('runner').join('\n')).not.toContain(keys.gateway!.seed);

      // Every service with request/reply endpoints answers a NATS service PING (the admin's to send).
      const nc = await connect({
        servers: info.natsUrl,
        authenticator: nkeyAuthenticator(new TextEncoder().encode(keys.admin!.seed)),
        inboxPrefix: '_INBOX_admin',
      });
      // The gateway can be ready before the last service has registered its endpoints, and a busy
      // machine may take longer than one collection window to answer: keep asking (no responders
      // yet included) until every service has.
      const pings = new Set<string>();
      const client = new Svcm(nc).client({ strategy: 'timer', maxWait: 2_000 });
      await waitFor(
        'every service to answer a PING',
        async () => {
          for await (const ping of await client.ping()) pings.add(ping.name);
          return pings.size >= 4;
        },
        60_000,
        { tolerateErrors: true },
      );
      await nc.close();
      expect([...pings].sort()).toEqual(['repohost', 'review', 'runs', 'threads']);

      // The admin CLI finds the running stack through the data directory.
      const admin = stack.admin('keys', 'create', '--user', 'alice');
      expect(admin.status, admin.stderr).toBe(0);
      const key = admin.stdout.trim().split('\n').at(-1)!;
      expect(key).toMatch(/^twk_[0-9A-Za-z]{40}$/);

      const anonymous = await fetch(`${base}/v1/work`);
      expect(anonymous.status).toBe(401);
      expect(await anonymous.json()).toEqual({ error: 'Unauthorized' });
      const authed = await fetch(`${base}/v1/work`, { headers: { authorization: `Bearer ${key}` } });
      expect(authed.status).toBe(200);
      expect(await authed.json()).toEqual({ projects: [], next_cursor: null });
      const served = await fetch(`${base}/v1/harnesses`, { headers: { authorization: `Bearer ${key}` } });
      const { harnesses } = (await served.json()) as { harnesses: { id: string; default: boolean }[] };
      expect(harnesses.map(({ id, default: isDefault }) => [id, isDefault])).toEqual([
        ['codex', true],
        ['claude-code', false],
      ]);

      // A key the CLI revokes is refused at once, though the gateway had just let it in (and
      // remembers accepted keys for AUTH_CACHE_TTL_MS): the CLI announces the revocation on NATS.
      const doomed = stack.admin('keys', 'create', '--user', 'alice').stdout.trim().split('\n').at(-1)!;
      const withDoomed = { headers: { authorization: `Bearer ${doomed}` } };
      expect((await fetch(`${base}/v1/work`, withDoomed)).status).toBe(200);
      const revoke = stack.admin('keys', 'revoke', doomed.slice(0, 12));
      expect(revoke.status, revoke.stderr).toBe(0);
      expect(revoke.stderr).toBe('');
      // The stack's gateway remembers keys for 5 minutes here: only the announcement refuses it in time.
      const refused = await waitFor('the revoked key to be refused', async () => {
        const status = (await fetch(`${base}/v1/work`, withDoomed)).status;
        return status === 401 ? status : undefined;
      });
      expect(refused).toBe(401);

      // A session cookie issued by the CLI is signed with the stack's own secret.
      const session = stack.admin('sessions', 'create', '--user', 'alice');
      expect(session.status, session.stderr).toBe(0);
      const cookie = session.stdout
        .trim()
        .split('\n')
        .at(-1)!
        .replace(/^Cookie: /, '');
      expect((await fetch(`${base}/v1/tasks`, { headers: { cookie } })).status).toBe(200);

      // Once ready, the stack prints a one-time login link for its local user: opening it signs a
      // browser in (the cookie), and it does not work twice.
      const printed = await waitFor(
        'the login link',
        async () => /(http:\/\/\S+\/v1\/auth\/link\?code=\S+)/.exec(stack.output())?.[1],
      );
      const printedUrl = new URL(printed);
      expect(printedUrl.origin).toBe(`http://localhost:${stack.port}`);
      const linkHere = `${base}${printedUrl.pathname}${printedUrl.search}`;
      const opened = await fetch(linkHere, { redirect: 'manual' });
      expect(opened.status).toBe(302);
      const browser = { cookie: opened.headers.get('set-cookie')!.split(';')[0]! };
      const me = await fetch(`${base}/v1/session`, { headers: browser });
      expect(await me.json()).toMatchObject({ user: { login: 'local' }, via: 'session' });
      expect((await fetch(linkHere, { redirect: 'manual' })).status).toBe(401);
      // The CLI makes links for anyone, at the origin it is given.
      const made = stack.admin('login-link', '--user', 'alice', '--minutes', '5', '--origin', base);
      expect(made.status, made.stderr).toBe(0);
      const link = made.stdout.trim().split('\n').at(-1)!;
      expect(link.startsWith(`${base}/v1/auth/link?code=`)).toBe(true);
      expect((await fetch(link, { redirect: 'manual' })).status).toBe(302);
      // Signing out ends the session; a cookie the CLI signs afterwards carries the new epoch.
      const out = await fetch(`${base}/v1/auth/logout`, { method: 'POST', headers: browser });
      expect(out.status).toBe(204);
      expect((await fetch(`${base}/v1/session`, { headers: browser })).status).toBe(401);
      const signed = stack.admin('sessions', 'create', '--user', 'local').stdout.trim().split('\n').at(-1)!;
      const again = await fetch(`${base}/v1/session`, { headers: { cookie: signed.replace(/^Cookie: /, '') } });
      expect(again.status).toBe(200);

      expect(stack.admin('users', 'list').stdout).toContain('alice');

      expect(await stack.stop()).toBe(0);
      for (const { name, pid } of info.processes) expect(alive(pid), `${name} (pid ${pid}) still running`).toBe(false);
      expect(existsSync(join(stack.dataDir, 'stack.json'))).toBe(false);

      // With the stack gone, the CLI says so instead of hanging.
      const orphan = stack.admin('users', 'list');
      expect(orphan.status).toBe(1);
      expect(orphan.stderr).toMatch(/npm start/);
    } finally {
      await stack.stop();
      stack.cleanUp();
    }
  });
});
