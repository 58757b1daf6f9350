import { beforeEach } from 'vitest';
import { reseedFor, replayHint } from './random.js';

// Before each fault test: its own jitter stream, and the seed in its message should it fail.
beforeEach((ctx) => {
  reseedFor(ctx.task.fullName);
  ctx.onTestFailed(({ task }) => {
    for (const error of task.result?.errors ?? []) error.message = `${error.message}\n${replayHint}`;
  });
});
