import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Command } from '../launch.js';

// Where the pinned codex binary is and how it is started. `@openai/codex` ships a node wrapper
// (bin/codex.js) that spawns the native binary from a per-platform optional dependency. On Node 20
// the wrapper stays alive as a second process, and killing it does not kill the binary, so the
// native binary is started directly when it can be found; the wrapper is the fallback.

const NATIVE: Record<string, { pkg: string; triple: string }> = {
  'linux-x64': { pkg: '@openai/codex-linux-x64', triple: 'x86_64-unknown-linux-musl' },
  'linux-arm64': { pkg: '@openai/codex-linux-arm64', triple: 'aarch64-unknown-linux-musl' },
  'darwin-x64': { pkg: '@openai/codex-darwin-x64', triple: 'x86_64-apple-darwin' },
  'darwin-arm64': { pkg: '@openai/codex-darwin-arm64', triple: 'aarch64-apple-darwin' },
};

export function codexCommand(): Command {
  const require = createRequire(import.meta.url);
  // The real path: with pnpm the platform package sits beside the real one, not beside a link to it
  // (resolvers that keep links, like vite's, would otherwise miss it).
  const packageJson = realpathSync(require.resolve('@openai/codex/package.json'));
  const native = NATIVE[`${process.platform}-${process.arch}`];
  if (native) {
    try {
      const nativeJson = createRequire(packageJson).resolve(`${native.pkg}/package.json`);
      const binary = join(dirname(nativeJson), 'vendor', native.triple, 'bin', 'codex');
      if (existsSync(binary)) return { command: binary, args: [] };
    } catch {
      // Not installed for this platform: the wrapper below reports what is missing.
    }
  }
  return { command: process.execPath, args: [join(dirname(packageJson), 'bin', 'codex.js')] };
}

export interface ProviderSettings {
  model: string;
  /** OpenAI-compatible Responses endpoint, e.g. `http://127.0.0.1:PORT/v1`. */
  baseUrl: string;
  /** Name of the variable holding the model key; null when the endpoint takes none. */
  keyEnv: string | null;
  /**
   * Codex's sandbox around the agent's commands: none, or `workspace-write` (the cwd, /tmp and
   * `writableRoots` writable; the network only when `network`, and then only the jail's).
   */
  sandbox:
    { mode: 'danger-full-access' } | { mode: 'workspace-write'; writableRoots: readonly string[]; network: boolean };
}

/** TOML string value for a `-c key=value` override. JSON strings are valid TOML basic strings. */
const toml = (value: string) => JSON.stringify(value);

/**
 * `codex app-server` arguments: a custom provider `tw` (so no login is needed), no retries (the
 * runner decides what a failure means), no approvals (nobody is there to approve), no plugins,
 * apps, web search or analytics (they reach the internet). Only the key's variable name is passed, never the key.
 */
/**
 * Codex features that would run something of the agent's outside Codex's own sandbox, or reach
 * past the model proxy: the shell snapshot runs the user's login shell (reading the dotfiles the
 * agent leaves in its HOME) from Codex itself at every start; hooks run configured commands from
 * Codex itself; plugins and apps call out to OpenAI's services; a skill's MCP dependencies would be
 * installed as MCP servers that Codex itself starts (MCP servers in its home's `config.toml` are
 * kept out by removing the file before each start: codex.ts).
 */
const DISABLED_FEATURES = ['plugins', 'apps', 'shell_snapshot', 'hooks', 'skill_mcp_dependency_install'];

export function appServerArgs(s: ProviderSettings): string[] {
  const config: string[] = [
    `model=${toml(s.model)}`,
    `model_provider="tw"`,
    `model_providers.tw.name="Threadwork"`,
    `model_providers.tw.base_url=${toml(s.baseUrl)}`,
    `model_providers.tw.wire_api="responses"`,
    ...(s.keyEnv ? [`model_providers.tw.env_key=${toml(s.keyEnv)}`] : []),
    `model_providers.tw.request_max_retries=0`,
    `model_providers.tw.stream_max_retries=0`,
    `approval_policy="never"`,
    `sandbox_mode=${toml(s.sandbox.mode)}`,
    ...(s.sandbox.mode === 'workspace-write'
      ? [
          `sandbox_workspace_write.writable_roots=[${s.sandbox.writableRoots.map(toml).join(',')}]`,
          `sandbox_workspace_write.network_access=${s.sandbox.network}`,
        ]
      : []),
    `web_search="disabled"`,
    // Analytics would be sent to OpenAI from the sandbox, whatever the model endpoint.
    `analytics.enabled=false`,
    // Commands the agent runs must not see the model key either.
    ...(s.keyEnv ? [`shell_environment_policy.exclude=[${toml(s.keyEnv)}]`] : []),
  ];
  return ['app-server', ...config.flatMap((c) => ['-c', c]), ...DISABLED_FEATURES.flatMap((f) => ['--disable', f])];
}
