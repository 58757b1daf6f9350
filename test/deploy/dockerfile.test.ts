// The image cannot be built here (no Docker engine), so its Dockerfile is checked against the
// repository instead: what it copies exists and is not ignored, what it runs is what the build
// produces, and it runs as a fixed non-root user under tini with the pinned pnpm.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readRepoFile, repoRoot, serviceNames } from './support/repo.js';

interface Instruction {
  keyword: string;
  args: string;
  /** Index of the stage (FROM) it belongs to; -1 before the first FROM. */
  stage: number;
}

interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Instructions with their continuation lines joined and comments dropped. */
function parseDockerfile(text: string): { instructions: Instruction[]; stages: Stage[] } {
  const instructions: Instruction[] = [];
  const stages: Stage[] = [];
  const globalArgs = new Map<string, string>();
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!pending && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' ';
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    if (!full) continue;
    const [keyword = '', ...rest] = full.split(/\s+/);
    const args = rest.join(' ');
    const upper = keyword.toUpperCase();
    if (upper === 'ARG' && stages.length === 0) {
      const [name = '', value = ''] = args.split('=');
      globalArgs.set(name, value);
    }
    if (upper === 'FROM') {
      const [image = '', as, name] = args.split(/\s+/);
      const resolved = image.replace(/\$\{(\w+)\}/g, (_, arg: string) => globalArgs.get(arg) ?? '');
      stages.push({ image: resolved, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    }
    const instruction = { keyword: upper, args, stage: stages.length - 1 };
    instructions.push(instruction);
    stages.at(-1)?.instructions.push(instruction);
  }
  return { instructions, stages };
}

/** Options (`--from=…`, `--chown=…`) and paths of a COPY; the last path is the destination. */
function copyParts(args: string): { options: Map<string, string>; sources: string[]; dest: string } {
  const words = args.split(/\s+/);
  const options = new Map<string, string>();
  while (words[0]?.startsWith('--')) {
    const [name = '', value = ''] = words.shift()!.slice(2).split('=');
    options.set(name, value);
  }
  const dest = words.pop() ?? '';
  return { options, sources: words, dest };
}

function jsonArgs(instruction: Instruction | undefined): unknown {
  expect(instruction, 'instruction present').toBeDefined();
  return JSON.parse(instruction!.args);
}

/** Whether a .dockerignore pattern list leaves `path` out of the build context (the forms used here). */
function ignored(path: string, patterns: string[]): boolean {
  let result = false;
  for (const pattern of patterns) {
    const negated = pattern.startsWith('!');
    const body = negated ? pattern.slice(1) : pattern;
    const regex = new RegExp(
      '^' +
        body
          .split('**/')
          .map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*'))
          .join('(?:.*/)?') +
        '(?:/.*)?$',
    );
    if (regex.test(path)) result = !negated;
  }
  return result;
}

const dockerfile = parseDockerfile(readRepoFile('Dockerfile'));
const dockerignore = readRepoFile('.dockerignore')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line && !line.startsWith('#'));
const runtime = dockerfile.stages.at(-1)!;
const packageJson = JSON.parse(readRepoFile('package.json')) as { packageManager: string };

