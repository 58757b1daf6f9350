/** Who commits: the name and email of both the author and the committer. */
export interface GitIdentity {
  name: string;
  email: string;
}

/**
 * An environment for `git` that nothing on this machine changes: no system or global
 * configuration (filters, `insteadOf`, hooks paths…), no terminal prompt that would hang a
 * command waiting for a password, and `identity` as author and committer. `base` is what it
 * starts from: the process's own environment, or only what git needs to run.
 */
export function gitEnvironment(identity: GitIdentity, base: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...base,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_AUTHOR_NAME: identity.name,
    GIT_AUTHOR_EMAIL: identity.email,
    GIT_COMMITTER_NAME: identity.name,
    GIT_COMMITTER_EMAIL: identity.email,
  };
}
