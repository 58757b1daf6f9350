import { connect, type AddressInfo } from 'node:net';
import { uniqueId, waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWellFormedKey, keyPrefix } from '../src/domain/keys.js';
import { SESSION_COOKIE, signSession } from '../src/domain/session.js';
import { SESSION_SECRET, startHarness, type App, type Harness } from './harness.js';

describe('gateway authentication', () => {
  let harness: Harness;
  let app: App;

  beforeAll(async () => {
    // Refused or answered by the gateway itself: nothing here reaches a service.
    harness = await startHarness({ peers: 'none' });
    app = harness.app;
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('answers health and readiness without credentials', async () => {
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    expect((await app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
  });

  it('serves the OpenAPI document without credentials', async () => {
    const res = await app.inject({ url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ openapi: '3.1.0', info: { title: 'Threadwork API' } });
  });

  it.each([
    ['no header', undefined],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['a malformed key', 'Bearer nope'],
    ['an unknown key', `Bearer twk_${'A'.repeat(40)}`],
  ])('rejects %s with 401 {"error":"Unauthorized"}', async (_what, authorization) => {
    const res = await app.inject({ url: '/v1/work', headers: authorization ? { authorization } : {} });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it('rejects before validating or calling anything', async () => {
    // An invalid body and a path id that could not exist: still 401, not 400 or 404.
    const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { nope: true } });
    expect(res.statusCode).toBe(401);
    const dotted = await app.inject({ url: '/v1/runs/a.b' });
    expect(dotted.statusCode).toBe(401);
  });

  it('decides on the path the router takes: a percent-escaped or absolute-form spelling needs a caller too', async () => {
    // `/%761/…` routes to `/v1/…`: the same route, so the same guard.
    for (const url of ['/%761/harnesses', '/%761/work', '/v%31/keys']) {
      const res = await app.inject({ url });
      expect(res.statusCode, url).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
    // An absolute-form request target (as to a proxy), over a real connection.
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    const head = await rawRequest(
      port,
      `GET http://127.0.0.1:${port}/v1/harnesses HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
    );
    expect(head.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
  });

  it('accepts a key it issued until the key is revoked', async () => {
    const user = await harness.identity.ensureUser(uniqueId('alice'));
    const { id, key } = await harness.identity.createKey(user._id);
    expect(isWellFormedKey(key)).toBe(true);

    const authed = await app.inject({ url: '/v1/no-such-route', headers: { authorization: `Bearer ${key}` } });
    // Past authentication: the route does not exist, which is a 404 in the contract's shape.
    expect(authed.statusCode).toBe(404);
    expect(authed.json()).toMatchObject({ error: { code: 'not_found' } });
    // The use is recorded beside the request. FerretDB applies an update as a read and a write of the
    // whole document, so that write landing after the revocation would undo it (MongoDB's would not).
    await waitFor('the key’s use to be recorded', async () =>
      (await harness.identity.listKeys(user._id)).some((k) => k._id === id && k.last_used_at),
    );

    expect(await harness.identity.revokeKey(id)).toBe(1);
    const revoked = await app.inject({ url: '/v1/no-such-route', headers: { authorization: `Bearer ${key}` } });
    expect(revoked.statusCode).toBe(401);
  });

  it('stores only a hash of the key', async () => {
    const user = await harness.identity.ensureUser(uniqueId('bob'));
    const { key } = await harness.identity.createKey(user._id);
    const [stored] = await harness.identity.listKeys(user._id);
    expect(JSON.stringify(stored)).not.toContain(key);
    expect(stored?.prefix).toBe(keyPrefix(key));
    expect(stored?.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('does not confuse two keys sharing a prefix', async () => {
    const user = await harness.identity.ensureUser(uniqueId('carol'));
    const { key } = await harness.identity.createKey(user._id);
    const forged = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
    expect(await harness.identity.authenticate(forged)).toBeNull();
    expect((await harness.identity.authenticate(key))?._id).toBe(user._id);
  });

  it('converges concurrent creations of one user on one record', async () => {
    const login = uniqueId('dave');
    const users = await Promise.all(Array.from({ length: 8 }, () => harness.identity.ensureUser(login)));
    expect(new Set(users.map((u) => u._id)).size).toBe(1);
  });
});

describe('gateway session cookies', () => {
  let harness: Harness;
  let app: App;
  const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;

  beforeAll(async () => {
    harness = await startHarness();
    app = harness.app;
  });
  afterAll(async () => {
    await harness?.close();
  });

  const cookie = (value: string) => ({ cookie: `theme=dark; ${SESSION_COOKIE}=${value}` });

  it('accepts a signed, unexpired session cookie as the user', async () => {
    const user = await harness.identity.ensureUser(uniqueId('erin'));
    const { threadId } = await harness.thread(user._id);
    const res = await app.inject({
      url: `/v1/threads/${threadId}`,
      headers: cookie(signSession(user._id, inAnHour(), SESSION_SECRET)),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: threadId });
  });

  it.each([
    ['a tampered user id', (v: string) => v.replace(/^usr_(.)/, (_m, c: string) => `usr_${c === '0' ? '1' : '0'}`)],
    [
      'a tampered epoch',
      (v: string) => v.replace(/^([^.]+)\.(\d+)\./, (_m, u: string, e: string) => `${u}.${Number(e) + 1}.`),
    ],
    [
      'a tampered expiry',
      (v: string) => v.replace(/\.(\d+)\.([^.]+)$/, (_m, e: string, s: string) => `.${Number(e) + 1}.${s}`),
    ],
    ['a tampered signature', (v: string) => v.slice(0, -3) + (v.at(-3) === 'A' ? 'B' : 'A') + v.slice(-2)],
    ['no signature', (v: string) => v.split('.').slice(0, 3).join('.')],
    ['garbage', () => 'not-a-session'],
  ])('rejects %s with 401', async (_what, tamper) => {
    const user = await harness.identity.ensureUser(uniqueId('frank'));
    const value = tamper(signSession(user._id, inAnHour(), SESSION_SECRET));
    const res = await app.inject({ url: '/v1/work', headers: cookie(value) });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it('rejects an expired cookie and one signed with another secret', async () => {
    const user = await harness.identity.ensureUser(uniqueId('grace'));
    const expired = signSession(user._id, Math.floor(Date.now() / 1000) - 1, SESSION_SECRET);
    expect((await app.inject({ url: '/v1/work', headers: cookie(expired) })).statusCode).toBe(401);
    const foreign = signSession(user._id, inAnHour(), 'another-secret-another-secret-another');
    expect((await app.inject({ url: '/v1/work', headers: cookie(foreign) })).statusCode).toBe(401);
  });

  it('rejects a valid cookie of a user that does not exist', async () => {
    const res = await app.inject({
      url: '/v1/work',
      headers: cookie(signSession('usr_gone', inAnHour(), SESSION_SECRET)),
    });
    expect(res.statusCode).toBe(401);
  });

  it('does not let a cookie rescue a bad bearer key', async () => {
    const user = await harness.identity.ensureUser(uniqueId('heidi'));
    const res = await app.inject({
      url: '/v1/work',
      headers: { ...cookie(signSession(user._id, inAnHour(), SESSION_SECRET)), authorization: 'Bearer nope' },
    });
    expect(res.statusCode).toBe(401);
  });

  it('refuses cookie-authenticated writes from another origin, a sibling subdomain’s included', async () => {
    const user = await harness.identity.ensureUser(uniqueId('ivan'));
    const { run } = await harness.run(user._id);
    const headers = cookie(signSession(user._id, inAnHour(), SESSION_SECRET));
    for (const site of ['cross-site', 'same-site', 'none']) {
      const other = await app.inject({
        method: 'POST',
        url: `/v1/runs/${run.id}/cancel`,
        headers: { ...headers, 'sec-fetch-site': site },
      });
      expect(other.statusCode, site).toBe(401);
    }
    // A read from another origin is not a write: the cookie still works for it.
    const read = await app.inject({ url: '/v1/work', headers: { ...headers, 'sec-fetch-site': 'same-site' } });
    expect(read.statusCode).toBe(200);
    const sameOrigin = await app.inject({
      method: 'POST',
      url: `/v1/runs/${run.id}/cancel`,
      headers: { ...headers, 'sec-fetch-site': 'same-origin' },
    });
    expect(sameOrigin.statusCode).toBe(202);
  });
});

/** Sends raw bytes of an HTTP request and resolves with everything the server answered. */
function rawRequest(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(bytes));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}
