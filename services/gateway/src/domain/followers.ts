import { AppError } from '@threadwork/platform';

/**
 * Counts what each user holds open that waits on the event log — streams and long-polls — so one
 * user cannot hold every connection and subscription of a replica.
 */
export class Followers {
  private readonly open = new Map<string, number>();

  constructor(readonly maxPerUser: number) {}

  /** Takes a place for the user, answering how to give it back; throws 429 `too_many_streams` when none is left. */
  enter(userId: string): () => void {
    const now = this.open.get(userId) ?? 0;
    if (now >= this.maxPerUser) {
      throw new AppError(
        'too_many_streams',
        `at most ${this.maxPerUser} event streams and long-polls open at once per user; close one or retry later`,
      );
    }
    this.open.set(userId, now + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const rest = (this.open.get(userId) ?? 1) - 1;
      if (rest > 0) this.open.set(userId, rest);
      else this.open.delete(userId);
    };
  }
}
