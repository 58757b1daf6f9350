import type { ServerNotification, ServerRequest } from '@threadwork/codex-protocol';
import type { Logger } from '@threadwork/platform';
import type { HarnessSession, TurnInput, TurnListener, TurnOutcome } from '../harness.js';
import {
  descendantsOf,
  killNamespace,
  namespaceInit,
  signal,
  signalSame,
  stopAllBut,
  type ProcessIdentity,
  type Sweep,
} from '../processes.js';
import type { GateRefusal, JailGates } from '../../sandbox/gates.js';
import { CodexTurnMapper, toQuestion } from './mapping.js';
import { CodexExitedError, type CodexRpc, CodexRpcError } from './rpc.js';
import { outcomeOf, text, turnBegan, type ActiveTurn } from './turn.js';

// A started `codex app-server` as the runner drives it: one Codex thread, one turn per run, and the
// process's end (codex.ts starts it).

/** What a session takes of the harness's options. */
export interface CodexSessionSettings {
  outputCapBytes: number;
  includeRaw: boolean;
  logger: Logger;
}

const STOP_GRACE_MS = 2_000;

/**
 * How many refusals of one turn become events and log lines each. An agent can be refused thousands
 * of times a second; each would be an event stored in the run's log and a line in the runner's.
 */
export const REFUSALS_REPORTED = 20;

export class CodexSession implements HarnessSession {
  private turn: ActiveTurn | null = null;
  /** The init of the jail's pid namespace (null unjailed): killing it kills every process of the jail. */
  private readonly jailInit: ProcessIdentity | null;

  constructor(
    private readonly rpc: CodexRpc,
    /** The process has exited and what it held outside (sockets, cgroup) is freed. */
    readonly exited: Promise<void>,
    readonly sessionId: string,
    private readonly cwd: string,
    /** The processes the harness started with, before the agent could start any. */
    private readonly own: readonly ProcessIdentity[],
    private readonly options: CodexSessionSettings,
    /** The jail's gates: each turn's model is what its model requests are billed as. */
    private readonly gates: JailGates | null = null,
  ) {
    this.jailInit = namespaceInit(own);
    rpc.onNotification((n) => this.onNotification(n));
    rpc.onServerRequest((r) => this.onServerRequest(r));
  }

  get pid(): number | undefined {
    return this.rpc.hasExited ? undefined : this.rpc.pid;
  }

  get alive(): boolean {
    return !this.rpc.hasExited;
  }

  async runTurn(input: TurnInput, listener: TurnListener): Promise<TurnOutcome> {
    if (this.turn) throw new Error('a turn is already running in this session');
    this.gates?.pinModel({ model: input.model, runId: input.metadata.threadwork_run_id });
    const mapper = new CodexTurnMapper({
      cwd: this.cwd,
      outputCapBytes: this.options.outputCapBytes,
      includeRaw: this.options.includeRaw,
    });
    let finish!: (outcome: TurnOutcome) => void;
    const done = new Promise<TurnOutcome>((resolve) => {
      finish = resolve;
    });
    const turn: ActiveTurn = { listener, mapper, metadata: input.metadata, turnId: null, finish, refusals: 0 };
    this.turn = turn;
    const crashed = this.rpc.exited.then((exit): TurnOutcome => ({
      status: 'failed',
      error: {
        code: 'harness_crashed',
        message: `the Codex process exited mid-turn (${exit.signal ?? `code ${exit.code}`})`,
      },
      reply: mapper.lastReply,
      usage: mapper.usage,
    }));
    try {
      const plan = input.collaborationMode === 'plan';
      const started = await this.rpc.request('turn/start', {
        threadId: this.sessionId,
        input: [text(input.prompt)],
        model: input.model,
        effort: input.reasoningEffort,
        collaborationMode: {
          mode: plan ? 'plan' : 'default',
          settings: {
            model: input.model,
            reasoning_effort: plan ? null : input.reasoningEffort,
            developer_instructions: null,
          },
        },
        responsesapiClientMetadata: input.metadata,
      });
      turnBegan(turn, started.turn.id);
      return await Promise.race([done, crashed]);
    } catch (err) {
      if (err instanceof CodexExitedError) return await crashed;
      return {
        status: 'failed',
        error: { code: 'harness_error', message: err instanceof Error ? err.message : String(err) },
        reply: null,
        usage: mapper.usage,
      };
    } finally {
      this.turn = null;
    }
  }

