import type { RunJob } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import type { Harness, HarnessSession } from '../harness/harness.js';
import { localHost } from '../harness/host.js';
import type { LocalSandboxProvider } from '../sandbox/local.js';
import type { SpareSandbox, SpareSource, WarmHarness } from '../sandbox/provider.js';

// Spare sandboxes with their harness started: what a new thread's first run would otherwise wait
// for — the clone, the jail, the harness's start and its new conversation — done before the thread
// exists. After a run of some repositories, the runner keeps one spare of the same repositories and
// harness ready (RUNNER_WARM_SANDBOXES of them at most, the least recently wanted going first); a
// new thread of those repositories adopts it (local.ts `adopt`) if the remote still shows the bases
// it was cloned at. A spare is one thread's: adopted once or removed, never handed to another.
// Nothing in it is a run's or a user's until then: the repositories as the remote served them (from
// the runner's mirrors), a harness that has run no turn, no key (the model gate adds it outside).

/** How long a spare's next step waits for the runs on their way to their turn at most. */
const QUIET_WAIT_MS = 60_000;
/**
 * How long a new thread's run waits at most for the spare of its kind being made: making it is
 * what the run would do itself, with a second clone and harness start beside the spare's.
 */
const SPARE_WAIT_MS = 20_000;

/** Harnesses whose conversation does not depend on the folder it was started in (Claude Code keeps it by folder). */
const WARMABLE = new Set(['codex']);

interface Spare {
  key: string;
  spare: SpareSandbox;
  warm: WarmHarness;
  timer: NodeJS.Timeout;
}

export interface WarmPoolOptions {
  provider: LocalSandboxProvider;
  harnesses: ReadonlyMap<string, Harness>;
  /** How many spares may be kept at once; 0: none. */
  size: number;
  /** How long a spare waits for a thread before it goes. */
  idleMs: number;
  logger: Logger;
}

export class WarmPool implements SpareSource {
  private readonly ready: Spare[] = [];
  private readonly making = new Map<string, Promise<void>>();
  private closed = false;
  /** Runs of this runner on their way to their turn's first event. */
  private onTheirWay = 0;
  /** Keys of the spares being made that a run waits for: their steps wait for no run. */
  private readonly awaited = new Set<string>();
  private readonly quietWaiters: (() => void)[] = [];

  constructor(private readonly options: WarmPoolOptions) {}

