import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { probeJail, type JailLayout } from '../../src/sandbox/jail.js';

/**
 * A jail layout in a fresh directory under /var/tmp named after `name`: a workspace the jail may
 * write, objects it may only read, and a run directory.
 */
export function jailFixture(name: string) {
  const dir = mkdtempSync(`/var/tmp/threadwork-${name}-`);
  const layout: JailLayout = {
    cwd: join(dir, 'workspace'),
    writable: [join(dir, 'workspace')],
    readable: [join(dir, 'objects')],
    runDir: join(dir, 'run'),
    tmpBytes: 8 * 2 ** 20,
  };
  return {
    dir,
    layout,
    /** Makes the layout's directories; answers whether this machine can jail a process at all. */
    async prepare(): Promise<boolean> {
      for (const d of [layout.cwd, ...layout.readable, layout.runDir]) mkdirSync(d, { recursive: true });
      return (await probeJail()).ok;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
