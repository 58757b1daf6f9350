import type { RunError } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import type { RunnerConfig } from '../config.js';
import type { Isolation } from '../sandbox/isolation.js';
import { ClaudeHarness } from './claude/claude.js';
import { CodexHarness } from './codex/codex.js';
import type { Harness } from './harness.js';

// The harnesses a runner serves (HARNESSES), each with its model endpoint and key. One without an
// endpoint is still served: its runs fail at once with `model_not_configured`, saying what to set.

export interface ServedHarnesses {
  harnesses: ReadonlyMap<string, Harness>;
  /** Why a harness's runs cannot run, by harness: its model endpoint is not set. */
  unconfigured: ReadonlyMap<string, RunError>;
}

/** Model endpoints of demo mode, which replace the configured ones. */
export interface DemoEndpoints {
  responses: string;
  messages: string;
  /** Tells the demo model which run a Claude Code session's turn is: it cannot read it from the request. */
  onTurn(sessionId: string, runId: string | null): void;
}

/** Where a model endpoint is missing, the runner still takes jobs, and fails each with a clear message. */
const UNCONFIGURED_URL = 'http://127.0.0.1:9';

export function serveHarnesses(
  config: RunnerConfig,
  isolation: Isolation,
  logger: Logger,
  demo: DemoEndpoints | null,
): ServedHarnesses {
  const harnesses = new Map<string, Harness>();
  const unconfigured = new Map<string, RunError>();
  const common = {
    outputCapBytes: config.HARNESS_OUTPUT_CAP_BYTES,
    includeRaw: config.EVENTS_INCLUDE_RAW,
    isolation,
    logger,
  };
  for (const name of config.HARNESSES) {
    const endpoint =
      name === 'codex'
        ? {
            baseUrl: demo?.responses ?? config.MODEL_BASE_URL,
            apiKey: config.MODEL_API_KEY,
            settings: 'MODEL_BASE_URL (an OpenAI-compatible Responses endpoint) and MODEL_API_KEY',
          }
        : {
            baseUrl: demo?.messages ?? config.CLAUDE_BASE_URL,
            apiKey: config.CLAUDE_API_KEY,
            settings: 'CLAUDE_BASE_URL (an Anthropic Messages endpoint) and CLAUDE_API_KEY',
          };
    if (!endpoint.baseUrl) {
      logger.warn(
        `no model endpoint for ${name}: its runs fail with model_not_configured (set ${endpoint.settings}, or THREADWORK_DEMO=1)`,
      );
      unconfigured.set(name, {
        code: 'model_not_configured',
        message: `Set ${endpoint.settings}, or start with THREADWORK_DEMO=1`,
      });
    }
    const options = {
      ...common,
      baseUrl: endpoint.baseUrl ?? UNCONFIGURED_URL,
      // Demo mode's model takes no key: none is handed out.
      apiKey: demo ? null : (endpoint.apiKey ?? null),
    };
    harnesses.set(
      name,
      name === 'codex' ? new CodexHarness(options) : new ClaudeHarness({ ...options, onTurn: demo?.onTurn }),
    );
  }
  return { harnesses, unconfigured };
}
