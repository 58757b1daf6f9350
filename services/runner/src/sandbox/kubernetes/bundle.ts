import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { finished } from 'node:stream/promises';
import { revision } from '../agent-repo.js';
import { git, GitError, gitRecords, type GitRepo } from '../git.js';
import { BUNDLE_TIMEOUT_MS, deadline } from './deadline.js';
import type { PodExec } from './exec.js';

// Git objects in and out of a sandbox pod's repository as bundles streamed over exec. The runner
// keeps doing every network operation (clone, fetch, push with installation tokens) in its own git
// directory outside the pod; the pod's repository is made from bundles and never gets a remote, a
// URL or a credential. What comes out of the pod is the agent's and untrusted: it is written to a
// file of the runner's, bounded, checked object by object as git fetches it into a ref of the
// runner's, and only its tree is taken (the runner makes its own commit of it).

/** The pod side, as `sh -c` scripts taking their arguments as positional parameters (never spliced in). */
const POD_GIT =
  'git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.allow=never -c protocol.file.allow=always';

/**
 * Reads a bundle on stdin into the repository, whose `.git` is made anew (whatever the agent did
 * to the old one goes: its remotes, hooks, config, its own commits), and puts `branch` there as
 * HEAD. `checkout` writes the branch's files over the work tree's; `index` leaves the files as the
 * agent left them (only the index follows the branch), unless the work tree is empty. No system or
 * global configuration (HOME's is the agent's): no smudge filter of the agent's runs on checkout.
 */
const RECEIVE = `set -eu
repo="$1"; branch="$2"; files="$3"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
bundle="$tmp/in.bundle"
mkdir "$tmp/home"
unset GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
cat > "$bundle"
mkdir -p "$repo"
rm -rf "$repo/.git"
[ -n "$(ls -A "$repo")" ] || files=checkout
${POD_GIT} init -q "$repo"
if [ ! -s "$bundle" ]; then
  # No bundle: the branch has no commit yet (a repository with none), and starts here.
  ${POD_GIT} -C "$repo" symbolic-ref HEAD "refs/heads/$branch"
  exit 0
fi
${POD_GIT} -C "$repo" fetch -q "$bundle" "refs/heads/$branch"
if [ "$files" = checkout ]; then
  ${POD_GIT} -C "$repo" checkout -q -f -B "$branch" FETCH_HEAD
else
  ${POD_GIT} -C "$repo" update-ref "refs/heads/$branch" FETCH_HEAD
  ${POD_GIT} -C "$repo" symbolic-ref HEAD "refs/heads/$branch"
  ${POD_GIT} -C "$repo" read-tree FETCH_HEAD
fi`;

/**
 * Snapshots the work tree as a commit on `base` and writes a bundle of it (base excluded) on stdout;
 * an empty `base` (a branch with no commit yet): a root commit, the bundle whole.
 *
 * The pod's repository is the agent's, and so is its configuration and HOME's: a clean filter
 * there runs on `git add`, and may stall or inflate what it is given. So git runs here on a git
 * directory of the script's own, made anew in a temporary folder, borrowing the objects of the
 * pod's repository (for `base`) through alternates, with no system or global configuration, an
 * empty HOME, and no attributes file: no filter, hook or fsmonitor of the agent's runs. The work
 * tree's `.gitattributes` still name filters, which no configuration defines.
 */
const SEND = `set -eu
repo="$1"; base="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/home"
unset GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_COMMON_DIR GIT_NAMESPACE
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_DIR="$tmp/git" GIT_WORK_TREE="$repo" GIT_INDEX_FILE="$tmp/index"
git="${POD_GIT} -c core.attributesFile=/dev/null -c core.excludesFile=/dev/null"
$git init -q
printf '%s\\n' "$repo/.git/objects" > "$GIT_DIR/objects/info/alternates"
cd "$repo"
if [ -n "$base" ]; then $git read-tree "$base"; else $git read-tree --empty; fi
$git add -A
tree="$($git write-tree)"
commit="$(GIT_AUTHOR_NAME=sandbox GIT_AUTHOR_EMAIL=sandbox@localhost GIT_COMMITTER_NAME=sandbox GIT_COMMITTER_EMAIL=sandbox@localhost $git commit-tree "$tree" \${base:+-p "$base"} -m snapshot)"
$git update-ref refs/threadwork/snapshot "$commit"
$git bundle create -q "$tmp/bundle" "refs/threadwork/snapshot" \${base:+"^$base"} 2>/dev/null
cat "$tmp/bundle"`;

