import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { link, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';

// Runners sharing a disk share its sandboxes, and the run attempt that holds a thread's run is the
// only one that may change the thread's sandbox. The runs service decides who holds the run; this
// file makes its decision felt on the disk, for a runner that lost the run while it was held up
// (frozen, starved, cut off) in the middle of preparing the sandbox or starting its harness.
//
// Each attempt that takes a sandbox leaves a file of its own in `<sandbox>/takes/` (created, never
// overwritten), then asks the runs service whether it still holds the run, then removes the files
// of the other takes, which are older: its run's lower attempts and other runs' (a thread has one
// live run). A later attempt of its own run found there means the answer was stale when it came. From then on, before each change to the sandbox, it checks that its own file is still
// there; a newer take has removed it otherwise, and the change is not made. What remains is the
// moment between that check and the one system call after it.

const TAKES = 'takes';

/** A run attempt about to work a sandbox, as the runs service gave it. */
export interface SandboxClaim {
  run_id: string;
  attempt: number;
  runner_id: string;
  /** The claim's secret: the runner's proof, to repohost, that it holds the run. */
  claim_id: string;
  /** Whether this attempt still holds its run (the run live, at this attempt), asked of the runs service. */
  holds(): Promise<boolean>;
}

/** A newer attempt (of this run or of a later one) has taken the sandbox: this one must not change it. */
export class SandboxTakenError extends Error {
  override name = 'SandboxTakenError';
}

interface TakeRecord {
  run_id: string;
  attempt: number;
  runner_id: string;
  at: string;
}

export class SandboxTake {
  /** The takes this one found and removed, by name: the last attempt's before it (more after a crash). */
  readonly replaced = new Set<string>();

  private constructor(
    private readonly file: string,
    readonly claim: SandboxClaim,
  ) {}

  /** This take's name among the sandbox's takes. */
  get name(): string {
    return basename(this.file);
  }

  /** Takes the sandbox at `dir` for the claim, or throws SandboxTakenError when the claim no longer holds its run. */
  static async take(dir: string, claim: SandboxClaim): Promise<SandboxTake> {
    const takes = join(dir, TAKES);
    await mkdir(takes, { recursive: true });
    const name = `${claim.attempt}-${randomBytes(8).toString('hex')}.json`;
    const record: TakeRecord = {
      run_id: claim.run_id,
      attempt: claim.attempt,
      runner_id: claim.runner_id,
      at: new Date().toISOString(),
    };
    const take = new SandboxTake(join(takes, name), claim);
    // Written aside and linked in, so a take's file is never seen half-written.
    const aside = join(takes, `.${name}`);
    await writeFile(aside, `${JSON.stringify(record)}\n`, { flag: 'wx' });
    try {
      await link(aside, take.file);
    } finally {
      await rm(aside, { force: true });
    }
    if (!(await claim.holds())) {
      await rm(take.file, { force: true });
      throw take.takenError();
    }
    for (const other of await readdir(takes)) {
      if (other === name || other.startsWith('.')) continue;
      const record = await readRecord(join(takes, other));
      if (record && record.run_id === claim.run_id && record.attempt > claim.attempt) {
        // Its claim came after the runs service answered ours.
        await rm(take.file, { force: true });
        throw take.takenError();
      }
      take.check();
      await rm(join(takes, other), { force: true });
      take.replaced.add(other);
    }
    return take;
  }

  /** Throws SandboxTakenError when a newer take holds the sandbox. */
  check(): void {
    if (!this.current) throw this.takenError();
  }

  get current(): boolean {
    return existsSync(this.file);
  }

  private takenError(): SandboxTakenError {
    return new SandboxTakenError(
      `attempt ${this.claim.attempt} of run ${this.claim.run_id} no longer holds the sandbox: a newer attempt took it`,
    );
  }
}

async function readRecord(file: string): Promise<TakeRecord | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as TakeRecord;
  } catch {
    return null;
  }
}
