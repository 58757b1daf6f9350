import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verifyWebhookSignature } from './webhook-signature.js';

describe('verifyWebhookSignature', () => {
  const body = Buffer.from('{"zen":"Keep it logically awesome."}');
  const good = `sha256=${createHmac('sha256', 's3cret').update(body).digest('hex')}`;

  it('accepts the HMAC of the raw body', () => {
    expect(verifyWebhookSignature('s3cret', body, good)).toBe(true);
    expect(verifyWebhookSignature('s3cret', body, good.toUpperCase().replace('SHA256=', 'sha256='))).toBe(true);
  });

  it('refuses a missing, malformed, wrong or other-body signature', () => {
    expect(verifyWebhookSignature('s3cret', body, undefined)).toBe(false);
    expect(verifyWebhookSignature('s3cret', body, '')).toBe(false);
    expect(verifyWebhookSignature('s3cret', body, 'sha1=abc')).toBe(false);
    expect(verifyWebhookSignature('s3cret', body, good.slice(0, -2))).toBe(false);
    expect(verifyWebhookSignature('other', body, good)).toBe(false);
    expect(verifyWebhookSignature('s3cret', Buffer.from(`${body.toString()} `), good)).toBe(false);
  });
});
