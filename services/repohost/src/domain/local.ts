import {
  branchNameProblem,
  type HostedRepository,
  type Installation,
  type ProviderConnection,
} from '@threadwork/contracts';

// The `local` provider: bare repositories in one folder stand in for a single installation that
// every user can see, so the stack runs with no GitHub App at all.

export const LOCAL_OWNER = 'local';
export const LOCAL_INSTALLATION_ID = 1;
/** Bare repositories are recognised by this suffix, as `git init --bare <name>.git` names them. */
export const BARE_SUFFIX = '.git';

const FNV_OFFSET_BASIS = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/**
 * A stable id for a local repository: 32-bit FNV-1a of its UTF-8 name cut to 31 bits (ids are
 * positive and must survive clients that read them as signed 32-bit integers), never 0. Two names
 * can share an id; the store's unique index turns that into a reported collision.
 */
export function localRepositoryId(name: string): number {
  let hash = FNV_OFFSET_BASIS;
  for (const byte of new TextEncoder().encode(name)) {
    hash ^= byte;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  const id = hash & 0x7fffffff;
  return id === 0 ? 1 : id;
}

/** `name.git` → `name`; anything else is not a bare repository of ours. */
export function repositoryNameOf(entry: string): string | null {
  if (!entry.endsWith(BARE_SUFFIX) || entry.length === BARE_SUFFIX.length || entry.startsWith('.')) return null;
  return entry.slice(0, -BARE_SUFFIX.length);
}

/**
 * The default branch from a bare repository's `HEAD` (`ref: refs/heads/<branch>`). A detached
 * HEAD (a bare commit id) names no branch to start threads from, so it yields null; so does a name
 * that is no branch name (one a command line would take for an option, say).
 */
export function parseHeadRef(head: string): string | null {
  const match = /^ref:\s*refs\/heads\/(\S+)\s*$/.exec(head.trim());
  const branch = match?.[1] ?? null;
  return branch !== null && branchNameProblem(branch) === null ? branch : null;
}

const AVATAR_COLORS = ['#4f46e5', '#0891b2', '#059669', '#ca8a04', '#dc2626', '#9333ea', '#db2777', '#475569'];

/** A data-URI SVG of the name's initial: a valid URI that needs no network and no image host. */
export function initialAvatar(name: string): string {
  const initial = (/[A-Za-z0-9]/.exec(name)?.[0] ?? '#').toUpperCase();
  const color = AVATAR_COLORS[localRepositoryId(name) % AVATAR_COLORS.length];
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64">` +
    `<rect width="64" height="64" rx="12" fill="${color}"/>` +
    `<text x="32" y="42" font-family="sans-serif" font-size="30" text-anchor="middle" fill="#fff">${initial}</text></svg>`;
  return `data:image/svg+xml,${encodeURIComponent(svg)}`;
}

/**
 * What clients see as a local repository's `url`: it names the repository (`local://local/<name>.git`,
 * the way `https://github.com/<owner>/<name>.git` does) and says nothing of where the server keeps it.
 */
export function localRepositoryUrl(name: string): string {
  return `local://${LOCAL_OWNER}/${encodeURIComponent(name)}${BARE_SUFFIX}`;
}

export function localRepository(input: {
  repositoryId: number;
  name: string;
  /** Where the runner clones it: the bare repository's `file://` URL on the server. */
  cloneUrl: string;
  defaultBranch: string;
}): HostedRepository {
  return {
    repository_id: input.repositoryId,
    installation_id: LOCAL_INSTALLATION_ID,
    owner: LOCAL_OWNER,
    name: input.name,
    full_name: `${LOCAL_OWNER}/${input.name}`,
    url: localRepositoryUrl(input.name),
    avatar_url: initialAvatar(input.name),
    private: true,
    default_branch: input.defaultBranch,
    clone_url: input.cloneUrl,
  };
}

/** What clients read of the local folder: that it exists, never where it is on the server. */
export const LOCAL_FOLDER_NOTE = "Local repositories: the bare repositories in the server's REPOHOST_LOCAL_DIR";

export function localConnection(): ProviderConnection {
  const installation: Installation = {
    id: LOCAL_INSTALLATION_ID,
    account: LOCAL_OWNER,
    avatar_url: initialAvatar(LOCAL_OWNER),
    target_type: 'User',
    repository_selection: 'all',
    suspended: false,
    // Nothing to manage on a provider: the folder is the installation.
    manage_url: '',
  };
  return {
    status: 'ready',
    message: `${LOCAL_FOLDER_NOTE} (no GitHub App configured)`,
    installations: [installation],
    installation_requests: [],
  };
}
