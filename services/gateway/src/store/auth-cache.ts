import type { IdentityStore, UserDoc } from './identity.js';
import { hashKey } from '../domain/keys.js';

export interface AuthCacheOptions {
  /** How long a key's user is remembered; a key revoked elsewhere keeps working that long here. */
  ttlMs: number;
  /** Bound on remembered keys; the oldest is forgotten first. */
  maxEntries: number;
  now?: () => number;
}

/**
 * Ten seconds by default (AUTH_CACHE_TTL_MS): a busy caller's requests stop costing two database
 * lookups each. A revocation (by the admin CLI, another process) is announced on NATS and every
 * replica forgets what it remembered at once (revocations.ts); should the announcement be lost, the
 * revoked key is still refused within the TTL.
 */
export const AUTH_CACHE_DEFAULTS: AuthCacheOptions = { ttlMs: 10_000, maxEntries: 10_000 };

/**
 * The identity store with `authenticate` remembered for a short while: every API request is
 * authenticated, and without this each one reads the key and its user from the database before
 * any work starts. Only keys that were accepted are remembered (an unknown or revoked key is
 * looked up every time, so a new key works at once and guessing fills nothing), under the key's
 * hash rather than the key. A revocation through this store forgets everything it remembered.
 */
export interface CachingIdentityStore extends IdentityStore {
  /** The user of a key accepted within the TTL, without a database lookup; null otherwise. */
  remembered(key: string): UserDoc | null;
  /** Forgets every remembered key: a key was revoked elsewhere. */
  forgetAll(): void;
}

export function cacheAuthentication(identity: IdentityStore, options: AuthCacheOptions): CachingIdentityStore {
  const { ttlMs, maxEntries, now = Date.now } = options;
  // Insertion order is expiry order (every entry lives ttlMs), so the first entry is the oldest.
  const remembered = new Map<string, { user: UserDoc; expiresAt: number }>();

  function rememberedUser(key: string): UserDoc | null {
    const id = hashKey(key);
    const entry = remembered.get(id);
    if (entry && entry.expiresAt > now()) return entry.user;
    remembered.delete(id);
    return null;
  }

  return {
    ...identity,

    remembered: rememberedUser,

    async authenticate(key) {
      const known = rememberedUser(key);
      if (known) return known;
      const id = hashKey(key);

      const user = await identity.authenticate(key);
      if (user) {
        if (remembered.size >= maxEntries) {
          const oldest = remembered.keys().next();
          if (!oldest.done) remembered.delete(oldest.value);
        }
        // A concurrent miss for the same key may have set it meanwhile: re-insert to keep the order.
        remembered.delete(id);
        remembered.set(id, { user, expiresAt: now() + ttlMs });
      }
      return user;
    },

    async revokeKey(idOrPrefix) {
      const revoked = await identity.revokeKey(idOrPrefix);
      remembered.clear();
      return revoked;
    },

    async revokeOwnKey(userId, id) {
      const key = await identity.revokeOwnKey(userId, id);
      if (key) remembered.clear();
      return key;
    },

    forgetAll() {
      remembered.clear();
    },
  };
}
