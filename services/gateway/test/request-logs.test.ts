import { Writable } from 'node:stream';
import { createLogger } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

// The gateway logs every request it answers. The GitHub install flow's callback carries the
// flow's single-use `state` and, with OAuth, GitHub's `code` in its query: neither may reach a log.

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

describe('request logs', () => {
  it('keep the path and harmless parameters, and redact the install flow’s state and OAuth code', async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const app = await h.gateway({ logger: createLogger({ service: 'gateway', level: 'info', destination }) });
    await app.inject({
      method: 'GET',
      url: '/v1/repohost/setup?installation_id=42&setup_action=install&state=st_S3CRET&code=OAUTH_C0DE',
    });
    const logged = lines.join('');
    expect(logged).toContain('/v1/repohost/setup?installation_id=42&setup_action=install&state=[redacted]');
    expect(logged).not.toContain('st_S3CRET');
    expect(logged).not.toContain('OAUTH_C0DE');
  });
});