export class BundleError extends Error {
  override name = 'BundleError';
}

/** Passes the first `max` bytes through; past them it drops the rest and calls `overflow` once. */
function bounded(max: number, overflow: () => void): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      seen += chunk.length;
      if (seen > max) {
        if (seen - chunk.length <= max) overflow();
        return done();
      }
      done(null, chunk);
    },
  });
}

async function scratch<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'threadwork-bundle-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Bounds of a tree taken out of the pod, as checked out: the runner's SANDBOX_DISK_MAX_* by default. */
export const DEFAULT_TREE_MAX_BYTES = 10 * 1024 * 1024 * 1024;
export const DEFAULT_TREE_MAX_ENTRIES = 1_000_000;

export interface TreeBounds {
  /** The sum of the sizes of the tree's blobs (what checking it out writes). */
  maxBytes: number;
  /** Its entries, trees and gitlinks included (the files and folders it makes). */
  maxEntries: number;
}

/**
 * Whether `tree` stays within `bounds` once checked out, read from the objects alone (sizes from
 * the objects' headers, nothing inflated), the listing stopped as soon as a bound is past. A bundle
 * is bounded compressed; what its blobs expand to is not, and a few MiB of deltas can name GiBs.
 */
async function checkTree(dir: string, repo: GitRepo, tree: string, bounds: TreeBounds): Promise<void> {
  let bytes = 0;
  let entries = 0;
  const found = { past: null as string | null };
  await gitRecords(dir, repo, ['ls-tree', '-r', '-t', '-l', '-z', '--full-tree', tree], (record) => {
    entries++;
    if (entries > bounds.maxEntries) {
      found.past = `more than ${bounds.maxEntries} entries`;
      return false;
    }
    const size = /^\d+ \S+ [0-9a-f]+ +(\d+|-)\t/.exec(record)?.[1];
    if (size === undefined) {
      found.past = 'a listing git did not make';
      return false;
    }
    if (size !== '-') bytes += Number(size);
    if (bytes > bounds.maxBytes) {
      found.past = `more than ${bounds.maxBytes} bytes`;
      return false;
    }
    return true;
  });
  if (found.past !== null) throw new BundleError(`the sandbox's work tree is too large to take: ${found.past}`);
}

const REF_NAME = /^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+$/;

/**
 * Puts the runner's `branch` into the pod's repository at `podRepo` (a path in the pod), a repository
 * made anew, as its HEAD: the agent's repository then holds the thread branch as the runner has it,
 * and no remote. `files`: `checkout` (the default) writes the branch's files over the work tree;
 * `index` keeps the agent's files (a workspace continued, or one whose files the branch already
 * records) and makes only the index follow the branch.
 */
export async function sendBranch(
  exec: PodExec,
  opts: {
    repo: GitRepo;
    branch: string;
    podRepo: string;
    files?: 'checkout' | 'index';
    /** How long the pod may take to read the bundle in (BUNDLE_TIMEOUT_MS by default). */
    timeoutMs?: number;
  },
): Promise<void> {
  if (!REF_NAME.test(opts.branch)) throw new BundleError(`not a branch name: ${opts.branch}`);
  await scratch(async (dir) => {
    const file = join(dir, 'in.bundle');
    const repo = { gitDir: opts.repo.gitDir, workTree: null };
    // A branch with no commit yet (a repository with none) is sent as no bundle at all.
    const born = (await revision(dir, repo, `refs/heads/${opts.branch}`)) !== null;
    if (born) await git(dir, ['bundle', 'create', '-q', file, `refs/heads/${opts.branch}`], { repo });
    const timeoutMs = opts.timeoutMs ?? BUNDLE_TIMEOUT_MS;
    const limit = deadline(timeoutMs);
    const result = await exec
      .run(['sh', '-c', RECEIVE, 'sh', opts.podRepo, opts.branch, opts.files ?? 'checkout'], {
        stdin: born ? createReadStream(file) : Readable.from([]),
        signal: limit.signal,
      })
      .finally(() => limit.clear());
    if (limit.expired())
      throw new BundleError(`putting the branch into the sandbox did not finish within ${timeoutMs / 1000} s`);
    if (result.code !== 0)
      throw new BundleError(`putting the branch into the sandbox failed (exit ${result.code}): ${result.stderr}`);
  });
}

