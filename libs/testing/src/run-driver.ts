import { rpc, type EventDef, type EventInput, type Question, type RunStatus } from '@threadwork/contracts';
import {
  domainEventDigest,
  encodeJson,
  publishEvent,
  request,
  retry,
  type JetStreamClient,
  type NatsConnection,
} from '@threadwork/platform';
import { newClaimId } from './env.js';

/**
 * Stands in for the runner in end-to-end tests of the API: it moves runs through the runs
 * service's internal API, the same endpoints the real runner uses (claim, transition, append,
 * interactions), so everything behind it is the real thing.
 */
export class RunDriver {
  private keys = 0;

  constructor(
    private readonly nc: NatsConnection,
    readonly runId: string,
    public attempt = 0,
    /** The claim's secret, which only the runner holding the run knows. */
    readonly claimId = newClaimId(),
  ) {}

  static async claim(nc: NatsConnection, runId: string, runnerId = 'test-driver'): Promise<RunDriver> {
    const claimId = newClaimId();
    const claimed = await request(nc, rpc.runs.claim, { run_id: runId, runner_id: runnerId, claim_id: claimId });
    return new RunDriver(nc, runId, claimed.attempt, claimId);
  }

  to(
    status: RunStatus,
    extra: {
      error?: { code: string; message: string };
      usage?: { inputTokens?: number; outputTokens?: number; totalTokens?: number };
    } = {},
  ) {
    return request(this.nc, rpc.runs.transition, {
      run_id: this.runId,
      attempt: this.attempt,
      claim_id: this.claimId,
      to: status,
      ...extra,
    });
  }

  /** Appends chunks (each with a fresh key) and returns their sequences. */
  async append(...chunks: Record<string, unknown>[]): Promise<number[]> {
    const events = chunks.map((chunk) => ({ key: `e${this.attempt}-${++this.keys}`, chunk }));
    // As the runner does: an append that got no answer (a busy machine) is sent again with the
    // same keys, which the log stores once; a generous bound only as a hang guard.
    const { sequences } = await retry(
      () =>
        request(this.nc, rpc.runs.append, {
          run_id: this.runId,
          attempt: this.attempt,
          claim_id: this.claimId,
          events,
        }),
      { untilMs: 120_000, minDelayMs: 200, maxDelayMs: 2_000 },
    );
    return sequences;
  }

  say(text: string) {
    return this.append(
      { type: 'message.delta', item_id: 'm1', delta: text },
      { type: 'message.completed', item_id: 'm1', text },
    );
  }

  ask(questions: Question[], kind: 'question' | 'plan_approval' = 'question') {
    return request(this.nc, rpc.runs.interactionCreate, {
      run_id: this.runId,
      attempt: this.attempt,
      claim_id: this.claimId,
      key: `q${++this.keys}`,
      kind,
      questions,
    });
  }

  settlement(interactionId: string) {
    return request(this.nc, rpc.runs.interactionSettlement, {
      run_id: this.runId,
      claim_id: this.claimId,
      interaction_id: interactionId,
    });
  }

  /** Attests a DOMAIN event about the run under its claim, as the runner does before publishing it. */
  async attest<E extends EventDef>(def: E, event: EventInput<E>): Promise<void> {
    await request(this.nc, rpc.runs.attest, {
      run_id: this.runId,
      attempt: this.attempt,
      claim_id: this.claimId,
      subject: def.subject,
      digest: domainEventDigest(encodeJson(event)),
    });
  }

  /** Publishes a DOMAIN event about the run as the runner does: attested under its claim first. */
  async publish<E extends EventDef>(js: JetStreamClient, def: E, event: EventInput<E>, msgId: string): Promise<void> {
    await this.attest(def, event);
    await publishEvent(js, def, event, { msgId });
  }

  /** claim → starting → running, as a runner does when it picks the job up. */
  async start(): Promise<this> {
    await this.to('starting');
    await this.to('running');
    return this;
  }
}

export const question = (id: string, options: string[], isSecret = false): Question => ({
  id,
  header: id,
  question: `Which ${id}?`,
  isOther: false,
  isSecret,
  options: options.map((label) => ({ label, description: label })),
});