  /**
   * A run is on its way to its turn's first event: until the function returned is called, no spare
   * begins its next step (a clone, a harness's start). A spare is for a thread that may come; this
   * run's user waits now, and the machine is theirs first.
   */
  hold(): () => void {
    this.onTheirWay += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.onTheirWay -= 1;
      if (this.onTheirWay === 0) for (const wake of this.quietWaiters.splice(0)) wake();
    };
  }

  /** A run of `job`'s repositories and harness was served: keeps a spare of the same kind ready. */
  want(job: RunJob): void {
    const { size } = this.options;
    if (this.closed || size === 0 || !WARMABLE.has(job.harness) || job.repositories.length === 0) return;
    const key = keyOf(job);
    if (this.making.has(key)) return;
    const found = this.ready.find((s) => s.key === key);
    if (found) {
      // The most recently wanted stays longest.
      this.ready.splice(this.ready.indexOf(found), 1);
      this.ready.push(found);
      return;
    }
    if (this.making.size >= size) return;
    const making = this.make(job, key).finally(() => this.making.delete(key));
    this.making.set(key, making);
  }

  async take(job: RunJob): Promise<{ spare: SpareSandbox; warm: WarmHarness } | null> {
    const key = keyOf(job);
    const making = this.making.get(key);
    // One run waits for the one spare: those after it would wait only to find none.
    if (making && !this.awaited.has(key) && !this.ready.some((s) => s.key === key)) await this.waitFor(key, making);
    const index = this.ready.findIndex((s) => s.key === key && s.warm.session.alive);
    if (index < 0) return null;
    const [found] = this.ready.splice(index, 1);
    clearTimeout(found!.timer);
    return { spare: found!.spare, warm: found!.warm };
  }

  /**
   * Waits (SPARE_WAIT_MS at most) for the spare of `key` being made: a run waiting for it is on its
   * way to its turn, so the spare's steps go on while it waits, as they would not for other runs.
   */
  private async waitFor(key: string, making: Promise<void>): Promise<void> {
    this.awaited.add(key);
    for (const wake of this.quietWaiters.splice(0)) wake();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([making, new Promise<void>((resolve) => (timer = setTimeout(resolve, SPARE_WAIT_MS)))]);
    } finally {
      clearTimeout(timer);
      this.awaited.delete(key);
    }
  }

  async discard({ spare, warm }: { spare: SpareSandbox; warm: WarmHarness }): Promise<void> {
    await warm.session.stop();
    await this.options.provider.dropSpare(spare.folder, spare.session.owner);
  }

  /** Spare sandboxes kept now (for measurements and tests). */
  get size(): number {
    return this.ready.length;
  }

  /** Spare sandboxes being made now, begun or waiting to be (for tests). */
  get beingMade(): number {
    return this.making.size;
  }

  /** Resolves once no spare is being made. */
  async settled(): Promise<void> {
    while (this.making.size > 0) await Promise.all(this.making.values());
  }

  /** The runner stops: every spare goes, harness and folder. */
  async stopAll(): Promise<void> {
    this.closed = true;
    for (const wake of this.quietWaiters.splice(0)) wake();
    await this.settled();
    await Promise.all(this.ready.splice(0).map((s) => (clearTimeout(s.timer), this.discard(s))));
  }

  private async make(job: RunJob, key: string): Promise<void> {
    const { provider, logger } = this.options;
    const harness = this.options.harnesses.get(job.harness);
    if (!harness) return;
    let spare: SpareSandbox | null = null;
    let session: HarnessSession | null = null;
    try {
      await this.quiet(key);
      if (this.closed) return;
      spare = await provider.makeSpare(job.repositories);
      if (!spare) return;
      await this.quiet(key);
      if (this.closed) throw new Error('the runner is stopping');
      session = await harness.start({
        ...spare.session,
        model: job.model,
        resumeSessionId: null,
        host: localHost(),
      });
      const made: Spare = {
        key,
        spare,
        warm: { harness: job.harness, session },
        timer: setTimeout(() => void this.expire(made), this.options.idleMs),
      };
      made.timer.unref();
      if (this.closed) {
        await this.discard(made);
        return;
      }
      // A harness that dies while it waits takes its spare with it.
      void session.exited.then(() => this.expire(made));
      this.ready.push(made);
      while (this.ready.length > this.options.size) void this.expire(this.ready[0]!);
      logger.debug({ spare: spare.folder, harness: job.harness }, 'spare sandbox ready');
    } catch (err) {
      logger.warn({ err, harness: job.harness }, 'a spare sandbox could not be made');
      // Its folder and uid go only once nothing of its jail runs.
      await session?.stop();
      if (spare) await provider.dropSpare(spare.folder, spare.session.owner).catch(() => undefined);
    }
  }

  /**
   * Resolves once no run is on its way to its turn, or the runner stops, or after QUIET_WAIT_MS: a
   * run that takes that long to get there (a large clone, a remote that hangs) holds no spare back.
   * At once while a run waits for this very spare (`key`).
   */
  private async quiet(key: string): Promise<void> {
    const deadline = Date.now() + QUIET_WAIT_MS;
    while (this.onTheirWay > 0 && !this.awaited.has(key) && !this.closed && Date.now() < deadline) {
      await new Promise<void>((wake) => {
        const timer = setTimeout(wake, deadline - Date.now());
        timer.unref();
        this.quietWaiters.push(() => {
          clearTimeout(timer);
          wake();
        });
      });
    }
  }

  private async expire(spare: Spare): Promise<void> {
    const index = this.ready.indexOf(spare);
    if (index < 0) return;
    this.ready.splice(index, 1);
    clearTimeout(spare.timer);
    await this.discard(spare).catch((err: unknown) =>
      this.options.logger.warn({ err, spare: spare.spare.folder }, 'a spare sandbox could not be removed'),
    );
  }
}

/** What a spare is made for: the harness, and each repository at its base branch. */
function keyOf(job: RunJob): string {
  const repos = job.repositories
    .map((r) => [r.project_repository_id, r.repository_id, r.clone_url, r.branch])
    .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
  return JSON.stringify([job.harness, repos]);
}
