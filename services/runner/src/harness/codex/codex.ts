import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { mkdtemp, open, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
import { besides, commandLine, descendants, executable, signal } from '../processes.js';
import { BRIDGE_PORT, BRIDGE_SCRIPT, jailed } from '../../sandbox/jail.js';
import { startModelProxy, type ModelProxy } from '../../sandbox/model-proxy.js';
import { appServerArgs, codexCommand, guarded, type ProviderSettings } from './launch.js';
import { CodexTurnMapper, toQuestion } from './mapping.js';
import type { ServerNotification } from './protocol/ServerNotification.js';
import type { ServerRequest } from './protocol/ServerRequest.js';
import type { Turn } from './protocol/v2/Turn.js';
import type { UserInput } from './protocol/v2/UserInput.js';
import { CodexExitedError, CodexRpc, CodexRpcError } from './rpc.js';

// The Codex adapter: one `codex app-server` process per live sandbox, driven over JSON-RPC
// (HARNESSES.md has the measured protocol). A session is one Codex thread; each run is one turn.

export interface CodexHarnessOptions {
  baseUrl: string;
  /** The model key, handed to the process under `CODEX_MODEL_KEY_ENV` only; null for none. */
  apiKey: string | null;
  sandboxMode: ProviderSettings['sandboxMode'];
  outputCapBytes: number;
  includeRaw: boolean;
  /** Run each app-server in a jail (sandbox/jail.ts), reaching the model through the runner's proxy. */
  jail: boolean;
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

  /** A model proxy for one jailed process, its socket in a directory private to the runner. */
  private async startProxy(): Promise<{ dir: string; proxy: ModelProxy; close(): Promise<void> }> {
    const dir = await mkdtemp(join(tmpdir(), 'threadwork-jail-'));
    try {
      const proxy = await startModelProxy(join(dir, 'model.sock'), {
        baseUrl: this.options.baseUrl,
        apiKey: this.options.apiKey,
        logger: this.options.logger,
      });
      return {
        dir,
        proxy,
        async close() {
          await proxy.close();
          await rm(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  async start(opts: SessionOptions): Promise<HarnessSession> {
    const { logger } = this.options;
    // Jailed, the process reaches the model through a proxy of the runner's that adds the key; else
    // it gets the key in one variable, which Codex keeps from the agent's commands.
    const proxy = this.options.jail ? await this.startProxy() : null;
    const key = proxy ? null : this.options.apiKey;
    const args = appServerArgs({
      model: opts.model,
      baseUrl: proxy ? `http://127.0.0.1:${BRIDGE_PORT}${proxy.proxy.basePath}` : this.options.baseUrl,
      keyEnv: key ? CODEX_MODEL_KEY_ENV : null,
      sandboxMode: this.options.sandboxMode,
    });
    const env = { ...opts.env, ...(key ? { [CODEX_MODEL_KEY_ENV]: key } : {}) };
    const codex = codexCommand();
    const cmd = guarded(
      proxy
        ? jailed(codex, {
            cwd: opts.cwd,
            writable: opts.mounts.writable,
            readable: opts.mounts.readable,
            runDir: proxy.dir,
          })
        : codex,
    );
    // Its own process group, so stopping it also stops the commands it started.
    const child = spawn(cmd.command, [...cmd.args, ...args], {
      cwd: opts.cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const rpc = new CodexRpc(child, logger);
    if (proxy) void rpc.exited.then(() => proxy.close());
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
      return new CodexSession(rpc, threadId, opts.cwd, codex.command, this.options);
    } catch (err) {
      rpc.kill();
      throw err;
    }
  }
}

/**
 * Whether Codex ever recorded the session: it writes one rollout file per thread, named after the
 * thread's id, under `sessions/` (or `archived_sessions/`) of its home, once the thread's first turn
 * has begun, the session's metadata as its first line. A thread lost before that line was whole
 * (no file, an empty one, a line cut short) has nothing to resume.
 */
async function hasRollout(home: string, threadId: string): Promise<boolean> {
  for (const dir of ['sessions', 'archived_sessions']) {
    let names: string[];
    try {
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

/** Whether a JSON-lines file begins with a complete line that parses. */
async function startsWithWholeLine(file: string): Promise<boolean> {
  const handle = await open(file, 'r');
  try {
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
  mapper: CodexTurnMapper;
  turnId: string | null;
  finish(outcome: TurnOutcome): void;
}

/** Records the turn's id the first time it is seen (response or notification) and tells the listener once. */
function turnBegan(turn: ActiveTurn, id: string): void {
  if (turn.turnId !== null) return;
  turn.turnId = id;
  turn.listener.started();
}

class CodexSession implements HarnessSession {
  private turn: ActiveTurn | null = null;
  readonly exited: Promise<void>;

  constructor(
    private readonly rpc: CodexRpc,
    readonly sessionId: string,
    private readonly cwd: string,
    /** The executable the harness process runs (to tell it from what the agent started). */
    private readonly binary: string,
    private readonly options: CodexHarnessOptions,
  ) {
    this.exited = rpc.exited.then(() => undefined);
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
    const mapper = new CodexTurnMapper({
      cwd: this.cwd,
      outputCapBytes: this.options.outputCapBytes,
      includeRaw: this.options.includeRaw,
    });
    let finish!: (outcome: TurnOutcome) => void;
    const done = new Promise<TurnOutcome>((resolve) => {
      finish = resolve;
    });
    const turn: ActiveTurn = { listener, mapper, turnId: null, finish };
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
    if (this.rpc.hasExited) return;
    const pid = this.rpc.pid;
    // Found before the harness goes: once it has exited, its orphaned commands have a new parent.
    const below = pid === undefined ? [] : descendants(pid);
    if (pid !== undefined) signal(-pid, 'SIGTERM');
    const graceful = await Promise.race([
      this.rpc.exited.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), STOP_GRACE_MS).unref()),
    ]);
    if (!graceful) this.rpc.kill();
    for (const child of below) signal(child, 'SIGKILL');
    await this.rpc.exited;
  }

  async stopLeftovers(): Promise<string[]> {
    const pid = this.rpc.pid;
    if (pid === undefined || this.rpc.hasExited || this.turn) return [];
    // Kept: the Codex process (and the jail's init and shell above it) and the jail's model bridge.
    const codex = realpathSync(this.binary);
    const keep = (p: number) => executable(p) === codex || (commandLine(p)?.includes(BRIDGE_SCRIPT) ?? false);
    const leftovers = besides(pid, keep).filter((p) => executable(p) !== codex);
    const killed = leftovers.map((p) => commandLine(p) ?? String(p));
    for (const p of leftovers) signal(p, 'SIGKILL');
    return killed.filter((line) => line !== '');
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
