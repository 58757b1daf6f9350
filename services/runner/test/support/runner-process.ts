import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Env } from '../helpers.js';

const LAUNCHER = join(import.meta.dirname, 'runner-process.mjs');

/** The runner in a process of its own; resolves once it has started. */
export function startRunnerProcess(env: Env): Promise<ChildProcess> {
  const defined = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
  const child = spawn(process.execPath, [LAUNCHER], {
    env: { ...defined, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runner process did not start:\n${output}`)), 30_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      output += `${line}\n`;
      if (line.includes('"msg":"started"')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`runner process exited (${code}):\n${output}`));
    });
  });
}