describe('Dockerfile', () => {
  it('builds and runs in two stages on the Node of .node-version, the one the tests run on', () => {
    const pinned = readRepoFile('.node-version').trim();
    expect(pinned.split('.')[0]).toBe(process.versions.node.split('.')[0]);
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of dockerfile.stages) expect(stage.image).toBe(`node:${pinned}-bookworm-slim`);
  });

  it("installs the pnpm of package.json's packageManager", () => {
    const pinned = packageJson.packageManager.replace(/^pnpm@/, '').replace(/\+.*$/, '');
    const arg = dockerfile.instructions.find((i) => i.keyword === 'ARG' && i.args.startsWith('PNPM_VERSION='));
    expect(arg?.args).toBe(`PNPM_VERSION=${pinned}`);
    const install = dockerfile.instructions.find((i) => i.keyword === 'RUN' && /install .*pnpm@/.test(i.args));
    expect(install?.args).toContain('pnpm@${PNPM_VERSION}');
    expect(install?.stage).toBe(arg?.stage);
  });

  it('installs from the lockfile only, and ships production dependencies only', () => {
    const runs = dockerfile.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    const installs = runs.filter((args) => /pnpm install/.test(args));
    expect(installs.length).toBeGreaterThan(0);
    for (const args of installs) expect(args).toContain('--frozen-lockfile');
    expect(installs.some((args) => /--prod\b/.test(args))).toBe(true);
  });

  it('copies only paths that exist and that .dockerignore lets into the context', () => {
    const copies = dockerfile.instructions.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD');
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) {
      const { options, sources } = copyParts(copy.args);
      const from = options.get('from');
      if (from !== undefined) {
        // From an earlier stage of this file, never from an image pulled by name.
        const stageNames = dockerfile.stages.slice(0, copy.stage).map((s) => s.name);
        expect(stageNames, `COPY --from=${from}`).toContain(from);
        continue;
      }
      for (const source of sources) {
        expect(source, 'no globs: every copied path is checked').not.toMatch(/[*?[]/);
        expect(existsSync(join(repoRoot, source)), `${source} exists`).toBe(true);
        if (source !== '.') expect(ignored(source, dockerignore), `${source} is ignored`).toBe(false);
      }
    }
  });

  it('keeps dependencies, outputs, local data and VCS metadata out of the build context', () => {
    for (const path of [
      'node_modules',
      'services/gateway/node_modules',
      'services/gateway/dist',
      'libs/platform/dist/index.js',
      '.data',
      '.git',
      'coverage',
      'libs/platform/coverage',
      '.test-results',
      '.env',
    ]) {
      expect(ignored(path, dockerignore), path).toBe(true);
    }
    for (const path of ['package.json', 'pnpm-lock.yaml', 'services/runner/src/main.ts', '.env.example']) {
      expect(ignored(path, dockerignore), path).toBe(false);
    }
  });

  it('builds every service and the workspace libraries they depend on', () => {
    const runs = dockerfile.stages[0]!.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    // The selector picks every folder under services/ plus its production workspace dependencies,
    // so a new service is built without touching the Dockerfile.
    expect(runs.some((args) => args.includes('pnpm --filter-prod "{./services/*}..." run build'))).toBe(true);
    expect(
      runs.some((args) =>
        /--filter-prod "\{\.\/services\/\*\}\.\.\." exec .*cp -a package\.json dist node_modules/.test(args),
      ),
    ).toBe(true);
  });

  it('runs every service entry that `pnpm -r build` produces', () => {
    const services = serviceNames();
    expect(services).toEqual(expect.arrayContaining(['gateway', 'threads', 'runs', 'repohost', 'review', 'runner']));
    for (const name of services) {
      const pkg = JSON.parse(readRepoFile(`services/${name}/package.json`)) as { scripts?: Record<string, string> };
      expect(pkg.scripts?.build, `${name} build script`).toBe('tsc -p tsconfig.build.json');
      const tsconfig = JSON.parse(readRepoFile(`services/${name}/tsconfig.build.json`)) as {
        compilerOptions: { rootDir?: string; outDir?: string };
      };
      // src/main.ts compiles to dist/main.js, the script the chart and compose file name.
      expect(tsconfig.compilerOptions.rootDir, name).toBe('src');
      expect(tsconfig.compilerOptions.outDir, name).toBe('dist');
    }
    const cmd = jsonArgs(runtime.instructions.find((i) => i.keyword === 'CMD'));
    expect(cmd).toEqual(['services/gateway/dist/main.js']);
  });

  it('ships the Codex CLI through the runner’s production dependencies', () => {
    const runner = JSON.parse(readRepoFile('services/runner/package.json')) as {
      dependencies?: Record<string, string>;
    };
    expect(runner.dependencies?.['@openai/codex']).toBeDefined();
  });

  it('runs as a fixed non-root user under tini, with git for the runner', () => {
    const users = runtime.instructions.filter((i) => i.keyword === 'USER');
    expect(users.length).toBeGreaterThan(0);
    const user = users.at(-1)!.args;
    expect(user).toMatch(/^\d+(:\d+)?$/);
    expect(Number(user.split(':')[0])).toBe(10001);
    expect(Number(user.split(':')[1] ?? 10001)).not.toBe(0);

    const apt = runtime.instructions.find((i) => i.keyword === 'RUN' && i.args.includes('apt-get install'));
    expect(apt?.args).toMatch(/\btini\b/);
    expect(apt?.args).toMatch(/\bgit\b/);
    expect(apt?.args).toContain('rm -rf /var/lib/apt/lists/*');

    expect(jsonArgs(runtime.instructions.find((i) => i.keyword === 'ENTRYPOINT'))).toEqual(['tini', '--', 'node']);
    expect(runtime.instructions.find((i) => i.keyword === 'WORKDIR')?.args).toBe('/app');
  });

  it('gives the runtime stage the compiled tree only, owned by root', () => {
    const copies = runtime.instructions.filter((i) => i.keyword === 'COPY').map((i) => copyParts(i.args));
    expect(copies).toHaveLength(1);
    expect(copies[0]!.options.get('from')).toBe(dockerfile.stages[0]!.name);
    expect(copies[0]!.options.has('chown')).toBe(false);
  });
});
