import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';

// The real git, run with an environment of its own: no prompts (a missing credential fails fast
// instead of hanging a run), no user or system configuration, and the identity commits carry.

const run = promisify(execFile);

const GIT_MAX_BUFFER = 64 * 1024 * 1024;

export const THREADWORK_AUTHOR = { name: 'Threadwork', email: 'threadwork@localhost' };

export function gitEnv(home: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    LANG: 'C.UTF-8',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: THREADWORK_AUTHOR.name,
    GIT_AUTHOR_EMAIL: THREADWORK_AUTHOR.email,
    GIT_COMMITTER_NAME: THREADWORK_AUTHOR.name,
    GIT_COMMITTER_EMAIL: THREADWORK_AUTHOR.email,
  };
}

export class GitError extends Error {
  override name = 'GitError';
}

/**
 * Git configuration carrying a short-lived repository token as an HTTP header, through git's
 * environment (`GIT_CONFIG_*`): never written to a repository's config, never on a command line.
 */
export function credentialEnv(token: string | null): Record<string, string> {
  if (!token) return {};
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  return {
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

export async function git(
  cwd: string,
  home: string,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<string> {
  try {
    const { stdout } = await run('git', args, {
      cwd,
      env: { ...gitEnv(home), ...extraEnv },
      maxBuffer: GIT_MAX_BUFFER,
    });
    return stdout;
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new GitError(`git ${args[0]} failed${stderr ? `: ${stderr}` : ''}`, { cause: err });
  }
}

/**
 * Output of a git command, read up to `maxBytes` (+1 to tell that there was more): a diff of a
 * huge change is cut while it is produced instead of being held in memory whole.
 */
export function gitBounded(
  cwd: string,
  home: string,
  args: string[],
  maxBytes: number,
): Promise<{ text: string; more: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd, env: gitEnv(home), stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let size = 0;
    let more = false;
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (more) return;
      chunks.push(chunk);
      size += chunk.length;
      if (size > maxBytes) {
        more = true;
        child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2_000);
    });
    child.once('error', reject);
    child.once('close', (code) => {
      if (!more && code !== 0) {
        reject(new GitError(`git ${args[0]} failed: ${stderr.trim()}`));
        return;
      }
      resolve({ text: Buffer.concat(chunks).toString('utf8'), more });
    });
  });
}
