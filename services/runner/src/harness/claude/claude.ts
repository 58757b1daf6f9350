import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { query, type Query, type SpawnedProcess } from '@anthropic-ai/claude-agent-sdk';
import type { Logger } from '@threadwork/platform';
import { ResumeFailedError, type Harness, type HarnessSession, type SessionOptions } from '../harness.js';
import type { HostedProcess, ProcessExit } from '../host.js';
import { boundedLines, MAX_LINE_BYTES } from '../lines.js';
import type { Isolation } from '../../sandbox/isolation.js';
import { Inbox } from './inbox.js';
import { CLAUDE_TOOLS, claudeCommand, claudeConfigDir, claudeEnv, clearConfig, hasTranscript } from './launch.js';
import { ClaudeSession } from './session.js';

// The Claude Code adapter: one Claude Code process per live sandbox, driven through the Agent SDK
// with streaming input (HARNESSES.md has the measured behaviour). The SDK runs in the runner; the
// process it talks to is started by the runner in the sandbox's jail, like Codex.

export interface ClaudeHarnessOptions {
  /** Anthropic Messages endpoint, e.g. `https://api.anthropic.com` (Claude Code adds `/v1/messages`). */
  baseUrl: string;
  /** The model key; jailed, only the model gate holds it. Null for none. */
  apiKey: string | null;
  outputCapBytes: number;
  includeRaw: boolean;
  isolation: Isolation;
  logger: Logger;
  /** See ClaudeSessionSettings.onTurn. */
  onTurn?: (sessionId: string, runId: string | null) => void;
}

const START_TIMEOUT_MS = 30_000;
const STDERR_TAIL_BYTES = 4_000;

export class ClaudeHarness implements Harness {
  readonly name = 'claude-code';
  readonly modelKeyEnv = 'ANTHROPIC_API_KEY';

  constructor(private readonly options: ClaudeHarnessOptions) {}

  async start(opts: SessionOptions): Promise<HarnessSession> {
    const { logger, isolation } = this.options;
    const { host } = opts;
    const configDir = claudeConfigDir(opts.home);
    await host.home.directory(configDir, opts.owner);
    await clearConfig(host.home, configDir);
    if (opts.resumeSessionId && !(await hasTranscript(host.home, configDir, opts.resumeSessionId))) {
      throw new ResumeFailedError(`Claude Code holds no conversation ${opts.resumeSessionId}`, true);
    }
    let session: ClaudeSession | null = null;
    const program = claudeCommand();
    const launch = await host.prepare({
      program,
      api: 'messages',
      baseUrl: this.options.baseUrl,
      apiKey: this.options.apiKey,
      isolation,
      session: opts,
      logger,
      refused: (refusal) => session?.refused(refusal),
    });
    const env = {
      ...launch.env,
      ...claudeEnv({ configDir, baseUrl: launch.modelBaseUrl, keyOnFd: launch.key !== null }),
    };
    const inbox = new Inbox();
    let child: HostedProcess | null = null;
    let stderrTail = '';
    const sessionId = opts.resumeSessionId ?? randomUUID();
    let q: Query;
    try {
      q = query({
        prompt: inbox,
        options: {
          cwd: opts.cwd,
          model: opts.model,
          pathToClaudeCodeExecutable: program.command,
          ...(opts.resumeSessionId ? { resume: opts.resumeSessionId } : { sessionId }),
          tools: CLAUDE_TOOLS,
          // Every tool call is allowed (canUseTool), but through the runner: questions and plans stop there.
          permissionMode: 'default',
          // Nothing of the machine's, the user's or the repository's settings, and only our MCP servers (none).
          settingSources: [],
          strictMcpConfig: true,
          mcpServers: {},
          includePartialMessages: true,
          // Echo each prompt and steer as Claude Code takes it: that is when a steer is applied.
          extraArgs: { 'replay-user-messages': null },
          canUseTool: (name, input, how) => session!.canUseTool(name, input, how),
          env,
          // Started by the runner, in the jail, in its own process group (stopping it stops what it started).
          // The key, where the harness holds one, on its descriptor (KEY_FD).
          spawnClaudeCodeProcess: ({ args }) => {
            const started = host.start(launch, {
              args,
              env,
              cwd: opts.cwd,
              ...(launch.key ? { fd3: launch.key } : {}),
            });
            child = started;
            started.stderr.on('data', (chunk: Buffer) => {
              stderrTail = (stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
            });
            return spawned(started, () => {
              logger.error(
                { max_bytes: MAX_LINE_BYTES },
                'the harness wrote a line longer than any it sends; stopping it',
              );
              started.kill();
            });
          },
        },
      });
    } catch (err) {
      await launch.release();
      throw err;
    }
    const proc: HostedProcess = child!;
    const closed = proc.exited.then(() => launch.release());
    try {
      await withTimeout(q.initializationResult(), START_TIMEOUT_MS, 'Claude Code did not start');
    } catch (err) {
      q.close();
      proc.kill();
      await closed;
      const said = stderrTail.trim().split('\n').at(-1) ?? '';
      if (opts.resumeSessionId) throw new ResumeFailedError(said || (err as Error).message);
      throw new Error(`Claude Code did not start: ${said || (err as Error).message}`);
    }
    // What runs now is the harness itself (and, jailed, the jail's init and the model bridge):
    // the agent has run nothing yet. These alone outlive a run (stopLeftovers).
    const own = await host.ownProcesses(proc);
    session = new ClaudeSession(
      {
        query: q,
        inbox,
        process: proc,
        host,
        closed,
        sessionId,
        cwd: opts.cwd,
        own,
        gates: launch.gates,
        model: opts.model,
      },
      this.options,
    );
    return session;
  }
}

type Listener = Parameters<EventEmitter['on']>[1];

/**
 * The process as the Agent SDK drives it: its stdio, its end, signals to it. (`kill` is the SDK's
 * own way to end it; the runner's is the host's stop.)
 */
function spawned(proc: HostedProcess, overflow: () => void): SpawnedProcess {
  const events = new EventEmitter();
  let exit: ProcessExit | null = null;
  let killed = false;
  void proc.exited.then((how) => {
    exit = how;
    // A process that could not be started never exits: it fails.
    if (how.error !== undefined) events.emit('error', new Error(how.error));
    else events.emit('exit', how.code, how.signal);
  });
  return {
    stdin: proc.stdin,
    stdout: boundedLines(proc.stdout, overflow),
    get killed() {
      return killed;
    },
    get exitCode() {
      return exit?.code ?? null;
    },
    get signalCode() {
      return exit?.signal ?? null;
    },
    kill(sig) {
      if (exit) return false;
      proc.signal(sig);
      killed = true;
      return true;
    },
    on(event: 'exit' | 'error', listener: Listener) {
      events.on(event, listener);
    },
    once(event: 'exit' | 'error', listener: Listener) {
      events.once(event, listener);
    },
    off(event: 'exit' | 'error', listener: Listener) {
      events.off(event, listener);
    },
  } as SpawnedProcess;
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
