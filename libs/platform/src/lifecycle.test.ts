import { afterEach, describe, expect, it } from 'vitest';
import { startHealthServer, type HealthServer } from './lifecycle.js';

describe('health server', () => {
  let server: HealthServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${server!.port}/readyz`);
    return { status: res.status, body: (await res.json()) as unknown };
  };

  it('answers ready, not ready, and not ready when the check throws', async () => {
    let answer: boolean | Error = true;
    server = await startHealthServer(0, async () => {
      if (answer instanceof Error) throw answer;
      return answer;
    });
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
    answer = false;
    expect(await readyz()).toEqual({ status: 503, body: { status: 'not_ready' } });
    answer = new Error('database down');
    expect(await readyz()).toEqual({ status: 503, body: { status: 'not_ready' } });
  });

  it('answers not ready when the check does not finish in time, instead of hanging', async () => {
    server = await startHealthServer(0, () => new Promise<boolean>(() => undefined), 200);
    expect(await readyz()).toEqual({ status: 503, body: { status: 'not_ready' } });
  });
});
