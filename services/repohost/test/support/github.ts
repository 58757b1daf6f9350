import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { domainEvents, rpc, type CandidateProducedEvent } from '@threadwork/contracts';
import {
  AppError,
  connectMongo,
  connectNats,
  createLogger,
  domainEventDigest,
  encodeJson,
  jetStreamOf,
  loadConfig,
  publishJson,
  request,
  type JetStreamHandles,
  type MongoClient,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import {
  baseServiceEnv,
  createBareRepo,
  isolatedNats,
  newClaimId,
  pkcePair,
  startGitHubApp,
  uniqueDbPrefix,
  uniqueId,
  type FakeGitHub,
  type FakeRepository,
  type IsolatedNats,
} from '@threadwork/testing';
import { afterAll, beforeAll, expect } from 'vitest';
import { RunsConfig, startRuns } from '@threadwork/runs';
import { RepohostConfig, startRepohost } from '../../src/index.js';

const APP_ID = 4242;
export const SLUG = 'threadwork-test';
export const SECRET = 'webhook-secret-for-tests';
export const SCHEME = 'twtest';
export const RETURN_TO = `${SCHEME}://repohost/setup`;
/** Where browsers reach the gateway (PUBLIC_BASE_URL), and the console's setup page under it. */
export const PUBLIC_BASE_URL = 'https://threadwork.test';
export const CONSOLE_RETURN_TO = `${PUBLIC_BASE_URL}/settings/github`;

export const alice = 'usr_alice';
export const bob = 'usr_bob';

// Asynchronous on purpose: the fake GitHub answers git from this very process.
const run = promisify(execFile);
export const gitClone = (url: string, dir: string) =>
  run('git', ['clone', '--quiet', url, dir], { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });

export const outcome = (redirect: string): Record<string, string> => {
  const url = new URL(redirect);
  return { base: `${url.protocol}//${url.host}${url.pathname}`, ...Object.fromEntries(url.searchParams) };
};

export const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (err: unknown) => (err instanceof AppError ? `${err.code}: ${err.message}` : String(err)),
  );

/**
 * Repohost with the GitHub App provider against a fake GitHub, beside the real runs service, on a
 * NATS server of its own. Its fields are there once the file's `beforeAll` has run.
 */
export class GitHubProvider {
  nc!: NatsConnection;
  jetstream!: JetStreamHandles;
  mongo!: MongoClient;
  fake!: FakeGitHub;
  dbPrefix!: string;
  widgets!: FakeRepository;
  gadgets!: FakeRepository;
  secretStuff!: FakeRepository;
  /** Repohost's log lines (warnings and worse). */
  readonly logLines: string[] = [];

  private nats?: IsolatedNats;
  private service?: StartedService;
  private runs?: StartedService;
  private localDir?: string;

  async start(): Promise<void> {
    const app = await startGitHubApp({ appId: APP_ID, slug: SLUG, webhookSecret: SECRET, scheme: SCHEME });
    this.fake = app.fake;
    this.widgets = this.fake.addRepository('alice-gh', 'widgets', { branch: 'trunk' });
    this.gadgets = this.fake.addRepository('alice-gh', 'gadgets');
    this.secretStuff = this.fake.addRepository('carol-gh', 'secret-stuff');
    // Carol installed long ago: her installation id must not be linkable by a session of ours.
    this.fake.install('carol-gh', { createdAt: new Date(Date.now() - 24 * 60 * 60 * 1000) });

    this.localDir = mkdtempSync(join(tmpdir(), 'threadwork-repohost-gh-'));
    createBareRepo(this.localDir, 'local-only');
    const nats = (this.nats = await isolatedNats());
    // Tokens go to the runner holding a live run: the runs service says which run a claim holds.
    this.dbPrefix = uniqueDbPrefix();
    this.runs = await startRuns(loadConfig(RunsConfig, baseServiceEnv(nats.env('runs'), this.dbPrefix)));
    this.service = await startRepohost(
      loadConfig(RepohostConfig, {
        ...baseServiceEnv(nats.env('repohost'), this.dbPrefix),
        REPOHOST_LOCAL_DIR: this.localDir,
        ...app.env,
        // One line with `\n`, as in an env file.
        GITHUB_APP_PRIVATE_KEY: app.env.GITHUB_APP_PRIVATE_KEY!.replace(/\n/g, '\\n'),
        PUBLIC_BASE_URL,
        // Only webhooks move publications in these tests.
        PUBLICATION_SYNC_MS: String(60 * 60_000),
      }),
      // Its warnings, read by the test of GitHub's failures.
      {
        logger: createLogger({
          service: 'repohost',
          level: 'warn',
          destination: { write: (line) => this.logLines.push(line) },
        }),
      },
    );
    this.nc = await connectNats({
      servers: nats.url,
      auth: nats.testAuth,
      name: 'repohost-gh-test',
      logger: createLogger({ service: 'test', level: 'silent' }),
    });
    this.jetstream = await jetStreamOf(this.nc);
    this.mongo = await connectMongo({
      url: baseServiceEnv(nats.env('repohost')).MONGO_URL!,
      appName: 'repohost-gh-test',
    });
  }

