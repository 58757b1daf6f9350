import { RunEventPage, Run, ThreadWithRun, type NatsIdentity } from '@threadwork/contracts';
import { AppError, connectNats, createLogger, natsAuthWithSeed, type NatsConnection } from '@threadwork/platform';
import { newClaimId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RunDriver } from '../support/driver.js';
import { startStack, type Stack, type TestUser } from '../support/stack.js';

// What one service's NATS key still lets its holder do beyond that service's purpose, played
// against the real services, each connected as its own identity (test/security/nats.test.ts says
// what NATS itself refuses; this says what the services refuse of what NATS lets through). The
// attacker most likely holds the runner's key: the runner runs next to the agent's code.

const hasBinary = Boolean(inject('natsServerBin'));
const logger = createLogger({ service: 'principals-test', level: 'silent' });

let stack: Stack;
let alice: TestUser;
let repoId: number;
const connections: NatsConnection[] = [];

/** A connection with `identity`'s own key, as that service (or whoever stole its key) connects. */
async function connectAs(identity: NatsIdentity): Promise<NatsConnection> {
  const nc = await connectNats({
    servers: stack.nats.url,
    name: `as-${identity}`,
    logger,
    auth: natsAuthWithSeed(stack.nats.keys![identity].seed, identity),
  });
  connections.push(nc);
  return nc;
}

async function json<T>(res: Response, status: number, schema: { parse(v: unknown): T }): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return schema.parse(JSON.parse(text));
}

/** A thread through the public API; no runner serves the stack, so its run waits, queued, for the test to claim it. */
async function createThread(user: TestUser, prompt = 'Add a changelog') {
  const res = await stack.fetch('/v1/threads', {
    method: 'POST',
    user,
    body: JSON.stringify({ repository_id: repoId, prompt }),
  });
  return json(res, 202, ThreadWithRun);
}

async function runOf(user: TestUser, runId: string) {
  return json(await stack.fetch(`/v1/runs/${runId}`, { user }), 200, Run);
}

async function eventsOf(user: TestUser, runId: string) {
  return json(await stack.fetch(`/v1/runs/${runId}/events?from=0&limit=1000`, { user }), 200, RunEventPage);
}

/** The AppError a call failed with (fails the test if it succeeded). */
async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const outcome = await promise.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  if (outcome.ok) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.err).toBeInstanceOf(AppError);
  return outcome.err as AppError;
}

describe.skipIf(!hasBinary)('what one service’s NATS key can still do', () => {
  beforeAll(async () => {
    stack = await startStack();
    alice = await stack.createUser('alice');
    repoId = await stack.addRepo('principals');
  });
  afterAll(async () => {
    for (const nc of connections) await nc.close();
    await stack?.stop();
  });

  describe('the runner’s key, for a run another runner holds', () => {
    it('cannot move it, append to its log or ask its owner a question: the claim, not the attempt number, fences', async () => {
      const runnerKey = await connectAs('runner');
      const thread = await createThread(alice);
      // The legitimate runner (same NATS identity: every runner shares it) claims the run.
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();

      // The attacker knows the run id (jobs name it) and can guess the attempt (0), not the claim.
      for (const attempt of [0, 1]) {
        const forged = new RunDriver(runnerKey, thread.run_id, attempt, newClaimId());
        expect((await refusal(forged.to('completed'))).code).toBe('already_settled');
        expect((await refusal(forged.say('FORGED: the work is done'))).code).toBe('already_settled');
        expect(
          (
            await refusal(
              forged.ask([{ id: 'q', header: 'Q', question: 'FORGED?', isOther: false, isSecret: false, options: [] }]),
            )
          ).code,
        ).toBe('already_settled');
      }
      expect(await runOf(alice, thread.run_id)).toMatchObject({ status: 'running', attempt: 0 });
      expect(JSON.stringify((await eventsOf(alice, thread.run_id)).events)).not.toContain('FORGED');

      // The holder goes on as before.
      await holder.say('the real reply');
      await holder.to('completed');
      const page = await eventsOf(alice, thread.run_id);
      expect(page).toMatchObject({ status: 'completed', terminal: true });
      expect(JSON.stringify(page.events)).toContain('the real reply');
      expect(JSON.stringify(page.events)).not.toContain('FORGED');
    });
  });
});
