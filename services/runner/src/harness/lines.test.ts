import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { boundedLines } from './lines.js';

// A harness's stdout can be written to by the agent's commands: a line too long to hold is cut off,
// with everything after it, and said once; lines of any length below the bound pass whole.

async function readAll(input: PassThrough | NodeJS.ReadableStream, max: number) {
  let overflows = 0;
  const lines: string[] = [];
  const reader = createInterface({ input: boundedLines(input as PassThrough, () => overflows++, max) });
  reader.on('line', (line) => lines.push(line));
  await new Promise((resolve) => reader.once('close', resolve));
  return { lines, overflows };
}

describe('a harness’s lines', () => {
  it('pass whole below the bound, however they are cut into chunks', async () => {
    const input = new PassThrough();
    const read = readAll(input, 10);
    for (const piece of ['0123', '456789\nab', 'c\n\n012345678', '9\nx']) input.write(piece);
    input.end();
    expect(await read).toEqual({ lines: ['0123456789', 'abc', '', '0123456789', 'x'], overflows: 0 });
  });

  it('end at a line past the bound, said once, nothing after it read', async () => {
    const input = new PassThrough();
    const read = readAll(input, 10);
    input.write('short\n0123456');
    input.write('789A and more');
    input.write('\nafter\n');
    input.end('even more\n');
    expect(await read).toEqual({ lines: ['short'], overflows: 1 });
  });

  it('cut off a process that floods its stdout with one endless line, long before a string’s limit', async () => {
    const child = spawn('sh', ['-c', 'echo first; tr "\\0" A < /dev/zero'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const read = readAll(child.stdout, 8 * 1024 * 1024);
    const { lines, overflows } = await read;
    child.kill('SIGKILL');
    expect(lines).toEqual(['first']);
    expect(overflows).toBe(1);
  });
});
