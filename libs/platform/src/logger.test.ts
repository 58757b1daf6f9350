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
});
