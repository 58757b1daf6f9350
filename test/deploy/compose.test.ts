// deploy/compose cannot be started here (no Docker engine): its files are parsed and checked
// against the repository and against what each service reads.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ensureTool } from '../../deploy/local/tools.mjs';
import { knownEnv, readRepoFile, repoRoot, SECRET_ENV, serviceNames } from './support/repo.js';

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile?: string };
  command?: string[];
  environment?: Record<string, string | null>;
  volumes?: string[];
  secrets?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  ports?: string[];
}

const composeDir = join(repoRoot, 'deploy', 'compose');
// Compose files use YAML merge keys (`<<: *env`).
const compose = parse(readRepoFile('deploy/compose/compose.yaml'), { merge: true }) as {
  services: Record<string, ComposeService>;
  volumes: Record<string, unknown>;
};
const services = serviceNames();

describe('deploy/compose/compose.yaml', () => {
  it('runs NATS 2.12 with JetStream on a volume, fsyncing every write', () => {
    const nats = compose.services.nats!;
    expect(nats.image).toMatch(/^nats:2\.12\b/);
    expect(nats.command).toContain('-js');
    expect(nats.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
    const conf = readRepoFile('deploy/compose/nats.conf');
    expect(conf).toMatch(/store_dir:\s*\/data/);
    expect(conf).toMatch(/sync_interval:\s*always/);
    expect(nats.healthcheck).toBeDefined();
  });

  it('gives each service its own NATS key as a Compose secret, and NATS the users the admin CLI makes', () => {
    const secrets = (
      parse(readRepoFile('deploy/compose/compose.yaml')) as { secrets: Record<string, { file: string }> }
    ).secrets;
    for (const name of services) {
      const service = compose.services[name]!;
      expect(service.secrets, name).toEqual([`nats-${name}`]);
      expect(service.environment!.NATS_NKEY_SEED_FILE).toBe(`/run/secrets/nats-${name}`);
      expect(secrets[`nats-${name}`]!.file).toBe(`./nats-keys/${name}.seed`);
      expect(Object.keys(service.environment!).filter((v) => v === 'NATS_NKEY_SEED' || v === 'NATS_INSECURE')).toEqual(
        [],
      );
    }
    const nats = compose.services.nats!;
    expect(nats.volumes).toContain('./nats-keys/authorization.conf:/etc/nats/authorization.conf:ro');
    expect(readRepoFile('deploy/compose/nats.conf')).toMatch(/^include \.\/authorization\.conf$/m);

    // What `npm run admin -- nats keys --out deploy/compose/nats-keys` makes, with nats.conf beside it,
    // is a configuration nats-server accepts.
    const dir = mkdtempSync(join(tmpdir(), 'threadwork-compose-nats-'));
    try {
      const keys = join(dir, 'nats-keys');
      const made = spawnSync(
        process.execPath,
        [join(repoRoot, 'services', 'gateway', 'dist', 'admin.js'), 'nats', 'keys', '--out', keys],
        { encoding: 'utf8' },
      );
      expect(made.status, made.stderr).toBe(0);
      expect(statSync(keys).mode & 0o777).toBe(0o700);
      for (const name of services)
        expect(readFileSync(join(keys, `${name}.seed`), 'utf8')).toMatch(/^SU[A-Z2-7]{56}\n$/);
      writeFileSync(
        join(keys, 'nats.conf'),
        readRepoFile('deploy/compose/nats.conf').replace('/data', join(dir, 'js')),
      );
      const check = spawnSync(ensureTool('nats-server'), ['-t', '-c', join(keys, 'nats.conf')], { encoding: 'utf8' });
      expect(check.status, check.stderr + check.stdout).toBe(0);
      // Run again, it keeps the keys it made.
      const before = readFileSync(join(keys, 'runner.seed'), 'utf8');
      expect(
        spawnSync(process.execPath, [
          join(repoRoot, 'services', 'gateway', 'dist', 'admin.js'),
          'nats',
          'keys',
          '--out',
          keys,
        ]).status,
      ).toBe(0);
      expect(readFileSync(join(keys, 'runner.seed'), 'utf8')).toBe(before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs MongoDB 7 as a one-node replica set that initiates itself', () => {
    const mongo = compose.services.mongo!;
    expect(mongo.image).toBe('mongo:7');
    expect(mongo.command).toEqual(expect.arrayContaining(['--replSet', 'rs0']));
    const check = mongo.healthcheck!.test.join(' ');
    expect(check).toContain("rs.initiate({ _id: 'rs0'");
    // The member's address is the one the services connect to.
    expect(check).toContain("host: 'mongo:27017'");
    expect(check).toContain('isWritablePrimary');
  });

  it('runs an OpenTelemetry collector that receives OTLP/HTTP and prints it', () => {
    const collector = compose.services['otel-collector']!;
    expect(collector.image).toMatch(/^otel\/opentelemetry-collector-contrib:\d+\.\d+\.\d+$/);
    const config = parse(readRepoFile('deploy/compose/otel-collector.yaml')) as {
      receivers: { otlp: { protocols: { http: { endpoint: string } } } };
      exporters: Record<string, unknown>;
      service: { pipelines: Record<string, { receivers: string[]; exporters: string[] }> };
    };
    expect(config.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    expect(Object.keys(config.service.pipelines).sort()).toEqual(['logs', 'metrics', 'traces']);
    for (const pipeline of Object.values(config.service.pipelines)) {
      expect(pipeline.receivers).toEqual(['otlp']);
      expect(pipeline.exporters).toEqual(['debug']);
    }
    expect(config.exporters.debug).toBeDefined();
  });

  it('mounts only files that exist, but for the NATS keys each deployment makes', () => {
    for (const [name, service] of Object.entries(compose.services)) {
      for (const volume of service.volumes ?? []) {
        const [source = ''] = volume.split(':');
        if (source.startsWith('./nats-keys/')) continue;
        if (source.startsWith('.') || source.startsWith('/')) {
          expect(existsSync(resolve(composeDir, source)), `${name}: ${source}`).toBe(true);
        } else {
          expect(compose.volumes, `${name}: named volume ${source}`).toHaveProperty(source);
        }
      }
    }
  });

  it.each(services)('builds %s from the Dockerfile and points it at NATS (and MongoDB but for the runner)', (name) => {
    const service = compose.services[name];
    expect(service, `service ${name}`).toBeDefined();
    const context = resolve(composeDir, service!.build!.context);
    expect(context).toBe(repoRoot);
    expect(statSync(join(context, service!.build!.dockerfile ?? 'Dockerfile')).isFile()).toBe(true);
    expect(service!.command).toEqual([`services/${name}/dist/main.js`]);

    const env = service!.environment!;
    expect(env.NATS_URL).toBe('nats://nats:4222');
    if (name === 'runner') {
      // It never uses the database, so it is not told where it is.
      expect(Object.keys(env).filter((v) => v.startsWith('MONGO_'))).toEqual([]);
    } else {
      // Its own database only (the service refuses a URL naming another's), overridable with a
      // connection string of its own user.
      expect(env.MONGO_DB_PREFIX).toBeTruthy();
      expect(env.MONGO_URL).toBe(
        `\${MONGO_URL_${name.toUpperCase()}:-mongodb://mongo:27017/${env.MONGO_DB_PREFIX}_${name}?replicaSet=rs0}`,
      );
    }
    expect(env.OTEL_EXPORTER_OTLP_ENDPOINT).toBe('http://otel-collector:4318');
    expect(Object.keys(service!.depends_on ?? {})).toEqual(expect.arrayContaining(['nats', 'mongo']));
    expect(service!.depends_on!.mongo!.condition).toBe('service_healthy');
    expect(service!.healthcheck).toBeDefined();

    // Every variable is one the service reads; secrets come from the caller's shell, never literally.
    const known = knownEnv(name);
    for (const [variable, value] of Object.entries(env)) {
      expect(known.has(variable), `${name} reads ${variable}`).toBe(true);
      if (SECRET_ENV.includes(variable))
        expect(value ?? '', `${name}: ${variable}`).toMatch(/^(\$\{[A-Z_]+(:\?[^}]*)?\})?$/);
    }
  });

  it('has the runner serve the harnesses threads and runs list, from one value', () => {
    const harnesses = ['threads', 'runs', 'runner'].map((name) => compose.services[name]!.environment!.HARNESSES);
    expect(harnesses).toEqual(['${HARNESSES:-codex}', '${HARNESSES:-codex}', '${HARNESSES:-codex}']);
    for (const name of services.filter((n) => !['threads', 'runs', 'runner'].includes(n))) {
      expect(compose.services[name]!.environment!.HARNESSES, name).toBeUndefined();
    }
  });

  it('passes both model endpoints and their keys through to the runner only, never with a value', () => {
    const runner = compose.services.runner!.environment!;
    for (const name of ['MODEL_BASE_URL', 'MODEL_API_KEY', 'CLAUDE_BASE_URL', 'CLAUDE_API_KEY']) {
      expect(runner, name).toHaveProperty(name, null);
      for (const other of services.filter((n) => n !== 'runner')) {
        expect(compose.services[other]!.environment!, `${other}: ${name}`).not.toHaveProperty(name);
      }
    }
  });

  it('probes each service where it serves its health endpoints', () => {
    for (const name of services) {
      const service = compose.services[name]!;
      const env = service.environment!;
      const port = name === 'gateway' ? env.PORT : env.HEALTH_PORT;
      expect(Number(port), name).toBeGreaterThan(0);
      expect(service.healthcheck!.test.join(' '), name).toContain(`http://127.0.0.1:${port}/readyz`);
    }
    expect(compose.services.gateway!.environment!.SESSION_SECRET).toMatch(/^\$\{SESSION_SECRET:\?/);
  });

  it('gives the runner a sandbox volume and the local repositories at the path repohost serves them from', () => {
    const runner = compose.services.runner!;
    const repohost = compose.services.repohost!;
    const sandboxRoot = runner.environment!.SANDBOX_ROOT!;
    expect(runner.volumes?.some((v) => v.endsWith(`:${sandboxRoot}`))).toBe(true);
    const reposDir = repohost.environment!.REPOHOST_LOCAL_DIR!;
    const mount = repohost.volumes!.find((v) => v.endsWith(`:${reposDir}`));
    expect(mount).toBeDefined();
    expect(runner.volumes).toContain(mount);
  });
});
