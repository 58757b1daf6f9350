import type { RpcEndpoint } from '@threadwork/contracts';
import { REQUEST_ID_HEADER, type NatsConnection } from '@threadwork/platform';

/** One request as it travelled to a service: its body and the request id it was sent under. */
export interface Tapped {
  body: Record<string, unknown>;
  requestId: string | undefined;
  /** The inbox its answer goes to. */
  reply: string | undefined;
}

/**
 * Sees every request the gateway sends to one endpoint, beside the service that answers it: a plain
 * subscription outside the service's queue group gets a copy of each, and changes nothing.
 */
export interface RequestTap {
  /** The requests seen so far (the test's connection flushed first, so none sent before is missing). */
  seen(): Promise<Tapped[]>;
  /** How many requests were about `value` of the body's `field`, once all sent before are in. */
  count(field: string, value: string): Promise<number>;
  /** Resolves once `calls` requests about `value` of `field` have been seen. */
  reached(field: string, value: string, calls: number): Promise<void>;
  /** Resolves once `calls` requests about `value` of `field` have been answered. */
  answered(field: string, value: string, calls: number): Promise<void>;
  close(): void;
}

export function tapRequests(nc: NatsConnection, endpoint: RpcEndpoint): RequestTap {
  const seen: Tapped[] = [];
  const answers = new Set<string>();
  const waiters: { matches: (t: Tapped) => boolean; calls: number; resolve: () => void }[] = [];
  const countOf = (matches: (t: Tapped) => boolean) => seen.filter(matches).length;
  const about = (field: string, value: string) => (t: Tapped) => t.body[field] === value;
  const wasAnswered = (t: Tapped) => t.reply !== undefined && answers.has(t.reply);
  const wake = () => {
    for (const waiter of [...waiters]) {
      if (countOf(waiter.matches) >= waiter.calls) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  };
  const wait = (matches: (t: Tapped) => boolean, calls: number) => {
    if (countOf(matches) >= calls) return Promise.resolve();
    return new Promise<void>((resolve) => waiters.push({ matches, calls, resolve }));
  };
  const sub = nc.subscribe(endpoint.subject, {
    callback: (err, msg) => {
      if (err) return;
      seen.push({
        body: msg.json<Record<string, unknown>>(),
        requestId: msg.headers?.get(REQUEST_ID_HEADER),
        reply: msg.reply,
      });
      wake();
    },
  });
  // Answers travel to the caller's inbox (the default prefix: the test's connection, which the
  // gateway under test shares). The server delivers a request's copy before its answer, which the
  // service sends once it got the request.
  const replies = nc.subscribe('_INBOX.>', {
    callback: (err, msg) => {
      if (err) return;
      answers.add(msg.subject);
      wake();
    },
  });
  // The server delivers messages to a connection in order: after a flush, every copy of a request
  // that was routed before it has arrived (a reply the test awaited was routed after its request).
  const settled = () => nc.flush();
  return {
    async seen() {
      await settled();
      return [...seen];
    },
    async count(field, value) {
      await settled();
      return countOf(about(field, value));
    },
    reached: (field, value, calls) => wait(about(field, value), calls),
    answered(field, value, calls) {
      const matches = about(field, value);
      return wait((t) => matches(t) && wasAnswered(t), calls);
    },
    close: () => {
      sub.unsubscribe();
      replies.unsubscribe();
    },
  };
}
