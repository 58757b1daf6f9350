import { randomBytes } from 'node:crypto';
import {
  isTerminalRunStatus,
  rpc,
  type AdmitRequest,
  type HostedRepository,
  type Run,
  type RunStatus,
  type RunStatusEvent,
} from '@threadwork/contracts';
import {
  conflict,
  notFound,
  route,
  serveRpc,
  unavailable,
  type JetStreamClient,
  type Logger,
  type NatsConnection,
  type RpcServer,
} from '@threadwork/platform';
import { publishRunStatus } from './domain.js';

// Test doubles of the runs and repohost endpoints threads calls, served over the real NATS so the
// threads service runs unchanged. They keep just enough state in memory: one live run per thread,
// admission by key, owners' repositories. Only the tests that need what the real services do not
// let a test arrange use them: an admission whose answer is lost or held back, runs failing one
// admission, a run that ends while its `live` answer travels, runs moved before their DOMAIN event
// is out, an owner who sees no repository. doubles.contract.test.ts runs them and the real
// services through the same cases.

export const HARNESS_DEFAULTS = {
  harness: 'codex',
  model: 'gpt-5-codex',
  reasoning_effort: 'medium',
  collaboration_mode: 'default',
} as const;

interface StoredRun {
  owner_id: string;
  admission_key: string;
  repositories: AdmitRequest['repositories'];
  run: Run;
}

export interface RunsDouble {
  /** Every admit request received, in order (repeats included). */
  readonly admissions: AdmitRequest[];
  /** Runs actually created, oldest first. */
  created(threadId?: string): Run[];
  run(runId: string): Run;
  /** Runs `fn` right after the next `live` answer is computed: the run moves while the answer travels. */
  afterNextLive(fn: () => void): void;
  /** The next `n` admits answer `unavailable`, as if runs were down. */
  failNextAdmits(n: number): void;
  /** The next admit creates its run but answers `unavailable`, as if the reply was lost. */
  loseNextAdmitAnswer(): void;
  /**
   * The next admit is decided at once but answered only when `release` is called, as if its reply
   * were slow to travel; `received` resolves once that admit has arrived and been decided.
   */
  holdNextAdmit(): { received: Promise<void>; release: () => void };
  /** Records a runner event (its subject and digest) as attested by its run's holder. */
  attest(subject: string, digest: string): void;
  /** Makes `claimId` the claim that holds the run, as a runner's claim would. */
  hold(runId: string, claimId: string): void;
  /** Moves a run without telling anyone (no DOMAIN event). */
  setStatus(runId: string, status: RunStatus): RunStatusEvent;
  /** Moves a run and publishes its DOMAIN status event, as the runs service does. */
  transition(runId: string, status: RunStatus): Promise<{ event: RunStatusEvent; seq: number }>;
  stop(): Promise<void>;
}

