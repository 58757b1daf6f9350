import {
  isTerminalRunStatus,
  rpc,
  SERVICES,
  type Interaction,
  type Repository,
  type Run,
  type RunEvent,
  type RunEventPage,
  type RunStatus,
} from '@threadwork/contracts';
import {
  AppError,
  conflict,
  currentRequestId,
  notFound,
  route,
  serveRpc,
  type Logger,
  type NatsConnection,
  type RpcServer,
} from '@threadwork/platform';
import { control, interaction, run, runRef, task, thread } from './fixtures.js';

// In-test stand-ins for the threads, runs and repohost services, served over real NATS with the
// real RPC kit: the gateway cannot tell them from the services, so its routes are tested end to
// end through HTTP → NATS without the services that are being written concurrently.

/** Ids the doubles treat specially, to provoke the gateway's error paths. */
export const SPECIAL = {
  /** Throws a plain Error carrying a secret: the service answers `internal`. */
  boom: 'thr_boom',
  /** Answers `internal` with a message of its own (as repohost did with GitHub's failures). */
  internalWithText: 'thr_internal_text',
  /** Answers a shape the contract does not allow: the gateway's parse fails. */
  malformed: 'thr_malformed',
  /** Answers after the gateway has given up. */
  slowRun: 'run_slow',
} as const;

export const SECRET = 'password=hunter2';

interface Owned<T> {
  owner: string;
  value: T;
}

interface ThreadState {
  owner: string;
  activeRun: string | null;
}

interface Log {
  status: RunStatus;
  events: RunEvent[];
}

export class World {
  readonly threads = new Map<string, ThreadState>();
  readonly runs = new Map<string, Owned<Run>>();
  readonly interactions = new Map<string, Owned<Interaction>>();
  readonly logs = new Map<string, Log>();
  readonly pageCalls = new Map<string, number>();
  private readonly pageWaiters: { runId: string; calls: number; resolve: () => void }[] = [];
  repositories: Repository[] = [];
  /** The request id each threads.create was served under (currentRequestId in the service). */
  readonly createRequestIds: (string | undefined)[] = [];
  private counter = 0;

  nextId(prefix: string): string {
    this.counter += 1;
    return `${prefix}_${this.counter.toString().padStart(6, '0')}`;
  }

  addThread(owner: string, activeRun: string | null = null): string {
    const id = this.nextId('thr');
    this.threads.set(id, { owner, activeRun });
    return id;
  }

  addRun(owner: string, threadId: string, status: RunStatus = 'running'): Run {
    const value = run(this.nextId('run'), threadId, status);
    this.runs.set(value.id, { owner, value });
    this.logs.set(value.id, { status, events: [] });
    return value;
  }

  addInteraction(owner: string, runId: string, threadId: string): Interaction {
    const value = interaction(this.nextId('int'), runId, threadId);
    this.interactions.set(value.id, { owner, value });
    return value;
  }

  /** Resolves once eventsPage has been called `calls` times for the run. */
  pageCalled(runId: string, calls: number): Promise<void> {
    if ((this.pageCalls.get(runId) ?? 0) >= calls) return Promise.resolve();
    return new Promise((resolve) => this.pageWaiters.push({ runId, calls, resolve }));
  }