  /**
   * A gate of the jail refused something: logged with the run it happened in, and a connection
   * refused out of the sandbox told in the run's events too.
   */
  refused(refusal: GateRefusal): void {
    const turn = this.turn;
    const { gate, ...detail } = refusal;
    const count = turn ? ++turn.refusals : 0;
    // Past the first REFUSALS_REPORTED of a turn, one line in a thousand says how many there were.
    if (count > REFUSALS_REPORTED && count % 1000 !== 0) return;
    const last = count === REFUSALS_REPORTED;
    this.options.logger.warn(
      {
        run_id: turn?.metadata.threadwork_run_id,
        thread_id: turn?.metadata.threadwork_thread_id,
        session_id: this.sessionId,
        gate,
        ...detail,
        ...(count >= REFUSALS_REPORTED ? { refusals_this_turn: count } : {}),
      },
      gate === 'egress' ? 'refused a connection out of the sandbox' : 'refused a sandbox request off the model API',
    );
    if (turn && refusal.gate === 'egress' && count <= REFUSALS_REPORTED) {
      const reason = last
        ? `${refusal.reason} (further refusals in this turn are counted, not reported)`
        : refusal.reason;
      turn.listener.chunk({ type: 'network.refused', host: refusal.host, port: refusal.port, reason });
    }
  }

  async steer(prompt: string): Promise<boolean> {
    const turn = this.turn;
    if (!turn?.turnId) return false;
    try {
      await this.rpc.request('turn/steer', {
        threadId: this.sessionId,
        expectedTurnId: turn.turnId,
        input: [text(prompt)],
      });
      return true;
    } catch (err) {
      // The turn ended under the steer (-32600) or the process is gone: not applied.
      if (err instanceof CodexRpcError || err instanceof CodexExitedError) return false;
      throw err;
    }
  }

  async interrupt(): Promise<void> {
    const turn = this.turn;
    if (!turn?.turnId) return;
    try {
      await this.rpc.request('turn/interrupt', { threadId: this.sessionId, turnId: turn.turnId }, 10_000);
    } catch (err) {
      this.options.logger.debug({ err }, 'turn/interrupt failed; the turn has probably ended');
    }
  }

  async stop(): Promise<void> {
    if (this.rpc.hasExited) {
      await this.exited;
      return this.jailGone();
    }
    const pid = this.rpc.pid;
    // Found before the harness goes: once it has exited, its orphaned commands have a new parent.
    // By identity: by the time the grace below is over, any of them may have exited and its pid be
    // another process's.
    const below = pid === undefined ? [] : descendantsOf(pid);
    if (pid !== undefined) signal(-pid, 'SIGTERM');
    const graceful = await Promise.race([
      this.rpc.exited.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), STOP_GRACE_MS).unref()),
    ]);
    if (!graceful) this.rpc.kill();
    for (const child of below) signalSame(child, 'SIGKILL');
    await this.exited;
    await this.jailGone();
  }

  /**
   * Once the harness has exited, the jail's pid namespace is killed and waited for: the outer bwrap
   * may exit before its init has taken every process of the jail with it, and the runner's git must
   * not read the workspace while one of the agent's still runs (a process that forked away from
   * every sweep could swap a file for a link under it).
   */
  private async jailGone(): Promise<void> {
    if (!this.jailInit || (await killNamespace(this.jailInit))) return;
    this.options.logger.error({ pid: this.jailInit.pid }, 'the jail’s processes did not all exit when it was killed');
  }

  async stopLeftovers(): Promise<Sweep> {
    const pid = this.rpc.pid;
    if (pid === undefined || this.rpc.hasExited || this.turn) return { processes: [], settled: true };
    // Kept: exactly the processes the harness started with (Codex, the jail's init, the bridge).
    return stopAllBut(pid, this.own, this.jailInit);
  }

  private onNotification(n: ServerNotification): void {
    const turn = this.turn;
    if (!turn) return;
    const params = n.params as { threadId?: unknown };
    if (typeof params.threadId === 'string' && params.threadId !== this.sessionId) return;
    if (n.method === 'turn/started') turnBegan(turn, n.params.turn.id);
    for (const chunk of turn.mapper.map(n)) turn.listener.chunk(chunk);
    if (n.method === 'turn/completed' && (turn.turnId === null || n.params.turn.id === turn.turnId)) {
      turn.finish(outcomeOf(n.params.turn, turn.mapper));
    }
  }

  private async onServerRequest(request: ServerRequest): Promise<unknown> {
    switch (request.method) {
      case 'item/tool/requestUserInput': {
        const turn = this.turn;
        if (!turn) return { answers: {} };
        const answers = await turn.listener.question(request.params.itemId, request.params.questions.map(toQuestion));
        return {
          answers: Object.fromEntries(Object.entries(answers).map(([id, given]) => [id, { answers: given }])),
        };
      }
      // approval_policy="never" means these should not come; if they do, nobody is there to approve.
      case 'item/commandExecution/requestApproval':
      case 'item/fileChange/requestApproval':
        return { decision: 'decline' };
      default:
        throw new Error(`${request.method} is not supported by Threadwork`);
    }
  }
}
