import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ensureTool, TOOLS, toolPath, toolsDir } from '../../../deploy/local/tools.mjs';

describe('pinned tools', () => {
  it('keeps them in a cache outside the repository, named by version', () => {
    expect(toolsDir().startsWith(process.cwd())).toBe(false);
    expect(toolPath('nats-server')).toContain(`nats-server-${TOOLS['nats-server']!.version}`);
    expect(toolPath('ferretdb')).toContain(`ferretdb-${TOOLS.ferretdb!.version}`);
  });

  it('builds nats-server at the pinned version', { timeout: 600_000 }, () => {
    const out = spawnSync(ensureTool('nats-server'), ['--version'], { encoding: 'utf8' });
    expect(out.stdout.trim()).toBe(`nats-server: ${TOOLS['nats-server']!.version}`);
  });

  it('builds helm at the pinned version', { timeout: 600_000 }, () => {
    const out = spawnSync(ensureTool('helm'), ['version', '--template', '{{.Version}}'], { encoding: 'utf8' });
    expect(out.stdout.trim()).toBe(TOOLS.helm!.version);
  });

  it('builds FerretDB from the launcher module pinned at the FerretDB version', async () => {
    const { readFileSync } = await import('node:fs');
    const goMod = readFileSync(new URL('../../../deploy/local/ferretdb-launcher/go.mod', import.meta.url), 'utf8');
    expect(goMod).toMatch(
      new RegExp(`github.com/FerretDB/FerretDB ${TOOLS.ferretdb!.version.replace(/\./g, '\\.')}\\b`),
    );
  });
});
