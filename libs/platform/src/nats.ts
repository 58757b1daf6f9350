import { createHash } from 'node:crypto';
import { headers as natsHeaders, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import type { Logger } from './logger.js';
import type { NatsAuth } from './nats-auth.js';

export type { NatsConnection, MsgHdrs } from '@nats-io/nats-core';
/** Builds NATS message headers, for callers that publish with headers of their own. */
export { natsHeaders };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const encodeJson = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));
export const decodeJson = (data: Uint8Array): unknown => JSON.parse(decoder.decode(data));
/** SHA-256 (hex) of a DOMAIN event's bytes: what its publisher attests and its readers check. */
export const domainEventDigest = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');
/** A runner's DOMAIN event about one repository of its run (a candidate, or its failure). */
interface RepositoryEventOfRun {
  run_id: string;
  thread_id: string;
  owner_id: string;
  project_repository_id: string;
  repository_id: number;
}

/**
 * What a service asks the runs service (`runs.attestation`) before acting on such an event: did
 * the run's holder publish these bytes, and is the run that thread's and owner's, with that repository?
 */
export function repositoryEventAttestation(subject: string, data: Uint8Array, event: RepositoryEventOfRun) {
  return {
    run_id: event.run_id,
    thread_id: event.thread_id,
    owner_id: event.owner_id,
    repository: { project_repository_id: event.project_repository_id, repository_id: event.repository_id },
    subject,
    digest: domainEventDigest(data),
  };
}

export interface NatsOptions {
  servers: string;
  name: string;
  logger: Logger;
  /** For a short-lived client (a CLI): fail after this long instead of waiting for the server for good. */
  giveUpAfterMs?: number;
  /** Credentials, TLS and reply prefix of the process's NATS identity (nats-auth.ts). */
  auth?: NatsAuth;
}

/**
 * Connects with unlimited reconnects: a NATS restart is an outage to ride out, not a reason to
 * exit (unless `giveUpAfterMs` says otherwise). Status changes are logged so an operator sees the gap.
 */
export async function connectNats({
  servers,
  name,
  logger,
  giveUpAfterMs,
  auth,
}: NatsOptions): Promise<NatsConnection> {
  const nc = await connect({
    servers: servers.split(',').map((s) => s.trim()),
    name,
    // Every request would otherwise make an Error up front to carry its caller's stack into a
    // later timeout: a stack capture per request, some 7% of the gateway's CPU per run read.
    // Our callers turn a timeout into their own AppError ("… did not answer") anyway.
    noAsyncTraces: true,
    ...(auth?.authenticator ? { authenticator: auth.authenticator } : {}),
    ...(auth?.inboxPrefix ? { inboxPrefix: auth.inboxPrefix } : {}),
    ...(auth?.tls ? { tls: auth.tls } : {}),
    ...(giveUpAfterMs === undefined
      ? { maxReconnectAttempts: -1, reconnectTimeWait: 250, waitOnFirstConnect: true }
      : { maxReconnectAttempts: 0, waitOnFirstConnect: false, timeout: giveUpAfterMs }),
  });
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect' || status.type === 'error') {
        logger.warn(
          { nats: status.type, server: 'server' in status ? status.server : undefined },
          `nats ${status.type}`,
        );
      }
    }
  })();
  return nc;
}

/**
 * Whether the server answers a round trip now, for readiness probes: false at once while the
 * connection is down (reconnecting or closed), and false when no answer comes within `timeoutMs`
 * (a server that is connected but frozen). A flush alone would wait for the reconnect instead.
 */
export async function natsAnswers(nc: NatsConnection, timeoutMs: number): Promise<boolean> {
  if (nc.isClosed()) return false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([nc.rtt().then(() => true), deadline]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
