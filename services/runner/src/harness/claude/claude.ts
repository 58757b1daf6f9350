import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chown, lstat, mkdir, rm } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { query, type Query } from '@anthropic-ai/claude-agent-sdk';
import type { Logger } from '@threadwork/platform';
import { ResumeFailedError, type Harness, type HarnessSession, type SessionOptions } from '../harness.js';
import { prepareLaunch } from '../launch.js';
import { processesOf } from '../processes.js';
import type { HarnessProcess } from '../stopping.js';
import type { Isolation } from '../../sandbox/isolation.js';
import { Inbox } from './inbox.js';
import {
  CLAUDE_TOOLS,
  KEY_FD,
  claudeCommand,
  claudeConfigDir,
  claudeEnv,
  clearConfig,
  hasTranscript,
} from './launch.js';
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
    const configDir = await ownDirectory(claudeConfigDir(opts.home), opts.owner);
    await clearConfig(configDir);
    if (opts.resumeSessionId && !(await hasTranscript(configDir, opts.resumeSessionId))) {
      throw new ResumeFailedError(`Claude Code holds no conversation ${opts.resumeSessionId}`, true);
    }
    let session: ClaudeSession | null = null;
    const program = claudeCommand();
    const launch = await prepareLaunch({
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
    let child: ChildProcessWithoutNullStreams | null = null;
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
          spawnClaudeCodeProcess: ({ args }) => {
            const started = spawn(launch.command.command, [...launch.command.args, ...args], {
              cwd: opts.cwd,
              env,
              stdio: ['pipe', 'pipe', 'pipe', ...(launch.key ? (['pipe'] as const) : [])],
              detached: true,
            });
            if (launch.key) (started.stdio[KEY_FD] as Writable).end(launch.key);
            child = started as ChildProcessWithoutNullStreams;
            child.stderr.on('data', (chunk: Buffer) => {
              stderrTail = (stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
            });
            return child;
          },
        },
      });
    } catch (err) {
      await launch.release();
      throw err;
    }
    const proc = trackProcess(child!);
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
    const own = proc.pid === undefined ? [] : processesOf(proc.pid);
    session = new ClaudeSession(
      {
        query: q,
        inbox,
        process: proc,
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

/** `dir`, a directory of the sandbox's owner: whatever else is at that path (a link the agent left) goes first. */
async function ownDirectory(dir: string, owner: number | null): Promise<string> {
  const found = await lstat(dir).catch(() => null);
  if (found && !found.isDirectory()) await rm(dir, { force: true, recursive: true });
  await mkdir(dir, { recursive: true });
  if (owner !== null) await chown(dir, owner, owner);
  return dir;
}

function trackProcess(child: ChildProcessWithoutNullStreams): HarnessProcess {
  let exited = false;
  const done = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    // A failed spawn emits `error` and never `exit`.
    child.once('error', () => {
      exited = true;
      resolve();
    });
  });
  return {
    get pid() {
      return child.pid;
    },
    get hasExited() {
      return exited;
    },
    exited: done,
    kill() {
      if (exited || child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    },
  };
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
