import { createHmac, timingSafeEqual } from 'node:crypto';

// GitHub's webhook proof, shared by the gateway (which checks it before anything is sent on NATS)
// and repohost (which checks it again before anything is recorded): HMAC-SHA256 of the raw body
// with the webhook secret, as `sha256=<hex>` in `X-Hub-Signature-256`.

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;

/** `X-Hub-Signature-256` over the raw body, compared in constant time. */
export function verifyWebhookSignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (header === undefined) return false;
  const match = SIGNATURE.exec(header.trim().toLowerCase());
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  const given = Buffer.from(match[1]!, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
