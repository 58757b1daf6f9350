import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { HarnessHome } from '../home.js';
import type { Command } from '../launch.js';

// Where the pinned Claude Code binary is, what it runs with, and what of its state survives a
// restart. The Agent SDK bundles the CLI as a native binary in a per-platform optional dependency.

const PLATFORM_PACKAGES: Record<string, string[]> = {
  'linux-x64': ['@anthropic-ai/claude-agent-sdk-linux-x64', '@anthropic-ai/claude-agent-sdk-linux-x64-musl'],
  'linux-arm64': ['@anthropic-ai/claude-agent-sdk-linux-arm64', '@anthropic-ai/claude-agent-sdk-linux-arm64-musl'],
  'darwin-x64': ['@anthropic-ai/claude-agent-sdk-darwin-x64'],
  'darwin-arm64': ['@anthropic-ai/claude-agent-sdk-darwin-arm64'],
};

/** The bundled `claude` binary for this platform, found beside the SDK (its real path, as pnpm lays packages out). */
export function claudeCommand(): Command {
  const require = createRequire(import.meta.url);
  const sdk = realpathSync(require.resolve('@anthropic-ai/claude-agent-sdk'));
  for (const pkg of PLATFORM_PACKAGES[`${process.platform}-${process.arch}`] ?? []) {
    try {
      const binary = join(dirname(createRequire(sdk).resolve(`${pkg}/package.json`)), 'claude');
      if (existsSync(binary)) return { command: realpathSync(binary), args: [] };
    } catch {
      // Not installed for this platform (or this libc): try the next.
    }
  }
  throw new Error(`no Claude Code binary is installed for ${process.platform}-${process.arch}`);
}

/**
 * The tools the agent has: the files, the shell, its plan, questions to the user, leaving plan mode,
 * and fetching a page (through the egress policy). Left out: web search (run by the provider on the
 * key's account), subagents (their work would not show in the run's events), and the scheduling,
 * worktree, skill and MCP tools.
 */
export const CLAUDE_TOOLS = [
  'Bash',
  'Read',
  'Write',
  'Edit',
  'MultiEdit',
  'NotebookEdit',
  'Glob',
  'Grep',
  'TodoWrite',
  'AskUserQuestion',
  'ExitPlanMode',
  'WebFetch',
];

/** What the key travels as when the harness holds none: the jail's model gate adds the real one. */
export const GATED_KEY = 'threadwork-gated';

/**
 * The descriptor a real key is handed over on, where the harness holds one (not jailed): read once
 * by Claude Code at its start, it is in no environment the agent's commands inherit.
 */
export const KEY_FD = 3;

/** Claude Code's environment besides the sandbox's own. */
export function claudeEnv(settings: { configDir: string; baseUrl: string; keyOnFd: boolean }): Record<string, string> {
  return {
    CLAUDE_CONFIG_DIR: settings.configDir,
    ANTHROPIC_BASE_URL: settings.baseUrl,
    ...(settings.keyOnFd ? { CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR: String(KEY_FD) } : { ANTHROPIC_API_KEY: GATED_KEY }),
    // No update checks, telemetry or error reports: they would reach past the model endpoint.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    // The runner decides what a failed model call means; a retry loop inside would hide it.
    CLAUDE_CODE_MAX_RETRIES: '0',
    // Says the harness runs in a sandbox, which skipping permission prompts requires of root.
    IS_SANDBOX: '1',
  };
}

/** Claude Code's state directory inside the sandbox's harness home (which another harness may share). */
export function claudeConfigDir(home: string): string {
  return join(home, 'claude');
}

/**
 * Clears what the agent could have left in Claude Code's state directory for the next start to
 * read outside the agent's control (settings with hooks, plugins, MCP servers, memory files): all
 * of it goes but `projects/`, the conversations (what `resume` reads). Nothing of the sandbox runs
 * now, so nothing puts it back before the start; links are removed, not followed.
 */
export function clearConfig(files: HarnessHome, configDir: string): Promise<void> {
  return files.clearBut(configDir, ['projects']);
}

/** Whether Claude Code recorded anything of session `id` (its conversation file, `projects/<project>/<id>.jsonl`). */
export async function hasTranscript(files: HarnessHome, configDir: string, id: string): Promise<boolean> {
  const found = await files.find(join(configDir, 'projects'), `${id}.jsonl`);
  return found.some((path) => path.split('/').length === 2 && path.endsWith(`/${id}.jsonl`));
}
