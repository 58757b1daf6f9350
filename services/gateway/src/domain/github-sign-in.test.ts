import { describe, expect, it } from 'vitest';
import {
  maySignIn,
  parseSignInAllow,
  clearStateCookie,
  generateState,
  githubLogin,
  hashState,
  isWellFormedState,
  stateMatchesCookie,
  stateSetCookie,
  withState,
} from './github-sign-in.js';

describe('sign-in with GitHub states', () => {
  it('are random, well formed, and bound to the cookie holding their hash', () => {
    const state = generateState();
    expect(isWellFormedState(state)).toBe(true);
    expect(generateState()).not.toBe(state);
    expect(stateMatchesCookie(state, hashState(state))).toBe(true);
    expect(stateMatchesCookie(state, hashState(generateState()))).toBe(false);
    expect(stateMatchesCookie(state, null)).toBe(false);
    expect(stateMatchesCookie(undefined, hashState(state))).toBe(false);
    // The cookie holds the hash, not the state: the state itself as the cookie is refused.
    expect(stateMatchesCookie(state, state)).toBe(false);
    expect(stateMatchesCookie(`${state}x`, hashState(`${state}x`))).toBe(false);
    expect(stateMatchesCookie(state, hashState(state).toUpperCase())).toBe(false);
  });

  it('live in an http-only, Lax cookie sent only to the sign-in paths', () => {
    expect(stateSetCookie('ab', false)).toBe(
      'tw_github_state=ab; Max-Age=600; HttpOnly; Path=/v1/auth/github; SameSite=Lax',
    );
    expect(stateSetCookie('ab', true)).toMatch(/; Secure$/);
    expect(clearStateCookie(false)).toBe('tw_github_state=; Max-Age=0; HttpOnly; Path=/v1/auth/github; SameSite=Lax');
  });

  it('are added to GitHub’s authorize URL, keeping what repohost put there', () => {
    const url = new URL(
      withState('https://github.com/login/oauth/authorize?client_id=Iv1.x&redirect_uri=https%3A%2F%2Ftw%2Fcb', 's t'),
    );
    expect(Object.fromEntries(url.searchParams)).toEqual({
      client_id: 'Iv1.x',
      redirect_uri: 'https://tw/cb',
      state: 's t',
    });
  });
});

describe('logins of GitHub users', () => {
  it('are github:<login>, with the GitHub id when that is taken', () => {
    expect(githubLogin({ id: 7, login: 'octocat' })).toBe('github:octocat');
    expect(githubLogin({ id: 7, login: 'octocat' }, true)).toBe('github:octocat#7');
  });
});

describe('GITHUB_SIGN_IN_ALLOW', () => {
  it('is nobody when empty, anyone with `*`, else the logins (any case) and ids it names', () => {
    expect(parseSignInAllow('')).toBeNull();
    expect(parseSignInAllow(' , ')).toBeNull();
    const anyone = parseSignInAllow('*')!;
    expect(maySignIn(anyone, { id: 1, login: 'whoever' })).toBe(true);
    const named = parseSignInAllow('Alice, 583231 bob-the-builder')!;
    expect(maySignIn(named, { id: 9, login: 'alice' })).toBe(true);
    expect(maySignIn(named, { id: 9, login: 'BOB-the-builder' })).toBe(true);
    expect(maySignIn(named, { id: 583231, login: 'octocat-renamed' })).toBe(true);
    expect(maySignIn(named, { id: 9, login: 'mallory' })).toBe(false);
  });

  it('refuses what is neither a login nor an id', () => {
    for (const bad of ['al ice@x', '-alice', 'a--b', 'x'.repeat(40), 'github:alice']) {
      expect(() => parseSignInAllow(bad), bad).toThrow(/GITHUB_SIGN_IN_ALLOW/);
    }
  });
});
