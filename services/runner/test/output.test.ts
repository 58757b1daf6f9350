import { say, shell, turnScript, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitRun, chunks, readLog, startStack, waitForTerminal, type Stack } from './helpers.js';

// A command's output in the run's log against what the real codex binary returned to the model for
// it: however codex splits it between streamed deltas and the completed item, nothing is lost.

const LINES = 400;
// Codex sends the first piece of a command's output, written before a pause, in its completed item
// only, not as a delta: the log must still carry it first.
const COMMAND = `echo "output line 1"; sleep 0.5; for i in $(seq 2 ${LINES}); do echo "output line $i"; done`;
const scripts = new Map<string, FakeScript>([['OUTPUT', turnScript([[shell(COMMAND)], [say('printed')]])]]);

/** The output of the run's command as a reader rebuilds it: pieces in order, `replace` starting over. */
function rebuiltOutput(log: Awaited<ReturnType<typeof readLog>>): string {
  return chunks(log)
    .filter((c) => c.type === 'command.output')
    .reduce((text, c) => (c.replace ? '' : text) + String(c.delta), '');
}

describe('command output', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('carries in the log every line codex returned to the model, in order, each once', async () => {
    for (let round = 0; round < 5; round++) {
      const prompt = `OUTPUT round ${round}`;
      const admitted = await admitRun(stack, prompt);
      const run = await waitForTerminal(stack, admitted.run.id);
      expect(run.status).toBe('completed');

      const returned = stack.fake.requests.filter((r) => r.lastUserText === prompt).at(-1)?.toolOutputsSinceLastUser[0];
      expect(returned, 'the model got the command output').toBeDefined();
      const expected = Array.from({ length: LINES }, (_, i) => `output line ${i + 1}`);
      // What the model saw holds every line (codex wraps it in a header of its own).
      expect(returned!.output).toContain(expected.join('\n'));

      const logged = rebuiltOutput(await readLog(stack.nc, run.id));
      expect(logged.split('\n').filter(Boolean), `round ${round}`).toEqual(expected);
    }
  });
});