export async function serveRunsDouble(nc: NatsConnection, js: JetStreamClient, logger: Logger): Promise<RunsDouble> {
  const runs = new Map<string, StoredRun>();
  const byKey = new Map<string, string>();
  const liveByThread = new Map<string, string>();
  const claims = new Map<string, string>();
  const attested = new Map<string, string>();
  const admissions: AdmitRequest[] = [];
  let failures = 0;
  let loseAnswer = false;
  let afterLive: (() => void) | undefined;
  let hold: { decided: () => void; released: Promise<void> } | undefined;

  const stored = (runId: string): StoredRun => {
    const found = runs.get(runId);
    if (!found) throw new Error(`no run ${runId}`);
    return found;
  };

  const setStatus = (runId: string, status: RunStatus): RunStatusEvent => {
    const entry = stored(runId);
    const previous = entry.run.status;
    const now = new Date().toISOString();
    const terminal = isTerminalRunStatus(status);
    entry.run = { ...entry.run, status, terminal, updated_at: now, completed_at: terminal ? now : null };
    if (terminal && liveByThread.get(entry.run.thread_id) === runId) liveByThread.delete(entry.run.thread_id);
    return {
      run_id: runId,
      thread_id: entry.run.thread_id,
      owner_id: entry.owner_id,
      status,
      previous,
      terminal,
      attempt: 0,
      error: status === 'failed' ? { code: 'harness_error', message: 'the harness failed' } : null,
      at: now,
    };
  };

  /** Decides one admission: by key, then one live run per thread. */
  const admit = async (req: AdmitRequest): Promise<{ run: Run; created: boolean }> => {
    if (failures > 0) {
      failures -= 1;
      throw unavailable('runs double told to fail');
    }
    const known = byKey.get(req.admission_key);
    if (known) return { run: stored(known).run, created: false };
    if (liveByThread.has(req.thread_id)) throw conflict('thread_busy', 'the thread has a live run');
    const id = req.run_id ?? `run_${randomBytes(16).toString('hex')}`;
    const now = new Date().toISOString();
    const run: Run = {
      id,
      thread_id: req.thread_id,
      project_id: req.project_id,
      message_id: req.message_id,
      status: 'queued',
      attempt: 0,
      harness: req.harness ?? HARNESS_DEFAULTS.harness,
      model: req.model ?? HARNESS_DEFAULTS.model,
      reasoning_effort: req.reasoning_effort ?? HARNESS_DEFAULTS.reasoning_effort,
      collaboration_mode: req.collaboration_mode ?? HARNESS_DEFAULTS.collaboration_mode,
      sandbox_id: null,
      error: null,
      usage: null,
      created_at: now,
      updated_at: now,
      started_at: null,
      completed_at: null,
      terminal: false,
    };
    runs.set(id, { owner_id: req.owner_id, admission_key: req.admission_key, repositories: req.repositories, run });
    byKey.set(req.admission_key, id);
    liveByThread.set(req.thread_id, id);
    if (loseAnswer) {
      loseAnswer = false;
      throw unavailable('runs double lost the answer');
    }
    return { run, created: true };
  };

  const server: RpcServer = await serveRpc(
    nc,
    { name: 'runs', version: '0.0.0' },
    [
      route(rpc.runs.admit, async (req) => {
        admissions.push(req);
        const held = hold;
        hold = undefined;
        if (!held) return admit(req);
        const outcome = await admit(req).then(
          (value) => ({ value }),
          (err: unknown) => ({ err }),
        );
        held.decided();
        await held.released;
        if ('err' in outcome) throw outcome.err;
        return outcome.value;
      }),
      route(rpc.runs.get, async ({ owner_id, run_id }) => {
        const entry = runs.get(run_id);
        if (!entry || entry.owner_id !== owner_id) throw notFound('run');
        return entry.run;
      }),
      // As the runs service answers, for the facts this double keeps: the run's thread, owner and repositories.
      route(rpc.runs.attestation, async ({ run_id, thread_id, owner_id, subject, digest, repository }) => {
        const entry = runs.get(run_id);
        if (!entry) return { confirmed: false, reason: 'no such run' };
        if (attested.get(digest) !== subject) return { confirmed: false, reason: 'not attested' };
        if (entry.run.thread_id !== thread_id) return { confirmed: false, reason: 'another thread' };
        if (owner_id !== undefined && entry.owner_id !== owner_id) return { confirmed: false, reason: 'another owner' };
        const named =
          !repository ||
          entry.repositories.some(
            (r) =>
              r.project_repository_id === repository.project_repository_id &&
              r.repository_id === repository.repository_id,
          );
        if (!named) return { confirmed: false, reason: 'not a repository of the run' };
        return { confirmed: true, reason: null };
      }),
      route(rpc.runs.holder, async ({ run_id, claim_id }) => {
        const entry = runs.get(run_id);
        if (!entry) throw notFound('run');
        if (entry.run.terminal || claims.get(run_id) !== claim_id) {
          throw conflict('already_settled', `run ${run_id} is not held by this claim`);
        }
        return { owner_id: entry.owner_id, repository_ids: entry.repositories.map((r) => r.repository_id) };
      }),
      route(rpc.runs.getMany, async ({ owner_id, run_ids }) => ({
        runs: run_ids.flatMap((id) => {
          const entry = runs.get(id);
          return entry && entry.owner_id === owner_id ? [{ id: entry.run.id, status: entry.run.status }] : [];
        }),
      })),
      route(rpc.runs.liveCount, async ({ owner_id, at_most }) => ({
        live: Math.min(
          at_most,
          [...runs.values()].filter((entry) => entry.owner_id === owner_id && !entry.run.terminal).length,
        ),
      })),
      route(rpc.runs.live, async ({ owner_id, thread_id }) => {
        const id = liveByThread.get(thread_id);
        const entry = id ? runs.get(id) : undefined;
        const answer = { run: entry && entry.owner_id === owner_id ? entry.run : null };
        const hook = afterLive;
        afterLive = undefined;
        hook?.();
        return answer;
      }),
    ],
    logger,
  );

  return {
    admissions,
    created: (threadId) =>
      [...runs.values()].map(({ run }) => run).filter((run) => threadId === undefined || run.thread_id === threadId),
    run: (runId) => stored(runId).run,
    afterNextLive(fn) {
      afterLive = fn;
    },
    failNextAdmits(n) {
      failures = n;
    },
    loseNextAdmitAnswer() {
      loseAnswer = true;
    },
    holdNextAdmit() {
      let decided = () => {};
      let release = () => {};
      const received = new Promise<void>((resolve) => (decided = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      hold = { decided, released };
      return { received, release };
    },
    hold: (runId, claimId) => void claims.set(runId, claimId),
    attest: (subject, digest) => void attested.set(digest, subject),
    setStatus,
    async transition(runId, status) {
      const event = setStatus(runId, status);
      return { event, seq: await publishRunStatus(js, event) };
    },
    stop: () => server.stop(1_000),
  };
}

export const KNOWN_REPOSITORIES: readonly HostedRepository[] = [
  {
    repository_id: 101,
    installation_id: 7,
    owner: 'acme',
    name: 'app',
    full_name: 'acme/app',
    url: 'https://git.example.test/acme/app.git',
    clone_url: 'https://git.example.test/acme/app.git',
    avatar_url: 'https://git.example.test/acme.png',
    private: true,
    default_branch: 'main',
  },
  {
    repository_id: 202,
    installation_id: 7,
    owner: 'acme',
    name: 'lib',
    full_name: 'acme/lib',
    url: 'https://git.example.test/acme/lib.git',
    clone_url: 'https://git.example.test/acme/lib.git',
    avatar_url: 'https://git.example.test/acme.png',
    private: false,
    default_branch: 'trunk',
  },
];

export interface RepohostDouble {
  /** Lets `ownerId` see the known repositories; everyone else sees none. */
  grant(ownerId: string): void;
  stop(): Promise<void>;
}

export async function serveRepohostDouble(nc: NatsConnection, logger: Logger): Promise<RepohostDouble> {
  const owners = new Set<string>();
  const server = await serveRpc(
    nc,
    { name: 'repohost', version: '0.0.0' },
    [
      route(rpc.repohost.access, async ({ owner_id, repository_ids }) => ({
        repositories: repository_ids.map((id) => {
          const repository = KNOWN_REPOSITORIES.find((candidate) => candidate.repository_id === id);
          if (!repository || !owners.has(owner_id)) throw notFound('repository');
          return repository;
        }),
      })),
    ],
    logger,
  );
  return {
    grant: (ownerId) => void owners.add(ownerId),
    stop: () => server.stop(1_000),
  };
}