/**
 * Takes the pod's work tree at `podRepo` out as a commit on `base` (null: a root commit, for a
 * branch with no commit yet): fetched into the runner's
 * repository under `into` (a ref of the runner's), objects checked as they come. Returns the tree it
 * holds, which is all the runner uses of it (its own commit records it). Throws BundleError when the
 * pod sends no bundle, a bundle past `maxBytes`, one whose commit is not on `base` or whose tree is
 * past `tree`'s bounds, or takes longer than `timeoutMs` (BUNDLE_TIMEOUT_MS by default); the ref
 * `into` is then left as it was.
 */
export async function receiveTree(
  exec: PodExec,
  opts: {
    repo: GitRepo;
    podRepo: string;
    base: string | null;
    into: string;
    maxBytes: number;
    tree?: Partial<TreeBounds>;
    timeoutMs?: number;
  },
): Promise<string> {
  const bounds: TreeBounds = {
    maxBytes: opts.tree?.maxBytes ?? DEFAULT_TREE_MAX_BYTES,
    maxEntries: opts.tree?.maxEntries ?? DEFAULT_TREE_MAX_ENTRIES,
  };
  const timeoutMs = opts.timeoutMs ?? BUNDLE_TIMEOUT_MS;
  if (opts.base !== null && !/^[0-9a-f]{40,64}$/.test(opts.base)) throw new BundleError(`not a revision: ${opts.base}`);
  if (!opts.into.startsWith('refs/threadwork/')) throw new BundleError(`not a ref of the runner's: ${opts.into}`);
  const repo = { gitDir: opts.repo.gitDir, workTree: null };
  return scratch(async (dir) => {
    const file = join(dir, 'out.bundle');
    const out = createWriteStream(file);
    const cut = new AbortController();
    const limit = bounded(opts.maxBytes, () => cut.abort());
    limit.pipe(out);
    const time = deadline(timeoutMs, cut.signal);
    const result = await exec
      .run(['sh', '-c', SEND, 'sh', opts.podRepo, opts.base ?? ''], { stdout: limit, signal: time.signal })
      .finally(() => time.clear());
    limit.end();
    await finished(out);
    if (time.expired())
      throw new BundleError(`taking the work out of the sandbox did not finish within ${timeoutMs / 1000} s`);
    if (cut.signal.aborted) throw new BundleError(`the sandbox's bundle is larger than ${opts.maxBytes} bytes`);
    if (result.code !== 0)
      throw new BundleError(`taking the work out of the sandbox failed (exit ${result.code}): ${result.stderr}`);
    try {
      // From that file only: the one transport allowed is `file`, and the bundle names no remote.
      // `maxBytes` bounds the bundle, not what its objects inflate to: one indexing thread, and
      // objects past 16 MiB (or delta bases past the cache) streamed rather than held, so a bundle
      // of compressible blobs cannot take the runner's memory.
      await git(
        dir,
        [
          '-c',
          'transfer.fsckObjects=true',
          '-c',
          'pack.threads=1',
          '-c',
          'core.bigFileThreshold=16m',
          '-c',
          'core.deltaBaseCacheLimit=16m',
          'fetch',
          '-q',
          '--no-tags',
          file,
          `+refs/threadwork/snapshot:${opts.into}`,
        ],
        { repo, remote: { url: pathToFileURL(file).href, token: null } },
      );
    } catch (err) {
      throw new BundleError(`the sandbox's bundle was refused: ${(err as Error).message}`, { cause: err });
    }
    const parents = (await git(dir, ['rev-list', '--parents', '-n', '1', opts.into], { repo })).trim().split(' ');
    const onBase = opts.base === null ? parents.length === 1 : parents.length === 2 && parents[1] === opts.base;
    const drop = () => git(dir, ['update-ref', '-d', opts.into], { repo }).catch(() => undefined);
    if (!onBase) {
      await drop();
      throw new BundleError('the sandbox sent a commit that is not on the revision it was given');
    }
    const tree = (await git(dir, ['rev-parse', `${opts.into}^{tree}`], { repo })).trim();
    await checkTree(dir, repo, tree, bounds).catch(async (err: unknown) => {
      await drop();
      throw err;
    });
    return tree;
  }).catch((err: unknown) => {
    if (err instanceof GitError) throw new BundleError(err.message, { cause: err });
    throw err;
  });
}
