import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  return { lines, destination };
}

describe('logger', () => {
  it('writes JSON lines with the service name and a textual level', () => {
    const { lines, destination } = capture();
    createLogger({ service: 'runs', destination }).info({ run_id: 'r1' }, 'hello');
    expect(lines[0]).toMatchObject({ service: 'runs', level: 'info', msg: 'hello', run_id: 'r1' });
  });

  it('never writes secrets found at known paths', () => {
    const { lines, destination } = capture();
    const logger = createLogger({ service: 'repohost', destination });
    logger.info(
      {
        token: 'ghs_installationtoken',
        headers: { authorization: 'Bearer twk_abc' },
        app: { privateKey: 'PEM', apiKey: 'sk-model' },
      },
      'tokens',
    );
    const text = JSON.stringify(lines[0]);
    for (const secret of ['ghs_installationtoken', 'twk_abc', 'PEM', 'sk-model']) expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({ token: '[redacted]' });
  });

  it('never writes the credentials a URL carries in its query', () => {
    const { lines, destination } = capture();
    createLogger({ service: 'gateway', destination }).info(
      {
        req: {
          method: 'GET',
          url: '/v1/repohost/setup?installation_id=42&setup_action=install&state=st_S3CRET&code=C0DE&Code=C1&%73tate=S2',
          ip: '10.0.0.1',
        },
      },
      'incoming request',
    );
    const text = JSON.stringify(lines[0]);
    for (const secret of ['st_S3CRET', 'C0DE', 'C1', 'S2']) expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({
      req: {
        method: 'GET',
        url: '/v1/repohost/setup?installation_id=42&setup_action=install&state=[redacted]&code=[redacted]&Code=[redacted]&%73tate=[redacted]',
        remoteAddress: '10.0.0.1',
      },
    });
  });
});
