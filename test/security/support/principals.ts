// The services each connected as its own NATS identity, and the calls the principals tests make of them.
//
// What one service's NATS key still lets its holder do beyond that service's purpose, played
// against the real services, each connected as its own identity (test/security/nats.test.ts says
// what NATS itself refuses; this says what the services refuse of what NATS lets through). The
// attacker most likely holds the runner's key: the runner runs next to the agent's code.

import { join } from 'node:path';
import { ControlSubmission, RunEventPage, Run, ThreadWithRun, type NatsIdentity } from '@threadwork/contracts';
import {
  AppError,
  connectNats,
  createLogger,
  jetStreamOf,
  loadConfig,
  natsAuthWithSeed,
  type NatsConnection,
} from '@threadwork/platform';
import { RunnerConfig, startRunner, type RunnerService } from '@threadwork/runner';
import {
  askUser,
  say,
  scriptsByPrompt,
  startFakeModel,
  uniqueId,
  type FakeModelServer,
  type FakeScript,
  domainHandled,
} from '@threadwork/testing';
import { afterAll, beforeAll, expect, inject } from 'vitest';
import { startStack, type Stack, type TestUser } from '../../support/stack.js';

export const hasBinary = Boolean(inject('natsServerBin'));
const logger = createLogger({ service: 'principals-test', level: 'silent' });

/** Runs of this harness wait, queued, for the test to claim them as their runner; the real runner serves `codex`. */
export const HELD = 'held';
export const STEER_TEXT = 'Also write the tests.';
/** What the user steers a SEALED run with (a prefix of no script, so the run's own script answers it). */
export const SEALED_STEER = 'Mind the secret';
/** The answer a SEALED run asks for, as an option (Codex offers options) or, where it allows, as free text. */
export const SEALED_ANSWER = uniqueId('ANSWERMARK');
/** A turn that waits for its steer (or 20 s), then answers it. */
export const scripts = new Map<string, FakeScript>([
  [
    'STEER',
    (req: { lastUserText: string }) =>
      req.lastUserText === STEER_TEXT
        ? [say('Writing the tests too.')]
        : { items: [say('Working on it…')], delayMs: 20_000 },
  ],
  [
    // Asks a question, then waits for a steer (or 20 s), then answers it.
    'SEALED',
    (req) => {
      if (req.lastUserText.startsWith(SEALED_STEER)) return [say('Steered.')];
      if (req.toolOutputsSinceLastUser.length === 0) {
        const options = [SEALED_ANSWER, 'none'].map((label) => ({ label, description: label }));
        return [askUser([{ id: 'code', header: 'Code', question: 'Which deploy code?', options }])];
      }
      return { items: [say('Working on it…')], delayMs: 20_000 };
    },
  ],
]);

export let stack: Stack;
export let fake: FakeModelServer;
let runner: RunnerService | undefined;
export let alice: TestUser;
export let bob: TestUser;
export let repoId: number;
const connections: NatsConnection[] = [];

/**
 * Starts the services with their own NATS keys, users alice and bob and a repository; `withRunner`
 * adds the real runner (serving `codex`) against a fake model playing `scripts`. Call inside the
 * file's describe.
 */
export function usePrincipalsStack({ withRunner }: { withRunner: boolean }): void {
  beforeAll(async () => {
    stack = await startStack({ HARNESSES: `codex,${HELD}` });
    [alice, bob] = await Promise.all([stack.createUser('alice'), stack.createUser('bob')]);
    repoId = await stack.addRepo('principals', { files: { 'README.md': '# Principals\n' } });
    if (!withRunner) return;
    fake = await startFakeModel(scriptsByPrompt(scripts));
    runner = await startRunner(
      loadConfig(RunnerConfig, {
        ...stack.env,
        ...stack.nats.env('runner'),
        SANDBOX_ROOT: join(stack.reposDir, uniqueId('.sandboxes-')),
        RUNNER_ID: uniqueId('runner-'),
        // The runner serves codex; `held` is a harness no runner serves (jobs wait on it).
        HARNESSES: 'codex',
        MODEL_BASE_URL: fake.baseUrl,
        MODEL_API_KEY: 'sk-test',
        RUN_POLL_MS: '300',
      }),
    );
  });
  afterAll(async () => {
    for (const nc of connections) await nc.close();
    await runner?.stop();
    await fake?.close();
    await stack?.stop();
  });
}

/** A connection with `identity`'s own key, as that service (or whoever stole its key) connects. */
export async function connectAs(identity: NatsIdentity): Promise<NatsConnection> {
  const nc = await connectNats({
    servers: stack.nats.url,
    name: `as-${identity}`,
    logger,
    auth: natsAuthWithSeed(stack.nats.keys![identity].seed, identity),
  });
  connections.push(nc);
  return nc;
}

export async function json<T>(res: Response, status: number, schema: { parse(v: unknown): T }): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return schema.parse(JSON.parse(text));
}

/**
 * A thread through the public API. Its run waits, queued, for the test to claim it as its runner
 * (no runner serves HELD), unless `harness` is the real runner's.
 */
export async function createThread(user: TestUser, prompt = 'Add a changelog', harness = HELD) {
  const res = await stack.fetch('/v1/threads', {
    method: 'POST',
    user,
    body: JSON.stringify({ repository_id: repoId, prompt, harness }),
  });
  return json(res, 202, ThreadWithRun);
}

/** A steer of `threadId`'s live run through the public API, as its owner (or anyone) sends one. */
export async function steer(user: TestUser, threadId: string, prompt: string) {
  const res = await stack.fetch(`/v1/threads/${threadId}/steer`, {
    method: 'POST',
    user,
    body: JSON.stringify({ prompt }),
  });
  return json(res, 202, ControlSubmission);
}

export async function runOf(user: TestUser, runId: string) {
  return json(await stack.fetch(`/v1/runs/${runId}`, { user }), 200, Run);
}

export async function eventsOf(user: TestUser, runId: string) {
  return json(await stack.fetch(`/v1/runs/${runId}/events?from=0&limit=1000`, { user }), 200, RunEventPage);
}

/** Waits until `durable` has handled every DOMAIN event up to `seq` (acted on it, or ignored it). */
export async function handledUpTo(durable: string, seq: number): Promise<void> {
  await domainHandled((await jetStreamOf(stack.nc)).jsm, durable, seq);
}

export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Whether NATS itself refuses `nc` a request on `subject` (its grant does not name it). */
export async function natsRefuses(nc: NatsConnection, subject: string): Promise<boolean> {
  try {
    await nc.request(subject, new TextEncoder().encode('{}'), { timeout: 5_000 });
    return false;
  } catch (err) {
    const message = `${(err as Error).message} ${String((err as { cause?: Error }).cause?.message ?? '')}`;
    return /permissions violation/i.test(message);
  }
}

/** The AppError a call failed with (fails the test if it succeeded). */
export async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const outcome = await promise.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  if (outcome.ok) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.err).toBeInstanceOf(AppError);
  return outcome.err as AppError;
}
