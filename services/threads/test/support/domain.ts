import { randomBytes } from 'node:crypto';
import { DOMAIN_STREAM, domainEvents, type RunStatusEvent } from '@threadwork/contracts';
import { publishEvent, type JetStreamClient } from '@threadwork/platform';

/** Publishes a run status event on DOMAIN, as the runs service does; its stream sequence. */
export async function publishRunStatus(
  js: JetStreamClient,
  event: RunStatusEvent,
  msgId = `${event.run_id}:${event.status}:${randomBytes(4).toString('hex')}`,
): Promise<number> {
  const ack = await publishEvent(js, domainEvents.runStatus, event, { msgId });
  if (ack.stream !== DOMAIN_STREAM.name) throw new Error(`published to ${ack.stream}`);
  return ack.seq;
}
