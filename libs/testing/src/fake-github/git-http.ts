import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { gitEnv } from '../git.js';
import type { GitHubState } from './state.js';

// Real git smart HTTP over the fake's bare repositories, through `git http-backend`: an installation
// token is the password, and it reaches only the repositories of its installation.

const execFileAsync = promisify(execFile);

/** Serves `/{owner}/{name}.git/…` to a client with an installation token that may see the repository. */
export function gitHttp(state: GitHubState, req: IncomingMessage, res: ServerResponse, url: URL): void {
  const match = /^\/([^/]+)\/([^/]+)\.git(\/.*)?$/.exec(url.pathname)!;
  const repo = [...state.repositories.values()].find((r) => r.full_name === `${match[1]}/${match[2]}`);
  const auth = req.headers.authorization ?? '';
  const basic = /^Basic\s+(\S+)$/i.exec(auth);
  const [user, password] = basic ? Buffer.from(basic[1]!, 'base64').toString('utf8').split(':', 2) : [];
  const token = password ? state.tokens.get(password) : undefined;
  const allowed =
    user === 'x-access-token' &&
    token !== undefined &&
    token.kind === 'installation' &&
    token.expires_at > Date.now() &&
    repo !== undefined &&
    state.tokenRepositoryIds(token).includes(repo.id);
  if (!allowed) {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' });
    res.end('Invalid username or token.');
    return;
  }
  const child = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: state.root,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: `/${repo.owner.login}/${repo.name}.git${match[3] ?? ''}`,
      REQUEST_METHOD: req.method ?? 'GET',
      QUERY_STRING: url.search.replace(/^\?/, ''),
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: user,
      REMOTE_ADDR: '127.0.0.1',
      ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
      ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
      ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const crlf = head.indexOf('\r\n\r\n');
    const lf = head.indexOf('\n\n');
    const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1;
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, end).toString('utf8').split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'status') status = Number(value.split(' ')[0]);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end));
  });
  child.on('close', () => {
    if (!headersDone) res.writeHead(500);
    res.end();
  });
}

// A refused token fails the push instead of waiting for a password on a terminal.
const pushEnv = { ...gitEnv, GIT_TERMINAL_PROMPT: '0' };

/**
 * What the runner does at the end of a run, with the real git over HTTP: clones `cloneUrl` with
 * the token as password, commits `files` on a new `branch` from `base`, pushes it, and returns
 * the base and the new commit. Asynchronous, so a fake GitHub in the same process can answer.
 */
export async function pushBranch(input: {
  cloneUrl: string;
  token: string;
  base: string;
  branch: string;
  files: Record<string, string>;
  message?: string;
}): Promise<{ baseRevision: string; revision: string }> {
  const work = mkdtempSync(join(tmpdir(), 'threadwork-push-'));
  const url = new URL(input.cloneUrl);
  url.username = 'x-access-token';
  url.password = input.token;
  const git = async (...args: string[]) =>
    (await execFileAsync('git', args, { cwd: work, env: pushEnv, encoding: 'utf8' })).stdout.trim();
  try {
    await git('clone', '--quiet', '--branch', input.base, url.href, '.');
    const baseRevision = await git('rev-parse', 'HEAD');
    await git('checkout', '--quiet', '-B', input.branch);
    for (const [path, content] of Object.entries(input.files)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), content);
    }
    await git('add', '-A');
    await git('commit', '--quiet', '-m', input.message ?? 'threadwork candidate');
    await git('push', '--quiet', '--force', 'origin', `HEAD:refs/heads/${input.branch}`);
    return { baseRevision, revision: await git('rev-parse', 'HEAD') };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
