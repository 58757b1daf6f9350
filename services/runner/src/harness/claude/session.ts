import { randomUUID } from 'node:crypto';
import type { CanUseTool, Query, SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import type { Logger } from '@threadwork/platform';
import type { HarnessSession, TurnInput, TurnListener, TurnOutcome } from '../harness.js';
import type { HarnessHost, HostedProcess, OwnProcesses } from '../host.js';
import type { ModelGate } from '../launch.js';
import type { Sweep } from '../processes.js';
import { reportRefusal } from '../refusals.js';
import type { GateRefusal } from '../../sandbox/gates.js';
import type { Inbox } from './inbox.js';
import { ClaudeTurnMapper } from './mapping.js';
import { approvePlan, askUser, callsSeen } from './permissions.js';
import { answering, crashedOutcome, outcomeOf, type ClaudeTurn } from './turn.js';

// A started Claude Code process as the runner drives it through the Agent SDK: one conversation,
// its prompts and steers pushed into one input stream, its messages read by one loop for the life
// of the process (claude.ts starts it). Each run is one turn.

export interface ClaudeSessionSettings {
  outputCapBytes: number;
  includeRaw: boolean;
  logger: Logger;
  /**
   * Told which run each turn of a session is (null once it ends). Claude Code sends the model no
   * metadata of the client's: the demo model, which runs in the runner, reads the run from here.
   */
  onTurn?: (sessionId: string, runId: string | null) => void;
}

/** Where the session's turns come from and how it is told to stop them. */
export interface ClaudeSessionParts {
  query: Query;
  inbox: Inbox;
  process: HostedProcess;
  /** Where the process runs: how it is stopped and swept. */
  host: HarnessHost;
  /** The process has exited and what it held outside (sockets, cgroup) is freed. */
  closed: Promise<void>;
  sessionId: string;
  cwd: string;
  /** The processes the harness started with, before the agent could start any. */
  own: OwnProcesses;
  gates: ModelGate | null;
  /** The model it was started with. */
  model: string;
}

/** How long an interrupt may take before the process is stopped instead. */
const INTERRUPT_TIMEOUT_MS = 10_000;
/** How long a setting of the session (model, permission mode) may take to be answered. */
const CONTROL_TIMEOUT_MS = 30_000;
/** How long Claude Code may take to take a turn's prompt (it starts the turn within milliseconds). */
const PROMPT_TAKE_TIMEOUT_MS = 60_000;

export class ClaudeSession implements HarnessSession {
  private turn: ClaudeTurn | null = null;
  /** What the process has cost so far, as its results report it (a running total per process). */
  private costSoFar = 0;
  /** Set once the message loop has ended, or the process is no longer fit for another turn. */
  private ended = false;
  /** The model the process uses now: it started with the session's. */
  private model: string;

  constructor(
    private readonly parts: ClaudeSessionParts,
    private readonly options: ClaudeSessionSettings,
  ) {
    this.model = parts.model;
    void this.readMessages();
  }

  get sessionId(): string {
    return this.parts.sessionId;
  }

  get pid(): number | undefined {
    return this.parts.process.hasExited ? undefined : this.parts.process.pid;
  }

  get alive(): boolean {
    return !this.parts.process.hasExited && !this.ended;
  }

  get exited(): Promise<void> {
    return this.parts.closed;
  }

  /**
   * The SDK's permission callback: in the `default` permission mode every tool call that is not
   * read-only comes here, and is allowed; questions and the plan go to the user.
   */
  readonly canUseTool: CanUseTool = async (toolName, input, { toolUseID }) => {
    const turn = this.turn;
    if (!turn?.started || turn.finished) {
      this.stray('asked about a tool call outside a turn of the runner’s');
      return { behavior: 'deny', message: 'No turn is running.' };
    }
    if (toolName === 'AskUserQuestion') return askUser(turn, toolUseID, input);
    if (toolName === 'ExitPlanMode') {
      return approvePlan(turn, toolUseID, input, () => this.control(this.parts.query.setPermissionMode('default')));
    }
    return { behavior: 'allow', updatedInput: input };
  };

  async runTurn(input: TurnInput, listener: TurnListener): Promise<TurnOutcome> {
    if (this.turn) throw new Error('a turn is already running in this session');
    if (!this.alive) return crashedOutcome(null, 'the Claude Code process is not running');
    this.parts.gates?.pinModel({ model: input.model, runId: input.metadata.threadwork_run_id });
    const mapper = new ClaudeTurnMapper({
      cwd: this.parts.cwd,
      outputCapBytes: this.options.outputCapBytes,
      includeRaw: this.options.includeRaw,
    });
    let finish!: (outcome: TurnOutcome) => void;
    const done = new Promise<TurnOutcome>((resolve) => {
      finish = resolve;
    });
    const turn: ClaudeTurn = {
      listener,
      mapper,
      metadata: input.metadata,
      promptUuid: randomUUID(),
      started: false,
      steers: new Map(),
      sent: new Set(),
      awaitedCalls: new Map(),
      interrupting: false,
      finished: false,
      refusals: 0,
      finish: (outcome) => {
        turn.finished = true;
        finish(outcome);
      },
    };
    this.turn = turn;
    this.options.onTurn?.(this.sessionId, input.metadata.threadwork_run_id ?? null);
    const crashed = this.parts.process.exited.then(() =>
      crashedOutcome(turn, 'the Claude Code process exited mid-turn'),
    );
    try {
      const { query } = this.parts;
      if (input.model !== this.model) {
        await this.control(query.setModel(input.model));
        this.model = input.model;
      }
      await this.control(query.setPermissionMode(input.collaborationMode === 'plan' ? 'plan' : 'default'));
      turn.sent.add(turn.promptUuid);
      this.parts.inbox.push(input.prompt, turn.promptUuid);
      const untaken = setTimeout(() => {
        if (!turn.started) this.stray('did not take the turn’s prompt');
      }, PROMPT_TAKE_TIMEOUT_MS);
      try {
        return await Promise.race([done, crashed]);
      } finally {
        clearTimeout(untaken);
      }
    } catch (err) {
      if (this.parts.process.hasExited) return await crashed;
      return {
        status: 'failed',
        error: { code: 'harness_error', message: err instanceof Error ? err.message : String(err) },
        reply: null,
        usage: mapper.usage,
      };
    } finally {
      this.turn = null;
      this.options.onTurn?.(this.sessionId, null);
      if (turn.steers.size > 0) {
        // Steers pushed and not taken would run as a turn nobody follows: the process goes, and
        // the next run resumes the conversation in a new one.
        for (const taken of turn.steers.values()) taken(false);
        this.ended = true;
        void this.stop();
      }
    }
  }

  /**
   * Pushes `text` into the running turn; resolves once Claude Code has taken it (true) or the turn
   * has ended without it (false). It takes a message at the next tool result, or, when the model
   * was done by then, as a turn of its own that this turn goes on into.
   */
  steer(text: string): Promise<boolean> {
    const turn = this.turn;
    if (!turn?.started || turn.interrupting || turn.finished || !this.alive) return Promise.resolve(false);
    const uuid = randomUUID();
    return new Promise<boolean>((resolve) => {
      turn.steers.set(uuid, resolve);
      turn.sent.add(uuid);
      this.parts.inbox.push(text, uuid);
    });
  }

  /**
   * Stops the running turn, and withdraws the steers it had not taken yet (they would otherwise
   * run as a turn of their own after it). A process that does not answer is stopped.
   */
  async interrupt(): Promise<void> {
    const turn = this.turn;
    // Before Claude Code has taken the prompt there is no turn of its to stop (an interrupt then
    // would withdraw the prompt and leave the turn waiting for a result that never comes): the
    // runner asks again once the turn has begun, as with Codex.
    if (!turn?.started || turn.interrupting) return;
    turn.interrupting = true;
    // `cancelQueued` is the SDK's own option of the interrupt request (advertised by the CLI as
    // `interrupt_cancel_queued_v1`), not yet in its typings.
    const interrupt = this.parts.query.interrupt.bind(this.parts.query) as (opts?: {
      cancelQueued?: boolean;
    }) => Promise<unknown>;
    let timer: NodeJS.Timeout | undefined;
    const answered = await Promise.race([
      interrupt({ cancelQueued: true }).then(
        () => true,
        (err: unknown) => {
          this.options.logger.debug({ err }, 'the interrupt failed; the turn has probably ended');
          return true;
        },
      ),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), INTERRUPT_TIMEOUT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (!answered) await this.stop();
  }

  stop(): Promise<void> {
    this.parts.inbox.close();
    return this.parts.host.stop(this.parts.process, this.parts.own, this.parts.closed, this.options.logger);
  }

  stopLeftovers(): Promise<Sweep> {
    return this.parts.host.sweepLeftovers(this.parts.process, this.parts.own, this.turn !== null);
  }

  /** A gate of the jail refused something: reported with the run it happened in. */
  refused(refusal: GateRefusal): void {
    reportRefusal(refusal, this.turn, this.sessionId, this.options.logger);
  }

  /** The one loop that reads the process's messages, for as long as it runs. */
  private async readMessages(): Promise<void> {
    try {
      for await (const message of this.parts.query) this.onMessage(message);
    } catch (err) {
      if (!this.parts.process.hasExited) this.options.logger.warn({ err }, 'reading Claude Code’s messages failed');
    } finally {
      this.ended = true;
      // Nothing reads its output any more: the process must not go on without a reader.
      if (!this.parts.process.hasExited) void this.stop();
    }
  }

  private onMessage(message: SDKMessage): void {
    const turn = this.turn;
    if (!turn || turn.finished) {
      // Work of the model's with no turn of the runner's to belong to: nobody follows it.
      if (message.type === 'assistant' || message.type === 'result' || message.type === 'stream_event') {
        this.stray(`worked with no turn of the runner’s (${message.type})`);
      }
      return;
    }
    for (const uuid of answering(message)) this.taken(turn, uuid);
    if (message.type === 'user' && 'isReplay' in message && message.isReplay) return;
    if (message.type === 'result') {
      const of = message.user_message_uuids;
      // A result of a turn the runner did not start (nothing of its own in it) is not this one's.
      if (!turn.started || (of && !of.some((uuid) => turn.sent.has(uuid)))) {
        this.stray('ended a turn the runner did not start');
        return;
      }
      this.resultOf(turn, message);
      return;
    }
    for (const chunk of turn.mapper.map(message)) turn.listener.chunk(chunk);
    callsSeen(turn);
  }

  /**
   * Claude Code worked on something of its own, outside the runner's turns (or the prompt was never
   * taken): what it does is no run's, so the process goes. The turn running, if any, fails.
   */
  private stray(what: string): void {
    if (this.ended) return;
    this.ended = true;
    this.options.logger.warn(
      { session_id: this.sessionId, run_id: this.turn?.metadata.threadwork_run_id },
      `Claude Code ${what}; stopping it`,
    );
    const turn = this.turn;
    if (turn && !turn.finished) {
      turn.finish({
        status: 'failed',
        error: { code: 'harness_error', message: `Claude Code ${what}` },
        reply: turn.mapper.lastReply,
        usage: turn.mapper.usage,
      });
    }
    void this.stop();
  }

  /** A setting of the session, answered within CONTROL_TIMEOUT_MS or failed. */
  private async control(request: Promise<void>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        request,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`Claude Code did not answer within ${CONTROL_TIMEOUT_MS} ms`)),
            CONTROL_TIMEOUT_MS,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Claude Code took a message of the turn: the prompt (the turn has begun: it names the prompt from
   * the moment it starts the turn, before the model answers) or a steer.
   */
  private taken(turn: ClaudeTurn, uuid: string): void {
    if (uuid === turn.promptUuid) {
      if (!turn.started) {
        turn.started = true;
        turn.listener.started();
      }
      return;
    }
    const steer = turn.steers.get(uuid);
    turn.steers.delete(uuid);
    steer?.(true);
  }

  private resultOf(turn: ClaudeTurn, result: Extract<SDKMessage, { type: 'result' }>): void {
    const cost = result.total_cost_usd - this.costSoFar;
    this.costSoFar = result.total_cost_usd;
    turn.listener.chunk(turn.mapper.addUsage(result.usage, Number.isFinite(cost) ? cost : null));
    // A steer Claude Code has not taken yet starts its next turn, which belongs to this one.
    if (turn.steers.size > 0 && !turn.interrupting && result.subtype === 'success' && !result.is_error) return;
    turn.finish(outcomeOf(result, turn));
  }
}
