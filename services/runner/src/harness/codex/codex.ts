import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { lstat, open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ServerNotification, ServerRequest } from '@threadwork/codex-protocol';
import type { Turn, UserInput } from '@threadwork/codex-protocol/v2';
import type { RunError } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import {
  ResumeFailedError,
  type Harness,
  type HarnessSession,
  type SessionOptions,
  type TurnInput,
  type TurnListener,
  type TurnOutcome,
} from '../harness.js';
import {
  descendantsOf,
  killNamespace,
  namespaceInit,
  processesOf,
  signal,
  signalSame,
  stopAllBut,
  type ProcessIdentity,
  type Sweep,
} from '../processes.js';
import type { Isolation } from '../../sandbox/isolation.js';
import { openGates, type GateRefusal, type JailGates } from '../../sandbox/gates.js';
import { BRIDGE_PORT, EGRESS_ENV, jailed, type JailOwner } from '../../sandbox/jail.js';
import { limited } from '../../sandbox/limits.js';
import { appServerArgs, codexCommand, guarded } from './launch.js';
import { CodexTurnMapper, toQuestion } from './mapping.js';
import { CodexExitedError, CodexRpc, CodexRpcError } from './rpc.js';

// The Codex adapter: one `codex app-server` process per live sandbox, driven over JSON-RPC
// (HARNESSES.md has the measured protocol). A session is one Codex thread; each run is one turn.

export interface CodexHarnessOptions {
  baseUrl: string;
  /** The model key, handed to the process under `CODEX_MODEL_KEY_ENV` only; null for none. */
  apiKey: string | null;
  outputCapBytes: number;
  includeRaw: boolean;
  /**
   * The jail each app-server runs in (sandbox/jail.ts), reaching the model and the network through
   * the runner's gates; Codex's own sandbox around the agent's commands; the egress policy.
   */
  isolation: Isolation;
  logger: Logger;
}

/** The variable the key travels in. Its name contains KEY, which Codex also keeps from commands by default. */
export const CODEX_MODEL_KEY_ENV = 'THREADWORK_MODEL_API_KEY';

const START_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 2_000;

export class CodexHarness implements Harness {
  readonly name = 'codex';
  readonly modelKeyEnv = CODEX_MODEL_KEY_ENV;

  constructor(private readonly options: CodexHarnessOptions) {}

