import { randomUUID } from 'node:crypto';
import { RepositoryList, SERVICES, domainEvents } from '@threadwork/contracts';
import { signWebhook, waitFor, type FakeGitHub, type FakeRepository } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkInstallation, startGitHubStack, type GitHubStack } from '../support/github.js';
import type { Stack, TestUser } from '../support/stack.js';

// GitHub's webhook deliveries reach the one unauthenticated POST of the API. The attacker can send
// anything to it, from many addresses, and may have captured a real delivery. The real services,
// the real HTTP path; the gateway sits behind a proxy on loopback (TRUST_PROXY=loopback), so each
// test speaks from addresses of its own through `X-Forwarded-For`.

const SECRET = 'webhooks-test-secret';
const BURST = 4;

let gh: GitHubStack;
let stack: Stack;
let fake: FakeGitHub;
let owner: TestUser;
let widgets: FakeRepository;

/** Every delivery id sent on NATS to repohost, and every one repohost queued on DOMAIN. */
const forwarded: string[] = [];
const queued: string[] = [];
const subscriptions: { unsubscribe(): void }[] = [];

beforeAll(async () => {
  // The webhook secret is read by repohost and by the gateway alike.
  gh = await startGitHubStack(
    { appId: 4711, slug: 'threadwork-hooks', webhookSecret: SECRET, scheme: 'twhooks' },
    {
      TRUST_PROXY: 'loopback',
      PUBLIC_RATE_LIMIT_BURST: String(BURST),
      // Practically no refill: a spent bucket stays spent for the length of the test.
      PUBLIC_RATE_LIMIT_PER_SECOND: '0.001',
    },
  );
  ({ stack, fake } = gh);
  widgets = fake.addRepository('hooks-gh', 'widgets');

  // What crosses NATS, seen by the test's own (unrestricted) connection.
  const listen = (subject: string, into: string[]) => {
    const sub = stack.nc.subscribe(subject);
    subscriptions.push(sub);
    void (async () => {
      for await (const msg of sub) into.push((msg.json() as { delivery: string }).delivery);
    })();
  };
  listen(SERVICES.repohost.subjects.webhook, forwarded);
  listen(domainEvents.webhookReceived.subject, queued);
  await stack.nc.flush();

  // The owner links the installation (no OAuth here: the install page, setup callback and code).
  owner = await stack.createUser('hooks-owner');
  await linkInstallation(gh, owner, 'hooks-gh');
});

afterAll(async () => {
  for (const sub of subscriptions) sub.unsubscribe();
  await gh?.stop();
});

interface Delivery {
  event: string;
  body: string;
  delivery?: string;
  /** `good` signs with the app's secret; `forged` with another; `missing` sends none. */
  signature?: 'good' | 'forged' | 'missing';
  /** The client address the proxy names. */
  from: string;
}

async function deliver(d: Delivery): Promise<{ status: number; json: unknown; headers: Headers; delivery: string }> {
  const delivery = d.delivery ?? randomUUID();
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-github-event': d.event,
    'x-github-delivery': delivery,
    'x-forwarded-for': d.from,
  };
  const signature = d.signature ?? 'good';
  if (signature === 'good') headers['x-hub-signature-256'] = signWebhook(SECRET, d.body);
  if (signature === 'forged') headers['x-hub-signature-256'] = signWebhook('not-the-secret', d.body);
  const res = await fetch(`${stack.baseUrl}/v1/repohost/webhooks`, { method: 'POST', headers, body: d.body });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null, headers: res.headers, delivery };
}

/**
 * Sends a signed delivery of its own after what a test did, from `from`, and waits until repohost
 * queued it. The gateway forwards over one NATS connection, in order, so whatever the test sent
 * before and was going to reach NATS has reached it by then.
 */
async function drained(from: string): Promise<void> {
  const marker = await deliver({ event: 'ping', body: JSON.stringify({ zen: randomUUID(), hook_id: 1 }), from });
  expect(marker.status).toBe(202);
  await waitFor('the marker delivery', () => queued.includes(marker.delivery));
}

const repositoryPayload = (action: string) => JSON.stringify(fake.payloads.repository(action, widgets.id));

