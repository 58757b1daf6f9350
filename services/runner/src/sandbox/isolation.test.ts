import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { afterAll, describe, expect, it } from 'vitest';
import {
  decideClaudePtraceGuard,
  decidePtraceGuards,
  layersFor,
  yamaPtraceScope,
  type Isolation,
} from './isolation.js';

// What keeps the agent's commands out of the harness's memory inside the jail, where they share
// its uid: decided at start-up from Codex's sandbox and the host's Yama, refused where neither holds.

const logger = createLogger({ service: 'isolation-test', level: 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'threadwork-isolation-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the harness’s memory', () => {
  it('is guarded by Codex’s sandbox around each command, or by Yama, and says which', () => {
    const required = { jail: 'required', codexSandbox: 'auto' } as const;
    expect(decidePtraceGuards(required, 'workspace-write', null, logger)).toEqual(['codex-sandbox']);
    expect(decidePtraceGuards(required, 'danger-full-access', 1, logger)).toEqual(['yama-ptrace-scope-1']);
    expect(decidePtraceGuards(required, 'workspace-write', 2, logger)).toEqual([
      'codex-sandbox',
      'yama-ptrace-scope-2',
    ]);
  });

  it('open to the agent’s commands (no Codex sandbox, no Yama): SANDBOX_JAIL=required refuses to start, auto says so', () => {
    for (const yama of [null, 0]) {
      for (const codexSandbox of ['auto', 'danger-full-access'] as const) {
        expect(() =>
          decidePtraceGuards({ jail: 'required', codexSandbox }, 'danger-full-access', yama, logger),
        ).toThrow(/SANDBOX_JAIL=required, but .*\/proc\/<pid>\/mem.*kernel\.yama\.ptrace_scope/);
      }
    }
    const warned: string[] = [];
    const auto = decidePtraceGuards({ jail: 'auto', codexSandbox: 'auto' }, 'danger-full-access', null, {
      ...logger,
      warn: (message: string) => warned.push(message),
    } as unknown as typeof logger);
    expect(auto).toEqual([]);
    expect(warned).toEqual([expect.stringContaining('HARNESS MEMORY OPEN TO THE AGENT')]);
  });

  it('for Claude Code, which has no sandbox of its own, only Yama: required refuses to serve it without', () => {
    expect(() => decideClaudePtraceGuard('required', 1, logger)).not.toThrow();
    for (const yama of [null, 0]) {
      expect(() => decideClaudePtraceGuard('required', yama, logger)).toThrow(/SANDBOX_JAIL=required, but Claude Code/);
    }
    const warned: string[] = [];
    decideClaudePtraceGuard('auto', null, {
      ...logger,
      warn: (m: string) => warned.push(m),
    } as unknown as typeof logger);
    expect(warned).toEqual([expect.stringContaining('HARNESS MEMORY OPEN TO THE AGENT (claude-code)')]);
  });

  it('says per harness which layers its runs have: Codex’s sandbox and its guard are Codex’s alone', () => {
    const base = ['bubblewrap-jail', 'seccomp-no-ptrace-no-io-uring'];
    const isolation = (layers: string[]) => ({ layers }) as Isolation;
    const withCodex = isolation([
      ...base,
      'harness-memory-guard-codex-sandbox',
      'model-key-outside',
      'codex-workspace-write',
    ]);
    expect(layersFor(withCodex, 'codex')).toEqual(withCodex.layers);
    expect(layersFor(withCodex, 'claude-code')).toEqual([...base, 'harness-memory-UNGUARDED', 'model-key-outside']);
    const withYama = isolation([
      ...base,
      'harness-memory-guard-codex-sandbox',
      'harness-memory-guard-yama-ptrace-scope-1',
      'codex-workspace-write',
    ]);
    expect(layersFor(withYama, 'claude-code')).toEqual([...base, 'harness-memory-guard-yama-ptrace-scope-1']);
  });

  it('reads the host’s Yama setting, none where the kernel has no Yama', () => {
    writeFileSync(join(dir, 'ptrace_scope'), '1\n');
    expect(yamaPtraceScope(join(dir, 'ptrace_scope'))).toBe(1);
    expect(yamaPtraceScope(join(dir, 'absent'))).toBeNull();
  });
});