  async start(opts: SessionOptions): Promise<HarnessSession> {
    const { logger } = this.options;
    // Jailed, the process reaches the model through a proxy of the runner's that adds the key, and
    // the rest of the network through one that enforces the egress policy; else it gets the key in
    // one variable, which Codex keeps from the agent's commands.
    let session: CodexSession | null = null;
    const { isolation } = this.options;
    const gates = isolation.jailed
      ? await openGates({
          model: { baseUrl: this.options.baseUrl, apiKey: this.options.apiKey, pin: { model: opts.model } },
          egress: isolation.egress,
          logger,
          refused: (refusal) => session?.refused(refusal),
          owner: opts.owner,
        })
      : null;
    const key = gates ? null : this.options.apiKey;
    const args = appServerArgs({
      model: opts.model,
      baseUrl: gates ? `http://127.0.0.1:${BRIDGE_PORT}${gates.modelBasePath}` : this.options.baseUrl,
      keyEnv: key ? CODEX_MODEL_KEY_ENV : null,
      sandbox:
        isolation.codexSandbox === 'workspace-write'
          ? {
              mode: 'workspace-write',
              // Besides the workspace (its cwd) and /tmp: the agent's HOME and the other repositories.
              writableRoots: opts.mounts.writable.filter((path) => path !== opts.home),
              network: isolation.egress.mode !== 'none',
            }
          : { mode: 'danger-full-access' },
    });
    // Everything Codex is to run with comes in its arguments. Its home is writable by the agent's
    // commands, and a `config.toml` left there would be read at this start, outside Codex's own
    // sandbox: an MCP server there is a program of the agent's that Codex itself starts and keeps
    // running beside the harness, past every sweep (and `-c mcp_servers={}` merges with the file
    // rather than replacing it). Nothing of the jail runs now (an earlier harness of this sandbox
    // was stopped, jail and all), so none can put it back before Codex reads it; a link is removed,
    // not followed.
    await rm(join(opts.home, 'config.toml'), { force: true, recursive: true });
    const env = { ...opts.env, ...(gates ? EGRESS_ENV : {}), ...(key ? { [CODEX_MODEL_KEY_ENV]: key } : {}) };
    const codex = codexCommand();
    const cmd = guarded(
      gates
        ? jailed(codex, {
            cwd: opts.cwd,
            writable: opts.mounts.writable,
            readable: opts.mounts.readable,
            runDir: gates.runDir,
            tmpBytes: isolation.tmpBytes,
            owner: jailOwner(isolation, opts.owner),
          })
        : codex,
    );
    // Inside its process limit from the first instruction: everything the jail starts counts.
    const bounded =
      gates && (isolation.processes || isolation.memory)
        ? await limited(cmd, { processes: isolation.processes, memory: isolation.memory })
        : null;
    const started = bounded?.command ?? cmd;
    // Its own process group, so stopping it also stops the commands it started.
    const child = spawn(started.command, [...started.args, ...args], {
      cwd: opts.cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const rpc = new CodexRpc(child, logger);
    // What the jail held outside it goes with the process: the gates' sockets, its cgroup.
    const closed = rpc.exited.then(async () => {
      await gates?.close();
      await bounded?.release();
    });
    try {
      await rpc.request(
        'initialize',
        {
          clientInfo: { name: 'threadwork', title: 'Threadwork', version: '0.1.0' },
          capabilities: { experimentalApi: true, requestAttestation: false },
        },
        START_TIMEOUT_MS,
      );
      rpc.notify('initialized');
      let threadId: string;
      if (opts.resumeSessionId) {
        try {
          const resumed = await rpc.request(
            'thread/resume',
            { threadId: opts.resumeSessionId, cwd: opts.cwd, excludeTurns: true },
            START_TIMEOUT_MS,
          );
          threadId = resumed.thread.id;
        } catch (err) {
          if (err instanceof CodexRpcError) {
            throw new ResumeFailedError(err.message, !(await hasRollout(opts.home, opts.resumeSessionId)));
          }
          throw err;
        }
      } else {
        threadId = (await rpc.request('thread/start', { cwd: opts.cwd }, START_TIMEOUT_MS)).thread.id;
      }
      // What runs now is the harness itself (and, jailed, the jail's init and the model bridge):
      // the agent has run nothing yet. These alone outlive a run (stopLeftovers).
      const own = child.pid === undefined ? [] : processesOf(child.pid);
      session = new CodexSession(rpc, closed, threadId, opts.cwd, own, this.options, gates);
      return session;
    } catch (err) {
      rpc.kill();
      throw err;
    }
  }
}

/** Who the sandbox's jail runs as outside: its own uid where the runner gives each one. */
function jailOwner(isolation: Isolation, uid: number | null): JailOwner | undefined {
  if (uid === null) return undefined;
  if (isolation.outside?.kind !== 'per-sandbox')
    throw new Error('a sandbox has a uid of its own, but jails do not switch uid');
  return { uid, programs: isolation.outside.programs };
}

/**
 * Whether Codex ever recorded the session: it writes one rollout file per thread, named after the
 * thread's id, under `sessions/` (or `archived_sessions/`) of its home, once the thread's first turn
 * has begun, the session's metadata as its first line. A thread lost before that line was whole
 * (no file, an empty one, a line cut short) has nothing to resume.
 */
export async function hasRollout(home: string, threadId: string): Promise<boolean> {
  for (const dir of ['sessions', 'archived_sessions']) {
    let names: string[];
    try {
      // Not through a link the agent may have put there (to `/`, say): the walk below would follow it.
      if (!(await lstat(join(home, dir))).isDirectory()) continue;
      names = await readdir(join(home, dir), { recursive: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    for (const name of names.filter((n) => n.endsWith(`-${threadId}.jsonl`))) {
      if (await startsWithWholeLine(join(home, dir, name))) return true;
    }
  }
  return false;
}

/**
 * Whether a JSON-lines file begins with a complete line that parses. The harness's home is
 * writable from the jail: a link is not followed (it could name any file of the runner's), and
 * anything but a regular file (a FIFO would block the read for good) is no rollout.
 */
async function startsWithWholeLine(file: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') return false;
    throw err;
  }
  try {
    if (!(await handle.stat()).isFile()) return false;
    const buffer = Buffer.alloc(1 << 20);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const text = buffer.subarray(0, bytesRead).toString('utf8');
    const end = text.indexOf('\n');
    if (end < 0) return false;
    JSON.parse(text.slice(0, end));
    return true;
  } catch (err) {
    if (err instanceof SyntaxError) return false;
    throw err;
  } finally {
    await handle.close();
  }
}

interface ActiveTurn {
  listener: TurnListener;
  metadata: Record<string, string>;
  mapper: CodexTurnMapper;
  turnId: string | null;
  finish(outcome: TurnOutcome): void;
  /** Refusals of this turn so far: past REFUSALS_REPORTED, they are counted, not reported one by one. */
  refusals: number;
}

/**
 * How many refusals of one turn become events and log lines each. An agent can be refused thousands
 * of times a second; each would be an event stored in the run's log and a line in the runner's.
 */
export const REFUSALS_REPORTED = 20;

/** Records the turn's id the first time it is seen (response or notification) and tells the listener once. */
function turnBegan(turn: ActiveTurn, id: string): void {
  if (turn.turnId !== null) return;
  turn.turnId = id;
  turn.listener.started();
}

class CodexSession implements HarnessSession {
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
    private readonly options: CodexHarnessOptions,
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

function text(value: string): UserInput {
  return { type: 'text', text: value, text_elements: [] };
}

function outcomeOf(turn: Turn, mapper: CodexTurnMapper): TurnOutcome {
  const base = { reply: mapper.lastReply, usage: mapper.usage };
  switch (turn.status) {
    case 'completed':
      return { status: 'completed', error: null, ...base };
    case 'interrupted':
      return { status: 'interrupted', error: null, ...base };
    default:
      return { status: 'failed', error: turnError(turn), ...base };
  }
}

/** A failed turn failed in the model loop (HTTP errors, context window, …): `model_error`. */
function turnError(turn: Turn): RunError {
  const info = turn.error?.codexErrorInfo;
  return {
    code: 'model_error',
    message: turn.error?.message ?? 'the turn failed',
    ...(info ? { detail: typeof info === 'string' ? info : JSON.stringify(info) } : {}),
  };
}