  recordPageCall(runId: string): void {
    const calls = (this.pageCalls.get(runId) ?? 0) + 1;
    this.pageCalls.set(runId, calls);
    for (const waiter of [...this.pageWaiters]) {
      if (waiter.runId === runId && calls >= waiter.calls) {
        this.pageWaiters.splice(this.pageWaiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }

  ownedThread(owner: string, id: string): ThreadState {
    const state = this.threads.get(id);
    if (!state || state.owner !== owner) throw notFound('thread');
    return state;
  }

  ownedRun(owner: string | undefined, id: string): Run {
    const state = this.runs.get(id);
    if (!state || (owner !== undefined && state.owner !== owner)) throw notFound('run');
    return state.value;
  }

  ownedInteraction(owner: string | undefined, id: string): Owned<Interaction> {
    const state = this.interactions.get(id);
    if (!state || (owner !== undefined && state.owner !== owner)) throw notFound('interaction');
    return state;
  }

  /** What the runs service answers: a page of the log from `from`, per the contract's rules. */
  page(runId: string, from: number, limit: number): RunEventPage {
    const log = this.logs.get(runId) ?? { status: 'queued', events: [] };
    const rest = log.events.filter((e) => e.sequence >= from);
    const events = rest.slice(0, limit);
    const last = events.at(-1);
    return {
      events,
      next_sequence: last ? last.sequence + 1 : from,
      status: log.status,
      terminal: isTerminalRunStatus(log.status) && rest.length === events.length,
      error: null,
    };
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function serveDoubles(nc: NatsConnection, world: World, logger: Logger): Promise<RpcServer[]> {
  const threads = await serveRpc(
    nc,
    { name: SERVICES.threads.name, version: '0.0.0' },
    [
      route(rpc.threads.work, async ({ owner_id }) => ({
        projects: [...world.threads.entries()]
          .filter(([, state]) => state.owner === owner_id)
          .map(([id]) => ({
            id: `prj_${id}`,
            name: 'app',
            repository: 'local/app',
            branch: 'main',
            repositories: [{ id: `prp_${id}`, repository_id: 1, full_name: 'local/app', branch: 'main' }],
            threads: [
              { id, status: 'idle' as const, prompt: 'hello', harness: 'codex', model: 'gpt-test', latest_run: null },
            ],
          })),
      })),
      route(rpc.threads.create, async ({ owner_id, view, body }) => {
        world.createRequestIds.push(currentRequestId());
        if (body.client_request_id === 'reused') throw conflict('idempotency_conflict', 'client_request_id reused');
        const id = world.addThread(owner_id);
        const first = world.addRun(owner_id, id, 'queued');
        world.ownedThread(owner_id, id).activeRun = first.id;
        return view === 'task' ? { ...task(id), ...runRef(first.id) } : { ...thread(id), ...runRef(first.id) };
      }),
      route(rpc.threads.get, async ({ owner_id, thread_id, view }) => {
        if (thread_id === SPECIAL.boom) throw new Error(`driver said ${SECRET}`);
        if (thread_id === SPECIAL.internalWithText) throw new AppError('internal', `GitHub answered ${SECRET}`);
        if (thread_id === SPECIAL.malformed) return { id: thread_id } as unknown as ReturnType<typeof task>;
        world.ownedThread(owner_id, thread_id);
        return view === 'task' ? task(thread_id) : thread(thread_id);
      }),
      route(rpc.threads.list, async ({ owner_id }) => ({
        tasks: [...world.threads.entries()].filter(([, s]) => s.owner === owner_id).map(([id]) => task(id)),
      })),
      route(rpc.threads.resumable, async ({ owner_id, thread_id }) => {
        const state = world.ownedThread(owner_id, thread_id);
        return { run: state.activeRun ? { run_id: state.activeRun } : null };
      }),
      route(rpc.threads.message, async ({ owner_id, thread_id }) => {
        const state = world.ownedThread(owner_id, thread_id);
        if (state.activeRun) throw conflict('thread_busy', 'the thread has an active run; queue or steer');
        const next = world.addRun(owner_id, thread_id, 'queued');
        state.activeRun = next.id;
        return { status: 'accepted' as const, ...runRef(next.id) };
      }),
      route(rpc.threads.queue, async ({ owner_id, thread_id, body }) => {
        world.ownedThread(owner_id, thread_id);
        return { control: control(world.nextId('ctl'), thread_id, 'queue', body.prompt), run: null };
      }),
      route(rpc.threads.steer, async ({ owner_id, thread_id, body }) => {
        const state = world.ownedThread(owner_id, thread_id);
        if (!state.activeRun) throw conflict('no_active_run', 'nothing to steer');
        return { control: control(world.nextId('ctl'), thread_id, 'steer', body.prompt), run: null };
      }),
      route(rpc.threads.messages, async ({ owner_id, thread_id, cursor, limit }) => {
        world.ownedThread(owner_id, thread_id);
        const start = cursor ? Number(cursor) : 0;
        const all = Array.from({ length: 3 }, (_, i) => ({
          id: `msg_${thread_id}_${i}`,
          role: i % 2 === 0 ? ('user' as const) : ('assistant' as const),
          parts: [{ type: 'text' as const, text: `message ${i}` }],
          created_at: new Date(Date.UTC(2025, 0, 1, 0, 0, i)).toISOString(),
        }));
        const messages = all.slice(start, start + limit);
        return { messages, next_cursor: start + limit < all.length ? String(start + limit) : null };
      }),
      route(rpc.threads.controls, async ({ owner_id, thread_id, view, status }) => {
        world.ownedThread(owner_id, thread_id);
        const pending = control(`ctl_${thread_id}_1`, thread_id, 'queue', 'later');
        const applied = { ...control(`ctl_${thread_id}_2`, thread_id, 'steer', 'now'), status: 'applied' as const };
        const controls = [pending, applied].filter((c) => status === undefined || c.status === status);
        if (view === 'thread') return { controls };
        return { controls: controls.map(({ thread_id: taskId, ...rest }) => ({ ...rest, task_id: taskId })) };
      }),
    ],
    logger,
  );

  const runs = await serveRpc(
    nc,
    { name: SERVICES.runs.name, version: '0.0.0' },
    [
      route(rpc.runs.get, async ({ owner_id, run_id }) => {
        if (run_id === SPECIAL.slowRun) await sleep(2_000);
        return world.ownedRun(owner_id, run_id);
      }),
      route(rpc.runs.cancel, async ({ owner_id, run_id }) => {
        const current = world.ownedRun(owner_id, run_id);
        if (current.terminal) return { run: current, requested: false };
        const cancelling = { ...current, status: 'cancelling' as const };
        world.runs.set(run_id, { owner: owner_id, value: cancelling });
        return { run: cancelling, requested: true };
      }),
      route(rpc.runs.eventsPage, async ({ owner_id, run_id, from, limit }) => {
        world.ownedRun(owner_id, run_id);
        world.recordPageCall(run_id);
        return world.page(run_id, from, limit);
      }),
      route(
        rpc.runs.interactionGet,
        async ({ owner_id, interaction_id }) => world.ownedInteraction(owner_id, interaction_id).value,
      ),
      route(rpc.runs.interactionList, async ({ owner_id, thread_id, status }) => {
        world.ownedThread(owner_id, thread_id);
        return {
          interactions: [...world.interactions.values()]
            .filter((i) => i.owner === owner_id && i.value.thread_id === thread_id)
            .map((i) => i.value)
            .filter((i) => status === undefined || i.status === status),
        };
      }),
      route(rpc.runs.interactionAnswer, async ({ owner_id, interaction_id, request }) => {
        const state = world.ownedInteraction(owner_id, interaction_id);
        if (state.value.status !== 'pending') throw conflict('already_settled', 'the interaction is settled');
        const resolvedAt = new Date().toISOString();
        const answers = request.action === 'answer' ? request.answers : {};
        const status = request.action === 'answer' ? ('answered' as const) : ('cancelled' as const);
        const cancelledBy = request.action === 'cancel' ? ('user' as const) : null;
        state.value = { ...state.value, status, answers, resolvedAt, cancelledBy };
        return { interactionId: interaction_id, status, cancelledBy, answers, resolvedAt };
      }),
    ],
    logger,
  );

  const repohost = await serveRpc(
    nc,
    { name: SERVICES.repohost.name, version: '0.0.0' },
    [
      route(rpc.repohost.connection, async () => ({
        status: 'ready' as const,
        message:
          "Local repositories: the bare repositories in the server's REPOHOST_LOCAL_DIR (no GitHub App configured)",
        installations: [
          {
            id: 1,
            account: 'local',
            avatar_url: 'data:image/svg+xml,x',
            target_type: 'User',
            repository_selection: 'all',
            suspended: false,
            manage_url: '',
          },
        ],
        installation_requests: [],
      })),
      route(rpc.repohost.repositories, async ({ q }) => ({
        repositories: world.repositories.filter((r) => !q || r.full_name.toLowerCase().includes(q.toLowerCase())),
      })),
      route(rpc.repohost.access, async ({ repository_ids }) => ({
        repositories: repository_ids.map((id) => {
          const found = world.repositories.find((r) => r.repository_id === id);
          if (!found) throw notFound('repository');
          return { ...found, clone_url: found.url };
        }),
      })),
    ],
    logger,
  );

  return [threads, runs, repohost];
}
