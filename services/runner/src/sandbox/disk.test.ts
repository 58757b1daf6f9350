import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { descendants } from '../harness/processes.js';
import { DiskMeasureError, measureDisk } from './disk.js';

// What a sandbox's processes hold of its disk after unlinking it: a file kept open, and one only
// mapped (its descriptor closed), both counted by measureDisk and by no walk of the tree.

const MIB = 2 ** 20;

/** Holds `open.bin` unlinked by a descriptor and `mapped.bin` unlinked by a mapping alone, 8 MiB each. */
const HOLDER = `
import mmap, os, sys, time
d = sys.argv[1]
f = open(os.path.join(d, 'open.bin'), 'wb')
os.unlink(f.name)
f.write(b'\\1' * ${8 * MIB})
f.flush()
g = open(os.path.join(d, 'mapped.bin'), 'wb+')
g.write(b'\\2' * ${8 * MIB})
g.flush()
m = mmap.mmap(g.fileno(), 4096)
os.unlink(g.name)
g.close()
# Python's mmap keeps a descriptor of its own: closed too, the mapping alone holds the file.
for fd in os.listdir('/proc/self/fd'):
    try:
        if os.readlink('/proc/self/fd/' + fd).endswith('mapped.bin (deleted)'):
            os.close(int(fd))
    except OSError:
        pass
print('ready', flush=True)
time.sleep(1000)
`;

const stateOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
};

describe('measureDisk', () => {
  let dir: string;
  let jail: ChildProcess;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-disk-'));
    // A shell standing for the jail's root, the holder below it (`; :` keeps the shell from exec'ing it).
    jail = spawn('sh', ['-c', 'python3 -c "$0" "$1"; :', HOLDER, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      jail.stdout!.on('data', (data: Buffer) => {
        if (data.toString().includes('ready')) resolve();
      });
      jail.once('exit', () => reject(new Error('the holder exited')));
    });
  });
  afterAll(() => {
    for (const pid of descendants(jail.pid!)) process.kill(pid, 'SIGKILL');
    jail.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts the files a jail holds open or mapped after unlinking them, once each', async () => {
    const tree = await measureDisk(dir);
    expect(tree.bytes).toBeLessThan(MIB);
    const held = await measureDisk(dir, jail.pid!);
    expect(held.bytes).toBeGreaterThanOrEqual(tree.bytes + 16 * MIB);
    expect(held.inodes).toBe(tree.inodes + 2);
  });

  it('lets the jail go on after measuring it', async () => {
    await measureDisk(dir, jail.pid!);
    for (const pid of descendants(jail.pid!)) expect(stateOf(pid)).not.toMatch(/[Tt]/);
  });

  it('fails on a tree it cannot walk, never answering less', async () => {
    await expect(measureDisk(join(dir, 'gone'))).rejects.toBeInstanceOf(DiskMeasureError);
  });
});
