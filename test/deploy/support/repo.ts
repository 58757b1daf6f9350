// Shared by the deployment tests: where the repository is, which services it has, and which
// environment variables each of them reads.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export function readRepoFile(path: string): string {
  return readFileSync(join(repoRoot, path), 'utf8');
}

/** Every service the image can run: a folder under services/ with a src/main.ts. */
export function serviceNames(): string[] {
  return readdirSync(join(repoRoot, 'services'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(repoRoot, 'services', entry.name, 'src', 'main.ts')))
    .map((entry) => entry.name)
    .sort();
}

/** Variables of a zod config shape: its keys, written `NAME:` at the start of a line. */
function configKeys(path: string): string[] {
  return [...readRepoFile(path).matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)].map((match) => match[1]!);
}

/**
 * Variables a repohost with the GitHub App provider reads (DESIGN.md section 8), named here before
 * its config lands so the deployment files can already pass them on.
 */
const ANNOUNCED: Record<string, string[]> = {
  repohost: [
    'GITHUB_APP_ID',
    'GITHUB_APP_PRIVATE_KEY',
    'GITHUB_WEBHOOK_SECRET',
    'GITHUB_CLIENT_ID',
    'GITHUB_CLIENT_SECRET',
    'GITHUB_API_URL',
    'GITHUB_APP_SLUG',
  ],
};

/** Read outside the zod schemas: by the OpenTelemetry SDK, Node itself, or libraries using $HOME. */
const AMBIENT = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_SERVICE_NAME', 'NODE_ENV', 'HOME'];

/** Every environment variable `service` understands, so a misspelt one in a deployment file is caught. */
export function knownEnv(service: string): Set<string> {
  const config = `services/${service}/src/config.ts`;
  // The harness catalog's variables are defined once in contracts and spread into the configs that read them.
  const catalog = readRepoFile(config).includes('...harnessCatalogShape')
    ? configKeys('libs/contracts/src/harness-catalog.ts')
    : [];
  return new Set([
    ...configKeys('libs/platform/src/config.ts'),
    ...configKeys(config),
    ...catalog,
    ...(ANNOUNCED[service] ?? []),
    ...AMBIENT,
  ]);
}

/** Secret settings: never a plain value in a deployment file. */
export const SECRET_ENV = [
  'NATS_NKEY_SEED',
  'SESSION_SECRET',
  'MODEL_API_KEY',
  'CLAUDE_API_KEY',
  'GITHUB_APP_ID',
  'GITHUB_APP_PRIVATE_KEY',
  'GITHUB_WEBHOOK_SECRET',
  'GITHUB_CLIENT_ID',
  'GITHUB_CLIENT_SECRET',
];
