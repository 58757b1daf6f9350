import { readdirSync, readFileSync } from 'node:fs';

/** Processes on this machine whose command line contains `text`. */
export function processesMatching(text: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text);
      } catch {
        return false;
      }
    })
    .map(Number);
}
