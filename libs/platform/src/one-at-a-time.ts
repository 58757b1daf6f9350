// Tasks run one after the other per key (a mirror, a sandbox's state file, a review snapshot), in
// the order they come; different keys do not wait for each other. A key with nothing queued costs
// nothing.

export class OneAtATime {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `task` once every task queued before it under `key` has settled; a failed one does not stop the next. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Whether a task under `key` is running or waiting. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  /** Resolves once no task is running or waiting under any key. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all(this.tails.values());
  }
}