describe('webhook intake', () => {
  it('processes a signed delivery', async () => {
    // Listed once, so the list is cached (for GITHUB_CACHE_TTL_MS): only the webhook changes it now.
    const before = await stack.fetch('/v1/repohost/repositories', { user: owner });
    expect(RepositoryList.parse(await before.json()).repositories.map((r) => r.full_name)).toEqual([
      'hooks-gh/widgets',
    ]);
    const repo = fake.repositories.get(widgets.id)!;
    repo.name = 'gadgets';
    repo.full_name = 'hooks-gh/gadgets';
    const res = await deliver({ event: 'repository', body: repositoryPayload('renamed'), from: '203.0.113.10' });
    expect(res.status).toBe(202);
    expect(res.json).toEqual({ status: 'accepted' });
    await waitFor('the rename to be applied', async () => {
      const list = await stack.fetch('/v1/repohost/repositories', { user: owner });
      return RepositoryList.parse(await list.json()).repositories.some((r) => r.full_name === 'hooks-gh/gadgets');
    });
  });

  it('refuses a bad or missing signature at the gateway: nothing reaches NATS or repohost', async () => {
    const from = '203.0.113.20';
    const body = repositoryPayload('edited');
    const refused: string[] = [];
    for (const signature of ['forged', 'missing'] as const) {
      const res = await deliver({ event: 'repository', body, signature, from });
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'Unauthorized' });
      refused.push(res.delivery);
    }
    // A signature of the right shape over other bytes.
    const tampered = await fetch(`${stack.baseUrl}/v1/repohost/webhooks`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'repository',
        'x-github-delivery': 'tampered-1',
        'x-hub-signature-256': signWebhook(SECRET, body),
        'x-forwarded-for': from,
      },
      body: body.replace('"edited"', '"deleted"'),
    });
    expect(tampered.status).toBe(401);
    refused.push('tampered-1');
    await drained(from);
    expect(forwarded.filter((delivery) => refused.includes(delivery))).toEqual([]);
    expect(queued.filter((delivery) => refused.includes(delivery))).toEqual([]);
  });

  it('refuses a captured body replayed under a new delivery id, and takes GitHub’s redelivery as a repeat', async () => {
    const from = '203.0.113.30';
    const body = repositoryPayload('publicized');
    const first = await deliver({ event: 'repository', body, from });
    expect(first).toMatchObject({ status: 202, json: { status: 'accepted' } });
    const replay = await deliver({ event: 'repository', body, from });
    expect(replay).toMatchObject({ status: 401, json: { error: 'Unauthorized' } });
    const redelivery = await deliver({ event: 'repository', body, from, delivery: first.delivery });
    expect(redelivery).toMatchObject({ status: 202, json: { status: 'duplicate' } });
    // A fresh signed body under an event name its payload contradicts.
    const mislabelled = await deliver({ event: 'installation', body: repositoryPayload('privatized'), from });
    expect(mislabelled.status).toBe(400);
    expect(mislabelled.json).toMatchObject({
      error: { code: 'invalid_request', message: expect.stringMatching(/^headers\.x-github-event: /) },
    });
    await drained(from);
    expect(queued.filter((delivery) => delivery === first.delivery)).toHaveLength(1);
    expect(queued).not.toContain(replay.delivery);
    expect(queued).not.toContain(mislabelled.delivery);
  });

  it('refuses a body too large to forward as it arrives, sending nothing', async () => {
    const from = '203.0.113.40';
    // The gateway forwards at most ~765 KiB (NATS' default 1 MiB, base64); GitHub may send 25 MiB.
    const body = JSON.stringify({ zen: 'x'.repeat(2 * 1024 * 1024), hook_id: 1 });
    const res = await deliver({ event: 'ping', body, from });
    expect(res.status).toBe(413);
    expect(res.json).toMatchObject({ error: { code: 'payload_too_large' } });
    await drained(from);
    expect(forwarded).not.toContain(res.delivery);
  });

  it('answers 429 with Retry-After past the per-address limit, and never holds back accepted deliveries', async () => {
    const attacker = '198.51.100.66';
    for (let i = 0; i < BURST; i++) {
      expect((await deliver({ event: 'ping', body: '{}', signature: 'forged', from: attacker })).status).toBe(401);
    }
    const limited = await deliver({ event: 'ping', body: '{}', signature: 'forged', from: attacker });
    expect(limited.status).toBe(429);
    expect(limited.json).toMatchObject({ error: { code: 'rate_limited' } });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The setup callback counts against the same address; others are not affected.
    const setup = await fetch(`${stack.baseUrl}/v1/repohost/setup?state=guess`, {
      headers: { 'x-forwarded-for': attacker },
      redirect: 'manual',
    });
    expect(setup.status).toBe(429);
    expect(setup.headers.get('retry-after')).not.toBeNull();
    expect((await deliver({ event: 'ping', body: '{}', signature: 'forged', from: '198.51.100.67' })).status).toBe(401);

    // GitHub, from an address of its own: each accepted delivery gives its token back.
    const github = '140.82.115.1';
    for (let i = 0; i < BURST * 2; i++) {
      const body = JSON.stringify({ zen: `delivery ${i} ${randomUUID()}`, hook_id: 1 });
      expect(await deliver({ event: 'ping', body, from: github })).toMatchObject({ status: 202 });
    }
  });
});
