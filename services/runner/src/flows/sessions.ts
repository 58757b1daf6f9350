import type { Logger } from '@threadwork/platform';
import { ResumeFailedError, type Harness, type HarnessSession } from '../harness/harness.js';
import { localHost } from '../harness/host.js';
import type { Sandbox, SandboxProvider, WarmHarness } from '../sandbox/provider.js';

// One long-lived harness process per live sandbox: a thread's next run reuses it (no start-up
// cost, the conversation is still loaded). A process idle for SANDBOX_IDLE_MS is stopped and the
// sandbox reported `stopped`; the next run starts a new process that resumes the stored session.
// Runners sharing a disk share its sandboxes, so the process serving a sandbox is recorded with it:
// before starting one, a runner stops another's that still runs (see SandboxProvider.stopHarness).

interface Live {
  harness: string;
  session: HarnessSession;
  busy: boolean;
  idleTimer: NodeJS.Timeout | undefined;
}

export interface AcquireOptions {
  /** The harness of the run: a live session of another one goes first. */
  harness: string;
  model: string;
  /**
   * A takeover after a crash: the stored session must be resumed, a fresh one would lose the turn's
   * context — unless the harness never recorded any of it, when a fresh one loses nothing.
   */
  mustResume: boolean;
}

export class SessionPool {
  private readonly live = new Map<string, Live>();

  constructor(
    /** The harnesses this runner serves, by name. */
    private readonly harnesses: ReadonlyMap<string, Harness>,
    private readonly sandboxes: SandboxProvider,
    private readonly idleMs: number,
    private readonly logger: Logger,
  ) {}

  /** Whether the thread's session of `harness` is live and free: acquiring it starts and stops nothing. */
  ready(threadId: string, harness: string): boolean {
    const current = this.live.get(threadId);
    return current !== undefined && current.session.alive && !current.busy && current.harness === harness;
  }

  /** The sandbox's session, started (or resumed) when none is live. Throws ResumeFailedError when `mustResume` cannot be met. */
  async acquire(sandbox: Sandbox, opts: AcquireOptions): Promise<HarnessSession> {
    const harness = this.harnesses.get(opts.harness);
    if (!harness) throw new Error(`this runner does not serve the ${opts.harness} harness`);
    const current = this.live.get(sandbox.threadId);
    if (current && this.ready(sandbox.threadId, opts.harness)) {
      if (current.idleTimer) clearTimeout(current.idleTimer);
      current.idleTimer = undefined;
      current.busy = true;
      return current.session;
    }
    if (current) await this.discard(sandbox.threadId);
    // One harness process per sandbox: one still running from another runner on this disk goes first.
    await this.sandboxes.stopHarness(sandbox);

    // A session of another harness is not this one's to resume: the thread's conversation starts anew.
    const stored = sandbox.sessionHarness === opts.harness ? sandbox.sessionId : null;
    if (opts.mustResume && !stored) throw new ResumeFailedError('no harness session was stored');
    const options = {
      cwd: sandbox.cwd,
      home: sandbox.harnessHome,
      env: sandbox.env,
      model: opts.model,
      mounts: sandbox.mounts,
      owner: sandbox.owner,
      // Every provider's harness runs on this machine, in the sandbox's jail.
      host: sandbox.host ?? localHost(),
    };
    let session: HarnessSession;
    try {
      session = await harness.start({ ...options, resumeSessionId: stored });
    } catch (err) {
      if (!(err instanceof ResumeFailedError) || (opts.mustResume && !err.neverRecorded)) throw err;
      // The conversation is lost (e.g. its state was cleaned up), or it never held anything (its
      // first turn was lost as it began); the workspace is not, so carry on in it.
      this.logger.warn(
        { err, thread_id: sandbox.threadId, never_recorded: err.neverRecorded },
        'stored harness session could not be resumed; starting anew',
      );
      session = await harness.start({ ...options, resumeSessionId: null });
    }
    try {
      await this.sandboxes.rememberSession(sandbox, { harness: opts.harness, id: session.sessionId }, session.pid);
    } catch (err) {
      // Not recorded, it could not be found and stopped by whoever comes next: it goes now.
      await session.stop();
      throw err;
    }

    const entry: Live = { harness: opts.harness, session, busy: true, idleTimer: undefined };
    this.live.set(sandbox.threadId, entry);
    void session.exited.then(() => {
      if (this.live.get(sandbox.threadId) === entry) this.live.delete(sandbox.threadId);
    });
    return session;
  }

  /**
   * Takes the harness a spare sandbox came with (warm.ts) as the sandbox's live session, idle until
   * the run acquires it: recorded with the sandbox first, like any session this pool starts.
   */
  async adopt(sandbox: Sandbox, warm: WarmHarness): Promise<void> {
    if (this.live.has(sandbox.threadId)) await this.discard(sandbox.threadId);
    try {
      await this.sandboxes.rememberSession(
        sandbox,
        { harness: warm.harness, id: warm.session.sessionId },
        warm.session.pid,
      );
    } catch (err) {
      await warm.session.stop();
      throw err;
    }
    const entry: Live = { harness: warm.harness, session: warm.session, busy: false, idleTimer: undefined };
    this.live.set(sandbox.threadId, entry);
    void warm.session.exited.then(() => {
      if (this.live.get(sandbox.threadId) === entry) this.live.delete(sandbox.threadId);
    });
    this.release(sandbox.threadId, warm.session);
  }

  /** The run is done with the session; it idles until the next run or the idle bound. */
  release(threadId: string, session: HarnessSession): void {
    const entry = this.live.get(threadId);
    if (!entry || entry.session !== session) return;
    entry.busy = false;
    if (!session.alive) {
      this.live.delete(threadId);
      return;
    }
    entry.idleTimer = setTimeout(() => void this.reclaim(threadId, entry), this.idleMs);
    entry.idleTimer.unref();
  }

  /**
   * Stops the sandbox's process now (after a crash, a kill or a stopped turn). Given a session,
   * only if that is still the sandbox's: a run that was taken over must not stop its successor's.
   */
  async discard(threadId: string, session?: HarnessSession): Promise<void> {
    const entry = this.live.get(threadId);
    if (!entry) {
      await session?.stop();
      return;
    }
    if (session && entry.session !== session) {
      await session.stop();
      return;
    }
    this.live.delete(threadId);
    if (entry.idleTimer) clearTimeout(entry.idleTimer);
    await entry.session.stop();
  }

  /** The runner stops: every process goes, and the idle sandboxes are reported stopped. */
  async stopAll(): Promise<void> {
    await Promise.all(
      [...this.live.entries()].map(async ([threadId, entry]) => {
        await this.discard(threadId);
        if (!entry.busy) await this.reportStopped(threadId);
      }),
    );
  }

  /** Process ids of the live harnesses, by thread (for measurements and tests). */
  pids(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [threadId, { session }] of this.live) if (session.pid !== undefined) out.set(threadId, session.pid);
    return out;
  }

  private async reclaim(threadId: string, entry: Live): Promise<void> {
    if (this.live.get(threadId) !== entry || entry.busy) return;
    this.live.delete(threadId);
    await entry.session.stop();
    await this.reportStopped(threadId);
  }

  private async reportStopped(threadId: string): Promise<void> {
    try {
      await this.sandboxes.stop(threadId);
    } catch (err) {
      this.logger.warn({ err, thread_id: threadId }, 'could not report the sandbox stopped');
    }
  }
}
