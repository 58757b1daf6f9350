import { join } from 'node:path';
import type { Logger } from '@threadwork/platform';
import { ResumeFailedError, type Harness, type HarnessSession, type SessionOptions } from '../harness.js';
import type { Isolation } from '../../sandbox/isolation.js';
import { appServerArgs, codexCommand } from './launch.js';
import { hasRollout } from './rollout.js';
import { CodexRpc, CodexRpcError } from './rpc.js';
import { CodexSession } from './session.js';

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

export class CodexHarness implements Harness {
  readonly name = 'codex';
  readonly modelKeyEnv = CODEX_MODEL_KEY_ENV;

  constructor(private readonly options: CodexHarnessOptions) {}

  async start(opts: SessionOptions): Promise<HarnessSession> {
    const { logger, isolation } = this.options;
    // Jailed, the process reaches the model through a proxy of the runner's that adds the key, and
    // the rest of the network through one that enforces the egress policy; else it gets the key in
    // one variable, which Codex keeps from the agent's commands.
    let session: CodexSession | null = null;
    // Everything Codex is to run with comes in its arguments. Its home is writable by the agent's
    // commands, and a `config.toml` left there would be read at this start, outside Codex's own
    // sandbox: an MCP server there is a program of the agent's that Codex itself starts and keeps
    // running beside the harness, past every sweep (and `-c mcp_servers={}` merges with the file
    // rather than replacing it). Nothing of the jail runs now (an earlier harness of this sandbox
    // was stopped, jail and all), so none can put it back before Codex reads it; a link is removed,
    // not followed.
    await opts.host.home.remove(join(opts.home, 'config.toml'));
    const { host } = opts;
    const launch = await host.prepare({
      program: codexCommand(),
      api: 'responses',
      baseUrl: this.options.baseUrl,
      apiKey: this.options.apiKey,
      isolation,
      session: opts,
      logger,
      refused: (refusal) => session?.refused(refusal),
    });
    const args = appServerArgs({
      model: opts.model,
      baseUrl: launch.modelBaseUrl,
      keyEnv: launch.key ? CODEX_MODEL_KEY_ENV : null,
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
    const env = { ...launch.env, ...(launch.key ? { [CODEX_MODEL_KEY_ENV]: launch.key } : {}) };
    const child = host.start(launch, { args, env, cwd: opts.cwd });
    const rpc = new CodexRpc(child, logger);
    // What the jail held outside it goes with the process: the gates' sockets, its cgroup.
    const closed = rpc.exited.then(() => launch.release());
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
            throw new ResumeFailedError(
              err.message,
              !(await hasRollout(opts.host.home, opts.home, opts.resumeSessionId)),
            );
          }
          throw err;
        }
      } else {
        threadId = (await rpc.request('thread/start', { cwd: opts.cwd }, START_TIMEOUT_MS)).thread.id;
      }
      // What runs now is the harness itself (and, jailed, the jail's init and the model bridge):
      // the agent has run nothing yet. These alone outlive a run (stopLeftovers).
      const own = await host.ownProcesses(child);
      session = new CodexSession(rpc, host, closed, threadId, opts.cwd, own, this.options, launch.gates);
      return session;
    } catch (err) {
      rpc.kill();
      throw err;
    }
  }
}
