import { ensureIndexes, isDuplicateKeyError, type Collection, type Db } from '@threadwork/platform';
import { generateState, hashState, isWellFormedState, STATE_TTL_SECONDS } from '../domain/github-sign-in.js';

export interface GitHubStateDoc {
  /** SHA-256 of the state (hex), as the browser's cookie holds it; the state itself is never stored. */
  _id: string;
  created_at: Date;
  expires_at: Date;
}

export interface GitHubStateUseDoc {
  /** The state's `_id`: the unique `_id` lets exactly one callback take it. */
  _id: string;
  used_at: Date;
  /** The state's: swept with it. */
  expires_at: Date;
}

/** A GitHub user who signed in, by GitHub's numeric id (a login can change hands; the id cannot). */
export interface GitHubUserDoc {
  _id: number;
  user_id: string;
  /** The GitHub login when they last signed in. */
  login: string;
  created_at: Date;
  signed_in_at: Date;
}

export interface GitHubSignInStates {
  ensureIndexes(): Promise<void>;
  /** A new state, valid for STATE_TTL_SECONDS; stored as its hash. */
  create(): Promise<string>;
  /** Whether `state` is known and unexpired, and is used from now on; false for any other. */
  consume(state: string): Promise<boolean>;
}

/**
 * States of sign-ins with GitHub that were started. Anyone may start one (it is public), so expired
 * ones are swept each time one is made: the sweep is one indexed delete, and a start is rate-limited
 * per client address. Who uses a state is decided by a unique insert, as for login links: FerretDB
 * does not make a conditional update atomic.
 */
export function gitHubStateCollection(db: Db): GitHubSignInStates {
  const states: Collection<GitHubStateDoc> = db.collection<GitHubStateDoc>('github_sign_in_states');
  const uses: Collection<GitHubStateUseDoc> = db.collection<GitHubStateUseDoc>('github_sign_in_state_uses');
  return {
    async ensureIndexes() {
      await ensureIndexes(states, [
        { key: { expires_at: 1 }, options: { name: 'expires' }, serves: 'sweep expired states' },
      ]);
      await ensureIndexes(uses, [
        { key: { expires_at: 1 }, options: { name: 'expires' }, serves: 'sweep uses of expired states' },
      ]);
    },

    async create() {
      const state = generateState();
      const now = new Date();
      await states.insertOne({
        _id: hashState(state),
        created_at: now,
        expires_at: new Date(now.getTime() + STATE_TTL_SECONDS * 1000),
      });
      // A use goes with its state: a replay of a swept state finds no state at all.
      await states.deleteMany({ expires_at: { $lt: now } });
      await uses.deleteMany({ expires_at: { $lt: now } });
      return state;
    },

    async consume(state) {
      if (!isWellFormedState(state)) return false;
      const id = hashState(state);
      const now = new Date();
      const doc = await states.findOne({ _id: id });
      if (!doc || doc.expires_at.getTime() <= now.getTime()) return false;
      try {
        await uses.insertOne({ _id: id, used_at: now, expires_at: doc.expires_at });
      } catch (err) {
        if (isDuplicateKeyError(err)) return false;
        throw err;
      }
      return true;
    },
  };
}
