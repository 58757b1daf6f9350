import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { gitEnvironment } from './git-env.js';

describe('gitEnvironment', () => {
  it('commits as the identity given, with no system or global configuration', () => {
    const env = gitEnvironment({ name: 'Someone', email: 'someone@example.invalid' }, process.env);
    const ident = execFileSync('git', ['var', 'GIT_COMMITTER_IDENT'], { env, encoding: 'utf8' });
    expect(ident).toMatch(/^Someone <someone@example\.invalid> /);
    expect(env).toMatchObject({ GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0' });
  });

  it('keeps what it starts from, and only that', () => {
    const env = gitEnvironment({ name: 'a', email: 'b' }, { PATH: '/usr/bin', LANG: 'C.UTF-8' });
    expect(env.PATH).toBe('/usr/bin');
    expect(env.LANG).toBe('C.UTF-8');
    expect(env.HOME).toBeUndefined();
  });
});
