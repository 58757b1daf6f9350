import { randomBytes } from 'node:crypto';
import { DOMAIN_STREAM, domainEvents, subjects, type RunStatusEvent } from '@threadwork/contracts';
import { publishJson, type JetStreamClient } from '@threadwork/platform';

/** Publishes a run status event on DOMAIN, as the runs service does; its stream sequence. */
export async function publishRunStatus(
  js: JetStreamClient,
  event: RunStatusEvent,
  msgId = `${event.run_id}:${event.status}:${randomBytes(4).toString('hex')}`,
): Promise<number> {
  const { service, entity, verb } = domainEvents.runStatus;
  const ack = await publishJson(js, subjects.domain(service, entity, verb), event, { msgId });
  if (ack.stream !== DOMAIN_STREAM.name) throw new Error(`published to ${ack.stream}`);
  return ack.seq;
}