  async stop(): Promise<void> {
    await this.nc?.drain();
    await this.service?.stop();
    await this.runs?.stop();
    await this.mongo?.close();
    await this.nats?.stop();
    await this.fake?.close();
    if (this.localDir) rmSync(this.localDir, { recursive: true, force: true });
  }

  /**
   * A live run of `owner` on `repositories`, claimed as a runner claims it: what a token is asked
   * for, and what attests the run's DOMAIN events. `thread` and `prr` (its project repository ids)
   * give a thread's next run.
   */
  heldRun = async (
    owner: string,
    repositories: Pick<FakeRepository, 'id' | 'full_name'>[],
    thread = { id: uniqueId('thr_'), prr: repositories.map(() => uniqueId('prp_')) },
  ) => {
    const { run } = await request(this.nc, rpc.runs.admit, {
      owner_id: owner,
      thread_id: thread.id,
      project_id: uniqueId('prj_'),
      message_id: uniqueId('msg_'),
      admission_key: uniqueId('adm_'),
      prompt: 'Push the branch',
      repositories: repositories.map((r, i) => ({
        project_repository_id: thread.prr[i]!,
        repository_id: r.id,
        full_name: r.full_name,
        branch: 'trunk',
        // Where the runner would clone from; the runs service only keeps it.
        clone_url: `https://github.invalid/${r.full_name}.git`,
      })),
    });
    const claimId = newClaimId();
    await request(this.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-test', claim_id: claimId });
    return { run_id: run.id, claim_id: claimId, thread };
  };

  /** Publishes a candidate as the runner does: attested by the holder of its run first (unless `forged`). */
  publishCandidate = async (
    held: { run_id: string; claim_id: string } | null,
    event: CandidateProducedEvent,
    msgId: string,
  ) => {
    const subject = domainEvents.candidateProduced.subject;
    if (held) {
      const digest = domainEventDigest(encodeJson(event));
      await request(this.nc, rpc.runs.attest, {
        run_id: held.run_id,
        attempt: 0,
        claim_id: held.claim_id,
        subject,
        digest,
      });
    }
    await publishJson(this.jetstream.js, subject, event, { msgId });
  };

  /** The browser's part: open the install URL as `login`, land on the setup URL GitHub redirects to. */
  installAs = async (login: string, installUrl: string) => {
    const res = await fetch(installUrl, { headers: { 'x-fake-login': login }, redirect: 'manual' });
    expect(res.status).toBe(302);
    const setup = new URL(res.headers.get('location')!);
    return {
      installation_id: Number(setup.searchParams.get('installation_id')),
      setup_action: setup.searchParams.get('setup_action') ?? undefined,
      state: setup.searchParams.get('state')!,
    };
  };

  /** An install session of `owner`'s, with the PKCE verifier its client keeps. */
  startSession = async (owner: string, returnTo = RETURN_TO) => {
    const pkce = pkcePair();
    const session = await request(this.nc, rpc.repohost.installSession, {
      owner_id: owner,
      return_to: returnTo,
      code_challenge: pkce.challenge,
    });
    return { ...session, state: new URL(session.install_url).searchParams.get('state')!, verifier: pkce.verifier };
  };

  link = (owner: string, code: string, verifier: string) =>
    request(this.nc, rpc.repohost.link, { owner_id: owner, code, code_verifier: verifier });

  /** Session, install page as `login`, setup callback: the one-time code and the verifier that redeems it. */
  installFor = async (owner: string, login: string) => {
    const session = await this.startSession(owner);
    const callback = await this.installAs(login, session.install_url);
    const returned = outcome((await request(this.nc, rpc.repohost.setup, callback)).redirect_to);
    expect(returned).toMatchObject({ outcome: 'installed', installation_id: String(callback.installation_id) });
    return { installationId: callback.installation_id, code: returned.code!, verifier: session.verifier };
  };

  /** Links alice's GitHub account the whole way round; her installation's id. */
  connectAlice = async (): Promise<number> => {
    const { installationId, code, verifier } = await this.installFor(alice, 'alice-gh');
    await this.link(alice, code, verifier);
    return installationId;
  };
}

/** A GitHubProvider started once for the file that calls this, and stopped after it. */
export function useGitHubProvider(): GitHubProvider {
  const gh = new GitHubProvider();
  beforeAll(() => gh.start());
  afterAll(() => gh.stop());
  return gh;
}
