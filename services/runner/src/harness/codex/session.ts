import type { ServerNotification, ServerRequest } from '@threadwork/codex-protocol';
import type { Logger } from '@threadwork/platform';
import type { HarnessSession, TurnInput, TurnListener, TurnOutcome } from '../harness.js';
import type { HarnessHost, OwnProcesses } from '../host.js';
import type { ModelGate } from '../launch.js';
import type { Sweep } from '../processes.js';
import { reportRefusal } from '../refusals.js';
import type { GateRefusal } from '../../sandbox/gates.js';
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

export class CodexSession implements HarnessSession {
  private turn: ActiveTurn | null = null;

  constructor(
    private readonly rpc: CodexRpc,
    /** Where the process runs: how it is stopped and swept. */
    private readonly host: HarnessHost,
    /** The process has exited and what it held outside (sockets, cgroup) is freed. */
    readonly exited: Promise<void>,
    readonly sessionId: string,
    private readonly cwd: string,
    /** The processes the harness started with, before the agent could start any. */
    private readonly own: OwnProcesses,
    private readonly options: CodexSessionSettings,
    /** The model gate: each turn's model is what its model requests are billed as. */
    private readonly gates: ModelGate | null = null,
  ) {
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

  /** A gate of the jail refused something: reported with the run it happened in. */
  refused(refusal: GateRefusal): void {
    reportRefusal(refusal, this.turn, this.sessionId, this.options.logger);
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

  stop(): Promise<void> {
    return this.host.stop(this.rpc.process, this.own, this.exited, this.options.logger);
  }

  stopLeftovers(): Promise<Sweep> {
    return this.host.sweepLeftovers(this.rpc.process, this.own, this.turn !== null);
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
