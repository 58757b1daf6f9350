import { randomUUID } from 'node:crypto';
import type { CanUseTool, PermissionResult, Query, SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import type { Question } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import type { HarnessSession, TurnInput, TurnListener, TurnOutcome } from '../harness.js';
import { namespaceInit, type ProcessIdentity, type Sweep } from '../processes.js';
import { reportRefusal } from '../refusals.js';
import { stopHarnessProcess, sweepLeftovers, type HarnessProcess } from '../stopping.js';
import type { GateRefusal, JailGates } from '../../sandbox/gates.js';
import type { Inbox } from './inbox.js';
import { cutUtf8 } from '../../domain/text.js';
import { ClaudeTurnMapper } from './mapping.js';
import { outcomeOf, type ClaudeTurn } from './turn.js';

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
  process: HarnessProcess;
  /** The process has exited and what it held outside (sockets, cgroup) is freed. */
  closed: Promise<void>;
  sessionId: string;
  cwd: string;
  /** The processes the harness started with, before the agent could start any. */
  own: readonly ProcessIdentity[];
  gates: JailGates | null;
  /** The model it was started with. */
  model: string;
}

/** How much of a plan goes into its approval: a plan is a page or two. */
const PLAN_MAX_BYTES = 64 * 1024;

/** How long a tool call's message may lag behind the SDK's question about it. */
const CALL_WAIT_MS = 5_000;

/** How long an interrupt may take before the process is stopped instead. */
const INTERRUPT_TIMEOUT_MS = 10_000;

export class ClaudeSession implements HarnessSession {
  private turn: ClaudeTurn | null = null;
  private readonly jailInit: ProcessIdentity | null;
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
    this.jailInit = namespaceInit(parts.own);
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
    if (!turn) return { behavior: 'deny', message: 'No turn is running.' };
    if (toolName === 'AskUserQuestion') return this.askUser(turn, toolUseID, input);
    if (toolName === 'ExitPlanMode') return this.approvePlan(turn, toolUseID, input);
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
        await query.setModel(input.model);
        this.model = input.model;
      }
      await query.setPermissionMode(input.collaborationMode === 'plan' ? 'plan' : 'default');
      this.parts.inbox.push(input.prompt, turn.promptUuid);
      return await Promise.race([done, crashed]);
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
    return stopHarnessProcess(this.parts.process, this.parts.closed, this.jailInit, this.options.logger);
  }

  stopLeftovers(): Promise<Sweep> {
    return sweepLeftovers(this.parts.process, this.parts.own, this.jailInit, this.turn !== null);
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
    if (!turn) return;
    if (message.type === 'user' && 'isReplay' in message && message.isReplay && message.uuid) {
      this.taken(turn, message.uuid);
      return;
    }
    if (message.type === 'result') {
      this.resultOf(turn, message);
      return;
    }
    for (const chunk of turn.mapper.map(message)) turn.listener.chunk(chunk);
    for (const [id, seen] of turn.awaitedCalls) {
      if (turn.mapper.call(id)) {
        turn.awaitedCalls.delete(id);
        seen();
      }
    }
  }

  /**
   * Tool call `id` as the model made it. The SDK may ask about a call before its message has come
   * through the message loop (both arrive on one stream, handled apart): then it is waited for.
   */
  private async callOf(turn: ClaudeTurn, id: string): Promise<Record<string, unknown> | undefined> {
    if (!turn.mapper.call(id)) {
      await new Promise<void>((resolve) => {
        turn.awaitedCalls.set(id, resolve);
        setTimeout(resolve, CALL_WAIT_MS).unref();
      });
    }
    return turn.mapper.call(id)?.input;
  }

  /** Claude Code took a message of the turn: the prompt (the turn has begun) or a steer. */
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

  private async askUser(
    turn: ClaudeTurn,
    toolUseId: string,
    input: Record<string, unknown>,
  ): Promise<PermissionResult> {
    const asked = questionsOf(input);
    if (asked.length === 0) return { behavior: 'deny', message: 'The question had no questions in it.' };
    const answers = await turn.listener.question(
      toolUseId,
      asked.map(({ question }) => question),
    );
    const given: Record<string, string> = {};
    for (const { question, text } of asked) {
      const answer = answers[question.id];
      if (answer && answer.length > 0) given[text] = answer.join(', ');
    }
    if (Object.keys(given).length === 0) {
      return { behavior: 'deny', message: 'The user did not answer. Carry on without the answer or stop.' };
    }
    return { behavior: 'allow', updatedInput: { ...input, answers: given } };
  }

  /**
   * The agent asks to leave plan mode with its plan: a plan approval for the user. Approved, the
   * turn goes on in the default mode; rejected, the agent is told why and stays in plan mode.
   */
  private async approvePlan(
    turn: ClaudeTurn,
    toolUseId: string,
    input: Record<string, unknown>,
  ): Promise<PermissionResult> {
    // Claude Code passes the plan file plan mode had the agent write (read inside the jail).
    const given = input.plan ?? (await this.callOf(turn, toolUseId))?.plan;
    const plan =
      typeof given === 'string' && given.trim() ? cutUtf8(given, PLAN_MAX_BYTES) : '(the agent gave no plan text)';
    const decision = await turn.listener.planApproval(toolUseId, plan);
    if (!decision.approved) {
      const why = decision.comment ? ` The user said: ${decision.comment}` : '';
      return { behavior: 'deny', message: `The user rejected the plan. Revise it.${why}` };
    }
    await this.parts.query.setPermissionMode('default');
    return { behavior: 'allow', updatedInput: input };
  }
}

/** An AskUserQuestion call's questions, as the contract's (ids by position) with their text. */
export function questionsOf(input: Record<string, unknown>): { question: Question; text: string }[] {
  const questions = Array.isArray(input.questions) ? (input.questions as Record<string, unknown>[]) : [];
  return questions.flatMap((q, index) => {
    if (typeof q.question !== 'string') return [];
    const options = Array.isArray(q.options) ? (q.options as Record<string, unknown>[]) : [];
    return [
      {
        text: q.question,
        question: {
          id: `q${index + 1}`,
          header: typeof q.header === 'string' ? q.header : '',
          question: q.question,
          // Claude Code lets the user answer in words of their own besides the options.
          isOther: true,
          isSecret: false,
          options: options.flatMap((o) =>
            typeof o.label === 'string'
              ? [{ label: o.label, description: typeof o.description === 'string' ? o.description : '' }]
              : [],
          ),
        },
      },
    ];
  });
}

function crashedOutcome(turn: ClaudeTurn | null, message: string): TurnOutcome {
  return {
    status: 'failed',
    error: { code: 'harness_crashed', message },
    reply: turn?.mapper.lastReply ?? null,
    usage: turn?.mapper.usage ?? {},
  };
}
